//! The StableHLO ops [`xla_call_module`](super::xla_call_module) raises,
//! one small function per op, keyed by op name in `TABLE` (sorted).
//!
//! Each function gets the op and the function being built and gives one
//! IR value per result, of the result's type. Elementwise ops map to the
//! TensorFlow op of the same meaning for the operands' dtype (StableHLO's
//! `and` on `i1` is `LogicalAnd`, on integers `BitwiseAnd`; `divide` on
//! integers truncates, `TruncateDiv`); StableHLO's operands of elementwise
//! ops already have one shape, so TensorFlow's broadcasting never applies.
//! Structured ops map to TensorFlow's XLA ops with the same dimension
//! numbers (`XlaDotV2`, `XlaConvV2`, `XlaGather`, `XlaScatter`), operands
//! XLA wants constant becoming `Const`s. Attributes are read from the op,
//! or from inside its structured attribute (`dot_dimension_numbers`,
//! `dimension_numbers`), whichever the decoder gives. Anything an op's
//! conversion does not honour (window reversal, a padded window reduction
//! of several operands, ...) is refused, never dropped. Gathers and scatters with
//! batching dimensions become plain ones: an iota per batching dimension
//! joins the indices, and the operand's batching dimensions are collapsed.

use super::xla_call_module::{static_tensor, tensor_type, Fb, Refusal};
use super::xla_call_module_regions::{
    call, case, composite, if_op, reduce, reduce_window, scatter, select_and_scatter, sort, while_op,
};
use crate::ir::types::{FuncRef, TensorData, TensorLit};
use crate::ir::xla_proto::{ConvolutionDimensionNumbers, DotDimensionNumbers, GatherDimensionNumbers};
use crate::ir::{AttrMap, AttrValue, DType, NodeId};
use crate::syntax::mlir::{Attribute, DenseValues, Operation};
use prost::Message;

/// One IR value: node and output.
pub(super) type V = (NodeId, u32);
/// A conversion.
type Convert = fn(&mut Fb<'_, '_>, &Operation) -> Result<Vec<V>, Refusal>;

/// The conversions, sorted by op name.
const TABLE: &[(&str, Convert)] = &[
    ("func.call", call),
    ("stablehlo.abs", |b, o| unary(b, o, "Abs")),
    ("stablehlo.add", add),
    ("stablehlo.and", |b, o| logical(b, o, "LogicalAnd", "BitwiseAnd")),
    ("stablehlo.atan2", |b, o| binary(b, o, "Atan2")),
    ("stablehlo.bitcast_convert", bitcast_convert),
    ("stablehlo.broadcast_in_dim", broadcast_in_dim),
    ("stablehlo.case", case),
    ("stablehlo.ceil", |b, o| unary(b, o, "Ceil")),
    ("stablehlo.clamp", clamp),
    ("stablehlo.compare", compare),
    ("stablehlo.composite", composite),
    ("stablehlo.concatenate", concatenate),
    ("stablehlo.constant", constant),
    ("stablehlo.convert", convert_op),
    ("stablehlo.convolution", convolution),
    ("stablehlo.cosine", |b, o| unary(b, o, "Cos")),
    ("stablehlo.divide", divide),
    ("stablehlo.dot_general", dot_general),
    ("stablehlo.dynamic_slice", dynamic_slice),
    ("stablehlo.dynamic_update_slice", dynamic_update_slice),
    ("stablehlo.exponential", |b, o| unary(b, o, "Exp")),
    ("stablehlo.exponential_minus_one", |b, o| unary(b, o, "Expm1")),
    ("stablehlo.floor", |b, o| unary(b, o, "Floor")),
    ("stablehlo.gather", gather),
    ("stablehlo.if", if_op),
    ("stablehlo.iota", iota),
    ("stablehlo.is_finite", |b, o| unary(b, o, "IsFinite")),
    ("stablehlo.log", |b, o| unary(b, o, "Log")),
    ("stablehlo.log_plus_one", |b, o| unary(b, o, "Log1p")),
    ("stablehlo.logistic", |b, o| unary(b, o, "Sigmoid")),
    ("stablehlo.maximum", |b, o| logical(b, o, "LogicalOr", "Maximum")),
    ("stablehlo.minimum", |b, o| logical(b, o, "LogicalAnd", "Minimum")),
    ("stablehlo.multiply", |b, o| logical(b, o, "LogicalAnd", "Mul")),
    ("stablehlo.negate", |b, o| unary(b, o, "Neg")),
    ("stablehlo.not", not),
    ("stablehlo.optimization_barrier", optimization_barrier),
    ("stablehlo.or", |b, o| logical(b, o, "LogicalOr", "BitwiseOr")),
    ("stablehlo.pad", pad),
    ("stablehlo.power", |b, o| binary(b, o, "Pow")),
    ("stablehlo.reduce", reduce),
    ("stablehlo.reduce_precision", reduce_precision),
    ("stablehlo.reduce_window", reduce_window),
    ("stablehlo.remainder", |b, o| binary(b, o, "TruncateMod")),
    ("stablehlo.reshape", reshape),
    ("stablehlo.reverse", reverse),
    ("stablehlo.round_nearest_even", |b, o| unary(b, o, "Rint")),
    ("stablehlo.rsqrt", |b, o| unary(b, o, "Rsqrt")),
    ("stablehlo.scatter", scatter),
    ("stablehlo.select", select),
    ("stablehlo.select_and_scatter", select_and_scatter),
    ("stablehlo.shift_left", |b, o| binary(b, o, "LeftShift")),
    ("stablehlo.shift_right_arithmetic", shift_right_arithmetic),
    ("stablehlo.shift_right_logical", shift_right_logical),
    ("stablehlo.sign", |b, o| unary(b, o, "Sign")),
    ("stablehlo.sine", |b, o| unary(b, o, "Sin")),
    ("stablehlo.slice", slice),
    ("stablehlo.sort", sort),
    ("stablehlo.sqrt", |b, o| unary(b, o, "Sqrt")),
    ("stablehlo.subtract", |b, o| binary(b, o, "Sub")),
    ("stablehlo.tan", |b, o| unary(b, o, "Tan")),
    ("stablehlo.tanh", |b, o| unary(b, o, "Tanh")),
    ("stablehlo.transpose", transpose),
    ("stablehlo.while", while_op),
    ("stablehlo.xor", |b, o| logical(b, o, "NotEqual", "BitwiseXor")),
];

