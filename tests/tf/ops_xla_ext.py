"""Writes tests/tf/corpus/ops/xla_ext.{pbtxt,json}: SymbolicGradient (TensorFlow's CPU kernel runs
the gradient of a library function) and the custom calls XlaCustomCall / XlaCustomCallV2 with the
targets TensorFlow's XLA bridge runs on CPU (`Sharding`, `SPMDFullToShardShape`,
`SPMDShardToFullShape`, `TopK`; TensorFlow has no CPU kernel for the custom calls, so their values
are the bridge's).

SymbolicGradient's `f` is a concrete `tf.function`, put in the GraphDef's library; its operands are
f's arguments, then one gradient per result of f (float ones only: TensorFlow's kernel also
differentiates integers as numbers, which the IR refuses). TensorFlow registers no gradient for
these ops.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_xla_ext.py
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case

F32, F64, I32 = tf.float32, tf.float64, tf.int32
NP_BF16 = tf.bfloat16.as_numpy_dtype


def rand(seed, *shape, dtype=np.float32, scale=2.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=shape).astype(dtype)


def fn(body, *specs):
    """The concrete function of `body` on tensors of `specs` ((dtype, shape) pairs)."""
    return tf.function(body).get_concrete_function(*[tf.TensorSpec(shape, dtype) for dtype, shape in specs])


# Named functions, not lambdas: a function's name is its library name (`__inference_<name>_<k>`).
def product_and_difference(a, b):
    return a * b + tf.sin(a), a - b


def dense_tanh(x, w):
    return tf.tanh(tf.matmul(x, w))


def inner_square(x):
    return x * x


INNER = tf.function(inner_square)


def calls_another(x, y):
    """A function that calls another: the gradient goes through the call."""
    return INNER(x) * y + tf.exp(y)


CASES = [
    Case("symbolic_two_results", "SymbolicGradient",
         inputs={"input": [rand(1, 3), rand(2, 3), rand(3, 3), rand(4, 3)]},
         attrs={"Tout": [F32, F32], "f": fn(product_and_difference, (F32, [3]), (F32, [3]))}, grad=False),
    Case("symbolic_matmul_f64", "SymbolicGradient",
         inputs={"input": [rand(5, 2, 3, dtype=np.float64), rand(6, 3, 2, dtype=np.float64),
                           rand(7, 2, 2, dtype=np.float64)]},
         attrs={"Tout": [F64, F64], "f": fn(dense_tanh, (F64, [2, 3]), (F64, [3, 2]))}, grad=False),
    Case("symbolic_nested_call", "SymbolicGradient",
         inputs={"input": [rand(10, 4), rand(11, 4), rand(12, 4)]},
         attrs={"Tout": [F32, F32], "f": fn(calls_another, (F32, [4]), (F32, [4]))}, grad=False),
    # Custom calls: TensorFlow has no CPU kernel for them (`cpu=False`); the values are the bridge's.
    Case("custom_sharding", "XlaCustomCall", inputs={"args": [rand(13, 2, 3)]},
         attrs={"target_name": "Sharding", "backend_config": "", "dtype": F32, "shape": [2, 3]},
         grad=False, cpu=False),
    Case("custom_sharding_bf16", "XlaCustomCall", inputs={"args": [rand(17, 2, 2).astype(NP_BF16)]},
         attrs={"target_name": "Sharding", "backend_config": "", "dtype": tf.bfloat16, "shape": [2, 2]},
         grad=False, cpu=False),
    Case("custom_full_to_shard_f64", "XlaCustomCall", inputs={"args": [rand(14, 4, dtype=np.float64)]},
         attrs={"target_name": "SPMDFullToShardShape", "backend_config": "", "dtype": F64, "shape": [4]},
         grad=False, cpu=False),
    Case("custom_shard_to_full_i32", "XlaCustomCall", inputs={"args": [np.arange(6, dtype=np.int32).reshape(3, 2)]},
         attrs={"target_name": "SPMDShardToFullShape", "backend_config": "", "dtype": I32, "shape": [3, 2]},
         grad=False, cpu=False),
    Case("custom_v2_sharding", "XlaCustomCallV2", inputs={"operands": [rand(15, 3)]},
         attrs={"call_target_name": "Sharding", "backend_config": "", "has_side_effect": False,
                "result_dtypes": [F32], "result_shapes": [[3]]}, grad=False, cpu=False),
    Case("custom_v2_top_k", "XlaCustomCallV2", inputs={"operands": [rand(16, 2, 5)]},
         attrs={"call_target_name": "TopK", "backend_config": "", "has_side_effect": False,
                "result_dtypes": [F32, I32], "result_shapes": [[2, 3], [2, 3]]}, grad=False, cpu=False),
]


if __name__ == "__main__":
    op_cases.write_family("xla_ext", CASES)
