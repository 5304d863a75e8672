//! Builders of the sharding, SPMD, dynamic-size and runtime ops, as
//! TensorFlow's XLA bridge emits them for one device.
//!
//! `XlaSharding` is `stablehlo.custom_call @Sharding` carrying the
//! decoded annotation as `mhlo.sharding`; `XlaSpmdFullToShardShape` is a
//! `@Sharding` of the full value then `@SPMDFullToShardShape` with
//! `{manual}`, and `XlaSpmdShardToFullShape` the reverse pair, as
//! tf2xla's kernels write them. XLA's partitioner consumes these calls;
//! a one-device compilation removes them, so they carry the annotation
//! without changing a value. Inside a model-parallel program (every op
//! already placed on one core by a maximal sharding) the annotation is
//! dropped: an op cannot carry two shardings. `XlaSetDynamicDimensionSize`
//! is a slice to the static size (programs here have static shapes);
//! `XlaSetBound` and `XlaRemoveDynamicDimensionSize` pass their operand
//! through, since a static shape needs no bound. `XlaOptimizationBarrier`
//! is `stablehlo.optimization_barrier`. `XlaSplitND` is a `stablehlo.pad`
//! and one `stablehlo.slice` per tile; `XlaConcatND` a tree of
//! `stablehlo.concatenate`s and a slice dropping the padding.
//! `ControlTrigger` emits nothing; `DeviceIndex` folds to its constant.
//! `XlaAllReduce` is a `stablehlo.all_reduce` over its constant
//! `group_assignment` with the reducer of `reduce_op` (`Mean` sums and
//! divides by the group size); `CollectiveReduceV2` one over all replicas,
//! whose count its constant `group_size` must be (`final_op` `Div` divides
//! by it).

use super::shape::slice_range;
use super::Call;
use crate::ir::sharding::Sharding;
use crate::xla::stablehlo::text::{Ctx, Reducer, Ty, Val};

/// `stablehlo.custom_call @target(x)` with `sharding`, of result type `ty`
/// (or `x` itself inside a program whose ops are already placed).
fn annotated(c: &mut Ctx, target: &str, x: &Val, sharding: &str, ty: Ty) -> Val {
    if c.sharding.is_some() {
        return x.clone();
    }
    let attrs = format!("call_target_name = \"{target}\", mhlo.sharding = \"{sharding}\"");
    c.op("stablehlo.custom_call", &[x], &attrs, ty)
}

/// `XlaSharding(x) {sharding}`.
pub(super) fn sharding(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let s = Sharding::of_attr(n.attrs, "sharding")?;
    Ok(vec![annotated(c, "Sharding", x, &s.hlo_text(), x.ty.clone())])
}

/// `XlaSpmdFullToShardShape(x) {manual_sharding}` / `XlaSpmdShardToFullShape`.
pub(super) fn spmd_shape(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let s = Sharding::of_attr(n.attrs, "manual_sharding")?.hlo_text();
    let out = n.out(0)?.clone();
    if out.shape != x.ty.shape {
        return Err(format!(
            "the sharding {s} makes shards of {:?} from {:?}: that needs a partitioned program over its devices",
            out.shape, x.ty.shape
        ));
    }
    Ok(vec![if n.op == "XlaSpmdFullToShardShape" {
        let full = annotated(c, "Sharding", x, &s, x.ty.clone());
        annotated(c, "SPMDFullToShardShape", &full, "{manual}", out)
    } else {
        let shard = annotated(c, "Sharding", x, "{manual}", x.ty.clone());
        annotated(c, "SPMDShardToFullShape", &shard, &s, out)
    }])
}

/// `XlaSetDynamicDimensionSize(x, dim_index, size)`: the slice the type rule gave.
pub(super) fn set_dynamic_size(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let out = n.out(0)?;
    Ok(vec![slice_range(c, x, &vec![0; x.ty.rank()], &out.shape)])
}

/// `XlaOptimizationBarrier(x...)`.
pub(super) fn optimization_barrier(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    if n.inputs.is_empty() {
        return Ok(Vec::new());
    }
    let operands: Vec<&Val> = n.inputs.iter().collect();
    let types: Vec<Ty> = n.inputs.iter().map(|v| v.ty.clone()).collect();
    Ok(c.op_regions("stablehlo.optimization_barrier", &operands, &[], "", &types))
}

/// Tile counts and paddings of a split or concatenation (validated by the type rule).
fn grid(n: &Call, key: &str, rank: usize) -> (Vec<usize>, Vec<usize>) {
    let counts: Vec<usize> = n.int_list(key).iter().map(|&c| c.max(1) as usize).collect();
    let mut pads: Vec<usize> = n.int_list("paddings").iter().map(|&p| p.max(0) as usize).collect();
    if pads.is_empty() {
        pads = vec![0; rank];
    }
    (counts, pads)
}

