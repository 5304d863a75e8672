//! Op → builder: one small function per TensorFlow op type, in one table,
//! in the style of TensorFlow's legalize-tf patterns.
//!
//! A builder receives the op's operands as SSA values (and their values
//! where they are compile-time constants: axes, shapes, permutations), its
//! result types (known from the trace, see `trace`) and its
//! attributes, and appends StableHLO ops to the context. Ops whose results
//! are all constants never reach a builder: the emitter prints them as
//! `stablehlo.constant`. Ops on variables (reads, assignments, updates) are
//! handled by the emitter itself, since they thread state through the step.

use super::text::{Cmp, Ctx, Reducer, Ty, Val};
use crate::exec::Tensor;
use crate::ir::{AttrMap, DType};

/// What a builder gets.
pub struct Call<'a> {
    /// The op type.
    pub op: &'a str,
    /// The node's attributes.
    pub attrs: &'a AttrMap,
    /// The operands, in order.
    pub inputs: Vec<Val>,
    /// Operand values known at compile time.
    pub consts: Vec<Option<Tensor>>,
    /// Result types, one per output.
    pub outputs: &'a [Ty],
    /// How many replicas the program runs as.
    pub num_replicas: usize,
}

impl Call<'_> {
    fn input(&self, i: usize) -> Result<&Val, String> {
        self.inputs.get(i).ok_or_else(|| format!("expected at least {} operands", i + 1))
    }

    fn out(&self, i: usize) -> Result<&Ty, String> {
        self.outputs.get(i).ok_or_else(|| format!("no type for output {i}"))
    }

    /// Operand `i` as a compile-time list of integers.
    fn ints(&self, i: usize, what: &str) -> Result<Vec<i64>, String> {
        let t = self
            .consts
            .get(i)
            .and_then(Option::as_ref)
            .ok_or_else(|| format!("operand {i} ({what}) must be a compile-time constant"))?;
        t.to_i64_vec(self.op, what).map_err(|e| e.to_string())
    }
}

/// A builder: appends the op and returns its results.
pub type Builder = fn(&mut Ctx, &Call) -> Result<Vec<Val>, String>;

/// The lowering table: op type → builder.
pub const TABLE: &[(&str, Builder)] = &[
    ("Abs", |c, n| unary(c, n, "abs")),
    ("Add", binary_add),
    ("AddN", add_n),
    ("AddV2", binary_add),
    ("AllReduce", all_reduce),
    ("BatchMatMul", batch_matmul),
    ("BatchMatMulV2", batch_matmul),
    ("BiasAdd", bias_add),
    ("BiasAddGrad", bias_add_grad),
    ("Broadcast", broadcast),
    ("BroadcastTo", broadcast_to),
    ("Cast", cast),
    ("CrossReplicaSum", cross_replica_sum),
    ("Div", div),
    ("Einsum", einsum),
    ("Equal", |c, n| compare(c, n, Cmp::Eq)),
    ("Erfc", |c, n| unary(c, n, "chlo.erfc")),
    ("Exp", |c, n| unary(c, n, "exponential")),
    ("Fill", fill),
    ("FloorDiv", floor_div),
    ("FloorMod", floor_mod),
    ("Greater", |c, n| compare(c, n, Cmp::Gt)),
    ("GreaterEqual", |c, n| compare(c, n, Cmp::Ge)),
    ("Identity", identity),
    ("IdentityN", identity),
    ("Less", |c, n| compare(c, n, Cmp::Lt)),
    ("LessEqual", |c, n| compare(c, n, Cmp::Le)),
    ("Log", |c, n| unary(c, n, "log")),
    ("MatMul", matmul),
    ("Maximum", |c, n| binary(c, n, "maximum")),
    ("Mean", |c, n| reduce(c, n, true)),
    ("Minimum", |c, n| binary(c, n, "minimum")),
    ("Mul", |c, n| binary(c, n, "multiply")),
    ("Neg", |c, n| unary(c, n, "negate")),
    ("NotEqual", |c, n| compare(c, n, Cmp::Ne)),
    ("Pack", pack),
    ("PlaceholderWithDefault", identity),
    ("Pow", |c, n| binary(c, n, "power")),
    ("RealDiv", div),
    ("Reciprocal", reciprocal),
    ("Relu", relu),
    ("ReluGrad", relu_grad),
    ("ReplicaId", replica_id),
    ("Reshape", reshape),
    ("Rsqrt", |c, n| unary(c, n, "rsqrt")),
    ("RsqrtGrad", rsqrt_grad),
    ("SelectV2", select),
    ("Sigmoid", |c, n| unary(c, n, "logistic")),
    ("SigmoidGrad", sigmoid_grad),
    ("Snapshot", identity),
    ("Softmax", softmax),
    ("Sqrt", |c, n| unary(c, n, "sqrt")),
    ("Square", square),
    ("SquaredDifference", squared_difference),
    ("StopGradient", identity),
    ("Sub", |c, n| binary(c, n, "subtract")),
    ("Sum", |c, n| reduce(c, n, false)),
    ("Tanh", |c, n| unary(c, n, "tanh")),
    ("TanhGrad", tanh_grad),
    ("Tile", tile),
    ("Transpose", transpose),
];

