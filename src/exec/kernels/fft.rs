//! Fast Fourier transforms (`rustfft`): `FFT`, `IFFT`, `RFFT`, `IRFFT` and
//! their 2-D and 3-D forms, over the innermost 1, 2 or 3 axes, as
//! TensorFlow's CPU kernels compute them.
//!
//! `FFT`/`IFFT` map complex to complex of the same shape; `IFFT` divides by
//! the number of points transformed. `RFFT(x, fft_length)` first crops
//! each transformed axis of the real `x` to `fft_length`, and keeps the
//! `n / 2 + 1` non-negative frequencies of the innermost axis (`n =
//! fft_length[-1]`). `IRFFT(y, fft_length)` crops the outer transformed
//! axes of `y` to `fft_length` and its innermost axis to `n / 2 + 1`,
//! inverts the outer axes, then treats each innermost lane as the half
//! spectrum of a real signal (Hermitian symmetry: the imaginary parts of
//! the zero and Nyquist frequencies are ignored) and returns `n` real
//! values. An axis shorter than that is an error, as in TensorFlow (its
//! CPU kernels and its XLA bridge alike); an empty one gives zeros, and a
//! zero length an empty result.

use ndarray::{ArcArray, ArrayD, Axis, IxDyn, Slice};
use num_complex::Complex;
use rustfft::{FftDirection, FftNum, FftPlanner};

use super::complex::{with_complex, Part};
use crate::exec::error::KernelError;
use crate::exec::tensor::{Element, Tensor};
use crate::ir::{AttrMap, DType};

/// The FFT ops, sorted.
pub(crate) const OPS: &[&str] =
    &["FFT", "FFT2D", "FFT3D", "IFFT", "IFFT2D", "IFFT3D", "IRFFT", "IRFFT2D", "IRFFT3D", "RFFT", "RFFT2D", "RFFT3D"];

/// How many innermost axes op `op` transforms (1 for `FFT`, 2 for `FFT2D`, ...).
pub(crate) fn fft_rank(op: &str) -> usize {
    if op.ends_with("3D") {
        3
    } else if op.ends_with("2D") {
        2
    } else {
        1
    }
}

/// The kernel of `op` when it is one of [`OPS`].
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    if !OPS.contains(&op) {
        return None;
    }
    let k = fft_rank(op);
    let arg = |i: usize| super::arg(op, inputs, i);
    let result = (|| {
        let x = arg(0)?;
        if x.shape().len() < k {
            return Err(KernelError::invalid(
                op,
                format!("the input must have rank >= {k}, got shape {:?}", x.shape()),
            ));
        }
        match op {
            "FFT" | "FFT2D" | "FFT3D" => with_complex!(op, x, F, a => Ok(complex_fft::<F>(a, k, false))),
            "IFFT" | "IFFT2D" | "IFFT3D" => with_complex!(op, x, F, a => Ok(complex_fft::<F>(a, k, true))),
            _ => {
                let lengths = fft_lengths(op, arg(1)?, k)?;
                check_long_enough(op, x.shape(), &lengths, op.starts_with("IRFFT"))?;
                let want = |d: &str| attrs.get(d).and_then(|v| v.as_type());
                if op.starts_with("RFFT") {
                    let out = match x {
                        Tensor::F32(a) => rfft::<f32>(a, &lengths),
                        Tensor::F64(a) => rfft::<f64>(a, &lengths),
                        other => {
                            return Err(KernelError::dtype(op, other.dtype(), "a float32 or float64 input is required"))
                        }
                    };
                    check_attr(op, "Tcomplex", want("Tcomplex"), out.dtype())?;
                    Ok(out)
                } else {
                    let out = with_complex!(op, x, F, a => Ok(irfft::<F>(a, &lengths)))?;
                    check_attr(op, "Treal", want("Treal"), out.dtype())?;
                    Ok(out)
                }
            }
        }
    })();
    Some(result.map(|t| vec![t]))
}

