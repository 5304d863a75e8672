//! Elementwise ops beyond the basic arithmetic of `math`: rounding, sign,
//! `Erf`, `Log1p`, finiteness tests, logical ops, the activations Keras
//! uses (`Relu6`, `Elu`, `Selu`, `Softplus`, `LeakyRelu`) and the gradient
//! ops TensorFlow emits for them (`*Grad`, `SqrtGrad`).
//!
//! Floating-point kernels are generic over [`Flt`] (f32, f64); bf16 and
//! f16 reach them widened to f32 (see `dtypes`). One pass over the input,
//! no temporaries beyond the output.

use ndarray::{ArcArray, ArrayD, IxDyn};

use super::math::broadcast_zip;
use crate::exec::error::KernelError;
use crate::exec::tensor::{Element, Tensor};
use num_traits::Zero as _;

/// A floating-point element type: f32 or f64, with `erf` (f32: [`erf_f32`];
/// f64: libm).
pub(crate) trait Flt: num_traits::Float + num_traits::FromPrimitive + Element + Default {
    fn erf(self) -> Self;
    /// The constant `v` in this type.
    fn c(v: f64) -> Self {
        Self::from_f64(v).unwrap_or_else(Self::nan)
    }
}

impl Flt for f32 {
    fn erf(self) -> Self {
        erf_f32(self)
    }
}

/// Where `erf_f32` clamps its input: past 3.92 erf rounds to ±1 in f32.
const ERF_CLAMP: f32 = 3.92;
/// Numerator of `erf(x) / x ≈ P(x²) / Q(x²)`, lowest degree first.
const ERF_P: [f32; 7] = [
    std::f32::consts::FRAC_2_SQRT_PI,
    0.207_118_75,
    0.051_524_088,
    0.003_990_343,
    0.000_147_284_84,
    -1.942_399_4e-6,
    1.911_269e-8,
];
/// Denominator `Q(x²)`, lowest degree first.
const ERF_Q: [f32; 5] = [1.0, 0.516_885_46, 0.117_968_12, 0.014_957_567, 0.001_021_069_4];

/// `erf` in f32 as a rational function: `x * P(x²) / Q(x²)` with `x`
/// clamped to ±[`ERF_CLAMP`]. No branches or libm calls (no `mul_add`
/// either: without FMA in the target it is a libm call), so loops over it
/// vectorise. The coefficients are a least-squares (Lawson-weighted)
/// fit of the relative error of `erf(x) / x` on [0, 4], made for this
/// crate (relative error 6.5e-8 in exact arithmetic, within 4.3e-7
/// absolute, about 7 ulp, evaluated in f32 against the exact erf); this
/// is the same form as TensorFlow's CPU kernel, so results are close to
/// TensorFlow's.
pub(crate) fn erf_f32(x: f32) -> f32 {
    let x = x.clamp(-ERF_CLAMP, ERF_CLAMP);
    let t = x * x;
    let p = ERF_P.iter().rev().fold(0.0f32, |acc, &c| acc * t + c);
    let q = ERF_Q.iter().rev().fold(0.0f32, |acc, &c| acc * t + c);
    x * p / q
}

impl Flt for f64 {
    fn erf(self) -> Self {
        libm::erf(self)
    }
}

/// Runs `$body` with `$a` the array of an f32 or f64 tensor `$x` and `$T`
/// its element type; other dtypes are an error naming `$op`.
macro_rules! with_float {
    ($op:expr, $x:expr, $a:ident, $T:ident => $body:expr) => {
        match $x {
            Tensor::F32($a) => {
                type $T = f32;
                $body
            }
            Tensor::F64($a) => {
                type $T = f64;
                $body
            }
            other => Err(KernelError::dtype($op, other.dtype(), "a floating-point input is required")),
        }
    };
}
pub(crate) use with_float;

/// The array of `t` as element type `T`, or an error if `t` holds another dtype.
pub(crate) fn same<'a, T: Element>(
    op: &str,
    t: &'a Tensor,
    like: &Tensor,
) -> Result<&'a ArcArray<T, IxDyn>, KernelError> {
    t.array::<T>().ok_or_else(|| {
        KernelError::invalid(op, format!("inputs have different dtypes {} and {}", like.dtype(), t.dtype()))
    })
}

