//! Lowerings of the XLA-only ops, one StableHLO op each as TensorFlow's XLA
//! bridge emits them: `XlaPad` → `pad` (edge and interior padding),
//! `XlaDynamicSlice` / `XlaDynamicUpdateSlice` → `dynamic_slice` /
//! `dynamic_update_slice` (which clamp their starts), `XlaReducePrecision`
//! → `reduce_precision`, `XlaBroadcastHelper` → a `reshape`, `XlaDot(V2)`
//! → `dot_general`, `XlaEinsum` → the einsum lowering, `XlaGather` →
//! `gather`, `XlaConv(V2)` → `convolution`.
//!
//! The dimension numbers are decoded and checked by the geometry functions
//! of the type rules (`ir::shapes::rules::xla_ops`), which the simulator's
//! kernels use as well. The V2 forms convert their operands to
//! `preferred_element_type` first, so that integer products wrap and float
//! products round as in that type.

use super::{i64s, Call, Ctx, Ty, Val};
use crate::ir::shapes::rules::xla_ops::{
    broadcast_helper_shapes, conv_geometry, dot_geometry, gather_geometry, pad_shape, ConvGeometry, ConvWindow,
};

fn ints(items: &[usize]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// `XlaPad(input, padding_value, padding_low, padding_high, padding_interior)`.
pub(super) fn pad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (x, value) = (n.input(0)?, n.input(1)?);
    let (low, high, interior) = (n.ints(2, "padding_low")?, n.ints(3, "padding_high")?, n.ints(4, "padding_interior")?);
    let shape = pad_shape(&x.ty.shape, &low, &high, &interior)?;
    let value = c.reshape(value, Vec::new());
    let attrs = format!(
        "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
        i64s(&low),
        i64s(&high),
        i64s(&interior)
    );
    Ok(vec![c.op("stablehlo.pad", &[x, &value], &attrs, x.ty.with_shape(shape))])
}

/// The components of a vector of start indices, as scalars.
fn scalars(c: &mut Ctx, v: &Val, rank: usize) -> Result<Vec<Val>, String> {
    if v.ty.shape != [rank] {
        return Err(format!("the start indices must be a vector of {rank}, got {}", v.ty.mlir()));
    }
    Ok((0..rank)
        .map(|k| {
            let attrs = format!(
                "start_indices = array<i64: {k}>, limit_indices = array<i64: {}>, strides = array<i64: 1>",
                k + 1
            );
            let one = c.op("stablehlo.slice", &[v], &attrs, v.ty.with_shape(vec![1]));
            c.reshape(&one, Vec::new())
        })
        .collect())
}

/// `XlaDynamicSlice(input, start_indices, size_indices)`.
pub(super) fn dynamic_slice(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let sizes = n.ints(2, "size_indices")?;
    let starts = scalars(c, n.input(1)?, x.ty.rank())?;
    let mut operands = vec![x];
    operands.extend(starts.iter());
    let attrs = format!("slice_sizes = {}", i64s(&sizes));
    Ok(vec![c.op("stablehlo.dynamic_slice", &operands, &attrs, n.out(0)?.clone())])
}

/// `XlaDynamicUpdateSlice(input, update, indices)`.
pub(super) fn dynamic_update_slice(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (x, update) = (n.input(0)?, n.input(1)?);
    if update.ty.rank() != x.ty.rank() || update.ty.shape.iter().zip(&x.ty.shape).any(|(u, s)| u > s) {
        return Err(format!("the update {} does not fit in the input {}", update.ty.mlir(), x.ty.mlir()));
    }
    let starts = scalars(c, n.input(2)?, x.ty.rank())?;
    let mut operands = vec![x, update];
    operands.extend(starts.iter());
    Ok(vec![c.op("stablehlo.dynamic_update_slice", &operands, "", x.ty.clone())])
}

/// `XlaReducePrecision(operand) {exponent_bits, mantissa_bits}`.
pub(super) fn reduce_precision(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let (e, m) = (n.int_attr("exponent_bits", -1), n.int_attr("mantissa_bits", -1));
    if e < 1 || m < 0 {
        return Err(format!("exponent_bits ({e}) must be at least 1 and mantissa_bits ({m}) at least 0"));
    }
    let attrs = format!("exponent_bits = {e} : i32, mantissa_bits = {m} : i32");
    Ok(vec![c.op("stablehlo.reduce_precision", &[x], &attrs, x.ty.clone())])
}

/// `XlaBroadcastHelper(lhs, rhs, broadcast_dims)`: the lower-rank operand reshaped.
pub(super) fn broadcast_helper(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (l, r) = (n.input(0)?, n.input(1)?);
    let (ls, rs) = broadcast_helper_shapes(&l.ty.shape, &r.ty.shape, &n.ints(2, "broadcast_dims")?)?;
    Ok(vec![c.reshape(l, ls), c.reshape(r, rs)])
}

