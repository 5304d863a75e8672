//! Batch normalisation: `FusedBatchNorm`/`V2`/`V3` and their gradients
//! `FusedBatchNormGrad`/`V2`/`V3`, channels last (NHWC).
//!
//! Training mode normalises by the batch statistics (biased variance) and
//! reports the running estimates TensorFlow does: the batch mean and the
//! Bessel-corrected variance, blended with the old estimates by
//! `exponential_avg_factor`. The reserve outputs carry the batch mean and
//! biased variance to the gradient. Cost: three passes over the input.

use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use num_traits::{One as _, Zero as _};

use super::elementwise::{same, with_float, Flt};

/// The attributes of a fused batch norm.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchNormConfig {
    pub epsilon: f64,
    pub exponential_avg_factor: f64,
    pub is_training: bool,
}

fn vector<T: Flt>(op: &str, t: &Tensor, like: &Tensor, channels: usize, what: &str) -> Result<Vec<T>, KernelError> {
    let a = same::<T>(op, t, like)?;
    if a.len() != channels {
        return Err(KernelError::invalid(op, format!("{what} must have {channels} entries, got {:?}", t.shape())));
    }
    Ok(a.iter().copied().collect())
}

/// Per-channel mean and biased variance of `x` viewed as `[rest, channels]`.
fn moments<T: Flt>(x: &[T], channels: usize) -> (Vec<T>, Vec<T>) {
    let rest = x.len() / channels.max(1);
    let n = T::c(rest.max(1) as f64);
    let mut mean = vec![T::zero(); channels];
    for row in x.chunks(channels) {
        for (m, &v) in mean.iter_mut().zip(row) {
            *m = *m + v;
        }
    }
    mean.iter_mut().for_each(|m| *m = *m / n);
    let mut var = vec![T::zero(); channels];
    for row in x.chunks(channels) {
        for ((s, &v), &m) in var.iter_mut().zip(row).zip(&mean) {
            *s = *s + (v - m) * (v - m);
        }
    }
    var.iter_mut().for_each(|s| *s = *s / n);
    (mean, var)
}

fn channels_of(op: &str, x: &Tensor) -> Result<usize, KernelError> {
    match x.shape() {
        [.., c] if x.shape().len() == 4 => Ok(*c),
        other => Err(KernelError::invalid(op, format!("x must be 4-D NHWC, got {other:?}"))),
    }
}

/// `FusedBatchNormV3(x, scale, offset, mean, variance)` → y, batch_mean, batch_variance, reserve 1-3.
pub(crate) fn fused_batch_norm(op: &str, inputs: &[Tensor], cfg: BatchNormConfig) -> Result<Vec<Tensor>, KernelError> {
    let [x, scale, offset, est_mean, est_var] = inputs else {
        return Err(KernelError::invalid(op, format!("expected 5 inputs, got {}", inputs.len())));
    };
    let c = channels_of(op, x)?;
    with_float!(op, x, xa, T => {
        let xv: Vec<T> = xa.iter().copied().collect();
        let (scale, offset) = (vector::<T>(op, scale, x, c, "scale")?, vector::<T>(op, offset, x, c, "offset")?);
        let (mean, var, out_mean, out_var) = if cfg.is_training {
            let (m, v) = moments(&xv, c);
            let rest = (xv.len() / c.max(1)) as f64;
            let adjust = T::c(if rest > 1.0 { rest / (rest - 1.0) } else { 1.0 });
            let f = T::c(cfg.exponential_avg_factor);
            let (om, ov) = if cfg.exponential_avg_factor == 1.0 {
                (m.clone(), v.iter().map(|&s| s * adjust).collect::<Vec<T>>())
            } else {
                let (old_m, old_v) = (vector::<T>(op, est_mean, x, c, "mean")?, vector::<T>(op, est_var, x, c, "variance")?);
                let one = T::one();
                (
                    old_m.iter().zip(&m).map(|(&o, &b)| (one - f) * o + f * b).collect(),
                    old_v.iter().zip(&v).map(|(&o, &b)| (one - f) * o + f * b * adjust).collect(),
                )
            };
            (m, v, om, ov)
        } else {
            let (m, v) = (vector::<T>(op, est_mean, x, c, "mean")?, vector::<T>(op, est_var, x, c, "variance")?);
            (m.clone(), v.clone(), m, v)
        };
        let eps = T::c(cfg.epsilon);
        let factor: Vec<T> = var.iter().zip(&scale).map(|(&v, &s)| s / (v + eps).sqrt()).collect();
        let y: Vec<T> = xv
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let k = i % c;
                (v - mean[k]) * factor[k] + offset[k]
            })
            .collect();
        Ok(vec![
            Tensor::from_vec(x.shape(), y)?,
            Tensor::vector(out_mean),
            Tensor::vector(out_var),
            Tensor::vector(mean),
            Tensor::vector(var),
            Tensor::vector(Vec::<T>::new()),
        ])
    })
}

