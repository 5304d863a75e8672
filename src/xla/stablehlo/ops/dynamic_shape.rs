//! Builders of the ops whose output size depends on their operands' values,
//! as TensorFlow's XLA bridge bounds them: `Unique`, `UniqueV2`,
//! `DynamicPartition`, `NonMaxSuppressionV3` and `NonMaxSuppressionV4`.
//!
//! Meaning: such an output is a buffer of its bound (the type rule's shape,
//! `ir::shapes::rules::dynamic_shape`) whose leading entries along one axis
//! hold the values; its true size is an i32 scalar recorded beside it in
//! [`Ctx::dynamic`]. The program returns that size as one more result and
//! the runtime trims the buffer to it; an op inside the program that reads
//! such a value is refused, naming it (`trace::Emitter::node`). Where the
//! size is known at compile time (`DynamicPartition` with constant
//! partitions, `NonMaxSuppressionV4` padded) the output is exact.
//!
//! - `Unique`/`UniqueV2`: slice `i` equals slice `j` when every element
//!   compares equal (a NaN equals nothing, `-0` equals `0`); a slice is new
//!   when no earlier slice equals it; new slices are numbered in order
//!   (an exclusive running count), scattered to their number, and each
//!   slice's index is the number of the first slice it equals.
//! - `DynamicPartition`: per partition, the rows sent there are scattered
//!   to their running count.
//! - The suppressions follow tf2xla's `NonMaxSuppressionV4`: boxes sorted
//!   by score (ties by lower index), the IoU of every pair, a loop over the
//!   sorted boxes that keeps a box not suppressed by a kept one until
//!   `max_output_size` are kept (the score threshold applies after the
//!   loop), then the kept boxes above the threshold first, by score, and the
//!   others after them in score order: TensorFlow's padded tail. The count
//!   is the number kept, at most `max_output_size`.
//!
//! A reduction (`Sum`, `Max`, `Min`, `Prod`) over a padded axis reads the
//! padded buffer with its padding replaced by the reduction's identity
//! ([`masked`]); its result has a static size.
//!
//! Cost: `Unique` compares every pair of slices (N² × slice length);
//! `DynamicPartition` one running count and one scatter per partition; the
//! suppression N² IoUs and a loop of at most N steps of N each.

use super::gather::{gather, scatter, Combine};
use super::{check, i64s, shape::slice_range, Call};
use crate::exec::Tensor;
use crate::ir::shapes::rules::unique_axis;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Cmp, Ctx, Dynamic, Reducer, Ty, Val};

/// An i32 iota of `shape` along `dim`.
fn iota(c: &mut Ctx, shape: &[usize], dim: usize) -> Val {
    c.op("stablehlo.iota", &[], &format!("iota_dimension = {dim} : i64"), Ty::new(DType::I32, shape.to_vec()))
}

/// `v` broadcast to `shape`, its dimensions becoming `dims`.
fn spread(c: &mut Ctx, v: &Val, shape: &[usize], dims: &[usize]) -> Val {
    c.op(
        "stablehlo.broadcast_in_dim",
        &[v],
        &format!("broadcast_dimensions = {}", i64s(dims)),
        v.ty.with_shape(shape.to_vec()),
    )
}

/// The exclusive running count of an i32 0/1 vector: entry `i` counts the
/// ones before `i`.
fn ones_before(c: &mut Ctx, ones: &Val) -> Val {
    let n = ones.ty.shape[0];
    let init = c.splat(&Ty::scalar(DType::I32), 0.0);
    let region = c.reducer_region(DType::I32, Reducer::Add);
    let attrs = format!(
        "window_dimensions = {}, window_strides = array<i64: 1>, padding = dense<[[{}, 0]]> : tensor<1x2xi64>",
        i64s(&[n]),
        n - 1
    );
    let through = c
        .op_regions("stablehlo.reduce_window", &[ones, &init], &[region], &attrs, std::slice::from_ref(&ones.ty))
        .remove(0);
    c.elementwise("subtract", &[&through, ones])
}

