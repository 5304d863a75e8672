//! Gradient functions of the TensorFlow training-step ops: activations,
//! losses, shape and layout, gathers, convolution and pooling, batch norm.
//!
//! As in `functions`, each follows TensorFlow's registered gradient and
//! emits the same standard ops with dynamic shapes; [`gradient`] is called
//! for op types `functions` does not handle. Attributes that fix an op's
//! geometry (strides, padding, masks, ...) are copied to its gradient op.

use super::emitter::{Attr, Emitter, TAttr, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, DType, NodeId};

/// The gradients of `op`'s data inputs given `g`, the gradient of its output 0; `Err(None)` when
/// the op type has no gradient here.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let y = Tensor::of(op);
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let t = e.dtype_of(g);
    let ta = e.t_attr(t);
    let copied = |e: &Emitter<'_>, keys: &[&'static str]| -> Vec<Attr> {
        let attrs = &e.graph.node(op).attrs;
        keys.iter().filter_map(|&k| attrs.get(k).cloned().map(|v| (k, v))).chain(ta.clone()).collect()
    };
    Ok(match op_type {
        "Sqrt" => vec![Some(e.emit("SqrtGrad", "SqrtGrad", &[y, g], ta))],
        "Rsqrt" => vec![Some(e.emit("RsqrtGrad", "RsqrtGrad", &[y, g], ta))],
        "Abs" => {
            let s = e.emit("Sign", "Sign", &[x(0)?], ta.clone());
            vec![Some(e.emit("Mul", "mul", &[g, s], ta))]
        }
        "Erf" => {
            // d/dx erf(x) = 2 / sqrt(pi) * exp(-x²).
            let a = x(0)?;
            let sq = e.emit("Square", "Square", &[a], ta.clone());
            let neg = e.emit("Neg", "Neg", &[sq], ta.clone());
            let ex = e.emit("Exp", "Exp", &[neg], ta.clone());
            let mul = e.fresh_name("mul");
            let c = e.scalar_const_named(&format!("{mul}/x"), t, 2.0 / std::f64::consts::PI.sqrt());
            let scaled = e.emit_named(mul, "Mul", &[c, ex], ta.clone());
            vec![Some(e.emit("Mul", "mul", &[g, scaled], ta))]
        }
        "Relu6" => vec![Some(e.emit("Relu6Grad", "Relu6Grad", &[g, x(0)?], ta))],
        "Elu" => vec![Some(e.emit("EluGrad", "EluGrad", &[g, y], ta))],
        "Selu" => vec![Some(e.emit("SeluGrad", "SeluGrad", &[g, y], ta))],
        "Softplus" => vec![Some(e.emit("SoftplusGrad", "SoftplusGrad", &[g, x(0)?], ta))],
        "LeakyRelu" => {
            let attrs = copied(e, &["alpha"]);
            vec![Some(e.emit("LeakyReluGrad", "LeakyReluGrad", &[g, x(0)?], attrs))]
        }
        "LogSoftmax" => {
            // g - exp(y) * sum(g, -1, keep_dims).
            let s = sum_last_keep(e, g, &ta);
            let p = e.emit("Exp", "Exp", &[y], ta.clone());
            let m = e.emit("Mul", "mul", &[s, p], ta.clone());
            vec![Some(e.emit("Sub", "sub", &[g, m], ta))]
        }
        "SquaredDifference" => {
            let (a, b) = (x(0)?, x(1)?);
            let mul = e.fresh_name("scalar");
            let two = e.scalar_const_named(&mul, t, 2.0);
            let d = e.emit("Sub", "sub", &[a, b], ta.clone());
            let twice = e.emit("Mul", "Mul", &[two, g], ta.clone());
            let ga = e.emit("Mul", "mul", &[twice, d], ta.clone());
            let ga = reduce_like(e, ga, a, &ta);
            let gb = e.emit("Neg", "Neg", &[ga], ta.clone());
            let gb = reduce_like(e, gb, b, &ta);
            vec![Some(ga), Some(gb)]
        }
        "SparseSoftmaxCrossEntropyWithLogits" => {
            // The loss gradient times the kernel's own backprop (output 1); labels get none.
            let backprop = Tensor { node: op, output: 1 };
            let gx = expand_last(e, g);
            vec![Some(e.emit("Mul", "mul", &[gx, backprop], ta)), None]
        }
        "SoftmaxCrossEntropyWithLogits" => {
            let backprop = Tensor { node: op, output: 1 };
            let gx = expand_last(e, g);
            let dlogits = e.emit("Mul", "mul", &[gx, backprop], ta.clone());
            let ls = e.emit("LogSoftmax", "LogSoftmax", &[x(0)?], ta.clone());
            let neg = e.emit("Neg", "Neg", &[ls], ta.clone());
            let dlabels = e.emit("Mul", "mul", &[gx, neg], ta);
            vec![Some(dlogits), Some(dlabels)]
        }
        "ExpandDims" | "Squeeze" => {
            let s = e.shape("Shape", x(0)?);
            let mut v = vec![Some(e.emit("Reshape", "Reshape", &[g, s], ta))];
            v.resize(inputs.len(), None);
            v
        }
        "ConcatV2" => {
            // Each value's slice of g, where ConcatOffset says it starts.
            let n = inputs.len().checked_sub(1).ok_or_else(|| Some("ConcatV2 needs an axis".to_string()))?;
            let axis = x(n)?;
            let shapes: Vec<Tensor> = inputs[..n].iter().map(|&v| e.shape("Shape", v)).collect();
            let mut offset_inputs = vec![axis];
            offset_inputs.extend(&shapes);
            let offsets = e.emit("ConcatOffset", "ConcatOffset", &offset_inputs, [("N", AttrValue::Int(n as i64))]);
            let mut out: Vec<Option<Tensor>> = (0..n)
                .map(|i| {
                    let begin = Tensor { node: offsets.node, output: i as u32 };
                    let idx = [("Index", AttrValue::Type(DType::I32))].into_iter().chain(ta.clone());
                    Some(e.emit("Slice", "Slice", &[g, begin, shapes[i]], idx))
                })
                .collect();
            out.push(None);
            out
        }
        "Slice" => {
            // Pad g back: before = begin, after = Shape(x) - begin - Shape(y).
            let (a, begin) = (x(0)?, x(1)?);
            let sx = e.shape("Shape", a);
            let sy = e.shape("Shape_1", y);
            let i32_t = e.t_attr(Some(DType::I32));
            let rest = e.emit("Sub", "sub", &[sx, begin], i32_t.clone());
            let after = e.emit("Sub", "sub_1", &[rest, sy], i32_t.clone());
            let pack_attrs = [("N", AttrValue::Int(2)), ("axis", AttrValue::Int(1))].into_iter().chain(i32_t);
            let paddings = e.emit("Pack", "stack", &[begin, after], pack_attrs);
            vec![Some(e.emit("Pad", "Pad", &[g, paddings], ta)), None, None]
        }
        "StridedSlice" => {
            let (a, begin, end, strides) = (x(0)?, x(1)?, x(2)?, x(3)?);
            let s = e.shape("Shape", a);
            let mut attrs =
                copied(e, &["begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"]);
            attrs.push(("Index", AttrValue::Type(DType::I32)));
            vec![
                Some(e.emit("StridedSliceGrad", "StridedSliceGrad", &[s, begin, end, strides, g], attrs)),
                None,
                None,
                None,
            ]
        }
        "Pad" | "PadV2" => {
            // Slice(g, paddings[:, 0], Shape(x)).
            let (a, paddings) = (x(0)?, x(1)?);
            let i32_t = e.t_attr(Some(DType::I32));
            let rank = e.emit("Rank", "Rank", &[a], None);
            let pack = e.fresh_name("stack");
            let one = e.int_const_named(format!("{pack}/values_1"), &[1], true);
            let size = e.emit_named(
                pack,
                "Pack",
                &[rank, one],
                [("N", AttrValue::Int(2)), ("axis", AttrValue::Int(0))].into_iter().chain(i32_t.clone()),
            );
            let slice = e.fresh_name("Slice");
            let origin = e.int_const_named(format!("{slice}/begin"), &[0, 0], false);
            let idx = [("Index", AttrValue::Type(DType::I32))];
            let before =
                e.emit_named(slice, "Slice", &[paddings, origin, size], idx.clone().into_iter().chain(i32_t.clone()));
            let flat = e.fresh_name("Reshape");
            let minus_one = e.int_const_named(format!("{flat}/shape"), &[-1], false);
            let before = e.emit_named(flat, "Reshape", &[before, minus_one], i32_t);
            let sa = e.shape("Shape", a);
            let mut v = vec![Some(e.emit("Slice", "Slice_1", &[g, before, sa], idx.into_iter().chain(ta))), None];
            v.resize(inputs.len(), None);
            v
        }
        "Cumsum" => {
            let attrs = e.graph.node(op).attrs.clone();
            let exclusive = attrs.get_bool("exclusive").unwrap_or(false);
            let reverse = attrs.get_bool("reverse").unwrap_or(false);
            let flags = [("exclusive", AttrValue::Bool(exclusive)), ("reverse", AttrValue::Bool(!reverse))];
            vec![Some(e.emit("Cumsum", "Cumsum", &[g, x(1)?], flags.into_iter().chain(ta))), None]
        }
        "GatherV2" => {
            let (params, indices, axis) = (x(0)?, x(1)?, x(2)?);
            if !is_zero_const(e, axis) {
                return Err(Some("only a constant axis 0 is supported".into()));
            }
            vec![Some(gather_grad(e, params, indices, g, &ta)), None, None]
        }
        "MaxPool" | "MaxPool3D" => {
            let grad = if op_type == "MaxPool" { "MaxPoolGrad" } else { "MaxPool3DGrad" };
            let mut attrs = copied(e, &["ksize", "strides", "padding", "data_format"]);
            if op_type == "MaxPool3D" {
                attrs.extend(e.dtype_of(x(0)?).map(|d| ("TInput", AttrValue::Type(d))));
            }
            vec![Some(e.emit(grad, grad, &[x(0)?, y, g], attrs))]
        }
        "AvgPool" | "AvgPool3D" => {
            let grad = if op_type == "AvgPool" { "AvgPoolGrad" } else { "AvgPool3DGrad" };
            let s = e.shape("Shape", x(0)?);
            let attrs = copied(e, &["ksize", "strides", "padding", "data_format"]);
            vec![Some(e.emit(grad, grad, &[s, g], attrs))]
        }
        "Conv2D" | "DepthwiseConv2dNative" | "Conv3D" => {
            let (a, f) = (x(0)?, x(1)?);
            let (bi, bf): (&'static str, &'static str) = match op_type {
                "Conv2D" => ("Conv2DBackpropInput", "Conv2DBackpropFilter"),
                "Conv3D" => ("Conv3DBackpropInputV2", "Conv3DBackpropFilterV2"),
                _ => ("DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"),
            };
            let keys = ["strides", "padding", "dilations", "explicit_paddings", "data_format"];
            let sa = e.shape("Shape", a);
            let sf = e.shape("Shape_1", f);
            let attrs = copied(e, &keys);
            let ga = e.emit(bi, bi, &[sa, f, g], attrs.clone());
            let gf = e.emit(bf, bf, &[a, sf, g], attrs);
            vec![Some(ga), Some(gf)]
        }
        // The 2-D backprops are linear in their tensor operands: each one's gradient is the forward
        // convolution or the other backprop, with the same geometry (and groups, read from shapes).
        "Conv2DBackpropInput" | "DepthwiseConv2dNativeBackpropInput" => {
            let (forward, _, bf) = conv2d_ops(op_type);
            let (f, dy) = (x(1)?, x(2)?);
            let attrs = copied(e, &CONV2D_KEYS);
            let sf = e.shape("Shape", f);
            let gf = e.emit(bf, bf, &[g, sf, dy], attrs.clone());
            let gdy = e.emit(forward, forward, &[g, f], attrs);
            vec![None, Some(gf), Some(gdy)]
        }
        "Conv2DBackpropFilter" | "DepthwiseConv2dNativeBackpropFilter" => {
            let (forward, bi, _) = conv2d_ops(op_type);
            let (a, dy) = (x(0)?, x(2)?);
            let attrs = copied(e, &CONV2D_KEYS);
            let sa = e.shape("Shape", a);
            let ga = e.emit(bi, bi, &[sa, g, dy], attrs.clone());
            let gdy = e.emit(forward, forward, &[a, g], attrs);
            vec![Some(ga), None, Some(gdy)]
        }
        // The volumetric backprops are linear in their tensor operands: each one's gradient is the
        // forward convolution or the other backprop, with the same geometry.
        "Conv3DBackpropInputV2" => {
            let (f, dy) = (x(1)?, x(2)?);
            let attrs = copied(e, &["strides", "padding", "dilations", "data_format"]);
            let sf = e.shape("Shape", f);
            let gf = e.emit("Conv3DBackpropFilterV2", "Conv3DBackpropFilterV2", &[g, sf, dy], attrs.clone());
            let gdy = e.emit("Conv3D", "Conv3D", &[g, f], attrs);
            vec![None, Some(gf), Some(gdy)]
        }
        "Conv3DBackpropFilterV2" => {
            let (a, dy) = (x(0)?, x(2)?);
            let attrs = copied(e, &["strides", "padding", "dilations", "data_format"]);
            let sa = e.shape("Shape", a);
            let ga = e.emit("Conv3DBackpropInputV2", "Conv3DBackpropInputV2", &[sa, g, dy], attrs.clone());
            let gdy = e.emit("Conv3D", "Conv3D", &[a, g], attrs);
            vec![Some(ga), None, Some(gdy)]
        }
        "AvgPool3DGrad" => {
            let attrs = copied(e, &["ksize", "strides", "padding", "data_format"]);
            vec![None, Some(e.emit("AvgPool3D", "AvgPool3D", &[g], attrs))]
        }
        "FusedBatchNormV3" => {
            let (a, scale) = (x(0)?, x(1)?);
            let reserve = |k: u32| Tensor { node: op, output: k };
            let mut attrs = copied(e, &["epsilon", "data_format", "is_training"]);
            if let Some(d) = e.dtype_of(scale) {
                attrs.push(("U", AttrValue::Type(d)));
            }
            let grad = e.emit(
                "FusedBatchNormGradV3",
                "FusedBatchNormGradV3",
                &[g, a, scale, reserve(3), reserve(4), reserve(5)],
                attrs,
            );
            let out = |k: u32| Some(Tensor { node: grad.node, output: k });
            vec![out(0), out(1), out(2), None, None]
        }
        other if super::image_functions::handles(other) => {
            return super::image_functions::gradient(e, op, other, inputs, g)
        }
        _ => return super::math_functions::gradient(e, op, op_type, inputs, g),
    })
}