/// Ops whose results depend only on their operands' shapes: always constants.
pub const SHAPE_ONLY: &[&str] = &["Shape", "Size", "Rank", "ZerosLike", "OnesLike"];

/// Ops with no StableHLO builder that must fold to constants (their
/// operands are shapes or index lists).
pub const FOLD_ONLY: &[&str] =
    &["BroadcastGradientArgs", "Const", "DynamicStitch", "InvertPermutation", "Range", "Shape", "Size", "Rank"];

/// The builder of `op`.
pub fn builder(op: &str) -> Option<Builder> {
    TABLE.binary_search_by(|(name, _)| name.cmp(&op)).ok().map(|i| TABLE[i].1)
}

fn identity(_: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    Ok(n.inputs.clone())
}

fn unary(c: &mut Ctx, n: &Call, name: &str) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let full = if name.contains('.') { name.to_string() } else { format!("stablehlo.{name}") };
    Ok(vec![c.op(&full, &[x], "", x.ty.clone())])
}

/// Both operands broadcast to the result shape (NumPy rules), in their own dtype.
fn broadcast_pair(c: &mut Ctx, n: &Call) -> Result<(Val, Val), String> {
    let shape = n.out(0)?.shape.clone();
    let a = c.broadcast_to(n.input(0)?, &shape);
    let b = c.broadcast_to(n.input(1)?, &shape);
    Ok((a, b))
}

fn binary(c: &mut Ctx, n: &Call, name: &str) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    Ok(vec![c.elementwise(name, &[&a, &b])])
}

fn binary_add(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    binary(c, n, "add")
}

fn compare(c: &mut Ctx, n: &Call, cmp: Cmp) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    Ok(vec![c.compare(&a, &b, cmp)])
}

fn div(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    if is_float(n.out(0)?.dtype) {
        binary(c, n, "divide")
    } else {
        floor_div(c, n)
    }
}

fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64)
}

/// Floor division: `floor(a / b)` for floats; for integers the truncated
/// quotient, one less where the signs differ and the division is inexact.
fn floor_div(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    if is_float(a.ty.dtype) {
        let q = c.elementwise("divide", &[&a, &b]);
        return Ok(vec![c.elementwise("floor", &[&q])]);
    }
    let q = c.elementwise("divide", &[&a, &b]);
    let r = c.elementwise("remainder", &[&a, &b]);
    let zero = c.splat(&a.ty, 0.0);
    let one = c.splat(&a.ty, 1.0);
    let inexact = c.compare(&r, &zero, Cmp::Ne);
    let a_neg = c.compare(&a, &zero, Cmp::Lt);
    let b_neg = c.compare(&b, &zero, Cmp::Lt);
    let differ = c.compare(&a_neg, &b_neg, Cmp::Ne);
    let fix = c.elementwise("and", &[&inexact, &differ]);
    let less = c.elementwise("subtract", &[&q, &one]);
    Ok(vec![c.select(&fix, &less, &q)])
}