/// The StableHLO ops the raise converts, sorted.
pub fn supported_ops() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|(name, _)| *name)
}

/// Converts `op` into the function being built.
pub(super) fn convert(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    match TABLE.binary_search_by(|(name, _)| (*name).cmp(op.name.as_str())) {
        Ok(i) => (TABLE[i].1)(b, op),
        Err(_) => Err(Refusal::Other("the raise has no conversion for it".into())),
    }
}

// ---------------------------------------------------------------- helpers

/// Operand `i`: where it is.
pub(super) fn input(b: &Fb<'_, '_>, op: &Operation, i: usize) -> Result<V, Refusal> {
    let id = op.operands.get(i).ok_or_else(|| format!("it has no operand {i}"))?;
    b.at(*id)
}

/// Operand `i`'s dtype and dimensions.
pub(super) fn in_ty(b: &Fb<'_, '_>, op: &Operation, i: usize) -> Result<(DType, Vec<i64>), Refusal> {
    let id = op.operands.get(i).ok_or_else(|| format!("it has no operand {i}"))?;
    b.ty(*id)
}

/// Result `i`'s dtype and dimensions.
pub(super) fn out_ty(op: &Operation, i: usize) -> Result<(DType, Vec<i64>), Refusal> {
    tensor_type(&op.results.get(i).ok_or_else(|| format!("it has no result {i}"))?.ty)
}

/// Every operand, in order.
pub(super) fn inputs(b: &Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    (0..op.operands.len()).map(|i| input(b, op, i)).collect()
}

/// Attribute `name` of `op`, or field `name` of its structured attribute `within`.
fn attr<'o>(op: &'o Operation, within: &str, name: &str) -> Option<&'o Attribute> {
    op.attribute(name).or_else(|| match op.attribute(within) {
        Some(Attribute::Struct { fields, .. }) => fields.iter().find(|f| f.name == name).map(|f| &f.value),
        _ => None,
    })
}

/// The integers of an array-like attribute.
pub(super) fn int_list(a: &Attribute) -> Result<Vec<i64>, Refusal> {
    let from = |v: &DenseValues| match v {
        DenseValues::Int(v) => Ok(v.clone()),
        DenseValues::UInt(v) => Ok(v.iter().map(|&x| x as i64).collect()),
        DenseValues::Bool(v) => Ok(v.iter().map(|&x| i64::from(x)).collect()),
        _ => Err(Refusal::Other("an integer list holds non-integers".into())),
    };
    match a {
        Attribute::DenseArray { values, .. } => from(values),
        Attribute::DenseElements { ty, values, splat } => {
            let v = from(values)?;
            if *splat {
                let (_, dims) = static_tensor(ty)?;
                Ok(vec![v.first().copied().unwrap_or(0); dims.iter().product::<i64>().max(0) as usize])
            } else {
                Ok(v)
            }
        }
        Attribute::Array(items) => items.iter().map(int).collect(),
        Attribute::Integer { value, .. } => Ok(vec![*value as i64]),
        other => Err(Refusal::Other(format!("expected a list of integers, found {other:?}"))),
    }
}