/// The sum of an i32 vector, as an i32 scalar.
fn total(c: &mut Ctx, ones: &Val) -> Val {
    c.reduce(ones, &[0], Reducer::Add)
}

/// Scatters row `i` of `rows` (`[n, ...]`) to row `to[i]` of a zero buffer
/// of `rows`' type; a destination of `n` drops the row.
fn scatter_rows(c: &mut Ctx, rows: &Val, to: &Val) -> Val {
    let n = rows.ty.shape[0];
    let zeros = c.splat(&rows.ty, 0.0);
    let to = c.reshape(to, vec![n, 1]);
    scatter(c, &zeros, &to, rows, Combine::Replace)
}

/// Records that `v`'s entries along `axis` past `size` are padding.
fn mark(c: &mut Ctx, v: &Val, axis: usize, size: &Val) {
    c.dynamic.insert(v.name.clone(), Dynamic { axis, size: size.clone() });
}

/// The distinct rows of `x` (`[n, m]`), in order of first occurrence: the
/// padded rows, each row's index and the count.
fn unique_rows(c: &mut Ctx, x: &Val) -> (Val, Val, Val) {
    let (n, m) = (x.ty.shape[0], x.ty.shape[1]);
    let a = spread(c, x, &[n, n, m], &[0, 2]);
    let b = spread(c, x, &[n, n, m], &[1, 2]);
    let same = c.compare(&a, &b, Cmp::Eq);
    let same = c.reduce(&same, &[2], Reducer::And);
    let (i, j) = (iota(c, &[n, n], 0), iota(c, &[n, n], 1));
    let earlier = c.compare(&j, &i, Cmp::Lt);
    let seen = c.elementwise("and", &[&same, &earlier]);
    let seen = c.reduce(&seen, &[1], Reducer::Or);
    let new = c.elementwise("not", &[&seen]);
    let ones = c.convert(&new, DType::I32);
    let number = ones_before(c, &ones);
    // The first slice each slice equals (itself for a NaN, which equals nothing).
    let diagonal = c.compare(&j, &i, Cmp::Eq);
    let match_ = c.elementwise("or", &[&same, &diagonal]);
    let none = c.splat(&j.ty, n as f64);
    let candidates = c.select(&match_, &j, &none);
    let first = c.reduce(&candidates, &[1], Reducer::Min);
    let idx = gather(c, &number, &first, 0, number.ty.clone());
    let drop = c.splat(&number.ty, n as f64);
    let to = c.select(&new, &number, &drop);
    let rows = scatter_rows(c, x, &to);
    let count = total(c, &ones);
    (rows, idx, count)
}

/// `Unique(x)` and `UniqueV2(x, axis)`.
pub(super) fn unique(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let along = if n.op == "UniqueV2" { unique_axis(&x.ty.shape, &n.ints(1, "axis")?)? } else { 0 };
    if n.op == "Unique" && x.ty.rank() != 1 {
        return Err(format!("x must be a vector, got {}", x.ty.mlir()));
    }
    let (y_ty, idx_ty) = (n.out(0)?.clone(), n.out(1)?.clone());
    if y_ty != x.ty {
        return Err(bound_error(n.op, &y_ty, &x.ty));
    }
    let len = x.ty.shape[along];
    if x.ty.count() == 0 {
        let size = c.splat(&Ty::scalar(DType::I32), 0.0);
        let idx = c.splat(&idx_ty, 0.0);
        mark(c, x, along, &size);
        return Ok(vec![x.clone(), idx]);
    }
    // The slices along the axis as the rows of a matrix.
    let rank = x.ty.rank();
    let perm: Vec<usize> = std::iter::once(along).chain((0..rank).filter(|&d| d != along)).collect();
    let moved_shape: Vec<usize> = perm.iter().map(|&d| x.ty.shape[d]).collect();
    let moved = c.op(
        "stablehlo.transpose",
        &[x],
        &format!("permutation = {}", i64s(&perm)),
        x.ty.with_shape(moved_shape.clone()),
    );
    let rows = c.reshape(&moved, vec![len, x.ty.count() / len]);
    let (distinct, idx, count) = unique_rows(c, &rows);
    let distinct = c.reshape(&distinct, moved_shape);
    let mut back = vec![0; rank];
    for (k, &d) in perm.iter().enumerate() {
        back[d] = k;
    }
    let y = c.op("stablehlo.transpose", &[&distinct], &format!("permutation = {}", i64s(&back)), x.ty.clone());
    mark(c, &y, along, &count);
    Ok(vec![y, c.convert(&idx, idx_ty.dtype)])
}

