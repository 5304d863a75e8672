//! Type rules of the XLA-only ops (`XlaPad`, `XlaDynamicSlice`,
//! `XlaDynamicUpdateSlice`, `XlaReducePrecision`, `XlaBroadcastHelper`,
//! `XlaDot(V2)`, `XlaEinsum`, `XlaGather`, `XlaConv(V2)`), and the
//! geometry of their dimension numbers, shared with the simulator's
//! kernels and the StableHLO lowerings so that the three agree.
//!
//! Invariant: a geometry is returned only after every dimension number is
//! checked against the operands' ranks and sizes, as XLA's shape inference
//! checks them; readers may then index with it without further checks.

use super::{Args, OutType};
use crate::ir::xla_proto::{
    decode, dims_below, ConvolutionDimensionNumbers, DotDimensionNumbers, GatherDimensionNumbers,
};
use crate::ir::{AttrMap, AttrValue, DType};

/// The output dtype of a V2 op (`preferred_element_type`), or `default`.
pub fn preferred(attrs: &AttrMap, default: DType) -> DType {
    attrs.get("preferred_element_type").and_then(AttrValue::as_type).unwrap_or(default)
}

/// A dot_general's dimensions, checked against its operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DotGeometry {
    /// Batch dimensions of the lhs and of the rhs, pairwise.
    pub lhs_batch: Vec<usize>,
    /// See `lhs_batch`.
    pub rhs_batch: Vec<usize>,
    /// Contracting dimensions of the lhs and of the rhs, pairwise.
    pub lhs_contract: Vec<usize>,
    /// See `lhs_contract`.
    pub rhs_contract: Vec<usize>,
    /// The lhs's other dimensions, in order.
    pub lhs_free: Vec<usize>,
    /// The rhs's other dimensions, in order.
    pub rhs_free: Vec<usize>,
    /// Batch sizes, then the lhs's free sizes, then the rhs's.
    pub out_shape: Vec<usize>,
}

/// The geometry of `XlaDot(V2)`'s `dimension_numbers` on operands of these shapes.
pub fn dot_geometry(attrs: &AttrMap, lhs: &[usize], rhs: &[usize]) -> Result<DotGeometry, String> {
    let d: DotDimensionNumbers = decode(attrs, "dimension_numbers")?;
    let lhs_batch = dims_below(&d.lhs_batch_dimensions, lhs.len(), "lhs_batch_dimensions")?;
    let rhs_batch = dims_below(&d.rhs_batch_dimensions, rhs.len(), "rhs_batch_dimensions")?;
    let lhs_contract = dims_below(&d.lhs_contracting_dimensions, lhs.len(), "lhs_contracting_dimensions")?;
    let rhs_contract = dims_below(&d.rhs_contracting_dimensions, rhs.len(), "rhs_contracting_dimensions")?;
    if lhs_batch.len() != rhs_batch.len() || lhs_contract.len() != rhs_contract.len() {
        return Err("the lhs and the rhs must have as many batch and as many contracting dimensions".into());
    }
    for (pairs, what) in [((&lhs_batch, &rhs_batch), "batch"), ((&lhs_contract, &rhs_contract), "contracting")] {
        for (&l, &r) in pairs.0.iter().zip(pairs.1) {
            if lhs[l] != rhs[r] {
                return Err(format!(
                    "{what} dimension {l} of the lhs ({}) and {r} of the rhs ({}) differ",
                    lhs[l], rhs[r]
                ));
            }
        }
    }
    if lhs_batch.iter().any(|d| lhs_contract.contains(d)) || rhs_batch.iter().any(|d| rhs_contract.contains(d)) {
        return Err("a dimension is both a batch and a contracting dimension".into());
    }
    let free = |rank: usize, a: &[usize], b: &[usize]| (0..rank).filter(|d| !a.contains(d) && !b.contains(d)).collect();
    let lhs_free: Vec<usize> = free(lhs.len(), &lhs_batch, &lhs_contract);
    let rhs_free: Vec<usize> = free(rhs.len(), &rhs_batch, &rhs_contract);
    let mut out_shape: Vec<usize> = lhs_batch.iter().map(|&d| lhs[d]).collect();
    out_shape.extend(lhs_free.iter().map(|&d| lhs[d]));
    out_shape.extend(rhs_free.iter().map(|&d| rhs[d]));
    Ok(DotGeometry { lhs_batch, rhs_batch, lhs_contract, rhs_contract, lhs_free, rhs_free, out_shape })
}

