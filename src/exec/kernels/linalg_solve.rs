//! Factorization and solve kernels: `MatrixInverse`, `MatrixSolve`,
//! `TridiagonalSolve` and `Qr`, batched over the leading axes as
//! TensorFlow's CPU kernels are; and the symmetric eigendecompositions
//! `SelfAdjointEigV2` and `XlaSelfAdjointEig` (`nalgebra`'s, eigenvalues
//! sorted ascending as TensorFlow's).
//!
//! Each matrix is factored by `nalgebra`'s LU decomposition with partial
//! pivoting (what TensorFlow's Eigen kernels use) in the input's own
//! precision (f32 or f64). With `adjoint` the op works on each matrix's
//! transpose (the adjoint of a real matrix). A singular matrix is an error,
//! as in TensorFlow. `MatrixSolve` needs the same leading axes on both
//! operands (TensorFlow's raw op does not broadcast them).
//! `TridiagonalSolve` solves the dense matrix its three diagonals make, by
//! the same pivoted LU (TensorFlow's CPU kernel pivots too); its
//! `perturb_singular` mode is refused. `Qr` is written out (Householder
//! reflections with TensorFlow's sign convention: `nalgebra`'s QR also
//! reflects a column that is already reduced, flipping a sign TensorFlow
//! keeps). Cost: `O(n^3 + n^2 k)` per matrix.

use nalgebra::{DMatrix, RealField};

use super::linalg_factor::{matrices, rows, tensor, values};
use crate::exec::error::KernelError;
use crate::exec::tensor::{Element, Tensor};
use crate::ir::{AttrMap, DType};

/// Runs the op if it is one of this family.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| super::arg(op, inputs, i);
    let adjoint = attrs.get_bool("adjoint").unwrap_or(false);
    match op {
        "SelfAdjointEigV2" => {
            let compute_v = attrs.get_bool("compute_v").unwrap_or(true);
            return Some(x(0).and_then(|a| eigh(op, a, true, compute_v)));
        }
        "XlaSelfAdjointEig" => {
            let lower = attrs.get_bool("lower").unwrap_or(true);
            return Some(x(0).and_then(|a| eigh(op, a, lower, true)));
        }
        "Svd" => {
            let compute_uv = attrs.get_bool("compute_uv").unwrap_or(true);
            let full = attrs.get_bool("full_matrices").unwrap_or(false);
            return Some(x(0).and_then(|a| svd(op, a, compute_uv, full)));
        }
        "XlaSvd" => return Some(x(0).and_then(|a| svd(op, a, true, true))),
        _ => {}
    }
    if op == "Qr" {
        let full = attrs.get_bool("full_matrices").unwrap_or(false);
        return Some(x(0).and_then(|a| qr(op, a, full)));
    }
    let out = match op {
        "MatrixInverse" => x(0).and_then(|a| solve(op, a, None, adjoint)),
        "MatrixSolve" => (|| solve(op, x(0)?, Some(x(1)?), adjoint))(),
        "TridiagonalSolve" => (|| {
            if attrs.get_bool("perturb_singular").unwrap_or(false) {
                return Err(KernelError::invalid(op, "perturb_singular = true is not supported"));
            }
            let dense = tridiagonal_dense(op, x(0)?, x(1)?)?;
            solve(op, &dense, Some(x(1)?), false)
        })(),
        _ => return None,
    };
    Some(out.map(|t| vec![t]))
}

