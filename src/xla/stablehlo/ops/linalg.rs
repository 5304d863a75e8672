//! Matrix products: `MatMul`, `BatchMatMul{,V2,V3}` (batch dimensions
//! broadcast first) and two-operand `Einsum`, each one
//! `stablehlo.dot_general` (plus reductions and a transpose for einsum).
//! Cost: one dot per TF op.

use super::Call;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Ctx, Reducer, Ty, Val};

/// How a bf16 product narrows from f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Narrow {
    /// Round to nearest even.
    Round,
    /// Drop the low 16 bits, as TensorFlow's CPU `MatMul` kernels (and the
    /// simulator) do for bf16 results.
    Truncate,
}

/// `stablehlo.dot_general`; bf16 and f16 operands are widened to f32 and
/// the f32 product narrowed once, as the simulator computes it.
fn dot(c: &mut Ctx, a: &Val, b: &Val, attrs: &str, out: Ty, narrow: Narrow) -> Val {
    if !matches!(out.dtype, DType::BF16 | DType::F16) {
        return c.op("stablehlo.dot_general", &[a, b], attrs, out);
    }
    let (a, b) = (c.convert(a, DType::F32), c.convert(b, DType::F32));
    let mut wide = c.op("stablehlo.dot_general", &[&a, &b], attrs, out.with_dtype(DType::F32));
    if out.dtype == DType::BF16 && narrow == Narrow::Truncate {
        let bits = c.op("stablehlo.bitcast_convert", &[&wide], "", wide.ty.with_dtype(DType::I32));
        let mask = c.splat(&bits.ty, f64::from(0xFFFF_0000u32 as i32));
        let kept = c.elementwise("and", &[&bits, &mask]);
        let cut = c.op("stablehlo.bitcast_convert", &[&kept], "", wide.ty.clone());
        // NaN stays NaN (its payload may sit in the dropped bits).
        let nan = c.compare(&wide, &wide, crate::xla::stablehlo::text::Cmp::Ne);
        wide = c.select(&nan, &wide, &cut);
    }
    c.convert(&wide, out.dtype)
}

pub(super) fn matmul(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let ta = n.attrs.get_bool("transpose_a").unwrap_or(false);
    let tb = n.attrs.get_bool("transpose_b").unwrap_or(false);
    let out = n.out(0)?.clone();
    let attrs = format!(
        "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [{}], rhs_contracting_dimensions = [{}]>",
        if ta { 0 } else { 1 },
        if tb { 1 } else { 0 }
    );
    Ok(vec![dot(c, n.input(0)?, n.input(1)?, &attrs, out, Narrow::Truncate)])
}

/// Batched matmul; batch dimensions broadcast first (BatchMatMulV2).
pub(super) fn batch_matmul(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let adj_x = n.attrs.get_bool("adj_x").unwrap_or(false);
    let adj_y = n.attrs.get_bool("adj_y").unwrap_or(false);
    let out = n.out(0)?.clone();
    let batch = out.rank() - 2;
    let (a, b) = (n.input(0)?, n.input(1)?);
    let widen = |c: &mut Ctx, v: &Val| {
        let mut shape = out.shape[..batch].to_vec();
        shape.extend_from_slice(&v.ty.shape[v.ty.rank() - 2..]);
        c.broadcast_to(v, &shape)
    };
    let (a, b) = (widen(c, a), widen(c, b));
    let dims: Vec<String> = (0..batch).map(|d| d.to_string()).collect();
    let attrs = format!(
        "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [{0}], rhs_batching_dimensions = [{0}], lhs_contracting_dimensions = [{1}], rhs_contracting_dimensions = [{2}]>",
        dims.join(", "),
        if adj_x { batch } else { batch + 1 },
        if adj_y { batch + 1 } else { batch }
    );
    Ok(vec![dot(c, &a, &b, &attrs, out, Narrow::Truncate)])
}