/// A gather's dimensions, checked against its operand, indices and slice sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatherGeometry {
    /// The dimension of the indices that holds each start vector (its rank: one scalar index per position).
    pub index_vector_dim: usize,
    /// Operand dimension of each start vector's component.
    pub start_index_map: Vec<usize>,
    /// Operand dimensions the slices drop (of size 1).
    pub collapsed: Vec<usize>,
    /// Output dimensions that hold the slices' kept dimensions, increasing.
    pub offset_dims: Vec<usize>,
    /// The slice size of every operand dimension.
    pub slice_sizes: Vec<usize>,
    /// The output's shape.
    pub out_shape: Vec<usize>,
}

/// The geometry of `XlaGather`'s `dimension_numbers` and `slice_sizes`.
pub fn gather_geometry(
    attrs: &AttrMap,
    operand: &[usize],
    indices: &[usize],
    slice_sizes: &[i64],
) -> Result<GatherGeometry, String> {
    let d: GatherDimensionNumbers = decode(attrs, "dimension_numbers")?;
    if !d.operand_batching_dims.is_empty() || !d.start_indices_batching_dims.is_empty() {
        return Err("gathers with batching dimensions (operand_batching_dims) are not supported".into());
    }
    let rank = operand.len();
    if slice_sizes.len() != rank {
        return Err(format!("slice_sizes has {} entries for an operand of rank {rank}", slice_sizes.len()));
    }
    let mut sizes = Vec::with_capacity(rank);
    for (i, &s) in slice_sizes.iter().enumerate() {
        match usize::try_from(s) {
            Ok(s) if s <= operand[i] => sizes.push(s),
            _ => return Err(format!("slice size {s} of dimension {i} is outside [0, {}]", operand[i])),
        }
    }
    let ivd = usize::try_from(d.index_vector_dim)
        .ok()
        .filter(|&v| v <= indices.len())
        .ok_or_else(|| format!("index_vector_dim {} is outside [0, {}]", d.index_vector_dim, indices.len()))?;
    let vector_len = if ivd == indices.len() { 1 } else { indices[ivd] };
    let start_index_map = dims_below(&d.start_index_map, rank, "start_index_map")?;
    if start_index_map.len() != vector_len {
        return Err(format!("start_index_map has {} entries for start vectors of {vector_len}", start_index_map.len()));
    }
    let collapsed = dims_below(&d.collapsed_slice_dims, rank, "collapsed_slice_dims")?;
    if let Some(&c) = collapsed.iter().find(|&&c| sizes[c] > 1) {
        return Err(format!("collapsed dimension {c} has slice size {}, not 1", sizes[c]));
    }
    let batch: Vec<usize> = (0..indices.len()).filter(|&i| i != ivd).map(|i| indices[i]).collect();
    let window: Vec<usize> = (0..rank).filter(|i| !collapsed.contains(i)).map(|i| sizes[i]).collect();
    let out_rank = batch.len() + window.len();
    let offset_dims = dims_below(&d.offset_dims, out_rank, "offset_dims")?;
    if offset_dims.len() != window.len() || offset_dims.windows(2).any(|w| w[0] > w[1]) {
        return Err(format!(
            "offset_dims must list, in increasing order, one output dimension per kept slice dimension ({})",
            window.len()
        ));
    }
    let (mut b, mut w) = (batch.iter(), window.iter());
    let out_shape = (0..out_rank)
        .map(|o| if offset_dims.contains(&o) { w.next() } else { b.next() }.copied().unwrap_or(0))
        .collect();
    Ok(GatherGeometry { index_vector_dim: ivd, start_index_map, collapsed, offset_dims, slice_sizes: sizes, out_shape })
}

