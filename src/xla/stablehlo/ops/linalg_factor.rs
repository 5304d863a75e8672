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
