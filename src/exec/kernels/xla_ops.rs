//! The XLA-only ops as XLA computes them (TensorFlow has no CPU kernel for
//! most; these follow XLA's operation semantics, which TensorFlow's XLA
//! bridge gives): `XlaPad` (edge padding that may be negative, interior
//! padding), `XlaDynamicSlice` / `XlaDynamicUpdateSlice` (start indices
//! clamped so that the slice fits), `XlaReducePrecision` (rounding to a
//! narrower float format on the bits), `XlaBroadcastHelper`, `XlaDot(V2)`
//! (dot_general), `XlaEinsum`, `XlaGather` (general gather, starts clamped)
//! and `XlaConv(V2)` (general convolution: any dimension numbers, padding,
//! input and kernel dilation, feature and batch groups).
//!
//! Dimension numbers come from the ops' serialized XLA messages, checked by
//! the geometry functions of the type rules (`ir::shapes::rules::xla_ops`),
//! so that kernel, rule and lowering agree. Dots and convolutions
//! accumulate floats in f64 and integers in wrapping i64, then convert to
//! the output dtype (`preferred_element_type` for the V2 forms), which is
//! what XLA's integer arithmetic gives after the conversion.

use ndarray::IxDyn;
use num_traits::Zero;

use super::arg;
use super::dtypes::cast;
use crate::exec::error::KernelError;
use crate::exec::tensor::{with_element_type, Element, Tensor};
use crate::ir::shapes::rules::xla_ops::{
    broadcast_helper_shapes, conv_geometry, dot_geometry, gather_geometry, pad_shape, preferred, ConvGeometry,
    ConvWindow, DotGeometry, GatherGeometry,
};
use crate::ir::{AttrMap, DType};

fn one(t: Tensor) -> Result<Vec<Tensor>, KernelError> {
    Ok(vec![t])
}

