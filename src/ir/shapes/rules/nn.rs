//! Neural-network rules: matmuls, convolutions and their gradients,
//! pools, bias gradients, fused batch norms and losses. Spatial sizes
//! follow TensorFlow's `SAME`/`VALID`/`EXPLICIT` padding arithmetic, in
//! the node's `data_format` (`NHWC` unless it says `NCHW`).

use super::{dim, Args, OutType};

/// `MatMul(a, b)` with `transpose_a`/`transpose_b`.
pub(super) fn matmul(a: &Args) -> Result<Vec<OutType>, String> {
    let (x, y) = (a.x(0)?, a.x(1)?);
    let [r0, c0] = *x.shape else { return Err(format!("operand 0 {:?} is not a matrix", x.shape)) };
    let [r1, c1] = *y.shape else { return Err(format!("operand 1 {:?} is not a matrix", y.shape)) };
    let (m, k) = if a.bool_attr("transpose_a", false) { (c0, r0) } else { (r0, c0) };
    let (k2, n) = if a.bool_attr("transpose_b", false) { (c1, r1) } else { (r1, c1) };
    if k != k2 {
        return Err(format!("inner dimensions differ: {:?} by {:?}", x.shape, y.shape));
    }
    Ok(vec![OutType::new(x.dtype, vec![m, n])])
}

/// `BatchMatMul*(x, y)` with `adj_x`/`adj_y`; batch dims broadcast.
pub(super) fn batch_matmul(a: &Args) -> Result<Vec<OutType>, String> {
    let (x, y) = (a.x(0)?, a.x(1)?);
    if x.shape.len() < 2 || y.shape.len() < 2 {
        return Err(format!("operands {:?} and {:?} are not batches of matrices", x.shape, y.shape));
    }
    let (xb, xm) = x.shape.split_at(x.shape.len() - 2);
    let (yb, ym) = y.shape.split_at(y.shape.len() - 2);
    let (m, k) = if a.bool_attr("adj_x", false) { (xm[1], xm[0]) } else { (xm[0], xm[1]) };
    let (k2, n) = if a.bool_attr("adj_y", false) { (ym[1], ym[0]) } else { (ym[0], ym[1]) };
    if k != k2 {
        return Err(format!("inner dimensions differ: {:?} by {:?}", x.shape, y.shape));
    }
    let mut shape = super::elementwise::broadcast_shapes(xb, yb)?;
    shape.extend([m, n]);
    Ok(vec![OutType::new(a.type_attr("Tout", x.dtype), shape)])
}

/// Where the channels are: the last dim, or dim 1 in `NCHW`.
fn channel_dim(a: &Args, rank: usize) -> usize {
    if a.str_attr("data_format", "NHWC").starts_with("NC") {
        1
    } else {
        rank.saturating_sub(1)
    }
}

/// `BiasAddGrad(dy)`: one value per channel.
pub(super) fn bias_add_grad(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let c = *x.shape.get(channel_dim(a, x.shape.len())).ok_or("the operand has no channels")?;
    Ok(vec![OutType::new(x.dtype, vec![c])])
}

/// `L2Loss(x)`: a scalar.
pub(super) fn l2_loss(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(a.x(0)?.dtype, Vec::new())])
}

/// `(Sparse)SoftmaxCrossEntropyWithLogits(features, labels)`: the loss per
/// row and the backprop of the features' shape.
pub(super) fn softmax_cross_entropy(a: &Args) -> Result<Vec<OutType>, String> {
    let f = a.x(0)?;
    let shape = if a.op.starts_with("Sparse") {
        f.shape.to_vec()
    } else {
        super::elementwise::broadcast_shapes(f.shape, a.x(1)?.shape)?
    };
    let [b, _] = *shape else { return Err(format!("the logits {:?} are not a matrix", f.shape)) };
    Ok(vec![OutType::new(f.dtype, vec![b]), OutType::new(f.dtype, shape)])
}

/// `FusedBatchNorm*(x, scale, offset, mean, variance)`: y, then the batch
/// mean and variance and the reserves (per channel; V3's third reserve is
/// empty), in x's dtype as the simulator's kernel gives them.
pub(super) fn batch_norm(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let c = *x.shape.get(channel_dim(a, x.shape.len())).ok_or("the input has no channels")?;
    let mut out = vec![a.same(0)?];
    out.extend(std::iter::repeat_n(OutType::new(x.dtype, vec![c]), 4));
    if a.op == "FusedBatchNormV3" {
        out.push(OutType::new(x.dtype, vec![0]));
    }
    Ok(out)
}

