"""Op cases of the indexing family, with TensorFlow's numbers, for the shared harness.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_index.py

Writes three families through op_cases.write_family (tests/tf/corpus/ops/<family>.pb and .json),
which tests/it/op_cases.rs checks on the simulator and on PJRT:
  segment  UnsortedSegmentSum/Max/Min/Prod (the sorted Segment*V2 ops have no TensorFlow CPU
           kernel, which the harness needs for every case);
  scatter  TensorScatterAdd/Sub/Max/Min/Update, ScatterNd, GatherNd, ResourceScatterMul/Div/Max/
           Min, ResourceScatterNdAdd/Sub/Update and the optimizers ResourceApplyProximalGradientDescent,
           ProximalAdagrad, AdagradDA, AddSign and PowerSign;
  index    Concat, Gather, Reverse, Split, SplitV, Unpack, StridedSliceGrad, Roll, LinSpace, Empty,
           Bucketize, LowerBound, UpperBound, TopKV2 and ReverseSequence.
Segments are never empty for a maximum or minimum: TensorFlow's CPU kernel fills an empty one with
the type's lowest value and its XLA bridge with -inf, which the JSON cannot carry.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import op_cases  # noqa: E402
from op_cases import Case, tf  # noqa: E402

i32 = np.int32
i64 = np.int64


def f32(values, shape=None):
    a = np.asarray(values, dtype=np.float32)
    return a.reshape(shape) if shape else a


def f64(values, shape=None):
    a = np.asarray(values, dtype=np.float64)
    return a.reshape(shape) if shape else a


def seq(n, shape, dtype=np.float32, scale=0.25, offset=-1.0):
    """Distinct values without ties: a fixed permutation of a ramp."""
    ramp = offset + scale * np.arange(n)
    order = np.random.RandomState(n).permutation(n)
    return ramp[order].reshape(shape).astype(dtype)


def segment_cases():
    ids5 = np.array([0, 2, 0, -1, 2], dtype=i32)
    cases = [
        Case(
            "unsorted_segment_sum_negative_id",
            "UnsortedSegmentSum",
            inputs={"data": seq(15, (5, 3))},
            consts={"segment_ids": ids5, "num_segments": np.array(4, dtype=i32)},
            grad=True,
        ),
        Case(
            "unsorted_segment_max_f32",
            "UnsortedSegmentMax",
            inputs={"data": f32([1, 5, 2, 3, 5, 0, 1, 7, 4, 2, 6, -1, 0.5, 0.5, 0.5], (5, 3))},
            consts={"segment_ids": np.array([0, 1, 0, 2, 1], dtype=i32), "num_segments": np.array(3, dtype=i32)},
            grad=True,
        ),
        Case(
            "unsorted_segment_max_i64_ids",
            "UnsortedSegmentMax",
            inputs={"data": seq(12, (2, 3, 2))},
            consts={"segment_ids": np.array([[0, 1, 0], [1, -1, 0]], dtype=i64), "num_segments": np.array(2, dtype=i64)},
            grad=True,
        ),
        Case(
            "unsorted_segment_min_f64",
            "UnsortedSegmentMin",
            inputs={"data": f64([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], (4, 3))},
            consts={"segment_ids": np.array([1, 0, 1, 0], dtype=i32), "num_segments": np.array(2, dtype=i32)},
            grad=True,
        ),
        Case(
            "unsorted_segment_min_i32",
            "UnsortedSegmentMin",
            inputs={"data": np.array([[4, -2], [7, 1], [-3, 9]], dtype=i32)},
            consts={"segment_ids": np.array([1, 1, 0], dtype=i32), "num_segments": np.array(2, dtype=i32)},
        ),
        Case(
            "unsorted_segment_prod_zeros",
            "UnsortedSegmentProd",
            # Segment 0 holds one zero per column 0, segment 1 two zeros in column 1; segment 3 is empty.
            inputs={"data": f32([0, 2, 1.5, 0, -2, 3, 0.5, 1, 4, 0, 2, -1], (4, 3))},
            consts={"segment_ids": np.array([0, 1, 0, 1], dtype=i32), "num_segments": np.array(4, dtype=i32)},
            grad=True,
        ),
        Case(
            "unsorted_segment_prod_f64",
            "UnsortedSegmentProd",
            inputs={"data": f64([1.5, -0.5, 2, 0.25, 3, -1.25], (6,))},
            consts={"segment_ids": np.array([2, 0, 2, -1, 0, 2], dtype=i32), "num_segments": np.array(3, dtype=i32)},
            grad=True,
        ),
    ]
    return cases


def scatter_cases():
    rows = np.array([[1], [3], [0]], dtype=i32)
    cases = [
        Case(
            "tensor_scatter_add_rows",
            "TensorScatterAdd",
            inputs={"tensor": seq(12, (4, 3)), "updates": seq(9, (3, 3), offset=0.5)},
            consts={"indices": np.array([[1], [3], [1]], dtype=i32)},
            grad=True,
        ),
        Case(
            "tensor_scatter_update_elements",
            "TensorScatterUpdate",
            inputs={"tensor": seq(12, (4, 3)), "updates": f32([10, 20, 30])},
            consts={"indices": np.array([[0, 1], [2, 2], [3, 0]], dtype=i64)},
            grad=True,
        ),
        Case(
            "tensor_scatter_sub_rows",
            "TensorScatterSub",
            inputs={"tensor": seq(12, (4, 3)), "updates": seq(9, (3, 3), offset=0.5)},
            consts={"indices": np.array([[1], [3], [1]], dtype=i32)},
            grad=True,
        ),
        Case(
            "tensor_scatter_max_ties",
            "TensorScatterMax",
            # Row 1 is updated twice; some updates tie with the tensor, some lose to it.
            inputs={
                "tensor": f32([1, 2, 3, 4, 5, 6, 7, 8, 9], (3, 3)),
                "updates": f32([4, 9, 5, 0, 0, 10, 4, 1, 7], (3, 3)),
            },
            consts={"indices": np.array([[1], [0], [1]], dtype=i32)},
            grad=True,
        ),
        Case(
            "tensor_scatter_min_f64_elements",
            "TensorScatterMin",
            inputs={"tensor": f64([1, 2, 3, 4, 5, 6], (2, 3)), "updates": f64([0.5, 6, 2, -1])},
            consts={"indices": np.array([[0, 0], [1, 2], [0, 1], [1, 0]], dtype=i32)},
            grad=True,
        ),
        Case(
            "tensor_scatter_max_i32",
            "TensorScatterMax",
            inputs={"tensor": np.array([3, -1, 4, 1], dtype=i32), "updates": np.array([0, 5, 2], dtype=i32)},
            consts={"indices": np.array([[0], [1], [1]], dtype=i32)},
        ),
        Case(
            "scatter_nd_rows",
            "ScatterNd",
            inputs={"updates": seq(9, (3, 3))},
            consts={"indices": rows, "shape": np.array([5, 3], dtype=i32)},
            grad=True,
        ),
        Case(
            "gather_nd_elements",
            "GatherNd",
            inputs={"params": seq(24, (2, 3, 4))},
            consts={"indices": np.array([[0, 2], [1, 0], [0, 2]], dtype=i64)},
            grad=True,
        ),
        Case(
            "resource_scatter_mul_repeated",
            "ResourceScatterMul",
            variables={"resource": seq(8, (4, 2))},
            inputs={"updates": f32([2, -1, 0.5, 3, 4, 4], (3, 2))},
            consts={"indices": np.array([2, 0, 2], dtype=i32)},
            grad=False,
        ),
        Case(
            "resource_scatter_div_f64",
            "ResourceScatterDiv",
            variables={"resource": seq(6, (3, 2), dtype=np.float64)},
            inputs={"updates": f64([2, -4, 0.5, 8], (2, 1, 2))},
            consts={"indices": np.array([[1], [2]], dtype=i64)},
            grad=False,
        ),
        Case(
            "resource_scatter_max",
            "ResourceScatterMax",
            variables={"resource": f32([1, 5, -2, 0], (2, 2))},
            inputs={"updates": f32([3, 3, -5, 1, 0, 9], (3, 2))},
            consts={"indices": np.array([0, 1, 1], dtype=i32)},
            grad=False,
        ),
        Case(
            "resource_scatter_min_i32",
            "ResourceScatterMin",
            variables={"resource": np.array([4, -1, 7], dtype=i32)},
            inputs={"updates": np.array([2, 0, 9], dtype=i32)},
            consts={"indices": np.array([0, 1, 2], dtype=i32)},
            grad=False,
        ),
        Case(
            "resource_scatter_nd_add",
            "ResourceScatterNdAdd",
            variables={"ref": seq(12, (3, 4))},
            inputs={"updates": f32([1, 2, 3])},
            consts={"indices": np.array([[0, 1], [2, 3], [0, 1]], dtype=i32)},
            grad=False,
        ),
        Case(
            "resource_scatter_nd_sub_rows",
            "ResourceScatterNdSub",
            variables={"ref": seq(12, (3, 4), dtype=np.float64)},
            inputs={"updates": seq(8, (2, 4), dtype=np.float64)},
            consts={"indices": np.array([[2], [0]], dtype=i64)},
            grad=False,
        ),
        Case(
            "resource_scatter_nd_update",
            "ResourceScatterNdUpdate",
            variables={"ref": seq(6, (2, 3))},
            inputs={"updates": f32([7, 8])},
            consts={"indices": np.array([[1, 2], [0, 0]], dtype=i32)},
            grad=False,
        ),
        Case(
            "apply_proximal_gd_l1",
            "ResourceApplyProximalGradientDescent",
            variables={"var": f32([0.5, -0.2, 0.05, 1.5, -1.0, 0.0])},
            inputs={"delta": f32([1.0, -2.0, 0.5, 0.25, -0.5, 3.0])},
            consts={"alpha": f32(0.1), "l1": f32(0.2), "l2": f32(0.5)},
            grad=False,
        ),
        Case(
            "apply_proximal_gd_f64_no_l1",
            "ResourceApplyProximalGradientDescent",
            variables={"var": seq(4, (2, 2), dtype=np.float64)},
            inputs={"delta": seq(4, (2, 2), dtype=np.float64, offset=0.5)},
            consts={"alpha": f64(0.3), "l1": f64(0.0), "l2": f64(0.25)},
            grad=False,
        ),
        Case(
            "apply_proximal_adagrad",
            "ResourceApplyProximalAdagrad",
            variables={"var": f32([0.5, -0.2, 0.05, 1.5]), "accum": f32([0.1, 0.2, 0.3, 0.4])},
            inputs={"grad": f32([1.0, -2.0, 0.5, -0.25])},
            consts={"lr": f32(0.1), "l1": f32(0.05), "l2": f32(0.2)},
            grad=False,
        ),
        Case(
            "apply_adagrad_da",
            "ResourceApplyAdagradDA",
            variables={"var": f32([0.5, -0.2, 0.05, 1.5]), "gradient_accumulator": f32([0.1, -0.3, 0.0, 2.0]),
                       "gradient_squared_accumulator": f32([0.1, 0.2, 0.3, 0.4])},
            inputs={"grad": f32([1.0, -2.0, 0.5, -0.25])},
            consts={"lr": f32(0.1), "l1": f32(0.3), "l2": f32(0.2), "global_step": np.array(3, dtype=i64)},
            grad=False,
        ),
        Case(
            "apply_adagrad_da_f64_no_l1",
            "ResourceApplyAdagradDA",
            variables={"var": f64([0.5, -0.2]), "gradient_accumulator": f64([0.1, -0.3]),
                       "gradient_squared_accumulator": f64([0.1, 0.2])},
            inputs={"grad": f64([1.0, -2.0])},
            consts={"lr": f64(0.1), "l1": f64(0.0), "l2": f64(0.2), "global_step": np.array(2, dtype=i64)},
            grad=False,
        ),
        Case(
            "apply_add_sign",
            "ResourceApplyAddSign",
            variables={"var": f32([0.5, -0.2, 0.05, 1.5]), "m": f32([0.1, 0.3, -0.2, 0.0])},
            inputs={"grad": f32([1.0, -2.0, 0.5, 0.0])},
            consts={"lr": f32(0.1), "alpha": f32(1.0), "sign_decay": f32(0.9), "beta": f32(0.9)},
            grad=False,
        ),
        Case(
            "apply_power_sign",
            "ResourceApplyPowerSign",
            variables={"var": f64([0.5, -0.2, 0.05, 1.5]), "m": f64([0.1, 0.3, -0.2, 0.0])},
            inputs={"grad": f64([1.0, -2.0, 0.5, -0.5])},
            consts={"lr": f64(0.1), "logbase": f64(np.log(2.0)), "sign_decay": f64(0.5), "beta": f64(0.9)},
            grad=False,
        ),
    ]
    return cases


def index_cases():
    cases = [
        Case(
            "concat_axis1",
            "Concat",
            inputs={"values": [seq(4, (2, 2)), seq(6, (2, 3), offset=2.0)]},
            consts={"concat_dim": np.array(1, dtype=i32)},
            grad=True,
        ),
        Case(
            "concat_negative_axis_f64",
            "Concat",
            inputs={"values": [seq(n, (n // 3, 3), dtype=np.float64) for n in (3, 6, 3)]},
            consts={"concat_dim": np.array(-2, dtype=i32)},
            grad=True,
        ),
        Case(
            "gather_repeated_rows",
            "Gather",
            inputs={"params": seq(12, (4, 3))},
            consts={"indices": np.array([[3, 0], [3, 1]], dtype=i32)},
            grad=True,
        ),
        Case(
            "gather_i64_indices_f64",
            "Gather",
            inputs={"params": seq(5, (5,), dtype=np.float64)},
            consts={"indices": np.array([4, 4, 2], dtype=i64)},
            grad=True,
        ),
        Case(
            "reverse_dims",
            "Reverse",
            inputs={"tensor": seq(12, (2, 3, 2))},
            consts={"dims": np.array([True, False, True])},
            grad=True,
        ),
        Case(
            "reverse_i32",
            "Reverse",
            inputs={"tensor": np.array([[1, 2, 3], [4, 5, 6]], dtype=i32)},
            consts={"dims": np.array([False, True])},
        ),
        Case(
            "split_axis1",
            "Split",
            inputs={"value": seq(12, (2, 6))},
            consts={"axis": np.array(1, dtype=i32)},
            attrs={"num_split": 3},
            grad=True,
        ),
        Case(
            "split_v_axis0",
            "SplitV",
            inputs={"value": seq(15, (5, 3))},
            consts={"size_splits": np.array([2, -1, 1], dtype=i32), "axis": np.array(0, dtype=i32)},
            attrs={"num_split": 3},
            grad=True,
        ),
        Case(
            "unpack_axis1",
            "Unpack",
            inputs={"value": seq(12, (2, 3, 2))},
            attrs={"num": 3, "axis": 1},
            grad=True,
        ),
        Case(
            "unpack_f64_negative_axis",
            "Unpack",
            inputs={"value": seq(6, (3, 2), dtype=np.float64)},
            attrs={"num": 2, "axis": -1},
            grad=True,
        ),
        Case(
            "strided_slice_grad_masks",
            "StridedSliceGrad",
            inputs={"dy": seq(12, (4, 3))},
            consts={
                "shape": np.array([4, 6], dtype=i32),
                "begin": np.array([0, 5], dtype=i32),
                "end": np.array([0, 0], dtype=i32),
                "strides": np.array([1, -2], dtype=i32),
            },
            # Every row (end_mask); columns 5, 3, 1.
            attrs={"begin_mask": 0, "end_mask": 1, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0},
            grad=True,
        ),
        Case(
            "strided_slice_grad_shrink",
            "StridedSliceGrad",
            inputs={"dy": seq(4, (4,), dtype=np.float64)},
            consts={
                "shape": np.array([3, 4], dtype=i64),
                "begin": np.array([1, 0], dtype=i64),
                "end": np.array([2, 4], dtype=i64),
                "strides": np.array([1, 1], dtype=i64),
            },
            attrs={"shrink_axis_mask": 1},
            grad=True,
        ),
        Case(
            "roll_two_axes",
            "Roll",
            inputs={"input": seq(12, (3, 4))},
            consts={"shift": np.array([1, -3], dtype=i32), "axis": np.array([0, 1], dtype=i32)},
            grad=True,
        ),
        Case(
            "roll_repeated_axis_i64",
            "Roll",
            inputs={"input": np.arange(5, dtype=i32)},
            consts={"shift": np.array([2, 4], dtype=i64), "axis": np.array([0, -1], dtype=i64)},
        ),
        Case(
            "lin_space_f32",
            "LinSpace",
            inputs={"start": f32(-1.5), "stop": f32(2.0)},
            consts={"num": np.array(7, dtype=i32)},
            grad=False,
        ),
        Case(
            "lin_space_f64_single",
            "LinSpace",
            inputs={"start": f64(0.25), "stop": f64(3.0)},
            consts={"num": np.array(1, dtype=i64)},
            grad=False,
        ),
        Case(
            "empty_initialized",
            "Empty",
            consts={"shape": np.array([2, 3], dtype=i32)},
            attrs={"dtype": tf.float32, "init": True},
            grad=False,
        ),
        Case(
            "bucketize_f32",
            "Bucketize",
            inputs={"input": f32([-2, -1, -0.5, 0, 0.25, 0.5, 1.5, 2, 3], (3, 3))},
            attrs={"boundaries": [-1.0, 0.0, 0.5, 2.0]},
            grad=False,
        ),
        Case(
            "bucketize_i64",
            "Bucketize",
            inputs={"input": np.array([-3, 0, 1, 2, 7], dtype=i64)},
            attrs={"boundaries": [0.0, 1.5, 2.0]},
            grad=False,
        ),
        Case(
            "lower_bound_ties",
            "LowerBound",
            inputs={"sorted_inputs": f32([0, 1, 1, 2, 5, -3, -1, 0, 0, 4], (2, 5)), "values": f32([1, -1, 6, 0, -4, 4], (2, 3))},
            grad=False,
        ),
        Case(
            "upper_bound_i64_out",
            "UpperBound",
            inputs={"sorted_inputs": np.array([[0, 1, 1, 2, 5], [-3, -1, 0, 0, 4]], dtype=i32),
                    "values": np.array([[1, -1, 6], [0, -4, 4]], dtype=i32)},
            attrs={"out_type": tf.int64},
            grad=False,
        ),
        Case(
            "top_k_ties",
            "TopKV2",
            inputs={"input": f32([3, 1, 3, 2, 3, 0.5, -1, 4, 4, 2], (2, 5))},
            consts={"k": np.array(3, dtype=i32)},
            attrs={"sorted": True},
            grad=True,
        ),
        Case(
            "top_k_f64_3d",
            "TopKV2",
            inputs={"input": seq(16, (2, 2, 4), dtype=np.float64)},
            consts={"k": np.array(2, dtype=i32)},
            attrs={"sorted": True},
            grad=True,
        ),
        Case(
            # TensorFlow's own gradient of TopKV2 fails for int64 indices (it adds int32 offsets).
            "top_k_i64_indices",
            "TopKV2",
            inputs={"input": seq(8, (2, 4))},
            consts={"k": np.array(1, dtype=i64)},
            attrs={"sorted": True, "index_type": tf.int64},
            grad=False,
        ),
        Case(
            "top_k_i32",
            "TopKV2",
            inputs={"input": np.array([5, -2, 7, 7, 0], dtype=i32)},
            consts={"k": np.array(4, dtype=i32)},
            attrs={"sorted": True},
        ),
        Case(
            "reverse_sequence_time_major",
            "ReverseSequence",
            inputs={"input": seq(24, (4, 3, 2))},
            consts={"seq_lengths": np.array([4, 0, 2], dtype=i64)},
            attrs={"seq_dim": 0, "batch_dim": 1},
            grad=True,
        ),
        Case(
            "reverse_sequence_batch_major_i32_lengths",
            "ReverseSequence",
            inputs={"input": seq(10, (2, 5), dtype=np.float64)},
            consts={"seq_lengths": np.array([3, 5], dtype=i32)},
            attrs={"seq_dim": 1, "batch_dim": 0},
            grad=True,
        ),
    ]
    return cases


if __name__ == "__main__":
    op_cases.write_family("segment", segment_cases())
    op_cases.write_family("scatter", scatter_cases())
    op_cases.write_family("index", index_cases())
