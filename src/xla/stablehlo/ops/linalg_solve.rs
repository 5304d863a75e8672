//! Lowerings of the solves: StableHLO has no LU, so `MatrixSolve`,
//! `MatrixInverse` and `TridiagonalSolve` (on the dense matrix its
//! diagonals make) are one `stablehlo.while` of Gauss-Jordan elimination
//! with partial pivoting, batched over the leading axes.
//!
//! Iteration `j` picks the row `p >= j` with the largest `|A[p, j]|` (the
//! first such row on ties), swaps rows `j` and `p` of `A` and of the
//! right-hand side, divides row `j` by its pivot and subtracts its multiples
//! from every other row. After `n` iterations `A` is the identity and the
//! right-hand side holds the solution (the inverse when it started as the
//! identity). Rows are read and written through iota masks, so every
//! batch member pivots on its own row and the program's size does not
//! depend on `n`. A singular matrix divides by zero and gives infinities or
//! NaN, as TensorFlow's XLA bridge does; with `adjoint` the matrix is
//! transposed first. Cost: `O(n^2 (n + k))` per matrix, `n` loop trips.
//!
//! `Qr` is one `stablehlo.while` of Householder reflections, one column per
//! trip, with XLA's sign convention; `q` is accumulated explicitly.
//! Cost: `O(M^2 N)` per matrix, `min(M, N)` loop trips.

use super::{expand, i64s, Call};
use crate::ir::DType;
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Ty, Val};

/// `"stablehlo.return"(vals)`.
fn ret(c: &mut Ctx, vals: &[Val]) {
    let names: Vec<&str> = vals.iter().map(|v| v.name.as_str()).collect();
    let types: Vec<String> = vals.iter().map(|v| v.ty.mlir()).collect();
    c.line(&format!("\"stablehlo.return\"({}) : ({}) -> ()", names.join(", "), types.join(", ")));
}

/// A `stablehlo.while` carrying `init`: `cond` and `body` build their
/// regions from the block arguments (every constant they need is made
/// inside the region, which captures nothing from outside).
pub(super) fn while_loop(
    c: &mut Ctx,
    init: &[Val],
    cond: impl FnOnce(&mut Ctx, &[Val]) -> Val,
    body: impl FnOnce(&mut Ctx, &[Val]) -> Vec<Val>,
) -> Vec<Val> {
    let types: Vec<Ty> = init.iter().map(|v| v.ty.clone()).collect();
    let mut regions = Vec::with_capacity(2);
    let mut cr = c.scratch();
    let (args, head) = Val::params(&mut cr, &types);
    cr.line(&format!("^bb0({head}):"));
    let p = cond(&mut cr, &args);
    ret(&mut cr, &[p]);
    c.resume(&cr);
    regions.push(format!("{{\n{}}}", cr.text));
    let mut br = c.scratch();
    let (args, head) = Val::params(&mut br, &types);
    br.line(&format!("^bb0({head}):"));
    let out = body(&mut br, &args);
    ret(&mut br, &out);
    c.resume(&br);
    regions.push(format!("{{\n{}}}", br.text));
    let refs: Vec<&Val> = init.iter().collect();
    c.op_regions("stablehlo.while", &refs, &regions, "", &types)
}

/// `stablehlo.iota` of i32 along `dim` with `shape`.
pub(super) fn iota(c: &mut Ctx, shape: &[usize], dim: usize) -> Val {
    c.op("stablehlo.iota", &[], &format!("iota_dimension = {dim} : i64"), Ty::new(DType::I32, shape.to_vec()))
}

/// The sum over `dim` of `m` where `mask` holds (the one row or column it picks).
pub(super) fn pick(c: &mut Ctx, m: &Val, mask: &Val, dim: usize) -> Val {
    let zeros = c.splat(&m.ty, 0.0);
    let kept = c.select(mask, m, &zeros);
    c.reduce(&kept, &[dim], Reducer::Add)
}

/// The identity matrices of `ty` (`[..., n, n]`).
pub(super) fn identity(c: &mut Ctx, ty: &Ty) -> Val {
    let r = ty.rank();
    let rows = iota(c, &ty.shape, r - 2);
    let cols = iota(c, &ty.shape, r - 1);
    let diag = c.compare(&rows, &cols, Cmp::Eq);
    let (one, zero) = (c.splat(ty, 1.0), c.splat(ty, 0.0));
    c.select(&diag, &one, &zero)
}