/// The message for a type that is not the bound the lowering fills: the
/// program was typed by running it (a call op or a list in the program).
fn bound_error(op: &str, got: &Ty, bound: &Ty) -> String {
    format!(
        "{op}'s output was typed {} where its bound is {}: a program typed by running it (call ops, lists) \
         cannot carry an output whose size depends on values",
        got.mlir(),
        bound.mlir()
    )
}

/// `DynamicPartition(data, partitions) {num_partitions}`.
pub(super) fn dynamic_partition(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (data, parts) = (n.input(0)?, n.input(1)?);
    let count = usize::try_from(n.int_attr("num_partitions", 0)).ok().filter(|&k| k > 0);
    let count = count.ok_or("num_partitions must be at least 1")?;
    let rows = parts.ty.count();
    let row_shape = data.ty.shape.get(parts.ty.rank()..).ok_or("the data has fewer dims than the partitions")?.to_vec();
    let flat_shape: Vec<usize> = std::iter::once(rows).chain(row_shape.iter().copied()).collect();
    let constant = n.consts.get(1).is_some_and(Option::is_some);
    check::in_range(c, parts, count, || format!("{}: a partition", n.op));
    let flat = c.reshape(data, flat_shape.clone());
    let ids = c.reshape(parts, vec![rows]);
    let mut outs = Vec::with_capacity(count);
    for p in 0..count {
        let want = n.out(p)?.clone();
        if rows == 0 {
            outs.push(c.splat(&want, 0.0));
            continue;
        }
        let k = c.splat(&ids.ty, p as f64);
        let here = c.compare(&ids, &k, Cmp::Eq);
        let ones = c.convert(&here, DType::I32);
        let slot = ones_before(c, &ones);
        let drop = c.splat(&slot.ty, rows as f64);
        let to = c.select(&here, &slot, &drop);
        let out = scatter_rows(c, &flat, &to);
        if constant {
            // The rule gave each partition its exact size.
            outs.push(slice_range(c, &out, &vec![0; want.rank()], &want.shape));
        } else {
            if want.shape != flat_shape {
                return Err(bound_error(n.op, &want, &flat.ty));
            }
            let size = total(c, &ones);
            mark(c, &out, 0, &size);
            outs.push(out);
        }
    }
    Ok(outs)
}

/// The reduction of an op that may read a padded operand 0 when it reduces
/// over the padded axis (`Sum`, `Max`, `Min`, `Prod`): the padding becomes
/// the reduction's identity first.
pub(crate) fn masked_reduction(op: &str) -> Option<Reducer> {
    match op {
        "Sum" => Some(Reducer::Add),
        "Max" => Some(Reducer::Max),
        "Min" => Some(Reducer::Min),
        "Prod" => Some(Reducer::Mul),
        _ => None,
    }
}

/// True when reduction axes `axes` (a constant, negative from the end)
/// of a rank-`rank` operand include `axis`.
pub(crate) fn reduces_axis(axes: &Tensor, rank: usize, axis: usize) -> bool {
    let axes = axes.to_i64_vec("", "axes").unwrap_or_default();
    axes.iter().any(|&a| (if a < 0 { a + rank as i64 } else { a }) == axis as i64)
}

/// `x` with its entries past `dynamic`'s size along its axis replaced by
/// `reducer`'s identity.
pub(crate) fn masked(c: &mut Ctx, x: &Val, dynamic: &Dynamic, reducer: Reducer) -> Val {
    let position = iota(c, &x.ty.shape, dynamic.axis);
    let size = spread(c, &dynamic.size, &x.ty.shape, &[]);
    let inside = c.compare(&position, &size, Cmp::Lt);
    let identity = c.splat(&x.ty, reducer.identity(x.ty.dtype));
    c.select(&inside, x, &identity)
}

