//! Lowerings of the factorizations, as tf2xla lowers them: `Cholesky` is
//! `stablehlo.cholesky` (lower) with the strict upper triangle zeroed (the
//! op leaves it unspecified), and `MatrixTriangularSolve` is
//! `stablehlo.triangular_solve` from the left, after the leading (batch)
//! axes of both operands are broadcast to the result's. `SparseMatMul` is
//! one f32 `stablehlo.dot_general`. Cost: one op each.

use super::Call;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Cmp, Ctx, Ty, Val};

/// `SparseMatMul(a, b)`: both operands in f32 (bf16 widens exactly), one dot.
pub(super) fn sparse_matmul(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let ta = n.attrs.get_bool("transpose_a").unwrap_or(false);
    let tb = n.attrs.get_bool("transpose_b").unwrap_or(false);
    let (a, b) = (c.convert(n.input(0)?, DType::F32), c.convert(n.input(1)?, DType::F32));
    let attrs = format!(
        "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [{}], rhs_contracting_dimensions = [{}]>",
        if ta { 0 } else { 1 },
        if tb { 1 } else { 0 }
    );
    Ok(vec![c.op("stablehlo.dot_general", &[&a, &b], &attrs, n.out(0)?.clone())])
}

/// `rhs` shifted by one row along axis -2: `up` gives row `i + 1` at row
/// `i`, otherwise row `i - 1`; the row shifted in is zero.
fn shift_rows(c: &mut Ctx, rhs: &Val, up: bool) -> Val {
    let r = rhs.ty.rank();
    let m = rhs.ty.shape[r - 2];
    let (mut begin, mut limit) = (vec![0usize; r], rhs.ty.shape.clone());
    if up {
        begin[r - 2] = 1;
    } else {
        limit[r - 2] = m - 1;
    }
    let mut shape = rhs.ty.shape.clone();
    shape[r - 2] = m - 1;
    let rows = c.op(
        "stablehlo.slice",
        &[rhs],
        &format!(
            "start_indices = {}, limit_indices = {}, strides = {}",
            super::i64s(&begin),
            super::i64s(&limit),
            super::i64s(&vec![1; r])
        ),
        rhs.ty.with_shape(shape),
    );
    let zero = c.splat(&Ty::scalar(rhs.ty.dtype), 0.0);
    let (mut low, mut high) = (vec![0i64; r], vec![0i64; r]);
    if up {
        high[r - 2] = 1;
    } else {
        low[r - 2] = 1;
    }
    c.op(
        "stablehlo.pad",
        &[&rows, &zero],
        &format!(
            "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
            super::i64s(&low),
            super::i64s(&high),
            super::i64s(&vec![0; r])
        ),
        rhs.ty.clone(),
    )
}

/// `TridiagonalMatMul(superdiag, maindiag, subdiag, rhs)`: each diagonal
/// (`[..., 1, M]`) scales the rows of `rhs` shifted up, in place or down.
pub(super) fn tridiagonal_matmul(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let rhs = n.input(3)?;
    let r = rhs.ty.rank();
    if r < 2 || rhs.ty.shape[r - 2] == 0 {
        return Err(format!("TridiagonalMatMul: rhs of shape {:?} has no rows", rhs.ty.shape));
    }
    let mut col = rhs.ty.shape.clone();
    col[r - 1] = 1;
    let scale = |c: &mut Ctx, i: usize, rows: &Val| -> Result<Val, String> {
        let d = c.reshape(n.input(i)?, col.clone());
        let d = c.broadcast_to(&d, &rhs.ty.shape);
        Ok(c.elementwise("multiply", &[&d, rows]))
    };
    let (up, down) = (shift_rows(c, rhs, true), shift_rows(c, rhs, false));
    let a = scale(c, 0, &up)?;
    let b = scale(c, 1, rhs)?;
    let d = scale(c, 2, &down)?;
    let ab = c.elementwise("add", &[&a, &b]);
    Ok(vec![c.elementwise("add", &[&ab, &d])])
}

/// `Cholesky(input)`.
pub(super) fn cholesky(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let r = x.ty.rank();
    if r < 2 || x.ty.shape[r - 1] != x.ty.shape[r - 2] {
        return Err(format!("Cholesky: input must be square matrices, got shape {:?}", x.ty.shape));
    }
    let l = c.op("stablehlo.cholesky", &[x], "lower = true", x.ty.clone());
    let int = Ty::new(DType::I32, x.ty.shape.clone());
    let rows = c.op("stablehlo.iota", &[], &format!("iota_dimension = {} : i64", r - 2), int.clone());
    let cols = c.op("stablehlo.iota", &[], &format!("iota_dimension = {} : i64", r - 1), int);
    let keep = c.compare(&rows, &cols, Cmp::Ge);
    let zeros = c.splat(&x.ty, 0.0);
    Ok(vec![c.select(&keep, &l, &zeros)])
}

/// `MatrixTriangularSolve(matrix, rhs) {lower, adjoint}`.
pub(super) fn triangular_solve(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (a, b) = (n.input(0)?, n.input(1)?);
    let out = n.out(0)?.clone();
    let r = out.rank();
    if r < 2 || a.ty.rank() < 2 {
        return Err(format!("MatrixTriangularSolve: result shape {:?} is not a batch of matrices", out.shape));
    }
    let m = a.ty.shape[a.ty.rank() - 1];
    let mut a_shape = out.shape[..r - 2].to_vec();
    a_shape.extend([m, m]);
    let a = c.broadcast_to(a, &a_shape);
    let b = c.broadcast_to(b, &out.shape);
    let lower = n.attrs.get_bool("lower").unwrap_or(true);
    let adjoint = n.attrs.get_bool("adjoint").unwrap_or(false);
    let transpose = if adjoint { "TRANSPOSE" } else { "NO_TRANSPOSE" };
    let attrs = format!(
        "left_side = true, lower = {lower}, unit_diagonal = false, transpose_a = #stablehlo<transpose {transpose}>"
    );
    Ok(vec![c.op("stablehlo.triangular_solve", &[&a, &b], &attrs, out)])
}