/// Each matrix of `a` transposed.
pub(super) fn transpose(c: &mut Ctx, a: &Val) -> Val {
    let r = a.ty.rank();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    let mut shape = a.ty.shape.clone();
    shape.swap(r - 2, r - 1);
    c.op("stablehlo.transpose", &[a], &format!("permutation = {}", i64s(&perm)), a.ty.with_shape(shape))
}

/// Rows `j` and `p` (per batch member, `p` of the batch shape) of `m`
/// swapped, and the row now at `j` (`[..., cols]`).
fn swap_rows(c: &mut Ctx, m: &Val, j: &Val, p: &Val) -> (Val, Val) {
    let r = m.ty.rank();
    let shape = m.ty.shape.clone();
    let rows = iota(c, &shape, r - 2);
    let jb = c.broadcast_to(j, &shape);
    let pb = expand(c, p, &shape, &[r - 2, r - 1]);
    let (is_j, is_p) = (c.compare(&rows, &jb, Cmp::Eq), c.compare(&rows, &pb, Cmp::Eq));
    let row_j = pick(c, m, &is_j, r - 2);
    let row_p = pick(c, m, &is_p, r - 2);
    let (at_j, at_p) = (expand(c, &row_p, &shape, &[r - 2]), expand(c, &row_j, &shape, &[r - 2]));
    let rest = c.select(&is_p, &at_p, m);
    (c.select(&is_j, &at_j, &rest), row_p)
}

/// Row `j` of `m` set to `row` and `factor[i] * row` taken from every other row `i`.
fn eliminate(c: &mut Ctx, m: &Val, j: &Val, factor: &Val, row: &Val) -> Val {
    let r = m.ty.rank();
    let shape = m.ty.shape.clone();
    let f = expand(c, factor, &shape, &[r - 1]);
    let rw = expand(c, row, &shape, &[r - 2]);
    let prod = c.elementwise("multiply", &[&f, &rw]);
    let rest = c.elementwise("subtract", &[m, &prod]);
    let rows = iota(c, &shape, r - 2);
    let jb = c.broadcast_to(j, &shape);
    let is_j = c.compare(&rows, &jb, Cmp::Eq);
    c.select(&is_j, &rw, &rest)
}

/// One Gauss-Jordan step on column `j`: `(a, x)` after the pivot swap and the elimination.
fn gauss_jordan_step(c: &mut Ctx, j: &Val, a: &Val, x: &Val) -> (Val, Val) {
    let r = a.ty.rank();
    let n = a.ty.shape[r - 1];
    let mut vec_shape = a.ty.shape.clone();
    vec_shape.pop();
    // The pivot: the largest |a[i, j]| over the rows i >= j.
    let cols = iota(c, &a.ty.shape, r - 1);
    let jb = c.broadcast_to(j, &a.ty.shape);
    let in_col = c.compare(&cols, &jb, Cmp::Eq);
    let col = pick(c, a, &in_col, r - 1);
    let abs = c.op("stablehlo.abs", &[&col], "", col.ty.clone());
    let idx = iota(c, &vec_shape, r - 2);
    let jv = c.broadcast_to(j, &vec_shape);
    let below = c.compare(&idx, &jv, Cmp::Ge);
    let none = c.splat(&abs.ty, -1.0);
    let cand = c.select(&below, &abs, &none);
    let best = c.reduce(&cand, &[r - 2], Reducer::Max);
    let best = expand(c, &best, &vec_shape, &[r - 2]);
    let hit = c.compare(&cand, &best, Cmp::Eq);
    let past = c.splat(&idx.ty, n as f64);
    let hit_idx = c.select(&hit, &idx, &past);
    let p = c.reduce(&hit_idx, &[r - 2], Reducer::Min);
    let (a, row_a) = swap_rows(c, a, j, &p);
    let (x, row_x) = swap_rows(c, x, j, &p);
    // Row j divided by its pivot.
    let on_j = c.compare(&idx, &jv, Cmp::Eq);
    let pivot = pick(c, &row_a, &on_j, r - 2);
    let pa = expand(c, &pivot, &row_a.ty.shape, &[r - 2]);
    let px = expand(c, &pivot, &row_x.ty.shape, &[r - 2]);
    let row_a = c.elementwise("divide", &[&row_a, &pa]);
    let row_x = c.elementwise("divide", &[&row_x, &px]);
    // Column j after the swap: each row's multiple of row j (none for row j itself).
    let col = pick(c, &a, &in_col, r - 1);
    let zero = c.splat(&col.ty, 0.0);
    let factor = c.select(&on_j, &zero, &col);
    (eliminate(c, &a, j, &factor, &row_a), eliminate(c, &x, j, &factor, &row_x))
}

