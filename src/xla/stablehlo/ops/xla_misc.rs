//! `CollectiveAssignGroupV2` as the constants TensorFlow's XLA bridge
//! gives, `XlaReduceScatter` as `stablehlo.reduce_scatter`, `XlaScatter` as
//! `stablehlo.scatter` with its `update_computation` as
//! the scatter's region (the function called on the operand's and the
//! update's scalar, as `xla_fn` builds regions), and the variable forms of
//! the SPMD tilers, `ReadVariableXlaSplitND` and `AssignVariableXlaConcatND`,
//! as `XlaSplitND` of the variable's value and `XlaConcatND` into its new
//! value (called by `state`, which threads the variable).
//!
//! The dimension numbers are decoded and checked by the geometry of the
//! type rule (`ir::shapes::rules::xla_misc`), which the simulator's kernel
//! uses as well. XLA skips an update window that does not fit the operand
//! whole, as the simulator does. Cost: one scatter (or the tilers' slices
//! and concatenations) per op.

use super::xla_fn::Apply;
use super::{Call, Ctx, Val};
use crate::exec::Tensor;
use crate::ir::shapes::rules::xla_misc::scatter_geometry;
use crate::xla::error::XlaError;
use crate::xla::stablehlo::text::Reducer;

fn ints(items: &[usize]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// `XlaScatter(operand, scatter_indices, updates)` with `update_computation`.
pub(super) fn scatter(ctx: &mut Ctx, a: &Apply) -> Result<Vec<Val>, XlaError> {
    let [x, indices, updates] = a.vals else {
        return Err(a.err(format!("takes three operands, got {}", a.vals.len())));
    };
    if updates.ty.dtype != x.ty.dtype {
        return Err(a.err(format!("the updates are {} but the operand is {}", updates.ty.dtype, x.ty.dtype)));
    }
    let g = scatter_geometry(a.attrs(), &x.ty.shape, &indices.ty.shape, &updates.ty.shape).map_err(|m| a.err(m))?;
    let dtype = x.ty.dtype;
    let region = a.region(ctx, &a.func("update_computation")?, &[dtype; 2], &[dtype])?;
    let sorted = a.attrs().get_bool("indices_are_sorted").unwrap_or(false);
    let attrs = format!(
        "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [{}], inserted_window_dims = [{}], scatter_dims_to_operand_dims = [{}], index_vector_dim = {}>, indices_are_sorted = {sorted}, unique_indices = false",
        ints(&g.update_window_dims),
        ints(&g.inserted),
        ints(&g.to_operand),
        g.index_vector_dim
    );
    Ok(ctx.op_regions("stablehlo.scatter", &[x, indices, updates], &[region], &attrs, a.out))
}

/// `CollectiveAssignGroupV2(group_assignment, device_index, base_key)` as
/// TensorFlow's XLA bridge compiles it: the number of devices in the whole
/// assignment as the group size and 0 as the key, whatever the device (the
/// bridge pairs the assignment with the collective that uses it instead).
pub(super) fn assign_group(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let values = assign_group_values(&n.input(0)?.ty.shape)?;
    Ok(values.iter().map(|v| c.constant(v)).collect())
}

/// `CollectiveAssignGroupV2`'s results as the bridge compiles them, from
/// the shape of its group assignment alone: compile-time constants, which
/// the traces take instead of folding the simulator's kernel (whose values
/// are TensorFlow's CPU ones).
pub fn assign_group_values(groups: &[usize]) -> Result<Vec<Tensor>, String> {
    if groups.len() != 2 {
        return Err(format!("group_assignment must be 2-D, got shape {groups:?}"));
    }
    let size = i32::try_from(groups.iter().product::<usize>()).map_err(|_| "the group assignment is too large")?;
    Ok(vec![Tensor::scalar(size), Tensor::scalar(0i32)])
}

/// `XlaReduceScatter(input, group_assignment, scatter_dimension) {reduce_op}`:
/// `stablehlo.reduce_scatter` over the constant groups (`Mean` sums, then
/// divides by the group size), as TensorFlow's bridge emits it.
pub(super) fn reduce_scatter(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let groups = super::collective::groups(n, 1)?;
    let d = match n.ints(2, "scatter_dimension")?[..] {
        [d] => d,
        _ => return Err("scatter_dimension must be one integer".into()),
    };
    let out = n.out(0)?.clone();
    let op = n.attrs.get_str("reduce_op").unwrap_or("Add");
    let reducer = match op {
        "Add" | "Mean" => Reducer::Add,
        "Max" => Reducer::Max,
        "Min" => Reducer::Min,
        "Mul" => Reducer::Mul,
        other => return Err(format!("unknown reduce_op `{other}` (Add, Mean, Max, Min or Mul)")),
    };
    let region = c.reducer_region(x.ty.dtype, reducer);
    let region = c.indent_block(&region);
    let width = groups.first().map_or(0, Vec::len);
    let rows: Vec<String> = groups.iter().map(|g| format!("[{}]", ints_of(g))).collect();
    let r = c.fresh();
    c.line(&format!(
        "{r} = \"stablehlo.reduce_scatter\"({}) {region} {{replica_groups = dense<[{}]> : tensor<{}x{width}xi64>, scatter_dimension = {d} : i64}} : ({}) -> {}",
        x.name,
        rows.join(", "),
        groups.len(),
        x.ty.mlir(),
        out.mlir()
    ));
    let reduced = Val { name: r, ty: out };
    if op != "Mean" {
        return Ok(vec![reduced]);
    }
    let k = c.splat(&reduced.ty, width as f64);
    Ok(vec![c.elementwise("divide", &[&reduced, &k])])
}

fn ints_of(items: &[i64]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// A stand-in value of `XlaReduceScatter` for a trace, which runs one
/// member alone: the first block of the member's own input, of the type
/// the op's rule gives.
pub fn reduce_scatter_stand_in(attrs: &crate::ir::AttrMap, args: &[Tensor]) -> Result<Tensor, String> {
    use crate::ir::shapes::rules::{infer, Operand};
    let (x, groups, dim) = match args {
        [x, groups, dim] => (x, groups, dim),
        _ => return Err(format!("takes three operands, got {}", args.len())),
    };
    let d = dim.to_i64_vec("XlaReduceScatter", "scatter_dimension").map_err(|e| e.to_string())?;
    let operands = [
        Operand { dtype: x.dtype(), shape: x.shape(), value: None },
        Operand { dtype: groups.dtype(), shape: groups.shape(), value: None },
        Operand { dtype: dim.dtype(), shape: dim.shape(), value: Some(&d) },
    ];
    let out = infer("XlaReduceScatter", attrs, &operands).ok_or("XlaReduceScatter has no type rule")??;
    let size: Vec<i64> = out[0].shape.iter().map(|&n| n as i64).collect();
    let begin = vec![0i64; size.len()];
    let mut sliced = crate::exec::run_kernel(
        "Slice",
        &crate::ir::AttrMap::new(),
        &[x.clone(), Tensor::vector(begin), Tensor::vector(size)],
    )
    .map_err(|e| e.to_string())?;
    Ok(sliced.remove(0))
}

/// `ReadVariableXlaSplitND(resource)`: the tiles of the variable's value `var`.
pub fn read_split(c: &mut Ctx, n: &Call, var: &Val) -> Result<Vec<Val>, String> {
    let split = Call { op: "XlaSplitND", inputs: vec![var.clone()], consts: vec![None], ..*n };
    super::spmd::split_nd(c, &split)
}

/// `AssignVariableXlaConcatND(resource, inputs...)`: the joined tiles less
/// the padding, which must have the type of the variable's value `var`.
pub fn assign_concat(c: &mut Ctx, n: &Call, var: &Val) -> Result<Val, String> {
    let tile = n.input(0)?;
    let counts = n.int_list("num_concats");
    let mut pads = n.int_list("paddings");
    if pads.is_empty() {
        pads = vec![0; counts.len()];
    }
    let shape: Option<Vec<usize>> = (counts.len() == tile.ty.rank() && pads.len() == counts.len())
        .then(|| {
            let dims = tile.ty.shape.iter().zip(&counts).zip(&pads);
            dims.map(|((&t, &k), &p)| (t as i64).checked_mul(k)?.checked_sub(p).and_then(|s| usize::try_from(s).ok()))
                .collect()
        })
        .flatten();
    if shape.as_deref() != Some(&var.ty.shape[..]) || tile.ty.dtype != var.ty.dtype {
        return Err(format!(
            "{} tiles of {} joined by {counts:?} less paddings {pads:?} do not make the variable's {}",
            n.inputs.len(),
            tile.ty.mlir(),
            var.ty.mlir()
        ));
    }
    let out = [var.ty.clone()];
    let concat = Call { op: "XlaConcatND", inputs: n.inputs.clone(), consts: n.consts.clone(), outputs: &out, ..*n };
    Ok(super::spmd::concat_nd(c, &concat)?.remove(0))
}