/// An integer attribute's value.
pub(super) fn int(a: &Attribute) -> Result<i64, Refusal> {
    match a {
        Attribute::Integer { value, .. } => i64::try_from(*value).map_err(|_| "an integer out of range".into()),
        Attribute::Bool(b) => Ok(i64::from(*b)),
        other => Err(Refusal::Other(format!("expected an integer, found {other:?}"))),
    }
}

/// The integers of attribute `name` (within `within`), or `default` when absent.
pub(super) fn ints_or(op: &Operation, within: &str, name: &str, default: Vec<i64>) -> Result<Vec<i64>, Refusal> {
    attr(op, within, name).map_or(Ok(default), int_list)
}

/// An integer attribute (within `within`), or `default` when absent.
pub(super) fn int_or(op: &Operation, within: &str, name: &str, default: i64) -> Result<i64, Refusal> {
    attr(op, within, name).map_or(Ok(default), int)
}

/// A boolean attribute, or `false` when absent.
pub(super) fn flag(op: &Operation, name: &str) -> bool {
    matches!(op.attribute(name), Some(Attribute::Bool(true)))
}

/// The value of an enum attribute (`GT` of `#stablehlo<comparison_direction GT>`).
fn enum_value<'o>(op: &'o Operation, name: &str) -> Result<&'o str, Refusal> {
    match op.attribute(name) {
        Some(Attribute::Enum { value, .. }) => Ok(value),
        Some(Attribute::String(s)) => std::str::from_utf8(s).map_err(|_| "a non-UTF-8 enum".into()),
        other => Err(Refusal::Other(format!("attribute `{name}` is {other:?}, not an enum"))),
    }
}

/// A list of dtypes.
pub(super) fn types(ts: &[DType]) -> AttrValue {
    AttrValue::List(ts.iter().map(|&t| AttrValue::Type(t)).collect())
}

/// A function reference.
pub(super) fn func(name: String) -> AttrValue {
    AttrValue::Func(Box::new(FuncRef { name, attrs: AttrMap::new() }))
}

/// The `T` attribute of dtype `t`.
pub(super) fn t(dtype: DType) -> (&'static str, AttrValue) {
    ("T", AttrValue::Type(dtype))
}

/// The literal of `dtype` and `shape` holding `values` (one value fills the shape).
pub(super) fn literal(dtype: DType, shape: Vec<i64>, values: &DenseValues) -> Result<TensorLit, Refusal> {
    let floats = || -> Vec<f64> {
        match values {
            DenseValues::Float(v) => v.clone(),
            DenseValues::Int(v) => v.iter().map(|&x| x as f64).collect(),
            DenseValues::UInt(v) => v.iter().map(|&x| x as f64).collect(),
            DenseValues::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
            DenseValues::Complex(v) => v.iter().step_by(2).copied().collect(),
        }
    };
    let ints = || -> Vec<i64> {
        match values {
            DenseValues::Int(v) => v.clone(),
            DenseValues::UInt(v) => v.iter().map(|&x| x as i64).collect(),
            DenseValues::Bool(v) => v.iter().map(|&x| i64::from(x)).collect(),
            DenseValues::Float(v) => v.iter().map(|&x| x as i64).collect(),
            DenseValues::Complex(v) => v.iter().step_by(2).map(|&x| x as i64).collect(),
        }
    };
    let data = match dtype {
        DType::F32 => TensorData::Float(floats().iter().map(|&x| x as f32).collect()),
        DType::F64 => TensorData::Double(floats()),
        DType::F16 => TensorData::Half(floats().iter().map(|&x| i32::from(half::f16::from_f64(x).to_bits())).collect()),
        DType::BF16 => {
            TensorData::Half(floats().iter().map(|&x| i32::from(half::bf16::from_f64(x).to_bits())).collect())
        }
        DType::Bool => TensorData::Bool(ints().iter().map(|&x| x != 0).collect()),
        DType::I8 | DType::I16 | DType::I32 | DType::U8 | DType::U16 => {
            TensorData::Int(ints().iter().map(|&x| x as i32).collect())
        }
        DType::I64 => TensorData::Int64(ints()),
        DType::U32 => TensorData::Uint32(ints().iter().map(|&x| x as u32).collect()),
        DType::U64 => match values {
            DenseValues::UInt(v) => TensorData::Uint64(v.clone()),
            _ => TensorData::Uint64(ints().iter().map(|&x| x as u64).collect()),
        },
        other => return Err(Refusal::Other(format!("a {other} constant"))),
    };
    Ok(TensorLit { dtype, shape, data })
}

