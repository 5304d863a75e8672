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
    "RGBToHSV",
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
            let size =
                e.emit("Size", "Size", &[a], [("out_type", AttrValue::Type(DType::I32))].into_iter().chain(ta.clone()));
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
            let sums = e.emit(
                "UnsortedSegmentSum",
                "UnsortedSegmentSum",
                &[gflat, iflat, count],
                seg_attrs.into_iter().chain(ta.clone()),
            );
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
        "RGBToHSV" => vec![Some(rgb_to_hsv_grad(e, op, x(0)?, g))],
        other => return Err(Some(format!("{other} is not an image op"))),
    })
}

/// The three channels of `t` (last dimension 3), by `Unpack`.
fn channels(e: &mut Emitter<'_>, t: Tensor, base: &str) -> [Tensor; 3] {
    let attrs = [("num", AttrValue::Int(3)), ("axis", AttrValue::Int(-1)), ("T", AttrValue::Type(DType::F32))];
    let u = e.emit("Unpack", base, &[t], attrs);
    [0, 1, 2].map(|k| Tensor { node: u.node, output: k })
}

/// TensorFlow's gradient of `RGBToHSV` (`image_grad.py`), in f32: the
/// derivatives of value, saturation and hue with respect to each channel,
/// piece by piece, with the maximum and minimum channel chosen by masks
/// (ties go to red, then green) and reciprocals that give 0 for 0.
fn rgb_to_hsv_grad(e: &mut Emitter<'_>, op: NodeId, image: Tensor, g: Tensor) -> Tensor {
    let f = e.t_attr(Some(DType::F32));
    let [r, gr, b] = channels(e, image, "unstack");
    let [_, sat, val] = channels(e, Tensor::of(op), "unstack_1");
    let [dh, ds, dv] = channels(e, g, "unstack_2");
    let to_f32 = [("SrcT", AttrValue::Type(DType::Bool)), ("DstT", AttrValue::Type(DType::F32))];
    let mask = |e: &mut Emitter<'_>, parts: &[(&'static str, Tensor, Tensor)]| {
        let mut all: Option<Tensor> = None;
        for &(cmp, a, c) in parts {
            let t = e.emit(cmp, cmp, &[a, c], f.clone());
            all = Some(match all {
                None => t,
                Some(prev) => e.emit("LogicalAnd", "LogicalAnd", &[prev, t], None),
            });
        }
        e.emit("Cast", "Cast", &[all.expect("a comparison")], to_f32.clone())
    };
    let (zero_name, one_name) = (e.fresh_name("zero"), e.fresh_name("one"));
    let zero = e.scalar_const_named(&zero_name, Some(DType::F32), 0.0);
    let one = e.scalar_const_named(&one_name, Some(DType::F32), 1.0);
    let k = |e: &mut Emitter<'_>, v: f64| {
        let name = e.fresh_name("Const");
        e.scalar_const_named(&name, Some(DType::F32), v)
    };
    let recip = |e: &mut Emitter<'_>, t: Tensor| e.emit("DivNoNan", "DivNoNan", &[one, t], f.clone());
    let square = |e: &mut Emitter<'_>, t: Tensor| e.emit("Square", "Square", &[t], f.clone());
    let positive = |e: &mut Emitter<'_>, t: Tensor| mask(e, &[("Greater", t, zero)]);
    let product = |e: &mut Emitter<'_>, items: &[Tensor]| {
        items[1..].iter().fold(items[0], |acc, &t| e.emit("Mul", "mul", &[acc, t], f.clone()))
    };
    let sum = |e: &mut Emitter<'_>, items: &[Tensor]| {
        items[1..].iter().fold(items[0], |acc, &t| e.emit("AddV2", "add", &[acc, t], f.clone()))
    };
    let red_big = mask(e, &[("GreaterEqual", r, b), ("GreaterEqual", r, gr)]);
    let green_big = mask(e, &[("Greater", gr, r), ("GreaterEqual", gr, b)]);
    let blue_big = mask(e, &[("Greater", b, r), ("Greater", b, gr)]);
    let red_small = mask(e, &[("Less", r, b), ("Less", r, gr)]);
    let green_small = mask(e, &[("LessEqual", gr, r), ("Less", gr, b)]);
    let blue_small = mask(e, &[("LessEqual", b, r), ("LessEqual", b, gr)]);
    let minus = k(e, -1.0);
    // Saturation: as the maximum, MIN / MAX²; as the minimum, -1 / MAX.
    let ds_of = |e: &mut Emitter<'_>, c: Tensor, big: Tensor, small: Tensor, others: [(Tensor, Tensor, Tensor); 2]| {
        let pos = positive(e, c);
        let mins: Vec<Tensor> = others.iter().map(|&(o, _, o_small)| product(e, &[o_small, o])).collect();
        let mins = sum(e, &mins);
        let sq = square(e, c);
        let inv = recip(e, sq);
        let as_max = product(e, &[big, mins, inv]);
        let maxes: Vec<Tensor> = others.iter().map(|&(o, o_big, _)| product(e, &[o_big, o])).collect();
        let maxes = sum(e, &maxes);
        let inv = recip(e, maxes);
        let as_min = product(e, &[small, minus, inv]);
        let both = sum(e, &[as_max, as_min]);
        product(e, &[pos, both])
    };
    let ds_dr = ds_of(e, r, red_big, red_small, [(gr, green_big, green_small), (b, blue_big, blue_small)]);
    let ds_dg = ds_of(e, gr, green_big, green_small, [(r, red_big, red_small), (b, blue_big, blue_small)]);
    let ds_db = ds_of(e, b, blue_big, blue_small, [(gr, green_big, green_small), (r, red_big, red_small)]);
    // Hue: five pieces per channel, in degrees, then scaled to [0, 1].
    let sat2 = square(e, sat);
    let inv_s2 = recip(e, sat2);
    let val2 = square(e, val);
    let inv_v2 = recip(e, val2);
    let sixty = k(e, 60.0);
    let diff = |e: &mut Emitter<'_>, a: Tensor, c: Tensor| e.emit("Sub", "sub", &[a, c], f.clone());
    let inv_sq_diff = |e: &mut Emitter<'_>, a: Tensor, c: Tensor| {
        let d = e.emit("Sub", "sub", &[a, c], f.clone());
        let sq = square(e, d);
        recip(e, sq)
    };
    let inv_diff = |e: &mut Emitter<'_>, a: Tensor, c: Tensor| {
        let d = e.emit("Sub", "sub", &[a, c], f.clone());
        recip(e, d)
    };
    let scale = k(e, 1.0 / 360.0);
    let hue = |e: &mut Emitter<'_>, parts: Vec<Vec<Tensor>>| {
        let terms: Vec<Tensor> = parts
            .iter()
            .map(|p| {
                let t = product(e, p);
                product(e, &[sixty, t])
            })
            .collect();
        let total = sum(e, &terms);
        product(e, &[total, scale])
    };
    let (pr, pg, pb) = (positive(e, r), positive(e, gr), positive(e, b));
    let gb = diff(e, gr, b);
    let bg = diff(e, b, gr);
    let br = diff(e, b, r);
    let rb = diff(e, r, b);
    let gr_r = diff(e, gr, r);
    let rg = diff(e, r, gr);
    let p = [inv_sq_diff(e, r, gr), inv_diff(e, gr, b), inv_sq_diff(e, b, r), inv_diff(e, b, gr)];
    let dh_dr = hue(
        e,
        vec![
            vec![pr, red_big, minus, gb, inv_s2, inv_v2],
            vec![pg, green_big, red_small, bg, p[0]],
            vec![pg, green_big, blue_small, minus, p[1]],
            vec![pb, blue_big, red_small, bg, p[2]],
            vec![pb, blue_big, green_small, p[3]],
        ],
    );
    let q = [inv_sq_diff(e, r, gr), inv_diff(e, r, b), inv_sq_diff(e, b, gr), inv_diff(e, b, r)];
    let dh_dg = hue(
        e,
        vec![
            vec![pg, green_big, minus, br, inv_s2, inv_v2],
            vec![pr, red_big, green_small, rb, q[0]],
            vec![pr, red_big, blue_small, q[1]],
            vec![pb, blue_big, green_small, rb, q[2]],
            vec![pb, blue_big, red_small, minus, q[3]],
        ],
    );
    let w = [inv_sq_diff(e, r, b), inv_diff(e, r, gr), inv_sq_diff(e, gr, b), inv_diff(e, gr, r)];
    let dh_db = hue(
        e,
        vec![
            vec![pb, blue_big, minus, rg, inv_s2, inv_v2],
            vec![pr, red_big, blue_small, gr_r, w[0]],
            vec![pr, red_big, green_small, minus, w[1]],
            vec![pg, green_big, blue_small, gr_r, w[2]],
            vec![pg, green_big, red_small, w[3]],
        ],
    );
    let out = [(dh_dr, ds_dr, red_big), (dh_dg, ds_dg, green_big), (dh_db, ds_db, blue_big)].map(|(h, s, v)| {
        let from_v = product(e, &[dv, v]);
        let from_s = product(e, &[ds, s]);
        let from_h = product(e, &[dh, h]);
        sum(e, &[from_v, from_s, from_h])
    });
    let attrs = [("N", AttrValue::Int(3)), ("axis", AttrValue::Int(-1)), ("T", AttrValue::Type(DType::F32))];
    e.emit("Pack", "stack", &out, attrs)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_op_list_is_sorted() {
        assert!(super::OPS.windows(2).all(|w| w[0] < w[1]));
    }
}
