"""Writes tests/tf/corpus/ops/uniform_quant.{pbtxt,json}: TensorFlow's uniform quantized ops
(UniformQuantize, UniformDequantize, UniformRequantize, UniformQuantizedClipByValue,
UniformQuantizedAdd, UniformQuantizedDot, UniformQuantizedConvolution) and the
classic `Dequantize`, per tensor and per axis, with TensorFlow's CPU and XLA values.

Quantized values (qint8, quint8, qint32) are given as plain integer arrays with `Case.qtypes`.
TensorFlow registers no gradient for these ops; scales and zero points are constants, as
TensorFlow's XLA bridge needs them. The values include exact rounding ties (x / scale = k + 0.5),
where the CPU kernels (floor(x * (1 / scale) + 0.5)) and the bridge (round half to even after
adding the zero point) differ. TensorFlow's bridge truncates a quantized convolution's rescaled
product toward zero where the CPU kernel rounds it, and refuses the default (empty) dimension numbers
and per-channel convolutions: PJRT is compared with the CPU values in those cases, so their scales
make the rescaling factor an integer (no rounding either way); `conv_nhwc_clamped`, which the bridge
compiles, has a factor of 2.5, and so ties, which both backends meet. The refused cases ask for no
XLA value (`xla=False`): compiling one of them crashes TensorFlow 2.21's bridge.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_uniform_quant.py
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case
from tensorflow.core.util.quantization import uniform_quant_ops_attr_pb2 as UQ


def f32(seed, *shape, scale=3.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=shape).astype(np.float32)


def ints(seed, dtype, low, high, *shape):
    return np.random.default_rng(seed).integers(low, high, size=shape, endpoint=True).astype(dtype)


I8 = {"quantization_min_val": -128, "quantization_max_val": 127}
# Ties: 1.25 / 0.5 = 2.5, -0.75 / 0.5 = -1.5, 0.25 / 0.5 = 0.5, and values past both ends.
TIES = np.array([1.25, -0.75, 0.25, 0.0, 3.1, -70.0, 70.0, -0.26], np.float32)
SCALE = np.float32(0.5)
Q32 = {"min_val": -2**31, "max_val": 2**31 - 1}
Q32_ADD = {f"{side}_quantization_{k}": v for side in ("lhs", "rhs", "output") for k, v in Q32.items()}
DOT_RANGES = {"lhs_quantization_min_val": -128, "lhs_quantization_max_val": 127, "rhs_quantization_min_val": -128,
              "rhs_quantization_max_val": 127, "output_quantization_min_val": -2**31,
              "output_quantization_max_val": 2**31 - 1}



def conv_quant(ls, lz, rs, rz, os_, oz):
    """Per-tensor scales and zero points of a convolution's lhs, rhs and output."""
    return {"lhs_scales": np.float32(ls), "lhs_zero_points": np.int32(lz), "rhs_scales": np.float32(rs),
            "rhs_zero_points": np.int32(rz), "output_scales": np.float32(os_), "output_zero_points": np.int32(oz)}


# NCHW input and output, OIHW kernel: what an empty attribute means to the CPU kernel; TensorFlow's
# bridge needs them spelled out.
NCHW = UQ.UniformQuantizedConvolutionDimensionNumbersAttr(
    input_batch_dimension=0, input_feature_dimension=1, input_spatial_dimensions=[2, 3],
    kernel_input_feature_dimension=1, kernel_output_feature_dimension=0, kernel_spatial_dimensions=[2, 3],
    output_batch_dimension=0, output_feature_dimension=1, output_spatial_dimensions=[2, 3]).SerializeToString()
# NHWC input and output, HWIO kernel.
NHWC = UQ.UniformQuantizedConvolutionDimensionNumbersAttr(
    input_batch_dimension=0, input_feature_dimension=3, input_spatial_dimensions=[1, 2],
    kernel_input_feature_dimension=2, kernel_output_feature_dimension=3, kernel_spatial_dimensions=[0, 1],
    output_batch_dimension=0, output_feature_dimension=3, output_spatial_dimensions=[1, 2]).SerializeToString()

