//! NCHW (`data_format = "NCHW"`) convolution, pooling and batch norm, as TensorFlow's
//! CPU (oneDNN) kernels accept them: the 4-D data operands are transposed
//! to NHWC, the per-dimension attributes (`strides`, `dilations`, `ksize`,
//! `explicit_paddings`) and shape operands (`input_sizes`,
//! `orig_input_shape`) permuted likewise, the NHWC kernel runs, and its
//! result is transposed back (a filter gradient is HWIO in both layouts).
//! Cost: the NHWC kernel's plus one copy of each data operand and result.

use super::conv::{ConvKind, PoolKind};
use super::shape::transpose;
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, AttrValue};

/// NCHW to NHWC, for axes and per-dimension attributes.
const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
/// NHWC to NCHW.
const TO_NCHW: [usize; 4] = [0, 3, 1, 2];

/// What each operand of a window op is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operand {
    /// A 4-D activation tensor in the op's layout.
    Data,
    /// A 1-D shape of an activation tensor, in the op's layout.
    Sizes,
    /// A filter (HWIO) or filter shape: the same in both layouts.
    Filter,
}

fn channels_first(attrs: &AttrMap) -> bool {
    attrs.get_str("data_format") == Some("NCHW")
}

/// `Conv2D`-family kernel of any layout.
pub(crate) fn conv(
    op: &str,
    kind: ConvKind,
    depthwise: bool,
    attrs: &AttrMap,
    inputs: &[Tensor],
) -> Result<Tensor, KernelError> {
    if !channels_first(attrs) {
        return super::conv::conv(op, kind, depthwise, attrs, inputs);
    }
    use Operand::*;
    let (roles, back): (&[Operand], bool) = match kind {
        ConvKind::Forward => (&[Data, Filter], true),
        ConvKind::BackpropInput => (&[Sizes, Filter, Data], true),
        ConvKind::BackpropFilter => (&[Data, Filter, Data], false),
    };
    let (attrs, inputs) = to_nhwc(op, attrs, inputs, roles)?;
    let y = super::conv::conv(op, kind, depthwise, &attrs, &inputs)?;
    if back {
        permute(op, &y, TO_NCHW)
    } else {
        Ok(y)
    }
}

/// Pooling kernel of any layout.
pub(crate) fn pool(op: &str, kind: PoolKind, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    if !channels_first(attrs) {
        return super::conv::pool(op, kind, attrs, inputs);
    }
    use Operand::*;
    let roles: &[Operand] = match kind {
        PoolKind::Max | PoolKind::Avg => &[Data],
        PoolKind::MaxGrad | PoolKind::MaxGradGrad => &[Data, Data, Data],
        PoolKind::AvgGrad => &[Sizes, Data],
    };
    let (attrs, inputs) = to_nhwc(op, attrs, inputs, roles)?;
    permute(op, &super::conv::pool(op, kind, &attrs, &inputs)?, TO_NCHW)
}

/// `FusedBatchNorm*` of any layout: its first `data` operands (x; dy and x
/// for a gradient) go to NHWC, `run` runs the NHWC kernel, and its first
/// result (y or dx) comes back to NCHW; the per-channel vectors are the
/// same in both layouts.
pub(crate) fn batch_norm(
    op: &str,
    attrs: &AttrMap,
    inputs: &[Tensor],
    data: usize,
    run: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>, KernelError>,
) -> Result<Vec<Tensor>, KernelError> {
    if !channels_first(attrs) {
        return run(inputs);
    }
    let mut nhwc = inputs.to_vec();
    for t in nhwc.iter_mut().take(data) {
        *t = permute(op, t, TO_NHWC)?;
    }
    let mut out = run(&nhwc)?;
    if let Some(first) = out.first_mut() {
        *first = permute(op, first, TO_NCHW)?;
    }
    Ok(out)
}

fn permute(op: &str, t: &Tensor, perm: [usize; 4]) -> Result<Tensor, KernelError> {
    if t.shape().len() != 4 {
        return Err(KernelError::invalid(op, format!("an NCHW operand must be 4-D, got {:?}", t.shape())));
    }
    transpose(op, t, &Tensor::vector(perm.iter().map(|&p| p as i64).collect::<Vec<i64>>()))
}

/// The attributes and operands of an NCHW op, rewritten for its NHWC kernel.
fn to_nhwc(
    op: &str,
    attrs: &AttrMap,
    inputs: &[Tensor],
    roles: &[Operand],
) -> Result<(AttrMap, Vec<Tensor>), KernelError> {
    if inputs.len() != roles.len() {
        return Err(KernelError::invalid(op, format!("{op} takes {} inputs, got {}", roles.len(), inputs.len())));
    }
    let mut out = attrs.clone();
    out.insert("data_format", AttrValue::str("NHWC"));
    for key in ["strides", "dilations", "ksize"] {
        if let Some(list) = attrs.get(key).and_then(|v| v.as_list()) {
            if list.len() == 4 {
                out.insert(key, AttrValue::List(TO_NHWC.iter().map(|&i| list[i].clone()).collect()));
            }
        }
    }
    if let Some(list) = attrs.get("explicit_paddings").and_then(|v| v.as_list()) {
        if list.len() == 8 {
            let pairs = TO_NHWC.iter().flat_map(|&i| [list[2 * i].clone(), list[2 * i + 1].clone()]);
            out.insert("explicit_paddings", AttrValue::List(pairs.collect()));
        }
    }
    let inputs = inputs
        .iter()
        .zip(roles)
        .map(|(t, role)| match role {
            Operand::Data => permute(op, t, TO_NHWC),
            Operand::Filter => Ok(t.clone()),
            Operand::Sizes => {
                let dims = t.to_i64_vec(op, "a shape operand")?;
                if dims.len() != 4 {
                    return Err(KernelError::invalid(op, format!("a shape operand must have 4 entries, got {dims:?}")));
                }
                let nhwc: Vec<i64> = TO_NHWC.iter().map(|&i| dims[i]).collect();
                Ok(match t {
                    Tensor::I64(_) => Tensor::vector(nhwc),
                    _ => Tensor::vector(nhwc.into_iter().map(|d| d as i32).collect::<Vec<i32>>()),
                })
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((out, inputs))
}