/// SELU's constants, as TensorFlow defines them.
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;

/// Unary floating-point ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatUnary {
    /// Round half to even, as `tf.round`.
    Round,
    Floor,
    Ceil,
    Erf,
    Log1p,
    Expm1,
    Cos,
    Relu6,
    Elu,
    Selu,
    /// `log(1 + exp(x))`, computed without overflow.
    Softplus,
    Softsign,
}

fn float_unary_value<T: Flt>(u: FloatUnary, x: T) -> T {
    let zero = T::zero();
    let one = T::one();
    match u {
        FloatUnary::Round => {
            let r = x.round();
            // `round` goes away from zero at .5; TensorFlow goes to the even neighbour.
            if (x - x.trunc()).abs() == T::c(0.5) && (r / T::c(2.0)).fract() != zero {
                r - x.signum()
            } else {
                r
            }
        }
        FloatUnary::Floor => x.floor(),
        FloatUnary::Ceil => x.ceil(),
        FloatUnary::Erf => x.erf(),
        FloatUnary::Log1p => x.ln_1p(),
        FloatUnary::Expm1 => x.exp_m1(),
        FloatUnary::Cos => x.cos(),
        FloatUnary::Relu6 => x.max(zero).min(T::c(6.0)),
        FloatUnary::Elu => {
            if x < zero {
                x.exp_m1()
            } else {
                x
            }
        }
        FloatUnary::Selu => {
            if x < zero {
                T::c(SELU_SCALE * SELU_ALPHA) * x.exp_m1()
            } else {
                T::c(SELU_SCALE) * x
            }
        }
        FloatUnary::Softplus => {
            // Past |x| = -log(eps) + 2 the result is x (or exp(x)) to working precision.
            let threshold = T::epsilon().ln() + T::c(2.0);
            if x > -threshold {
                x
            } else if x < threshold {
                x.exp()
            } else {
                x.exp().ln_1p()
            }
        }
        FloatUnary::Softsign => x / (one + x.abs()),
    }
}

/// A unary floating-point op.
pub(crate) fn float_unary(op: &str, u: FloatUnary, x: &Tensor) -> Result<Tensor, KernelError> {
    if let (FloatUnary::Erf, Tensor::F32(a)) = (u, x) {
        // A loop over `erf_f32` alone vectorises; the generic one matches `u` per element.
        return Ok(Tensor::from_array(a.mapv(erf_f32)));
    }
    with_float!(op, x, a, T => Ok(Tensor::from_array(a.mapv(|v: T| float_unary_value(u, v)))))
}

/// `LeakyRelu(x) {alpha}`.
pub(crate) fn leaky_relu(op: &str, x: &Tensor, alpha: f64) -> Result<Tensor, KernelError> {
    with_float!(op, x, a, T => {
        let alpha = T::c(alpha);
        Ok(Tensor::from_array(a.mapv(|v: T| if v > T::zero() { v } else { v * alpha })))
    })
}

/// `Sign(x)`: -1, 0 or 1 (NaN stays NaN), for floats and integers.
pub(crate) fn sign(op: &str, x: &Tensor) -> Result<Tensor, KernelError> {
    fn int<T: Copy + PartialOrd + Default + Element>(a: &ArcArray<T, IxDyn>, one: T, minus_one: T) -> Tensor {
        let zero = T::default();
        Tensor::from_array(a.mapv(|v| {
            if v > zero {
                one
            } else if v < zero {
                minus_one
            } else {
                zero
            }
        }))
    }
    match x {
        Tensor::I32(a) => Ok(int(a, 1, -1)),
        Tensor::I64(a) => Ok(int(a, 1, -1)),
        other => with_float!(op, other, a, T => Ok(Tensor::from_array(a.mapv(|v: T| {
            if v.is_nan() || v == T::zero() { v } else { v.signum() }
        })))),
    }
}

/// Finiteness tests, each giving a bool tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatTest {
    Finite,
    Nan,
    Inf,
}