// ---------------------------------------------------------------- elementwise

/// True for the unsigned integer dtypes.
fn unsigned(dtype: DType) -> bool {
    matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64)
}

fn unary(b: &mut Fb<'_, '_>, op: &Operation, tf: &str) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    let x = input(b, op, 0)?;
    Ok(vec![(b.node(tf, &[x], vec![t(dtype)]), 0)])
}

fn binary(b: &mut Fb<'_, '_>, op: &Operation, tf: &str) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    let (x, y) = (input(b, op, 0)?, input(b, op, 1)?);
    Ok(vec![(b.node(tf, &[x, y], vec![t(dtype)]), 0)])
}

/// An op whose meaning on `i1` is a logical one (`on_bool`), else `other`.
fn logical(b: &mut Fb<'_, '_>, op: &Operation, on_bool: &str, other: &str) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    if dtype != DType::Bool {
        return binary(b, op, other);
    }
    let (x, y) = (input(b, op, 0)?, input(b, op, 1)?);
    let attrs = if on_bool == "NotEqual" { vec![t(dtype)] } else { Vec::new() };
    Ok(vec![(b.node(on_bool, &[x, y], attrs), 0)])
}

fn add(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    logical(b, op, "LogicalOr", "AddV2")
}

fn divide(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    let exact = matches!(dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::C64 | DType::C128);
    binary(b, op, if exact { "Div" } else { "TruncateDiv" })
}

fn not(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    let x = input(b, op, 0)?;
    Ok(vec![if dtype == DType::Bool {
        (b.node("LogicalNot", &[x], Vec::new()), 0)
    } else {
        (b.node("Invert", &[x], vec![t(dtype)]), 0)
    }])
}

fn shift_right_arithmetic(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    if unsigned(dtype) {
        return Err("an arithmetic right shift of unsigned integers".into());
    }
    binary(b, op, "RightShift")
}

fn shift_right_logical(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    if !unsigned(dtype) {
        return Err("a logical right shift of signed integers".into());
    }
    binary(b, op, "RightShift")
}

fn compare(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let direction = enum_value(op, "comparison_direction")?;
    let tf = match direction {
        "EQ" => "Equal",
        "NE" => "NotEqual",
        "LT" => "Less",
        "LE" => "LessEqual",
        "GT" => "Greater",
        "GE" => "GreaterEqual",
        other => return Err(Refusal::Other(format!("comparison direction {other}"))),
    };
    let (dtype, _) = in_ty(b, op, 0)?;
    let (mut x, mut y) = (input(b, op, 0)?, input(b, op, 1)?);
    let mut dtype = dtype;
    if dtype == DType::Bool && !matches!(tf, "Equal" | "NotEqual") {
        // TensorFlow orders no bools: compare them as 0 and 1.
        x = cast(b, x, DType::Bool, DType::I32);
        y = cast(b, y, DType::Bool, DType::I32);
        dtype = DType::I32;
    }
    Ok(vec![(b.node(tf, &[x, y], vec![t(dtype)]), 0)])
}

fn select(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 1)?;
    let ins = inputs(b, op)?;
    Ok(vec![(b.node("SelectV2", &ins, vec![t(dtype)]), 0)])
}

fn clamp(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 1)?;
    let (lo, x, hi) = (input(b, op, 0)?, input(b, op, 1)?, input(b, op, 2)?);
    let up = b.node("Maximum", &[x, lo], vec![t(dtype)]);
    Ok(vec![(b.node("Minimum", &[(up, 0), hi], vec![t(dtype)]), 0)])
}

/// A `Cast` of `x` from `from` to `to`.
fn cast(b: &mut Fb<'_, '_>, x: V, from: DType, to: DType) -> V {
    let attrs =
        vec![("SrcT", AttrValue::Type(from)), ("DstT", AttrValue::Type(to)), ("Truncate", AttrValue::Bool(false))];
    (b.node("Cast", &[x], attrs), 0)
}

