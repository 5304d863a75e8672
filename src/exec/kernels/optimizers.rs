//! Optimizer updates: the `ResourceApply*` ops of `tf.train` and Keras
//! optimizers, as pure functions from the current slot values to the new
//! ones. The mesh reads the variables behind the resource inputs, calls
//! [`apply`] and writes the results back (see `mesh::device_kernel`).
//!
//! Each update is elementwise over the variable; scalars (learning rate,
//! betas, ...) broadcast. Arithmetic follows TensorFlow's CPU kernels
//! term by term, in the variable's dtype.

use std::borrow::Cow;

use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::AttrMap;
use num_traits::{One as _, Zero as _};

use super::elementwise::with_float;

/// An optimizer op: how many leading inputs are resource handles (the slots it updates).
pub(crate) fn resource_inputs(op: &str) -> Option<usize> {
    Some(match op {
        "ResourceApplyGradientDescent" | "ResourceApplyProximalGradientDescent" => 1,
        "ResourceApplyMomentum" | "ResourceApplyKerasMomentum" | "ResourceApplyAdagrad" | "ResourceApplyAdagradV2" => 2,
        "ResourceApplyAddSign" | "ResourceApplyPowerSign" | "ResourceApplyProximalAdagrad" => 2,
        "ResourceApplyAdagradDA" => 3,
        "ResourceApplyAdam" | "ResourceApplyAdaMax" | "ResourceApplyAdadelta" | "ResourceApplyRMSProp" => 3,
        "ResourceApplyFtrl" | "ResourceApplyFtrlV2" => 3,
        "ResourceApplyAdamWithAmsgrad" | "ResourceApplyCenteredRMSProp" => 4,
        _ => return None,
    })
}

/// The new values of the slots `slots` (var first) given the op's other inputs `rest`. Slots of
/// bf16 or f16 are updated in f32 and rounded back once.
pub(crate) fn apply(op: &str, attrs: &AttrMap, slots: &[Tensor], rest: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let all: Vec<Tensor> = slots.iter().chain(rest).cloned().collect();
    match super::dtypes::widen(op, &all)? {
        Some((wide, how)) => {
            let (wide_slots, wide_rest) = wide.split_at(slots.len());
            super::dtypes::narrow(op, &AttrMap::new(), &how, apply_wide(op, attrs, wide_slots, wide_rest)?)
        }
        None => apply_wide(op, attrs, slots, rest),
    }
}

