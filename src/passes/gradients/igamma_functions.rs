//! Gradient functions of the regularized incomplete gamma functions, as
//! TensorFlow's `math_grad.py` registers them: `Igamma(a, x)` gets
//! `IgammaGradA(a, x)` for `a` and `exp(-x + (a - 1) log x - lgamma(a))`
//! for `x` (the density, formed in log space so that `Γ(a)` cannot
//! overflow); `Igammac = 1 - Igamma` gets both negated. Each partial is
//! multiplied by the incoming gradient and summed back to its operand's
//! shape (`BroadcastGradientArgs`). IgammaGradA and RandomGammaGrad have
//! no registered gradient. Cost: about fifteen ops per differentiated op.

use super::emitter::{Emitter, Tensor};
use super::functions::{Broadcast, Unsupported};
use crate::ir::NodeId;

/// The gradients of `op`'s inputs given `g`; `Err(None)` when `op_type` has no gradient here.
pub fn gradient(
    e: &mut Emitter<'_>,
    _op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let negate = match op_type {
        "Igamma" => false,
        "Igammac" => true,
        _ => return Err(None),
    };
    let (a, x) = match inputs {
        [a, x, ..] => (*a, *x),
        _ => return Err(Some("expected the inputs a and x".to_string())),
    };
    let t = e.dtype_of(g);
    let ta = e.t_attr(t);
    let bc = Broadcast::new(e, a, x);
    let partial_a = e.emit("IgammaGradA", "IgammaGradA", &[a, x], ta.clone());
    // exp(-x + (a - 1) log(x) - lgamma(a)).
    let neg_x = e.emit("Neg", "Neg", &[x], ta.clone());
    let one_name = e.fresh_name("sub/y");
    let one = e.scalar_const_named(&one_name, t, 1.0);
    let a1 = e.emit("Sub", "sub", &[a, one], ta.clone());
    let log_x = e.emit("Log", "Log", &[x], ta.clone());
    let term = e.emit("Mul", "mul", &[a1, log_x], ta.clone());
    let sum = e.emit("AddV2", "add", &[neg_x, term], ta.clone());
    let lgamma = e.emit("Lgamma", "Lgamma", &[a], ta.clone());
    let log_density = e.emit("Sub", "sub_1", &[sum, lgamma], ta.clone());
    let partial_x = e.emit("Exp", "Exp", &[log_density], ta.clone());
    let ga = e.emit("Mul", "mul_1", &[partial_a, g], ta.clone());
    let gx = e.emit("Mul", "mul_2", &[partial_x, g], ta.clone());
    let mut ga = bc.reduce_x(e, ga, &ta);
    let mut gx = bc.reduce_y(e, gx, &ta);
    if negate {
        ga = e.emit("Neg", "Neg_1", &[ga], ta.clone());
        gx = e.emit("Neg", "Neg_2", &[gx], ta);
    }
    Ok(vec![Some(ga), Some(gx)])
}