/// Runs `op` if it is one of these XLA ops; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let ints = |i: usize, what: &str| -> Result<Vec<i64>, KernelError> { x(i)?.to_i64_vec(op, what) };
    let bad = |e: String| KernelError::invalid(op, e);
    Some(match op {
        "XlaPad" => (|| {
            let (low, high, interior) =
                (ints(2, "padding_low")?, ints(3, "padding_high")?, ints(4, "padding_interior")?);
            one(pad(op, x(0)?, x(1)?, &low, &high, &interior)?)
        })(),
        "XlaDynamicSlice" => {
            (|| one(dynamic_slice(op, x(0)?, &ints(1, "start_indices")?, &ints(2, "size_indices")?)?))()
        }
        "XlaDynamicUpdateSlice" => (|| one(dynamic_update_slice(op, x(0)?, x(1)?, &ints(2, "indices")?)?))(),
        "XlaReducePrecision" => (|| {
            let bits = |k: &str| attrs.get_int(k).ok_or_else(|| bad(format!("missing integer attribute `{k}`")));
            one(reduce_precision(op, x(0)?, bits("exponent_bits")?, bits("mantissa_bits")?)?)
        })(),
        "XlaBroadcastHelper" => (|| {
            let (l, r) = (x(0)?, x(1)?);
            let (ls, rs) = broadcast_helper_shapes(l.shape(), r.shape(), &ints(2, "broadcast_dims")?).map_err(bad)?;
            Ok(vec![reshaped(op, l, &ls)?, reshaped(op, r, &rs)?])
        })(),
        "XlaDot" | "XlaDotV2" => (|| {
            let (l, r) = (x(0)?, x(1)?);
            let g = dot_geometry(attrs, l.shape(), r.shape()).map_err(bad)?;
            one(dot(op, l, r, &g, preferred(attrs, l.dtype()))?)
        })(),
        "XlaEinsum" => (|| {
            let equation =
                attrs.get_str("equation").ok_or_else(|| bad("missing string attribute `equation`".into()))?;
            if inputs.len() != 2 {
                return Err(bad(format!("XlaEinsum takes two operands, got {}", inputs.len())));
            }
            one(super::linalg::einsum(op, equation, inputs)?)
        })(),
        "XlaGather" => (|| {
            let (operand, indices) = (x(0)?, x(1)?);
            let g = gather_geometry(attrs, operand.shape(), indices.shape(), &ints(2, "slice_sizes")?).map_err(bad)?;
            one(gather(op, operand, &indices.to_i64_vec(op, "start_indices")?, indices.shape(), &g)?)
        })(),
        "XlaConv" | "XlaConvV2" => (|| {
            let (l, r) = (x(0)?, x(1)?);
            let groups = ints(6, "feature_group_count")?;
            let window = ConvWindow {
                strides: &ints(2, "window_strides")?,
                padding: &ints(3, "padding")?,
                lhs_dilation: &ints(4, "lhs_dilation")?,
                rhs_dilation: &ints(5, "rhs_dilation")?,
                feature_groups: groups.first().copied().unwrap_or(1),
                batch_groups: attrs.get_int("batch_group_count").unwrap_or(1),
            };
            let g = conv_geometry(attrs, l.shape(), r.shape(), &window).map_err(bad)?;
            one(conv(op, l, r, &g, preferred(attrs, l.dtype()))?)
        })(),
        _ => return None,
    })
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Calls `f` with every multi-index of `shape`, in row-major order.
fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0; shape.len()];
    loop {
        f(&idx);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// `x` with a new shape of as many elements.
fn reshaped(op: &str, x: &Tensor, shape: &[usize]) -> Result<Tensor, KernelError> {
    fn run<T: Element>(x: &Tensor, shape: &[usize]) -> Result<Tensor, KernelError> {
        Tensor::from_vec(shape, x.to_vec::<T>().unwrap_or_default())
    }
    with_element_type!(x, T => run::<T>(x, shape), resource => Err(KernelError::invalid(op, "a resource has no elements")))
}

/// A scalar operand as an element of `T`.
fn scalar_of<T: Element>(op: &str, v: &Tensor, what: &str) -> Result<T, KernelError> {
    match v.to_vec::<T>().as_deref() {
        Some([value]) => Ok(value.clone()),
        _ => Err(KernelError::invalid(op, format!("{what} must be a scalar of the input's dtype"))),
    }
}

/// `XlaPad`: `x` spread by `interior`, then padded by `low` / `high` (negative values crop).
fn pad(
    op: &str,
    x: &Tensor,
    value: &Tensor,
    low: &[i64],
    high: &[i64],
    interior: &[i64],
) -> Result<Tensor, KernelError> {
    let out_shape = pad_shape(x.shape(), low, high, interior).map_err(|e| KernelError::invalid(op, e))?;
    fn run<T: Element>(
        op: &str,
        x: &Tensor,
        value: &Tensor,
        low: &[i64],
        interior: &[i64],
        out_shape: &[usize],
    ) -> Result<Tensor, KernelError> {
        let fill = scalar_of::<T>(op, value, "padding_value")?;
        let values = x.to_vec::<T>().unwrap_or_default();
        let mut out = vec![fill; out_shape.iter().product()];
        let out_strides = strides(out_shape);
        let mut k = 0;
        for_each_index(x.shape(), |idx| {
            let mut offset = 0usize;
            let inside = idx.iter().enumerate().all(|(d, &i)| {
                let at = low[d] + i as i64 * (interior[d] + 1);
                offset += at.max(0) as usize * out_strides[d];
                (0..out_shape[d] as i64).contains(&at)
            });
            if inside {
                out[offset] = values[k].clone();
            }
            k += 1;
        });
        Tensor::from_vec(out_shape, out)
    }
    with_element_type!(x, T => run::<T>(op, x, value, low, interior, &out_shape), resource => Err(KernelError::invalid(op, "a resource has no elements")))
}

/// Start indices clamped, per dimension, to `[0, size - window]`, as XLA clamps dynamic slices.
fn clamped_starts(op: &str, shape: &[usize], starts: &[i64], window: &[usize]) -> Result<Vec<usize>, KernelError> {
    if starts.len() != shape.len() || window.len() != shape.len() {
        return Err(KernelError::invalid(
            op,
            format!("need one start index and one size per dimension ({})", shape.len()),
        ));
    }
    (0..shape.len())
        .map(|d| {
            if window[d] > shape[d] {
                return Err(KernelError::invalid(
                    op,
                    format!("size {} of dimension {d} exceeds {}", window[d], shape[d]),
                ));
            }
            Ok(starts[d].clamp(0, (shape[d] - window[d]) as i64) as usize)
        })
        .collect()
}

/// `XlaDynamicSlice(input, start_indices, size_indices)`.
fn dynamic_slice(op: &str, x: &Tensor, starts: &[i64], sizes: &[i64]) -> Result<Tensor, KernelError> {
    let window: Vec<usize> = sizes
        .iter()
        .map(|&s| usize::try_from(s).map_err(|_| KernelError::invalid(op, format!("slice size {s} is negative"))))
        .collect::<Result<_, _>>()?;
    let at = clamped_starts(op, x.shape(), starts, &window)?;
    fn run<T: Element>(x: &Tensor, at: &[usize], window: &[usize]) -> Result<Tensor, KernelError> {
        let values = x.to_vec::<T>().unwrap_or_default();
        let s = strides(x.shape());
        let mut out = Vec::with_capacity(window.iter().product());
        for_each_index(window, |idx| {
            let offset: usize = idx.iter().enumerate().map(|(d, &i)| (at[d] + i) * s[d]).sum();
            out.push(values[offset].clone());
        });
        Tensor::from_vec(window, out)
    }
    with_element_type!(x, T => run::<T>(x, &at, &window), resource => Err(KernelError::invalid(op, "a resource has no elements")))
}

/// `XlaDynamicUpdateSlice(input, update, indices)`.
fn dynamic_update_slice(op: &str, x: &Tensor, update: &Tensor, starts: &[i64]) -> Result<Tensor, KernelError> {
    if update.dtype() != x.dtype() || update.shape().len() != x.shape().len() {
        return Err(KernelError::invalid(op, "the update must have the input's dtype and rank"));
    }
    let at = clamped_starts(op, x.shape(), starts, update.shape())?;
    fn run<T: Element>(x: &Tensor, update: &Tensor, at: &[usize]) -> Result<Tensor, KernelError> {
        let mut values = x.to_vec::<T>().unwrap_or_default();
        let new = update.to_vec::<T>().unwrap_or_default();
        let s = strides(x.shape());
        let mut k = 0;
        for_each_index(update.shape(), |idx| {
            let offset: usize = idx.iter().enumerate().map(|(d, &i)| (at[d] + i) * s[d]).sum();
            values[offset] = new[k].clone();
            k += 1;
        });
        Tensor::from_vec(x.shape(), values)
    }
    with_element_type!(x, T => run::<T>(x, update, &at), resource => Err(KernelError::invalid(op, "a resource has no elements")))
}

/// The bits of one float format: total, exponent and mantissa widths.
struct Format {
    bits: u32,
    exponent: u32,
    mantissa: u32,
}

/// Rounds the float with bit pattern `x` (of format `f`) to `exponent_bits`
/// and `mantissa_bits`: mantissa to nearest even, then exponents beyond the
/// narrow range to infinity and below it to zero (keeping the sign). NaN
/// stays NaN when the narrow format has a mantissa.
fn reduce_bits(x: u64, f: &Format, exponent_bits: u32, mantissa_bits: u32) -> u64 {
    let mut r = x;
    if mantissa_bits < f.mantissa {
        let shift = f.mantissa - mantissa_bits;
        let last = 1u64 << shift;
        let bias = (last >> 1) - 1 + ((r & last) >> shift);
        r = r.wrapping_add(bias) & !(last - 1);
    }
    let all = if f.bits == 64 { u64::MAX } else { (1u64 << f.bits) - 1 };
    r &= all;
    if exponent_bits < f.exponent {
        let sign = 1u64 << (f.bits - 1);
        let exp_mask = ((1u64 << f.exponent) - 1) << f.mantissa;
        let bias = (1u64 << (f.exponent - 1)) - 1;
        let narrow_bias = (1u64 << (exponent_bits - 1)) - 1;
        let exponent = r & exp_mask;
        if exponent > (bias + narrow_bias) << f.mantissa {
            r = (r & sign) | exp_mask;
        } else if exponent <= (bias - narrow_bias) << f.mantissa {
            r &= sign;
        }
    }
    let is_nan = (x & all & !(1u64 << (f.bits - 1))) > (((1u64 << f.exponent) - 1) << f.mantissa);
    if mantissa_bits > 0 && is_nan {
        x
    } else {
        r
    }
}

/// `XlaReducePrecision(operand) {exponent_bits, mantissa_bits}` on f32 and f64 (bf16 and f16 arrive as f32).
fn reduce_precision(op: &str, x: &Tensor, exponent_bits: i64, mantissa_bits: i64) -> Result<Tensor, KernelError> {
    let (e, m) = match (u32::try_from(exponent_bits), u32::try_from(mantissa_bits)) {
        (Ok(e), Ok(m)) if e >= 1 => (e, m),
        _ => {
            return Err(KernelError::invalid(
                op,
                format!(
                    "exponent_bits ({exponent_bits}) must be at least 1 and mantissa_bits ({mantissa_bits}) at least 0"
                ),
            ))
        }
    };
    match x {
        Tensor::F32(a) => {
            let f = Format { bits: 32, exponent: 8, mantissa: 23 };
            Ok(Tensor::from_array(a.mapv(|v| f32::from_bits(reduce_bits(u64::from(v.to_bits()), &f, e, m) as u32))))
        }
        Tensor::F64(a) => {
            let f = Format { bits: 64, exponent: 11, mantissa: 52 };
            Ok(Tensor::from_array(a.mapv(|v| f64::from_bits(reduce_bits(v.to_bits(), &f, e, m)))))
        }
        other => Err(KernelError::dtype(op, other.dtype(), "XlaReducePrecision takes floats")),
    }
}

/// Both operands in the accumulation dtype: f64 for floats, i64 for integers.
fn accumulation(op: &str, l: &Tensor, r: &Tensor, out: DType) -> Result<(Tensor, Tensor), KernelError> {
    let float = |d: DType| matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64);
    let wide = if float(l.dtype()) || float(r.dtype()) || float(out) { DType::F64 } else { DType::I64 };
    if matches!(l.dtype(), DType::Bool) || matches!(r.dtype(), DType::Bool) {
        return Err(KernelError::dtype(op, DType::Bool, "dots and convolutions take numbers"));
    }
    Ok((cast(op, l, wide)?, cast(op, r, wide)?))
}

