"""Op cases of the special family: special functions, elementwise math and the gradients of
elementwise ops, with TensorFlow's values (see op_cases.py).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_special.py

Writes tests/tf/corpus/ops/special.{pb,json}; tests/it/op_cases.rs (`special`) compares the simulator
and PJRT with them. Inputs lie inside each op's domain, away from poles and branch cuts.
"""

import numpy as np

import op_cases
from op_cases import Case

F32, F64 = np.float32, np.float64


def a(values, dtype=F32):
    return np.array(values, dtype=dtype)


def cases():
    out = []
    pos = [0.3, 1.5, 2.7, 4.2, 7.9]
    # f64 for the functions whose f32 and f64 kernels differ (libm's lgammaf; CHLO's expansions);
    # the others evaluate one f64 routine for both (a second dtype would only slow XLA's compile).
    for dt, tag in ((F32, "f32"), (F64, "f64")):
        out += [
            Case(f"lgamma_{tag}", "Lgamma", inputs={"x": a(pos + [-0.6, -2.3], dt)}, grad=True),
            Case(f"digamma_{tag}", "Digamma", inputs={"x": a(pos + [-0.6, -2.3], dt)}, grad=True),
        ]
    out += [
        Case("erfinv", "Erfinv", inputs={"x": a([-0.95, -0.3, 0.0, 0.1, 0.5, 0.9])}, grad=True),
        Case("ndtri", "Ndtri", inputs={"x": a([0.01, 0.2, 0.5, 0.8, 0.999])}, grad=True),
        Case("bessel_i0e", "BesselI0e", inputs={"x": a([-3.0, -0.5, 0.0, 0.7, 12.0, 40.0])}, grad=True),
        Case("bessel_i1e", "BesselI1e", inputs={"x": a([-3.0, -0.5, 0.7, 12.0, 40.0])}, grad=True),
        Case("zeta", "Zeta", inputs={"x": a([2.0, 3.5, 5.0]), "q": a([0.5, 1.2, 3.0])}, grad=True),
        Case("polygamma", "Polygamma", inputs={"a": a([0.0, 1.0, 2.0, 3.0]), "x": a([0.5, 1.5, 2.5, 4.0])},
             grad=True),
        Case("atan2", "Atan2", inputs={"y": a([[0.5, -1.0, 2.0], [0.0, 3.0, -0.2]]), "x": a([1.0, -2.0, 0.5])},
             grad=True),
        Case("next_after_f64", "NextAfter",
             inputs={"x1": a([1.0, -2.5, 0.0, 3.0], F64), "x2": a([2.0, -3.0, 1.0, 3.0], F64)}, grad=True),
    ]
    x4 = a([0.0, 1.5, -2.0, 0.5])
    y4 = a([0.5, 2.0, 3.0, 0.25])
    out += [
        Case("xlogy", "Xlogy", inputs={"x": x4, "y": y4}, grad=True),
        Case("xdivy", "Xdivy", inputs={"x": x4, "y": a([[0.5], [-2.0]])}, grad=True),
        Case("xlog1py", "Xlog1py", inputs={"x": x4, "y": a([-0.5, 2.0, 3.0, 0.25], F64).astype(F32)}, grad=True),
        Case("mul_no_nan", "MulNoNan", inputs={"x": a([1.5, -2.0, 3.0, 0.5]), "y": a([0.0, 2.0, 0.0, -1.0])}, grad=True),
        Case("div", "Div", inputs={"x": a([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]]), "y": a([2.0, -0.5, 3.0])}, grad=True),
        Case("inv", "Inv", inputs={"x": a([0.5, -2.0, 3.0])}, grad=True),
        Case("reciprocal_grad", "ReciprocalGrad", inputs={"y": a([0.5, -2.0, 3.0]), "dy": a([1.0, 0.5, -2.0])},
             grad=True),
        Case("truncate_div_f32", "TruncateDiv", inputs={"x": a([7.5, -7.5, 3.0]), "y": a([2.0, 2.0, -4.0])}),
        Case("truncate_mod_f32", "TruncateMod", inputs={"x": a([7.5, -7.5, 3.0]), "y": a([2.0, 2.0, -4.0])}),
        Case("mod_f64", "Mod", inputs={"x": a([7.5, -7.5, 3.0], F64), "y": a([2.0, 2.0, -4.0], F64)}),
        Case("approximate_equal", "ApproximateEqual",
             inputs={"x": a([1.0, 2.0, 3.0]), "y": a([1.0005, 2.1, 3.0])}, attrs={"tolerance": 0.001}),
        Case("clip_by_value", "ClipByValue",
             inputs={"t": a([[-2.0, 0.5, 3.0], [1.0, -0.5, 9.0]]), "clip_value_min": a(-1.0),
                     "clip_value_max": a(2.0)}, grad=True),
        Case("clip_by_value_tensors", "ClipByValue",
             inputs={"t": a([-2.0, 0.5, 3.0]), "clip_value_min": a([-1.0, 1.0, 0.0]),
                     "clip_value_max": a([2.0, 2.0, 2.5])}, grad=True),
        Case("erfc", "Erfc", inputs={"x": a([-1.2, -0.3, 0.0, 0.4, 1.7])}, grad=True),
        Case("expm1", "Expm1", inputs={"x": a([-1.2, -0.3, 0.0, 0.4, 1.7])}, grad=True),
        Case("log1p", "Log1p", inputs={"x": a([-0.5, -0.3, 0.0, 0.4, 1.7])}, grad=True),
        Case("softsign", "Softsign", inputs={"features": a([-1.2, -0.3, 0.0, 0.4, 1.7])}, grad=True),
        Case("elu_grad", "EluGrad", inputs={"gradients": a([0.5, -1.0, 2.0, 1.5]),
                                            "outputs": a([-0.6, -0.2, 0.0, 1.3])}, grad=True),
        Case("selu_grad", "SeluGrad", inputs={"gradients": a([0.5, -1.0, 2.0, 1.5]),
                                              "outputs": a([-0.6, -0.2, 0.4, 1.3])}, grad=True),
        # At the kink TensorFlow's CPU kernel takes the positive branch and its XLA bridge the other.
        Case("selu_grad_at_zero", "SeluGrad", inputs={"gradients": a([2.0, 1.5]), "outputs": a([0.0, 0.0])},
             grad=False),
        Case("softplus_grad", "SoftplusGrad", inputs={"gradients": a([0.5, -1.0, 2.0, 1.5]),
                                                      "features": a([-1.6, -0.2, 0.0, 1.3])}, grad=True),
        Case("relu6_grad", "Relu6Grad", inputs={"gradients": a([0.5, -1.0, 2.0, 1.5]),
                                                "features": a([-1.6, 0.2, 5.0, 6.5])}, grad=True),
        Case("leaky_relu_grad", "LeakyReluGrad", inputs={"gradients": a([0.5, -1.0, 2.0, 1.5]),
                                                         "features": a([-1.6, 0.2, -5.0, 6.5])},
             attrs={"alpha": 0.3}, grad=True),
        Case("sqrt_grad", "SqrtGrad", inputs={"y": a([0.5, 1.5, 3.0]), "dy": a([1.0, -0.5, 2.0])}, grad=True),
        Case("rsqrt_grad", "RsqrtGrad", inputs={"y": a([0.5, 1.5, 3.0]), "dy": a([1.0, -0.5, 2.0])}, grad=True),
        Case("select_rows", "Select",
             inputs={"condition": np.array([True, False, True]), "x": a([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
                     "y": a([[-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0]])}, grad=True),
        Case("select_elementwise", "Select",
             inputs={"condition": np.array([True, False, False, True]), "x": a([1.0, 2.0, 3.0, 4.0]),
                     "y": a([-1.0, -2.0, -3.0, -4.0])}, grad=True),
        Case("l2_loss", "L2Loss", inputs={"t": a([[1.0, -2.0], [0.5, 3.0]])}, grad=True),
        Case("cumprod", "Cumprod", inputs={"x": a([[1.5, -2.0, 0.5], [2.0, 0.0, 3.0]])}, consts={"axis": np.int32(1)},
             grad=True),
        Case("cumprod_exclusive_reverse", "Cumprod", inputs={"x": a([[1.5, -2.0, 0.5], [2.0, 0.7, 3.0]])},
             consts={"axis": np.int32(1)}, attrs={"exclusive": True, "reverse": True}, grad=True),
        Case("identity_n", "IdentityN", inputs={"input": [a([1.0, -2.0]), a([[0.5], [3.0]])]}, grad=True),
        Case("placeholder_with_default", "PlaceholderWithDefault", inputs={"input": a([1.0, -2.0, 0.5])},
             attrs={"shape": [3]}, grad=True),
        Case("check_numerics", "CheckNumerics", inputs={"tensor": a([1.0, -2.0, 0.5])}, attrs={"message": "x"},
             grad=True),
        Case("ensure_shape", "EnsureShape", inputs={"input": a([[1.0, -2.0, 0.5]])}, attrs={"shape": [None, 3]},
             grad=True),
        Case("prevent_gradient", "PreventGradient", inputs={"input": a([1.0, -2.0, 0.5])}),
        Case("to_bool_scalar", "ToBool", inputs={"input": a(0.0)}),
        Case("to_bool_tensor", "ToBool", inputs={"input": a([0.0, 0.0])}),
        Case("bitcast_f32_i32", "Bitcast", inputs={"input": a([1.0, -2.5, 0.0])}, attrs={"type": np.int32}),
        Case("bitcast_f64_i32", "Bitcast", inputs={"input": a([1.0, -2.5], F64)}, attrs={"type": np.int32}),
        Case("bitcast_u8_f32", "Bitcast", inputs={"input": np.array([[0, 0, 128, 63], [0, 0, 32, 193]], np.uint8)},
             attrs={"type": np.float32}),
    ]
    return out


def bitwise_cases():
    i32 = lambda v: np.array(v, np.int32)  # noqa: E731
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    u8 = lambda v: np.array(v, np.uint8)  # noqa: E731
    x = i32([[12, -7, 0, 255], [1, 2, -1, 1023]])
    y = i32([10, 3, -5, 129])
    return [
        Case("and_i32", "BitwiseAnd", inputs={"x": x, "y": y}),
        Case("or_i64", "BitwiseOr", inputs={"x": i64([12, -7, 0, 1 << 40]), "y": i64([10, 3, -5, 129])}),
        Case("xor_u8", "BitwiseXor", inputs={"x": u8([12, 200, 0, 255]), "y": u8([10, 3, 77, 129])}),
        Case("invert_i32", "Invert", inputs={"x": x}),
        Case("invert_u8", "Invert", inputs={"x": u8([0, 1, 200, 255])}),
        Case("left_shift_i32", "LeftShift", inputs={"x": i32([1, -3, 7, 1 << 20]), "y": i32([0, 4, 31, 3])}),
        Case("right_shift_i32", "RightShift", inputs={"x": i32([1024, -300, 7, -1]), "y": i32([3, 4, 1, 31])}),
        Case("right_shift_u8", "RightShift", inputs={"x": u8([200, 255, 7, 1]), "y": u8([3, 7, 1, 0])}),
        Case("population_count_i32", "PopulationCount", inputs={"x": i32([0, 1, -1, 255, -256])}),
        Case("population_count_i64", "PopulationCount", inputs={"x": i64([0, 7, -1, 1 << 40])}),
        Case("truncate_div_i32", "TruncateDiv", inputs={"x": i32([7, -7, 7, -7]), "y": i32([2, 2, -2, -2])}),
        Case("truncate_mod_i32", "TruncateMod", inputs={"x": i32([7, -7, 7, -7]), "y": i32([2, 2, -2, -2])}),
        Case("mod_i64", "Mod", inputs={"x": i64([7, -7, 7, -7]), "y": i64([3, 3, -3, -3])}),
    ]


if __name__ == "__main__":
    op_cases.write_family("special", cases())
    op_cases.write_family("bitwise", bitwise_cases())
