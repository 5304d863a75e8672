//! Lowerings of the symmetric eigendecomposition (`SelfAdjointEigV2`,
//! `XlaSelfAdjointEig`) and the singular value decomposition (`Svd`,
//! `XlaSvd`): StableHLO has neither, so they are written as cyclic Jacobi
//! sweeps, as XLA's `SelfAdjointEig` and `SVD` compute them.
//!
//! The matrix is first made symmetric from the triangle the op reads. A
//! `stablehlo.while` runs sweeps until, in every batch member, the
//! off-diagonal part's squared Frobenius norm is at most `epsilon^2` times
//! the whole matrix's, or `max_iter` sweeps have run (XLA's defaults, 100
//! and 1e-6, for `SelfAdjointEigV2`). A sweep is an inner
//! `stablehlo.while` over the pairs `p < q` (trip `k` takes `p = k / n`,
//! `q = k % n`; trips with `p >= q` rotate by the identity): the rotation
//! `J` that zeroes `A[p, q]` updates `A <- J^T A J` and `V <- V J`. The
//! eigenvalues, `A`'s diagonal, are then sorted ascending with their
//! columns of `V` (`stablehlo.sort` and a permutation matrix). The
//! eigenvectors' signs are the rotations' (TensorFlow's may differ).
//! Program size does not depend on `n`; cost is `O(n^5)` per sweep (each
//! rotation is a matrix product), fine for the small matrices a TPU
//! program factors.
//!
//! The SVD is one-sided Jacobi on the matrix (on its transpose when it is
//! wide, then `u` and `v` swap): each rotation makes two columns
//! orthogonal, with the same rotation as the eigen sweep takes on the
//! Gram matrix `W^T W`, whose off-diagonal part sets when to stop. The
//! singular values are the columns' norms (descending), `u` the columns
//! divided by them; `full_matrices` (and `XlaSvd`) complete `u` or `v` with
//! the trailing columns of their Householder `Q`.

use super::linalg_solve::{identity, iota, pick, transpose, while_loop};
use super::{expand, Call};
use crate::ir::DType;
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Ty, Val};

/// `a^T? b^T?` per batch member: one `stablehlo.dot_general`.
pub(super) fn matmul(c: &mut Ctx, a: &Val, b: &Val, ta: bool, tb: bool) -> Val {
    let r = a.ty.rank();
    let dims: Vec<String> = (0..r - 2).map(|d| d.to_string()).collect();
    let rows = a.ty.shape[if ta { r - 1 } else { r - 2 }];
    let cols = b.ty.shape[if tb { r - 2 } else { r - 1 }];
    let mut shape = a.ty.shape[..r - 2].to_vec();
    shape.extend([rows, cols]);
    let attrs = format!(
        "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [{0}], rhs_batching_dimensions = [{0}], lhs_contracting_dimensions = [{1}], rhs_contracting_dimensions = [{2}]>",
        dims.join(", "),
        if ta { r - 2 } else { r - 1 },
        if tb { r - 1 } else { r - 2 }
    );
    c.op("stablehlo.dot_general", &[a, b], &attrs, a.ty.with_shape(shape))
}

/// `a` made symmetric from its lower (or upper) triangle.
pub(super) fn symmetric(c: &mut Ctx, a: &Val, lower: bool) -> Val {
    let r = a.ty.rank();
    let rows = iota(c, &a.ty.shape, r - 2);
    let cols = iota(c, &a.ty.shape, r - 1);
    let keep = c.compare(&rows, &cols, if lower { Cmp::Ge } else { Cmp::Le });
    let t = transpose(c, a);
    c.select(&keep, a, &t)
}

/// The element `(p, q)` of every matrix of `m` (`[..., n, n]` to `[...]`).
fn entry(c: &mut Ctx, m: &Val, p: &Val, q: &Val) -> Val {
    let r = m.ty.rank();
    let rows = iota(c, &m.ty.shape, r - 2);
    let cols = iota(c, &m.ty.shape, r - 1);
    let pb = c.broadcast_to(p, &m.ty.shape);
    let qb = c.broadcast_to(q, &m.ty.shape);
    let at_p = c.compare(&rows, &pb, Cmp::Eq);
    let at_q = c.compare(&cols, &qb, Cmp::Eq);
    let at = c.elementwise("and", &[&at_p, &at_q]);
    let zeros = c.splat(&m.ty, 0.0);
    let kept = c.select(&at, m, &zeros);
    c.reduce(&kept, &[r - 2, r - 1], Reducer::Add)
}

