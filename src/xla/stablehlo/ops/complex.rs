//! Complex numbers and FFTs: `Complex`, `Real`, `Imag`, `ComplexAbs`,
//! `Angle`, `Conj`, `ConjugateTranspose`, and `FFT`/`IFFT`/`RFFT`/`IRFFT`
//! in 1-3 dimensions, as tf2xla lowers them.
//!
//! The parts are `stablehlo.real`/`imag`, joined by `stablehlo.complex`;
//! the conjugate negates the imaginary part. The FFTs are `stablehlo.fft`
//! over the innermost axes. For `RFFT` the transformed axes are first
//! sliced to `fft_length`; for `IRFFT` the outer ones to `fft_length` and
//! the innermost to `n / 2 + 1` (tf2xla's `fft_ops.cc`; an empty axis is
//! zero-padded, a short one refused by the type rule).

use super::shape::slice_range;
use super::{i64s, Call};
use crate::ir::DType;
use crate::xla::stablehlo::text::{Ctx, Ty, Val};

/// The dtype of the parts of complex `d`.
fn part_of(d: DType) -> Result<DType, String> {
    match d {
        DType::C64 => Ok(DType::F32),
        DType::C128 => Ok(DType::F64),
        other => Err(format!("{other} is not a complex dtype")),
    }
}

fn real(c: &mut Ctx, x: &Val) -> Result<Val, String> {
    let ty = x.ty.with_dtype(part_of(x.ty.dtype)?);
    Ok(c.op("stablehlo.real", &[x], "", ty))
}

fn imag(c: &mut Ctx, x: &Val) -> Result<Val, String> {
    let ty = x.ty.with_dtype(part_of(x.ty.dtype)?);
    Ok(c.op("stablehlo.imag", &[x], "", ty))
}

/// `stablehlo.complex` of two same-shaped float values.
fn join(c: &mut Ctx, re: &Val, im: &Val) -> Val {
    let dtype = if re.ty.dtype == DType::F64 { DType::C128 } else { DType::C64 };
    c.op("stablehlo.complex", &[re, im], "", re.ty.with_dtype(dtype))
}

/// `Complex(real, imag)`, broadcast to the result shape.
pub(super) fn complex(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (re, im) = super::elementwise::broadcast_pair(c, n)?;
    Ok(vec![join(c, &re, &im)])
}

pub(super) fn part(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    Ok(vec![match n.op {
        "Real" => real(c, x)?,
        "Imag" => imag(c, x)?,
        // |x|: stablehlo.abs of a complex value is its (real) modulus.
        "ComplexAbs" => c.op("stablehlo.abs", &[x], "", x.ty.with_dtype(part_of(x.ty.dtype)?)),
        _ => {
            let (re, im) = (real(c, x)?, imag(c, x)?);
            c.op("stablehlo.atan2", &[&im, &re], "", re.ty.clone())
        }
    }])
}

fn conjugate(c: &mut Ctx, x: &Val) -> Result<Val, String> {
    let (re, im) = (real(c, x)?, imag(c, x)?);
    let neg = c.op("stablehlo.negate", &[&im], "", im.ty.clone());
    Ok(join(c, &re, &neg))
}

pub(super) fn conj(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    Ok(vec![conjugate(c, n.input(0)?)?])
}

/// `ConjugateTranspose(x, perm)`: the transpose, conjugated when complex.
pub(super) fn conjugate_transpose(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let t = super::shape::transpose(c, n)?.remove(0);
    if matches!(t.ty.dtype, DType::C64 | DType::C128) {
        Ok(vec![conjugate(c, &t)?])
    } else {
        Ok(vec![t])
    }
}

/// How many innermost axes an FFT op transforms.
fn rank_of(op: &str) -> usize {
    if op.ends_with("3D") {
        3
    } else if op.ends_with("2D") {
        2
    } else {
        1
    }
}

/// `x` with its innermost `dims.len()` axes sliced (or, empty, zero-padded) to `dims`.
fn fit(c: &mut Ctx, x: &Val, dims: &[usize]) -> Val {
    let rank = x.ty.shape.len();
    let outer = rank - dims.len();
    let mut want = x.ty.shape.clone();
    want[outer..].copy_from_slice(dims);
    if want == x.ty.shape {
        return x.clone();
    }
    let keep: Vec<usize> = x.ty.shape.iter().zip(&want).map(|(&a, &b)| a.min(b)).collect();
    let cut = if keep == x.ty.shape { x.clone() } else { slice_range(c, x, &vec![0; rank], &keep) };
    if keep == want {
        return cut;
    }
    let zero = c.splat(&Ty::scalar(x.ty.dtype), 0.0);
    let high: Vec<usize> = want.iter().zip(&keep).map(|(w, k)| w - k).collect();
    c.op(
        "stablehlo.pad",
        &[&cut, &zero],
        &format!(
            "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
            i64s(&vec![0; rank]),
            i64s(&high),
            i64s(&vec![0; rank])
        ),
        x.ty.with_shape(want),
    )
}

/// The FFTs: `stablehlo.fft` of the kind the op names over its innermost axes.
pub(super) fn fft(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let k = rank_of(n.op);
    let out = n.out(0)?.clone();
    let rank = x.ty.shape.len();
    if rank < k {
        return Err(format!("the input must have rank >= {k}, got shape {:?}", x.ty.shape));
    }
    let (kind, input, lengths) = if n.op.starts_with("RFFT") || n.op.starts_with("IRFFT") {
        let lengths: Vec<usize> = n
            .ints(1, "fft_length")?
            .into_iter()
            .map(|v| usize::try_from(v).map_err(|_| format!("fft_length has a negative length {v}")))
            .collect::<Result<_, _>>()?;
        if lengths.len() != k {
            return Err(format!("fft_length must have {k} values, got {lengths:?}"));
        }
        if n.op.starts_with("RFFT") {
            ("RFFT", fit(c, x, &lengths), lengths)
        } else {
            let mut dims = lengths.clone();
            let last = dims[k - 1];
            dims[k - 1] = if last == 0 { 0 } else { last / 2 + 1 };
            ("IRFFT", fit(c, x, &dims), lengths)
        }
    } else {
        let kind = if n.op.starts_with('I') { "IFFT" } else { "FFT" };
        (kind, x.clone(), x.ty.shape[rank - k..].to_vec())
    };
    if lengths.contains(&0) || out.shape.contains(&0) {
        // Nothing to transform: the (empty) result.
        return Ok(vec![c.splat(&out, 0.0)]);
    }
    Ok(vec![c.op(
        "stablehlo.fft",
        &[&input],
        &format!("fft_type = #stablehlo<fft_type {kind}>, fft_length = {}", i64s(&lengths)),
        out,
    )])
}
