//! Structural linear-algebra kernels: band parts, diagonals and cross
//! products (`MatrixBandPart`, `MatrixDiag{,Part,SetDiag}{,V2,V3}`, `Diag`,
//! `DiagPart`, `Cross`), batched over the leading axes as TensorFlow's CPU
//! kernels are.
//!
//! The diag ops move elements only, so they take every dtype; which cells a
//! band of diagonals covers, and how shorter diagonals are aligned, is
//! [`Band`] (shared with the type rules and the StableHLO lowering). Cost:
//! one pass over the output.

use ndarray::{ArcArray, IxDyn};

use super::arg;
use crate::exec::error::KernelError;
use crate::exec::tensor::{with_element_type, Element, Tensor};
use crate::ir::shapes::rules::linalg::Band;
use crate::ir::{AttrMap, DType};

/// The elements of `t` in row-major order, as `T`.
fn elements<T: Element>(op: &str, t: &Tensor, what: &str) -> Result<Vec<T>, KernelError> {
    let a = T::unwrap(t).ok_or_else(|| KernelError::dtype(op, t.dtype(), format!("{what} must be {}", T::DTYPE)))?;
    Ok(a.iter().cloned().collect())
}

/// A tensor of `shape` from row-major `values`.
fn tensor<T: Element>(op: &str, shape: Vec<usize>, values: Vec<T>) -> Result<Tensor, KernelError> {
    let a = ArcArray::from_shape_vec(IxDyn(&shape), values).map_err(|e| KernelError::invalid(op, e.to_string()))?;
    Ok(T::wrap(a))
}

/// A scalar operand as an integer.
fn int_scalar(op: &str, t: &Tensor, what: &str) -> Result<i64, KernelError> {
    match t.to_i64_vec(op, what)?.as_slice() {
        [v] if t.shape().is_empty() => Ok(*v),
        _ => Err(KernelError::invalid(op, format!("{what} must be a scalar, got shape {:?}", t.shape()))),
    }
}

/// The band of a diag op: its `k` operand and `align` attribute (V2/V3), or the main diagonal.
fn band(op: &str, attrs: &AttrMap, k: Option<&Tensor>) -> Result<Band, KernelError> {
    match k {
        None => Ok(Band::main()),
        Some(k) => {
            if k.shape().len() > 1 {
                return Err(KernelError::invalid(op, format!("k must be a scalar or a vector, got {:?}", k.shape())));
            }
            Band::new(op, &k.to_i64_vec(op, "k")?, attrs.get_str("align")).map_err(|m| KernelError::invalid(op, m))
        }
    }
}

/// The leading dims, rows and cols of a batch of matrices.
fn matrices(op: &str, t: &Tensor) -> Result<(Vec<usize>, i64, i64), KernelError> {
    match t.shape() {
        [lead @ .., m, n] => Ok((lead.to_vec(), *m as i64, *n as i64)),
        s => Err(KernelError::invalid(op, format!("input must have rank >= 2, got shape {s:?}"))),
    }
}

/// A zero of `t`'s dtype (the padding of the V1 ops).
fn zero_of(op: &str, t: &Tensor) -> Result<Tensor, KernelError> {
    super::dtypes::cast(op, &Tensor::scalar(0i32), t.dtype())
}