/// A number dots and convolutions accumulate in: f64, or i64 with wrapping arithmetic.
trait Acc: Element + Copy + Zero {
    fn mul_add(self, x: Self, y: Self) -> Self;
}

impl Acc for f64 {
    fn mul_add(self, x: f64, y: f64) -> f64 {
        self + x * y
    }
}

impl Acc for i64 {
    fn mul_add(self, x: i64, y: i64) -> i64 {
        self.wrapping_add(x.wrapping_mul(y))
    }
}

/// `XlaDot(V2)`: dot_general by the geometry, into dtype `out`.
fn dot(op: &str, l: &Tensor, r: &Tensor, g: &DotGeometry, out: DType) -> Result<Tensor, KernelError> {
    let (l, r) = accumulation(op, l, r, out)?;
    fn run<T: Acc>(l: &Tensor, r: &Tensor, g: &DotGeometry) -> Result<Tensor, KernelError> {
        let (Some(a), Some(b)) = (l.view::<T>(), r.view::<T>()) else {
            return Err(KernelError::invalid("XlaDot", "the operands were not converted to one dtype"));
        };
        // Each operand as [batch, free, contract] (lhs) and [batch, contract, free] (rhs) matrices.
        let size = |shape: &[usize], dims: &[usize]| dims.iter().map(|&d| shape[d]).product::<usize>();
        let (batch, m, k, n) = (
            size(a.shape(), &g.lhs_batch),
            size(a.shape(), &g.lhs_free),
            size(a.shape(), &g.lhs_contract),
            size(b.shape(), &g.rhs_free),
        );
        let order = |x: &[usize], y: &[usize], z: &[usize]| [x, y, z].concat();
        let a = a.permuted_axes(IxDyn(&order(&g.lhs_batch, &g.lhs_free, &g.lhs_contract)));
        let b = b.permuted_axes(IxDyn(&order(&g.rhs_batch, &g.rhs_contract, &g.rhs_free)));
        let (a, b): (Vec<T>, Vec<T>) = (a.iter().copied().collect(), b.iter().copied().collect());
        let mut out = vec![T::zero(); batch * m * n];
        for p in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    let mut acc = T::zero();
                    for q in 0..k {
                        acc = acc.mul_add(a[(p * m + i) * k + q], b[(p * k + q) * n + j]);
                    }
                    out[(p * m + i) * n + j] = acc;
                }
            }
        }
        Tensor::from_vec(&g.out_shape, out)
    }
    let wide = match &l {
        Tensor::F64(_) => run::<f64>(&l, &r, g)?,
        _ => run::<i64>(&l, &r, g)?,
    };
    cast(op, &wide, out)
}