/// `IsFinite`, `IsNan`, `IsInf`.
pub(crate) fn float_test(op: &str, t: FloatTest, x: &Tensor) -> Result<Tensor, KernelError> {
    with_float!(op, x, a, T => Ok(Tensor::from_array(a.mapv(|v: T| match t {
        FloatTest::Finite => v.is_finite(),
        FloatTest::Nan => v.is_nan(),
        FloatTest::Inf => v.is_infinite(),
    }))))
}

/// Logical ops on bool tensors (binary ones broadcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Logical {
    And,
    Or,
}

fn bools<'a>(op: &str, t: &'a Tensor) -> Result<&'a ArcArray<bool, IxDyn>, KernelError> {
    t.array::<bool>().ok_or_else(|| KernelError::dtype(op, t.dtype(), "bool inputs are required"))
}

/// `LogicalAnd`, `LogicalOr`.
pub(crate) fn logical(op: &str, l: Logical, x: &Tensor, y: &Tensor) -> Result<Tensor, KernelError> {
    let (a, b) = (bools(op, x)?, bools(op, y)?);
    let out = match l {
        Logical::And => broadcast_zip(op, a, b, |p, q| p && q)?,
        Logical::Or => broadcast_zip(op, a, b, |p, q| p || q)?,
    };
    Ok(Tensor::from_array(out))
}

/// `LogicalNot`.
pub(crate) fn logical_not(op: &str, x: &Tensor) -> Result<Tensor, KernelError> {
    Ok(Tensor::from_array(bools(op, x)?.mapv(|v| !v)))
}

/// Gradient ops of two same-dtype float inputs, broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatGrad {
    /// `SqrtGrad(y, dy) = dy * 0.5 / y`.
    Sqrt,
    /// `Relu6Grad(g, features) = g * (0 < features < 6)`.
    Relu6,
    /// `EluGrad(g, outputs) = g * (outputs + 1)` where outputs < 0, else g.
    Elu,
    /// `SeluGrad(g, outputs) = g * (outputs + scale * alpha)` where outputs < 0, else `g * scale`.
    Selu,
    /// `SoftplusGrad(g, features) = g * sigmoid(features)`.
    Softplus,
    /// `SoftsignGrad(g, features) = g / (1 + |features|)²`.
    Softsign,
}

fn float_grad_value<T: Flt>(k: FloatGrad, a: T, b: T) -> T {
    let (zero, one) = (T::zero(), T::one());
    match k {
        FloatGrad::Sqrt => b * T::c(0.5) / a,
        FloatGrad::Relu6 => {
            if b > zero && b < T::c(6.0) {
                a
            } else {
                zero
            }
        }
        FloatGrad::Elu => {
            if b < zero {
                a * (b + one)
            } else {
                a
            }
        }
        FloatGrad::Selu => {
            if b < zero {
                a * (b + T::c(SELU_SCALE * SELU_ALPHA))
            } else {
                a * T::c(SELU_SCALE)
            }
        }
        FloatGrad::Softplus => a / (one + (-b).exp()),
        FloatGrad::Softsign => a / ((one + b.abs()) * (one + b.abs())),
    }
}

/// A gradient op of [`FloatGrad`].
pub(crate) fn float_grad(op: &str, k: FloatGrad, x: &Tensor, y: &Tensor) -> Result<Tensor, KernelError> {
    with_float!(op, x, a, T => {
        let b = same::<T>(op, y, x)?;
        Ok(Tensor::from_array(broadcast_zip(op, a, b, |p: T, q: T| float_grad_value(k, p, q))?))
    })
}

