//! Factorization kernels: `Cholesky` and `MatrixTriangularSolve`, batched
//! over the leading axes as TensorFlow's CPU kernels are; and
//! `TridiagonalMatMul`; and `SparseMatMul`, a `MatMul` of f32 or bf16 operands into f32 (its
//! sparsity flags are hints only).
//!
//! Each matrix is factored or solved by `nalgebra` (the well-kept dense
//! linear-algebra crate) in the input's own precision (f32 or f64), as
//! TensorFlow's Eigen kernels compute. `Cholesky` reads the lower triangle
//! and returns `L` with zeros above the diagonal; an input that is not
//! positive definite is an error, as in TensorFlow. `MatrixTriangularSolve`
//! reads the triangle `lower` names and solves `A X = B` (or `A^T X = B`
//! with `adjoint`); the leading axes of `A` and `B` broadcast. Cost: `O(n^3)`
//! per matrix for the factorization, `O(n^2 k)` per solve.

use nalgebra::{DMatrix, RealField};

use crate::exec::error::KernelError;
use crate::exec::tensor::{Element, Tensor};
use crate::ir::{AttrMap, DType};

/// Runs the op if it is one of this family.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| super::arg(op, inputs, i);
    let out = match op {
        "Cholesky" => x(0).and_then(|a| cholesky(op, a)),
        "MatrixTriangularSolve" => (|| {
            let lower = attrs.get_bool("lower").unwrap_or(true);
            let adjoint = attrs.get_bool("adjoint").unwrap_or(false);
            triangular_solve(op, x(0)?, x(1)?, lower, adjoint)
        })(),
        // TensorFlow's hint-carrying product: f32 or bf16 operands, an f32 result.
        "SparseMatMul" => (|| {
            let ta = attrs.get_bool("transpose_a").unwrap_or(false);
            let tb = attrs.get_bool("transpose_b").unwrap_or(false);
            let (a, b) = (super::dtypes::cast(op, x(0)?, DType::F32)?, super::dtypes::cast(op, x(1)?, DType::F32)?);
            super::linalg::matmul(op, &a, &b, ta, tb)
        })(),
        "TridiagonalMatMul" => (|| tridiagonal_matmul(op, x(0)?, x(1)?, x(2)?, x(3)?))(),
        _ => return None,
    };
    Some(out.map(|t| vec![t]))
}

/// The leading dims and the two innermost dims of `t`.
pub(super) fn matrices<'a>(op: &str, t: &'a Tensor, what: &str) -> Result<(&'a [usize], usize, usize), KernelError> {
    match t.shape() {
        [lead @ .., m, n] => Ok((lead, *m, *n)),
        s => Err(KernelError::invalid(op, format!("{what} must have rank >= 2, got shape {s:?}"))),
    }
}

pub(super) fn values<T: Element + Copy>(op: &str, t: &Tensor) -> Result<Vec<T>, KernelError> {
    T::unwrap(t)
        .map(|a| a.iter().copied().collect())
        .ok_or_else(|| KernelError::dtype(op, t.dtype(), format!("expected {}", T::DTYPE)))
}

pub(super) fn tensor<T: Element>(op: &str, shape: &[usize], v: Vec<T>) -> Result<Tensor, KernelError> {
    Tensor::from_vec(shape, v).map_err(|e| KernelError::invalid(op, e.to_string()))
}

/// The row-major values of `m`.
pub(super) fn rows<T: RealField + Copy>(m: &DMatrix<T>) -> impl Iterator<Item = T> + '_ {
    (0..m.nrows()).flat_map(move |r| (0..m.ncols()).map(move |c| m[(r, c)]))
}