fn convert_op(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let ((from, _), (to, _)) = (in_ty(b, op, 0)?, out_ty(op, 0)?);
    let x = input(b, op, 0)?;
    if from == to {
        return Ok(vec![(b.node("Identity", &[x], vec![t(from)]), 0)]);
    }
    Ok(vec![cast(b, x, from, to)])
}

fn bitcast_convert(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let ((from, fdims), (to, tdims)) = (in_ty(b, op, 0)?, out_ty(op, 0)?);
    if fdims != tdims {
        return Err("a bitcast between element types of different widths".into());
    }
    let x = input(b, op, 0)?;
    Ok(vec![(b.node("Bitcast", &[x], vec![t(from), ("type", AttrValue::Type(to))]), 0)])
}

fn constant(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, dims) = out_ty(op, 0)?;
    let Some(Attribute::DenseElements { values, .. }) = op.attribute("value") else {
        return Err("its `value` is not a dense elements attribute".into());
    };
    Ok(vec![b.constant(literal(dtype, dims, values)?)])
}

fn iota(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, dims) = out_ty(op, 0)?;
    let d = usize::try_from(int_or(op, "", "iota_dimension", 0)?).ok().filter(|&d| d < dims.len());
    let d = d.ok_or("`iota_dimension` is outside the result's rank")?;
    Ok(vec![iota_of(b, dtype, &dims, d)])
}

/// A tensor of shape `dims` and dtype `dtype` counting 0, 1, ... along `d`.
fn iota_of(b: &mut Fb<'_, '_>, dtype: DType, dims: &[i64], d: usize) -> V {
    let zero = b.scalar(DType::I64, 0.0);
    let n = b.scalar(DType::I64, dims[d] as f64);
    let one = b.scalar(DType::I64, 1.0);
    let range = b.node("Range", &[zero, n, one], vec![("Tidx", AttrValue::Type(DType::I64))]);
    let values = if dtype == DType::I64 { (range, 0) } else { cast(b, (range, 0), DType::I64, dtype) };
    let mut shape = vec![1; dims.len()];
    shape[d] = dims[d];
    let to = b.ints(&shape);
    let r = b.node("Reshape", &[values, to], vec![t(dtype), ("Tshape", AttrValue::Type(DType::I64))]);
    let full = b.ints(dims);
    (b.node("BroadcastTo", &[(r, 0), full], vec![t(dtype), ("Tidx", AttrValue::Type(DType::I64))]), 0)
}

/// The indices of a gather or scatter with batching dimensions, made plain:
/// each index vector gets, per batching dimension, its own position along
/// that dimension of the indices (an iota) appended. The operand's batching
/// dimensions then become collapsed dimensions indexed by those positions,
/// which selects the same elements. Gives the indices and their index
/// vector dimension (a trailing one is made explicit).
pub(super) fn unbatched_indices(
    b: &mut Fb<'_, '_>,
    indices: V,
    (it, idims): (DType, Vec<i64>),
    index_vector_dim: i64,
    batching: &[i64],
) -> Result<(V, i64), Refusal> {
    let ivd = usize::try_from(index_vector_dim).ok().filter(|&d| d <= idims.len());
    let ivd = ivd.ok_or("`index_vector_dim` is outside the indices' rank")?;
    let (mut parts, mut dims) = (vec![indices], idims.clone());
    if ivd == idims.len() {
        dims.push(1);
        parts[0] = reshape_to(b, indices, it, &dims);
    }
    let mut one = dims.clone();
    one[ivd] = 1;
    for &d in batching {
        let d = usize::try_from(d).ok().filter(|&d| d < dims.len() && d != ivd);
        let d = d.ok_or("a batching dimension of the indices is outside their rank or their index vector")?;
        parts.push(iota_of(b, it, &one, d));
    }
    let n = parts.len() as i64;
    parts.push(b.scalar(DType::I64, ivd as f64));
    let attrs = vec![("N", AttrValue::Int(n)), t(it), ("Tidx", AttrValue::Type(DType::I64))];
    Ok(((b.node("ConcatV2", &parts, attrs), 0), ivd as i64))
}

/// `dims` and `more`, sorted.
pub(super) fn merged(dims: &[i64], more: &[i64]) -> Vec<i64> {
    let mut all = [dims, more].concat();
    all.sort_unstable();
    all
}

// ---------------------------------------------------------------- shapes

fn reshape_to(b: &mut Fb<'_, '_>, x: V, dtype: DType, dims: &[i64]) -> V {
    let to = b.ints(dims);
    (b.node("Reshape", &[x, to], vec![t(dtype), ("Tshape", AttrValue::Type(DType::I64))]), 0)
}

