//! Complex numbers: `Complex`, `Real`, `Imag`, `Conj`, `ComplexAbs`,
//! `Angle`, `ConjugateTranspose`, and the complex forms of the common
//! elementwise ops (`Add`, `Sub`, `Mul`, `Div`, `DivNoNan`, `Neg`,
//! `Square`, `Reciprocal`, `Sum`, `Mean`, `Cast`, `Equal`, `NotEqual`).
//!
//! complex64 pairs two f32, complex128 two f64 (`num_complex`). The real
//! parts of a complex op are of the matching float dtype (`Complex` of two
//! f32 is complex64; `Real` of complex128 is f64), as TensorFlow's `T` /
//! `Tout` attributes pair them. Arithmetic follows `num_complex`, which
//! computes as TensorFlow's CPU kernels (Eigen's `std::complex`) do up to
//! rounding; `ComplexAbs` is `hypot(re, im)`.

use ndarray::{ArcArray, IxDyn};
use num_complex::Complex;
use num_traits::{Float, Zero};

use super::math::{broadcast_zip, BinaryOp, Comparison, Reduce, UnaryOp};
use crate::exec::error::KernelError;
use crate::exec::tensor::{Element, Tensor};
use crate::ir::{AttrMap, DType};

/// The complex ops of this file with their own kernels, sorted.
pub(crate) const OPS: &[&str] = &["Angle", "Complex", "ComplexAbs", "Conj", "ConjugateTranspose", "Imag", "Real"];

/// A float that is the part of a complex element type held by tensors.
pub(crate) trait Part: Float + Element + Default {
    /// The complex dtype with parts of this type.
    const COMPLEX: DType;
}

impl Part for f32 {
    const COMPLEX: DType = DType::C64;
}

impl Part for f64 {
    const COMPLEX: DType = DType::C128;
}

/// Runs `$body` with `$F` the part type of complex tensor `$t` and `$a` its array.
macro_rules! with_complex {
    ($op:expr, $t:expr, $F:ident, $a:ident => $body:expr) => {
        match $t {
            Tensor::C64($a) => {
                #[allow(dead_code)]
                type $F = f32;
                $body
            }
            Tensor::C128($a) => {
                #[allow(dead_code)]
                type $F = f64;
                $body
            }
            other => Err(KernelError::dtype($op, other.dtype(), "a complex64 or complex128 input is required")),
        }
    };
}
pub(crate) use with_complex;

/// The kernel of `op` when it is one of [`OPS`].
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    if !OPS.contains(&op) {
        return None;
    }
    let arg = |i: usize| super::arg(op, inputs, i);
    let result = (|| match op {
        "Complex" => complex(op, arg(0)?, arg(1)?),
        "Real" => with_complex!(op, arg(0)?, F, a => Ok(Tensor::from_array(a.mapv(|z| z.re)))),
        "Imag" => with_complex!(op, arg(0)?, F, a => Ok(Tensor::from_array(a.mapv(|z| z.im)))),
        "ComplexAbs" => with_complex!(op, arg(0)?, F, a => Ok(Tensor::from_array(a.mapv(|z| z.re.hypot(z.im))))),
        "Angle" => with_complex!(op, arg(0)?, F, a => Ok(Tensor::from_array(a.mapv(|z| z.im.atan2(z.re))))),
        "Conj" => conj(op, arg(0)?),
        "ConjugateTranspose" => {
            let t = super::shape::transpose(op, arg(0)?, arg(1)?)?;
            // A real tensor is its own conjugate.
            if is_complex(t.dtype()) {
                conj(op, &t)
            } else {
                Ok(t)
            }
        }
        _ => Err(KernelError::NoKernel { op: op.to_string() }),
    })();
    let _ = attrs;
    Some(result.map(|t| vec![t]))
}

/// True for complex64 and complex128.
pub(crate) fn is_complex(d: DType) -> bool {
    matches!(d, DType::C64 | DType::C128)
}