/// `Cholesky(input)`: the lower-triangular `L` with `L L^T = input`, per matrix.
fn cholesky(op: &str, a: &Tensor) -> Result<Tensor, KernelError> {
    fn go<T: Element + RealField + Copy>(op: &str, a: &Tensor) -> Result<Tensor, KernelError> {
        let (_, m, n) = matrices(op, a, "input")?;
        if m != n {
            return Err(KernelError::invalid(op, format!("input must be square, got shape {:?}", a.shape())));
        }
        let v = values::<T>(op, a)?;
        let mut out = Vec::with_capacity(v.len());
        for chunk in v.chunks(n * n).filter(|c| !c.is_empty()) {
            let l = DMatrix::from_row_slice(n, n, chunk).cholesky().ok_or_else(|| {
                KernelError::invalid(
                    op,
                    "Cholesky decomposition was not successful: the input is not positive definite",
                )
            })?;
            out.extend(rows(&l.l()));
        }
        tensor(op, a.shape(), out)
    }
    match a.dtype() {
        DType::F32 => go::<f32>(op, a),
        DType::F64 => go::<f64>(op, a),
        other => Err(KernelError::dtype(op, other, "input must be f32 or f64")),
    }
}

/// NumPy broadcasting of two lists of leading dims.
fn broadcast(op: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>, KernelError> {
    let r = a.len().max(b.len());
    let at = |s: &[usize], i: usize| if i + s.len() >= r { s[i + s.len() - r] } else { 1 };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => {
                Err(KernelError::invalid(op, format!("batch dims {a:?} and {b:?} do not broadcast ({x} vs {y})")))
            }
        })
        .collect()
}

/// The flat batch index of `s` (a batch of shape `dims`) for the output batch index `i` of shape `out`.
fn source_index(i: usize, out: &[usize], dims: &[usize]) -> usize {
    let (mut rest, mut idx, mut stride) = (i, 0, 1);
    for k in (0..out.len()).rev() {
        let coord = rest % out[k];
        rest /= out[k];
        if let Some(&d) = (k + dims.len()).checked_sub(out.len()).and_then(|j| dims.get(j)) {
            idx += if d == 1 { 0 } else { coord * stride };
            stride *= d;
        }
    }
    idx
}

/// `MatrixTriangularSolve(matrix, rhs)`: `X` with `A X = B` (`A^T X = B` when `adjoint`).
fn triangular_solve(op: &str, a: &Tensor, b: &Tensor, lower: bool, adjoint: bool) -> Result<Tensor, KernelError> {
    fn go<T: Element + RealField + Copy>(
        op: &str,
        a: &Tensor,
        b: &Tensor,
        lower: bool,
        adjoint: bool,
    ) -> Result<Tensor, KernelError> {
        let (alead, m, m2) = matrices(op, a, "matrix")?;
        let (blead, bm, k) = matrices(op, b, "rhs")?;
        if m != m2 || bm != m {
            return Err(KernelError::invalid(
                op,
                format!("matrix {:?} must be square with as many rows as rhs {:?}", a.shape(), b.shape()),
            ));
        }
        let lead = broadcast(op, alead, blead)?;
        let (av, bv) = (values::<T>(op, a)?, values::<T>(op, b)?);
        let batch: usize = lead.iter().product();
        let mut out = Vec::with_capacity(batch * m * k);
        for i in 0..batch {
            let ai = source_index(i, &lead, alead);
            let bi = source_index(i, &lead, blead);
            let am = DMatrix::from_row_slice(m, m, &av[ai * m * m..(ai + 1) * m * m]);
            let bmat = DMatrix::from_row_slice(m, k, &bv[bi * m * k..(bi + 1) * m * k]);
            let x = match (lower, adjoint) {
                (true, false) => am.solve_lower_triangular(&bmat),
                (true, true) => am.tr_solve_lower_triangular(&bmat),
                (false, false) => am.solve_upper_triangular(&bmat),
                (false, true) => am.tr_solve_upper_triangular(&bmat),
            };
            let x = x.ok_or_else(|| KernelError::invalid(op, "the matrix is singular (a zero on its diagonal)"))?;
            out.extend(rows(&x));
        }
        let mut shape = lead;
        shape.extend([m, k]);
        tensor(op, &shape, out)
    }
    if a.dtype() != b.dtype() {
        return Err(KernelError::invalid(op, format!("matrix is {} but rhs is {}", a.dtype(), b.dtype())));
    }
    match a.dtype() {
        DType::F32 => go::<f32>(op, a, b, lower, adjoint),
        DType::F64 => go::<f64>(op, a, b, lower, adjoint),
        other => Err(KernelError::dtype(op, other, "matrix must be f32 or f64")),
    }
}

