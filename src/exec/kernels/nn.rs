//! Losses and class ops: `LogSoftmax`, `SoftmaxCrossEntropyWithLogits`,
//! `SparseSoftmaxCrossEntropyWithLogits`, `OneHot`.
//!
//! Softmax-style kernels work on the last axis, one lane at a time, with
//! the lane's maximum subtracted first (no overflow for large logits).

use ndarray::{ArcArray, Axis, IxDyn};

use super::elementwise::{same, with_float, Flt};
use crate::exec::error::KernelError;
use crate::exec::tensor::{with_element_type, Element, Tensor};
use crate::ir::DType;
use num_traits::{One as _, Zero as _};

/// `log(sum(exp(lane - max))) + max` of one lane.
fn log_sum_exp<T: Flt>(lane: ndarray::ArrayView1<'_, T>) -> T {
    let max = lane.iter().fold(T::neg_infinity(), |m, &v| m.max(v));
    let sum = lane.iter().fold(T::zero(), |s, &v| s + (v - max).exp());
    sum.ln() + max
}

fn last_axis(op: &str, shape: &[usize]) -> Result<Axis, KernelError> {
    match shape.len() {
        0 => Err(KernelError::invalid(op, "logits must have rank >= 1")),
        n => Ok(Axis(n - 1)),
    }
}

/// `LogSoftmax(logits)` over the last axis.
pub(crate) fn log_softmax(op: &str, logits: &Tensor) -> Result<Tensor, KernelError> {
    let axis = last_axis(op, logits.shape())?;
    with_float!(op, logits, a, T => {
        let mut out = a.to_owned();
        for mut lane in out.lanes_mut(axis) {
            let lse = log_sum_exp::<T>(lane.view());
            lane.mapv_inplace(|v| v - lse);
        }
        Ok(Tensor::from_array(out))
    })
}

/// Loss and backprop from logits and a per-lane target distribution given by `target(b, c)`.
fn xent<T: Flt>(
    a: &ArcArray<T, IxDyn>,
    target: impl Fn(usize, usize) -> T,
) -> Result<(ndarray::Array1<T>, ndarray::Array2<T>), KernelError> {
    let (batch, classes) = (a.shape()[0], a.shape()[1]);
    let mut loss = ndarray::Array1::zeros(batch);
    let mut backprop = ndarray::Array2::zeros((batch, classes));
    for b in 0..batch {
        let lane = a.index_axis(Axis(0), b);
        let max = lane.iter().fold(T::neg_infinity(), |m, &v| m.max(v));
        let sum = lane.iter().fold(T::zero(), |s, &v| s + (v - max).exp());
        let lse = sum.ln();
        let mut l = T::zero();
        for c in 0..classes {
            let shifted = lane[c] - max;
            let p = target(b, c);
            if p != T::zero() {
                l = l + p * (lse - shifted);
            }
            backprop[(b, c)] = shifted.exp() / sum - p;
        }
        loss[b] = l;
    }
    Ok((loss, backprop))
}

fn check_2d(op: &str, t: &Tensor, what: &str) -> Result<(), KernelError> {
    if t.shape().len() != 2 {
        return Err(KernelError::invalid(op, format!("{what} must be 2-D, got shape {:?}", t.shape())));
    }
    Ok(())
}

/// `SoftmaxCrossEntropyWithLogits(features, labels)` → (loss, backprop).
pub(crate) fn softmax_xent(op: &str, logits: &Tensor, labels: &Tensor) -> Result<Vec<Tensor>, KernelError> {
    check_2d(op, logits, "logits")?;
    if labels.shape() != logits.shape() {
        return Err(KernelError::invalid(
            op,
            format!("labels shape {:?} differs from logits shape {:?}", labels.shape(), logits.shape()),
        ));
    }
    with_float!(op, logits, a, T => {
        let l = same::<T>(op, labels, logits)?;
        let (loss, backprop) = xent(a, |b, c| l[[b, c]])?;
        Ok(vec![Tensor::from_array(loss.into_dyn()), Tensor::from_array(backprop.into_dyn())])
    })
}

/// `SparseSoftmaxCrossEntropyWithLogits(features, labels)` → (loss, backprop); labels are class ids.
pub(crate) fn sparse_softmax_xent(op: &str, logits: &Tensor, labels: &Tensor) -> Result<Vec<Tensor>, KernelError> {
    check_2d(op, logits, "logits")?;
    let ids = labels.to_i64_vec(op, "labels")?;
    let (batch, classes) = (logits.shape()[0], logits.shape()[1]);
    if labels.shape() != [batch] {
        return Err(KernelError::invalid(op, format!("labels must have shape [{batch}], got {:?}", labels.shape())));
    }
    if let Some(bad) = ids.iter().find(|&&i| i < 0 || i as usize >= classes) {
        return Err(KernelError::invalid(op, format!("label {bad} is outside [0, {classes})")));
    }
    with_float!(op, logits, a, T => {
        let (loss, backprop) = xent(a, |b, c| if ids[b] as usize == c { T::one() } else { T::zero() })?;
        Ok(vec![Tensor::from_array(loss.into_dyn()), Tensor::from_array(backprop.into_dyn())])
    })
}