/// `A^-1 B` per matrix by Gauss-Jordan elimination (`a` square, `b` with as many rows).
fn gauss_jordan(c: &mut Ctx, a: &Val, b: &Val) -> Val {
    let n = a.ty.shape[a.ty.rank() - 1];
    let zero = c.splat(&Ty::scalar(DType::I32), 0.0);
    let out = while_loop(
        c,
        &[zero, a.clone(), b.clone()],
        |c, v| {
            let end = c.splat(&Ty::scalar(DType::I32), n as f64);
            c.compare(&v[0], &end, Cmp::Lt)
        },
        |c, v| {
            let (a, x) = gauss_jordan_step(c, &v[0], &v[1], &v[2]);
            let one = c.splat(&Ty::scalar(DType::I32), 1.0);
            let next = c.elementwise("add", &[&v[0], &one]);
            vec![next, a, x]
        },
    );
    out[2].clone()
}

/// The square matrices operand 0 holds, transposed when `adjoint`.
fn square(c: &mut Ctx, n: &Call) -> Result<Val, String> {
    let a = n.input(0)?;
    let r = a.ty.rank();
    if r < 2 || a.ty.shape[r - 1] != a.ty.shape[r - 2] {
        return Err(format!("{}: the input must be square matrices, got shape {:?}", n.op, a.ty.shape));
    }
    if !matches!(a.ty.dtype, DType::F32 | DType::F64) {
        return Err(format!("{}: the input must be f32 or f64, got {}", n.op, a.ty.dtype));
    }
    Ok(if n.attrs.get_bool("adjoint").unwrap_or(false) { transpose(c, a) } else { a.clone() })
}

/// `MatrixInverse(input) {adjoint}`.
pub(super) fn inverse(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let a = square(c, n)?;
    let eye = identity(c, &a.ty);
    Ok(vec![gauss_jordan(c, &a, &eye)])
}

/// `MatrixSolve(matrix, rhs) {adjoint}`.
pub(super) fn solve(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let a = square(c, n)?;
    let b = n.input(1)?;
    let r = a.ty.rank();
    if b.ty.rank() != r || b.ty.shape[..r - 1] != a.ty.shape[..r - 1] || b.ty.dtype != a.ty.dtype {
        return Err(format!("MatrixSolve: rhs {:?} does not fit matrix {:?}", b.ty.shape, a.ty.shape));
    }
    Ok(vec![gauss_jordan(c, &a, b)])
}

