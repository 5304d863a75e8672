//! Builders of XLA's custom calls: `XlaCustomCall` and `XlaCustomCallV2`
//! are one `stablehlo.custom_call` with the op's target
//! (`call_target_name`), `backend_config` and, for V2, `has_side_effect`,
//! of the result types the op declares, as tf2xla's kernels build them.
//! The target runs where the XLA backend links it in: PJRT's CPU plugin
//! runs the sharding targets (a one-device program passes them through)
//! and `TopK`; compiling a program with another target fails in the
//! plugin, naming it.
//!
//! `XlaSend`/`XlaRecv` pass a value within one program: the channel pass
//! ([`crate::passes::xla_ext`]) gives each recv its send's value as an
//! operand, and the recv is that value. XLA's CPU backend has no
//! `send`/`recv` (TensorFlow's bridge fails there too), so no
//! `stablehlo.send`/`recv` is emitted.

use super::Call;
use crate::xla::stablehlo::assemble::mlir_string;
use crate::xla::stablehlo::text::{Ctx, Val};

/// `XlaCustomCall(args...) {target_name, backend_config}` /
/// `XlaCustomCallV2(operands...) {call_target_name, backend_config, has_side_effect}`.
pub(super) fn custom_call(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let v1 = n.op == "XlaCustomCall";
    let key = if v1 { "target_name" } else { "call_target_name" };
    let target = n.attrs.get_str(key).ok_or_else(|| format!("missing string attribute `{key}`"))?;
    if target.is_empty() {
        return Err(format!("`{key}` is empty"));
    }
    let config = n.attrs.get_str("backend_config").unwrap_or("");
    let side_effect = !v1 && n.attrs.get_bool("has_side_effect").unwrap_or(false);
    if n.outputs.is_empty() {
        return Err(
            "a custom call without results is not lowered (its effect would have no value to order it by)".into()
        );
    }
    let operands: Vec<&Val> = n.inputs.iter().collect();
    let attrs = format!(
        "call_target_name = {}, backend_config = {}, has_side_effect = {side_effect}",
        mlir_string(target),
        mlir_string(config)
    );
    Ok(c.op_regions("stablehlo.custom_call", &operands, &[], &attrs, n.outputs))
}

/// `XlaSend(x)`: nothing (its recv reads `x`).
pub(super) fn send(_: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    n.input(0)?;
    Ok(Vec::new())
}

/// `XlaRecv(sent) {tensor_name}`: the sent value.
pub(super) fn recv(_: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let name = n.attrs.get_str("tensor_name").unwrap_or_default();
    let sent = n.inputs.first().ok_or_else(|| format!("no XlaSend was paired with tensor_name `{name}`"))?;
    let out = n.out(0)?;
    if &sent.ty != out {
        return Err(format!("tensor_name `{name}` carries {} but the XlaRecv declares {}", sent.ty.mlir(), out.mlir()));
    }
    Ok(vec![sent.clone()])
}