/// `XlaGather`: one slice per start vector, starts clamped so that the slice fits.
fn gather(
    op: &str,
    x: &Tensor,
    indices: &[i64],
    index_shape: &[usize],
    g: &GatherGeometry,
) -> Result<Tensor, KernelError> {
    fn run<T: Element>(
        x: &Tensor,
        indices: &[i64],
        index_shape: &[usize],
        g: &GatherGeometry,
    ) -> Result<Tensor, KernelError> {
        let values = x.to_vec::<T>().unwrap_or_default();
        let (shape, s, is) = (x.shape(), strides(x.shape()), strides(index_shape));
        let kept: Vec<usize> = (0..shape.len()).filter(|d| !g.collapsed.contains(d)).collect();
        let mut out = Vec::with_capacity(g.out_shape.iter().product());
        let mut index_at = vec![0usize; index_shape.len()];
        for_each_index(&g.out_shape, |o| {
            // The batch position in the indices, then the clamped start of its slice.
            let mut batch = (0..o.len()).filter(|d| !g.offset_dims.contains(d)).map(|d| o[d]);
            for (d, at) in index_at.iter_mut().enumerate() {
                *at = if d == g.index_vector_dim { 0 } else { batch.next().unwrap_or(0) };
            }
            let mut start = vec![0usize; shape.len()];
            for (k, &dim) in g.start_index_map.iter().enumerate() {
                let mut offset: usize = index_at.iter().zip(&is).map(|(i, s)| i * s).sum();
                if g.index_vector_dim < index_shape.len() {
                    offset += k * is[g.index_vector_dim];
                }
                start[dim] = indices[offset].clamp(0, (shape[dim] - g.slice_sizes[dim]) as i64) as usize;
            }
            let mut offset = 0;
            for d in 0..shape.len() {
                let within = kept.iter().position(|&k| k == d).map_or(0, |w| o[g.offset_dims[w]]);
                offset += (start[d] + within) * s[d];
            }
            out.push(values[offset].clone());
        });
        Tensor::from_vec(&g.out_shape, out)
    }
    with_element_type!(x, T => run::<T>(x, indices, index_shape, g), resource => Err(KernelError::invalid(op, "a resource has no elements")))
}

