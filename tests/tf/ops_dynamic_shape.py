"""Writes tests/tf/corpus/ops/dynamic_shape.{pbtxt,json}: TensorFlow's numbers for the ops whose
output size depends on their operands' values.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_dynamic_shape.py

Unique (f32, i32 and i64 values, i32 and i64 indices), UniqueV2 along an axis and with an empty axis
(a vector taken as it is), DynamicPartition (a vector and a matrix of partitions, a partition left
empty) with its gradient (TensorFlow's, through ParallelDynamicStitch; the loss weighs each
partition's sum of squares over its rows, whose shape is fixed; and with fed partitions, whose
output sizes only the values give), NonMaxSuppressionV3 and
V4 (a score threshold, a bound that stops the selection, boxes given with their corners in either
order, V4 padded and not), and reductions of a Unique and a NonMaxSuppressionV3 output over its
length (on PJRT they read a padded buffer inside the program). The boxes' overlaps stay away from the IoU threshold and their scores are
distinct, so no comparison decides on a rounding. TensorFlow's XLA bridge refuses V3 with a bound
above the number of boxes and V4 without padding, and pads V4 with the unselected indices where the
CPU kernel pads with zeros. Checked by tests/it/op_cases.rs
(`op_cases::dynamic_shape`).
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case


def values(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, size=shape).astype(dtype)


def i32(v):
    return np.array(v, dtype=np.int32)


BOXES = np.array([
    [0.0, 0.0, 1.0, 1.0],
    [0.0, 0.1, 1.0, 1.1],      # overlaps box 0 by 0.82
    [0.0, -0.1, 1.0, 0.9],     # overlaps box 0 by 0.82
    [0.0, 10.0, 1.0, 11.0],
    [1.0, 10.1, 0.0, 11.1],    # box 3 shifted, corners given in the other order
    [0.0, 100.0, 1.0, 101.0],
    [0.5, 0.5, 1.5, 1.5],      # overlaps box 0 by 0.14
], np.float32)
SCORES = np.array([0.9, 0.75, 0.6, 0.95, 0.5, 0.3, 0.85], np.float32)


def nms(name, op, max_output, iou, score_threshold, attrs=None, dtype=np.float32, post=None):
    return Case(name, op, inputs={"boxes": BOXES.astype(dtype), "scores": SCORES.astype(dtype)},
                consts={"max_output_size": i32(max_output), "iou_threshold": np.array(iou, dtype),
                        "score_threshold": np.array(score_threshold, dtype)},
                attrs=attrs or {}, grad=False, post=post)


def with_reduction(reduce):
    """The op's outputs and a reduction of output 0 over its whole length (inside the program on
    PJRT, where output 0 is a padded buffer: the reduction must not see the padding)."""
    return lambda outs: list(outs) + [reduce(outs[0])]


def squares(outs):
    """The partitions, and the sum of each one's squares over its rows (fixed shapes, so the loss
    reaches every row with a weight of its own)."""
    return list(outs) + [tf.reduce_sum(o * o, axis=0) for o in outs if o.dtype.is_floating]


cases = [
    Case("unique_f32", "Unique", inputs={"x": np.array([3, 1, 3, 2, 1, 1, 5, 2], np.float32)}),
    Case("unique_max", "Unique", inputs={"x": np.array([-3, -1, -3, -2, -1], np.float32)},
         grad=False, post=with_reduction(tf.reduce_max)),
    Case("unique_i32", "Unique", inputs={"x": i32([4, 4, -1, 0, -1, 7, 4])}),
    Case("unique_i64_idx", "Unique", inputs={"x": np.array([9, 8, 9, 9, 1], np.int64)},
         attrs={"out_idx": np.int64}),
    Case("unique_v2_axis0", "UniqueV2", inputs={"x": i32([[1, 2], [3, 4], [1, 2], [0, 0], [3, 4]])},
         consts={"axis": i32([0])}),
    Case("unique_v2_axis1", "UniqueV2",
         inputs={"x": np.array([[1, 0, 1, 2], [5, 6, 5, 7]], np.float32)}, consts={"axis": i32([1])},
         attrs={"out_idx": np.int64}),
    Case("unique_v2_empty_axis", "UniqueV2", inputs={"x": i32([2, 3, 3, 9, 2])},
         consts={"axis": np.zeros([0], np.int64)}),
    Case("dynamic_partition", "DynamicPartition",
         inputs={"data": values([6], seed=1)}, consts={"partitions": i32([1, 0, 2, 1, 0, 1])},
         attrs={"num_partitions": 3}, post=squares),
    Case("dynamic_partition_rows", "DynamicPartition",
         inputs={"data": values([2, 3, 2], seed=2)}, consts={"partitions": i32([[0, 2, 0], [2, 2, 0]])},
         attrs={"num_partitions": 4}, post=squares),
    Case("dynamic_partition_f64", "DynamicPartition",
         inputs={"data": values([5, 2], np.float64, seed=3)}, consts={"partitions": i32([1, 1, 0, 1, 0])},
         attrs={"num_partitions": 2}, post=squares),
    # Partitions fed, not constant: on PJRT each output is a padded buffer trimmed to its size.
    Case("dynamic_partition_fed", "DynamicPartition",
         inputs={"data": values([5, 2], seed=4), "partitions": i32([2, 0, 2, 2, 0])},
         attrs={"num_partitions": 3}, grad=False),
    Case("dynamic_partition_int", "DynamicPartition",
         inputs={"data": i32([5, 6, 7, 8])}, consts={"partitions": i32([1, 0, 1, 1])},
         attrs={"num_partitions": 2}),
    nms("nms_v3", "NonMaxSuppressionV3", 10, 0.5, -1.0),
    nms("nms_v3_sum", "NonMaxSuppressionV3", 6, 0.5, 0.4, post=with_reduction(tf.reduce_sum)),
    nms("nms_v3_bounded", "NonMaxSuppressionV3", 2, 0.5, 0.0),
    nms("nms_v3_score_threshold", "NonMaxSuppressionV3", 10, 0.1, 0.55),
    nms("nms_v4_padded", "NonMaxSuppressionV4", 6, 0.5, 0.4, attrs={"pad_to_max_output_size": True}),
    nms("nms_v4", "NonMaxSuppressionV4", 6, 0.5, 0.4),
    nms("nms_v4_f16", "NonMaxSuppressionV4", 5, 0.5, 0.0, attrs={"pad_to_max_output_size": True},
        dtype=np.float16),
]

op_cases.write_family("dynamic_shape", cases)