/// `A^-1 B` per matrix (`A^-T B` with `adjoint`); `B` is the identity when absent.
fn solve(op: &str, a: &Tensor, b: Option<&Tensor>, adjoint: bool) -> Result<Tensor, KernelError> {
    fn go<T: Element + RealField + Copy>(
        op: &str,
        a: &Tensor,
        b: Option<&Tensor>,
        adjoint: bool,
    ) -> Result<Tensor, KernelError> {
        let (alead, m, m2) = matrices(op, a, "matrix")?;
        if m != m2 {
            return Err(KernelError::invalid(op, format!("the matrix must be square, got shape {:?}", a.shape())));
        }
        let (shape, k, bv) = match b {
            Some(b) => {
                let (blead, bm, k) = matrices(op, b, "rhs")?;
                if blead != alead || bm != m {
                    return Err(KernelError::invalid(
                        op,
                        format!("matrix {:?} and rhs {:?} must have the same batch and row dims", a.shape(), b.shape()),
                    ));
                }
                (b.shape().to_vec(), k, Some(values::<T>(op, b)?))
            }
            None => (a.shape().to_vec(), m, None),
        };
        let av = values::<T>(op, a)?;
        let batch: usize = alead.iter().product();
        let mut out = Vec::with_capacity(batch * m * k);
        for i in 0..batch {
            let mut am = DMatrix::from_row_slice(m, m, &av[i * m * m..(i + 1) * m * m]);
            if adjoint {
                am.transpose_mut();
            }
            let rhs = match &bv {
                Some(bv) => DMatrix::from_row_slice(m, k, &bv[i * m * k..(i + 1) * m * k]),
                None => DMatrix::identity(m, m),
            };
            let x = am.lu().solve(&rhs).ok_or_else(|| KernelError::invalid(op, "the input is not invertible"))?;
            out.extend(rows(&x));
        }
        tensor(op, &shape, out)
    }
    if let Some(b) = b.filter(|b| b.dtype() != a.dtype()) {
        return Err(KernelError::invalid(op, format!("matrix is {} but rhs is {}", a.dtype(), b.dtype())));
    }
    match a.dtype() {
        DType::F32 => go::<f32>(op, a, b, adjoint),
        DType::F64 => go::<f64>(op, a, b, adjoint),
        other => Err(KernelError::dtype(op, other, "matrix must be f32 or f64")),
    }
}

/// `Qr(input)`: `(q, r)` per matrix by Householder reflections taken as
/// LAPACK, Eigen and XLA take them: column `k`'s reflection maps it to
/// `beta e_k` with `beta = -sign(a_kk) |a_k|`, and a column whose entries
/// below the diagonal are all zero is left alone (so `r`'s diagonal keeps
/// its sign there). `q` is `M x P` and `r` `P x N` with `P = min(M, N)`,
/// or `q` is `M x M` with `full_matrices`.
fn qr(op: &str, a: &Tensor, full: bool) -> Result<Vec<Tensor>, KernelError> {
    fn go<T: Element + RealField + Copy>(op: &str, a: &Tensor, full: bool) -> Result<Vec<Tensor>, KernelError> {
        let (lead, m, n) = matrices(op, a, "input")?;
        let p = if full { m } else { m.min(n) };
        let av = values::<T>(op, a)?;
        let batch: usize = lead.iter().product();
        let (mut qs, mut rs) = (Vec::with_capacity(batch * m * p), Vec::with_capacity(batch * p * n));
        for b in 0..batch {
            let (q, r) = householder_qr(DMatrix::from_row_slice(m, n, &av[b * m * n..(b + 1) * m * n]));
            qs.extend(rows(&q.columns(0, p).into_owned()));
            rs.extend(rows(&r.rows(0, p).into_owned()));
        }
        let shape = |rows: usize, cols: usize| lead.iter().copied().chain([rows, cols]).collect::<Vec<_>>();
        Ok(vec![tensor(op, &shape(m, p), qs)?, tensor(op, &shape(p, n), rs)?])
    }
    match a.dtype() {
        DType::F32 => go::<f32>(op, a, full),
        DType::F64 => go::<f64>(op, a, full),
        other => Err(KernelError::dtype(op, other, "input must be f32 or f64")),
    }
}

