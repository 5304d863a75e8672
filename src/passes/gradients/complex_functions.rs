//! Gradient functions of the complex-number ops (`math_grad.py`:
//! `Complex`, `Real`, `Imag`, `Conj`, `ComplexAbs`, `Angle`,
//! `ConjugateTranspose`) and of the FFTs (`spectral_grad.py`: `FFT`,
//! `IFFT` in 1-3 dimensions, `RFFT` and `IRFFT` in 1 and 2: TensorFlow
//! registers none for `RFFT3D` and `IRFFT3D`).
//!
//! A complex gradient follows TensorFlow's convention: for a real loss `L`
//! of `z`, the gradient is `∂L/∂re(z) + i ∂L/∂im(z)`. The FFT gradients are
//! the adjoint transforms, written with the FFT ops themselves: the adjoint
//! of `FFT` is `conj(FFT(conj(g)))` (`n · IFFT(g)`), that of `IFFT` is
//! `conj(IFFT(conj(g)))` (`FFT(g) / n`). `RFFT`'s is `IRFFT` of `g` with its
//! duplicated frequencies (all but the zero and Nyquist ones) halved, times
//! the number of points; `IRFFT`'s is `RFFT(g)` with those frequencies
//! doubled, divided by it. They equal TensorFlow's gradients, which build
//! the same sums from masks and matrix products. As in TensorFlow, the
//! real transforms' gradients take `fft_length` as a constant and assume
//! the transformed axes were neither cropped nor padded.

use std::sync::Arc;

use super::emitter::{Emitter, Tensor};
use super::functions::{Broadcast, Unsupported};
use crate::ir::{AttrValue, DType, NodeId, TensorData, TensorLit};

/// The complex dtype whose parts are `d` (complex64 for anything but f64).
fn complex_of(d: Option<DType>) -> DType {
    match d {
        Some(DType::F64) => DType::C128,
        _ => DType::C64,
    }
}

/// The dtype of the parts of complex `d` (f32 for anything but complex128).
fn part_of(d: Option<DType>) -> DType {
    match d {
        Some(DType::C128) => DType::F64,
        _ => DType::F32,
    }
}

fn ty(key: &'static str, d: DType) -> (&'static str, AttrValue) {
    (key, AttrValue::Type(d))
}

/// A constant vector of `dtype` (a float or complex dtype) with real `values` (imaginary parts 0).
fn vector_const(e: &mut Emitter<'_>, base: &str, dtype: DType, values: &[f64], scalar: bool) -> Tensor {
    let data = match dtype {
        DType::F64 => TensorData::Double(values.to_vec()),
        DType::C64 => TensorData::Float(values.iter().flat_map(|&v| [v as f32, 0.0]).collect()),
        DType::C128 => TensorData::Double(values.iter().flat_map(|&v| [v, 0.0]).collect()),
        _ => TensorData::Float(values.iter().map(|&v| v as f32).collect()),
    };
    let shape = if scalar { Vec::new() } else { vec![values.len() as i64] };
    let lit = TensorLit { dtype, shape, data };
    e.emit("Const", base, &[], [ty("dtype", dtype), ("value", AttrValue::Tensor(Arc::new(lit)))])
}

/// The constant `fft_length` of an `RFFT`/`IRFFT` node.
fn fft_lengths(e: &Emitter<'_>, t: Tensor, op_type: &str) -> Result<Vec<usize>, Unsupported> {
    let node = e.graph.node(t.node);
    let lit = (&*node.op == "Const").then(|| node.attrs.get("value").and_then(|v| v.as_tensor())).flatten();
    let values: Option<Vec<i64>> = lit.and_then(|lit| {
        let mut v: Vec<i64> = match (&lit.data, lit.dtype) {
            (TensorData::Int(v), _) => v.iter().map(|&x| i64::from(x)).collect(),
            (TensorData::Int64(v), _) => v.clone(),
            (TensorData::Content(b), DType::I32) if b.len() % 4 == 0 => {
                b.chunks_exact(4).map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect()
            }
            (TensorData::Content(b), DType::I64) if b.len() % 8 == 0 => {
                b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default())).collect()
            }
            _ => return None,
        };
        // A literal with fewer values than its shape repeats the last one.
        let count = lit.shape.iter().product::<i64>().max(0) as usize;
        if let Some(&last) = v.last() {
            v.resize(count.max(v.len()), last);
        }
        Some(v)
    });
    let values = values.ok_or_else(|| Some(format!("the gradient of {op_type} needs fft_length as a constant")))?;
    values
        .iter()
        .map(|&n| {
            usize::try_from(n).map_err(|_| Some(format!("{op_type}: fft_length {values:?} has a negative length")))
        })
        .collect()
}