/// `TridiagonalSolve(diagonals, rhs)`: the dense matrix the diagonals make
/// (`[..., 3, M]`: row `i` holds `super[i]` right of the diagonal and
/// `sub[i]` left of it), solved as `MatrixSolve` solves.
pub(super) fn tridiagonal_solve(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (d, b) = (n.input(0)?, n.input(1)?);
    let r = d.ty.rank();
    if r < 2 || d.ty.shape[r - 2] != 3 || b.ty.rank() != r || b.ty.shape[..r - 2] != d.ty.shape[..r - 2] {
        return Err(format!("TridiagonalSolve: diagonals {:?} do not fit rhs {:?}", d.ty.shape, b.ty.shape));
    }
    if n.attrs.get_bool("perturb_singular").unwrap_or(false) {
        return Err("TridiagonalSolve: perturb_singular = true is not supported".into());
    }
    if !matches!(d.ty.dtype, DType::F32 | DType::F64) || b.ty.dtype != d.ty.dtype {
        return Err(format!("TridiagonalSolve: the operands must be f32 or f64, got {}", d.ty.dtype));
    }
    let m = d.ty.shape[r - 1];
    let mut shape = d.ty.shape.clone();
    shape[r - 2] = m;
    let mut vec_shape = shape.clone();
    vec_shape.pop();
    let row = |c: &mut Ctx, k: usize| {
        let mut start = vec![0usize; r];
        start[r - 2] = k;
        let mut limit = d.ty.shape.clone();
        limit[r - 2] = k + 1;
        let one = super::shape::slice_range(c, d, &start, &limit);
        let v = c.reshape(&one, vec_shape.clone());
        expand(c, &v, &shape, &[r - 1])
    };
    let (sup, main, sub) = (row(c, 0), row(c, 1), row(c, 2));
    let rows = iota(c, &shape, r - 2);
    let cols = iota(c, &shape, r - 1);
    let one = c.splat(&rows.ty, 1.0);
    let (above, below) = (c.elementwise("add", &[&rows, &one]), c.elementwise("subtract", &[&rows, &one]));
    let zeros = c.splat(&main.ty, 0.0);
    let is_sub = c.compare(&cols, &below, Cmp::Eq);
    let dense = c.select(&is_sub, &sub, &zeros);
    let is_main = c.compare(&cols, &rows, Cmp::Eq);
    let dense = c.select(&is_main, &main, &dense);
    let is_sup = c.compare(&cols, &above, Cmp::Eq);
    let dense = c.select(&is_sup, &sup, &dense);
    Ok(vec![gauss_jordan(c, &dense, b)])
}

/// One Householder reflection `H = I - tau v v^T` that clears column `k`
/// of `a` (`[..., M, N]`) below the diagonal: `(H a, q H)`. The reflection
/// maps the column to `beta e_k`, `beta = -sign(a_kk) |a_k|`; a column
/// already clear below the diagonal gets `tau = 0` (no reflection), as in
/// XLA's and LAPACK's QR.
fn householder_step(c: &mut Ctx, k: &Val, a: &Val, q: &Val) -> (Val, Val) {
    let r = a.ty.rank();
    let (ashape, qshape) = (a.ty.shape.clone(), q.ty.shape.clone());
    let vshape = ashape[..r - 1].to_vec();
    let lead = Ty::new(a.ty.dtype, ashape[..r - 2].to_vec());
    let cols = iota(c, &ashape, r - 1);
    let kb = c.broadcast_to(k, &ashape);
    let in_col = c.compare(&cols, &kb, Cmp::Eq);
    let col = pick(c, a, &in_col, r - 1);
    let idx = iota(c, &vshape, r - 2);
    let kv = c.broadcast_to(k, &vshape);
    let (at_k, below) = (c.compare(&idx, &kv, Cmp::Eq), c.compare(&idx, &kv, Cmp::Gt));
    let alpha = pick(c, &col, &at_k, r - 2);
    let zeros = c.splat(&col.ty, 0.0);
    let tail = c.select(&below, &col, &zeros);
    let squares = c.elementwise("multiply", &[&tail, &tail]);
    let sigma = c.reduce(&squares, &[r - 2], Reducer::Add);
    let aa = c.elementwise("multiply", &[&alpha, &alpha]);
    let norm2 = c.elementwise("add", &[&aa, &sigma]);
    let mu = c.elementwise("sqrt", &[&norm2]);
    let (zero, one) = (c.splat(&lead, 0.0), c.splat(&lead, 1.0));
    let nonneg = c.compare(&alpha, &zero, Cmp::Ge);
    let neg_mu = c.elementwise("negate", &[&mu]);
    let beta = c.select(&nonneg, &neg_mu, &mu);
    let clear = c.compare(&sigma, &zero, Cmp::Eq);
    let beta = c.select(&clear, &alpha, &beta);
    // tau = (beta - alpha) / beta and v = [1, tail / (alpha - beta)]; both divisors are 1 when clear.
    let safe_beta = c.select(&clear, &one, &beta);
    let diff = c.elementwise("subtract", &[&beta, &alpha]);
    let tau = c.elementwise("divide", &[&diff, &safe_beta]);
    let gap = c.elementwise("subtract", &[&alpha, &beta]);
    let gap = c.select(&clear, &one, &gap);
    let gap = expand(c, &gap, &vshape, &[r - 2]);
    let scaled = c.elementwise("divide", &[&tail, &gap]);
    let ones = c.splat(&col.ty, 1.0);
    let v = c.select(&at_k, &ones, &scaled);
    let tau = expand(c, &tau, &vshape, &[r - 2]);
    let tv = c.elementwise("multiply", &[&tau, &v]);
    // a - (tau v) (v^T a)
    let va = expand(c, &v, &ashape, &[r - 1]);
    let prod = c.elementwise("multiply", &[&va, a]);
    let vta = c.reduce(&prod, &[r - 2], Reducer::Add);
    let left = expand(c, &tv, &ashape, &[r - 1]);
    let right = expand(c, &vta, &ashape, &[r - 2]);
    let outer = c.elementwise("multiply", &[&left, &right]);
    let a = c.elementwise("subtract", &[a, &outer]);
    // q - (q v) (tau v)^T
    let vq = expand(c, &v, &qshape, &[r - 2]);
    let prod = c.elementwise("multiply", &[q, &vq]);
    let qv = c.reduce(&prod, &[r - 1], Reducer::Add);
    let left = expand(c, &qv, &qshape, &[r - 1]);
    let right = expand(c, &tv, &qshape, &[r - 2]);
    let outer = c.elementwise("multiply", &[&left, &right]);
    (a, c.elementwise("subtract", &[q, &outer]))
}