/// The geometry attributes a 2-D convolution passes on to its gradients.
const CONV2D_KEYS: [&str; 5] = ["strides", "padding", "dilations", "explicit_paddings", "data_format"];

/// `(forward, input backprop, filter backprop)` of a regular or depthwise 2-D convolution op.
fn conv2d_ops(op_type: &str) -> (&'static str, &'static str, &'static str) {
    if op_type.starts_with("Depthwise") {
        ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter")
    } else {
        ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")
    }
}

/// `Sum(g, -1, keep_dims = true)`.
pub(super) fn sum_last_keep(e: &mut Emitter<'_>, g: Tensor, ta: &TAttr) -> Tensor {
    let name = e.fresh_name("Sum");
    let axes = e.int_const_named(format!("{name}/reduction_indices"), &[-1], true);
    let attrs = [("keep_dims", AttrValue::Bool(true))].into_iter().chain(ta.clone());
    e.emit_named(name, "Sum", &[g, axes], attrs)
}

/// `ExpandDims(g, -1)`.
pub(super) fn expand_last(e: &mut Emitter<'_>, g: Tensor) -> Tensor {
    let name = e.fresh_name("ExpandDims");
    let dim = e.int_const_named(format!("{name}/dim"), &[-1], true);
    let dtype = e.dtype_of(g);
    let attrs = [("Tdim", AttrValue::Type(DType::I32))].into_iter().chain(e.t_attr(dtype));
    e.emit_named(name, "ExpandDims", &[g, dim], attrs)
}