/// Floor modulo: the remainder with the divisor's sign.
fn floor_mod(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    let r = c.elementwise("remainder", &[&a, &b]);
    let zero = c.splat(&a.ty, 0.0);
    let nonzero = c.compare(&r, &zero, Cmp::Ne);
    let r_neg = c.compare(&r, &zero, Cmp::Lt);
    let b_neg = c.compare(&b, &zero, Cmp::Lt);
    let differ = c.compare(&r_neg, &b_neg, Cmp::Ne);
    let fix = c.elementwise("and", &[&nonzero, &differ]);
    let shifted = c.elementwise("add", &[&r, &b]);
    Ok(vec![c.select(&fix, &shifted, &r)])
}

fn reciprocal(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let one = c.splat(&x.ty, 1.0);
    Ok(vec![c.elementwise("divide", &[&one, x])])
}

fn relu(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let zero = c.splat(&x.ty, 0.0);
    Ok(vec![c.elementwise("maximum", &[x, &zero])])
}

fn square(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    Ok(vec![c.elementwise("multiply", &[x, x])])
}

fn squared_difference(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    let d = c.elementwise("subtract", &[&a, &b]);
    Ok(vec![c.elementwise("multiply", &[&d, &d])])
}

/// `ReluGrad(dy, x)`: `dy` where `x > 0`, else 0.
fn relu_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (dy, x) = broadcast_pair(c, n)?;
    let zero = c.splat(&x.ty, 0.0);
    let pos = c.compare(&x, &zero, Cmp::Gt);
    let zeros = c.splat(&dy.ty, 0.0);
    Ok(vec![c.select(&pos, &dy, &zeros)])
}

/// `TanhGrad(y, dy)`: `dy * (1 - y²)`.
fn tanh_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (y, dy) = broadcast_pair(c, n)?;
    let one = c.splat(&y.ty, 1.0);
    let y2 = c.elementwise("multiply", &[&y, &y]);
    let d = c.elementwise("subtract", &[&one, &y2]);
    Ok(vec![c.elementwise("multiply", &[&dy, &d])])
}

/// `SigmoidGrad(y, dy)`: `dy * y * (1 - y)`.
fn sigmoid_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (y, dy) = broadcast_pair(c, n)?;
    let one = c.splat(&y.ty, 1.0);
    let d = c.elementwise("subtract", &[&one, &y]);
    let yd = c.elementwise("multiply", &[&y, &d]);
    Ok(vec![c.elementwise("multiply", &[&dy, &yd])])
}

/// `RsqrtGrad(y, dy)`: `dy * -0.5 * y³`.
fn rsqrt_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (y, dy) = broadcast_pair(c, n)?;
    let half = c.splat(&y.ty, -0.5);
    let y2 = c.elementwise("multiply", &[&y, &y]);
    let y3 = c.elementwise("multiply", &[&y2, &y]);
    let s = c.elementwise("multiply", &[&y3, &half]);
    Ok(vec![c.elementwise("multiply", &[&dy, &s])])
}

fn add_n(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let shape = n.out(0)?.shape.clone();
    let mut acc = c.broadcast_to(n.input(0)?, &shape);
    for v in &n.inputs[1..] {
        let v = c.broadcast_to(v, &shape);
        acc = c.elementwise("add", &[&acc, &v]);
    }
    Ok(vec![acc])
}

fn select(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let shape = n.out(0)?.shape.clone();
    let p = c.broadcast_to(n.input(0)?, &shape);
    let a = c.broadcast_to(n.input(1)?, &shape);
    let b = c.broadcast_to(n.input(2)?, &shape);
    Ok(vec![c.select(&p, &a, &b)])
}

fn cast(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let to = n.out(0)?.dtype;
    let x = n.input(0)?;
    Ok(vec![c.convert(x, to)])
}

/// The channel dimension of `BiasAdd`/`BiasAddGrad`.
fn channel_dim(n: &Call, rank: usize) -> usize {
    match n.attrs.get_str("data_format") {
        Some("NCHW") | Some("NCW") | Some("NCDHW") if rank > 1 => 1,
        _ => rank.saturating_sub(1),
    }
}

fn bias_add(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let bias = n.input(1)?;
    let dim = channel_dim(n, x.ty.rank());
    let b =
        c.op("stablehlo.broadcast_in_dim", &[bias], &format!("broadcast_dimensions = array<i64: {dim}>"), x.ty.clone());
    Ok(vec![c.elementwise("add", &[x, &b])])
}