/// An error when a transformed axis of an input of `shape` is shorter than
/// its length (for an inverse real transform, the innermost one than
/// `n / 2 + 1`); an empty axis passes.
pub(crate) fn check_long_enough(
    op: &str,
    shape: &[usize],
    lengths: &[usize],
    inverse: bool,
) -> Result<(), KernelError> {
    let outer = shape.len() - lengths.len();
    for (i, &n) in lengths.iter().enumerate() {
        let need = if inverse && i + 1 == lengths.len() { n / 2 + 1 } else { n };
        let have = shape[outer + i];
        if have != 0 && have < need {
            return Err(KernelError::invalid(
                op,
                format!("input dimension {} must have length of at least {need} but got {have}", outer + i),
            ));
        }
    }
    Ok(())
}

/// An error when the dtype attribute `key` names another dtype than the kernel makes.
fn check_attr(op: &str, key: &str, want: Option<DType>, got: DType) -> Result<(), KernelError> {
    match want {
        Some(w) if w != got => Err(KernelError::invalid(op, format!("{key} is {w}, but the input makes {got}"))),
        _ => Ok(()),
    }
}

/// The `fft_length` operand: `k` non-negative lengths.
fn fft_lengths(op: &str, t: &Tensor, k: usize) -> Result<Vec<usize>, KernelError> {
    let v = t.to_i64_vec(op, "fft_length")?;
    if t.shape() != [k] {
        return Err(KernelError::invalid(op, format!("fft_length must have shape [{k}], got {:?}", t.shape())));
    }
    v.iter()
        .map(|&n| {
            usize::try_from(n).map_err(|_| KernelError::invalid(op, format!("fft_length {v:?} has a negative length")))
        })
        .collect()
}

/// `a` with each of its innermost `dims.len()` axes cropped to `dims` (an empty one zero-padded).
fn fit<T: Clone + Default>(a: &ArcArray<T, IxDyn>, dims: &[usize]) -> ArrayD<T> {
    let r = a.ndim();
    let outer = r - dims.len();
    let mut shape = a.shape().to_vec();
    shape[outer..].copy_from_slice(dims);
    if shape == a.shape() {
        return a.to_owned();
    }
    let mut out = ArrayD::from_elem(IxDyn(&shape), T::default());
    let keep = |ax: usize| a.shape()[ax].min(shape[ax]);
    out.slice_each_axis_mut(|d| Slice::from(0..keep(d.axis.index())))
        .assign(&a.slice_each_axis(|d| Slice::from(0..keep(d.axis.index()))));
    out
}

/// Transforms every lane of `a` along `axis` in place (unnormalized).
fn transform_axis<F: FftNum>(a: &mut ArrayD<Complex<F>>, axis: usize, direction: FftDirection) {
    let n = a.shape()[axis];
    if n == 0 || a.is_empty() {
        return;
    }
    let fft = FftPlanner::<F>::new().plan_fft(n, direction);
    let mut buffer = Vec::with_capacity(n);
    for mut lane in a.lanes_mut(Axis(axis)) {
        buffer.clear();
        buffer.extend(lane.iter().copied());
        fft.process(&mut buffer);
        lane.iter_mut().zip(&buffer).for_each(|(d, s)| *d = *s);
    }
}

/// `FFT` (forward) or `IFFT` (`inverse`, divided by the points transformed) over the innermost `k` axes.
fn complex_fft<F: Part + FftNum>(a: &ArcArray<Complex<F>, IxDyn>, k: usize, inverse: bool) -> Tensor
where
    Complex<F>: Element,
{
    let mut out = a.to_owned();
    let r = out.ndim();
    let direction = if inverse { FftDirection::Inverse } else { FftDirection::Forward };
    for axis in r - k..r {
        transform_axis(&mut out, axis, direction);
    }
    if inverse {
        let points: usize = out.shape()[r - k..].iter().product();
        if points > 0 {
            let scale = F::one() / F::from(points).unwrap_or_else(F::one);
            out.mapv_inplace(|z| z * scale);
        }
    }
    Tensor::from_array(out)
}