/// The Jacobi rotation `(cos, sin)` (each `[...]`) that zeroes the symmetric
/// pair `(p, q)` given `app`, `aqq` and `apq`: `cos = 1, sin = 0` where
/// `apq` is zero or `skip` holds.
pub(super) fn rotation(c: &mut Ctx, app: &Val, aqq: &Val, apq: &Val, skip: &Val) -> (Val, Val) {
    let ty = apq.ty.clone();
    let (zero, one, two) = (c.splat(&ty, 0.0), c.splat(&ty, 1.0), c.splat(&ty, 2.0));
    let is_zero = c.compare(apq, &zero, Cmp::Eq);
    let skip = c.broadcast_to(skip, &ty.shape);
    let identity = c.elementwise("or", &[&is_zero, &skip]);
    let safe = c.select(&is_zero, &one, apq);
    let diff = c.elementwise("subtract", &[aqq, app]);
    let twice = c.elementwise("multiply", &[&two, &safe]);
    let tau = c.elementwise("divide", &[&diff, &twice]);
    let abs = c.elementwise("abs", &[&tau]);
    let sq = c.elementwise("multiply", &[&tau, &tau]);
    let sq1 = c.elementwise("add", &[&sq, &one]);
    let root = c.elementwise("sqrt", &[&sq1]);
    let den = c.elementwise("add", &[&abs, &root]);
    let neg = c.compare(&tau, &zero, Cmp::Lt);
    let minus = c.splat(&ty, -1.0);
    let sign = c.select(&neg, &minus, &one);
    let t = c.elementwise("divide", &[&sign, &den]);
    let tt = c.elementwise("multiply", &[&t, &t]);
    let tt1 = c.elementwise("add", &[&tt, &one]);
    let root = c.elementwise("sqrt", &[&tt1]);
    let cos = c.elementwise("divide", &[&one, &root]);
    let sin = c.elementwise("multiply", &[&t, &cos]);
    (c.select(&identity, &one, &cos), c.select(&identity, &zero, &sin))
}

/// The rotation matrices `J` (`[..., n, n]`, like `ty`): the identity with
/// `J[p, p] = J[q, q] = cos`, `J[p, q] = sin`, `J[q, p] = -sin`.
pub(super) fn rotation_matrix(c: &mut Ctx, ty: &Ty, p: &Val, q: &Val, cos: &Val, sin: &Val) -> Val {
    let r = ty.rank();
    let rows = iota(c, &ty.shape, r - 2);
    let cols = iota(c, &ty.shape, r - 1);
    let pb = c.broadcast_to(p, &ty.shape);
    let qb = c.broadcast_to(q, &ty.shape);
    let (row_p, row_q) = (c.compare(&rows, &pb, Cmp::Eq), c.compare(&rows, &qb, Cmp::Eq));
    let (col_p, col_q) = (c.compare(&cols, &pb, Cmp::Eq), c.compare(&cols, &qb, Cmp::Eq));
    let pp = c.elementwise("and", &[&row_p, &col_p]);
    let qq = c.elementwise("and", &[&row_q, &col_q]);
    let pq = c.elementwise("and", &[&row_p, &col_q]);
    let qp = c.elementwise("and", &[&row_q, &col_p]);
    let diag = c.elementwise("or", &[&pp, &qq]);
    let cb = expand(c, cos, &ty.shape, &[r - 2, r - 1]);
    let sb = expand(c, sin, &ty.shape, &[r - 2, r - 1]);
    let neg = c.elementwise("negate", &[&sb]);
    // The diagonal goes last: on a trip with `p == q` it is all that is set (to `cos = 1`).
    let j = identity(c, ty);
    let j = c.select(&pq, &sb, &j);
    let j = c.select(&qp, &neg, &j);
    c.select(&diag, &cb, &j)
}