/// `FusedBatchNormGrad*(dy, x, scale, reserve...)`: dx, the scale and
/// offset gradients per channel, and two empty reserves; all but dx in the
/// scale's type (`U`: f32 for a 16-bit `x`).
pub(super) fn batch_norm_grad(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(1)?;
    let c = *x.shape.get(channel_dim(a, x.shape.len())).ok_or("the input has no channels")?;
    let dt = a.x(0)?.dtype;
    let u = a.x(2)?.dtype;
    let per_channel = OutType::new(u, vec![c]);
    let empty = OutType::new(u, vec![0]);
    Ok(vec![OutType::new(dt, x.shape.to_vec()), per_channel.clone(), per_channel, empty.clone(), empty])
}

/// The spatial dims of a 4-D `data_format`: (height, width) indices.
fn spatial(a: &Args) -> (usize, usize) {
    if a.str_attr("data_format", "NHWC").starts_with("NC") {
        (2, 3)
    } else {
        (1, 2)
    }
}

/// One spatial output size.
fn out_size(
    a: &Args,
    input: usize,
    window: usize,
    stride: i64,
    dilation: i64,
    pads: (i64, i64),
) -> Result<usize, String> {
    let stride = dim(stride, "stride")?.max(1);
    let effective = (window.max(1) - 1) * dim(dilation, "dilation")?.max(1) + 1;
    match a.str_attr("padding", "VALID") {
        "SAME" => Ok(input.div_ceil(stride)),
        "VALID" => Ok(input.saturating_sub(effective) / stride + usize::from(input >= effective)),
        "EXPLICIT" => {
            let padded = input + dim(pads.0, "padding")? + dim(pads.1, "padding")?;
            Ok(padded.saturating_sub(effective) / stride + usize::from(padded >= effective))
        }
        other => Err(format!("unknown padding {other:?}")),
    }
}

/// A 4-D list attribute in `data_format` order (`default` when absent).
fn list4(a: &Args, key: &str, default: i64) -> Result<Vec<i64>, String> {
    let v = a.int_list(key);
    match v.len() {
        0 => Ok(vec![default; 4]),
        4 => Ok(v),
        n => Err(format!("`{key}` has {n} values, not 4")),
    }
}

/// The output shape of a 4-D window op over `input` with (kh, kw), `channels` out.
fn windowed(a: &Args, input: &[usize], window: (usize, usize), channels: usize) -> Result<Vec<usize>, String> {
    if input.len() != 4 {
        return Err(format!("the input {input:?} is not 4-D"));
    }
    let (h, w) = spatial(a);
    let c = channel_dim(a, 4);
    let strides = list4(a, "strides", 1)?;
    let dilations = list4(a, "dilations", 1)?;
    let explicit = a.int_list("explicit_paddings");
    let pads = |d: usize| (explicit.get(2 * d).copied().unwrap_or(0), explicit.get(2 * d + 1).copied().unwrap_or(0));
    let mut shape = input.to_vec();
    shape[h] = out_size(a, input[h], window.0, strides[h], dilations[h], pads(h))?;
    shape[w] = out_size(a, input[w], window.1, strides[w], dilations[w], pads(w))?;
    shape[c] = channels;
    Ok(shape)
}

/// `Conv2D(input, filter)`: filter `[kh, kw, in, out]`.
pub(super) fn conv2d(a: &Args) -> Result<Vec<OutType>, String> {
    let (x, f) = (a.x(0)?, a.x(1)?);
    let [kh, kw, _, out] = *f.shape else { return Err(format!("the filter {:?} is not 4-D", f.shape)) };
    Ok(vec![OutType::new(x.dtype, windowed(a, x.shape, (kh, kw), out)?)])
}

/// `DepthwiseConv2dNative(input, filter)`: filter `[kh, kw, in, multiplier]`.
pub(super) fn depthwise_conv2d(a: &Args) -> Result<Vec<OutType>, String> {
    let (x, f) = (a.x(0)?, a.x(1)?);
    let [kh, kw, cin, m] = *f.shape else { return Err(format!("the filter {:?} is not 4-D", f.shape)) };
    Ok(vec![OutType::new(x.dtype, windowed(a, x.shape, (kh, kw), cin * m)?)])
}

/// The constant shape in operand `i`.
fn shape_operand(a: &Args, i: usize, what: &str) -> Result<Vec<usize>, String> {
    a.ints(i, what)?.iter().map(|&d| dim(d, "dimension")).collect()
}

/// `*BackpropInput(input_sizes, filter, dy)`: the input's shape, in dy's dtype.
pub(super) fn conv_backprop_input(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(a.x(2)?.dtype, shape_operand(a, 0, "input_sizes")?)])
}

/// `*BackpropFilter(input, filter_sizes, dy)`: the filter's shape.
pub(super) fn conv_backprop_filter(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(a.x(0)?.dtype, shape_operand(a, 1, "filter_sizes")?)])
}

