"""Writes tests/tf/corpus/ops/data.{pbtxt,json}: data-dependent and update ops with TensorFlow's
values and gradients: CumulativeLogsumexp, TensorStridedSliceUpdate, ResourceStridedSliceAssign,
SparseToDense, Bincount, DenseBincount, ParallelDynamicStitch,
ApproxTopK and ResourceGather's gradient.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_data.py
"""

import numpy as np

import op_cases
from op_cases import Case


def f32(seed, *shape, scale=3.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=shape).astype(np.float32)


def i32(*values):
    return np.array(values, np.int32)


def cumulative_logsumexp():
    cases = []
    for exclusive in (False, True):
        for reverse in (False, True):
            tag = ("excl" if exclusive else "incl") + ("_rev" if reverse else "")
            cases.append(Case(f"clse_{tag}", "CumulativeLogsumexp", inputs={"x": f32(1, 3, 4)},
                              consts={"axis": np.int32(1)}, attrs={"exclusive": exclusive, "reverse": reverse}))
    cases += [
        Case("clse_axis0_f64", "CumulativeLogsumexp", inputs={"x": f32(2, 4, 2).astype(np.float64)},
             consts={"axis": np.int64(0)}),
        Case("clse_neg_axis", "CumulativeLogsumexp", inputs={"x": f32(3, 2, 2, 3, scale=30.0)},
             consts={"axis": np.int32(-2)}, attrs={"exclusive": True}, rtol=1e-4),
        # Very negative and repeated values: the running maximum stays stable.
        Case("clse_extremes", "CumulativeLogsumexp",
             inputs={"x": np.array([-80.0, -80.0, 5.0, 5.0, -3.0, 60.0], np.float32)},
             consts={"axis": np.int32(0)}, rtol=1e-4),
    ]
    return cases


def strided_updates():
    x = f32(10, 4, 6)
    return [
        Case("tssu_basic", "TensorStridedSliceUpdate",
             inputs={"input": x, "value": f32(11, 2, 2)},
             consts={"begin": i32(1, 0), "end": i32(3, 6), "strides": i32(1, 3)}),
        Case("tssu_masks", "TensorStridedSliceUpdate",
             inputs={"input": x, "value": f32(12, 3)},
             consts={"begin": i32(2, 5), "end": i32(0, 0), "strides": i32(1, -2)},
             attrs={"begin_mask": 0, "end_mask": 2, "shrink_axis_mask": 1}),
        # A value that broadcasts over the slice: its gradient sums over the broadcast axes.
        Case("tssu_broadcast", "TensorStridedSliceUpdate",
             inputs={"input": f32(13, 3, 4, 2), "value": f32(14, 1, 2)},
             consts={"begin": i32(0, 1), "end": i32(0, 4), "strides": i32(1, 2)},
             attrs={"begin_mask": 1, "end_mask": 1}),
        Case("tssu_ellipsis_newaxis", "TensorStridedSliceUpdate",
             inputs={"input": f32(15, 2, 3, 4).astype(np.float64), "value": f32(16, 2, 3, 1).astype(np.float64)},
             consts={"begin": i32(0, 1), "end": i32(0, 2), "strides": i32(1, 1)},
             attrs={"ellipsis_mask": 1}),
        Case("tssu_int", "TensorStridedSliceUpdate",
             inputs={"input": np.arange(12, dtype=np.int32).reshape(3, 4), "value": i32(-1, -2)},
             consts={"begin": i32(-1, 0), "end": i32(0, 4), "strides": i32(1, 2)},
             attrs={"shrink_axis_mask": 1, "end_mask": 1}),
        Case("rssa_basic", "ResourceStridedSliceAssign",
             variables={"ref": f32(17, 4, 3)}, inputs={"value": f32(18, 2, 3)},
             consts={"begin": i32(0), "end": i32(4), "strides": i32(2)}, grad=False),
        Case("rssa_shrink", "ResourceStridedSliceAssign",
             variables={"ref": np.arange(10, dtype=np.int32).reshape(2, 5)}, inputs={"value": i32(7, 8)},
             consts={"begin": i32(1, 4), "end": i32(2, 0), "strides": i32(1, -3)},
             attrs={"shrink_axis_mask": 1, "end_mask": 2}, grad=False),
    ]


