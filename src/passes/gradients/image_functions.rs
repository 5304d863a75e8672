//! Gradient functions of the image and spatial ops, and the second-order
//! gradients of the convolution and pooling gradient ops, following
//! TensorFlow's `array_grad.py`, `nn_grad.py` and `image_grad.py`, and the
//! gradients of the first fused batch norms (`FusedBatchNorm`, `V2`).
//!
//! Data-movement ops have their inverse movement as gradient
//! (`DepthToSpace` ↔ `SpaceToDepth`, `SpaceToBatch*` ↔ `BatchToSpace*`,
//! `MirrorPad` ↔ `MirrorPadGrad`). A convolution backprop is linear in its
//! tensor operands: each one's gradient is the forward convolution or the
//! other backprop with the same geometry; a max-pool gradient's gradient is
//! the second-order op (and back), with zeros for the pooled operands.
//! Shape, size and block operands get none. Attributes that fix the
//! geometry are copied to the gradient op.

use super::emitter::{Attr, Emitter, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, DType, NodeId};

/// The op types whose gradient is here.
const OPS: &[&str] = &[
    "AvgPoolGrad",
    "BatchToSpace",
    "BatchToSpaceND",
    "BiasAddV1",
    "Conv2DBackpropFilter",
    "Conv2DBackpropInput",
    "DepthToSpace",
    "DepthwiseConv2dNativeBackpropFilter",
    "DepthwiseConv2dNativeBackpropInput",
    "ExtractImagePatches",
    "FusedBatchNorm",
    "FusedBatchNormV2",
    "LRN",
    "MaxPool3DGrad",
    "MaxPool3DGradGrad",
    "MaxPoolGrad",
    "MaxPoolGradGrad",
    "MaxPoolGradV2",
    "MaxPoolV2",
    "MirrorPad",
    "MirrorPadGrad",
    "ResizeBilinear",
    "ResizeNearestNeighbor",
    "SpaceToBatch",
    "SpaceToBatchND",
    "SpaceToDepth",
];

/// True when [`gradient`] handles `op_type`.
pub fn handles(op_type: &str) -> bool {
    OPS.binary_search(&op_type).is_ok()
}

