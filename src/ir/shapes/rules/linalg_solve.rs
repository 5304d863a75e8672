//! Type rules of the factorizations and solves: `MatrixInverse` keeps its
//! input's type, `MatrixSolve` and `TridiagonalSolve` give their
//! right-hand side's. The matrices must be square (three diagonals of
//! length `M` for `TridiagonalSolve`), with the same leading (batch) axes
//! on both operands, as TensorFlow's shape functions require.

use super::linalg::matrix;
use super::{Args, OutType};

/// `MatrixInverse(input)`: the input's type (square matrices).
pub(super) fn inverse(a: &Args) -> Result<Vec<OutType>, String> {
    let (_, m, n) = matrix(a, 0)?;
    if m != n {
        return Err(format!("{}: input must be square, got shape {:?}", a.op, a.x(0)?.shape));
    }
    Ok(vec![a.same(0)?])
}

/// `MatrixSolve(matrix, rhs)`: the type of `rhs`.
pub(super) fn solve(a: &Args) -> Result<Vec<OutType>, String> {
    let (alead, m, m2) = matrix(a, 0)?;
    let (blead, bm, _) = matrix(a, 1)?;
    if m != m2 || bm != m || alead != blead {
        return Err(format!(
            "{}: matrix {:?} must be square, with the batch dims and rows of rhs {:?}",
            a.op,
            a.x(0)?.shape,
            a.x(1)?.shape
        ));
    }
    Ok(vec![a.same(1)?])
}

/// `TridiagonalSolve(diagonals, rhs)`: the type of `rhs` (`[..., M, K]`,
/// the diagonals `[..., 3, M]`).
pub(super) fn tridiagonal_solve(a: &Args) -> Result<Vec<OutType>, String> {
    let (dlead, three, m) = matrix(a, 0)?;
    let (blead, bm, _) = matrix(a, 1)?;
    if three != 3 || bm != m || dlead != blead {
        return Err(format!(
            "{}: diagonals {:?} must be [..., 3, M] for rhs {:?} ([..., M, K])",
            a.op,
            a.x(0)?.shape,
            a.x(1)?.shape
        ));
    }
    Ok(vec![a.same(1)?])
}

/// `Qr(input) {full_matrices}`: `q` `[..., M, P]` and `r` `[..., P, N]`
/// with `P = min(M, N)`, or `P = M` with `full_matrices`.
pub(super) fn qr(a: &Args) -> Result<Vec<OutType>, String> {
    let (lead, m, n) = matrix(a, 0)?;
    let p = if a.bool_attr("full_matrices", false) { m } else { m.min(n) };
    let dtype = a.x(0)?.dtype;
    let shape = |r: usize, c: usize| lead.iter().copied().chain([r, c]).collect();
    Ok(vec![OutType::new(dtype, shape(m, p)), OutType::new(dtype, shape(p, n))])
}

/// `SelfAdjointEigV2(input)` / `XlaSelfAdjointEig(a)`: the eigenvalues
/// `[..., N]` and the eigenvectors `[..., N, N]` (`[0]` when `compute_v` is false).
pub(super) fn eigh(a: &Args) -> Result<Vec<OutType>, String> {
    let (mut lead, m, n) = matrix(a, 0)?;
    if m != n {
        return Err(format!("{}: input must be square, got shape {:?}", a.op, a.x(0)?.shape));
    }
    let dtype = a.x(0)?.dtype;
    let v = if a.bool_attr("compute_v", true) { a.x(0)?.shape.to_vec() } else { vec![0] };
    lead.push(n);
    Ok(vec![OutType::new(dtype, lead), OutType::new(dtype, v)])
}

/// `Svd(input) {compute_uv, full_matrices}` / `XlaSvd(a)` (always full):
/// `s` `[..., P]`, `u` `[..., M, P]` and `v` `[..., N, P]` with `P = min(M,
/// N)`, `M x M` and `N x N` when full, `[0]` without `compute_uv`.
pub(super) fn svd(a: &Args) -> Result<Vec<OutType>, String> {
    let (lead, m, n) = matrix(a, 0)?;
    let p = m.min(n);
    let dtype = a.x(0)?.dtype;
    let xla = a.op == "XlaSvd";
    let shape = |dims: &[usize]| lead.iter().copied().chain(dims.iter().copied()).collect::<Vec<_>>();
    let s = OutType::new(dtype, shape(&[p]));
    if !xla && !a.bool_attr("compute_uv", true) {
        return Ok(vec![s, OutType::new(dtype, vec![0]), OutType::new(dtype, vec![0])]);
    }
    let full = xla || a.bool_attr("full_matrices", false);
    let (um, vn) = if full { (m, n) } else { (p, p) };
    Ok(vec![s, OutType::new(dtype, shape(&[m, um])), OutType::new(dtype, shape(&[n, vn]))])
}