/// The full `(Q, R)` of `r` (`M x M` and `M x N`), `R` exactly zero below its diagonal.
fn householder_qr<T: RealField + Copy>(mut r: DMatrix<T>) -> (DMatrix<T>, DMatrix<T>) {
    let (m, n) = r.shape();
    let mut q = DMatrix::<T>::identity(m, m);
    for k in 0..m.min(n) {
        let alpha = r[(k, k)];
        let sigma = (k + 1..m).fold(T::zero(), |s, i| s + r[(i, k)] * r[(i, k)]);
        if sigma == T::zero() {
            continue;
        }
        let mu = (alpha * alpha + sigma).sqrt();
        let beta = if alpha >= T::zero() { -mu } else { mu };
        let tau = (beta - alpha) / beta;
        let mut v = nalgebra::DVector::<T>::zeros(m);
        v[k] = T::one();
        for i in k + 1..m {
            v[i] = r[(i, k)] / (alpha - beta);
        }
        // H = I - tau v v^T: R <- H R and Q <- Q H.
        let vr = v.transpose() * &r;
        r -= (&v * vr) * tau;
        let qv = &q * &v;
        q -= (qv * v.transpose()) * tau;
    }
    for j in 0..n {
        for i in j + 1..m {
            r[(i, j)] = T::zero();
        }
    }
    (q, r)
}

/// `SelfAdjointEigV2(input)` and `XlaSelfAdjointEig(a)`: the eigenvalues of
/// each symmetric matrix (read from its `lower` or upper triangle) in
/// ascending order, and their unit eigenvectors as columns (an empty `[0]`
/// tensor without `compute_v`). The vectors' signs are `nalgebra`'s.
fn eigh(op: &str, a: &Tensor, lower: bool, compute_v: bool) -> Result<Vec<Tensor>, KernelError> {
    fn go<T: Element + RealField + Copy>(
        op: &str,
        a: &Tensor,
        lower: bool,
        compute_v: bool,
    ) -> Result<Vec<Tensor>, KernelError> {
        let (lead, m, n) = matrices(op, a, "input")?;
        if m != n {
            return Err(KernelError::invalid(op, format!("the input must be square, got shape {:?}", a.shape())));
        }
        let av = values::<T>(op, a)?;
        let batch: usize = lead.iter().product();
        let (mut ws, mut vs) = (Vec::with_capacity(batch * n), Vec::with_capacity(batch * n * n));
        for b in 0..batch {
            let at = |i: usize, j: usize| av[b * n * n + i * n + j];
            let sym = DMatrix::from_fn(n, n, |i, j| if (i >= j) == lower || i == j { at(i, j) } else { at(j, i) });
            let eig = nalgebra::SymmetricEigen::new(sym);
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&i, &j| {
                eig.eigenvalues[i].partial_cmp(&eig.eigenvalues[j]).unwrap_or(std::cmp::Ordering::Equal)
            });
            ws.extend(order.iter().map(|&i| eig.eigenvalues[i]));
            if compute_v {
                vs.extend(
                    (0..n).flat_map(|r| order.iter().map(move |&c| (r, c))).map(|(r, c)| eig.eigenvectors[(r, c)]),
                );
            }
        }
        let mut wshape = lead.to_vec();
        wshape.push(n);
        let vshape = if compute_v { a.shape().to_vec() } else { vec![0] };
        Ok(vec![tensor(op, &wshape, ws)?, tensor(op, &vshape, vs)?])
    }
    match a.dtype() {
        DType::F32 => go::<f32>(op, a, lower, compute_v),
        DType::F64 => go::<f64>(op, a, lower, compute_v),
        other => Err(KernelError::dtype(op, other, "input must be f32 or f64")),
    }
}