/// `(p, q, p < q)` of trip `k` of a sweep over `n x n` pairs.
pub(super) fn pair(c: &mut Ctx, k: &Val, n: usize) -> (Val, Val, Val) {
    let nn = c.splat(&k.ty, n as f64);
    let p = c.elementwise("divide", &[k, &nn]);
    let q = c.elementwise("remainder", &[k, &nn]);
    let skip = c.compare(&p, &q, Cmp::Ge);
    (p, q, skip)
}

/// Whether any batch member of `m` (`[..., n, n]`) has an off-diagonal part
/// larger than `epsilon` times its Frobenius norm (a scalar `i1`).
fn unconverged(c: &mut Ctx, m: &Val, epsilon: f64) -> Val {
    let r = m.ty.rank();
    let sq = c.elementwise("multiply", &[m, m]);
    let rows = iota(c, &m.ty.shape, r - 2);
    let cols = iota(c, &m.ty.shape, r - 1);
    let off = c.compare(&rows, &cols, Cmp::Ne);
    let off = pick_all(c, &sq, &off);
    let all = c.reduce(&sq, &[r - 2, r - 1], Reducer::Add);
    let tol = c.splat(&all.ty, epsilon * epsilon);
    let bound = c.elementwise("multiply", &[&all, &tol]);
    let over = c.compare(&off, &bound, Cmp::Gt);
    let lead: Vec<usize> = (0..r - 2).collect();
    c.reduce(&over, &lead, Reducer::Or)
}

/// The sum over the last two axes of `m` where `mask` holds.
fn pick_all(c: &mut Ctx, m: &Val, mask: &Val) -> Val {
    let r = m.ty.rank();
    let zeros = c.splat(&m.ty, 0.0);
    let kept = c.select(mask, m, &zeros);
    c.reduce(&kept, &[r - 2, r - 1], Reducer::Add)
}

/// One sweep of rotations over all pairs: `(A, V)` after it.
fn sweep(c: &mut Ctx, a: &Val, v: &Val) -> (Val, Val) {
    let n = a.ty.shape[a.ty.rank() - 1];
    let zero = c.splat(&Ty::scalar(DType::I32), 0.0);
    let out = while_loop(
        c,
        &[zero, a.clone(), v.clone()],
        |c, s| {
            let end = c.splat(&Ty::scalar(DType::I32), (n * n) as f64);
            c.compare(&s[0], &end, Cmp::Lt)
        },
        |c, s| {
            let (p, q, skip) = pair(c, &s[0], n);
            let app = entry(c, &s[1], &p, &p);
            let aqq = entry(c, &s[1], &q, &q);
            let apq = entry(c, &s[1], &p, &q);
            let (cos, sin) = rotation(c, &app, &aqq, &apq, &skip);
            let j = rotation_matrix(c, &s[1].ty, &p, &q, &cos, &sin);
            let aj = matmul(c, &s[1], &j, false, false);
            let a = matmul(c, &j, &aj, true, false);
            let v = matmul(c, &s[2], &j, false, false);
            let one = c.splat(&Ty::scalar(DType::I32), 1.0);
            vec![c.elementwise("add", &[&s[0], &one]), a, v]
        },
    );
    (out[1].clone(), out[2].clone())
}

/// `values` (`[..., n]`) sorted along their last axis (ascending, or
/// descending), and the columns of each of `vectors` (`[..., m, n]`) in the same order.
pub(super) fn sort_with(c: &mut Ctx, values: &Val, vectors: &[&Val], ascending: bool) -> (Val, Vec<Val>) {
    let r = values.ty.rank();
    let idx = iota(c, &values.ty.shape, r - 1);
    let s = Ty::scalar(values.ty.dtype);
    let i = Ty::scalar(DType::I32);
    let mut region = c.scratch();
    let (args, head) = Val::params(&mut region, &[s.clone(), s, i.clone(), i]);
    region.line(&format!("^bb0({head}):"));
    let less = region.compare(&args[0], &args[1], if ascending { Cmp::Lt } else { Cmp::Gt });
    region.line(&format!("\"stablehlo.return\"({}) : ({}) -> ()", less.name, less.ty.mlir()));
    c.resume(&region);
    let sorted = c.op_regions(
        "stablehlo.sort",
        &[values, &idx],
        &[format!("{{\n{}}}", region.text)],
        &format!("dimension = {} : i64, is_stable = true", r - 1),
        &[values.ty.clone(), idx.ty.clone()],
    );
    // The permutation matrix P[i, j] = (perm[j] == i): `x P` moves column perm[j] to j.
    let n = values.ty.shape[r - 1];
    let mut pshape = values.ty.shape.clone();
    pshape.insert(r - 1, n);
    let perm = expand(c, &sorted[1], &pshape, &[r - 1]);
    let rows = iota(c, &pshape, r - 1);
    let hit = c.compare(&perm, &rows, Cmp::Eq);
    let pty = Ty::new(values.ty.dtype, pshape);
    let (one, zero) = (c.splat(&pty, 1.0), c.splat(&pty, 0.0));
    let pm = c.select(&hit, &one, &zero);
    let moved = vectors.iter().map(|v| matmul(c, v, &pm, false, false)).collect();
    (sorted[0].clone(), moved)
}

