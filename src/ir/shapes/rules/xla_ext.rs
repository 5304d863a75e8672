//! Type rules of the XLA extension ops: `SymbolicGradient` gives one
//! gradient per argument of its function, each of that argument's type
//! (its leading operands); `XlaCustomCall` and `XlaCustomCallV2` give the
//! results their attributes declare (`dtype`/`shape`, or
//! `result_dtypes`/`result_shapes`); `XlaRecv` gives its declared
//! `dtype` and `shape`, and `XlaSend` nothing.

use super::{Args, OutType};
use crate::ir::types::Shape;
use crate::ir::{AttrValue, DType};

/// `SymbolicGradient(args..., result gradients...) {Tout}`: each of the first
/// `Tout` operands' types.
pub(super) fn symbolic_gradient(a: &Args) -> Result<Vec<OutType>, String> {
    let tout = types(a, "Tout")?;
    if tout.len() > a.operands.len() {
        return Err(format!("`Tout` has {} types for {} operands", tout.len(), a.operands.len()));
    }
    tout.iter()
        .enumerate()
        .map(|(i, &t)| {
            let x = a.x(i)?;
            if x.dtype != t {
                return Err(format!("`Tout` type {i} is {t} but operand {i} is {}", x.dtype));
            }
            Ok(OutType::new(t, x.shape.to_vec()))
        })
        .collect()
}

/// `XlaCustomCall(args...) {dtype, shape}`: one result.
pub(super) fn custom_call(a: &Args) -> Result<Vec<OutType>, String> {
    let dtype = a.attrs.get("dtype").and_then(AttrValue::as_type).ok_or("missing type attribute `dtype`")?;
    let shape = a.attrs.get("shape").and_then(AttrValue::as_shape).ok_or("missing shape attribute `shape`")?;
    Ok(vec![OutType::new(dtype, static_shape(shape, "`shape`")?)])
}

/// `XlaCustomCallV2(operands...) {result_dtypes, result_shapes}`.
pub(super) fn custom_call_v2(a: &Args) -> Result<Vec<OutType>, String> {
    let dtypes = types(a, "result_dtypes")?;
    let shapes =
        a.attrs.get("result_shapes").and_then(AttrValue::as_list).ok_or("missing list attribute `result_shapes`")?;
    if shapes.len() != dtypes.len() {
        return Err(format!("{} `result_dtypes` but {} `result_shapes`", dtypes.len(), shapes.len()));
    }
    dtypes
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(i, (&t, s))| {
            let s = s.as_shape().ok_or_else(|| format!("`result_shapes` item {i} is not a shape"))?;
            Ok(OutType::new(t, static_shape(s, &format!("`result_shapes` item {i}"))?))
        })
        .collect()
}

/// `XlaRecv() {dtype, shape}`.
pub(super) fn recv(a: &Args) -> Result<Vec<OutType>, String> {
    let dtype = a.attrs.get("dtype").and_then(AttrValue::as_type).ok_or("missing type attribute `dtype`")?;
    let shape = a.attrs.get("shape").and_then(AttrValue::as_shape).ok_or("missing shape attribute `shape`")?;
    Ok(vec![OutType::new(dtype, static_shape(shape, "`shape`")?)])
}

/// `XlaSend(x)`: no results.
pub(super) fn send(a: &Args) -> Result<Vec<OutType>, String> {
    a.x(0)?;
    Ok(Vec::new())
}

/// The types of list attribute `key`.
fn types(a: &Args, key: &str) -> Result<Vec<DType>, String> {
    let list =
        a.attrs.get(key).and_then(AttrValue::as_list).ok_or_else(|| format!("missing list attribute `{key}`"))?;
    list.iter().map(|v| v.as_type().ok_or_else(|| format!("`{key}` holds a non-type"))).collect()
}

/// A fully known shape as dimensions.
fn static_shape(shape: &Shape, what: &str) -> Result<Vec<usize>, String> {
    let dims = shape.dims.as_ref().ok_or_else(|| format!("{what} has unknown rank"))?;
    dims.iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("{what} has an unknown or negative dimension ({d})")))
        .collect()
}