/// [`apply`] on f32 or f64 values.
fn apply_wide(op: &str, attrs: &AttrMap, slots: &[Tensor], rest: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let var = slots.first().ok_or_else(|| KernelError::invalid(op, "needs a variable"))?;
    // The gradient is the last input, except for momentum, where `momentum` follows it, and FTRL,
    // where the gradient comes first.
    let grad_at = match op {
        "ResourceApplyMomentum" | "ResourceApplyKerasMomentum" => 1,
        "ResourceApplyFtrl" | "ResourceApplyFtrlV2" | "ResourceApplyAdagradDA" => 0,
        _ => rest.len().saturating_sub(1),
    };
    let grad = rest.get(grad_at).ok_or_else(|| KernelError::invalid(op, "missing the gradient"))?;
    for s in slots.iter().chain([grad]) {
        if s.shape() != var.shape() || s.dtype() != var.dtype() {
            return Err(KernelError::invalid(
                op,
                format!(
                    "slot or gradient {} {:?} does not match the variable {} {:?}",
                    s.dtype(),
                    s.shape(),
                    var.dtype(),
                    var.shape()
                ),
            ));
        }
    }
    let nesterov = attrs.get_bool("use_nesterov").unwrap_or(false);
    let update_slots = attrs.get_bool("update_slots").unwrap_or(true);
    with_float!(op, var, _v, T => {
        let vec_of = |t: &Tensor| -> Result<Vec<T>, KernelError> {
            t.to_vec::<T>().ok_or_else(|| KernelError::invalid(op, format!("input of dtype {} where {} was expected", t.dtype(), var.dtype())))
        };
        let scalar = |i: usize, what: &str| -> Result<T, KernelError> {
            let t = rest.get(i).ok_or_else(|| KernelError::invalid(op, format!("missing input {what}")))?;
            match vec_of(t)?.as_slice() {
                &[v] => Ok(v),
                _ => Err(KernelError::invalid(op, format!("{what} must be a scalar, got shape {:?}", t.shape()))),
            }
        };
        // The gradient is read in place (nearly always one slice); the slots are copied, as the
        // store keeps the old values until the new ones replace them.
        let grad: Cow<'_, [T]> = match grad.array::<T>().and_then(|a| a.as_slice()) {
            Some(slice) => Cow::Borrowed(slice),
            None => Cow::Owned(vec_of(grad)?),
        };
        if op == "ResourceApplyGradientDescent" {
            // One pass: the new variable is computed from the old one, not copied and then updated.
            let alpha = scalar(0, "alpha")?;
            let new: Vec<T> = match var.array::<T>().and_then(|a| a.as_slice()) {
                Some(w) => w.iter().zip(grad.iter()).map(|(&w, &g)| w - alpha * g).collect(),
                None => vec_of(var)?.iter().zip(grad.iter()).map(|(&w, &g)| w - alpha * g).collect(),
            };
            return Ok(vec![Tensor::from_vec(var.shape(), new)?]);
        }
        let mut s: Vec<Vec<T>> = slots.iter().map(vec_of).collect::<Result<_, _>>()?;
        let one = T::one();
        // TensorFlow's sign: zero at zero (and NaN for NaN).
        let sign = |x: T| if x > T::zero() { one } else if x < T::zero() { -one } else { x };
        match op {
            "ResourceApplyMomentum" => {
                let (lr, momentum) = (scalar(0, "lr")?, scalar(2, "momentum")?);
                for i in 0..grad.len() {
                    let a = s[1][i] * momentum + grad[i];
                    s[1][i] = a;
                    s[0][i] = if nesterov { s[0][i] - (grad[i] * lr + a * momentum * lr) } else { s[0][i] - lr * a };
                }
            }
            "ResourceApplyKerasMomentum" => {
                let (lr, momentum) = (scalar(0, "lr")?, scalar(2, "momentum")?);
                for i in 0..grad.len() {
                    let a = s[1][i] * momentum - grad[i] * lr;
                    s[1][i] = a;
                    s[0][i] = if nesterov { s[0][i] + (a * momentum - grad[i] * lr) } else { s[0][i] + a };
                }
            }
            "ResourceApplyAdagrad" | "ResourceApplyAdagradV2" => {
                let lr = scalar(0, "lr")?;
                let eps = if op == "ResourceApplyAdagradV2" { Some(scalar(1, "epsilon")?) } else { None };
                for i in 0..grad.len() {
                    if update_slots {
                        s[1][i] += grad[i] * grad[i];
                    }
                    s[0][i] = match eps {
                        Some(e) => s[0][i] - grad[i] * lr / (s[1][i].sqrt() + e),
                        None => s[0][i] - grad[i] * lr / s[1][i].sqrt(),
                    };
                }
            }
            "ResourceApplyAdam" => {
                let (b1p, b2p, lr) = (scalar(0, "beta1_power")?, scalar(1, "beta2_power")?, scalar(2, "lr")?);
                let (b1, b2, eps) = (scalar(3, "beta1")?, scalar(4, "beta2")?, scalar(5, "epsilon")?);
                let alpha = lr * (one - b2p).sqrt() / (one - b1p);
                for i in 0..grad.len() {
                    let g = grad[i];
                    let m = s[1][i] + (g - s[1][i]) * (one - b1);
                    let v = s[2][i] + (g * g - s[2][i]) * (one - b2);
                    s[1][i] = m;
                    s[2][i] = v;
                    let step = if nesterov { (g * (one - b1) + b1 * m) * alpha } else { m * alpha };
                    s[0][i] -= step / (v.sqrt() + eps);
                }
            }
            "ResourceApplyAdamWithAmsgrad" => {
                let (b1p, b2p, lr) = (scalar(0, "beta1_power")?, scalar(1, "beta2_power")?, scalar(2, "lr")?);
                let (b1, b2, eps) = (scalar(3, "beta1")?, scalar(4, "beta2")?, scalar(5, "epsilon")?);
                let alpha = lr * (one - b2p).sqrt() / (one - b1p);
                for i in 0..grad.len() {
                    let g = grad[i];
                    s[1][i] += (g - s[1][i]) * (one - b1);
                    s[2][i] += (g * g - s[2][i]) * (one - b2);
                    // The largest second moment so far (NaN propagates, as in TensorFlow's max).
                    if s[2][i].is_nan() || s[2][i] > s[3][i] {
                        s[3][i] = s[2][i];
                    }
                    s[0][i] -= s[1][i] * alpha / (s[3][i].sqrt() + eps);
                }
            }
            "ResourceApplyAdaMax" => {
                let (b1p, lr, b1) = (scalar(0, "beta1_power")?, scalar(1, "lr")?, scalar(2, "beta1")?);
                let (b2, eps) = (scalar(3, "beta2")?, scalar(4, "epsilon")?);
                for i in 0..grad.len() {
                    let g = grad[i];
                    s[1][i] += (g - s[1][i]) * (one - b1);
                    let decayed = b2 * s[2][i];
                    s[2][i] = if decayed.is_nan() || decayed > g.abs() { decayed } else { g.abs() };
                    s[0][i] -= lr / (one - b1p) * (s[1][i] / (s[2][i] + eps));
                }
            }
            "ResourceApplyAdadelta" => {
                let (lr, rho, eps) = (scalar(0, "lr")?, scalar(1, "rho")?, scalar(2, "epsilon")?);
                for i in 0..grad.len() {
                    let g = grad[i];
                    s[1][i] = s[1][i] * rho + g * g * (one - rho);
                    let update = (s[2][i] + eps).sqrt() / (s[1][i] + eps).sqrt() * g;
                    s[0][i] -= update * lr;
                    s[2][i] = s[2][i] * rho + update * update * (one - rho);
                }
            }
            "ResourceApplyCenteredRMSProp" => {
                let (lr, rho, momentum, eps) = (scalar(0, "lr")?, scalar(1, "rho")?, scalar(2, "momentum")?, scalar(3, "epsilon")?);
                for i in 0..grad.len() {
                    let g = grad[i];
                    s[2][i] += (g * g - s[2][i]) * (one - rho);
                    s[1][i] += (g - s[1][i]) * (one - rho);
                    let denom = s[2][i] - s[1][i] * s[1][i] + eps;
                    s[3][i] = s[3][i] * momentum + lr * g / denom.sqrt();
                    s[0][i] -= s[3][i];
                }
            }
            "ResourceApplyFtrl" | "ResourceApplyFtrlV2" => {
                if attrs.get_bool("multiply_linear_by_lr").unwrap_or(false) {
                    return Err(KernelError::invalid(op, "multiply_linear_by_lr=true is not supported"));
                }
                // Inputs after the gradient: lr, l1, l2, (l2_shrinkage,) lr_power.
                let (lr, l1, l2) = (scalar(1, "lr")?, scalar(2, "l1")?, scalar(3, "l2")?);
                let (shrinkage, lr_power) = if op == "ResourceApplyFtrlV2" {
                    (scalar(4, "l2_shrinkage")?, scalar(5, "lr_power")?)
                } else {
                    (T::zero(), scalar(4, "lr_power")?)
                };
                let two = one + one;
                // TensorFlow takes the square root when lr_power is -0.5 and a power otherwise.
                let power = |x: T| if lr_power == -(one / two) { x.sqrt() } else { x.powf(-lr_power) };
                for i in 0..grad.len() {
                    let g = grad[i];
                    let shrunk = if op == "ResourceApplyFtrlV2" { g + two * shrinkage * s[0][i] } else { g };
                    let accum = s[1][i] + g * g;
                    s[2][i] += shrunk - (power(accum) - power(s[1][i])) / lr * s[0][i];
                    let linear = s[2][i];
                    let sign = if linear > T::zero() {
                        one
                    } else if linear < T::zero() {
                        -one
                    } else {
                        T::zero()
                    };
                    let x = l1 * sign - linear;
                    let y = power(accum) / lr + two * l2;
                    s[0][i] = if linear.abs() > l1 { x / y } else { T::zero() };
                    s[1][i] = accum;
                }
            }
            "ResourceApplyRMSProp" => {
                let (lr, rho, momentum, eps) = (scalar(0, "lr")?, scalar(1, "rho")?, scalar(2, "momentum")?, scalar(3, "epsilon")?);
                for i in 0..grad.len() {
                    let g = grad[i];
                    let ms = s[1][i] + (g * g - s[1][i]) * (one - rho);
                    let mom = s[2][i] * momentum + lr * g / (ms + eps).sqrt();
                    s[1][i] = ms;
                    s[2][i] = mom;
                    s[0][i] -= mom;
                }
            }
            "ResourceApplyProximalGradientDescent" | "ResourceApplyProximalAdagrad" => {
                // A gradient step, then the proximal step of l1 (soft thresholding) and l2 (shrinking).
                let adagrad = op == "ResourceApplyProximalAdagrad";
                let (lr, l1, l2) = (scalar(0, "lr")?, scalar(1, "l1")?, scalar(2, "l2")?);
                for i in 0..grad.len() {
                    let rate = if adagrad {
                        s[1][i] += grad[i] * grad[i];
                        lr / s[1][i].sqrt()
                    } else {
                        lr
                    };
                    let prox = s[0][i] - grad[i] * rate;
                    s[0][i] = if l1 > T::zero() {
                        sign(prox) * (prox.abs() - rate * l1).max(T::zero()) / (one + rate * l2)
                    } else {
                        prox / (one + rate * l2)
                    };
                }
            }
            "ResourceApplyAdagradDA" => {
                // Inputs after the slots: grad, lr, l1, l2, global_step (an integer).
                let (lr, l1, l2) = (scalar(1, "lr")?, scalar(2, "l1")?, scalar(3, "l2")?);
                let step = match rest.get(4).map(|t| t.to_i64_vec(op, "global_step")).transpose()?.as_deref() {
                    Some(&[step]) => step as T,
                    _ => return Err(KernelError::invalid(op, "global_step must be an integer scalar")),
                };
                for i in 0..grad.len() {
                    s[1][i] += grad[i];
                    s[2][i] += grad[i] * grad[i];
                    let denom = l2 * step * lr + s[2][i].sqrt();
                    s[0][i] = if l1 > T::zero() {
                        -lr * sign(s[1][i]) * (s[1][i].abs() - step * l1).max(T::zero()) / denom
                    } else {
                        -lr * s[1][i] / denom
                    };
                }
            }
            "ResourceApplyAddSign" | "ResourceApplyPowerSign" => {
                // Inputs after the slots: lr, alpha (AddSign) or logbase (PowerSign), sign_decay, beta, grad.
                let (lr, base, decay, beta) = (scalar(0, "lr")?, scalar(1, "alpha")?, scalar(2, "sign_decay")?, scalar(3, "beta")?);
                for i in 0..grad.len() {
                    let g = grad[i];
                    s[1][i] = s[1][i] * beta + g * (one - beta);
                    let agree = sign(g) * sign(s[1][i]);
                    let scale = if op == "ResourceApplyAddSign" { base + decay * agree } else { (base * decay * agree).exp() };
                    s[0][i] -= lr * scale * g;
                }
            }
            other => return Err(KernelError::NoKernel { op: other.to_string() }),
        }
        s.into_iter().map(|v| Tensor::from_vec(var.shape(), v)).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrValue;

    fn t(v: &[f64]) -> Tensor {
        Tensor::vector(v.to_vec())
    }

    fn s(v: f64) -> Tensor {
        Tensor::scalar(v)
    }

    #[test]
    fn momentum_and_nesterov() {
        let mut attrs = AttrMap::new();
        let out =
            apply("ResourceApplyMomentum", &attrs, &[t(&[1.0]), t(&[0.5])], &[s(0.1), t(&[2.0]), s(0.9)]).unwrap();
        // Inputs after the slots: lr, grad, momentum. accum = 0.5 * 0.9 + 2 = 2.45; var = 1 - 0.1 * 2.45.
        assert_eq!(out[1], t(&[0.5 * 0.9 + 2.0]));
        assert_eq!(out[0], t(&[1.0 - 0.1 * (0.5 * 0.9 + 2.0)]));
        attrs.insert("use_nesterov", AttrValue::Bool(true));
        let out =
            apply("ResourceApplyMomentum", &attrs, &[t(&[1.0]), t(&[0.5])], &[s(0.1), t(&[2.0]), s(0.9)]).unwrap();
        assert_eq!(out[0], t(&[1.0 - (2.0 * 0.1 + (0.5 * 0.9 + 2.0) * 0.9 * 0.1)]));
    }

    #[test]
    fn bf16_slots_update_in_f32_and_round_once() {
        use half::bf16;
        let b = |v: &[f32]| Tensor::vector(v.iter().map(|&x| bf16::from_f32(x)).collect());
        let bs = |v: f32| Tensor::scalar(bf16::from_f32(v));
        let out =
            apply("ResourceApplyGradientDescent", &AttrMap::new(), &[b(&[1.0, -2.0])], &[bs(0.1), b(&[0.5, 3.0])])
                .unwrap();
        let want: Vec<bf16> = [(1.0f32, 0.5f32), (-2.0, 3.0)]
            .iter()
            .map(|&(w, g)| bf16::from_f32(w - bf16::from_f32(0.1).to_f32() * g))
            .collect();
        assert_eq!(out[0], Tensor::vector(want));
    }

    #[test]
    fn adam_first_step_moves_by_about_lr() {
        let rest = [s(0.9), s(0.999), s(0.01), s(0.9), s(0.999), s(1e-8), t(&[3.0, -3.0])];
        let out = apply("ResourceApplyAdam", &AttrMap::new(), &[t(&[0.0, 0.0]), t(&[0.0, 0.0]), t(&[0.0, 0.0])], &rest)
            .unwrap();
        let w = out[0].to_vec::<f64>().unwrap();
        assert!((w[0] + 0.01).abs() < 1e-6 && (w[1] - 0.01).abs() < 1e-6, "{w:?}");
        assert!(apply("ResourceApplyAdam", &AttrMap::new(), &[t(&[0.0])], &rest).is_err());
    }
}