/// The eigendecomposition of symmetric `a`: ascending eigenvalues and their eigenvectors.
pub(super) fn jacobi_eigh(c: &mut Ctx, a: &Val, max_iter: i64, epsilon: f64) -> (Val, Val) {
    let eye = identity(c, &a.ty);
    let zero = c.splat(&Ty::scalar(DType::I32), 0.0);
    let out = while_loop(
        c,
        &[zero, a.clone(), eye],
        |c, s| {
            let end = c.splat(&Ty::scalar(DType::I32), max_iter as f64);
            let more = c.compare(&s[0], &end, Cmp::Lt);
            let open = unconverged(c, &s[1], epsilon);
            c.elementwise("and", &[&more, &open])
        },
        |c, s| {
            let (a, v) = sweep(c, &s[1], &s[2]);
            let one = c.splat(&Ty::scalar(DType::I32), 1.0);
            vec![c.elementwise("add", &[&s[0], &one]), a, v]
        },
    );
    let r = a.ty.rank();
    let rows = iota(c, &a.ty.shape, r - 2);
    let cols = iota(c, &a.ty.shape, r - 1);
    let diag = c.compare(&rows, &cols, Cmp::Eq);
    let w = pick(c, &out[1], &diag, r - 1);
    let (w, mut v) = sort_with(c, &w, &[&out[2]], true);
    (w, v.remove(0))
}

/// `SelfAdjointEigV2(input) {compute_v}` and `XlaSelfAdjointEig(a) {lower, max_iter, epsilon}`.
pub(super) fn eigh(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let a = n.input(0)?;
    let r = a.ty.rank();
    if r < 2 || a.ty.shape[r - 1] != a.ty.shape[r - 2] || !matches!(a.ty.dtype, DType::F32 | DType::F64) {
        return Err(format!(
            "{}: the input must be square f32 or f64 matrices, got {}{:?}",
            n.op, a.ty.dtype, a.ty.shape
        ));
    }
    let xla = n.op == "XlaSelfAdjointEig";
    let lower = !xla || n.attrs.get_bool("lower").unwrap_or(true);
    let max_iter = if xla { n.int_attr("max_iter", 100) } else { 100 };
    let epsilon = if xla { n.float_attr("epsilon", 1e-6) } else { 1e-6 };
    let sym = symmetric(c, a, lower);
    let (w, v) = jacobi_eigh(c, &sym, max_iter, epsilon);
    if !xla && !n.attrs.get_bool("compute_v").unwrap_or(true) {
        return Ok(vec![w, empty(c, a.ty.dtype)?]);
    }
    Ok(vec![w, v])
}

/// An empty `[0]` tensor of `dtype` (the vectors an op was asked not to compute).
fn empty(c: &mut Ctx, dtype: DType) -> Result<Val, String> {
    let none = crate::exec::Tensor::from_vec(&[0], Vec::<f32>::new()).map_err(|e| e.to_string())?;
    let v = c.constant(&none);
    Ok(c.convert(&v, dtype))
}

