//! The emitting side of device checks ([`crate::xla::device_check`]): a
//! flag computed from an op's operands and a side-effecting custom call
//! that fails the execution when it is set. Nothing is emitted unless a
//! check scope is open on this thread. Each helper takes the op's own
//! operands, before any broadcast, so a check costs a compare and a
//! reduction over the index or divisor tensor.

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

/// Fails where an index vector (the last dimension of `indices`, of
/// length `bounds.len()`) addresses outside the leading `bounds` of a
/// tensor, as `GatherNd` and the scatters address theirs.
pub(super) fn nd_in_range(c: &mut Ctx, indices: &Val, bounds: &[usize], what: impl FnOnce() -> String) {
    if !device_check::enabled() || indices.ty.count() == 0 {
        return;
    }
    let limits = crate::exec::Tensor::vector(bounds.iter().map(|&d| d as i64).collect::<Vec<i64>>());
    let limits = c.constant(&limits);
    let limits = if indices.ty.dtype == DType::I64 { limits } else { c.convert(&limits, indices.ty.dtype) };
    let limits = c.broadcast_to(&limits, &indices.ty.shape);
    let bad = outside(c, indices, &limits);
    fail_if(c, &bad, || format!("{}: an index is outside the bounds {bounds:?} (XLA would skip its update)", what()));
}

/// Fails where an element of `ids` is `bound` or more (negative ids pass:
/// `UnsortedSegmentSum` drops them, on TensorFlow's CPU kernels and on XLA).
pub(super) fn below(c: &mut Ctx, ids: &Val, bound: usize, what: impl FnOnce() -> String) {
    if !device_check::enabled() || ids.ty.count() == 0 {
        return;
    }
    let limit = c.splat(&ids.ty, bound as f64);
    let bad = c.compare(ids, &limit, Cmp::Ge);
    fail_if(c, &bad, || format!("{}: an id is {bound} or more (XLA would drop its row)", what()));
}

/// Fails where an element of the integer divisor `b` is 0: TensorFlow's
/// CPU kernels and the simulator refuse an integer division by zero, and
/// XLA gives -1 (a quotient) or the dividend (a remainder).
pub(super) fn nonzero_divisor(c: &mut Ctx, b: &Val, op: &str) {
    if !device_check::enabled() || b.ty.count() == 0 || super::is_float(b.ty.dtype) {
        return;
    }
    let zero = c.splat(&b.ty, 0.0);
    let bad = c.compare(b, &zero, Cmp::Eq);
    fail_if(c, &bad, || format!("{op}: integer division by zero"));
}

/// `Assert(condition, data...)` inside a device program (a function body
/// the cluster calls): fails the step where the condition is false, as
/// TensorFlow's CPU kernel and the simulator do. Without device checks it
/// is nothing, as TensorFlow's XLA bridge compiles it. The data operands
/// are not printed (they stay on the host's side in TensorFlow too).
pub(super) fn assert(c: &mut Ctx, n: &super::Call) -> Result<Vec<Val>, String> {
    let condition = n.input(0)?;
    if condition.ty.dtype != DType::Bool {
        return Err(format!("the condition is {}, not bool", condition.ty.dtype));
    }
    if device_check::enabled() {
        let bad = c.elementwise("not", &[condition]);
        fail_if(c, &bad, || format!("{}: assertion failed", n.op));
    }
    Ok(Vec::new())
}