/// `MaxPool`/`AvgPool(x)` with `ksize`, `strides` and `padding`.
pub(super) fn pool(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let k = list4(a, "ksize", 1)?;
    let (h, w) = spatial(a);
    let c = *x.shape.get(channel_dim(a, 4)).ok_or("the input is not 4-D")?;
    let window = (dim(k[h], "window")?, dim(k[w], "window")?);
    Ok(vec![OutType::new(x.dtype, windowed(a, x.shape, window, c)?)])
}

/// `AvgPoolGrad(orig_input_shape, grad)`.
pub(super) fn avg_pool_grad(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(a.x(1)?.dtype, shape_operand(a, 0, "orig_input_shape")?)])
}

/// The output shape of a 5-D (NDHWC) window op over `input` with window
/// (kd, kh, kw), `channels` out; `dilated` reads `dilations` (pools have none).
fn windowed3(
    a: &Args,
    input: &[usize],
    window: [usize; 3],
    channels: usize,
    dilated: bool,
) -> Result<Vec<usize>, String> {
    if input.len() != 5 {
        return Err(format!("the input {input:?} is not 5-D"));
    }
    if a.str_attr("data_format", "NDHWC") != "NDHWC" {
        return Err("only data_format NDHWC is supported".into());
    }
    let five = |key: &str| -> Result<Vec<i64>, String> {
        match a.int_list(key) {
            v if v.is_empty() => Ok(vec![1; 5]),
            v if v.len() == 5 => Ok(v),
            v => Err(format!("`{key}` has {} values, not 5", v.len())),
        }
    };
    let strides = five("strides")?;
    let dilations = if dilated { five("dilations")? } else { vec![1; 5] };
    let mut shape = input.to_vec();
    for d in 0..3 {
        shape[d + 1] = out_size(a, input[d + 1], window[d], strides[d + 1], dilations[d + 1], (0, 0))?;
    }
    shape[4] = channels;
    Ok(shape)
}

/// `Conv3D(input, filter)`: filter `[kd, kh, kw, in, out]`.
pub(super) fn conv3d(a: &Args) -> Result<Vec<OutType>, String> {
    let (x, f) = (a.x(0)?, a.x(1)?);
    let [kd, kh, kw, _, out] = *f.shape else { return Err(format!("the filter {:?} is not 5-D", f.shape)) };
    Ok(vec![OutType::new(x.dtype, windowed3(a, x.shape, [kd, kh, kw], out, true)?)])
}