CASES = [
    Case("quantize_ties", "UniformQuantize", inputs={"input": TIES},
         consts={"scales": SCALE, "zero_points": np.int32(0)}, attrs={"Tout": tf.qint8, **I8}, grad=False),
    Case("quantize_zp", "UniformQuantize", inputs={"input": f32(1, 3, 4)},
         consts={"scales": np.float32(0.03), "zero_points": np.int32(-7)},
         attrs={"Tout": tf.qint8, "quantization_min_val": -100, "quantization_max_val": 90}, grad=False),
    Case("quantize_axis", "UniformQuantize", inputs={"input": f32(2, 2, 3, 2)},
         consts={"scales": np.array([0.02, 0.05, 0.11], np.float32), "zero_points": np.array([3, -2, 0], np.int32)},
         attrs={"Tout": tf.qint8, "quantization_axis": 1, **I8}, grad=False),
    Case("quantize_qint32", "UniformQuantize", inputs={"input": f32(3, 5)},
         consts={"scales": np.float32(0.001), "zero_points": np.int32(12)},
         attrs={"Tout": tf.qint32, "quantization_min_val": -2**31, "quantization_max_val": 2**31 - 1}, grad=False),
    Case("dequantize", "UniformDequantize", inputs={"input": ints(4, np.int8, -128, 127, 3, 4)},
         consts={"scales": np.float32(0.07), "zero_points": np.int32(5)},
         attrs={"Tout": tf.float32, **I8}, qtypes={"input": tf.qint8}, grad=False),
    Case("dequantize_axis", "UniformDequantize", inputs={"input": ints(5, np.int8, -128, 127, 4, 2)},
         consts={"scales": np.array([0.5, 0.013, 2.0, 0.1], np.float32), "zero_points": np.array([0, 1, -3, 9], np.int32)},
         attrs={"Tout": tf.float32, "quantization_axis": 0, **I8}, qtypes={"input": tf.qint8}, grad=False),
    Case("dequantize_qint32", "UniformDequantize", inputs={"input": ints(6, np.int32, -100000, 100000, 6)},
         consts={"scales": np.float32(1e-4), "zero_points": np.int32(-20)},
         attrs={"Tout": tf.float32, "quantization_min_val": -2**31, "quantization_max_val": 2**31 - 1},
         qtypes={"input": tf.qint32}, grad=False),
    Case("requantize", "UniformRequantize", inputs={"input": ints(7, np.int8, -128, 127, 10)},
         consts={"input_scales": np.float32(0.3), "input_zero_points": np.int32(2),
                 "output_scales": np.float32(0.7), "output_zero_points": np.int32(-5)},
         attrs={"Tout": tf.qint8, "input_quantization_min_val": -128, "input_quantization_max_val": 127,
                "output_quantization_min_val": -128, "output_quantization_max_val": 127},
         qtypes={"input": tf.qint8}, grad=False),
    Case("requantize_ties", "UniformRequantize", inputs={"input": np.array([1, 3, -1, -3, 5, 0, 127, -128], np.int8)},
         consts={"input_scales": np.float32(0.5), "input_zero_points": np.int32(0),
                 "output_scales": np.float32(1.0), "output_zero_points": np.int32(0)},
         attrs={"Tout": tf.qint8, "input_quantization_min_val": -128, "input_quantization_max_val": 127,
                "output_quantization_min_val": -128, "output_quantization_max_val": 127},
         qtypes={"input": tf.qint8}, grad=False),
    Case("requantize_from_qint32_axis", "UniformRequantize", inputs={"input": ints(8, np.int32, -5000, 5000, 3, 4)},
         consts={"input_scales": np.array([0.01, 0.02, 0.003, 0.05], np.float32),
                 "input_zero_points": np.array([0, 3, -1, 10], np.int32),
                 "output_scales": np.float32(0.4), "output_zero_points": np.int32(1)},
         attrs={"Tout": tf.qint8, "input_quantization_axis": 1, "input_quantization_min_val": -2**31,
                "input_quantization_max_val": 2**31 - 1, "output_quantization_min_val": -120,
                "output_quantization_max_val": 110},
         qtypes={"input": tf.qint32}, grad=False),
    Case("clip", "UniformQuantizedClipByValue", inputs={"operand": ints(9, np.int32, -500, 500, 3, 4)},
         consts={"min": np.int32(-20), "max": np.int32(370), "scales": np.float32(0.2), "zero_points": np.int32(1)},
         attrs={"quantization_min_val": -2**31, "quantization_max_val": 2**31 - 1},
         qtypes={"operand": tf.qint32, "min": tf.qint32, "max": tf.qint32}, grad=False),
    Case("clip_axis", "UniformQuantizedClipByValue", inputs={"operand": ints(10, np.int32, -300, 300, 2, 3)},
         consts={"min": np.array([-50, 0, -200], np.int32), "max": np.array([50, 10, 250], np.int32),
                 "scales": np.array([0.1, 0.2, 0.3], np.float32), "zero_points": np.array([0, 0, 0], np.int32)},
         attrs={"quantization_axis": 1, "quantization_min_val": -2**31, "quantization_max_val": 2**31 - 1},
         qtypes={"operand": tf.qint32, "min": tf.qint32, "max": tf.qint32}, grad=False),
    Case("dequantize_min_combined_quint8", "Dequantize", inputs={"input": ints(11, np.uint8, 0, 255, 2, 5)},
         consts={"min_range": np.float32(-1.0), "max_range": np.float32(2.0)},
         qtypes={"input": tf.quint8}, grad=False),
    Case("dequantize_min_combined_qint8", "Dequantize", inputs={"input": ints(12, np.int8, -128, 127, 7)},
         consts={"min_range": np.float32(-0.5), "max_range": np.float32(3.5)},
         qtypes={"input": tf.qint8}, grad=False),
    Case("dequantize_min_combined_bf16", "Dequantize", inputs={"input": ints(13, np.uint8, 0, 255, 6)},
         consts={"min_range": np.float32(-4.0), "max_range": np.float32(4.0)}, attrs={"dtype": tf.bfloat16},
         qtypes={"input": tf.quint8}, grad=False),
    Case("dequantize_scaled", "Dequantize", inputs={"input": ints(14, np.int8, -128, 127, 6)},
         consts={"min_range": np.float32(-3.0), "max_range": np.float32(2.0)}, attrs={"mode": "SCALED"},
         qtypes={"input": tf.qint8}, grad=False, xla=False),
    Case("dequantize_scaled_narrow", "Dequantize", inputs={"input": ints(15, np.uint8, 0, 255, 6)},
         consts={"min_range": np.float32(0.0), "max_range": np.float32(5.0)},
         attrs={"mode": "SCALED", "narrow_range": True}, qtypes={"input": tf.quint8}, grad=False, xla=False),
    Case("add", "UniformQuantizedAdd",
         inputs={"lhs": ints(16, np.int32, -2000, 2000, 2, 3), "rhs": ints(17, np.int32, -2000, 2000, 3)},
         consts={"lhs_scales": np.float32(0.02), "lhs_zero_points": np.int32(4), "rhs_scales": np.float32(0.05),
                 "rhs_zero_points": np.int32(-3), "output_scales": np.float32(0.03), "output_zero_points": np.int32(7)},
         attrs={**Q32_ADD}, qtypes={"lhs": tf.qint32, "rhs": tf.qint32}, grad=False),
    Case("add_clamped", "UniformQuantizedAdd",
         inputs={"lhs": ints(18, np.int32, -900, 900, 4), "rhs": ints(19, np.int32, -900, 900, 4)},
         consts={"lhs_scales": np.float32(0.1), "lhs_zero_points": np.int32(0), "rhs_scales": np.float32(0.1),
                 "rhs_zero_points": np.int32(0), "output_scales": np.float32(0.1), "output_zero_points": np.int32(0)},
         attrs={**Q32_ADD, "output_quantization_min_val": -500, "output_quantization_max_val": 500},
         qtypes={"lhs": tf.qint32, "rhs": tf.qint32}, grad=False),
    Case("add_axis", "UniformQuantizedAdd",
         inputs={"lhs": ints(20, np.int32, -2000, 2000, 2, 3), "rhs": ints(21, np.int32, -2000, 2000, 2, 3)},
         consts={"lhs_scales": np.array([0.02, 0.03, 0.01], np.float32), "lhs_zero_points": np.array([1, 0, -2], np.int32),
                 "rhs_scales": np.float32(0.05), "rhs_zero_points": np.int32(3),
                 "output_scales": np.array([0.04, 0.05, 0.06], np.float32),
                 "output_zero_points": np.array([0, 2, -1], np.int32)},
         attrs={**Q32_ADD, "lhs_quantization_axis": 1, "output_quantization_axis": 1},
         qtypes={"lhs": tf.qint32, "rhs": tf.qint32}, grad=False),
    Case("dot", "UniformQuantizedDot",
         inputs={"lhs": ints(22, np.int8, -128, 127, 2, 5), "rhs": ints(23, np.int8, -128, 127, 5, 3)},
         consts={"lhs_scales": np.float32(0.05), "lhs_zero_points": np.int32(2), "rhs_scales": np.float32(0.02),
                 "rhs_zero_points": np.int32(-1), "output_scales": np.float32(0.01), "output_zero_points": np.int32(3)},
         attrs={"Tout": tf.qint32, **DOT_RANGES}, qtypes={"lhs": tf.qint8, "rhs": tf.qint8}, grad=False),
    Case("dot_channels", "UniformQuantizedDot",
         inputs={"lhs": ints(24, np.int8, -128, 127, 3, 4), "rhs": ints(25, np.int8, -128, 127, 4, 2)},
         consts={"lhs_scales": np.float32(0.1), "lhs_zero_points": np.int32(0),
                 "rhs_scales": np.array([0.03, 0.07], np.float32), "rhs_zero_points": np.array([0, 0], np.int32),
                 "output_scales": np.array([0.003, 0.007], np.float32), "output_zero_points": np.array([0, 0], np.int32)},
         attrs={"Tout": tf.qint32, **DOT_RANGES, "rhs_quantization_axis": 1, "output_quantization_axis": 1},
         qtypes={"lhs": tf.qint8, "rhs": tf.qint8}, grad=False),
    Case("dot_clamped", "UniformQuantizedDot",
         inputs={"lhs": ints(26, np.int8, -128, 127, 2, 3), "rhs": ints(27, np.int8, -128, 127, 3, 2)},
         consts={"lhs_scales": np.float32(0.5), "lhs_zero_points": np.int32(0), "rhs_scales": np.float32(0.5),
                 "rhs_zero_points": np.int32(0), "output_scales": np.float32(0.05), "output_zero_points": np.int32(0)},
         attrs={"Tout": tf.qint32, **DOT_RANGES, "output_quantization_min_val": -20000,
                "output_quantization_max_val": 20000},
         qtypes={"lhs": tf.qint8, "rhs": tf.qint8}, grad=False),
    Case("conv_valid", "UniformQuantizedConvolution",
         inputs={"lhs": ints(28, np.int8, -128, 127, 1, 2, 4, 4), "rhs": ints(29, np.int8, -128, 127, 3, 2, 2, 2)},
         consts={**conv_quant(0.5, 2, 0.5, -1, 0.125, 3)},
         attrs={"Tout": tf.qint32, "padding": "VALID", **DOT_RANGES},
         qtypes={"lhs": tf.qint8, "rhs": tf.qint8}, grad=False, xla=False),
    Case("conv_same_strided_channels", "UniformQuantizedConvolution",
         inputs={"lhs": ints(30, np.int8, -128, 127, 2, 2, 5, 5), "rhs": ints(31, np.int8, -128, 127, 2, 2, 3, 3)},
         consts={"lhs_scales": np.float32(0.5), "lhs_zero_points": np.int32(0),
                 "rhs_scales": np.array([0.25, 0.5], np.float32), "rhs_zero_points": np.array([0, 0], np.int32),
                 "output_scales": np.array([0.125, 0.0625], np.float32), "output_zero_points": np.array([0, 0], np.int32)},
         attrs={"Tout": tf.qint32, "padding": "SAME", "window_strides": [2, 2], "dimension_numbers": NCHW, **DOT_RANGES,
                "rhs_quantization_axis": 0, "output_quantization_axis": 1},
         qtypes={"lhs": tf.qint8, "rhs": tf.qint8}, grad=False, xla=False),
    Case("conv_explicit_dilated_groups", "UniformQuantizedConvolution",
         inputs={"lhs": ints(32, np.int8, -128, 127, 1, 4, 4, 5), "rhs": ints(33, np.int8, -128, 127, 4, 2, 2, 2)},
         consts={**conv_quant(0.25, -3, 0.5, 1, 0.125, -2)},
         attrs={"Tout": tf.qint32, "padding": "EXPLICIT", "explicit_padding": [1, 0, 0, 2], "rhs_dilation": [2, 1],
                "lhs_dilation": [1, 2], "feature_group_count": 2, "dimension_numbers": NCHW, **DOT_RANGES},
         qtypes={"lhs": tf.qint8, "rhs": tf.qint8}, grad=False, xla=False),
    Case("conv_nhwc_clamped", "UniformQuantizedConvolution",
         inputs={"lhs": ints(34, np.int8, -128, 127, 1, 4, 4, 3), "rhs": ints(35, np.int8, -128, 127, 2, 2, 3, 2)},
         consts={**conv_quant(0.5, 0, 0.5, 0, 0.1, 0)},
         attrs={"Tout": tf.qint32, "padding": "VALID", "dimension_numbers": NHWC, **DOT_RANGES,
                "output_quantization_min_val": -50000, "output_quantization_max_val": 50000},
         qtypes={"lhs": tf.qint8, "rhs": tf.qint8}, grad=False),
]

if __name__ == "__main__":
    op_cases.write_family("uniform_quant", CASES)
