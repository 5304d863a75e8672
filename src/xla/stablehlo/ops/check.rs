//! The emitting side of device checks ([`crate::xla::device_check`]): a
//! flag computed from an op's operands and a side-effecting custom call
//! that fails the execution when it is set. Nothing is emitted unless a
//! check scope is open on this thread.

use crate::ir::DType;
use crate::xla::device_check;
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Val};

/// Fails the execution with `message()` where any element of `bad` (an
/// `i1` tensor of any shape) is true.
pub(super) fn fail_if(c: &mut Ctx, bad: &Val, message: impl FnOnce() -> String) {
    if !device_check::enabled() || bad.ty.count() == 0 {
        return;
    }
    let flags = c.convert(bad, DType::I32);
    let all: Vec<usize> = (0..flags.ty.rank()).collect();
    let flag = if all.is_empty() { flags } else { c.reduce(&flags, &all, Reducer::Max) };
    let replica = c.replica_id(DType::I32);
    let id = device_check::register(message());
    c.line(&format!(
        "\"stablehlo.custom_call\"({}, {}) {{api_version = 4 : i32, backend_config = {{check = {id} : i64}}, \
         call_target_name = \"{}\", has_side_effect = true}} : (tensor<i32>, tensor<i32>) -> ()",
        replica.name,
        flag.name,
        device_check::TARGET
    ));
}

/// True where `index` is outside `[0, bound)`; `bound` has the index's
/// type and shape.
pub(super) fn outside(c: &mut Ctx, index: &Val, bound: &Val) -> Val {
    let zero = c.splat(&index.ty, 0.0);
    let low = c.compare(index, &zero, Cmp::Lt);
    let high = c.compare(index, bound, Cmp::Ge);
    c.elementwise("or", &[&low, &high])
}

/// Fails where an element of `indices` is outside `[0, bound)`.
pub(super) fn in_range(c: &mut Ctx, indices: &Val, bound: usize, what: impl FnOnce() -> String) {
    if !device_check::enabled() || indices.ty.count() == 0 {
        return;
    }
    let limit = c.splat(&indices.ty, bound as f64);
    let bad = outside(c, indices, &limit);
    fail_if(c, &bad, || format!("{}: an index is outside [0, {bound}) (XLA would clamp it)", what()));
}