/// `OneHot(indices, depth, on_value, off_value) {axis}`; indices outside `[0, depth)` give an all-off row.
pub(crate) fn one_hot(op: &str, inputs: &[Tensor], axis: i64) -> Result<Tensor, KernelError> {
    let [indices, depth, on, off] = inputs else {
        return Err(KernelError::invalid(op, format!("expected 4 inputs, got {}", inputs.len())));
    };
    let ids = indices.to_i64_vec(op, "indices")?;
    let depth = match depth.to_i64_vec(op, "depth")?.as_slice() {
        &[d] if d >= 0 => d as usize,
        other => return Err(KernelError::invalid(op, format!("depth must be a non-negative scalar, got {other:?}"))),
    };
    let rank = indices.shape().len() as i64;
    let axis = if axis == -1 { rank } else { axis };
    if !(0..=rank).contains(&axis) {
        return Err(KernelError::invalid(op, format!("axis {axis} is out of range for output rank {}", rank + 1)));
    }
    let axis = axis as usize;
    let mut shape = indices.shape().to_vec();
    shape.insert(axis, depth);
    let outer: usize = indices.shape()[..axis].iter().product();
    let inner: usize = indices.shape()[axis..].iter().product();
    fn run<T: Element>(
        op: &str,
        on: &Tensor,
        off: &Tensor,
        ids: &[i64],
        shape: &[usize],
        (outer, depth, inner): (usize, usize, usize),
    ) -> Result<Tensor, KernelError> {
        let scalar =
            |t: &Tensor, what: &str| -> Result<T, KernelError> {
                let a = same::<T>(op, t, on)?;
                a.iter().next().cloned().filter(|_| a.len() == 1).ok_or_else(|| {
                    KernelError::invalid(op, format!("{what} must be a scalar, got shape {:?}", t.shape()))
                })
            };
        let (on_v, off_v) = (scalar(on, "on_value")?, scalar(off, "off_value")?);
        let mut out = vec![off_v; outer * depth * inner];
        for o in 0..outer {
            for i in 0..inner {
                let id = ids[o * inner + i];
                if (0..depth as i64).contains(&id) {
                    out[(o * depth + id as usize) * inner + i] = on_v.clone();
                }
            }
        }
        Tensor::from_vec(shape, out)
    }
    with_element_type!(on, T => run::<T>(op, on, off, &ids, &shape, (outer, depth, inner)),
        resource => Err(KernelError::dtype(op, DType::Resource, "on_value must have elements")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_entropy_matches_the_formula() {
        let logits = Tensor::from_vec(&[2, 3], vec![1.0f64, 2.0, 3.0, 0.0, 0.0, 10.0]).unwrap();
        let labels = Tensor::vector(vec![2i32, 0]);
        let out = sparse_softmax_xent("S", &logits, &labels).unwrap();
        let l = out[0].to_vec::<f64>().unwrap();
        let lse0 = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
        assert!((l[0] - (lse0 - 3.0)).abs() < 1e-12);
        let lse1 = (2.0 + 10f64.exp()).ln();
        assert!((l[1] - lse1).abs() < 1e-12);
        let bp = out[1].to_vec::<f64>().unwrap();
        assert!((bp[2] - (3f64.exp() / lse0.exp() - 1.0)).abs() < 1e-12);
        let dense = Tensor::from_vec(&[2, 3], vec![0.0f64, 0.0, 1.0, 1.0, 0.0, 0.0]).unwrap();
        assert_eq!(softmax_xent("D", &logits, &dense).unwrap(), out);
        let ls = log_softmax("L", &logits).unwrap().to_vec::<f64>().unwrap();
        assert!((ls[2] - (3.0 - lse0)).abs() < 1e-12);
        assert!(sparse_softmax_xent("S", &logits, &Tensor::vector(vec![3i32, 0])).is_err());
    }

    #[test]
    fn one_hot_places_on_values() {
        let inputs =
            [Tensor::vector(vec![1i32, -1, 0]), Tensor::scalar(3i32), Tensor::scalar(5.0f32), Tensor::scalar(0.0f32)];
        let out = one_hot("OneHot", &inputs, -1).unwrap();
        assert_eq!(out.shape(), &[3, 3]);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0]);
        let t = one_hot("OneHot", &inputs, 0).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0, 0.0, 5.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }
}