/// Sums `g` (shaped like a broadcast result) down to the shape of `x`.
fn reduce_like(e: &mut Emitter<'_>, g: Tensor, x: Tensor, ta: &TAttr) -> Tensor {
    let sx = e.shape("Shape", x);
    let sg = e.shape("Shape_1", g);
    let args = e.emit("BroadcastGradientArgs", "BroadcastGradientArgs", &[sx, sg], e.t_attr(Some(DType::I32)));
    let attrs = [("keep_dims", AttrValue::Bool(true))].into_iter().chain(ta.clone());
    let s = e.emit("Sum", "Sum", &[g, args], attrs);
    e.emit("Reshape", "Reshape", &[s, sx], ta.clone())
}

/// True when `t` is a `Const` holding the single integer 0.
fn is_zero_const(e: &Emitter<'_>, t: Tensor) -> bool {
    let node = e.graph.node(t.node);
    &*node.op == "Const"
        && node.attrs.get("value").and_then(AttrValue::as_tensor).is_some_and(|lit| {
            matches!(lit.dtype, DType::I32 | DType::I64)
                && lit.to_f64_vec().is_some_and(|v| v.len() <= 1 && v.iter().all(|&x| x == 0.0))
        })
}

/// The dense gradient of `GatherV2(params, indices, 0)`: the rows of `g` summed into the rows
/// they were gathered from (`UnsortedSegmentSum`), as TensorFlow densifies its IndexedSlices.
fn gather_grad(e: &mut Emitter<'_>, params: Tensor, indices: Tensor, g: Tensor, ta: &TAttr) -> Tensor {
    let params_shape = e.shape("Shape", params);
    gather_grad_of_shape(e, params_shape, indices, g, ta)
}