/// The lowest finite value of a float dtype.
fn lowest(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => f64::from(half::f16::MIN),
        DType::BF16 => f64::from(half::bf16::MIN),
        DType::F64 => f64::MIN,
        _ => f64::from(f32::MIN),
    }
}

/// A region over `(a, b, ia, ib)` scalars ordering greater `a` first
/// (`stablehlo.sort`'s comparator for a value and an i32 index).
fn greater_first(c: &mut Ctx, dtype: DType) -> String {
    let (t, i) = (Ty::scalar(dtype).mlir(), Ty::scalar(DType::I32).mlir());
    let (a, b, ia, ib, p) = (c.fresh(), c.fresh(), c.fresh(), c.fresh(), c.fresh());
    let kind = if super::is_float(dtype) { "FLOAT" } else { "SIGNED" };
    format!(
        "({{\n^bb0({a}: {t}, {b}: {t}, {ia}: {i}, {ib}: {i}):\n  {p} = \"stablehlo.compare\"({a}, {b}) \
         {{comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type {kind}>}} \
         : ({t}, {t}) -> tensor<i1>\n  \"stablehlo.return\"({p}) : (tensor<i1>) -> ()\n}})"
    )
}

/// Sorts `keys` (a vector) greatest first, ties by position: the sorted
/// keys and the positions they came from.
fn sort_desc(c: &mut Ctx, keys: &Val) -> (Val, Val) {
    let iota = iota(c, &keys.ty.shape, 0);
    let region = greater_first(c, keys.ty.dtype);
    let types = [keys.ty.clone(), iota.ty.clone()];
    let mut sorted =
        c.op_regions("stablehlo.sort", &[keys, &iota], &[region], "dimension = 0 : i64, is_stable = true", &types);
    let order = sorted.remove(1);
    (sorted.remove(0), order)
}

/// Column `k` of a `[b, 4]` matrix, as a vector.
fn column(c: &mut Ctx, m: &Val, k: usize) -> Val {
    let b = m.ty.shape[0];
    let col = slice_range(c, m, &[0, k], &[b, k + 1]);
    c.reshape(&col, vec![b])
}

/// The `[b, b]` matrix whose entry `(i, j)` is true where the IoU of boxes
/// `i` and `j` (rows of `boxes`, corners in either order) exceeds `threshold`.
fn overlaps(c: &mut Ctx, boxes: &Val, threshold: &Val) -> Val {
    let b = boxes.ty.shape[0];
    let square = [b, b];
    let mut low = Vec::with_capacity(2);
    let mut high = Vec::with_capacity(2);
    for k in 0..2 {
        let (p, q) = (column(c, boxes, k), column(c, boxes, k + 2));
        let ordered = c.compare(&p, &q, Cmp::Le);
        low.push(c.select(&ordered, &p, &q));
        high.push(c.select(&ordered, &q, &p));
    }
    let dy = c.elementwise("subtract", &[&high[0], &low[0]]);
    let dx = c.elementwise("subtract", &[&high[1], &low[1]]);
    let area = c.elementwise("multiply", &[&dy, &dx]);
    let zero = c.splat(&boxes.ty.with_shape(square.to_vec()), 0.0);
    let mut sides = Vec::with_capacity(2);
    for k in 0..2 {
        let (l_row, l_col) = (spread(c, &low[k], &square, &[1]), spread(c, &low[k], &square, &[0]));
        let (h_row, h_col) = (spread(c, &high[k], &square, &[1]), spread(c, &high[k], &square, &[0]));
        let lo = c.elementwise("maximum", &[&l_row, &l_col]);
        let hi = c.elementwise("minimum", &[&h_row, &h_col]);
        let side = c.elementwise("subtract", &[&hi, &lo]);
        sides.push(c.elementwise("maximum", &[&side, &zero]));
    }
    let inter = c.elementwise("multiply", &[&sides[0], &sides[1]]);
    let (a_row, a_col) = (spread(c, &area, &square, &[1]), spread(c, &area, &square, &[0]));
    let both = c.elementwise("add", &[&a_row, &a_col]);
    let union = c.elementwise("subtract", &[&both, &inter]);
    let iou = c.elementwise("divide", &[&inter, &union]);
    let limit = spread(c, threshold, &square, &[]);
    c.compare(&iou, &limit, Cmp::Gt)
}