fn reshape(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, dims) = out_ty(op, 0)?;
    let x = input(b, op, 0)?;
    Ok(vec![reshape_to(b, x, dtype, &dims)])
}

fn transpose(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    let perm = ints_or(op, "", "permutation", Vec::new())?;
    let x = input(b, op, 0)?;
    let p = b.ints(&perm);
    Ok(vec![(b.node("Transpose", &[x, p], vec![t(dtype), ("Tperm", AttrValue::Type(DType::I64))]), 0)])
}

fn broadcast_in_dim(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, in_dims) = in_ty(b, op, 0)?;
    let (_, out_dims) = out_ty(op, 0)?;
    let map = ints_or(op, "", "broadcast_dimensions", Vec::new())?;
    if map.len() != in_dims.len() || map.iter().any(|&d| d < 0 || d as usize >= out_dims.len()) {
        return Err("`broadcast_dimensions` does not map the operand into the result".into());
    }
    let mut x = input(b, op, 0)?;
    // Put the operand's dimensions in the order they take in the result.
    let mut order: Vec<usize> = (0..map.len()).collect();
    order.sort_by_key(|&i| map[i]);
    if order.iter().enumerate().any(|(k, &i)| k != i) {
        let perm: Vec<i64> = order.iter().map(|&i| i as i64).collect();
        let p = b.ints(&perm);
        x = (b.node("Transpose", &[x, p], vec![t(dtype), ("Tperm", AttrValue::Type(DType::I64))]), 0);
    }
    let mut shape = vec![1; out_dims.len()];
    for &i in &order {
        shape[map[i] as usize] = in_dims[i];
    }
    if shape != in_dims {
        x = reshape_to(b, x, dtype, &shape);
    }
    if shape == out_dims {
        return Ok(vec![(b.node("Identity", &[x], vec![t(dtype)]), 0)]);
    }
    let full = b.ints(&out_dims);
    Ok(vec![(b.node("BroadcastTo", &[x, full], vec![t(dtype), ("Tidx", AttrValue::Type(DType::I64))]), 0)])
}

fn slice(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, dims) = in_ty(b, op, 0)?;
    let start = ints_or(op, "", "start_indices", Vec::new())?;
    let limit = ints_or(op, "", "limit_indices", Vec::new())?;
    let strides = ints_or(op, "", "strides", vec![1; dims.len()])?;
    let x = input(b, op, 0)?;
    let (s, l, k) = (b.ints(&start), b.ints(&limit), b.ints(&strides));
    let mut attrs = vec![t(dtype), ("Index", AttrValue::Type(DType::I64))];
    for mask in ["begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"] {
        attrs.push((mask, AttrValue::Int(0)));
    }
    Ok(vec![(b.node("StridedSlice", &[x, s, l, k], attrs), 0)])
}

/// The scalar operands from `from` on, as one i64 vector.
fn index_vector(b: &mut Fb<'_, '_>, op: &Operation, from: usize) -> Result<V, Refusal> {
    let mut items = Vec::new();
    for i in from..op.operands.len() {
        let (dtype, dims) = in_ty(b, op, i)?;
        if !dims.is_empty() {
            return Err("a start index that is not a scalar".into());
        }
        let x = input(b, op, i)?;
        items.push(if dtype == DType::I64 { x } else { cast(b, x, dtype, DType::I64) });
    }
    let n = items.len() as i64;
    Ok((b.node("Pack", &items, vec![("N", AttrValue::Int(n)), t(DType::I64), ("axis", AttrValue::Int(0))]), 0))
}

fn dynamic_slice(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    let sizes = ints_or(op, "", "slice_sizes", Vec::new())?;
    let x = input(b, op, 0)?;
    let starts = index_vector(b, op, 1)?;
    let sizes = b.ints(&sizes);
    let attrs = vec![t(dtype), ("Tindices", AttrValue::Type(DType::I64))];
    Ok(vec![(b.node("XlaDynamicSlice", &[x, starts, sizes], attrs), 0)])
}

fn dynamic_update_slice(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    let (x, update) = (input(b, op, 0)?, input(b, op, 1)?);
    let starts = index_vector(b, op, 2)?;
    let attrs = vec![t(dtype), ("Tindices", AttrValue::Type(DType::I64))];
    Ok(vec![(b.node("XlaDynamicUpdateSlice", &[x, update, starts], attrs), 0)])
}

