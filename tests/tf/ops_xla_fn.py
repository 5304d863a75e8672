"""Writes tests/tf/corpus/ops/xla_fn.{pbtxt,json}: the XLA ops whose attrs are functions (XlaReduce,
XlaVariadicReduce(V2), XlaReduceWindow, XlaSelectAndScatter, XlaVariadicSort, XlaIf, XlaWhile) and
the sorts XlaSort and XlaKeyValueSort, with the values of TensorFlow's XLA bridge (TensorFlow has no
CPU kernel for them) and no gradients (TensorFlow registers none).

Each function attr is a concrete `tf.function`: its body goes to the GraphDef's library. The
reducers include bodies other than a single add or max (a `Select` of a comparison, a product, the
arg-max pair) so the general call path is what runs.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_xla_fn.py
"""

import numpy as np
import tensorflow as tf

from tensorflow.core.framework import attr_value_pb2

import op_cases
from op_cases import Case


def fn(body, *dtypes):
    """The concrete function of `body` on scalars of `dtypes`."""
    return tf.function(body).get_concrete_function(*[tf.TensorSpec([], d) for d in dtypes])


def rand(seed, *shape, dtype=np.float32, scale=3.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=shape).astype(dtype)


F32, F64, I32 = tf.float32, tf.float64, tf.int32
BF16, F16 = tf.bfloat16, tf.float16
NP_BF16 = BF16.as_numpy_dtype


# Named functions, not lambdas: a function's name is its library name (`__inference_<name>_<k>`).
def add(a, b):
    return a + b


def select_max(a, b):
    """A maximum written as a comparison and a select: not one of the common single-op bodies."""
    return tf.where(a > b, a, b)


def mul(a, b):
    return a * b


def ge(a, b):
    return a >= b


def gt(a, b):
    return a > b


def argmax_pair(a, i, b, j):
    """The larger value with its index; on a tie the smaller index (order-independent)."""
    take_a = tf.logical_or(a > b, tf.logical_and(tf.equal(a, b), i < j))
    return tf.where(take_a, a, b), tf.where(take_a, i, j)


def sum_and_max(a1, a2, b1, b2):
    """XlaVariadicReduce (V1): the N accumulators, then the N values."""
    return a1 + b1, tf.maximum(a2, b2)


def keys_less(k1, k2, v1, v2):
    """A sort comparator gets two scalars per operand: (lhs_0, rhs_0, lhs_1, rhs_1)."""
    return k1 < k2


def then_branch(a, b):
    return a * b, a + 1.0


def else_branch(a, b):
    return a - b, a * 2.0


def loop_cond(i, x):
    return i < 4


def loop_body(i, x):
    return i + 1, tf.matmul(x, x) * 0.5 + tf.cast(i, F32)


ADD_F32 = fn(add, F32, F32)
ADD_F64 = fn(add, F64, F64)
# Small whole numbers in 16-bit floats: every partial sum is exact, whatever the precision XLA adds in.
ADD_BF16 = fn(add, BF16, BF16)
MAX_F16 = fn(tf.maximum, F16, F16)
MAX_F64 = fn(tf.maximum, F64, F64)
SELECT_MAX_F32 = fn(select_max, F32, F32)
MUL_I32 = fn(mul, I32, I32)
GE_F32 = fn(ge, F32, F32)
GE_F64 = fn(ge, F64, F64)
ARGMAX = fn(argmax_pair, F32, I32, F32, I32)
SUM_AND_MAX = fn(sum_and_max, F32, F32, F32, F32)
LT_KEYS = fn(keys_less, F32, F32, F32, F32)
GT_I32 = fn(gt, I32, I32)

VEC3 = tf.TensorSpec([3], F32)
# TensorFlow's XlaIf kernel reads the result shapes from an `output_shapes` attr its op does not declare.
IF_SHAPES = {"output_shapes": attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(
    shape=[tf.TensorShape([3]).as_proto()] * 2))}
THEN = tf.function(then_branch).get_concrete_function(VEC3, VEC3)
ELSE = tf.function(else_branch).get_concrete_function(VEC3, VEC3)
LOOP_SPECS = (tf.TensorSpec([], I32), tf.TensorSpec([2, 2], F32))
LOOP_COND = tf.function(loop_cond).get_concrete_function(*LOOP_SPECS)
LOOP_BODY = tf.function(loop_body).get_concrete_function(*LOOP_SPECS)