/// The greedy loop over the sorted boxes: starting with every box kept,
/// each kept box (while fewer than `max` are kept) drops the later ones it
/// overlaps. Returns the kept mask and the first box not visited.
fn suppress(c: &mut Ctx, over: &Val, max: usize) -> (Val, Val) {
    let b = over.ty.shape[0];
    let scalar = Ty::scalar(DType::I32);
    let mask_ty = Ty::new(DType::Bool, vec![b]);
    let zero = c.splat(&scalar, 0.0);
    let all = c.splat(&mask_ty, 1.0);
    let types = [scalar.clone(), scalar.clone(), over.ty.clone(), mask_ty.clone()];
    let mlir: Vec<String> = types.iter().map(Ty::mlir).collect();
    let block =
        |names: &[String]| names.iter().zip(&mlir).map(|(n, t)| format!("{n}: {t}")).collect::<Vec<_>>().join(", ");
    let param = |names: &[String], k: usize| Val { name: names[k].clone(), ty: types[k].clone() };
    // Condition: rows left and fewer than `max` kept.
    let cond_args: Vec<String> = (0..4).map(|_| c.fresh()).collect();
    let mut inner = c.scratch();
    let boxes = inner.splat(&scalar, b as f64);
    let limit = inner.splat(&scalar, max as f64);
    let more = inner.compare(&param(&cond_args, 0), &boxes, Cmp::Lt);
    let room = inner.compare(&param(&cond_args, 1), &limit, Cmp::Lt);
    let go = inner.elementwise("and", &[&more, &room]);
    c.resume(&inner);
    let cond = format!(
        "({{\n^bb0({}):\n{}  \"stablehlo.return\"({}) : (tensor<i1>) -> ()\n}})",
        block(&cond_args),
        inner.text,
        go.name
    );
    // Body: a kept row counts and drops the other boxes it overlaps.
    let body_args: Vec<String> = (0..4).map(|_| c.fresh()).collect();
    let mut inner = c.scratch();
    let (row, kept, over_in, mask) =
        (param(&body_args, 0), param(&body_args, 1), param(&body_args, 2), param(&body_args, 3));
    let this = inner.op(
        "stablehlo.dynamic_slice",
        &[&mask, &row],
        "slice_sizes = array<i64: 1>",
        Ty::new(DType::Bool, vec![1]),
    );
    let active = inner.reshape(&this, Vec::new());
    let one = inner.splat(&scalar, 1.0);
    let counted = inner.elementwise("add", &[&kept, &one]);
    let kept_next = inner.select(&active, &counted, &kept);
    let zero_in = inner.splat(&scalar, 0.0);
    let line = inner.op(
        "stablehlo.dynamic_slice",
        &[&over_in, &row, &zero_in],
        &format!("slice_sizes = array<i64: 1, {b}>"),
        Ty::new(DType::Bool, vec![1, b]),
    );
    let line = inner.reshape(&line, vec![b]);
    let cols = iota(&mut inner, &[b], 0);
    let rows = spread(&mut inner, &row, &[b], &[]);
    let other = inner.compare(&cols, &rows, Cmp::Ne);
    let hits = inner.elementwise("and", &[&line, &other]);
    let spared = inner.elementwise("not", &[&hits]);
    let pruned = inner.elementwise("and", &[&mask, &spared]);
    let actives = spread(&mut inner, &active, &[b], &[]);
    let mask_next = inner.select(&actives, &pruned, &mask);
    let row_next = inner.elementwise("add", &[&row, &one]);
    c.resume(&inner);
    let body = format!(
        "({{\n^bb0({}):\n{}  \"stablehlo.return\"({}, {}, {}, {}) : ({}) -> ()\n}})",
        block(&body_args),
        inner.text,
        row_next.name,
        kept_next.name,
        over_in.name,
        mask_next.name,
        mlir.join(", ")
    );
    let zero2 = c.splat(&scalar, 0.0);
    let mut out = c.op_regions("stablehlo.while", &[&zero, &zero2, over, &all], &[cond, body], "", &types);
    let mask = out.pop().unwrap_or_else(|| all.clone());
    (mask, out.remove(0))
}