/// `Complex(real, imag)`: the two float tensors (broadcast) as one complex tensor.
fn complex(op: &str, re: &Tensor, im: &Tensor) -> Result<Tensor, KernelError> {
    fn make<F: Part>(op: &str, re: &ArcArray<F, IxDyn>, im: &ArcArray<F, IxDyn>) -> Result<Tensor, KernelError>
    where
        Complex<F>: Element,
    {
        Ok(Tensor::from_array(broadcast_zip(op, re, im, Complex::new)?))
    }
    match (re, im) {
        (Tensor::F32(a), Tensor::F32(b)) => make(op, a, b),
        (Tensor::F64(a), Tensor::F64(b)) => make(op, a, b),
        (a, b) if a.dtype() != b.dtype() => Err(KernelError::invalid(
            op,
            format!("real and imag have different dtypes {} and {}", a.dtype(), b.dtype()),
        )),
        (a, _) => Err(KernelError::dtype(op, a.dtype(), "real and imag must be float32 or float64")),
    }
}

/// `Conj(x)`: the complex conjugate.
fn conj(op: &str, x: &Tensor) -> Result<Tensor, KernelError> {
    match x {
        Tensor::C64(a) => Ok(Tensor::from_array(a.mapv(|z| z.conj()))),
        Tensor::C128(a) => Ok(Tensor::from_array(a.mapv(|z| z.conj()))),
        other => Err(KernelError::dtype(op, other.dtype(), "a complex64 or complex128 input is required")),
    }
}

/// An elementwise binary op on two complex tensors; `None` when `x` is not complex.
pub(crate) fn binary(op: &str, kind: BinaryOp, x: &Tensor, y: &Tensor) -> Option<Result<Tensor, KernelError>> {
    fn run<F: Part>(
        op: &str,
        b: BinaryOp,
        x: &ArcArray<Complex<F>, IxDyn>,
        y: &ArcArray<Complex<F>, IxDyn>,
    ) -> Result<Tensor, KernelError>
    where
        Complex<F>: Element,
    {
        let out = match b {
            BinaryOp::Add => broadcast_zip(op, x, y, |a, b| a + b)?,
            BinaryOp::Sub => broadcast_zip(op, x, y, |a, b| a - b)?,
            BinaryOp::Mul => broadcast_zip(op, x, y, |a, b| a * b)?,
            BinaryOp::Div => broadcast_zip(op, x, y, |a, b| a / b)?,
            BinaryOp::DivNoNan => broadcast_zip(op, x, y, |a, b| if b.is_zero() { Complex::zero() } else { a / b })?,
            // (x - y) conj(x - y), as TensorFlow's complex SquaredDifference.
            BinaryOp::SquaredDifference => broadcast_zip(op, x, y, |a, b| (a - b) * (a - b).conj())?,
            other => {
                return Err(KernelError::dtype(op, F::COMPLEX, format!("{other:?} is not defined on complex numbers")))
            }
        };
        Ok(Tensor::from_array(out))
    }
    Some(match (x, y) {
        (Tensor::C64(a), Tensor::C64(b)) => run(op, kind, a, b),
        (Tensor::C128(a), Tensor::C128(b)) => run(op, kind, a, b),
        (Tensor::C64(_) | Tensor::C128(_), other) | (other, Tensor::C64(_) | Tensor::C128(_)) => {
            Err(KernelError::invalid(op, format!("inputs have different dtypes {} and {}", x.dtype(), other.dtype())))
        }
        _ => return None,
    })
}

/// `Equal` / `NotEqual` of two complex tensors (the only comparisons complex numbers have); `None`
/// when `x` is not complex.
pub(crate) fn compare(op: &str, c: Comparison, x: &Tensor, y: &Tensor) -> Option<Result<Tensor, KernelError>> {
    fn run<F: Part>(
        op: &str,
        c: Comparison,
        x: &ArcArray<Complex<F>, IxDyn>,
        y: &ArcArray<Complex<F>, IxDyn>,
    ) -> Result<Tensor, KernelError> {
        let out = match c {
            Comparison::Equal => broadcast_zip(op, x, y, |a, b| a == b)?,
            Comparison::NotEqual => broadcast_zip(op, x, y, |a, b| a != b)?,
            other => {
                return Err(KernelError::dtype(op, F::COMPLEX, format!("{other:?} does not order complex numbers")))
            }
        };
        Ok(Tensor::from_array(out))
    }
    Some(match (x, y) {
        (Tensor::C64(a), Tensor::C64(b)) => run(op, c, a, b),
        (Tensor::C128(a), Tensor::C128(b)) => run(op, c, a, b),
        (Tensor::C64(_) | Tensor::C128(_), other) | (other, Tensor::C64(_) | Tensor::C128(_)) => {
            Err(KernelError::invalid(op, format!("inputs have different dtypes {} and {}", x.dtype(), other.dtype())))
        }
        _ => return None,
    })
}