# Keys with repeats, so a stable sort and an unstable one could differ.
KEYS = np.array([[1.0, 3.0, 2.0], [0.5, 3.0, 2.0], [1.0, -1.0, 2.0], [0.5, 0.0, -4.0]], np.float32)

CASES = [
    Case("reduce_sum_rows", "XlaReduce", inputs={"input": rand(1, 3, 4)}, consts={"init_value": np.float32(0.0)},
         attrs={"dimensions_to_reduce": [1], "reducer": ADD_F32}),
    Case("reduce_max_all_f64", "XlaReduce", inputs={"input": rand(2, 2, 3, dtype=np.float64)},
         consts={"init_value": np.float64(-np.inf)}, attrs={"dimensions_to_reduce": [0, 1], "reducer": MAX_F64}),
    Case("reduce_select_max", "XlaReduce", inputs={"input": rand(3, 2, 3, 2)}, consts={"init_value": np.float32(-2.0)},
         attrs={"dimensions_to_reduce": [0, 2], "reducer": SELECT_MAX_F32}),
    Case("reduce_prod_i32", "XlaReduce", inputs={"input": np.array([[1, -2, 3], [2, 2, -1]], np.int32)},
         consts={"init_value": np.int32(1)}, attrs={"dimensions_to_reduce": [0], "reducer": MUL_I32}),
    Case("reduce_none", "XlaReduce", inputs={"input": rand(4, 2, 2)}, consts={"init_value": np.float32(0.5)},
         attrs={"dimensions_to_reduce": [], "reducer": ADD_F32}),
    Case("variadic_v2_argmax", "XlaVariadicReduceV2",
         inputs={"inputs": [np.array([[1.0, 4.0, 4.0, -1.0], [2.0, 2.0, 0.0, 7.0], [-3.0, -3.0, -5.0, -4.0]],
                                     np.float32),
                            np.tile(np.arange(4, dtype=np.int32), (3, 1))]},
         consts={"init_values": [np.float32(-np.inf), np.int32(0)]},
         attrs={"dimensions_to_reduce": [1], "reducer": ARGMAX}),
    Case("variadic_v1_sum_max", "XlaVariadicReduce", inputs={"input": [rand(5, 3, 2), rand(6, 3, 2)]},
         consts={"init_value": [np.float32(0.0), np.float32(-np.inf)]},
         attrs={"dimensions_to_reduce": [0], "reducer": SUM_AND_MAX}),
    Case("window_sum_padded", "XlaReduceWindow", inputs={"input": rand(7, 4, 5)},
         consts={"init_value": np.float32(0.0), "window_dimensions": np.array([2, 3], np.int32),
                 "window_strides": np.array([1, 2], np.int32), "base_dilations": np.array([1, 1], np.int32),
                 "window_dilations": np.array([1, 1], np.int32),
                 "padding": np.array([[0, 1], [1, 1]], np.int32)},
         attrs={"computation": ADD_F32}),
    Case("window_max_dilated_f64", "XlaReduceWindow", inputs={"input": rand(8, 5, 4, dtype=np.float64)},
         consts={"init_value": np.float64(-np.inf), "window_dimensions": np.array([2, 2], np.int64),
                 "window_strides": np.array([2, 1], np.int64), "base_dilations": np.array([1, 2], np.int64),
                 "window_dilations": np.array([2, 1], np.int64),
                 "padding": np.array([[1, 0], [0, 1]], np.int64)},
         attrs={"computation": MAX_F64}),
    Case("window_sum_f64_base_dilated", "XlaReduceWindow", inputs={"input": rand(9, 3, 3, dtype=np.float64)},
         consts={"init_value": np.float64(1.0), "window_dimensions": np.array([2, 2], np.int32),
                 "window_strides": np.array([1, 1], np.int32), "base_dilations": np.array([2, 1], np.int32),
                 "window_dilations": np.array([1, 1], np.int32),
                 "padding": np.array([[0, 0], [1, 0]], np.int32)},
         attrs={"computation": ADD_F64}),
    Case("select_scatter_tiles", "XlaSelectAndScatter",
         inputs={"operand": rand(10, 4, 6), "source": rand(11, 2, 2)},
         consts={"window_dimensions": np.array([2, 3], np.int32), "window_strides": np.array([2, 3], np.int32),
                 "padding": np.array([[0, 0], [0, 0]], np.int32), "init_value": np.float32(0.0)},
         attrs={"select": GE_F32, "scatter": ADD_F32}),
    Case("select_scatter_overlap_f64", "XlaSelectAndScatter",
         inputs={"operand": rand(12, 4, 6, dtype=np.float64), "source": rand(13, 4, 3, dtype=np.float64)},
         consts={"window_dimensions": np.array([3, 3], np.int64), "window_strides": np.array([1, 2], np.int64),
                 "padding": np.array([[1, 1], [1, 1]], np.int64), "init_value": np.float64(0.25)},
         attrs={"select": GE_F64, "scatter": ADD_F64}),
    Case("reduce_sum_bf16", "XlaReduce",
         inputs={"input": np.array([[1, -2, 3, 4], [0.5, 8, -1, 2]], NP_BF16)},
         consts={"init_value": np.array(0, NP_BF16)}, attrs={"dimensions_to_reduce": [1], "reducer": ADD_BF16}),
    Case("window_max_f16", "XlaReduceWindow", inputs={"input": rand(22, 3, 4, dtype=np.float16)},
         consts={"init_value": np.float16(-np.inf), "window_dimensions": np.array([2, 2], np.int32),
                 "window_strides": np.array([1, 2], np.int32), "base_dilations": np.array([1, 1], np.int32),
                 "window_dilations": np.array([1, 1], np.int32),
                 "padding": np.array([[0, 0], [0, 0]], np.int32)},
         attrs={"computation": MAX_F16}),
    Case("sort_f32", "XlaSort", inputs={"input": rand(14, 3, 5)}),
    Case("sort_bf16", "XlaSort", inputs={"input": rand(23, 2, 4).astype(NP_BF16)}),
    Case("key_value_sort_i32_f64", "XlaKeyValueSort",
         inputs={"keys": np.array([7, -3, 0, 12, 5], np.int32), "values": rand(24, 5, dtype=np.float64)}),
    Case("sort_i32", "XlaSort", inputs={"input": np.array([5, -2, 9, 0, -2, 7], np.int32)}),
    Case("key_value_sort", "XlaKeyValueSort",
         inputs={"keys": rand(15, 2, 5), "values": np.arange(10, dtype=np.int32).reshape(2, 5)}),
    Case("variadic_sort_stable", "XlaVariadicSort", inputs={"inputs": [KEYS, rand(16, 4, 3)]},
         consts={"dimension": np.int32(0)}, attrs={"comparator": LT_KEYS, "is_stable": True}),
    Case("variadic_sort_desc_i32", "XlaVariadicSort",
         inputs={"inputs": [np.array([[3, 9, -1, 4], [0, 2, 8, -5]], np.int32)]},
         consts={"dimension": np.int32(-1)}, attrs={"comparator": GT_I32, "is_stable": False}),
    Case("if_then", "XlaIf", inputs={"cond": np.bool_(True), "inputs": [rand(17, 3), rand(18, 3)]},
         attrs={"then_branch": THEN, "else_branch": ELSE, "Tout": [F32, F32]}, node_attrs=IF_SHAPES),
    Case("if_else", "XlaIf", inputs={"cond": np.bool_(False), "inputs": [rand(19, 3), rand(20, 3)]},
         attrs={"then_branch": THEN, "else_branch": ELSE, "Tout": [F32, F32]}, node_attrs=IF_SHAPES),
    Case("while_matmul", "XlaWhile", inputs={"input": [np.int32(0), rand(21, 2, 2, scale=1.0)]},
         attrs={"cond": LOOP_COND, "body": LOOP_BODY}),
]

for case in CASES:
    # TensorFlow has no CPU kernel for these ops and registers no gradient for them.
    case.cpu = False
    case.grad = False

if __name__ == "__main__":
    op_cases.write_family("xla_fn", CASES)