/// `NonMaxSuppressionV3/V4(boxes, scores, max_output_size, iou_threshold,
/// score_threshold) {pad_to_max_output_size}`.
pub(super) fn non_max_suppression(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (boxes, scores) = (n.input(0)?, n.input(1)?);
    let max = match n.ints(2, "max_output_size")?.as_slice() {
        [m] => usize::try_from(*m).map_err(|_| format!("max_output_size must be >= 0, got {m}"))?,
        other => return Err(format!("max_output_size must be a scalar, got {} values", other.len())),
    };
    let b = scores.ty.shape.first().copied().ok_or("scores must be a vector")?;
    if boxes.ty.shape != [b, 4] {
        return Err(format!("boxes must be [{b}, 4], got {}", boxes.ty.mlir()));
    }
    let padded = n.op == "NonMaxSuppressionV4" && n.attrs.get_bool("pad_to_max_output_size").unwrap_or(false);
    let bound = if padded { max } else { max.min(b) };
    let want = n.out(0)?.clone();
    if want.shape != [bound] {
        return Err(bound_error(n.op, &want, &Ty::new(DType::I32, vec![bound])));
    }
    let dtype = scores.ty.dtype;
    let iou = c.convert(n.input(3)?, dtype);
    let score_min = c.convert(n.input(4)?, dtype);
    let count_ty = Ty::scalar(DType::I32);
    let (indices, valid) = if b == 0 {
        (c.splat(&want, 0.0), c.splat(&count_ty, 0.0))
    } else {
        let (sorted, order) = sort_desc(c, scores);
        let sorted_boxes = gather(c, boxes, &order, 0, boxes.ty.clone());
        let over = overlaps(c, &sorted_boxes, &iou);
        let (kept, visited) = suppress(c, &over, max);
        let floor = spread(c, &score_min, &[b], &[]);
        let scoring = c.compare(&sorted, &floor, Cmp::Gt);
        let position = iota(c, &[b], 0);
        let reached = spread(c, &visited, &[b], &[]);
        let seen = c.compare(&position, &reached, Cmp::Lt);
        let chosen = c.elementwise("and", &[&kept, &scoring]);
        let chosen = c.elementwise("and", &[&chosen, &seen]);
        // The chosen boxes first, by score; then the others in score order.
        let low = c.splat(&sorted.ty, lowest(dtype));
        let keys = c.select(&chosen, &sorted, &low);
        let (_, ranked) = sort_desc(c, &keys);
        let taken = slice_range(c, &ranked, &[0], &[bound.min(b)]);
        let mut picked = gather(c, &order, &taken, 0, taken.ty.clone());
        if bound > b {
            let zero = c.splat(&count_ty, 0.0);
            let attrs =
                format!("edge_padding_low = array<i64: 0>, edge_padding_high = array<i64: {}>, interior_padding = array<i64: 0>", bound - b);
            picked = c.op("stablehlo.pad", &[&picked, &zero], &attrs, want.clone());
        }
        let ones = c.convert(&chosen, DType::I32);
        let all = total(c, &ones);
        let cap = c.constant(&Tensor::scalar(i32::try_from(max).map_err(|_| "max_output_size exceeds i32")?));
        (picked, c.elementwise("minimum", &[&all, &cap]))
    };
    if !padded {
        mark(c, &indices, 0, &valid);
    }
    Ok(if n.op == "NonMaxSuppressionV4" { vec![indices, valid] } else { vec![indices] })
}
