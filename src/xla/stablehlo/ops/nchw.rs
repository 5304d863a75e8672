//! NCHW (`data_format = "NCHW"`) convolutions, pools and batch norms, as
//! the simulator runs them: the 4-D activation operands are transposed to
//! NHWC, the per-dimension attributes (`strides`, `dilations`, `ksize`,
//! `explicit_paddings`) and shape operands permuted likewise, the NHWC
//! builder runs, and its activation results are transposed back. Filters
//! (HWIO), filter gradients and per-channel vectors are the same in both
//! layouts. XLA folds the transposes into the convolution's dimension
//! numbers and the window ops' layouts. Cost: two transposes per
//! activation operand and result.

use super::{Builder, Call};
use crate::ir::AttrValue;
use crate::xla::stablehlo::text::{Ctx, Ty, Val};

/// NCHW to NHWC, for axes and per-dimension attributes.
const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
/// NHWC to NCHW.
const TO_NCHW: [usize; 4] = [0, 3, 1, 2];

/// The operand slot of a convolution's filter, which no layout changes.
fn filter_slot(op: &str) -> Option<usize> {
    (op.starts_with("Conv2D") || op.starts_with("DepthwiseConv2dNative")).then_some(1)
}

/// The operand slot that holds an activation's shape (`input_sizes`, `orig_input_shape`).
fn sizes_slot(op: &str) -> Option<usize> {
    matches!(op, "Conv2DBackpropInput" | "DepthwiseConv2dNativeBackpropInput" | "AvgPoolGrad").then_some(0)
}

/// Whether the op's 4-D results are activations (a filter gradient is not).
fn data_results(op: &str) -> bool {
    !op.ends_with("BackpropFilter")
}

fn permuted<T: Clone>(items: &[T], perm: [usize; 4]) -> Vec<T> {
    perm.iter().map(|&i| items[i].clone()).collect()
}

fn transpose(c: &mut Ctx, v: &Val, perm: [usize; 4]) -> Val {
    let shape = permuted(&v.ty.shape, perm);
    c.op("stablehlo.transpose", &[v], &format!("permutation = {}", super::i64s(&perm)), v.ty.with_shape(shape))
}

/// Runs `build` on an op of either layout.
pub(super) fn with_layout(c: &mut Ctx, n: &Call, build: Builder) -> Result<Vec<Val>, String> {
    if n.attrs.get_str("data_format") != Some("NCHW") {
        return build(c, n);
    }
    let mut attrs = n.attrs.clone();
    attrs.insert("data_format", AttrValue::str("NHWC"));
    for key in ["strides", "dilations", "ksize"] {
        if let Some(list) = n.attrs.get(key).and_then(|v| v.as_list()).filter(|l| l.len() == 4) {
            attrs.insert(key, AttrValue::List(permuted(list, TO_NHWC)));
        }
    }
    if let Some(list) = n.attrs.get("explicit_paddings").and_then(|v| v.as_list()).filter(|l| l.len() == 8) {
        let pairs = TO_NHWC.iter().flat_map(|&i| [list[2 * i].clone(), list[2 * i + 1].clone()]);
        attrs.insert("explicit_paddings", AttrValue::List(pairs.collect()));
    }
    let mut inputs = Vec::with_capacity(n.inputs.len());
    let mut consts = n.consts.clone();
    for (i, v) in n.inputs.iter().enumerate() {
        if Some(i) == sizes_slot(n.op) {
            if let Some(t) = consts.get_mut(i).and_then(Option::as_mut) {
                let dims = t.to_i64_vec(n.op, "a shape operand").map_err(|e| e.to_string())?;
                if dims.len() != 4 {
                    return Err(format!("a shape operand must have 4 entries, got {dims:?}"));
                }
                *t = crate::exec::Tensor::vector(permuted(&dims, TO_NHWC));
            }
            inputs.push(v.clone());
        } else if v.ty.rank() == 4 && Some(i) != filter_slot(n.op) {
            inputs.push(transpose(c, v, TO_NHWC));
        } else {
            inputs.push(v.clone());
        }
    }
    let is_data = |t: &Ty| t.rank() == 4 && data_results(n.op);
    let outputs: Vec<Ty> = n
        .outputs
        .iter()
        .map(|t| if is_data(t) { t.with_shape(permuted(&t.shape, TO_NHWC)) } else { t.clone() })
        .collect();
    let call = Call { op: n.op, attrs: &attrs, inputs, consts, outputs: &outputs, num_replicas: n.num_replicas };
    let results = build(c, &call)?;
    Ok(results
        .into_iter()
        .zip(n.outputs)
        .map(|(v, want)| if is_data(want) { transpose(c, &v, TO_NCHW) } else { v })
        .collect())
}