/// A convolution's dimensions and window, checked against its operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    /// The input's batch, feature and spatial dimensions.
    pub in_batch: usize,
    /// See `in_batch`.
    pub in_feature: usize,
    /// See `in_batch`.
    pub in_spatial: Vec<usize>,
    /// The kernel's input-feature, output-feature and spatial dimensions.
    pub k_in: usize,
    /// See `k_in`.
    pub k_out: usize,
    /// See `k_in`.
    pub k_spatial: Vec<usize>,
    /// The output's batch, feature and spatial dimensions.
    pub out_batch: usize,
    /// See `out_batch`.
    pub out_feature: usize,
    /// See `out_batch`.
    pub out_spatial: Vec<usize>,
    /// Per spatial dimension: stride, low and high padding, input (lhs) and kernel (rhs) dilation.
    pub strides: Vec<usize>,
    /// See `strides`.
    pub padding: Vec<(i64, i64)>,
    /// See `strides`.
    pub lhs_dilation: Vec<usize>,
    /// See `strides`.
    pub rhs_dilation: Vec<usize>,
    /// `feature_group_count` and `batch_group_count`.
    pub feature_groups: usize,
    /// See `feature_groups`.
    pub batch_groups: usize,
    /// The output's shape.
    pub out_shape: Vec<usize>,
}

/// The window of a convolution: strides, padding pairs, dilations, group counts.
pub struct ConvWindow<'a> {
    /// One stride per spatial dimension.
    pub strides: &'a [i64],
    /// Low and high padding per spatial dimension, flattened.
    pub padding: &'a [i64],
    /// Input dilation per spatial dimension.
    pub lhs_dilation: &'a [i64],
    /// Kernel dilation per spatial dimension.
    pub rhs_dilation: &'a [i64],
    /// `feature_group_count`.
    pub feature_groups: i64,
    /// `batch_group_count`.
    pub batch_groups: i64,
}

/// The geometry of `XlaConv(V2)` on operands of these shapes.
pub fn conv_geometry(attrs: &AttrMap, lhs: &[usize], rhs: &[usize], w: &ConvWindow) -> Result<ConvGeometry, String> {
    let d: ConvolutionDimensionNumbers = decode(attrs, "dimension_numbers")?;
    conv_geometry_of(&d, lhs, rhs, w)
}