/// `Svd(input)` and `XlaSvd(a)`: the singular values of each matrix in
/// descending order and, with `compute_uv`, the singular vectors as the
/// columns of `u` (`M x P`) and `v` (`N x P`), `P = min(M, N)`; with
/// `full_matrices`, `u` is `M x M` and `v` `N x N`, completed by the
/// Householder QR of the thin ones. Without `compute_uv`, `u` and `v` are
/// empty `[0]` tensors. The vectors' signs are `nalgebra`'s.
fn svd(op: &str, a: &Tensor, compute_uv: bool, full: bool) -> Result<Vec<Tensor>, KernelError> {
    fn go<T: Element + RealField + Copy>(
        op: &str,
        a: &Tensor,
        compute_uv: bool,
        full: bool,
    ) -> Result<Vec<Tensor>, KernelError> {
        let (lead, m, n) = matrices(op, a, "input")?;
        let p = m.min(n);
        let (um, vn) = if full { (m, n) } else { (p, p) };
        let av = values::<T>(op, a)?;
        let batch: usize = lead.iter().product();
        let (mut ss, mut us, mut vs) = (Vec::new(), Vec::new(), Vec::new());
        for b in 0..batch {
            let mat = DMatrix::from_row_slice(m, n, &av[b * m * n..(b + 1) * m * n]);
            let d = nalgebra::SVD::new(mat, true, true);
            let (Some(u), Some(v_t)) = (d.u, d.v_t) else {
                return Err(KernelError::invalid(op, "the singular value decomposition did not converge"));
            };
            let mut order: Vec<usize> = (0..p).collect();
            order.sort_by(|&i, &j| {
                d.singular_values[j].partial_cmp(&d.singular_values[i]).unwrap_or(std::cmp::Ordering::Equal)
            });
            ss.extend(order.iter().map(|&i| d.singular_values[i]));
            if !compute_uv {
                continue;
            }
            let u = DMatrix::from_fn(m, p, |r, c| u[(r, order[c])]);
            let v = DMatrix::from_fn(n, p, |r, c| v_t[(order[c], r)]);
            let complete = |thin: DMatrix<T>, k: usize| -> DMatrix<T> {
                if k == thin.ncols() {
                    return thin;
                }
                let (q, _) = householder_qr(thin.clone());
                DMatrix::from_fn(k, k, |r, c| if c < thin.ncols() { thin[(r, c)] } else { q[(r, c)] })
            };
            us.extend(rows(&complete(u, um)));
            vs.extend(rows(&complete(v, vn)));
        }
        let shape = |dims: &[usize]| lead.iter().copied().chain(dims.iter().copied()).collect::<Vec<_>>();
        let s = tensor(op, &shape(&[p]), ss)?;
        if !compute_uv {
            return Ok(vec![s, tensor::<T>(op, &[0], Vec::new())?, tensor::<T>(op, &[0], Vec::new())?]);
        }
        Ok(vec![s, tensor(op, &shape(&[m, um]), us)?, tensor(op, &shape(&[n, vn]), vs)?])
    }
    match a.dtype() {
        // In f64, rounded back: nalgebra's f32 iteration stops short of f32 accuracy when two
        // singular values are close, where TensorFlow's kernels converge.
        DType::F32 => {
            let wide = super::dtypes::cast(op, a, DType::F64)?;
            let out = go::<f64>(op, &wide, compute_uv, full)?;
            out.iter().map(|t| super::dtypes::cast(op, t, DType::F32)).collect()
        }
        DType::F64 => go::<f64>(op, a, compute_uv, full),
        other => Err(KernelError::dtype(op, other, "input must be f32 or f64")),
    }
}