/// One sweep of one-sided Jacobi rotations over the column pairs of `w`
/// (`[..., R, P]`), each making columns `p` and `q` orthogonal: `(W J, V J)`.
fn column_sweep(c: &mut Ctx, w: &Val, v: &Val) -> (Val, Val) {
    let r = w.ty.rank();
    let p = w.ty.shape[r - 1];
    let zero = c.splat(&Ty::scalar(DType::I32), 0.0);
    let out = while_loop(
        c,
        &[zero, w.clone(), v.clone()],
        |c, s| {
            let end = c.splat(&Ty::scalar(DType::I32), (p * p) as f64);
            c.compare(&s[0], &end, Cmp::Lt)
        },
        |c, s| {
            let (i, j, skip) = pair(c, &s[0], p);
            let cols = iota(c, &s[1].ty.shape, r - 1);
            let column = |c: &mut Ctx, k: &Val| {
                let kb = c.broadcast_to(k, &s[1].ty.shape);
                let at = c.compare(&cols, &kb, Cmp::Eq);
                pick(c, &s[1], &at, r - 1)
            };
            let (ci, cj) = (column(c, &i), column(c, &j));
            let dot = |c: &mut Ctx, x: &Val, y: &Val| {
                let xy = c.elementwise("multiply", &[x, y]);
                c.reduce(&xy, &[r - 2], Reducer::Add)
            };
            let (alpha, beta, gamma) = (dot(c, &ci, &ci), dot(c, &cj, &cj), dot(c, &ci, &cj));
            let (cos, sin) = rotation(c, &alpha, &beta, &gamma, &skip);
            let rot = rotation_matrix(c, &s[2].ty, &i, &j, &cos, &sin);
            let w = matmul(c, &s[1], &rot, false, false);
            let v = matmul(c, &s[2], &rot, false, false);
            let one = c.splat(&Ty::scalar(DType::I32), 1.0);
            vec![c.elementwise("add", &[&s[0], &one]), w, v]
        },
    );
    (out[1].clone(), out[2].clone())
}

/// The thin SVD of `w` (`[..., R, P]`, `R >= P`) by one-sided Jacobi:
/// descending singular values, `u` (`R x P`) and `v` (`P x P`).
fn one_sided_jacobi(c: &mut Ctx, w: &Val, max_iter: i64, epsilon: f64) -> (Val, Val, Val) {
    let r = w.ty.rank();
    let p = w.ty.shape[r - 1];
    let mut vshape = w.ty.shape.clone();
    vshape[r - 2] = p;
    let eye = identity(c, &w.ty.with_shape(vshape));
    let zero = c.splat(&Ty::scalar(DType::I32), 0.0);
    let out = while_loop(
        c,
        &[zero, w.clone(), eye],
        |c, s| {
            let end = c.splat(&Ty::scalar(DType::I32), max_iter as f64);
            let more = c.compare(&s[0], &end, Cmp::Lt);
            let gram = matmul(c, &s[1], &s[1], true, false);
            let open = unconverged(c, &gram, epsilon);
            c.elementwise("and", &[&more, &open])
        },
        |c, s| {
            let (w, v) = column_sweep(c, &s[1], &s[2]);
            let one = c.splat(&Ty::scalar(DType::I32), 1.0);
            vec![c.elementwise("add", &[&s[0], &one]), w, v]
        },
    );
    let w = &out[1];
    let sq = c.elementwise("multiply", &[w, w]);
    let norms = c.reduce(&sq, &[r - 2], Reducer::Add);
    let s = c.elementwise("sqrt", &[&norms]);
    let zero = c.splat(&s.ty, 0.0);
    let one = c.splat(&s.ty, 1.0);
    let none = c.compare(&s, &zero, Cmp::Eq);
    let safe = c.select(&none, &one, &s);
    let safe = expand(c, &safe, &w.ty.shape, &[r - 2]);
    let u = c.elementwise("divide", &[w, &safe]);
    let (s, mut uv) = sort_with(c, &s, &[&u, &out[2]], false);
    let v = uv.pop().unwrap_or_else(|| out[2].clone());
    let u = uv.pop().unwrap_or(u);
    (s, u, v)
}

/// `thin` (`[..., M, P]`, orthonormal columns) completed to `M x M` with the
/// last `M - P` columns of its Householder `Q`.
fn complete(c: &mut Ctx, thin: &Val) -> Val {
    let r = thin.ty.rank();
    let (m, p) = (thin.ty.shape[r - 2], thin.ty.shape[r - 1]);
    if m == p {
        return thin.clone();
    }
    let (_, q) = super::linalg_solve::householder(c, thin);
    let mut start = vec![0; r];
    start[r - 1] = p;
    let rest = super::shape::slice_range(c, &q, &start, &q.ty.shape.clone());
    super::shape::concatenate(c, &[thin.clone(), rest], r - 1, q.ty.clone())
}