fn bias_add_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let dim = channel_dim(n, x.ty.rank());
    let dims: Vec<usize> = (0..x.ty.rank()).filter(|&d| d != dim).collect();
    Ok(vec![c.reduce(x, &dims, Reducer::Add)])
}

/// `Sum`/`Mean` over constant axes, keeping dimensions when asked.
fn reduce(c: &mut Ctx, n: &Call, mean: bool) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let rank = x.ty.rank() as i64;
    let mut dims: Vec<usize> = n
        .ints(1, "axes")?
        .into_iter()
        .map(|a| if a < 0 { a + rank } else { a })
        .filter(|a| (0..rank.max(1)).contains(a))
        .map(|a| a as usize)
        .filter(|&a| a < x.ty.rank())
        .collect();
    dims.sort_unstable();
    dims.dedup();
    let mut r = c.reduce(x, &dims, Reducer::Add);
    if mean {
        let count: usize = dims.iter().map(|&d| x.ty.shape[d]).product();
        let k = c.splat(&r.ty, count.max(1) as f64);
        r = c.elementwise("divide", &[&r, &k]);
    }
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.reshape(&r, out)])
}

fn matmul(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let ta = n.attrs.get_bool("transpose_a").unwrap_or(false);
    let tb = n.attrs.get_bool("transpose_b").unwrap_or(false);
    let out = n.out(0)?.clone();
    let attrs = format!(
        "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [{}], rhs_contracting_dimensions = [{}]>",
        if ta { 0 } else { 1 },
        if tb { 1 } else { 0 }
    );
    Ok(vec![c.op("stablehlo.dot_general", &[n.input(0)?, n.input(1)?], &attrs, out)])
}

/// Batched matmul; batch dimensions broadcast first (BatchMatMulV2).
fn batch_matmul(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
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
    Ok(vec![c.op("stablehlo.dot_general", &[&a, &b], &attrs, out)])
}

/// Two-operand einsum without repeated letters in one operand: letters in
/// both operands and the output are batch dimensions, in both but not the
/// output are contracted; letters of one operand only that the output
/// drops are summed first. The product is then transposed to the output.
fn einsum(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let equation = n.attrs.get_str("equation").ok_or("missing attribute `equation`")?.replace(' ', "");
    let (lhs, out_spec) = equation.split_once("->").ok_or("the equation has no `->`")?;
    let specs: Vec<&str> = lhs.split(',').collect();
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
    let dot = c.op("stablehlo.dot_general", &[&a, &b], &attrs, out_ty.with_shape(shape));
    if product == out {
        return Ok(vec![dot]);
    }
    let perm: Vec<String> = out.iter().map(|&l| pos(&product, l)).collect();
    Ok(vec![c.op("stablehlo.transpose", &[&dot], &format!("permutation = array<i64: {}>", perm.join(", ")), out_ty)])
}

fn reshape(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.reshape(n.input(0)?, out)])
}

fn transpose(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let perm: Vec<String> = n.ints(1, "perm")?.iter().map(|p| p.to_string()).collect();
    let out = n.out(0)?.clone();
    Ok(vec![c.op(
        "stablehlo.transpose",
        &[n.input(0)?],
        &format!("permutation = array<i64: {}>", perm.join(", ")),
        out,
    )])
}

/// `Tile`: broadcast to `[m0, d0, m1, d1, ...]`, then reshape to `[m0*d0, ...]`.
fn tile(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let multiples = n.ints(1, "multiples")?;
    let mut wide = Vec::new();
    let mut dims = Vec::new();
    for (i, &d) in x.ty.shape.iter().enumerate() {
        wide.push(multiples.get(i).copied().unwrap_or(1).max(0) as usize);
        dims.push((2 * i + 1).to_string());
        wide.push(d);
    }
    let b = c.op(
        "stablehlo.broadcast_in_dim",
        &[x],
        &format!("broadcast_dimensions = array<i64{}>", super::text::list(&dims)),
        x.ty.with_shape(wide),
    );
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.reshape(&b, out)])
}

fn fill(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.broadcast_to(n.input(1)?, &out)])
}

fn broadcast_to(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.broadcast_to(n.input(0)?, &out)])
}