/// `FusedBatchNormGradV3(y_backprop, x, scale, reserve_1, reserve_2, reserve_3)` →
/// x_backprop, scale_backprop, offset_backprop and two empty reserves.
pub(crate) fn fused_batch_norm_grad(
    op: &str,
    inputs: &[Tensor],
    cfg: BatchNormConfig,
) -> Result<Vec<Tensor>, KernelError> {
    let (dy, x, scale, mean, var) = match inputs {
        [dy, x, scale, mean, var, ..] => (dy, x, scale, mean, var),
        _ => return Err(KernelError::invalid(op, format!("expected at least 5 inputs, got {}", inputs.len()))),
    };
    let c = channels_of(op, x)?;
    if dy.shape() != x.shape() {
        return Err(KernelError::invalid(op, format!("y_backprop {:?} and x {:?} differ", dy.shape(), x.shape())));
    }
    with_float!(op, x, xa, T => {
        let xv: Vec<T> = xa.iter().copied().collect();
        let dyv: Vec<T> = same::<T>(op, dy, x)?.iter().copied().collect();
        let scale = vector::<T>(op, scale, x, c, "scale")?;
        let mean = vector::<T>(op, mean, x, c, "reserve_space_1")?;
        let var = vector::<T>(op, var, x, c, "reserve_space_2")?;
        let eps = T::c(cfg.epsilon);
        let inv: Vec<T> = var.iter().map(|&v| T::one() / (v + eps).sqrt()).collect();
        let mut sum_dy = vec![T::zero(); c];
        let mut sum_dy_xhat = vec![T::zero(); c];
        for (i, (&d, &v)) in dyv.iter().zip(&xv).enumerate() {
            let k = i % c;
            sum_dy[k] += d;
            sum_dy_xhat[k] += d * (v - mean[k]) * inv[k];
        }
        let n = T::c((xv.len() / c.max(1)).max(1) as f64);
        let dx: Vec<T> = dyv
            .iter()
            .zip(&xv)
            .enumerate()
            .map(|(i, (&d, &v))| {
                let k = i % c;
                if cfg.is_training {
                    let xhat = (v - mean[k]) * inv[k];
                    scale[k] * inv[k] / n * (n * d - sum_dy[k] - xhat * sum_dy_xhat[k])
                } else {
                    d * scale[k] * inv[k]
                }
            })
            .collect();
        Ok(vec![
            Tensor::from_vec(x.shape(), dx)?,
            Tensor::vector(sum_dy_xhat),
            Tensor::vector(sum_dy),
            Tensor::vector(Vec::<T>::new()),
            Tensor::vector(Vec::<T>::new()),
        ])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRAIN: BatchNormConfig = BatchNormConfig { epsilon: 1e-3, exponential_avg_factor: 1.0, is_training: true };

    #[test]
    fn training_normalises_each_channel() {
        let x = Tensor::from_vec(&[2, 1, 1, 2], vec![1.0f64, 10.0, 3.0, 30.0]).unwrap();
        let ones = Tensor::vector(vec![1.0f64, 1.0]);
        let zeros = Tensor::vector(vec![0.0f64, 0.0]);
        let out =
            fused_batch_norm("FBN", &[x.clone(), ones.clone(), zeros.clone(), zeros.clone(), ones.clone()], TRAIN)
                .unwrap();
        assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![2.0, 20.0]);
        // Biased variances 1 and 100; running estimates Bessel-corrected (n = 2).
        assert_eq!(out[4].to_vec::<f64>().unwrap(), vec![1.0, 100.0]);
        assert_eq!(out[2].to_vec::<f64>().unwrap(), vec![2.0, 200.0]);
        let y = out[0].to_vec::<f64>().unwrap();
        assert!((y[0] + 1.0 / (1.0f64 + 1e-3).sqrt()).abs() < 1e-12);
        // The gradient of sum(y) with respect to x is zero in training mode (y sums to 0 per channel).
        let dy = Tensor::from_vec(&[2, 1, 1, 2], vec![1.0f64; 4]).unwrap();
        let g = fused_batch_norm_grad("G", &[dy, x, ones, out[3].clone(), out[4].clone()], TRAIN).unwrap();
        assert!(g[0].to_vec::<f64>().unwrap().iter().all(|v| v.abs() < 1e-12));
        assert_eq!(g[2].to_vec::<f64>().unwrap(), vec![2.0, 2.0]);
    }
}