fn concatenate(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = out_ty(op, 0)?;
    let axis = int_or(op, "", "dimension", 0)?;
    let mut ins = inputs(b, op)?;
    let n = ins.len() as i64;
    ins.push(b.scalar(DType::I64, axis as f64));
    let attrs = vec![("N", AttrValue::Int(n)), t(dtype), ("Tidx", AttrValue::Type(DType::I64))];
    Ok(vec![(b.node("ConcatV2", &ins, attrs), 0)])
}

fn pad(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, dims) = in_ty(b, op, 0)?;
    let low = ints_or(op, "", "edge_padding_low", vec![0; dims.len()])?;
    let high = ints_or(op, "", "edge_padding_high", vec![0; dims.len()])?;
    let interior = ints_or(op, "", "interior_padding", vec![0; dims.len()])?;
    let (x, value) = (input(b, op, 0)?, input(b, op, 1)?);
    let (l, h, i) = (b.ints(&low), b.ints(&high), b.ints(&interior));
    let attrs = vec![t(dtype), ("Tindices", AttrValue::Type(DType::I64))];
    Ok(vec![(b.node("XlaPad", &[x, value, l, h, i], attrs), 0)])
}

fn reverse(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    let dims = ints_or(op, "", "dimensions", Vec::new())?;
    let x = input(b, op, 0)?;
    let axes = b.ints(&dims);
    Ok(vec![(b.node("ReverseV2", &[x, axes], vec![t(dtype), ("Tidx", AttrValue::Type(DType::I64))]), 0)])
}

fn optimization_barrier(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let ins = inputs(b, op)?;
    let dtypes = (0..ins.len()).map(|i| in_ty(b, op, i).map(|t| t.0)).collect::<Result<Vec<_>, _>>()?;
    let id = b.node("IdentityN", &ins, vec![("T", types(&dtypes))]);
    Ok((0..ins.len() as u32).map(|k| (id, k)).collect())
}

fn reduce_precision(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, _) = in_ty(b, op, 0)?;
    let e = int_or(op, "", "exponent_bits", 8)?;
    let m = int_or(op, "", "mantissa_bits", 23)?;
    let x = input(b, op, 0)?;
    let attrs = vec![t(dtype), ("exponent_bits", AttrValue::Int(e)), ("mantissa_bits", AttrValue::Int(m))];
    Ok(vec![(b.node("XlaReducePrecision", &[x], attrs), 0)])
}

// ---------------------------------------------------------------- structured

/// A serialized XLA message as a bytes attribute.
pub(super) fn proto(m: &impl Message) -> AttrValue {
    AttrValue::Bytes(m.encode_to_vec())
}

fn dot_general(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let w = "dot_dimension_numbers";
    let dims = DotDimensionNumbers {
        lhs_batch_dimensions: ints_or(op, w, "lhs_batching_dimensions", Vec::new())?,
        rhs_batch_dimensions: ints_or(op, w, "rhs_batching_dimensions", Vec::new())?,
        lhs_contracting_dimensions: ints_or(op, w, "lhs_contracting_dimensions", Vec::new())?,
        rhs_contracting_dimensions: ints_or(op, w, "rhs_contracting_dimensions", Vec::new())?,
    };
    let ((lt, _), (rt, _), (out, _)) = (in_ty(b, op, 0)?, in_ty(b, op, 1)?, out_ty(op, 0)?);
    let (x, y) = (input(b, op, 0)?, input(b, op, 1)?);
    let attrs = vec![
        ("LhsT", AttrValue::Type(lt)),
        ("RhsT", AttrValue::Type(rt)),
        ("dimension_numbers", proto(&dims)),
        ("precision_config", AttrValue::Bytes(Vec::new())),
        ("preferred_element_type", AttrValue::Type(out)),
    ];
    Ok(vec![(b.node("XlaDotV2", &[x, y], attrs), 0)])
}

