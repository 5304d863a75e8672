"""Writes tests/tf/corpus/ops/xla_ops.{pbtxt,json}: the XLA-only ops that tf2xla's Python helpers,
jax2tf and tf.experimental.numpy put in graphs (XlaPad, XlaDynamicSlice, XlaDynamicUpdateSlice,
XlaReducePrecision, XlaBroadcastHelper, XlaDot(V2), XlaEinsum, XlaGather, XlaConv(V2)), with the
values and gradients of TensorFlow's XLA bridge (TensorFlow has no CPU kernel for them).

Their proto-valued attributes (`dimension_numbers`, `precision_config`) are the serialized
`xla_data.proto` messages TensorFlow's own helpers (`tensorflow.compiler.tf2xla.python.xla`) write.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_xla_ops.py
"""

import numpy as np

import op_cases
from op_cases import Case
from tensorflow.compiler.xla import xla_data_pb2 as xd  # noqa: E402 (after TensorFlow itself)


BF16 = op_cases.tf.bfloat16.as_numpy_dtype


def f32(seed, *shape, scale=2.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=shape).astype(np.float32)


def i32(*values):
    return np.array(values, np.int32)


def dot_dims(lc, rc, lb=(), rb=()):
    return xd.DotDimensionNumbers(lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc,
                                  lhs_batch_dimensions=lb, rhs_batch_dimensions=rb).SerializeToString()


def precision(*p):
    return xd.PrecisionConfig(operand_precision=list(p)).SerializeToString()


def gather_dims(offset, collapsed, start_map, index_dim):
    return xd.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=collapsed,
                                     start_index_map=start_map, index_vector_dim=index_dim).SerializeToString()


def conv_dims(ib, if_, isp, kin, kout, ksp, ob, of, osp):
    return xd.ConvolutionDimensionNumbers(
        input_batch_dimension=ib, input_feature_dimension=if_, input_spatial_dimensions=isp,
        kernel_input_feature_dimension=kin, kernel_output_feature_dimension=kout, kernel_spatial_dimensions=ksp,
        output_batch_dimension=ob, output_feature_dimension=of, output_spatial_dimensions=osp).SerializeToString()


def conv_consts(strides, padding, lhs_dilation, rhs_dilation, groups):
    return {"window_strides": i32(*strides), "padding": np.array(padding, np.int32),
            "lhs_dilation": i32(*lhs_dilation), "rhs_dilation": i32(*rhs_dilation),
            "feature_group_count": np.int32(groups)}


# Values that straddle the limits of narrow float formats: overflow, underflow, ties, NaN, infinities.
PRECISION_EDGES = np.array([0.0, -0.0, 1.0, 1.00390625, 1.005859375, -3.14159265, 65504.0, 65520.0, 1e6, -1e6,
                            6.1e-5, 3e-8, 1e-40, 3.4e38, np.inf, -np.inf, np.nan, 0.3333333], np.float32)