/// `RFFT` over the innermost `lengths.len()` axes of real `a`.
fn rfft<F: Part + FftNum>(a: &ArcArray<F, IxDyn>, lengths: &[usize]) -> Tensor
where
    Complex<F>: Element,
{
    let fitted = fit(a, lengths);
    let mut z = fitted.mapv(|v| Complex::new(v, F::zero()));
    let r = z.ndim();
    for axis in r - lengths.len()..r {
        transform_axis(&mut z, axis, FftDirection::Forward);
    }
    let n = lengths[lengths.len() - 1];
    let keep = if n == 0 { 0 } else { n / 2 + 1 };
    let half = z.slice_axis(Axis(r - 1), Slice::from(0..keep)).to_owned();
    Tensor::from_array(half)
}

/// `IRFFT` over the innermost `lengths.len()` axes of complex `a`.
fn irfft<F: Part + FftNum>(a: &ArcArray<Complex<F>, IxDyn>, lengths: &[usize]) -> Tensor {
    let k = lengths.len();
    let n = lengths[k - 1];
    let mut dims = lengths.to_vec();
    dims[k - 1] = if n == 0 { 0 } else { n / 2 + 1 };
    let mut z = fit(a, &dims);
    let r = z.ndim();
    for axis in r - k..r - 1 {
        transform_axis(&mut z, axis, FftDirection::Inverse);
    }
    let mut shape = z.shape().to_vec();
    shape[r - 1] = n;
    let mut out = ArrayD::from_elem(IxDyn(&shape), F::zero());
    let points: usize = lengths.iter().product();
    if points > 0 && !out.is_empty() {
        let scale = F::one() / F::from(points).unwrap_or_else(F::one);
        let fft = FftPlanner::<F>::new().plan_fft_inverse(n);
        let m = dims[k - 1];
        let mut full = vec![Complex::new(F::zero(), F::zero()); n];
        for (half, mut real) in z.lanes(Axis(r - 1)).into_iter().zip(out.lanes_mut(Axis(r - 1))) {
            // The negative frequencies are the conjugates of the positive ones.
            for (j, slot) in full.iter_mut().enumerate() {
                *slot = if j < m { half[j] } else { half[n - j].conj() };
            }
            fft.process(&mut full);
            real.iter_mut().zip(&full).for_each(|(d, s)| *d = s.re * scale);
        }
    }
    Tensor::from_array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: &str, inputs: &[Tensor]) -> Tensor {
        dispatch(op, &AttrMap::default(), inputs).expect("an FFT op").expect("runs").remove(0)
    }

    #[test]
    fn rfft_then_irfft_gives_the_signal_back() {
        let x = Tensor::from_vec(&[2, 5], (0..10).map(|v| f64::from(v) * 0.5 - 1.0).collect()).unwrap();
        let n = Tensor::from_vec(&[1], vec![5i32]).unwrap();
        let y = run("RFFT", &[x.clone(), n.clone()]);
        assert_eq!(y.shape(), &[2, 3]);
        let back = run("IRFFT", &[y, n]).to_vec::<f64>().unwrap();
        for (a, b) in back.iter().zip(x.to_vec::<f64>().unwrap()) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
    }

    #[test]
    fn fft_of_an_impulse_is_flat_and_ifft_divides() {
        let mut v = vec![Complex::new(0.0f32, 0.0); 4];
        v[0] = Complex::new(1.0, 0.0);
        let x = Tensor::from_vec(&[4], v).unwrap();
        let y = run("FFT", std::slice::from_ref(&x));
        assert!(y.to_vec::<Complex<f32>>().unwrap().iter().all(|z| *z == Complex::new(1.0, 0.0)));
        assert_eq!(run("IFFT", &[y]), x);
        let short = Tensor::from_vec(&[1], vec![8i32]).unwrap();
        let short_input = dispatch("RFFT", &AttrMap::default(), &[Tensor::vector(vec![1.0f32, 0.0, 0.0]), short]);
        assert!(short_input.unwrap().is_err(), "an input shorter than fft_length");
        let cropped = run("RFFT", &[Tensor::vector(vec![1.0f32; 9]), Tensor::vector(vec![8i32])]);
        assert_eq!(cropped.to_vec::<Complex<f32>>().unwrap()[0], Complex::new(8.0, 0.0));
        let bad = dispatch("RFFT", &AttrMap::default(), &[Tensor::scalar(1.0f32), Tensor::vector(vec![2i32])]);
        assert!(bad.unwrap().is_err());
    }
}