fn convolution(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let w = "dimension_numbers";
    let one = |name: &str| -> Result<i64, Refusal> {
        attr(op, w, name).ok_or_else(|| Refusal::Other(format!("no `{name}`"))).and_then(int)
    };
    let many = |name: &str| ints_or(op, w, name, Vec::new());
    let dims = ConvolutionDimensionNumbers {
        input_batch_dimension: one("input_batch_dimension")?,
        input_feature_dimension: one("input_feature_dimension")?,
        input_spatial_dimensions: many("input_spatial_dimensions")?,
        kernel_input_feature_dimension: one("kernel_input_feature_dimension")?,
        kernel_output_feature_dimension: one("kernel_output_feature_dimension")?,
        kernel_spatial_dimensions: many("kernel_spatial_dimensions")?,
        output_batch_dimension: one("output_batch_dimension")?,
        output_feature_dimension: one("output_feature_dimension")?,
        output_spatial_dimensions: many("output_spatial_dimensions")?,
    };
    let n = dims.input_spatial_dimensions.len();
    if ints_or(op, "", "window_reversal", Vec::new())?.iter().any(|&r| r != 0) {
        return Err("window reversal".into());
    }
    let strides = ints_or(op, "", "window_strides", vec![1; n])?;
    let padding = ints_or(op, "", "padding", vec![0; 2 * n])?;
    let lhs_dilation = ints_or(op, "", "lhs_dilation", vec![1; n])?;
    let rhs_dilation = ints_or(op, "", "rhs_dilation", vec![1; n])?;
    let groups = int_or(op, "", "feature_group_count", 1)?;
    let batch_groups = int_or(op, "", "batch_group_count", 1)?;
    let ((lt, _), (rt, _), (out, _)) = (in_ty(b, op, 0)?, in_ty(b, op, 1)?, out_ty(op, 0)?);
    let (x, k) = (input(b, op, 0)?, input(b, op, 1)?);
    let s = b.ints(&strides);
    let p = b.ints_shaped(&padding, vec![n as i64, 2]);
    let (ld, rd) = (b.ints(&lhs_dilation), b.ints(&rhs_dilation));
    let g = b.scalar(DType::I64, groups as f64);
    let attrs = vec![
        ("LhsT", AttrValue::Type(lt)),
        ("RhsT", AttrValue::Type(rt)),
        ("Tindices", AttrValue::Type(DType::I64)),
        ("dimension_numbers", proto(&dims)),
        ("precision_config", AttrValue::Bytes(Vec::new())),
        ("preferred_element_type", AttrValue::Type(out)),
        ("batch_group_count", AttrValue::Int(batch_groups)),
    ];
    Ok(vec![(b.node("XlaConvV2", &[x, k, s, p, ld, rd, g], attrs), 0)])
}

fn gather(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let w = "dimension_numbers";
    let dims = GatherDimensionNumbers {
        offset_dims: ints_or(op, w, "offset_dims", Vec::new())?,
        collapsed_slice_dims: ints_or(op, w, "collapsed_slice_dims", Vec::new())?,
        start_index_map: ints_or(op, w, "start_index_map", Vec::new())?,
        index_vector_dim: int_or(op, w, "index_vector_dim", 0)?,
        operand_batching_dims: ints_or(op, w, "operand_batching_dims", Vec::new())?,
        start_indices_batching_dims: ints_or(op, w, "start_indices_batching_dims", Vec::new())?,
    };
    let sizes = ints_or(op, "", "slice_sizes", Vec::new())?;
    let ((dtype, _), (it, idims)) = (in_ty(b, op, 0)?, in_ty(b, op, 1)?);
    let (x, mut idx) = (input(b, op, 0)?, input(b, op, 1)?);
    let mut dims = dims;
    if !dims.operand_batching_dims.is_empty() || !dims.start_indices_batching_dims.is_empty() {
        if dims.operand_batching_dims.len() != dims.start_indices_batching_dims.len() {
            return Err("batching dimensions of the operand and the indices that do not pair".into());
        }
        let batching = std::mem::take(&mut dims.start_indices_batching_dims);
        (idx, dims.index_vector_dim) = unbatched_indices(b, idx, (it, idims), dims.index_vector_dim, &batching)?;
        let operand = std::mem::take(&mut dims.operand_batching_dims);
        dims.collapsed_slice_dims = merged(&dims.collapsed_slice_dims, &operand);
        dims.start_index_map.extend(operand);
    }
    let sizes = if it == DType::I64 { b.ints(&sizes) } else { index_const(b, &sizes, it)? };
    let attrs = vec![
        t(dtype),
        ("Tindices", AttrValue::Type(it)),
        ("dimension_numbers", proto(&dims)),
        ("indices_are_sorted", AttrValue::Bool(flag(op, "indices_are_sorted"))),
    ];
    Ok(vec![(b.node("XlaGather", &[x, idx, sizes], attrs), 0)])
}

/// A vector `Const` of index dtype `dtype`.
fn index_const(b: &mut Fb<'_, '_>, values: &[i64], dtype: DType) -> Result<V, Refusal> {
    Ok(b.constant(literal(dtype, vec![values.len() as i64], &DenseValues::Int(values.to_vec()))?))
}