/// Runs the op if it is one of this family.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let run = || -> Result<Tensor, KernelError> {
        match op {
            "MatrixBandPart" => band_part(op, x(0)?, x(1)?, x(2)?),
            "MatrixDiagPart" => diag_part(op, x(0)?, Band::main(), &zero_of(op, x(0)?)?),
            "MatrixDiagPartV2" | "MatrixDiagPartV3" => diag_part(op, x(0)?, band(op, attrs, Some(x(1)?))?, x(2)?),
            "MatrixDiag" => matrix_diag(op, x(0)?, Band::main(), (-1, -1), &zero_of(op, x(0)?)?),
            "MatrixDiagV2" | "MatrixDiagV3" => {
                let dims = (int_scalar(op, x(2)?, "num_rows")?, int_scalar(op, x(3)?, "num_cols")?);
                matrix_diag(op, x(0)?, band(op, attrs, Some(x(1)?))?, dims, x(4)?)
            }
            "MatrixSetDiag" => set_diag(op, x(0)?, x(1)?, Band::main()),
            "MatrixSetDiagV2" | "MatrixSetDiagV3" => set_diag(op, x(0)?, x(1)?, band(op, attrs, Some(x(2)?))?),
            "Diag" => diag(op, x(0)?),
            "DiagPart" => diag_part_full(op, x(0)?),
            "Cross" => cross(op, x(0)?, x(1)?),
            _ => Err(KernelError::NoKernel { op: op.to_string() }),
        }
    };
    const OPS: &[&str] = &[
        "Cross",
        "Diag",
        "DiagPart",
        "MatrixBandPart",
        "MatrixDiag",
        "MatrixDiagPart",
        "MatrixDiagPartV2",
        "MatrixDiagPartV3",
        "MatrixDiagV2",
        "MatrixDiagV3",
        "MatrixSetDiag",
        "MatrixSetDiagV2",
        "MatrixSetDiagV3",
    ];
    OPS.contains(&op).then(|| run().map(|t| vec![t]))
}

/// `MatrixBandPart(input, num_lower, num_upper)`: cells more than
/// `num_lower` below or `num_upper` above the diagonal become zero (a
/// negative count keeps that whole triangle).
fn band_part(op: &str, x: &Tensor, lower: &Tensor, upper: &Tensor) -> Result<Tensor, KernelError> {
    let (_, m, n) = matrices(op, x)?;
    let (lower, upper) = (int_scalar(op, lower, "num_lower")?, int_scalar(op, upper, "num_upper")?);
    if lower > m || upper > n {
        return Err(KernelError::invalid(
            op,
            format!("num_lower = {lower} must be at most {m} and num_upper = {upper} at most {n}"),
        ));
    }
    let zeros = super::shape::filled_like(op, x, 0)?;
    let keep = |i: usize| {
        let (r, c) = (((i as i64) / n) % m, (i as i64) % n);
        (lower < 0 || r - c <= lower) && (upper < 0 || c - r <= upper)
    };
    with_element_type!(x, T => {
        let (v, z) = (elements::<T>(op, x, "input")?, elements::<T>(op, &zeros, "input")?);
        let out = v.into_iter().zip(z).enumerate().map(|(i, (v, z))| if keep(i) { v } else { z }).collect();
        tensor::<T>(op, x.shape().to_vec(), out)
    }, resource => Err(KernelError::dtype(op, x.dtype(), "resource handles have no elements")))
}

/// `MatrixDiagPart*`: the band's diagonals of each matrix, packed into rows
/// of the longest one's length, shorter ones padded with `pad`.
fn diag_part(op: &str, x: &Tensor, band: Band, pad: &Tensor) -> Result<Tensor, KernelError> {
    let (mut shape, m, n) = matrices(op, x)?;
    band.check(op, m, n).map_err(|e| KernelError::invalid(op, e))?;
    if !pad.shape().is_empty() {
        return Err(KernelError::invalid(op, format!("padding_value must be a scalar, got {:?}", pad.shape())));
    }
    let len = band.max_len(m, n);
    let batch: usize = shape.iter().product();
    if !band.single() {
        shape.push(band.count());
    }
    shape.push(len as usize);
    with_element_type!(x, T => {
        let v = elements::<T>(op, x, "input")?;
        let p = elements::<T>(op, pad, "padding_value")?.remove(0);
        let out = pack_band(&v, &p, batch, band, (m, n), len);
        tensor::<T>(op, shape, out)
    }, resource => Err(KernelError::dtype(op, x.dtype(), "resource handles have no elements")))
}

/// The band's diagonals of `batch` row-major `m x n` matrices `v`, each in a
/// row of `len` cells, shorter ones padded with `p`.
fn pack_band<T: Clone>(v: &[T], p: &T, batch: usize, band: Band, (m, n): (i64, i64), len: i64) -> Vec<T> {
    let mut out = Vec::with_capacity(batch * band.count() * len as usize);
    for b in 0..batch {
        for d in (band.lo..=band.hi).rev() {
            let (off, dl) = (band.offset(d, m, n, len), Band::len(d, m, n));
            for j in 0..len {
                let t = j - off;
                out.push(if (0..dl).contains(&t) {
                    let (r, c) = Band::cell(d, t);
                    v[b * (m * n) as usize + (r * n + c) as usize].clone()
                } else {
                    p.clone()
                });
            }
        }
    }
    out
}