/// The geometry of a convolution with dimension numbers `d` on operands of these shapes.
pub fn conv_geometry_of(
    d: &ConvolutionDimensionNumbers,
    lhs: &[usize],
    rhs: &[usize],
    w: &ConvWindow,
) -> Result<ConvGeometry, String> {
    let rank = lhs.len();
    if rank < 2 || rhs.len() != rank {
        return Err(format!("the input (rank {rank}) and the kernel (rank {}) need one rank of at least 2", rhs.len()));
    }
    let n = rank - 2;
    let all = |batch: i64, feature: i64, spatial: &[i64], what: &str| -> Result<Vec<usize>, String> {
        let mut dims = vec![batch, feature];
        dims.extend_from_slice(spatial);
        if spatial.len() != n {
            return Err(format!("{what} spatial dimensions: {} for rank {rank}", spatial.len()));
        }
        dims_below(&dims, rank, &format!("the {what} dimension numbers"))
    };
    let i = all(d.input_batch_dimension, d.input_feature_dimension, &d.input_spatial_dimensions, "input")?;
    let k = all(
        d.kernel_input_feature_dimension,
        d.kernel_output_feature_dimension,
        &d.kernel_spatial_dimensions,
        "kernel",
    )?;
    let o = all(d.output_batch_dimension, d.output_feature_dimension, &d.output_spatial_dimensions, "output")?;
    let positive = |v: &[i64], what: &str| -> Result<Vec<usize>, String> {
        if v.len() != n {
            return Err(format!("{what} has {} entries for {n} spatial dimensions", v.len()));
        }
        v.iter()
            .map(|&x| usize::try_from(x).ok().filter(|&x| x >= 1).ok_or(format!("{what} {x} is not positive")))
            .collect()
    };
    let strides = positive(w.strides, "window_strides")?;
    let lhs_dilation = positive(w.lhs_dilation, "lhs_dilation")?;
    let rhs_dilation = positive(w.rhs_dilation, "rhs_dilation")?;
    if w.padding.len() != 2 * n {
        return Err(format!("padding has {} values for {n} spatial dimensions (a [{n}, 2] tensor)", w.padding.len()));
    }
    let padding: Vec<(i64, i64)> = w.padding.chunks(2).map(|p| (p[0], p[1])).collect();
    let groups =
        |g: i64, what: &str| usize::try_from(g).ok().filter(|&g| g >= 1).ok_or(format!("{what} {g} is not positive"));
    let feature_groups = groups(w.feature_groups, "feature_group_count")?;
    let batch_groups = groups(w.batch_groups, "batch_group_count")?;
    let (in_feature, k_in, k_out) = (lhs[i[1]], rhs[k[0]], rhs[k[1]]);
    if in_feature != k_in * feature_groups || !k_out.is_multiple_of(feature_groups) {
        return Err(format!(
            "input features ({in_feature}) must be kernel input features ({k_in}) times feature_group_count ({feature_groups}), and kernel output features ({k_out}) a multiple of it"
        ));
    }
    if !lhs[i[0]].is_multiple_of(batch_groups)
        || !k_out.is_multiple_of(batch_groups)
        || (batch_groups > 1 && feature_groups > 1)
    {
        return Err(format!(
            "batch_group_count ({batch_groups}) must divide the batch ({}) and the kernel output features ({k_out}), with feature_group_count 1",
            lhs[i[0]]
        ));
    }
    let mut out_shape = vec![0; rank];
    out_shape[o[0]] = lhs[i[0]] / batch_groups;
    out_shape[o[1]] = k_out;
    for s in 0..n {
        let input = lhs[i[2 + s]].saturating_sub(1) * lhs_dilation[s] + usize::from(lhs[i[2 + s]] > 0);
        let padded = input as i64 + padding[s].0 + padding[s].1;
        let window = (rhs[k[2 + s]].saturating_sub(1) * rhs_dilation[s] + 1) as i64;
        out_shape[o[2 + s]] = if padded < window { 0 } else { ((padded - window) / strides[s] as i64 + 1) as usize };
    }
    Ok(ConvGeometry {
        in_batch: i[0],
        in_feature: i[1],
        in_spatial: i[2..].to_vec(),
        k_in: k[0],
        k_out: k[1],
        k_spatial: k[2..].to_vec(),
        out_batch: o[0],
        out_feature: o[1],
        out_spatial: o[2..].to_vec(),
        strides,
        padding,
        lhs_dilation,
        rhs_dilation,
        feature_groups,
        batch_groups,
        out_shape,
    })
}

/// The shape `XlaPad` gives `shape` with these low, high and interior paddings.
pub fn pad_shape(shape: &[usize], low: &[i64], high: &[i64], interior: &[i64]) -> Result<Vec<usize>, String> {
    if low.len() != shape.len() || high.len() != shape.len() || interior.len() != shape.len() {
        return Err(format!("the paddings need one entry per dimension ({})", shape.len()));
    }
    (0..shape.len())
        .map(|d| {
            if interior[d] < 0 {
                return Err(format!("interior padding {} of dimension {d} is negative", interior[d]));
            }
            let n = shape[d] as i64;
            let size = n + low[d] + high[d] + (n - 1).max(0) * interior[d];
            usize::try_from(size).map_err(|_| format!("dimension {d} would have size {size}"))
        })
        .collect()
}