/// `TridiagonalMatMul(superdiag, maindiag, subdiag, rhs)`: row `i` of the
/// result is `super[i] rhs[i + 1] + main[i] rhs[i] + sub[i] rhs[i - 1]`
/// (the diagonals `[..., 1, M]`, `rhs` `[..., M, N]`; `super`'s last and
/// `sub`'s first element are not read).
fn tridiagonal_matmul(
    op: &str,
    sup: &Tensor,
    main: &Tensor,
    sub: &Tensor,
    rhs: &Tensor,
) -> Result<Tensor, KernelError> {
    fn go<T: Element + RealField + Copy>(op: &str, d: [&Tensor; 3], rhs: &Tensor) -> Result<Tensor, KernelError> {
        let (lead, m, n) = matrices(op, rhs, "rhs")?;
        for t in d {
            let s = t.shape();
            if s.len() != lead.len() + 2 || s[..lead.len()] != *lead || s[lead.len()..] != [1, m] {
                return Err(KernelError::invalid(
                    op,
                    format!(
                        "a diagonal of shape {s:?} does not fit rhs of shape {:?} (it must be [..., 1, {m}])",
                        rhs.shape()
                    ),
                ));
            }
        }
        let (up, mid, low) = (values::<T>(op, d[0])?, values::<T>(op, d[1])?, values::<T>(op, d[2])?);
        let r = values::<T>(op, rhs)?;
        let mut out = Vec::with_capacity(r.len());
        for b in 0..lead.iter().product::<usize>() {
            let at = |i: usize, j: usize| r[(b * m + i) * n + j];
            for i in 0..m {
                for j in 0..n {
                    let mut v = mid[b * m + i] * at(i, j);
                    if i + 1 < m {
                        v += up[b * m + i] * at(i + 1, j);
                    }
                    if i > 0 {
                        v += low[b * m + i] * at(i - 1, j);
                    }
                    out.push(v);
                }
            }
        }
        tensor(op, rhs.shape(), out)
    }
    if [sup, main, sub].iter().any(|t| t.dtype() != rhs.dtype()) {
        return Err(KernelError::invalid(op, "the diagonals and rhs must have one dtype"));
    }
    match rhs.dtype() {
        DType::F32 => go::<f32>(op, [sup, main, sub], rhs),
        DType::F64 => go::<f64>(op, [sup, main, sub], rhs),
        other => Err(KernelError::dtype(op, other, "rhs must be f32 or f64")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_factors_and_the_solve_inverts() {
        // A = L L^T with L = [[2, 0], [1, 3]].
        let a = Tensor::from_vec(&[2, 2], vec![4f64, 2., 2., 10.]).unwrap();
        let l = cholesky("Cholesky", &a).unwrap();
        assert_eq!(l.to_vec::<f64>().unwrap(), [2., 0., 1., 3.]);
        let b = Tensor::from_vec(&[2, 1], vec![2f64, 7.]).unwrap();
        let x = triangular_solve("MatrixTriangularSolve", &l, &b, true, false).unwrap();
        assert_eq!(x.to_vec::<f64>().unwrap(), [1., 2.]);
        let x = triangular_solve("MatrixTriangularSolve", &l, &b, true, true).unwrap();
        // L^T x = b: x1 = 7/3, x0 = (2 - x1) / 2.
        let v = x.to_vec::<f64>().unwrap();
        assert!((v[1] - 7. / 3.).abs() < 1e-12 && (v[0] - (2. - 7. / 3.) / 2.).abs() < 1e-12, "{v:?}");
        let not_pd = Tensor::from_vec(&[2, 2], vec![1f32, 2., 2., 1.]).unwrap();
        assert!(cholesky("Cholesky", &not_pd).unwrap_err().to_string().contains("positive definite"));
    }
}
