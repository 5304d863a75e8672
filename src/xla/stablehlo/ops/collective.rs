//! Collectives: `CrossReplicaSum`, `AllReduce` and `CollectiveAllReduce`
//! (SUM or MEAN) as `stablehlo.all_reduce`; `AllGather` and
//! `CollectiveAllGather` (the members' operands concatenated along axis 0,
//! in group order) as `stablehlo.all_gather`; `Broadcast` and
//! `CollectiveBroadcast` as a doubling tree of
//! `stablehlo.collective_permute`s; `ReplicaId` as `stablehlo.replica_id`.
//!
//! The broadcast tree: in round k (step = 2^k) every replica whose
//! distance from the source is below `step` sends its value to the
//! replica `step` further on; a replica at distance in `[step, 2·step)`
//! keeps what it received. After ⌈log2 N⌉ rounds every replica holds the
//! source's value, copied bit for bit (no arithmetic), and each replica
//! sent at most once per round. Cost: ⌈log2 N⌉ permutes per broadcast
//! operand; the emitted text grows with the replica count only through
//! the source-target lists.

use std::collections::BTreeSet;

use super::Call;
use crate::ir::{AttrValue, DType};
use crate::lower::spmd::groups_of;
use crate::xla::stablehlo::text::{Cmp, Ctx, Ty, Val};

/// The replica groups of a `CrossReplicaSum`'s constant operand, else all replicas.
pub(in crate::xla::stablehlo) fn groups(n: &Call, operand: usize) -> Result<Vec<Vec<i64>>, String> {
    match n.consts.get(operand).and_then(Option::as_ref) {
        Some(t) if t.shape().len() == 2 => {
            let flat = t.to_i64_vec(n.op, "group_assignment").map_err(|e| e.to_string())?;
            Ok(flat.chunks(t.shape()[1].max(1)).map(<[i64]>::to_vec).collect())
        }
        Some(_) => Err("group_assignment must be a 2-D constant".into()),
        None if n.inputs.len() > operand => Err("group_assignment must be a compile-time constant".into()),
        None => Ok(vec![all(n)]),
    }
}

fn all(n: &Call) -> Vec<i64> {
    (0..n.num_replicas as i64).collect()
}

pub(super) fn cross_replica_sum(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let g = groups(n, 1)?;
    Ok(vec![c.all_reduce_sum(n.input(0)?, &g)])
}

/// Each operand summed over `groups`, divided by the group size for MEAN.
/// The operands of one element type share one `stablehlo.all_reduce`
/// (a fused all-reduce stays one rendezvous on the device).
fn sum_or_mean(c: &mut Ctx, n: &Call, groups: &[Vec<i64>]) -> Vec<Val> {
    let mean = n.attrs.get_str("reduce_op").is_some_and(|r| r.eq_ignore_ascii_case("MEAN"));
    let size = groups.first().map_or(1, Vec::len);
    let mut out: Vec<Option<Val>> = vec![None; n.inputs.len()];
    let dtypes: BTreeSet<DType> = n.inputs.iter().map(|x| x.ty.dtype).collect();
    for dtype in dtypes {
        let at: Vec<usize> = (0..n.inputs.len()).filter(|&i| n.inputs[i].ty.dtype == dtype).collect();
        let operands: Vec<&Val> = at.iter().map(|&i| &n.inputs[i]).collect();
        for (&i, mut s) in at.iter().zip(c.all_reduce_sum_many(&operands, groups)) {
            if mean {
                let k = c.splat(&s.ty, size as f64);
                s = c.elementwise("divide", &[&s, &k]);
            }
            out[i] = Some(s);
        }
    }
    out.into_iter().flatten().collect()
}

/// `AllReduce(x...) {group_assignment}`: each operand summed over its
/// replica group (all replicas without a `group_assignment`: the fused
/// sums of `fuse_all_reduce` carry their operands' grouping as this
/// attribute), divided by the group size for MEAN.
pub(super) fn all_reduce(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let groups = match n.attrs.get("group_assignment").and_then(AttrValue::as_tensor) {
        Some(t) => groups_of(t).ok_or("`group_assignment` must be a [groups, size] integer tensor")?,
        None => vec![all(n)],
    };
    Ok(sum_or_mean(c, n, &groups))
}