/// [`gather_grad`] given the params' shape (an i32 vector).
pub(super) fn gather_grad_of_shape(
    e: &mut Emitter<'_>,
    params_shape: Tensor,
    indices: Tensor,
    g: Tensor,
    ta: &TAttr,
) -> Tensor {
    let i32_t = e.t_attr(Some(DType::I32));
    let size = e.emit("Size", "Size", &[indices], [("out_type", AttrValue::Type(DType::I32))]);
    let expand = e.fresh_name("ExpandDims");
    let dim = e.int_const_named(format!("{expand}/dim"), &[0], true);
    let size = e.emit_named(expand, "ExpandDims", &[size, dim], i32_t.clone());
    let slice = e.fresh_name("strided_slice");
    let begin = e.int_const_named(format!("{slice}/begin"), &[1], false);
    let size_all = e.int_const_named(format!("{slice}/size"), &[-1], false);
    let idx = [("Index", AttrValue::Type(DType::I32))].into_iter().chain(i32_t.clone());
    let rest = e.emit_named(slice, "Slice", &[params_shape, begin, size_all], idx.clone());
    let concat = e.fresh_name("concat");
    let axis = e.int_const_named(format!("{concat}/axis"), &[0], true);
    let values_shape = e.emit_named(
        concat,
        "ConcatV2",
        &[size, rest, axis],
        [("N", AttrValue::Int(2))].into_iter().chain(i32_t.clone()),
    );
    let values = e.emit("Reshape", "Reshape", &[g, values_shape], ta.clone());
    let flat = e.fresh_name("Reshape_1");
    let minus_one = e.int_const_named(format!("{flat}/shape"), &[-1], false);
    let flat_indices = e.emit_named(flat, "Reshape", &[indices, minus_one], None);
    let first = e.fresh_name("strided_slice_1");
    let zero = e.int_const_named(format!("{first}/begin"), &[0], false);
    let one = e.int_const_named(format!("{first}/size"), &[1], false);
    let rows = e.emit_named(first, "Slice", &[params_shape, zero, one], idx);
    let scalar = e.fresh_name("Reshape_2");
    let empty = e.int_const_named(format!("{scalar}/shape"), &[], false);
    let rows = e.emit_named(scalar, "Reshape", &[rows, empty], i32_t);
    e.emit("UnsortedSegmentSum", "UnsortedSegmentSum", &[values, flat_indices, rows], ta.clone())
}