/// `LeakyReluGrad(g, features) {alpha}`.
pub(crate) fn leaky_relu_grad(op: &str, g: &Tensor, features: &Tensor, alpha: f64) -> Result<Tensor, KernelError> {
    with_float!(op, g, a, T => {
        let f = same::<T>(op, features, g)?;
        let alpha = T::c(alpha);
        let out: ArrayD<T> = broadcast_zip(op, a, f, |g: T, x: T| if x > T::zero() { g } else { g * alpha })?;
        Ok(Tensor::from_array(out))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: &[f32]) -> Tensor {
        Tensor::vector(v.to_vec())
    }

    fn vals(t: Tensor) -> Vec<f32> {
        t.to_vec::<f32>().unwrap()
    }

    #[test]
    fn erf_f32_is_within_float_precision_of_the_exact_erf() {
        // Every 1/4096 over [-6, 6], against f64 libm's erf.
        let worst = (-6 * 4096..=6 * 4096)
            .map(|i| i as f32 / 4096.0)
            .map(|x| (f64::from(erf_f32(x)) - libm::erf(f64::from(x))).abs())
            .fold(0.0f64, f64::max);
        assert!(worst < 5e-7, "worst absolute error {worst}");
        assert_eq!(erf_f32(0.0), 0.0);
        assert_eq!(erf_f32(10.0), -erf_f32(-10.0));
        assert!((erf_f32(10.0) - 1.0).abs() < 5e-7);
    }

    #[test]
    fn round_goes_to_even() {
        let out = vals(float_unary("Round", FloatUnary::Round, &f(&[0.5, 1.5, 2.5, -0.5, -1.5, 1.4, -2.6])).unwrap());
        assert_eq!(out, vec![0.0, 2.0, 2.0, -0.0, -2.0, 1.0, -3.0]);
    }

    #[test]
    fn activations_follow_their_formulas() {
        let x = [-2.0f32, -0.5, 0.0, 0.7, 7.0];
        let xs = f(&x);
        let relu6 = vals(float_unary("Relu6", FloatUnary::Relu6, &xs).unwrap());
        assert_eq!(relu6, x.iter().map(|v| v.clamp(0.0, 6.0)).collect::<Vec<_>>());
        let elu = vals(float_unary("Elu", FloatUnary::Elu, &xs).unwrap());
        for (o, v) in elu.iter().zip(x) {
            let want = if v < 0.0 { v.exp() - 1.0 } else { v };
            assert!((o - want).abs() < 1e-6);
        }
        let sp = vals(float_unary("Softplus", FloatUnary::Softplus, &xs).unwrap());
        for (o, v) in sp.iter().zip(x) {
            assert!((o - (1.0 + v.exp()).ln()).abs() < 1e-5, "{o} {v}");
        }
        let lr = vals(leaky_relu("LeakyRelu", &xs, 0.2).unwrap());
        assert_eq!(lr, x.iter().map(|&v| if v > 0.0 { v } else { v * 0.2 }).collect::<Vec<_>>());
    }

    #[test]
    fn grads_mask_and_scale() {
        let g = f(&[1.0, 2.0, 3.0]);
        let feats = f(&[-1.0, 3.0, 6.5]);
        assert_eq!(vals(float_grad("Relu6Grad", FloatGrad::Relu6, &g, &feats).unwrap()), vec![0.0, 2.0, 0.0]);
        let outs = f(&[-0.5, 0.0, 2.0]);
        assert_eq!(vals(float_grad("EluGrad", FloatGrad::Elu, &g, &outs).unwrap()), vec![0.5, 2.0, 3.0]);
        let sq = vals(float_grad("SqrtGrad", FloatGrad::Sqrt, &f(&[2.0]), &f(&[4.0])).unwrap());
        assert_eq!(sq, vec![1.0]);
    }

    #[test]
    fn sign_tests_and_logic() {
        assert_eq!(sign("Sign", &Tensor::vector(vec![-3i32, 0, 9])).unwrap().to_vec::<i32>().unwrap(), vec![-1, 0, 1]);
        let t = float_test("IsFinite", FloatTest::Finite, &f(&[1.0, f32::NAN, f32::INFINITY])).unwrap();
        assert_eq!(t.to_vec::<bool>().unwrap(), vec![true, false, false]);
        let a = Tensor::vector(vec![true, false]);
        let b = Tensor::scalar(true);
        assert_eq!(logical("LogicalAnd", Logical::And, &a, &b).unwrap().to_vec::<bool>().unwrap(), vec![true, false]);
        assert_eq!(logical_not("LogicalNot", &a).unwrap().to_vec::<bool>().unwrap(), vec![false, true]);
        assert!(logical("LogicalOr", Logical::Or, &f(&[1.0]), &b).is_err());
    }
}