/// `CollectiveAllReduce(x) {reduce_op, group_assignment}`.
pub(super) fn collective_all_reduce(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let groups = match n.attrs.get("group_assignment").and_then(|v| v.as_list()) {
        Some(rows) => rows
            .iter()
            .map(|row| row.as_list().unwrap_or_default().iter().filter_map(|v| v.as_int()).collect())
            .collect(),
        None => vec![all(n)],
    };
    Ok(sum_or_mean(c, n, &groups))
}

/// `stablehlo.all_gather` of `x` along dimension 0 over `groups`, whose
/// result type the type rule gave.
fn gather(c: &mut Ctx, n: &Call, groups: &[Vec<i64>]) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let out = n.out(0)?.clone();
    let size = groups.first().map_or(1, Vec::len);
    if x.ty.shape.first().map(|&rows| rows * size) != out.shape.first().copied() {
        return Err(format!("gathering {:?} over groups of {size} cannot give {:?}", x.ty.shape, out.shape));
    }
    let rows: Vec<String> =
        groups.iter().map(|g| format!("[{}]", g.iter().map(i64::to_string).collect::<Vec<_>>().join(", "))).collect();
    let attrs = format!(
        "all_gather_dim = 0 : i64, replica_groups = dense<[{}]> : tensor<{}x{}xi64>",
        rows.join(", "),
        groups.len(),
        size
    );
    Ok(vec![c.op("stablehlo.all_gather", &[x], &attrs, out)])
}

/// `AllGather(x, group_assignment)`: every member's `x` of its group,
/// concatenated along axis 0 in the group's order.
pub(super) fn all_gather(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let g = groups(n, 1)?;
    gather(c, n, &g)
}

/// `CollectiveAllGather(x) {group_assignment}` (a tensor or a list of
/// rows; all replicas when absent).
pub(super) fn collective_all_gather(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let groups = match n.attrs.get("group_assignment") {
        Some(v) => match (v.as_tensor(), v.as_list()) {
            (Some(t), _) => {
                crate::lower::spmd::groups_of(t).ok_or("group_assignment must be a [groups, size] tensor")?
            }
            (None, Some(rows)) => rows
                .iter()
                .map(|row| row.as_list().unwrap_or_default().iter().filter_map(|v| v.as_int()).collect())
                .collect(),
            _ => return Err("group_assignment must be a tensor or a list of rows".into()),
        },
        None => vec![all(n)],
    };
    gather(c, n, &groups)
}

/// `Broadcast(x...)` / `CollectiveBroadcast(x) {source}`: the source
/// replica's value on every replica, by the doubling tree.
pub(super) fn broadcast(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let replicas = n.num_replicas as i64;
    let source = n.int_attr("source", 0);
    if !(0..replicas.max(1)).contains(&source) {
        return Err(format!("source {source} is not a replica of {replicas}"));
    }
    if replicas <= 1 {
        return Ok(n.inputs.clone());
    }
    // The distance of this replica from the source, mod N.
    let id = c.replica_id(DType::I32);
    let scalar = Ty::scalar(DType::I32);
    let shift = c.splat(&scalar, (replicas - source) as f64);
    let total = c.splat(&scalar, replicas as f64);
    let moved = c.elementwise("add", &[&id, &shift]);
    let distance = c.elementwise("remainder", &[&moved, &total]);
    let mut rounds = Vec::new();
    let mut step = 1;
    while step < replicas {
        let pairs: Vec<String> = (0..step)
            .filter(|i| i + step < replicas)
            .map(|i| format!("[{}, {}]", (source + i) % replicas, (source + i + step) % replicas))
            .collect();
        let lo = c.splat(&scalar, step as f64);
        let hi = c.splat(&scalar, (2 * step) as f64);
        let above = c.compare(&distance, &lo, Cmp::Ge);
        let below = c.compare(&distance, &hi, Cmp::Lt);
        let takes = c.elementwise("and", &[&above, &below]);
        rounds.push((pairs, takes));
        step *= 2;
    }
    let mut out = Vec::new();
    for x in &n.inputs {
        let mut v = x.clone();
        for (pairs, takes) in &rounds {
            let attrs = format!("source_target_pairs = dense<[{}]> : tensor<{}x2xi64>", pairs.join(", "), pairs.len());
            let got = c.op("stablehlo.collective_permute", &[&v], &attrs, v.ty.clone());
            let mask = c.broadcast_to(takes, &v.ty.shape);
            v = c.select(&mask, &got, &v);
        }
        out.push(v);
    }
    Ok(out)
}

pub(super) fn replica_id(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let dtype = n.out(0)?.dtype;
    Ok(vec![c.replica_id(dtype)])
}