/// The weights of the `n / 2 + 1` kept frequencies of a real transform of
/// `n` points: 1 for the zero and Nyquist frequencies, `dup` for the others
/// (which stand for two frequencies each).
fn half_spectrum_weights(n: usize, dup: f64) -> Vec<f64> {
    let m = if n == 0 { 0 } else { n / 2 + 1 };
    (0..m).map(|j| if j == 0 || (n.is_multiple_of(2) && j == m - 1) { 1.0 } else { dup }).collect()
}

/// The gradients of `op`'s data inputs given `g`; `Err(None)` when `op_type` is not a complex or FFT op.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let y = Tensor::of(op);
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let gt = e.dtype_of(g);
    let one = |v: Tensor| Ok(vec![Some(v)]);
    match op_type {
        "Complex" => {
            // (sum(real(g)), sum(imag(g))), each summed back to its operand's shape.
            let (c, r) = (gt.unwrap_or(DType::C64), part_of(gt));
            let (a, b) = (x(0)?, x(1)?);
            let bc = Broadcast::new(e, a, b);
            let re = e.emit("Real", "Real", &[g], [ty("T", c), ty("Tout", r)]);
            let im = e.emit("Imag", "Imag", &[g], [ty("T", c), ty("Tout", r)]);
            let ta = Some(ty("T", r));
            let ga = bc.reduce_x(e, re, &ta);
            let gb = bc.reduce_y(e, im, &ta);
            Ok(vec![Some(ga), Some(gb)])
        }
        "Real" | "Imag" => {
            // complex(g, 0) or complex(0, g).
            let (r, c) = (gt.unwrap_or(DType::F32), complex_of(gt));
            let zero = vector_const(e, "Const", r, &[0.0], true);
            let parts = if op_type == "Real" { [g, zero] } else { [zero, g] };
            one(e.emit("Complex", "Complex", &parts, [ty("T", r), ty("Tout", c)]))
        }
        "Conj" => {
            let c = gt.unwrap_or(DType::C64);
            one(e.emit("Conj", "Conj", &[g], [ty("T", c)]))
        }
        "ComplexAbs" => {
            // complex(g, 0) · x / complex(|x|, 0), and 0 where |x| is 0.
            let (r, c) = (gt.unwrap_or(DType::F32), complex_of(gt));
            let zg = e.emit("ZerosLike", "zeros_like", &[g], [ty("T", r)]);
            let cg = e.emit("Complex", "Complex", &[g, zg], [ty("T", r), ty("Tout", c)]);
            let zy = e.emit("ZerosLike", "zeros_like_1", &[y], [ty("T", r)]);
            let cy = e.emit("Complex", "Complex_1", &[y, zy], [ty("T", r), ty("Tout", c)]);
            let num = e.emit("Mul", "mul", &[cg, x(0)?], [ty("T", c)]);
            one(e.emit("DivNoNan", "div_no_nan", &[num, cy], [ty("T", c)]))
        }
        "Angle" => {
            // -complex(g, 0) / complex(imag(x), real(x)).
            let (r, c) = (gt.unwrap_or(DType::F32), complex_of(gt));
            let a = x(0)?;
            let re = e.emit("Real", "Real", &[a], [ty("T", c), ty("Tout", r)]);
            let im = e.emit("Imag", "Imag", &[a], [ty("T", c), ty("Tout", r)]);
            let swapped = e.emit("Complex", "Complex", &[im, re], [ty("T", r), ty("Tout", c)]);
            let z = e.emit("Reciprocal", "Reciprocal", &[swapped], [ty("T", c)]);
            let zero = vector_const(e, "Const", r, &[0.0], true);
            let cg = e.emit("Complex", "Complex_1", &[g, zero], [ty("T", r), ty("Tout", c)]);
            let neg = e.emit("Neg", "Neg", &[cg], [ty("T", c)]);
            one(e.emit("Mul", "mul", &[neg, z], [ty("T", c)]))
        }
        "ConjugateTranspose" => {
            let perm = x(1)?;
            let tp = e.dtype_of(perm).unwrap_or(DType::I32);
            let inv = e.emit("InvertPermutation", "InvertPermutation", &[perm], [ty("T", tp)]);
            let d = gt.unwrap_or(DType::C64);
            let out = e.emit("ConjugateTranspose", "ConjugateTranspose", &[g, inv], [ty("T", d), ty("Tperm", tp)]);
            Ok(vec![Some(out), None])
        }
        "FFT" | "FFT2D" | "FFT3D" | "IFFT" | "IFFT2D" | "IFFT3D" => {
            // The adjoint: conj(T(conj(g))) with T the same transform.
            let c = gt.unwrap_or(DType::C64);
            let transform: &'static str = match op_type {
                "FFT" => "FFT",
                "FFT2D" => "FFT2D",
                "FFT3D" => "FFT3D",
                "IFFT" => "IFFT",
                "IFFT2D" => "IFFT2D",
                _ => "IFFT3D",
            };
            let cg = e.emit("Conj", "Conj", &[g], [ty("T", c)]);
            let t = e.emit(transform, transform, &[cg], [ty("Tcomplex", c)]);
            one(e.emit("Conj", "Conj_1", &[t], [ty("T", c)]))
        }
        // TensorFlow registers no gradient for RFFT3D and IRFFT3D.
        "RFFT" | "RFFT2D" => {
            // IRFFT(g · w, fft_length) · N, w halving the duplicated frequencies.
            let (c, r) = (gt.unwrap_or(DType::C64), part_of(gt));
            let fft_length = x(1)?;
            let lengths = fft_lengths(e, fft_length, op_type)?;
            let n = lengths.last().copied().unwrap_or(0);
            let points: usize = lengths.iter().product();
            let w = vector_const(e, "weights", c, &half_spectrum_weights(n, 0.5), false);
            let gw = e.emit("Mul", "mul", &[g, w], [ty("T", c)]);
            let inverse = if op_type == "RFFT" { "IRFFT" } else { "IRFFT2D" };
            let t = e.emit(inverse, inverse, &[gw, fft_length], [ty("Treal", r), ty("Tcomplex", c)]);
            let size = vector_const(e, "size", r, &[points as f64], true);
            Ok(vec![Some(e.emit("Mul", "mul_1", &[t, size], [ty("T", r)])), None])
        }
        "IRFFT" | "IRFFT2D" => {
            // RFFT(g, fft_length) · mask / N, the mask doubling the duplicated frequencies.
            let (r, c) = (gt.unwrap_or(DType::F32), complex_of(gt));
            let fft_length = x(1)?;
            let lengths = fft_lengths(e, fft_length, op_type)?;
            let n = lengths.last().copied().unwrap_or(0);
            let points = lengths.iter().product::<usize>().max(1) as f64;
            let mask: Vec<f64> = half_spectrum_weights(n, 2.0).into_iter().map(|v| v / points).collect();
            let forward = if op_type == "IRFFT" { "RFFT" } else { "RFFT2D" };
            let t = e.emit(forward, forward, &[g, fft_length], [ty("Treal", r), ty("Tcomplex", c)]);
            let m = vector_const(e, "mask", c, &mask, false);
            Ok(vec![Some(e.emit("Mul", "mul", &[t, m], [ty("T", c)])), None])
        }
        _ => Err(None),
    }
}

#[cfg(test)]
mod tests {
    use super::half_spectrum_weights;

    #[test]
    fn the_zero_and_nyquist_frequencies_count_once() {
        assert_eq!(half_spectrum_weights(6, 2.0), vec![1.0, 2.0, 2.0, 1.0]);
        assert_eq!(half_spectrum_weights(5, 0.5), vec![1.0, 0.5, 0.5]);
        assert_eq!(half_spectrum_weights(1, 2.0), vec![1.0]);
        assert!(half_spectrum_weights(0, 2.0).is_empty());
    }
}
