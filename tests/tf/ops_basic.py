"""Writes tests/tf/corpus/ops/basic.{pbtxt,json}: the op-case harness's own check, on ops every
backend already has (broadcasting, attrs, list inputs, constants, several outputs, integer inputs,
a resource variable updated in place).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_basic.py
"""

import numpy as np

import op_cases
from op_cases import Case


def f32(seed, *shape):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape).astype(np.float32)


CASES = [
    Case("add_broadcast", "AddV2", inputs={"x": f32(1, 2, 3), "y": f32(2, 3)}),
    Case("matmul_transposed", "MatMul", inputs={"a": f32(3, 3, 2), "b": f32(4, 4, 3)},
         attrs={"transpose_a": True, "transpose_b": True}),
    Case("matmul_f64", "MatMul", inputs={"a": f32(5, 2, 3).astype(np.float64), "b": f32(6, 3, 2).astype(np.float64)}),
    Case("concat_list", "ConcatV2", inputs={"values": [f32(7, 2, 2), f32(8, 2, 3)]}, consts={"axis": np.int32(1)}),
    Case("transpose_perm", "Transpose", inputs={"x": f32(9, 2, 3, 4)}, consts={"perm": np.array([2, 0, 1], np.int32)}),
    Case("softmax", "Softmax", inputs={"logits": f32(10, 3, 4)}),
    Case("sparse_xent", "SparseSoftmaxCrossEntropyWithLogits", inputs={"features": f32(11, 3, 5)},
         consts={"labels": np.array([0, 4, 2], np.int64)}),
    Case("cumsum_reverse", "Cumsum", inputs={"x": f32(12, 2, 4)}, consts={"axis": np.int32(1)},
         attrs={"exclusive": True, "reverse": True}),
    Case("int_add", "AddV2", inputs={"x": np.array([[1, -2, 3]], np.int32), "y": np.array([[4], [5]], np.int32)}),
    Case("sgd_update", "ResourceApplyGradientDescent", variables={"var": f32(13, 2, 3)},
         consts={"alpha": np.float32(0.1)}, inputs={"delta": f32(14, 2, 3)}, grad=False),
]

if __name__ == "__main__":
    op_cases.write_family("basic", CASES)