def sparse_to_dense():
    return [
        Case("s2d_matrix", "SparseToDense",
             inputs={"sparse_values": f32(20, 4), "default_value": np.float32(0.5)},
             consts={"sparse_indices": np.array([[0, 1], [1, 0], [1, 3], [2, 2]], np.int32),
                     "output_shape": i32(3, 4)}),
        Case("s2d_vector_scalar_value", "SparseToDense",
             inputs={"sparse_values": np.float32(2.5), "default_value": np.float32(-1.0)},
             consts={"sparse_indices": np.array([4, 1, 3], np.int64), "output_shape": np.array([6], np.int64)},
             attrs={"validate_indices": False}, grad=False),
        Case("s2d_int_scalar_index", "SparseToDense",
             inputs={"sparse_values": i32(9), "default_value": np.int32(0)},
             consts={"sparse_indices": np.int32(2), "output_shape": i32(5)}),
        Case("s2d_f64_3d", "SparseToDense",
             inputs={"sparse_values": f32(21, 3).astype(np.float64), "default_value": np.float64(0.0)},
             consts={"sparse_indices": np.array([[0, 0, 1], [0, 1, 0], [1, 1, 1]], np.int32),
                     "output_shape": i32(2, 2, 2)}),
    ]


def bincounts():
    arr = np.array([1, 3, 3, 0, 4, 3, 1, 7], np.int32)
    return [
        Case("bincount_weights", "Bincount", inputs={"arr": arr, "weights": f32(30, 8)}, consts={"size": np.int32(6)},
             grad=False),
        Case("bincount_counts", "Bincount", inputs={"arr": arr, "weights": np.zeros(0, np.int32)},
             consts={"size": np.int32(5)}),
        Case("dense_bincount_1d", "DenseBincount",
             inputs={"input": arr, "weights": np.zeros(0, np.float32)}, consts={"size": np.int32(5)}),
        Case("dense_bincount_1d_weights", "DenseBincount",
             inputs={"input": arr.astype(np.int64), "weights": f32(31, 8).astype(np.float64)},
             consts={"size": np.int64(4)}, grad=False),
        Case("dense_bincount_2d_binary", "DenseBincount",
             inputs={"input": arr.reshape(2, 4), "weights": np.zeros(0, np.int32)},
             consts={"size": np.int32(6)}, attrs={"binary_output": True}),
        Case("dense_bincount_2d_weights", "DenseBincount",
             inputs={"input": arr.reshape(2, 4), "weights": f32(32, 2, 4)},
             consts={"size": np.int32(5)}, grad=False),
    ]


def stitches():
    return [
        Case("pstitch_rows", "ParallelDynamicStitch",
             inputs={"data": [f32(40, 3, 2), f32(41, 2, 2)]},
             consts={"indices": [i32(0, 4, 2), i32(1, 3)]}),
        Case("pstitch_matrix_indices", "ParallelDynamicStitch",
             inputs={"data": [f32(42, 2, 2).astype(np.float64), f32(43, 1, 1).astype(np.float64)]},
             consts={"indices": [np.array([[3, 0], [2, 4]], np.int32), np.array([[1]], np.int32)]}),
    ]


def resource_gathers():
    return [
        Case("rgather_rows", "ResourceGather", variables={"resource": f32(50, 5, 3)},
             inputs={"indices": i32(4, 0, 4, 2)}, attrs={"dtype": np.float32}, var_grads=True),
        Case("rgather_matrix_indices", "ResourceGather", variables={"resource": f32(51, 4, 2).astype(np.float64)},
             inputs={"indices": np.array([[1, 3], [1, 0], [2, 2]], np.int64)}, attrs={"dtype": np.float64},
             var_grads=True),
    ]


def approx_top_k():
    # No CPU kernel in TensorFlow: XLA's values (an exact sort on its CPU backend) stand for both.
    return [
        Case("approx_top_k_max", "ApproxTopK", inputs={"input": f32(60, 3, 8)}, attrs={"k": 3}, cpu=False),
        Case("approx_top_k_min", "ApproxTopK", inputs={"input": f32(61, 2, 2, 6)},
             attrs={"k": 2, "is_max_k": False, "reduction_dimension": -1}, cpu=False),
        Case("approx_top_k_vector", "ApproxTopK", inputs={"input": f32(62, 9)}, attrs={"k": 4, "recall_target": 0.9},
             cpu=False),
    ]


CASES = cumulative_logsumexp() + strided_updates() + sparse_to_dense() + bincounts() + stitches() + resource_gathers() + approx_top_k()

if __name__ == "__main__":
    op_cases.write_family("data", CASES)