/// `Svd(input) {compute_uv, full_matrices}` and `XlaSvd(a) {max_iter, epsilon}`
/// (always full): one-sided Jacobi on the matrix, or on its transpose when it is wide.
pub(super) fn svd(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let a = n.input(0)?;
    let r = a.ty.rank();
    if r < 2 || !matches!(a.ty.dtype, DType::F32 | DType::F64) {
        return Err(format!("{}: the input must be f32 or f64 matrices, got {}{:?}", n.op, a.ty.dtype, a.ty.shape));
    }
    let xla = n.op == "XlaSvd";
    let max_iter = if xla { n.int_attr("max_iter", 100) } else { 100 };
    let epsilon = if xla { n.float_attr("epsilon", 1e-6) } else { 1e-6 };
    let wide = a.ty.shape[r - 2] < a.ty.shape[r - 1];
    let w = if wide { transpose(c, a) } else { a.clone() };
    let (s, u, v) = one_sided_jacobi(c, &w, max_iter, epsilon);
    let (u, v) = if wide { (v, u) } else { (u, v) };
    if !xla && !n.attrs.get_bool("compute_uv").unwrap_or(true) {
        return Ok(vec![s, empty(c, a.ty.dtype)?, empty(c, a.ty.dtype)?]);
    }
    if xla || n.attrs.get_bool("full_matrices").unwrap_or(false) {
        return Ok(vec![s, complete(c, &u), complete(c, &v)]);
    }
    Ok(vec![s, u, v])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrMap;

    /// The lines `build` emits for `op` on one `[2, n, n]` f32 operand (`[2, n, k]` second operand).
    fn lines(op: &str, n: usize, two_operands: bool, outputs: &[Ty]) -> usize {
        let ty = Ty::new(DType::F32, vec![2, n, n]);
        let mut inputs = vec![Val { name: "%a".into(), ty: ty.clone() }];
        if two_operands {
            inputs.push(Val { name: "%b".into(), ty: Ty::new(DType::F32, vec![2, n, 3]) });
        }
        let consts = vec![None; inputs.len()];
        let attrs = AttrMap::default();
        let call = Call { op, attrs: &attrs, inputs, consts, outputs, num_replicas: 1 };
        let mut c = Ctx::default();
        let build = super::super::builder(op).expect("a builder");
        let out = build(&mut c, &call).expect("it lowers");
        assert_eq!(out.len(), outputs.len(), "{op}");
        assert_eq!(out[0].ty.shape[..2], [2, n], "{op}");
        c.text.lines().count()
    }

    #[test]
    fn the_loops_do_not_grow_with_the_matrix() {
        let f = |shape: Vec<usize>| Ty::new(DType::F32, shape);
        for n in [3usize, 9] {
            let sizes = [
                lines("MatrixInverse", n, false, &[f(vec![2, n, n])]),
                lines("MatrixSolve", n, true, &[f(vec![2, n, 3])]),
                lines("Qr", n, false, &[f(vec![2, n, n]), f(vec![2, n, n])]),
                lines("SelfAdjointEigV2", n, false, &[f(vec![2, n]), f(vec![2, n, n])]),
                lines("Svd", n, false, &[f(vec![2, n]), f(vec![2, n, n]), f(vec![2, n, n])]),
            ];
            let small = [
                lines("MatrixInverse", 2, false, &[f(vec![2, 2, 2])]),
                lines("MatrixSolve", 2, true, &[f(vec![2, 2, 3])]),
                lines("Qr", 2, false, &[f(vec![2, 2, 2]), f(vec![2, 2, 2])]),
                lines("SelfAdjointEigV2", 2, false, &[f(vec![2, 2]), f(vec![2, 2, 2])]),
                lines("Svd", 2, false, &[f(vec![2, 2]), f(vec![2, 2, 2]), f(vec![2, 2, 2])]),
            ];
            assert_eq!(sizes, small, "a {n} x {n} matrix emits as many ops as a 2 x 2 one");
        }
    }
}