/// `XlaConv(V2)`: the general convolution by the geometry, into dtype `out`.
pub(super) fn conv(op: &str, l: &Tensor, r: &Tensor, g: &ConvGeometry, out: DType) -> Result<Tensor, KernelError> {
    let (l, r) = accumulation(op, l, r, out)?;
    fn run<T: Acc>(l: &Tensor, r: &Tensor, g: &ConvGeometry) -> Result<Tensor, KernelError> {
        let (a, b) = (l.to_vec::<T>().unwrap_or_default(), r.to_vec::<T>().unwrap_or_default());
        let (ls, rs) = (l.shape(), r.shape());
        let (la, ra) = (strides(ls), strides(rs));
        let n = g.in_spatial.len();
        let k_in = rs[g.k_in];
        let out_per_feature_group = rs[g.k_out] / g.feature_groups;
        let out_per_batch_group = rs[g.k_out] / g.batch_groups;
        let batch_per_group = ls[g.in_batch] / g.batch_groups;
        let window: Vec<usize> = g.k_spatial.iter().map(|&d| rs[d]).collect();
        let mut out = Vec::with_capacity(g.out_shape.iter().product());
        for_each_index(&g.out_shape, |o| {
            let feature = o[g.out_feature];
            let first_in = (feature / out_per_feature_group) * k_in;
            let batch = (feature / out_per_batch_group) * batch_per_group + o[g.out_batch];
            let mut acc = T::zero();
            for_each_index(&window, |w| {
                let mut lhs_at = batch * la[g.in_batch];
                let mut rhs_at = feature * ra[g.k_out];
                for s in 0..n {
                    let p = (o[g.out_spatial[s]] * g.strides[s] + w[s] * g.rhs_dilation[s]) as i64 - g.padding[s].0;
                    let dil = g.lhs_dilation[s] as i64;
                    if p < 0 || p % dil != 0 || (p / dil) as usize >= ls[g.in_spatial[s]] {
                        return;
                    }
                    lhs_at += (p / dil) as usize * la[g.in_spatial[s]];
                    rhs_at += w[s] * ra[g.k_spatial[s]];
                }
                for c in 0..k_in {
                    let x = a[lhs_at + (first_in + c) * la[g.in_feature]];
                    acc = acc.mul_add(x, b[rhs_at + c * ra[g.k_in]]);
                }
            });
            out.push(acc);
        });
        Tensor::from_vec(&g.out_shape, out)
    }
    let wide = match &l {
        Tensor::F64(_) => run::<f64>(&l, &r, g)?,
        _ => run::<i64>(&l, &r, g)?,
    };
    cast(op, &wide, out)
}
