//! The derivatives of the regularized lower incomplete gamma function
//! `P(a, x)` as TensorFlow's CPU kernels (Eigen's `igamma_der_a` and
//! `gamma_sample_der_alpha`) compute them: `IgammaGradA(a, x) = ∂P/∂a`, and
//! `RandomGammaGrad(a, x) = -(∂P/∂a) / (∂P/∂x)`, the derivative of a
//! `Gamma(a, 1)` sample `x` with respect to `a` (reparameterization).
//!
//! Both differentiate the two expansions `P` is evaluated by: the power
//! series where `x ≤ 1` or `x ≤ a`, the continued fraction for `1 - P`
//! otherwise; the derivative of each term is carried along with it and the
//! iteration stops when the derivative's last step is below machine
//! precision. Domain edges are Eigen's: 0 at `x = 0`, NaN for `x < 0`,
//! `a ≤ 0` or a NaN operand, 0 where `x^a e^-x / Γ(a)` underflows. Operands
//! broadcast NumPy style. f32 evaluates in f64 and rounds once. O(1)
//! expected work per element (at most 2000 terms).

use ndarray::{ArcArray, IxDyn};

use super::arg;
use super::math::broadcast_zip;
use super::special_fns::{digamma, lgamma};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;

/// What the expansions compute.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// `∂P/∂a`.
    Derivative,
    /// `-(∂P/∂a) / (∂P/∂x)`.
    SampleDerivative,
}

/// The most terms either expansion takes.
const MAX_TERMS: usize = 2000;

/// Runs `op` if it is one of these ops; `None` otherwise.
pub(crate) fn dispatch(op: &str, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let mode = match op {
        "IgammaGradA" => Mode::Derivative,
        "RandomGammaGrad" => Mode::SampleDerivative,
        _ => return None,
    };
    Some((|| {
        let (a, x) = (arg(op, inputs, 0)?, arg(op, inputs, 1)?);
        fn run<T: Copy>(
            op: &str,
            a: &ArcArray<T, IxDyn>,
            x: &ArcArray<T, IxDyn>,
            mode: Mode,
            wide: fn(T) -> f64,
            narrow: fn(f64) -> T,
        ) -> Result<ndarray::ArrayD<T>, KernelError> {
            broadcast_zip(op, a, x, |p, q| narrow(derivative(wide(p), wide(q), mode)))
        }
        let out = match (a, x) {
            (Tensor::F32(p), Tensor::F32(q)) => Tensor::from_array(run(op, p, q, mode, f64::from, |v| v as f32)?),
            (Tensor::F64(p), Tensor::F64(q)) => Tensor::from_array(run(op, p, q, mode, |v| v, |v| v)?),
            (p, q) if p.dtype() != q.dtype() => {
                return Err(KernelError::invalid(
                    op,
                    format!("a and x have different dtypes {} and {}", p.dtype(), q.dtype()),
                ))
            }
            (p, _) => return Err(KernelError::dtype(op, p.dtype(), "a is float or double")),
        };
        Ok(vec![out])
    })())
}

/// `∂P(a, x)/∂a` or the sample derivative, by Eigen's case split.
pub(crate) fn derivative(a: f64, x: f64, mode: Mode) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    if x < 0.0 || a <= 0.0 || a.is_nan() || x.is_nan() {
        return f64::NAN;
    }
    if x > 1.0 && x > a {
        -continued_fraction(a, x, mode)
    } else {
        series(a, x, mode)
    }
}

/// `x^a e^-x / Γ(a)`, or 0 where it underflows.
fn main_term(a: f64, x: f64) -> f64 {
    let log = a * x.ln() - x - lgamma(a);
    if log < -f64::MAX.ln() || log.is_nan() {
        0.0
    } else {
        log.exp()
    }
}

/// The series `P = x^a e^-x / Γ(a + 1) · Σ_k x^k / ((a+1)…(a+k))`, differentiated in `a`.
fn series(a: f64, x: f64, mode: Mode) -> f64 {
    let ax = main_term(a, x);
    if ax == 0.0 {
        return 0.0;
    }
    let (mut r, mut c, mut ans) = (a, 1.0, 1.0);
    let (mut dc_da, mut dans_da) = (0.0f64, 0.0f64);
    for _ in 0..MAX_TERMS {
        r += 1.0;
        let term = x / r;
        dc_da = term * dc_da - x / (r * r) * c;
        dans_da += dc_da;
        c *= term;
        ans += c;
        if dc_da.abs() <= f64::EPSILON / 2.0 * dans_da.abs() {
            break;
        }
    }
    let dlogax_da = x.ln() - digamma(a + 1.0);
    match mode {
        Mode::Derivative => ax * (dans_da + ans * dlogax_da) / a,
        Mode::SampleDerivative => -(dans_da + ans * dlogax_da) * x / a,
    }
}