/// The shapes `XlaBroadcastHelper` gives its operands: the one of lower rank
/// gains unit dimensions, its own dimensions going to `dims`.
pub fn broadcast_helper_shapes(lhs: &[usize], rhs: &[usize], dims: &[i64]) -> Result<(Vec<usize>, Vec<usize>), String> {
    if lhs.len() == rhs.len() {
        return Ok((lhs.to_vec(), rhs.to_vec()));
    }
    let (low, high) = if lhs.len() < rhs.len() { (lhs, rhs) } else { (rhs, lhs) };
    if dims.len() != low.len() {
        return Err(format!(
            "broadcast_dims has {} entries for the lower-rank operand of rank {}",
            dims.len(),
            low.len()
        ));
    }
    let at = dims_below(dims, high.len(), "broadcast_dims")?;
    let mut shape = vec![1; high.len()];
    for (&d, &size) in at.iter().zip(low) {
        shape[d] = size;
    }
    Ok(if lhs.len() < rhs.len() { (shape, rhs.to_vec()) } else { (lhs.to_vec(), shape) })
}

/// `XlaPad(input, padding_value, padding_low, padding_high, padding_interior)`.
pub(super) fn pad(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let shape =
        pad_shape(x.shape, a.ints(2, "padding_low")?, a.ints(3, "padding_high")?, a.ints(4, "padding_interior")?)?;
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `XlaDynamicSlice(input, start_indices, size_indices)`: shaped by the constant sizes.
pub(super) fn dynamic_slice(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let sizes = a.ints(2, "size_indices")?;
    if sizes.len() != x.shape.len() {
        return Err(format!("size_indices has {} entries for rank {}", sizes.len(), x.shape.len()));
    }
    let shape = sizes
        .iter()
        .zip(x.shape)
        .map(|(&s, &n)| {
            usize::try_from(s).ok().filter(|&s| s <= n).ok_or(format!("slice size {s} is outside [0, {n}]"))
        })
        .collect::<Result<_, _>>()?;
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `XlaBroadcastHelper(lhs, rhs, broadcast_dims)`.
pub(super) fn broadcast_helper(a: &Args) -> Result<Vec<OutType>, String> {
    let (l, r) = (a.x(0)?, a.x(1)?);
    let (ls, rs) = broadcast_helper_shapes(l.shape, r.shape, a.ints(2, "broadcast_dims")?)?;
    Ok(vec![OutType::new(l.dtype, ls), OutType::new(r.dtype, rs)])
}

/// `XlaDot(lhs, rhs)` and `XlaDotV2`.
pub(super) fn dot(a: &Args) -> Result<Vec<OutType>, String> {
    let (l, r) = (a.x(0)?, a.x(1)?);
    let g = dot_geometry(a.attrs, l.shape, r.shape)?;
    Ok(vec![OutType::new(preferred(a.attrs, l.dtype), g.out_shape)])
}

/// `XlaGather(operand, start_indices, slice_sizes)`.
pub(super) fn gather(a: &Args) -> Result<Vec<OutType>, String> {
    let (x, i) = (a.x(0)?, a.x(1)?);
    let g = gather_geometry(a.attrs, x.shape, i.shape, a.ints(2, "slice_sizes")?)?;
    Ok(vec![OutType::new(x.dtype, g.out_shape)])
}

/// `XlaConv(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count)` and `XlaConvV2`.
pub(super) fn conv(a: &Args) -> Result<Vec<OutType>, String> {
    let (l, r) = (a.x(0)?, a.x(1)?);
    let groups = a.ints(6, "feature_group_count")?;
    let window = ConvWindow {
        strides: a.ints(2, "window_strides")?,
        padding: a.ints(3, "padding")?,
        lhs_dilation: a.ints(4, "lhs_dilation")?,
        rhs_dilation: a.ints(5, "rhs_dilation")?,
        feature_groups: groups.first().copied().unwrap_or(1),
        batch_groups: a.int_attr("batch_group_count", 1),
    };
    let g = conv_geometry(a.attrs, l.shape, r.shape, &window)?;
    Ok(vec![OutType::new(preferred(a.attrs, l.dtype), g.out_shape)])
}