/// The packed diagonals of a diag op: leading dims and the length of a row.
fn packed(op: &str, diagonal: &Tensor, band: Band) -> Result<(Vec<usize>, i64), KernelError> {
    let s = diagonal.shape();
    let keep = if band.single() { 1 } else { 2 };
    if s.len() < keep || (!band.single() && s[s.len() - 2] != band.count()) {
        return Err(KernelError::invalid(
            op,
            format!(
                "diagonal of shape {s:?} does not hold {} diagonals of diagonals {}..={}",
                band.count(),
                band.lo,
                band.hi
            ),
        ));
    }
    Ok((s[..s.len() - keep].to_vec(), s[s.len() - 1] as i64))
}

/// Writes the band's diagonals (from `diag`, rows of `len`) into the `m x n`
/// matrices of `out`, batch by batch.
fn write_band<T: Clone>(out: &mut [T], diag: &[T], band: Band, m: i64, n: i64, len: i64) {
    let batch = if m * n == 0 { 0 } else { out.len() / (m * n) as usize };
    for b in 0..batch {
        for (i, d) in (band.lo..=band.hi).rev().enumerate() {
            let off = band.offset(d, m, n, len);
            for t in 0..Band::len(d, m, n) {
                let (r, c) = Band::cell(d, t);
                let src = (b * band.count() + i) * len as usize + (t + off) as usize;
                if let Some(v) = diag.get(src).filter(|_| t + off < len) {
                    out[b * (m * n) as usize + (r * n + c) as usize] = v.clone();
                }
            }
        }
    }
}

/// `MatrixDiag*`: matrices holding the given diagonals, `pad` elsewhere.
fn matrix_diag(op: &str, diagonal: &Tensor, band: Band, dims: (i64, i64), pad: &Tensor) -> Result<Tensor, KernelError> {
    let (mut shape, len) = packed(op, diagonal, band)?;
    let (m, n) = band.matrix_dims(op, len, dims.0, dims.1).map_err(|e| KernelError::invalid(op, e))?;
    if !pad.shape().is_empty() {
        return Err(KernelError::invalid(op, format!("padding_value must be a scalar, got {:?}", pad.shape())));
    }
    let batch: usize = shape.iter().product();
    shape.extend([m as usize, n as usize]);
    with_element_type!(diagonal, T => {
        let v = elements::<T>(op, diagonal, "diagonal")?;
        let p = elements::<T>(op, pad, "padding_value")?.remove(0);
        let mut out = vec![p; batch * (m * n) as usize];
        write_band(&mut out, &v, band, m, n, len);
        tensor::<T>(op, shape, out)
    }, resource => Err(KernelError::dtype(op, diagonal.dtype(), "resource handles have no elements")))
}

/// `MatrixSetDiag*`: `input` with the band's diagonals replaced.
fn set_diag(op: &str, x: &Tensor, diagonal: &Tensor, band: Band) -> Result<Tensor, KernelError> {
    let (lead, m, n) = matrices(op, x)?;
    band.check(op, m, n).map_err(|e| KernelError::invalid(op, e))?;
    let (dlead, len) = packed(op, diagonal, band)?;
    if dlead != lead || len != band.max_len(m, n) {
        return Err(KernelError::invalid(
            op,
            format!("diagonal of shape {:?} does not fit input of shape {:?}", diagonal.shape(), x.shape()),
        ));
    }
    with_element_type!(x, T => {
        let mut out = elements::<T>(op, x, "input")?;
        let v = elements::<T>(op, diagonal, "diagonal")?;
        write_band(&mut out, &v, band, m, n, len);
        tensor::<T>(op, x.shape().to_vec(), out)
    }, resource => Err(KernelError::dtype(op, x.dtype(), "resource handles have no elements")))
}