/// The gradients of `op`'s data inputs given `g`, the gradient of its output 0.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let dtype = e.dtype_of(g);
    let ta = e.t_attr(dtype);
    // The op's attributes `keys`, renamed where a pair says so, with `T` of the gradient.
    let copied = |e: &Emitter<'_>, keys: &[(&'static str, &'static str)]| -> Vec<Attr> {
        let attrs = &e.graph.node(op).attrs;
        keys.iter().filter_map(|&(from, to)| attrs.get(from).cloned().map(|v| (to, v))).chain(ta.clone()).collect()
    };
    let same = |keys: &[&'static str]| keys.iter().map(|&k| (k, k)).collect::<Vec<_>>();
    let conv_keys = same(&["strides", "padding", "dilations", "explicit_paddings", "data_format", "use_cudnn_on_gpu"]);
    Ok(match op_type {
        "DepthToSpace" | "SpaceToDepth" => {
            let inverse = if op_type == "DepthToSpace" { "SpaceToDepth" } else { "DepthToSpace" };
            let attrs = copied(e, &same(&["block_size", "data_format"]));
            vec![Some(e.emit(inverse, inverse, &[g], attrs))]
        }
        "SpaceToBatchND" => {
            let attrs = copied(e, &[("Tblock_shape", "Tblock_shape"), ("Tpaddings", "Tcrops")]);
            vec![Some(e.emit("BatchToSpaceND", "BatchToSpaceND", &[g, x(1)?, x(2)?], attrs)), None, None]
        }
        "BatchToSpaceND" => {
            let attrs = copied(e, &[("Tblock_shape", "Tblock_shape"), ("Tcrops", "Tpaddings")]);
            vec![Some(e.emit("SpaceToBatchND", "SpaceToBatchND", &[g, x(1)?, x(2)?], attrs)), None, None]
        }
        "SpaceToBatch" => {
            let attrs = copied(e, &[("block_size", "block_size"), ("Tpaddings", "Tidx")]);
            vec![Some(e.emit("BatchToSpace", "BatchToSpace", &[g, x(1)?], attrs)), None]
        }
        "BatchToSpace" => {
            let attrs = copied(e, &[("block_size", "block_size"), ("Tidx", "Tpaddings")]);
            vec![Some(e.emit("SpaceToBatch", "SpaceToBatch", &[g, x(1)?], attrs)), None]
        }
        "MirrorPad" | "MirrorPadGrad" => {
            let other = if op_type == "MirrorPad" { "MirrorPadGrad" } else { "MirrorPad" };
            let attrs = copied(e, &same(&["mode", "Tpaddings"]));
            vec![Some(e.emit(other, other, &[g, x(1)?], attrs)), None]
        }
        "BiasAddV1" => {
            // BiasAddV1 is BiasAdd over the last dimension.
            vec![Some(g), Some(e.emit("BiasAddGrad", "BiasAddGrad", &[g], ta))]
        }
        "AvgPoolGrad" => {
            let attrs = copied(e, &same(&["ksize", "strides", "padding", "data_format"]));
            vec![None, Some(e.emit("AvgPool", "AvgPool", &[g], attrs))]
        }
        "Conv2DBackpropInput" | "DepthwiseConv2dNativeBackpropInput" => {
            let (forward, filter_grad) = if op_type == "Conv2DBackpropInput" {
                ("Conv2D", "Conv2DBackpropFilter")
            } else {
                ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter")
            };
            let (f, dy) = (x(1)?, x(2)?);
            let attrs = copied(e, &conv_keys);
            let sf = e.shape("Shape", f);
            let gf = e.emit(filter_grad, filter_grad, &[g, sf, dy], attrs.clone());
            let gdy = e.emit(forward, forward, &[g, f], attrs);
            vec![None, Some(gf), Some(gdy)]
        }
        "Conv2DBackpropFilter" | "DepthwiseConv2dNativeBackpropFilter" => {
            let (forward, input_grad) = if op_type == "Conv2DBackpropFilter" {
                ("Conv2D", "Conv2DBackpropInput")
            } else {
                ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput")
            };
            let (a, dy) = (x(0)?, x(2)?);
            let attrs = copied(e, &conv_keys);
            let sa = e.shape("Shape", a);
            let ga = e.emit(input_grad, input_grad, &[sa, g, dy], attrs.clone());
            let gdy = e.emit(forward, forward, &[a, g], attrs);
            vec![Some(ga), None, Some(gdy)]
        }
        "LRN" => {
            let attrs = copied(e, &same(&["depth_radius", "bias", "alpha", "beta"]));
            vec![Some(e.emit("LRNGrad", "LRNGrad", &[g, x(0)?, Tensor::of(op)], attrs))]
        }
        "ResizeBilinear" | "ResizeNearestNeighbor" => {
            // The gradient op's `T` is the image's dtype (a bilinear resize's output is f32).
            let image = x(0)?;
            let mut attrs: Vec<Attr> = copied(e, &same(&["align_corners", "half_pixel_centers"]));
            attrs.retain(|(k, _)| *k != "T");
            attrs.extend(e.dtype_of(image).map(|d| ("T", AttrValue::Type(d))));
            let grad = if op_type == "ResizeBilinear" {
                e.emit("ResizeBilinearGrad", "ResizeBilinearGrad", &[g, image], attrs)
            } else {
                let shape = e.shape("Shape", image);
                let slice = e.fresh_name("strided_slice");
                let begin = e.int_const_named(format!("{slice}/begin"), &[1], false);
                let size = e.int_const_named(format!("{slice}/size"), &[2], false);
                let idx = [("Index", AttrValue::Type(DType::I32)), ("T", AttrValue::Type(DType::I32))];
                let hw = e.emit_named(slice, "Slice", &[shape, begin, size], idx);
                e.emit("ResizeNearestNeighborGrad", "ResizeNearestNeighborGrad", &[g, hw], attrs)
            };
            vec![Some(grad), None]
        }
        "MaxPoolV2" => {
            let attrs = copied(e, &same(&["padding", "data_format"]));
            let grad = e.emit("MaxPoolGradV2", "MaxPoolGradV2", &[x(0)?, Tensor::of(op), g, x(1)?, x(2)?], attrs);
            vec![Some(grad), None, None]
        }
        "MaxPoolGrad" | "MaxPoolGradGrad" | "MaxPool3DGrad" | "MaxPool3DGradGrad" | "MaxPoolGradV2" => {
            // Linear in the incoming gradient; the pooled operands get zeros (TensorFlow's choice).
            let other: &'static str = match op_type {
                "MaxPoolGrad" => "MaxPoolGradGrad",
                "MaxPoolGradGrad" => "MaxPoolGrad",
                "MaxPool3DGrad" => "MaxPool3DGradGrad",
                "MaxPool3DGradGrad" => "MaxPool3DGrad",
                _ => "MaxPoolGradGradV2",
            };
            let (a, y) = (x(0)?, x(1)?);
            let mut attrs = copied(e, &same(&["ksize", "strides", "padding", "data_format"]));
            if other == "MaxPool3DGrad" {
                attrs.extend(e.dtype_of(a).map(|d| ("TInput", AttrValue::Type(d))));
            }
            let mut operands = vec![a, y, g];
            if op_type == "MaxPoolGradV2" {
                operands.extend([x(3)?, x(4)?]);
            }
            let grad = e.emit(other, other, &operands, attrs);
            let za = e.emit("ZerosLike", "zeros_like", &[a], ta.clone());
            let zy = e.emit("ZerosLike", "zeros_like_1", &[y], ta.clone());
            let mut out = vec![Some(za), Some(zy), Some(grad)];
            out.resize(inputs.len(), None);
            out
        }
        "ExtractImagePatches" => {
            // Each patch element's gradient summed into the pixel it copied: the patches of the
            // pixel numbers 1..=size say which (0: padding), and an UnsortedSegmentSum adds.
            let a = x(0)?;
            let i32_t = e.t_attr(Some(DType::I32));
            let sa = e.shape("Shape", a);
            let size = e.emit("Size", "Size", &[a], [("out_type", AttrValue::Type(DType::I32))].into_iter().chain(ta.clone()));
            let range = e.fresh_name("range");
            let one = e.int_const_named(format!("{range}/start"), &[1], true);
            let count = e.emit("AddV2", "add", &[size, one], i32_t.clone());
            let numbers = e.emit_named(range, "Range", &[one, count, one], [("Tidx", AttrValue::Type(DType::I32))]);
            let numbered = e.emit("Reshape", "Reshape", &[numbers, sa], i32_t.clone());
            let attrs = copied(e, &same(&["ksizes", "strides", "rates", "padding"]));
            let attrs = attrs.into_iter().filter(|(k, _)| *k != "T").chain(i32_t.clone());
            let idx = e.emit("ExtractImagePatches", "ExtractImagePatches", &[numbered], attrs);
            let flat = e.fresh_name("Reshape_1");
            let minus_one = e.int_const_named(format!("{flat}/shape"), &[-1], false);
            let gflat = e.emit_named(flat, "Reshape", &[g, minus_one], ta.clone());
            let iflat = e.emit("Reshape", "Reshape_2", &[idx, minus_one], i32_t.clone());
            let seg_attrs = [("Tindices", AttrValue::Type(DType::I32)), ("Tnumsegments", AttrValue::Type(DType::I32))];
            let sums = e.emit("UnsortedSegmentSum", "UnsortedSegmentSum", &[gflat, iflat, count], seg_attrs.into_iter().chain(ta.clone()));
            let slice = e.fresh_name("Slice");
            let begin = e.int_const_named(format!("{slice}/begin"), &[1], false);
            let idx_t = [("Index", AttrValue::Type(DType::I32))].into_iter().chain(ta.clone());
            let body = e.emit_named(slice, "Slice", &[sums, begin, minus_one], idx_t);
            vec![Some(e.emit("Reshape", "Reshape_3", &[body, sa], ta.clone()))]
        }
        "FusedBatchNorm" | "FusedBatchNormV2" => {
            // Training: the batch statistics the op saved (outputs 3 and 4); inference: the
            // population statistics it was given (inputs 3 and 4).
            let (a, scale) = (x(0)?, x(1)?);
            let training = e.graph.node(op).attrs.get_bool("is_training").unwrap_or(true);
            let (r1, r2) = if training {
                (Tensor { node: op, output: 3 }, Tensor { node: op, output: 4 })
            } else {
                (x(3)?, x(4)?)
            };
            let grad_op = if op_type == "FusedBatchNorm" { "FusedBatchNormGrad" } else { "FusedBatchNormGradV2" };
            let mut attrs = copied(e, &same(&["epsilon", "data_format", "is_training"]));
            if op_type == "FusedBatchNormV2" {
                attrs.extend(e.dtype_of(scale).map(|d| ("U", AttrValue::Type(d))));
            }
            let grad = e.emit(grad_op, grad_op, &[g, a, scale, r1, r2], attrs);
            let out = |k: u32| Some(Tensor { node: grad.node, output: k });
            vec![out(0), out(1), out(2), None, None]
        }
        other => return Err(Some(format!("{other} is not an image op"))),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_op_list_is_sorted() {
        assert!(super::OPS.windows(2).all(|w| w[0] < w[1]));
    }
}