/// The dense `[..., M, M]` matrices of `TridiagonalSolve`'s diagonals
/// (`[..., 3, M]`: superdiagonal, main diagonal, subdiagonal; the
/// superdiagonal's last and the subdiagonal's first element are not read).
fn tridiagonal_dense(op: &str, diags: &Tensor, rhs: &Tensor) -> Result<Tensor, KernelError> {
    fn go<T: Element + RealField + Copy>(op: &str, diags: &Tensor, m: usize) -> Result<Tensor, KernelError> {
        let d = values::<T>(op, diags)?;
        let batch = d.len() / (3 * m).max(1);
        let mut out = vec![T::zero(); batch * m * m];
        for b in 0..batch {
            let (sup, main, sub) = (&d[b * 3 * m..], &d[b * 3 * m + m..], &d[b * 3 * m + 2 * m..]);
            let cell = |i: usize, j: usize| b * m * m + i * m + j;
            for i in 0..m {
                out[cell(i, i)] = main[i];
                if i + 1 < m {
                    out[cell(i, i + 1)] = sup[i];
                    out[cell(i + 1, i)] = sub[i + 1];
                }
            }
        }
        let mut shape = diags.shape().to_vec();
        let r = shape.len();
        shape[r - 2] = m;
        tensor(op, &shape, out)
    }
    let (lead, three, m) = matrices(op, diags, "diagonals")?;
    let (blead, bm, _) = matrices(op, rhs, "rhs")?;
    if three != 3 || blead != lead || bm != m {
        return Err(KernelError::invalid(
            op,
            format!("diagonals {:?} must be [..., 3, M] for rhs {:?} ([..., M, K])", diags.shape(), rhs.shape()),
        ));
    }
    match diags.dtype() {
        DType::F32 => go::<f32>(op, diags, m),
        DType::F64 => go::<f64>(op, diags, m),
        other => Err(KernelError::dtype(op, other, "diagonals must be f32 or f64")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_and_solve_agree_and_singular_is_an_error() {
        let a = Tensor::from_vec(&[2, 2], vec![4f64, 7., 2., 6.]).unwrap();
        let inv = solve("MatrixInverse", &a, None, false).unwrap().to_vec::<f64>().unwrap();
        let want = [0.6, -0.7, -0.2, 0.4];
        assert!(inv.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-12), "{inv:?}");
        let inv_t = solve("MatrixInverse", &a, None, true).unwrap().to_vec::<f64>().unwrap();
        assert!(inv_t.iter().zip([0.6, -0.2, -0.7, 0.4]).all(|(g, w)| (g - w).abs() < 1e-12), "{inv_t:?}");
        let b = Tensor::from_vec(&[2, 1], vec![1f64, 2.]).unwrap();
        let x = solve("MatrixSolve", &a, Some(&b), false).unwrap().to_vec::<f64>().unwrap();
        assert!((x[0] - (0.6 - 1.4)).abs() < 1e-12 && (x[1] - (-0.2 + 0.8)).abs() < 1e-12, "{x:?}");
        let singular = Tensor::from_vec(&[2, 2], vec![1f32, 2., 2., 4.]).unwrap();
        assert!(solve("MatrixInverse", &singular, None, false).unwrap_err().to_string().contains("not invertible"));
        let wrong = Tensor::from_vec(&[3, 1], vec![1f64, 2., 3.]).unwrap();
        assert!(solve("MatrixSolve", &a, Some(&wrong), false).is_err());
    }

    #[test]
    fn qr_leaves_a_reduced_column_alone_and_reflects_the_others_as_lapack() {
        // Upper triangular already: no reflection, so r keeps its negative diagonal and q = I.
        let a = Tensor::from_vec(&[2, 2], vec![-2f64, 1., 0., -3.]).unwrap();
        let out = qr("Qr", &a, false).unwrap();
        assert_eq!(out[0].to_vec::<f64>().unwrap(), [1., 0., 0., 1.]);
        assert_eq!(out[1].to_vec::<f64>().unwrap(), [-2., 1., 0., -3.]);
        // [[3], [4]]: the reflection maps the column to -sign(3) * 5.
        let b = Tensor::from_vec(&[2, 1], vec![3f64, 4.]).unwrap();
        let out = qr("Qr", &b, false).unwrap();
        let (q, r) = (out[0].to_vec::<f64>().unwrap(), out[1].to_vec::<f64>().unwrap());
        assert!((r[0] + 5.).abs() < 1e-12 && (q[0] + 0.6).abs() < 1e-12 && (q[1] + 0.8).abs() < 1e-12, "{q:?} {r:?}");
    }
}