/// `Diag(x)`: shape `s ++ s`, `x` on the diagonal, zeros elsewhere.
fn diag(op: &str, x: &Tensor) -> Result<Tensor, KernelError> {
    let k = x.len();
    let shape: Vec<usize> = x.shape().iter().chain(x.shape()).copied().collect();
    let zero = zero_of(op, x)?;
    with_element_type!(x, T => {
        let v = elements::<T>(op, x, "diagonal")?;
        let z = elements::<T>(op, &zero, "diagonal")?.remove(0);
        let mut out = vec![z; k * k];
        for (i, v) in v.into_iter().enumerate() {
            out[i * k + i] = v;
        }
        tensor::<T>(op, shape, out)
    }, resource => Err(KernelError::dtype(op, x.dtype(), "resource handles have no elements")))
}

/// `DiagPart(x)` of a shape `s ++ s`: the elements `x[i..., i...]`.
fn diag_part_full(op: &str, x: &Tensor) -> Result<Tensor, KernelError> {
    let s = x.shape();
    let half = s.len() / 2;
    if !s.len().is_multiple_of(2) || s[..half] != s[half..] {
        return Err(KernelError::invalid(op, format!("the input's shape must be s ++ s, got {s:?}")));
    }
    let k: usize = s[..half].iter().product();
    with_element_type!(x, T => {
        let v = elements::<T>(op, x, "input")?;
        tensor::<T>(op, s[..half].to_vec(), diagonal_of(&v, k))
    }, resource => Err(KernelError::dtype(op, x.dtype(), "resource handles have no elements")))
}

/// The elements `v[i * k + i]` of a row-major `k x k` matrix.
fn diagonal_of<T: Clone>(v: &[T], k: usize) -> Vec<T> {
    (0..k).map(|i| v[i * k + i].clone()).collect()
}