CASES = [
    # XlaPad: negative edge padding crops, interior padding spreads.
    Case("pad_mixed", "XlaPad", inputs={"input": f32(1, 3, 4), "padding_value": np.float32(0.5)},
         consts={"padding_low": i32(1, -1), "padding_high": i32(0, 2), "padding_interior": i32(1, 2)}, cpu=False),
    Case("pad_i32_3d", "XlaPad", inputs={"input": np.arange(12, dtype=np.int32).reshape(2, 3, 2),
                                         "padding_value": np.int32(-7)},
         consts={"padding_low": np.array([0, 1, -1], np.int64), "padding_high": np.array([1, -2, 0], np.int64),
                 "padding_interior": np.array([2, 0, 1], np.int64)}, cpu=False, grad=False),
    Case("pad_f64", "XlaPad", inputs={"input": f32(2, 4).astype(np.float64), "padding_value": np.float64(-1.5)},
         consts={"padding_low": i32(2), "padding_high": i32(1), "padding_interior": i32(1)}, cpu=False),
    Case("pad_bf16", "XlaPad", inputs={"input": f32(42, 2, 3).astype(BF16), "padding_value": BF16(2.5)},
         consts={"padding_low": i32(0, 1), "padding_high": i32(-1, 1), "padding_interior": i32(2, 1)}, cpu=False),
    # XlaDynamicSlice: fed start indices, clamped so that the slice fits.
    Case("dslice_clamped", "XlaDynamicSlice", inputs={"input": f32(3, 4, 5), "start_indices": i32(3, 4)},
         consts={"size_indices": i32(2, 3)}, cpu=False),
    Case("dslice_negative", "XlaDynamicSlice",
         inputs={"input": f32(4, 3, 4, 2), "start_indices": np.array([-2, 1, 0], np.int64)},
         consts={"size_indices": np.array([2, 2, 2], np.int64)}, cpu=False),
    # XlaDynamicUpdateSlice: clamped the same way.
    Case("dus_clamped", "XlaDynamicUpdateSlice",
         inputs={"input": f32(5, 4, 5), "update": f32(6, 2, 2), "indices": i32(3, -1)}, cpu=False),
    Case("dus_i32", "XlaDynamicUpdateSlice",
         inputs={"input": np.arange(12, dtype=np.int32).reshape(3, 4), "update": i32(-1, -2).reshape(1, 2),
                 "indices": i32(1, 1)}, cpu=False, grad=False),
    Case("dus_f16", "XlaDynamicUpdateSlice",
         inputs={"input": f32(43, 3, 3).astype(np.float16), "update": f32(44, 3, 1).astype(np.float16),
                 "indices": np.array([0, 5], np.int64)}, cpu=False),
    # XlaReducePrecision: bf16's, f16's and a small format's rounding of f32 and f64.
    Case("rp_bf16", "XlaReducePrecision", inputs={"operand": PRECISION_EDGES},
         attrs={"exponent_bits": 8, "mantissa_bits": 7}, cpu=False),
    Case("rp_f16", "XlaReducePrecision", inputs={"operand": PRECISION_EDGES},
         attrs={"exponent_bits": 5, "mantissa_bits": 10}, cpu=False),
    Case("rp_small_f64", "XlaReducePrecision", inputs={"operand": PRECISION_EDGES.astype(np.float64) * 0.37},
         attrs={"exponent_bits": 4, "mantissa_bits": 3}, cpu=False),
    Case("rp_of_bf16", "XlaReducePrecision", inputs={"operand": PRECISION_EDGES.astype(BF16)},
         attrs={"exponent_bits": 5, "mantissa_bits": 2}, cpu=False),
    # XlaBroadcastHelper: the lower-rank operand gains unit dimensions.
    Case("bcast_lhs_low", "XlaBroadcastHelper", inputs={"lhs": f32(7, 3), "rhs": f32(8, 2, 3, 4)},
         consts={"broadcast_dims": i32(1)}, cpu=False),
    Case("bcast_rhs_low", "XlaBroadcastHelper", inputs={"lhs": f32(9, 2, 3, 4), "rhs": f32(10, 2, 4)},
         consts={"broadcast_dims": np.array([0, 2], np.int64)}, cpu=False),
    # XlaDot / XlaDotV2: dot_general with batch and contracting dimensions anywhere.
    Case("dot_matmul", "XlaDot", inputs={"lhs": f32(11, 2, 3), "rhs": f32(12, 3, 4)},
         attrs={"dimension_numbers": dot_dims([1], [0]), "precision_config": b""}, cpu=False),
    Case("dot_batched", "XlaDot", inputs={"lhs": f32(13, 2, 3, 4), "rhs": f32(14, 4, 2, 5)},
         attrs={"dimension_numbers": dot_dims([2], [0], [0], [1]), "precision_config": precision(2, 2)}, cpu=False),
    Case("dot_two_contractions_f64", "XlaDot",
         inputs={"lhs": f32(15, 3, 2, 4).astype(np.float64), "rhs": f32(16, 4, 3).astype(np.float64)},
         attrs={"dimension_numbers": dot_dims([0, 2], [1, 0]), "precision_config": b""}, cpu=False),
    Case("dot_outer", "XlaDot", inputs={"lhs": f32(17, 3), "rhs": f32(18, 2)},
         attrs={"dimension_numbers": dot_dims([], []), "precision_config": b""}, cpu=False),
    Case("dotv2_f32", "XlaDotV2", inputs={"lhs": f32(19, 2, 4, 3), "rhs": f32(20, 2, 5, 3)},
         attrs={"dimension_numbers": dot_dims([2], [2], [0], [0]), "precision_config": b"",
                "preferred_element_type": np.float32}, cpu=False),
    Case("dotv2_i8_to_i32", "XlaDotV2",
         inputs={"lhs": np.array([[100, -100, 7], [-128, 127, 3]], np.int8),
                 "rhs": np.array([[120, 1], [-90, 2], [55, -3]], np.int8)},
         attrs={"dimension_numbers": dot_dims([1], [0]), "precision_config": b"",
                "preferred_element_type": np.int32}, cpu=False, grad=False),
    Case("dotv2_bf16_to_f32", "XlaDotV2",
         inputs={"lhs": f32(21, 3, 4).astype(BF16),
                 "rhs": f32(22, 4, 2).astype(BF16)},
         attrs={"dimension_numbers": dot_dims([1], [0]), "precision_config": b"",
                "preferred_element_type": np.float32}, cpu=False, rtol=1e-3),
    # XlaEinsum and its gradient (two more XlaEinsums).
    Case("einsum_matmul", "XlaEinsum", inputs={"a": f32(23, 2, 3), "b": f32(24, 3, 4)},
         attrs={"equation": "ab,bc->ac"}, cpu=False),
    Case("einsum_batched", "XlaEinsum", inputs={"a": f32(25, 2, 3, 4), "b": f32(26, 2, 4, 5)},
         attrs={"equation": "bij,bjk->bki"}, cpu=False),
    Case("einsum_reduce", "XlaEinsum", inputs={"a": f32(27, 3, 4), "b": f32(28, 4, 2)},
         attrs={"equation": "ij,jk->i"}, cpu=False, grad=False),  # TF's gradient of it fails.
    Case("einsum_transposed", "XlaEinsum", inputs={"a": f32(40, 3, 4), "b": f32(41, 4, 2)},
         attrs={"equation": "ij,jk->ki"}, cpu=False),
    # XlaGather: a GatherV2-like row gather and 2-d windows whose starts are clamped.
    Case("gather_rows", "XlaGather", inputs={"operand": f32(29, 5, 3), "start_indices": i32(4, 0, 2, 2).reshape(4, 1)},
         consts={"slice_sizes": i32(1, 3)},
         attrs={"dimension_numbers": gather_dims([1], [0], [0], 1), "indices_are_sorted": False}, cpu=False),
    Case("gather_windows", "XlaGather",
         inputs={"operand": f32(30, 4, 5), "start_indices": i32(1, 2, 3, 4, -1, 0).reshape(3, 2)},
         consts={"slice_sizes": i32(2, 2)},
         attrs={"dimension_numbers": gather_dims([1, 2], [], [0, 1], 1), "indices_are_sorted": False}, cpu=False),
    Case("gather_index_first", "XlaGather",
         inputs={"operand": f32(31, 3, 4, 2), "start_indices": np.array([[2, 0], [1, 3]], np.int64)},
         consts={"slice_sizes": np.array([1, 2, 2], np.int64)},
         attrs={"dimension_numbers": gather_dims([0, 2], [0], [1, 0], 0), "indices_are_sorted": False}, cpu=False),
    Case("gather_i64_operand", "XlaGather",
         inputs={"operand": np.arange(24, dtype=np.int64).reshape(2, 3, 4) * 1000003, "start_indices": i32(1, 2)},
         consts={"slice_sizes": i32(1, 2, 3)},
         attrs={"dimension_numbers": gather_dims([0, 1], [0], [0, 1], 0), "indices_are_sorted": True}, cpu=False),
    # XlaConv / XlaConvV2: arbitrary dimension numbers, padding, dilations, groups.
    Case("conv_nhwc_strided", "XlaConv", inputs={"lhs": f32(32, 1, 5, 5, 2), "rhs": f32(33, 3, 3, 2, 4)},
         consts=conv_consts([1, 2], [[1, 1], [0, 1]], [1, 1], [1, 1], 1),
         attrs={"dimension_numbers": conv_dims(0, 3, [1, 2], 2, 3, [0, 1], 0, 3, [1, 2]), "precision_config": b""},
         cpu=False, rtol=1e-4),
    Case("conv_nchw_dilated_grouped", "XlaConv", inputs={"lhs": f32(34, 2, 4, 4, 3), "rhs": f32(35, 6, 2, 2, 2)},
         consts=conv_consts([1, 1], [[0, 1], [1, 0]], [2, 1], [1, 2], 2),
         attrs={"dimension_numbers": conv_dims(0, 1, [2, 3], 1, 0, [2, 3], 1, 0, [3, 2]), "precision_config": b""},
         cpu=False, rtol=1e-4),
    Case("conv1d_f64", "XlaConv",
         inputs={"lhs": f32(36, 2, 6, 3).astype(np.float64), "rhs": f32(37, 2, 3, 2).astype(np.float64)},
         consts=conv_consts([2], [[1, 2]], [1], [1], 1),
         attrs={"dimension_numbers": conv_dims(0, 2, [1], 1, 2, [0], 0, 2, [1]), "precision_config": b""},
         cpu=False),
    Case("convv2_batch_groups", "XlaConvV2", inputs={"lhs": f32(38, 4, 3, 3, 2), "rhs": f32(39, 2, 2, 2, 4)},
         consts=conv_consts([1, 1], [[0, 0], [0, 0]], [1, 1], [1, 1], 1),
         attrs={"dimension_numbers": conv_dims(0, 3, [1, 2], 2, 3, [0, 1], 0, 3, [1, 2]), "precision_config": b"",
                "preferred_element_type": np.float32, "batch_group_count": 2},
         cpu=False, rtol=1e-4),
    Case("convv2_i8_to_i32", "XlaConvV2",
         inputs={"lhs": np.arange(-12, 12, dtype=np.int8).reshape(1, 4, 3, 2) * 9,
                 "rhs": np.array([3, -5, 7, 1, -2, 4, 6, -8], np.int8).reshape(2, 1, 2, 2)},
         consts=conv_consts([1, 1], [[0, 0], [0, 0]], [1, 1], [1, 1], 1),
         attrs={"dimension_numbers": conv_dims(0, 3, [1, 2], 2, 3, [0, 1], 0, 3, [1, 2]), "precision_config": b"",
                "preferred_element_type": np.int32},
         cpu=False, grad=False),
]

# TensorFlow registers a gradient for XlaEinsum only; the others' cases check values alone.
for case in CASES:
    if case.op != "XlaEinsum":
        case.grad = False

if __name__ == "__main__":
    op_cases.write_family("xla_ops", CASES)