/// `XlaSplitND(x) {num_splits, paddings}`: pad, then one slice per tile in row-major order.
pub(super) fn split_nd(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let rank = x.ty.rank();
    let (counts, pads) = grid(n, "num_splits", rank);
    let tile = n.out(0)?.shape.clone();
    if counts.len() != rank || tile.len() != rank {
        return Err(format!("`num_splits` needs one count per dimension ({rank})"));
    }
    let padded = if pads.iter().all(|&p| p == 0) {
        x.clone()
    } else {
        let zero = c.splat(&Ty::scalar(x.ty.dtype), 0.0);
        let shape: Vec<usize> = x.ty.shape.iter().zip(&pads).map(|(d, p)| d + p).collect();
        let attrs = format!(
            "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
            super::i64s(&vec![0; rank]),
            super::i64s(&pads),
            super::i64s(&vec![0; rank])
        );
        c.op("stablehlo.pad", &[x, &zero], &attrs, x.ty.with_shape(shape))
    };
    let total: usize = counts.iter().product();
    let mut out = Vec::with_capacity(total);
    for mut k in 0..total {
        let mut start = vec![0; rank];
        for d in (0..rank).rev() {
            start[d] = (k % counts[d]) * tile[d];
            k /= counts[d];
        }
        let limit: Vec<usize> = start.iter().zip(&tile).map(|(s, t)| s + t).collect();
        out.push(slice_range(c, &padded, &start, &limit));
    }
    Ok(out)
}

/// `XlaConcatND(x...) {num_concats, paddings}`: join the innermost dimension first, then drop the padding.
pub(super) fn concat_nd(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let first = n.input(0)?;
    let rank = first.ty.rank();
    let (counts, _) = grid(n, "num_concats", rank);
    if counts.len() != rank || counts.iter().product::<usize>() != n.inputs.len() {
        return Err(format!("{} operands for a grid of {counts:?} tiles", n.inputs.len()));
    }
    let mut tiles: Vec<Val> = n.inputs.clone();
    for d in (0..rank).rev() {
        let mut joined = Vec::with_capacity(tiles.len() / counts[d]);
        for run in tiles.chunks(counts[d]) {
            let mut shape = run[0].ty.shape.clone();
            shape[d] *= run.len();
            let refs: Vec<&Val> = run.iter().collect();
            joined.push(if run.len() == 1 {
                run[0].clone()
            } else {
                c.op("stablehlo.concatenate", &refs, &format!("dimension = {d} : i64"), run[0].ty.with_shape(shape))
            });
        }
        tiles = joined;
    }
    let whole = tiles.pop().ok_or("no tiles")?;
    let out = n.out(0)?;
    if out.shape == whole.ty.shape {
        return Ok(vec![whole]);
    }
    Ok(vec![slice_range(c, &whole, &vec![0; rank], &out.shape)])
}

/// `stablehlo.all_reduce` of `x` over `groups` with `reducer`.
fn all_reduce(c: &mut Ctx, x: &Val, groups: &[Vec<i64>], reducer: Reducer) -> Val {
    let region = c.reducer_region(x.ty.dtype, reducer);
    let region = c.indent_block(&region);
    let width = groups.first().map_or(0, Vec::len);
    let rows: Vec<String> =
        groups.iter().map(|g| format!("[{}]", g.iter().map(i64::to_string).collect::<Vec<_>>().join(", "))).collect();
    let r = c.fresh();
    c.line(&format!(
        "{r} = \"stablehlo.all_reduce\"({}) {region} {{replica_groups = dense<[{}]> : tensor<{}x{}xi64>}} : ({}) -> {}",
        x.name,
        rows.join(", "),
        groups.len(),
        width,
        x.ty.mlir(),
        x.ty.mlir()
    ));
    Val { name: r, ty: x.ty.clone() }
}

/// The reducer of a reduction's name; `Mean` (and `Div`) sum, then divide.
fn reducer(name: &str) -> Result<Reducer, String> {
    match name {
        "Add" | "Mean" => Ok(Reducer::Add),
        "Max" => Ok(Reducer::Max),
        "Min" => Ok(Reducer::Min),
        "Mul" => Ok(Reducer::Mul),
        other => Err(format!("unknown reduction `{other}`")),
    }
}

/// `x / size` in `x`'s type.
fn divided(c: &mut Ctx, x: Val, size: usize) -> Val {
    let k = c.splat(&x.ty, size as f64);
    c.elementwise("divide", &[&x, &k])
}

/// `XlaAllReduce(input, group_assignment) {reduce_op, mode}`.
pub(super) fn xla_all_reduce(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let groups = super::collective::groups(n, 1)?;
    let reduce = n.attrs.get_str("reduce_op").unwrap_or("Add");
    let summed = all_reduce(c, x, &groups, reducer(reduce)?);
    let size = groups.first().map_or(1, Vec::len);
    Ok(vec![if reduce == "Mean" { divided(c, summed, size) } else { summed }])
}

/// `CollectiveReduceV2(input, group_size, group_key, instance_key, tokens...) {merge_op, final_op}`.
pub(super) fn collective_reduce_v2(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let size = *n.ints(1, "group_size")?.first().ok_or("group_size is empty")?;
    if size != n.num_replicas as i64 {
        return Err(format!(
            "a group of {size} members in a program of {} replicas: the group must be every replica",
            n.num_replicas
        ));
    }
    let merge = n.attrs.get_str("merge_op").unwrap_or("Add");
    if merge == "Mean" {
        return Err("unknown merge_op `Mean`".into());
    }
    let groups = vec![(0..size).collect::<Vec<i64>>()];
    let merged = all_reduce(c, x, &groups, reducer(merge)?);
    match n.attrs.get_str("final_op").unwrap_or("Id") {
        "Id" => Ok(vec![merged]),
        "Div" => Ok(vec![divided(c, merged, size as usize)]),
        other => Err(format!("unknown final_op `{other}`")),
    }
}
