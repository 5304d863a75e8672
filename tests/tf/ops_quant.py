"""Writes tests/tf/corpus/ops/quant.{pbtxt,json}: the simulated-quantization ops of
quantization-aware training (FakeQuant*, QuantizeAndDequantizeV2/V3/V4) with TensorFlow's
values and gradients.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_quant.py
"""

import numpy as np

import op_cases
from op_cases import Case


def f32(seed, *shape, scale=3.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=shape).astype(np.float32)


# Values that straddle the range and fall on rounding boundaries of the default [-6, 6] 8-bit grid.
EDGES = np.array([-7.0, -6.0, -5.999, 0.0, 0.023529, 0.0235295, 1.5, 5.95, 6.0, 6.5], np.float32)

CASES = [
    Case("args_default", "FakeQuantWithMinMaxArgs", inputs={"inputs": EDGES}),
    Case("args_narrow4", "FakeQuantWithMinMaxArgs", inputs={"inputs": f32(1, 3, 4)},
         attrs={"min": -1.3, "max": 2.2, "num_bits": 4, "narrow_range": True}),
    Case("args_asym", "FakeQuantWithMinMaxArgs", inputs={"inputs": f32(2, 2, 5)},
         attrs={"min": -0.1, "max": 5.7}),
    Case("args_grad_op", "FakeQuantWithMinMaxArgsGradient", inputs={"gradients": f32(3, 2, 5), "inputs": f32(4, 2, 5)},
         attrs={"min": -1.0, "max": 1.5}, grad=False),
    Case("vars", "FakeQuantWithMinMaxVars", inputs={"inputs": f32(5, 3, 4), "min": np.float32(-1.7), "max": np.float32(2.1)}),
    Case("vars_narrow", "FakeQuantWithMinMaxVars", inputs={"inputs": f32(6, 6), "min": np.float32(-2.5), "max": np.float32(0.9)},
         attrs={"num_bits": 5, "narrow_range": True}),
    Case("vars_grad_op", "FakeQuantWithMinMaxVarsGradient",
         inputs={"gradients": f32(7, 2, 3), "inputs": f32(8, 2, 3), "min": np.float32(-1.2), "max": np.float32(1.0)}, grad=False),
    Case("per_channel", "FakeQuantWithMinMaxVarsPerChannel",
         inputs={"inputs": f32(9, 2, 2, 3), "min": np.array([-1.0, -2.5, -0.3], np.float32),
                 "max": np.array([1.2, 0.7, 2.9], np.float32)}),
    Case("per_channel_grad_op", "FakeQuantWithMinMaxVarsPerChannelGradient",
         inputs={"gradients": f32(10, 4, 3), "inputs": f32(11, 4, 3), "min": np.array([-1.0, -0.5, -2.0], np.float32),
                 "max": np.array([0.5, 1.5, 2.0], np.float32)}, grad=False),
    Case("qdq_v2_own_range", "QuantizeAndDequantizeV2", inputs={"input": f32(12, 3, 4)},
         consts={"input_min": np.float32(0.0), "input_max": np.float32(0.0)}),
    Case("qdq_v2_given_unsigned", "QuantizeAndDequantizeV2", inputs={"input": f32(13, 2, 5)},
         consts={"input_min": np.float32(0.0), "input_max": np.float32(2.0)},
         attrs={"range_given": True, "signed_input": False, "num_bits": 4}),
    Case("qdq_v2_half_up_narrow", "QuantizeAndDequantizeV2", inputs={"input": f32(14, 8)},
         consts={"input_min": np.float32(-1.0), "input_max": np.float32(2.0)},
         attrs={"range_given": True, "round_mode": "HALF_UP", "narrow_range": True, "num_bits": 3}),
    Case("qdq_v2_axis", "QuantizeAndDequantizeV2", inputs={"input": f32(15, 2, 3, 2)},
         consts={"input_min": np.zeros(3, np.float32), "input_max": np.zeros(3, np.float32)}, attrs={"axis": 1}),
    Case("qdq_v2_f64", "QuantizeAndDequantizeV2", inputs={"input": f32(16, 6).astype(np.float64)},
         consts={"input_min": np.float64(-1.0), "input_max": np.float64(1.0)}, attrs={"range_given": True, "num_bits": 6}),
    Case("qdq_v3", "QuantizeAndDequantizeV3", inputs={"input": f32(17, 3, 3)},
         consts={"input_min": np.float32(-2.0), "input_max": np.float32(1.0), "num_bits": np.int32(5)}),
    Case("qdq_v4", "QuantizeAndDequantizeV4", inputs={"input": f32(18, 2, 6)},
         consts={"input_min": np.float32(-1.5), "input_max": np.float32(1.0)}, attrs={"range_given": True}),
    Case("qdq_v4_own_range", "QuantizeAndDequantizeV4", inputs={"input": f32(19, 7)},
         consts={"input_min": np.float32(-0.5), "input_max": np.float32(0.5)}),
]

if __name__ == "__main__":
    op_cases.write_family("quant", CASES)