/// An elementwise unary op on a complex tensor; `None` when `x` is not complex.
pub(crate) fn unary(op: &str, u: UnaryOp, x: &Tensor) -> Option<Result<Tensor, KernelError>> {
    fn run<F: Part>(op: &str, u: UnaryOp, a: &ArcArray<Complex<F>, IxDyn>) -> Result<Tensor, KernelError>
    where
        Complex<F>: Element,
    {
        let one = Complex::new(F::one(), F::zero());
        Ok(Tensor::from_array(match u {
            UnaryOp::Neg => a.mapv(|z| -z),
            UnaryOp::Square => a.mapv(|z| z * z),
            UnaryOp::Reciprocal => a.mapv(|z| one / z),
            UnaryOp::Exp => a.mapv(|z| z.exp()),
            UnaryOp::Sqrt => a.mapv(|z| z.sqrt()),
            UnaryOp::Log => a.mapv(|z| z.ln()),
            other => {
                return Err(KernelError::dtype(op, F::COMPLEX, format!("{other:?} is not defined on complex numbers")))
            }
        }))
    }
    match x {
        Tensor::C64(a) => Some(run(op, u, a)),
        Tensor::C128(a) => Some(run(op, u, a)),
        _ => None,
    }
}

/// `Sum` / `Mean` of a complex tensor over normalized `axes`; `None` when `x` is not complex.
pub(crate) fn reduce(x: &Tensor, kind: Reduce, axes: &[usize], keep: bool) -> Option<Tensor> {
    fn run<F: Part>(a: &ArcArray<Complex<F>, IxDyn>, kind: Reduce, axes: &[usize], keep: bool) -> Tensor
    where
        Complex<F>: Element,
    {
        let source = a.as_standard_layout();
        let mut shape = a.shape().to_vec();
        let mut sums: Option<Vec<Complex<F>>> = None;
        // The last axis first, each pass over a standard-layout [outer, n, inner], as for real sums.
        let mut sorted = axes.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        for &axis in sorted.iter().rev() {
            let outer: usize = shape[..axis].iter().product();
            let inner: usize = shape[axis + 1..].iter().product();
            let data = match &sums {
                Some(v) => v.as_slice(),
                None => source.as_slice().expect("standard layout"),
            };
            sums = Some(super::strided::sum_middle(data, (outer, shape[axis], inner), Complex::zero(), |p, q| p + q));
            shape.remove(axis);
        }
        let mut out = match sums {
            Some(v) => ndarray::ArrayD::from_shape_vec(IxDyn(&shape), v).expect("the shape holds the sums"),
            None => a.to_owned(),
        };
        if kind == Reduce::Mean {
            let count: usize = sorted.iter().map(|&i| a.shape()[i]).product();
            let n = F::from(count).unwrap_or_else(F::nan);
            out.mapv_inplace(|z| z / n);
        }
        if keep {
            for &axis in &sorted {
                out.insert_axis_inplace(ndarray::Axis(axis));
            }
        }
        Tensor::from_array(out)
    }
    match x {
        Tensor::C64(a) => Some(run(a, kind, axes, keep)),
        Tensor::C128(a) => Some(run(a, kind, axes, keep)),
        _ => None,
    }
}