/// `Cross(a, b)`: the cross product of the 3-vectors along the last axis.
fn cross(op: &str, a: &Tensor, b: &Tensor) -> Result<Tensor, KernelError> {
    if a.shape() != b.shape() || a.shape().last() != Some(&3) {
        return Err(KernelError::invalid(
            op,
            format!("a and b must have one shape with last dimension 3, got {:?} and {:?}", a.shape(), b.shape()),
        ));
    }
    /// Integers wrap on overflow, as TensorFlow's CPU kernel does.
    fn go<T: Element + Copy>(
        op: &str,
        a: &Tensor,
        b: &Tensor,
        mul: fn(T, T) -> T,
        sub: fn(T, T) -> T,
    ) -> Result<Tensor, KernelError> {
        let (u, v) = (elements::<T>(op, a, "a")?, elements::<T>(op, b, "b")?);
        let f = |i: usize, j: usize, p: &[T], q: &[T]| sub(mul(p[i], q[j]), mul(p[j], q[i]));
        let out =
            u.chunks(3).zip(v.chunks(3)).flat_map(|(p, q)| [f(1, 2, p, q), f(2, 0, p, q), f(0, 1, p, q)]).collect();
        tensor::<T>(op, a.shape().to_vec(), out)
    }
    match a.dtype() {
        DType::F32 => go::<f32>(op, a, b, |x, y| x * y, |x, y| x - y),
        DType::F64 => go::<f64>(op, a, b, |x, y| x * y, |x, y| x - y),
        DType::I32 => go::<i32>(op, a, b, i32::wrapping_mul, i32::wrapping_sub),
        DType::I64 => go::<i64>(op, a, b, i64::wrapping_mul, i64::wrapping_sub),
        other => Err(KernelError::dtype(op, other, "a and b must be real numbers")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrValue;

    fn run(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Tensor {
        super::super::run_kernel(op, attrs, inputs).unwrap().remove(0)
    }

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_vec(shape, v.to_vec()).unwrap()
    }

    /// A 3 x 4 matrix holding 1..=12 row by row.
    fn m34() -> Tensor {
        f32s(&[3, 4], &(1..=12).map(|v| v as f32).collect::<Vec<_>>())
    }

    #[test]
    fn band_part_keeps_the_band_and_negative_counts_keep_a_triangle() {
        let out = run("MatrixBandPart", &AttrMap::new(), &[m34(), Tensor::scalar(1i64), Tensor::scalar(0i64)]);
        assert_eq!(out.to_vec::<f32>().unwrap(), [1., 0., 0., 0., 5., 6., 0., 0., 0., 10., 11., 0.]);
        let out = run("MatrixBandPart", &AttrMap::new(), &[m34(), Tensor::scalar(0i64), Tensor::scalar(-1i64)]);
        assert_eq!(out.to_vec::<f32>().unwrap(), [1., 2., 3., 4., 0., 6., 7., 8., 0., 0., 11., 12.]);
    }

    #[test]
    fn diag_part_packs_a_band_with_the_alignment() {
        // Diagonals 1, 0, -1 of the 3 x 4 matrix: [2 7 12], [1 6 11], [5 10].
        let k = Tensor::vector(vec![-1i32, 1]);
        let mut attrs = AttrMap::new();
        attrs.insert("align", AttrValue::Str("RIGHT_LEFT".into()));
        let out = run("MatrixDiagPartV3", &attrs, &[m34(), k.clone(), Tensor::scalar(0f32)]);
        assert_eq!(out.shape(), [3, 3]);
        assert_eq!(out.to_vec::<f32>().unwrap(), [2., 7., 12., 1., 6., 11., 5., 10., 0.]);
        attrs.insert("align", AttrValue::Str("LEFT_RIGHT".into()));
        let out = run("MatrixDiagPartV3", &attrs, &[m34(), k, Tensor::scalar(-1f32)]);
        assert_eq!(out.to_vec::<f32>().unwrap(), [2., 7., 12., 1., 6., 11., -1., 5., 10.]);
    }

    #[test]
    fn matrix_diag_and_set_diag_put_the_band_back() {
        let mut attrs = AttrMap::new();
        attrs.insert("align", AttrValue::Str("RIGHT_LEFT".into()));
        let k = Tensor::vector(vec![-1i32, 1]);
        let part = run("MatrixDiagPartV3", &attrs, &[m34(), k.clone(), Tensor::scalar(0f32)]);
        let dims = [Tensor::scalar(3i32), Tensor::scalar(4i32)];
        let built = run(
            "MatrixDiagV3",
            &attrs,
            &[part.clone(), k.clone(), dims[0].clone(), dims[1].clone(), Tensor::scalar(0f32)],
        );
        let banded = run("MatrixBandPart", &AttrMap::new(), &[m34(), Tensor::scalar(1i64), Tensor::scalar(1i64)]);
        assert_eq!(built, banded);
        let zeros = super::super::shape::filled_like("t", &m34(), 0).unwrap();
        let set = run("MatrixSetDiagV3", &attrs, &[zeros, part, k]);
        assert_eq!(set, banded);
    }

    #[test]
    fn bad_bands_are_errors() {
        let err = super::super::run_kernel(
            "MatrixDiagPartV3",
            &AttrMap::new(),
            &[m34(), Tensor::vector(vec![2i32, 1]), Tensor::scalar(0f32)],
        );
        assert!(err.unwrap_err().to_string().contains("must not exceed"));
        let err = super::super::run_kernel(
            "MatrixDiagPartV3",
            &AttrMap::new(),
            &[m34(), Tensor::scalar(4i32), Tensor::scalar(0f32)],
        );
        assert!(err.unwrap_err().to_string().contains("do not fit"));
    }

    #[test]
    fn diag_cross_and_integers() {
        let d = run("Diag", &AttrMap::new(), &[Tensor::vector(vec![1i32, 2])]);
        assert_eq!(d.shape(), [2, 2]);
        assert_eq!(d.to_vec::<i32>().unwrap(), [1, 0, 0, 2]);
        assert_eq!(run("DiagPart", &AttrMap::new(), &[d]).to_vec::<i32>().unwrap(), [1, 2]);
        let c =
            run("Cross", &AttrMap::new(), &[Tensor::vector(vec![1f64, 0., 0.]), Tensor::vector(vec![0f64, 1., 0.])]);
        assert_eq!(c.to_vec::<f64>().unwrap(), [0., 0., 1.]);
    }
}