fn pack(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let rank = out.rank() as i64;
    let axis = n.attrs.get_int("axis").unwrap_or(0);
    let axis = if axis < 0 { axis + rank } else { axis } as usize;
    let mut one = out.shape.clone();
    one[axis] = 1;
    let parts: Vec<Val> = n.inputs.iter().map(|v| c.reshape(v, one.clone())).collect();
    let refs: Vec<&Val> = parts.iter().collect();
    Ok(vec![c.op("stablehlo.concatenate", &refs, &format!("dimension = {axis} : i64"), out)])
}

/// Softmax over the last axis: `exp(x - max) / sum(exp(x - max))`.
fn softmax(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let last = x.ty.rank().saturating_sub(1);
    let m = c.reduce(x, &[last], Reducer::Max);
    let mb = c.op(
        "stablehlo.broadcast_in_dim",
        &[&m],
        &format!(
            "broadcast_dimensions = array<i64{}>",
            super::text::list(&(0..last).map(|d| d.to_string()).collect::<Vec<_>>())
        ),
        x.ty.clone(),
    );
    let shifted = c.elementwise("subtract", &[x, &mb]);
    let e = c.elementwise("exponential", &[&shifted]);
    let s = c.reduce(&e, &[last], Reducer::Add);
    let sb = c.op(
        "stablehlo.broadcast_in_dim",
        &[&s],
        &format!(
            "broadcast_dimensions = array<i64{}>",
            super::text::list(&(0..last).map(|d| d.to_string()).collect::<Vec<_>>())
        ),
        x.ty.clone(),
    );
    Ok(vec![c.elementwise("divide", &[&e, &sb])])
}

/// The replica groups of a `CrossReplicaSum`'s constant operand, else all replicas.
fn groups(n: &Call, operand: usize) -> Result<Vec<Vec<i64>>, String> {
    match n.consts.get(operand).and_then(Option::as_ref) {
        Some(t) if t.shape().len() == 2 => {
            let flat = t.to_i64_vec(n.op, "group_assignment").map_err(|e| e.to_string())?;
            Ok(flat.chunks(t.shape()[1].max(1)).map(<[i64]>::to_vec).collect())
        }
        Some(_) => Err("group_assignment must be a 2-D constant".into()),
        None if n.inputs.len() > operand => Err("group_assignment must be a compile-time constant".into()),
        None => Ok(vec![(0..n.num_replicas as i64).collect()]),
    }
}

fn cross_replica_sum(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let g = groups(n, 1)?;
    Ok(vec![c.all_reduce_sum(n.input(0)?, &g)])
}

/// `AllReduce(x...)`: each operand summed over all replicas, divided by
/// the replica count for MEAN.
fn all_reduce(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let mean = n.attrs.get_str("reduce_op").is_some_and(|r| r.eq_ignore_ascii_case("MEAN"));
    let all = vec![(0..n.num_replicas as i64).collect::<Vec<_>>()];
    let mut out = Vec::new();
    for x in &n.inputs {
        let mut s = c.all_reduce_sum(x, &all);
        if mean {
            let k = c.splat(&s.ty, n.num_replicas as f64);
            s = c.elementwise("divide", &[&s, &k]);
        }
        out.push(s);
    }
    Ok(out)
}

/// `Broadcast(x)`: replica 0's value on every replica, as a sum in which
/// every other replica contributes zeros (exact: `x + 0 = x`).
fn broadcast(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let all = vec![(0..n.num_replicas as i64).collect::<Vec<_>>()];
    let mut out = Vec::new();
    for x in &n.inputs {
        let id = c.replica_id(DType::I32);
        let zero_id = c.splat(&Ty::scalar(DType::I32), 0.0);
        let first = c.compare(&id, &zero_id, Cmp::Eq);
        let first = c.broadcast_to(&first, &x.ty.shape);
        let zeros = c.splat(&x.ty, 0.0);
        let mine = c.select(&first, x, &zeros);
        out.push(c.all_reduce_sum(&mine, &all));
    }
    Ok(out)
}

fn replica_id(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let dtype = n.out(0)?.dtype;
    Ok(vec![c.replica_id(dtype)])
}

impl Ty {
    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_so_lookups_find_every_entry() {
        for (name, _) in TABLE {
            assert!(builder(name).is_some(), "{name}");
        }
        assert!(builder("NoSuchOp").is_none());
    }
}