/// `Cast` from or to a complex dtype; `None` when neither side is complex. A
/// real value becomes `v + 0i`; a complex one cast to a real dtype keeps its
/// real part, as TensorFlow's `Cast` does.
pub(crate) fn cast(op: &str, x: &Tensor, to: DType) -> Option<Result<Tensor, KernelError>> {
    if !is_complex(x.dtype()) && !is_complex(to) {
        return None;
    }
    Some((|| {
        let (re, im): (Tensor, Option<Tensor>) = match x {
            Tensor::C64(a) => (Tensor::from_array(a.mapv(|z| z.re)), Some(Tensor::from_array(a.mapv(|z| z.im)))),
            Tensor::C128(a) => (Tensor::from_array(a.mapv(|z| z.re)), Some(Tensor::from_array(a.mapv(|z| z.im)))),
            real => (real.clone(), None),
        };
        match to {
            DType::C64 | DType::C128 => {
                let part = if to == DType::C64 { DType::F32 } else { DType::F64 };
                let re = super::dtypes::cast(op, &re, part)?;
                let im = match im {
                    Some(im) => super::dtypes::cast(op, &im, part)?,
                    None => super::shape::filled_like(op, &re, 0)?,
                };
                complex(op, &re, &im)
            }
            real => super::dtypes::cast(op, &re, real),
        }
    })())
}

/// Zeros or ones (`value`) shaped like complex `x`; `None` when `x` is not complex.
pub(crate) fn filled_like(x: &Tensor, value: u8) -> Option<Tensor> {
    let shape = IxDyn(x.shape());
    let v = f64::from(value);
    match x {
        Tensor::C64(_) => Some(Tensor::C64(ArcArray::from_elem(shape, Complex::new(v as f32, 0.0)))),
        Tensor::C128(_) => Some(Tensor::C128(ArcArray::from_elem(shape, Complex::new(v, 0.0)))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c64(shape: &[usize], v: &[(f32, f32)]) -> Tensor {
        Tensor::from_vec(shape, v.iter().map(|&(a, b)| Complex::new(a, b)).collect()).unwrap()
    }

    #[test]
    fn parts_and_back() {
        let re = Tensor::from_vec(&[2], vec![3.0f32, -1.0]).unwrap();
        let im = Tensor::from_vec(&[2], vec![4.0f32, 0.5]).unwrap();
        let z = dispatch("Complex", &AttrMap::default(), &[re.clone(), im.clone()]).unwrap().unwrap().remove(0);
        assert_eq!(z, c64(&[2], &[(3.0, 4.0), (-1.0, 0.5)]));
        let run = |op: &str| dispatch(op, &AttrMap::default(), std::slice::from_ref(&z)).unwrap().unwrap().remove(0);
        assert_eq!(run("Real"), re);
        assert_eq!(run("Imag"), im);
        assert_eq!(run("ComplexAbs").to_vec::<f32>().unwrap()[0], 5.0);
        assert_eq!(run("Conj"), c64(&[2], &[(3.0, -4.0), (-1.0, -0.5)]));
        let mixed = [re, Tensor::from_vec(&[2], vec![1.0f64, 2.0]).unwrap()];
        assert!(dispatch("Complex", &AttrMap::default(), &mixed).unwrap().is_err());
    }

    #[test]
    fn arithmetic_casts_and_sums() {
        let a = c64(&[2], &[(1.0, 2.0), (0.0, 1.0)]);
        let b = c64(&[2], &[(3.0, -1.0), (0.0, 1.0)]);
        let p = binary("Mul", BinaryOp::Mul, &a, &b).unwrap().unwrap();
        assert_eq!(p, c64(&[2], &[(5.0, 5.0), (-1.0, 0.0)]));
        assert!(binary("Max", BinaryOp::Max, &a, &b).unwrap().is_err());
        let eq = compare("Equal", Comparison::Equal, &a, &b).unwrap().unwrap();
        assert_eq!(eq.to_vec::<bool>().unwrap(), vec![false, true]);
        assert!(compare("Less", Comparison::Less, &a, &b).unwrap().is_err());
        let s = reduce(&a, Reduce::Sum, &[0], false).unwrap();
        assert_eq!(s, c64(&[], &[(1.0, 3.0)]));
        let ints = Tensor::from_vec(&[2], vec![2i32, -3]).unwrap();
        assert_eq!(cast("Cast", &ints, DType::C64).unwrap().unwrap(), c64(&[2], &[(2.0, 0.0), (-3.0, 0.0)]));
        assert_eq!(cast("Cast", &a, DType::F64).unwrap().unwrap(), Tensor::from_vec(&[2], vec![1.0f64, 0.0]).unwrap());
    }
}