/// Two-operand einsum without repeated letters in one operand: letters in
/// both operands and the output are batch dimensions, in both but not the
/// output are contracted; letters of one operand only that the output
/// drops are summed first. The product is then transposed to the output.
/// A one-operand einsum (`bij->j`, `bij->bji`): sums away the letters the
/// output drops, then transposes to the output's order. Repeated letters
/// (diagonals) do not lower.
fn einsum_unary(c: &mut Ctx, n: &Call, spec: &str, out_spec: &str) -> Result<Vec<Val>, String> {
    let out_ty = n.out(0)?.clone();
    let mut s: Vec<char> = spec.chars().collect();
    let out: Vec<char> = out_spec.chars().collect();
    let distinct = |l: &[char]| l.iter().enumerate().all(|(i, x)| !l[..i].contains(x));
    if !distinct(&s) || !distinct(&out) || out.iter().any(|l| !s.contains(l)) {
        return Err(format!("a one-operand einsum lowers with distinct letters only; got `{spec}->{out_spec}`"));
    }
    let mut v = n.input(0)?.clone();
    let drop: Vec<usize> = (0..s.len()).filter(|&i| !out.contains(&s[i])).collect();
    if !drop.is_empty() {
        v = c.reduce(&v, &drop, Reducer::Add);
        s.retain(|l| out.contains(l));
    }
    if s == out {
        return Ok(vec![v]);
    }
    let perm: Vec<String> = out.iter().map(|&l| s.iter().position(|&x| x == l).unwrap_or(0).to_string()).collect();
    Ok(vec![c.op("stablehlo.transpose", &[&v], &format!("permutation = array<i64: {}>", perm.join(", ")), out_ty)])
}

pub(super) fn einsum(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let equation = n.attrs.get_str("equation").ok_or("missing attribute `equation`")?.replace(' ', "");
    let (lhs, out_spec) = equation.split_once("->").ok_or("the equation has no `->`")?;
    let specs: Vec<&str> = lhs.split(',').collect();
    if specs.len() == 1 && n.inputs.len() == 1 && !equation.contains('.') {
        return einsum_unary(c, n, specs[0], out_spec);
    }
    if specs.len() != 2 || specs.len() != n.inputs.len() || equation.contains('.') {
        return Err(format!("only two-operand einsum equations without ellipses lower; got `{equation}`"));
    }
    let out_ty = n.out(0)?.clone();
    let (mut a, mut b) = (n.input(0)?.clone(), n.input(1)?.clone());
    let (mut sa, mut sb): (Vec<char>, Vec<char>) = (specs[0].chars().collect(), specs[1].chars().collect());
    let out: Vec<char> = out_spec.chars().collect();
    // Sum away letters only one operand has and the output drops.
    for (v, s, other) in [(&mut a, &mut sa, specs[1]), (&mut b, &mut sb, specs[0])] {
        let drop: Vec<usize> = (0..s.len()).filter(|&i| !other.contains(s[i]) && !out.contains(&s[i])).collect();
        if !drop.is_empty() {
            *v = c.reduce(v, &drop, Reducer::Add);
            *s = (0..s.len()).filter(|i| !drop.contains(i)).map(|i| s[i]).collect();
        }
    }
    let batch: Vec<char> = sa.iter().copied().filter(|l| sb.contains(l) && out.contains(l)).collect();
    let contract: Vec<char> = sa.iter().copied().filter(|l| sb.contains(l) && !out.contains(l)).collect();
    let pos = |s: &[char], l: char| s.iter().position(|&x| x == l).unwrap_or(0).to_string();
    let join = |s: &[char], ls: &[char]| ls.iter().map(|&l| pos(s, l)).collect::<Vec<_>>().join(", ");
    let free_a: Vec<char> = sa.iter().copied().filter(|l| !batch.contains(l) && !contract.contains(l)).collect();
    let free_b: Vec<char> = sb.iter().copied().filter(|l| !batch.contains(l) && !contract.contains(l)).collect();
    let mut product: Vec<char> = batch.clone();
    product.extend(&free_a);
    product.extend(&free_b);
    let size = |l: char| {
        sa.iter()
            .position(|&x| x == l)
            .map(|i| a.ty.shape[i])
            .or_else(|| sb.iter().position(|&x| x == l).map(|i| b.ty.shape[i]))
    };
    let shape: Vec<usize> = product.iter().map(|&l| size(l).unwrap_or(1)).collect();
    let attrs = format!(
        "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [{}], rhs_batching_dimensions = [{}], lhs_contracting_dimensions = [{}], rhs_contracting_dimensions = [{}]>",
        join(&sa, &batch),
        join(&sb, &batch),
        join(&sa, &contract),
        join(&sb, &contract)
    );
    let dot = dot(c, &a, &b, &attrs, out_ty.with_shape(shape), Narrow::Round);
    if product == out {
        return Ok(vec![dot]);
    }
    let perm: Vec<String> = out.iter().map(|&l| pos(&product, l)).collect();
    Ok(vec![c.op("stablehlo.transpose", &[&dot], &format!("permutation = array<i64: {}>", perm.join(", ")), out_ty)])
}