/// The Householder reduction of `a` (`[..., M, N]`): `(R, Q)` with `Q`
/// `M x M` accumulated from the identity and `R` not yet cut to its upper
/// triangle; a `stablehlo.while` of `min(M, N)` steps.
pub(super) fn householder(c: &mut Ctx, a: &Val) -> (Val, Val) {
    let r = a.ty.rank();
    let (m, cols) = (a.ty.shape[r - 2], a.ty.shape[r - 1]);
    let mut qshape = a.ty.shape.clone();
    qshape[r - 1] = m;
    let eye = identity(c, &a.ty.with_shape(qshape));
    let zero = c.splat(&Ty::scalar(DType::I32), 0.0);
    let steps = m.min(cols);
    let out = while_loop(
        c,
        &[zero, a.clone(), eye],
        |c, v| {
            let end = c.splat(&Ty::scalar(DType::I32), steps as f64);
            c.compare(&v[0], &end, Cmp::Lt)
        },
        |c, v| {
            let (a, q) = householder_step(c, &v[0], &v[1], &v[2]);
            let one = c.splat(&Ty::scalar(DType::I32), 1.0);
            vec![c.elementwise("add", &[&v[0], &one]), a, q]
        },
    );
    (out[1].clone(), out[2].clone())
}

/// `Qr(input) {full_matrices}`: a `stablehlo.while` of `min(M, N)`
/// Householder steps accumulating `q` from the identity; `r` is the reduced
/// matrix with its lower triangle zeroed, then both are cut to `P` columns
/// and rows.
pub(super) fn qr(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let a = n.input(0)?;
    let r = a.ty.rank();
    if r < 2 || !matches!(a.ty.dtype, DType::F32 | DType::F64) {
        return Err(format!("Qr: the input must be f32 or f64 matrices, got {}{:?}", a.ty.dtype, a.ty.shape));
    }
    let (m, cols) = (a.ty.shape[r - 2], a.ty.shape[r - 1]);
    let p = if n.attrs.get_bool("full_matrices").unwrap_or(false) { m } else { m.min(cols) };
    let mut qshape = a.ty.shape.clone();
    qshape[r - 1] = m;
    let (reduced, q) = householder(c, a);
    let rows = iota(c, &a.ty.shape, r - 2);
    let col_idx = iota(c, &a.ty.shape, r - 1);
    let upper = c.compare(&rows, &col_idx, Cmp::Le);
    let zeros = c.splat(&a.ty, 0.0);
    let rm = c.select(&upper, &reduced, &zeros);
    let mut q_limit = qshape.clone();
    q_limit[r - 1] = p;
    let mut r_limit = a.ty.shape.clone();
    r_limit[r - 2] = p;
    let q = super::shape::slice_range(c, &q, &vec![0; r], &q_limit);
    let rm = super::shape::slice_range(c, &rm, &vec![0; r], &r_limit);
    Ok(vec![q, rm])
}
