//! Complex-number and FFT rules: `Complex`, `Real`, `Imag`, `ComplexAbs`,
//! `Angle`, `Conj`, `ConjugateTranspose` and the `FFT`/`IFFT`/`RFFT`/`IRFFT`
//! families (1-D to 3-D over the innermost axes).
//!
//! complex64 pairs with f32 and complex128 with f64; a `Tout`, `Tcomplex`
//! or `Treal` attribute, when present, must agree with that pairing. An
//! `RFFT`/`IRFFT` needs its `fft_length` as a compile-time constant, and
//! its transformed axes at least that long (they are cropped).

use super::elementwise::broadcast_shapes;
use super::{dim, Args, OutType};
use crate::ir::DType;

/// The complex dtype whose parts are `d`.
fn complex_of(d: DType) -> Result<DType, String> {
    match d {
        DType::F32 => Ok(DType::C64),
        DType::F64 => Ok(DType::C128),
        other => Err(format!("{other} is not the part of a complex dtype (f32 or f64)")),
    }
}

/// The dtype of the parts of complex `d`.
fn part_of(d: DType) -> Result<DType, String> {
    match d {
        DType::C64 => Ok(DType::F32),
        DType::C128 => Ok(DType::F64),
        other => Err(format!("{other} is not a complex dtype")),
    }
}

/// `made`, checked against the dtype attribute `key` when the node has one.
fn agree(a: &Args, key: &str, made: DType) -> Result<DType, String> {
    match a.attrs.get(key).and_then(crate::ir::AttrValue::as_type) {
        Some(d) if d != made => Err(format!("{key} is {d}, but the operands make {made}")),
        _ => Ok(made),
    }
}

/// `Complex(real, imag)`: the broadcast shape, complex.
pub(super) fn complex(a: &Args) -> Result<Vec<OutType>, String> {
    let (re, im) = (a.x(0)?, a.x(1)?);
    if re.dtype != im.dtype {
        return Err(format!("real and imag have different dtypes {} and {}", re.dtype, im.dtype));
    }
    let dtype = agree(a, "Tout", complex_of(re.dtype)?)?;
    Ok(vec![OutType::new(dtype, broadcast_shapes(re.shape, im.shape)?)])
}

/// `Real`, `Imag`, `ComplexAbs`, `Angle`: operand 0's shape, real.
pub(super) fn part(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    Ok(vec![OutType::new(agree(a, "Tout", part_of(x.dtype)?)?, x.shape.to_vec())])
}

/// `Conj`, `FFT*`, `IFFT*`: operand 0's type, which must be complex.
pub(super) fn same_complex(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    part_of(x.dtype)?;
    let k = rank_of(a.op);
    if a.op.contains("FFT") && x.shape.len() < k {
        return Err(format!("the input must have rank >= {k}, got shape {:?}", x.shape));
    }
    Ok(vec![a.same(0)?])
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

/// The constant `fft_length` (operand 1) of an `RFFT`/`IRFFT` of input rank `rank`.
fn lengths(a: &Args, rank: usize) -> Result<Vec<usize>, String> {
    let k = rank_of(a.op);
    let v = a.ints(1, "fft_length")?;
    if v.len() != k {
        return Err(format!("fft_length must have {k} values, got {v:?}"));
    }
    if rank < k {
        return Err(format!("the input must have rank >= {k}, got rank {rank}"));
    }
    let lengths: Vec<usize> = v.iter().map(|&n| dim(n, "fft_length")).collect::<Result<_, _>>()?;
    // Each transformed axis is cropped to its length, never padded (as TensorFlow's shape function).
    let shape = a.x(0)?.shape;
    for (i, &n) in lengths.iter().enumerate() {
        let need = if a.op.starts_with("IRFFT") && i + 1 == k { n / 2 + 1 } else { n };
        let have = shape[rank - k + i];
        if have != 0 && have < need {
            return Err(format!("input dimension {} must have length of at least {need} but got {have}", rank - k + i));
        }
    }
    Ok(lengths)
}

/// `RFFT*(x, fft_length)`: the transformed axes become `fft_length`, the last `n / 2 + 1`; complex.
pub(super) fn rfft(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let n = lengths(a, x.shape.len())?;
    let mut shape = x.shape.to_vec();
    let at = shape.len() - n.len();
    shape[at..].copy_from_slice(&n);
    let last = n[n.len() - 1];
    *shape.last_mut().expect("rank >= 1") = if last == 0 { 0 } else { last / 2 + 1 };
    Ok(vec![OutType::new(agree(a, "Tcomplex", complex_of(x.dtype)?)?, shape)])
}

/// `IRFFT*(y, fft_length)`: the transformed axes become `fft_length`; real.
pub(super) fn irfft(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let n = lengths(a, x.shape.len())?;
    let mut shape = x.shape.to_vec();
    let at = shape.len() - n.len();
    shape[at..].copy_from_slice(&n);
    Ok(vec![OutType::new(agree(a, "Treal", part_of(x.dtype)?)?, shape)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k, x};
    use crate::ir::DType::*;

    #[test]
    fn complex_rules() {
        check("Complex", &[], &[x(F32, &[2, 3]), x(F32, &[3])], Ok(&[(C64, &[2, 3])]));
        check("Complex", &[], &[x(F32, &[2]), x(F64, &[2])], Err("different dtypes"));
        check("Real", &[], &[x(C128, &[4])], Ok(&[(F64, &[4])]));
        check("ComplexAbs", &[], &[x(F32, &[4])], Err("not a complex dtype"));
        check("RFFT", &[], &[x(F32, &[2, 9]), k(&[8])], Ok(&[(C64, &[2, 5])]));
        check("RFFT", &[], &[x(F32, &[2, 6]), k(&[8])], Err("at least 8"));
        check("RFFT2D", &[], &[x(F64, &[3, 6]), k(&[2, 5])], Ok(&[(C128, &[2, 3])]));
        check("IRFFT", &[], &[x(C64, &[2, 3]), k(&[4])], Ok(&[(F32, &[2, 4])]));
        check("FFT3D", &[], &[x(C64, &[2, 2])], Err("rank >= 3"));
    }
}