/// `MaxPool3D`/`AvgPool3D(x)` with `ksize`, `strides` and `padding`.
pub(super) fn pool3d(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let k = a.int_list("ksize");
    let [1, kd, kh, kw, 1] = *k else { return Err(format!("ksize {k:?} is not [1, d, h, w, 1]")) };
    let window = [dim(kd, "window")?, dim(kh, "window")?, dim(kw, "window")?];
    let c = *x.shape.get(4).ok_or("the input is not 5-D")?;
    Ok(vec![OutType::new(x.dtype, windowed3(a, x.shape, window, c, false)?)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k, x};
    use crate::ir::{AttrValue, DType::*};

    fn list(v: &[i64]) -> AttrValue {
        AttrValue::List(v.iter().map(|&i| AttrValue::Int(i)).collect())
    }

    #[test]
    fn linear_algebra_rules() {
        check("MatMul", &[], &[x(F32, &[2, 3]), x(F32, &[3, 4])], Ok(&[(F32, &[2, 4])]));
        let t = AttrValue::Bool(true);
        check("MatMul", &[("transpose_a", t.clone())], &[x(F32, &[3, 2]), x(F32, &[3, 4])], Ok(&[(F32, &[2, 4])]));
        check("MatMul", &[], &[x(F32, &[2, 3]), x(F32, &[2, 4])], Err("inner dimensions"));
        check(
            "BatchMatMulV2",
            &[("adj_y", t)],
            &[x(F32, &[5, 1, 2, 3]), x(F32, &[4, 6, 3])],
            Ok(&[(F32, &[5, 4, 2, 6])]),
        );
    }

    #[test]
    fn convolution_and_pool_rules() {
        let s2 = ("strides", list(&[1, 2, 2, 1]));
        let same = ("padding", AttrValue::str("SAME"));
        let valid = ("padding", AttrValue::str("VALID"));
        check(
            "Conv2D",
            &[s2.clone(), valid.clone()],
            &[x(F32, &[1, 38, 38, 3]), x(F32, &[7, 7, 3, 64])],
            Ok(&[(F32, &[1, 16, 16, 64])]),
        );
        check(
            "Conv2D",
            &[s2.clone(), same.clone()],
            &[x(F32, &[2, 7, 7, 8]), x(F32, &[3, 3, 8, 4])],
            Ok(&[(F32, &[2, 4, 4, 4])]),
        );
        let nchw = ("data_format", AttrValue::str("NCHW"));
        check(
            "Conv2D",
            &[nchw, same.clone(), ("strides", list(&[1, 1, 1, 1]))],
            &[x(F32, &[2, 8, 5, 5]), x(F32, &[3, 3, 8, 4])],
            Ok(&[(F32, &[2, 4, 5, 5])]),
        );
        let explicit = ("padding", AttrValue::str("EXPLICIT"));
        let pads = ("explicit_paddings", list(&[0, 0, 1, 1, 2, 2, 0, 0]));
        check(
            "Conv2D",
            &[explicit, pads],
            &[x(F32, &[1, 4, 4, 1]), x(F32, &[3, 3, 1, 2])],
            Ok(&[(F32, &[1, 4, 6, 2])]),
        );
        check(
            "DepthwiseConv2dNative",
            std::slice::from_ref(&same),
            &[x(F32, &[1, 5, 5, 3]), x(F32, &[3, 3, 3, 2])],
            Ok(&[(F32, &[1, 5, 5, 6])]),
        );
        check(
            "Conv2DBackpropInput",
            &[],
            &[k(&[1, 8, 8, 3]), x(F32, &[3, 3, 3, 4]), x(F32, &[1, 4, 4, 4])],
            Ok(&[(F32, &[1, 8, 8, 3])]),
        );
        check(
            "Conv2DBackpropFilter",
            &[],
            &[x(F32, &[1, 8, 8, 3]), k(&[3, 3, 3, 4]), x(F32, &[1, 4, 4, 4])],
            Ok(&[(F32, &[3, 3, 3, 4])]),
        );
        let k3 = ("ksize", list(&[1, 3, 3, 1]));
        check("MaxPool", &[k3.clone(), s2.clone(), valid], &[x(F32, &[1, 18, 18, 64])], Ok(&[(F32, &[1, 8, 8, 64])]));
        check("AvgPool", &[k3, s2, same], &[x(F32, &[1, 5, 5, 2])], Ok(&[(F32, &[1, 3, 3, 2])]));
        check("AvgPoolGrad", &[], &[k(&[1, 5, 5, 2]), x(F32, &[1, 3, 3, 2])], Ok(&[(F32, &[1, 5, 5, 2])]));
        check("Conv2D", &[], &[x(F32, &[1, 5, 5]), x(F32, &[3, 3, 3, 2])], Err("not 4-D"));
        let s3 = ("strides", list(&[1, 2, 1, 2, 1]));
        check(
            "Conv3D",
            &[s3.clone(), ("padding", AttrValue::str("SAME"))],
            &[x(F32, &[2, 5, 4, 4, 3]), x(F32, &[3, 2, 2, 3, 6])],
            Ok(&[(F32, &[2, 3, 4, 2, 6])]),
        );
        let k3d = ("ksize", list(&[1, 2, 2, 2, 1]));
        check(
            "MaxPool3D",
            &[k3d, s3, ("padding", AttrValue::str("VALID"))],
            &[x(F32, &[1, 5, 4, 5, 2])],
            Ok(&[(F32, &[1, 2, 3, 2, 2])]),
        );
        check("Conv3D", &[], &[x(F32, &[1, 5, 5, 5]), x(F32, &[3, 3, 3, 5, 2])], Err("not 5-D"));
    }

    #[test]
    fn normalisation_and_loss_rules() {
        let five = [x(F32, &[2, 4, 4, 3]), x(F32, &[3]), x(F32, &[3]), x(F32, &[3]), x(F32, &[3])];
        check(
            "FusedBatchNormV3",
            &[],
            &five,
            Ok(&[(F32, &[2, 4, 4, 3]), (F32, &[3]), (F32, &[3]), (F32, &[3]), (F32, &[3]), (F32, &[0])]),
        );
        let grad =
            [x(F32, &[2, 4, 4, 3]), x(F32, &[2, 4, 4, 3]), x(F32, &[3]), x(F32, &[3]), x(F32, &[3]), x(F32, &[0])];
        check(
            "FusedBatchNormGradV3",
            &[],
            &grad,
            Ok(&[(F32, &[2, 4, 4, 3]), (F32, &[3]), (F32, &[3]), (F32, &[0]), (F32, &[0])]),
        );
        check("BiasAddGrad", &[], &[x(F32, &[2, 4, 4, 3])], Ok(&[(F32, &[3])]));
        check(
            "SoftmaxCrossEntropyWithLogits",
            &[],
            &[x(F32, &[2, 10]), x(F32, &[2, 10])],
            Ok(&[(F32, &[2]), (F32, &[2, 10])]),
        );
        check(
            "SparseSoftmaxCrossEntropyWithLogits",
            &[],
            &[x(F32, &[2, 10]), x(I64, &[2])],
            Ok(&[(F32, &[2]), (F32, &[2, 10])]),
        );
        check("L2Loss", &[], &[x(F32, &[2, 10])], Ok(&[(F32, &[])]));
    }
}