/// `XlaDot(lhs, rhs)` and `XlaDotV2`.
pub(super) fn dot(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let (l, r) = (c.convert(n.input(0)?, out.dtype), c.convert(n.input(1)?, out.dtype));
    let g = dot_geometry(n.attrs, &l.ty.shape, &r.ty.shape)?;
    let attrs = format!(
        "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [{}], rhs_batching_dimensions = [{}], lhs_contracting_dimensions = [{}], rhs_contracting_dimensions = [{}]>",
        ints(&g.lhs_batch),
        ints(&g.rhs_batch),
        ints(&g.lhs_contract),
        ints(&g.rhs_contract)
    );
    Ok(vec![c.op("stablehlo.dot_general", &[&l, &r], &attrs, out)])
}

/// `XlaGather(operand, start_indices, slice_sizes)`.
pub(super) fn gather(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (x, indices) = (n.input(0)?, n.input(1)?);
    let g = gather_geometry(n.attrs, &x.ty.shape, &indices.ty.shape, &n.ints(2, "slice_sizes")?)?;
    let sorted = n.attrs.get_bool("indices_are_sorted").unwrap_or(false);
    let attrs = format!(
        "dimension_numbers = #stablehlo.gather<offset_dims = [{}], collapsed_slice_dims = [{}], start_index_map = [{}], index_vector_dim = {}>, slice_sizes = {}, indices_are_sorted = {sorted}",
        ints(&g.offset_dims),
        ints(&g.collapsed),
        ints(&g.start_index_map),
        g.index_vector_dim,
        i64s(&g.slice_sizes)
    );
    Ok(vec![c.op("stablehlo.gather", &[x, indices], &attrs, Ty::new(x.ty.dtype, g.out_shape))])
}

/// `XlaConv(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count)` and `XlaConvV2`.
pub(super) fn conv(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let (l, r) = (c.convert(n.input(0)?, out.dtype), c.convert(n.input(1)?, out.dtype));
    let (strides, padding) = (n.ints(2, "window_strides")?, n.ints(3, "padding")?);
    let (lhs_dilation, rhs_dilation) = (n.ints(4, "lhs_dilation")?, n.ints(5, "rhs_dilation")?);
    let groups = n.ints(6, "feature_group_count")?;
    let window = ConvWindow {
        strides: &strides,
        padding: &padding,
        lhs_dilation: &lhs_dilation,
        rhs_dilation: &rhs_dilation,
        feature_groups: groups.first().copied().unwrap_or(1),
        batch_groups: n.int_attr("batch_group_count", 1),
    };
    let g = conv_geometry(n.attrs, &l.ty.shape, &r.ty.shape, &window)?;
    Ok(vec![convolution(c, &l, &r, &g, out)])
}

/// `stablehlo.convolution` of `l` and `r` by geometry `g`, of type `out`.
pub(super) fn convolution(c: &mut Ctx, l: &Val, r: &Val, g: &ConvGeometry, out: Ty) -> Val {
    // The compact form: each operand's dimensions named in order (`b`, `f`, `i`, `o`, or the spatial index).
    let labels = |rank: usize, first: (usize, char), second: (usize, char), spatial: &[usize]| {
        let names: Vec<String> = (0..rank)
            .map(|d| match spatial.iter().position(|&s| s == d) {
                _ if d == first.0 => first.1.to_string(),
                _ if d == second.0 => second.1.to_string(),
                Some(s) => s.to_string(),
                None => "?".to_string(),
            })
            .collect();
        format!("[{}]", names.join(", "))
    };
    let rank = l.ty.rank();
    let dims = format!(
        "{}x{}->{}",
        labels(rank, (g.in_batch, 'b'), (g.in_feature, 'f'), &g.in_spatial),
        labels(rank, (g.k_in, 'i'), (g.k_out, 'o'), &g.k_spatial),
        labels(rank, (g.out_batch, 'b'), (g.out_feature, 'f'), &g.out_spatial)
    );
    let pads: Vec<String> = g.padding.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
    let attrs = format!(
        "dimension_numbers = #stablehlo.conv<{dims}>, window_strides = {}, padding = dense<[{}]> : tensor<{}x2xi64>, lhs_dilation = {}, rhs_dilation = {}, feature_group_count = {} : i64, batch_group_count = {} : i64",
        i64s(&g.strides),
        pads.join(", "),
        g.padding.len(),
        i64s(&g.lhs_dilation),
        i64s(&g.rhs_dilation),
        g.feature_groups,
        g.batch_groups
    );
    c.op("stablehlo.convolution", &[l, r], &attrs, out)
}