/// Legendre's continued fraction for `Q = 1 - P`, differentiated in `a`.
fn continued_fraction(a: f64, x: f64, mode: Mode) -> f64 {
    if x.is_infinite() {
        return 0.0;
    }
    let ax = main_term(a, x);
    if ax == 0.0 {
        return 0.0;
    }
    let big = 1.0 / (f64::EPSILON / 2.0);
    let (mut y, mut z, mut c) = (1.0 - a, x + 2.0 - a, 0.0);
    let (mut pkm2, mut qkm2, mut pkm1, mut qkm1) = (1.0, x, x + 1.0, (x + 2.0 - a) * x);
    let mut ans = pkm1 / qkm1;
    let (mut dpkm2, mut dqkm2, mut dpkm1, mut dqkm1) = (0.0f64, 0.0f64, 0.0f64, -x);
    let mut dans_da = (dpkm1 - ans * dqkm1) / qkm1;
    for _ in 0..MAX_TERMS {
        c += 1.0;
        y += 1.0;
        z += 2.0;
        let yc = y * c;
        let pk = pkm1 * z - pkm2 * yc;
        let qk = qkm1 * z - qkm2 * yc;
        let dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * c;
        let dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * c;
        if qk != 0.0 {
            ans = pk / qk;
            let previous = dans_da;
            dans_da = (dpk - ans * dqk) / qk;
            if (dans_da - previous).abs() <= f64::EPSILON / 2.0 {
                break;
            }
        }
        (pkm2, pkm1, qkm2, qkm1) = (pkm1, pk, qkm1, qk);
        (dpkm2, dpkm1, dqkm2, dqkm1) = (dpkm1, dpk, dqkm1, dqk);
        if pk.abs() > big {
            for v in [&mut pkm2, &mut pkm1, &mut qkm2, &mut qkm1, &mut dpkm2, &mut dpkm1, &mut dqkm2, &mut dqkm1] {
                *v /= big;
            }
        }
    }
    let dlogax_da = x.ln() - digamma(a);
    match mode {
        Mode::Derivative => ax * (dans_da + ans * dlogax_da),
        Mode::SampleDerivative => -(dans_da + ans * dlogax_da) * x,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central differences of `special`'s `P(a, x)` in `a`.
    fn numeric(a: f64, x: f64) -> f64 {
        let h = 1e-6;
        (super::super::special_fns::igamma(a + h, x) - super::super::special_fns::igamma(a - h, x)) / (2.0 * h)
    }

    #[test]
    fn derivative_matches_finite_differences_on_both_expansions() {
        for &(a, x) in &[(0.5, 0.3), (2.0, 1.5), (3.0, 7.0), (1.5, 4.0), (10.0, 12.0)] {
            let d = derivative(a, x, Mode::Derivative);
            assert!((d - numeric(a, x)).abs() < 1e-6, "a={a} x={x}: {d} against {}", numeric(a, x));
        }
    }

    #[test]
    fn sample_derivative_is_minus_the_ratio_of_the_partials() {
        for &(a, x) in &[(0.5f64, 0.3f64), (3.0, 7.0)] {
            let dx = (-x + (a - 1.0) * x.ln() - lgamma(a)).exp();
            let want = -derivative(a, x, Mode::Derivative) / dx;
            let got = derivative(a, x, Mode::SampleDerivative);
            assert!((got - want).abs() < 1e-9 * want.abs().max(1.0), "a={a} x={x}: {got} against {want}");
        }
    }

    #[test]
    fn domain_edges_follow_eigen() {
        assert_eq!(derivative(2.0, 0.0, Mode::Derivative), 0.0);
        assert!(derivative(-1.0, 2.0, Mode::Derivative).is_nan());
        assert!(derivative(1.0, -2.0, Mode::SampleDerivative).is_nan());
        assert!(derivative(f64::NAN, 2.0, Mode::Derivative).is_nan());
    }
}
