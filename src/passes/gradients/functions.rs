//! Gradient functions: for each op type, the gradients of its inputs given those of its outputs.
//!
//! They follow TensorFlow's registered gradients and emit the same standard ops, with dynamic
//! shapes (`Shape`, `BroadcastGradientArgs`, `Sum` over the reduction indices, `Reshape`) so that
//! no static shape is needed. Op names follow TensorFlow's where it has a fixed one (`Mul`,
//! `Sum/reduction_indices`, `TanhGrad_grad/mul/y`, ...).

use super::emitter::{Emitter, TAttr, Tensor};
use crate::ir::{AttrValue, DType, NodeId};

/// `x` conjugated when `t` is complex: TensorFlow's gradients of complex
/// products and quotients take the conjugates of the operands.
fn conj_if_complex(e: &mut Emitter<'_>, t: Option<DType>, x: Tensor) -> Tensor {
    match t {
        Some(d @ (DType::C64 | DType::C128)) => e.emit("Conj", "Conj", &[x], [("T", AttrValue::Type(d))]),
        _ => x,
    }
}

/// Why an op passes no gradient: `None` when its type has no gradient function, `Some(reason)` when
/// the type has one but not for this use.
pub type Unsupported = Option<String>;

/// The gradient of each data input of `op` (`inputs`, by slot), given the gradients of its outputs
/// (`None` where an output received none). Must not be called with all `out_grads` `None`.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let op_type = e.graph.node(op).op.clone();
    let n = inputs.len();
    let none = || vec![None; n];
    if is_not_differentiable(&op_type) {
        return Ok(none());
    }
    // IdentityN passes each output's gradient to its input, none where an output received none.
    if &*op_type == "IdentityN" {
        let mut grads = out_grads.to_vec();
        grads.resize(n, None);
        return Ok(grads);
    }
    // Ops whose gradient reads the gradients of outputs after 0.
    if let Some(result) = super::multi_output::gradient(e, op, &op_type, inputs, out_grads) {
        return result;
    }
    // The factorizations (Qr, the eigen and singular value decompositions) read every output's gradient.
    if let Some(result) = super::linalg_solve_functions::multi_output(e, op, &op_type, inputs, out_grads) {
        return result;
    }
    // The batch norm backprops read the gradients of their three backprops.
    if let Some(result) = super::bn_grad_functions::gradient(e, op, &op_type, inputs, out_grads) {
        return result;
    }
    // DynamicPartition stitches every output's gradient back together.
    if let Some(result) = super::dynamic_shape_functions::gradient(e, op, &op_type, inputs, out_grads) {
        return result;
    }
    // The indexing family (its multi-output ops take every output's gradient).
    if let Some(grads) = super::index_functions::gradient(e, op, &op_type, inputs, out_grads) {
        return grads;
    }
    // The TensorList ops (PopBack takes both outputs' gradients).
    if let Some(grads) = super::list_functions::gradient(e, op, &op_type, inputs, out_grads) {
        return grads;
    }
    // Every other op needs the gradient of output 0.
    let g = match out_grads.first().copied().flatten() {
        Some(g) => g,
        None => return Err(Some("only the gradient of output 0 is supported".into())),
    };
    let y = Tensor::of(op);
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let t = e.dtype_of(g);
    let ta = e.t_attr(t);
    Ok(match &*op_type {
        "Identity" | "ReadVariableOp" | "Snapshot" | "PlaceholderWithDefault" | "EnsureShape" => pass_first(n, g),
        "AddN" => vec![Some(g); n],
        "Neg" => vec![Some(e.emit("Neg", "Neg", &[g], ta))],
        "Add" | "AddV2" => {
            let (a, b) = (x(0)?, x(1)?);
            let bc = Broadcast::new(e, a, b);
            let ga = bc.reduce_x(e, g, &ta);
            let gb = bc.reduce_y(e, g, &ta);
            vec![Some(ga), Some(gb)]
        }
        "Sub" => {
            let (a, b) = (x(0)?, x(1)?);
            let bc = Broadcast::new(e, a, b);
            let ga = bc.reduce_x(e, g, &ta);
            let gb = bc.reduce_y(e, g, &ta);
            let gb = e.emit("Neg", "Neg", &[gb], ta.clone());
            vec![Some(ga), Some(gb)]
        }
        "Mul" => {
            let (a, b) = (x(0)?, x(1)?);
            let bc = Broadcast::new(e, a, b);
            let (a, b) = (conj_if_complex(e, t, a), conj_if_complex(e, t, b));
            let ga = e.emit("Mul", "Mul", &[g, b], ta.clone());
            let ga = bc.reduce_x(e, ga, &ta);
            let gb = e.emit("Mul", "Mul", &[a, g], ta.clone());
            let gb = bc.reduce_y(e, gb, &ta);
            vec![Some(ga), Some(gb)]
        }
        // DivNoNan's gradient divides as the op does: no NaN where the divisor is 0.
        "RealDiv" | "DivNoNan" | "Div" => {
            let div = match &*op_type {
                "DivNoNan" => "DivNoNan",
                "Div" => "Div",
                _ => "RealDiv",
            };
            let (a, b) = (x(0)?, x(1)?);
            let bc = Broadcast::new(e, a, b);
            let (a, b) = (conj_if_complex(e, t, a), conj_if_complex(e, t, b));
            let ga = e.emit(div, div, &[g, b], ta.clone());
            let ga = bc.reduce_x(e, ga, &ta);
            let neg = e.emit("Neg", "Neg", &[a], ta.clone());
            let d1 = e.emit(div, div, &[neg, b], ta.clone());
            let d2 = e.emit(div, div, &[d1, b], ta.clone());
            let gb = e.emit("Mul", "mul", &[g, d2], ta.clone());
            let gb = bc.reduce_y(e, gb, &ta);
            vec![Some(ga), Some(gb)]
        }
        "Maximum" | "Minimum" => {
            let (a, b) = (x(0)?, x(1)?);
            let bc = Broadcast::new(e, a, b);
            let cmp = if &*op_type == "Maximum" { "GreaterEqual" } else { "LessEqual" };
            let da = e.dtype_of(a);
            let mask = e.emit(cmp, cmp, &[a, b], e.t_attr(da));
            let zeros = e.emit("ZerosLike", "zeros_like", &[g], ta.clone());
            let ga = e.emit("SelectV2", "SelectV2", &[mask, g, zeros], ta.clone());
            let gb = e.emit("SelectV2", "SelectV2", &[mask, zeros, g], ta.clone());
            let ga = bc.reduce_x(e, ga, &ta);
            let gb = bc.reduce_y(e, gb, &ta);
            vec![Some(ga), Some(gb)]
        }
        "SelectV2" => {
            let (c, a, b) = (x(0)?, x(1)?, x(2)?);
            let zeros = e.emit("ZerosLike", "zeros_like", &[g], ta.clone());
            let ga = e.emit("SelectV2", "SelectV2", &[c, g, zeros], ta.clone());
            let gb = e.emit("SelectV2", "SelectV2", &[c, zeros, g], ta.clone());
            let out_shape = e.shape("Shape", y);
            let ga = reduce_to_shape_of(e, ga, a, out_shape, &ta);
            let gb = reduce_to_shape_of(e, gb, b, out_shape, &ta);
            vec![None, Some(ga), Some(gb)]
        }
        "Square" => {
            let a = x(0)?;
            let a = conj_if_complex(e, t, a);
            let two = e.fresh_name("Const");
            let two = e.scalar_const_named(&two, t, 2.0);
            let twice = e.emit("Mul", "Mul", &[a, two], ta.clone());
            vec![Some(e.emit("Mul", "Mul", &[g, twice], ta))]
        }
        // BatchMatMulV3 (V2 with explicit input and output dtypes) differentiates as V2.
        "MatMul" | "BatchMatMul" | "BatchMatMulV2" | "BatchMatMulV3" => {
            let (a, b) = (x(0)?, x(1)?);
            let op_type: &'static str = match &*op_type {
                "MatMul" => "MatMul",
                "BatchMatMul" => "BatchMatMul",
                _ => "BatchMatMulV2",
            };
            let batch = op_type != "MatMul";
            let (ka, kb) = if batch { ("adj_x", "adj_y") } else { ("transpose_a", "transpose_b") };
            let attrs = &e.graph.node(op).attrs;
            let flag = |key: &str| super::op_attr(attrs, key).and_then(AttrValue::as_bool).unwrap_or(false);
            let (t_a, t_b) = (flag(ka), flag(kb));
            let mm = |e: &mut Emitter<'_>, p: Tensor, q: Tensor, tp: bool, tq: bool| {
                let attrs = [(ka, AttrValue::Bool(tp)), (kb, AttrValue::Bool(tq))].into_iter().chain(ta.clone());
                e.emit(op_type, op_type, &[p, q], attrs)
            };
            let (ga, gb) = match (t_a, t_b) {
                (false, false) => (mm(e, g, b, false, true), mm(e, a, g, true, false)),
                (false, true) => (mm(e, g, b, false, false), mm(e, g, a, true, false)),
                (true, false) => (mm(e, b, g, false, true), mm(e, a, g, false, false)),
                (true, true) => (mm(e, b, g, true, true), mm(e, g, a, true, true)),
            };
            if op_type == "BatchMatMulV2" {
                // V2 broadcasts the batch dims: sum each gradient over the ones its operand lacks.
                let (ga_shape, gb_shape) = (e.shape("Shape", ga), e.shape("Shape", gb));
                let ga = reduce_to_shape_of(e, ga, a, ga_shape, &ta);
                let gb = reduce_to_shape_of(e, gb, b, gb_shape, &ta);
                vec![Some(ga), Some(gb)]
            } else {
                vec![Some(ga), Some(gb)]
            }
        }
        "Relu" => vec![Some(e.emit("ReluGrad", "ReluGrad", &[g, y], ta))],
        "ReluGrad" => {
            // ReluGrad(dy, features) is linear in dy with the same mask; features get none.
            let features = x(1)?;
            let d = e.emit("ReluGrad", "ReluGrad", &[g, features], ta.clone());
            let z = e.emit("ZerosLike", "zeros_like", &[features], ta);
            vec![Some(d), Some(z)]
        }
        "Tanh" => vec![Some(e.emit("TanhGrad", "TanhGrad", &[y, g], ta))],
        "Sigmoid" => vec![Some(e.emit("SigmoidGrad", "SigmoidGrad", &[y, g], ta))],
        "TanhGrad" => {
            // d/dy (dy * (1 - y^2)) = -2 y dy; d/d(dy) = 1 - y^2.
            let (a, b) = (x(0)?, x(1)?);
            let mul = e.fresh_name("mul");
            let minus_two = e.scalar_const_named(&format!("{mul}/y"), t, -2.0);
            let m = e.emit_named(mul, "Mul", &[g, minus_two], ta.clone());
            let m1 = e.emit("Mul", "mul", &[m, b], ta.clone());
            let m2 = e.emit("Mul", "mul", &[m1, a], ta.clone());
            let gdy = e.emit("TanhGrad", "TanhGrad", &[a, g], ta);
            vec![Some(m2), Some(gdy)]
        }
        "SigmoidGrad" => {
            // d/dy (dy * y (1 - y)) = dy (1 - 2y) = gb - 2 gb y with gb = grad * dy.
            let (a, b) = (x(0)?, x(1)?);
            let gb = e.emit("Mul", "mul", &[g, b], ta.clone());
            let mul = e.fresh_name("mul");
            let two = e.scalar_const_named(&format!("{mul}/x"), t, 2.0);
            let m1 = e.emit_named(mul, "Mul", &[two, gb], ta.clone());
            let m2 = e.emit("Mul", "mul", &[m1, a], ta.clone());
            let ga = e.emit("Sub", "sub", &[gb, m2], ta.clone());
            let gdy = e.emit("SigmoidGrad", "SigmoidGrad", &[a, g], ta);
            vec![Some(ga), Some(gdy)]
        }
        "Exp" => vec![Some(e.emit("Mul", "mul", &[g, y], ta))],
        "Log" => {
            let a = x(0)?;
            let r = e.emit("Reciprocal", "Reciprocal", &[a], ta.clone());
            vec![Some(e.emit("Mul", "mul", &[g, r], ta))]
        }
        "Reciprocal" => {
            let sq = e.emit("Square", "Square", &[y], ta.clone());
            let m = e.emit("Mul", "mul", &[g, sq], ta.clone());
            vec![Some(e.emit("Neg", "Neg", &[m], ta))]
        }
        "Softmax" => {
            let m = e.emit("Mul", "mul", &[g, y], ta.clone());
            let s = sum_keep(e, m, -1, &ta);
            let d = e.emit("Sub", "sub", &[g, s], ta.clone());
            vec![Some(e.emit("Mul", "mul_1", &[d, y], ta))]
        }
        "Sum" => {
            let (a, axes) = (x(0)?, x(1)?);
            vec![Some(sum_grad(e, a, axes, g, &ta)), None]
        }
        "Mean" => {
            let (a, axes) = (x(0)?, x(1)?);
            let tiled = sum_grad(e, a, axes, g, &ta);
            let in_size = e.emit("Size", "Size", &[a], [("out_type", AttrValue::Type(DType::I32))]);
            let out_size = e.emit("Size", "Size", &[y], [("out_type", AttrValue::Type(DType::I32))]);
            let max = e.fresh_name("Maximum");
            let one = e.int_const_named(format!("{max}/y"), &[1], true);
            let i32_t = e.t_attr(Some(DType::I32));
            let safe = e.emit_named(max, "Maximum", &[out_size, one], i32_t.clone());
            let factor = e.emit("FloorDiv", "floordiv", &[in_size, safe], i32_t);
            let dst = t.unwrap_or(DType::F32);
            let cast_attrs = [("SrcT", AttrValue::Type(DType::I32)), ("DstT", AttrValue::Type(dst))];
            let factor = e.emit("Cast", "Cast", &[factor], cast_attrs);
            vec![Some(e.emit("RealDiv", "truediv", &[tiled, factor], ta)), None]
        }
        "Max" | "Min" => {
            // The gradient goes to the elements equal to the extreme, shared among ties.
            let (a, axes) = (x(0)?, x(1)?);
            let (kept, _) = reduced_shape(e, a, axes);
            let y_kept = e.emit("Reshape", "Reshape", &[y, kept], ta.clone());
            let g_kept = e.emit("Reshape", "Reshape_1", &[g, kept], ta.clone());
            let da = e.dtype_of(a);
            let eq = e.emit("Equal", "Equal", &[y_kept, a], e.t_attr(da));
            let cast_attrs =
                [("SrcT", AttrValue::Type(DType::Bool)), ("DstT", AttrValue::Type(t.unwrap_or(DType::F32)))];
            let indicators = e.emit("Cast", "Cast", &[eq], cast_attrs);
            let count = sum(e, "Sum", indicators, axes, false, &ta);
            let count = e.emit("Reshape", "Reshape_2", &[count, kept], ta.clone());
            let share = e.emit("RealDiv", "truediv", &[indicators, count], ta.clone());
            vec![Some(e.emit("Mul", "mul", &[share, g_kept], ta)), None]
        }
        "Pow" => {
            // d/da a^b = b a^(b-1); d/db a^b = a^b log(a), taken as 0 where a <= 0.
            let (a, b) = (x(0)?, x(1)?);
            let bc = Broadcast::new(e, a, b);
            let sub = e.fresh_name("sub");
            let one = e.scalar_const_named(&format!("{sub}/y"), t, 1.0);
            let b1 = e.emit_named(sub, "Sub", &[b, one], ta.clone());
            let p = e.emit("Pow", "Pow", &[a, b1], ta.clone());
            let m = e.emit("Mul", "mul", &[g, b], ta.clone());
            let ga = e.emit("Mul", "mul_1", &[m, p], ta.clone());
            let ga = bc.reduce_x(e, ga, &ta);
            let zeros = e.emit("ZerosLike", "zeros_like", &[a], ta.clone());
            let positive = e.emit("Greater", "Greater", &[a, zeros], ta.clone());
            let log = e.emit("Log", "Log", &[a], ta.clone());
            let safe = e.emit("SelectV2", "SelectV2", &[positive, log, zeros], ta.clone());
            let gz = e.emit("Mul", "mul_2", &[g, y], ta.clone());
            let gb = e.emit("Mul", "mul_3", &[gz, safe], ta.clone());
            let gb = bc.reduce_y(e, gb, &ta);
            vec![Some(ga), Some(gb)]
        }
        "Reshape" => {
            let a = x(0)?;
            let s = e.shape("Shape", a);
            vec![Some(e.emit("Reshape", "Reshape", &[g, s], ta)), None]
        }
        "Transpose" => {
            let perm = x(1)?;
            let inv = e.emit("InvertPermutation", "InvertPermutation", &[perm], e.t_attr(Some(DType::I32)));
            vec![Some(e.emit("Transpose", "transpose", &[g, inv], ta)), None]
        }
        "ReverseV2" => {
            // The gradient is reversed back along the same axes.
            let axes = x(1)?;
            let tidx = super::op_attr(&e.graph.node(op).attrs, "Tidx").cloned().map(|t| ("Tidx", t));
            let attrs = ta.clone().into_iter().chain(tidx);
            vec![Some(e.emit("ReverseV2", "ReverseV2", &[g, axes], attrs)), None]
        }
        "Tile" => {
            let (a, multiples) = (x(0)?, x(1)?);
            vec![Some(tile_grad(e, a, multiples, g, &ta)), None]
        }
        "BroadcastTo" => {
            let (a, shape) = (x(0)?, x(1)?);
            let sa = e.shape("Shape", a);
            let args = e.emit("BroadcastGradientArgs", "BroadcastGradientArgs", &[shape, sa], None);
            let axes = Tensor { node: args.node, output: 1 };
            let s = sum(e, "Sum", g, axes, true, &ta);
            vec![Some(e.emit("Reshape", "Reshape", &[s, sa], ta)), None]
        }
        "BiasAdd" => {
            let format = super::op_attr(&e.graph.node(op).attrs, "data_format").cloned().map(|f| ("data_format", f));
            let attrs = ta.clone().into_iter().chain(format);
            vec![Some(g), Some(e.emit("BiasAddGrad", "BiasAddGrad", &[g], attrs))]
        }
        "BiasAddGrad" => {
            if e.graph.node(op).attrs.get_str("data_format").is_some_and(|f| f != "NHWC") {
                return Err(Some("only data_format NHWC is supported".into()));
            }
            let out_backprop = x(0)?;
            let s = e.shape("Shape", out_backprop);
            vec![Some(e.emit("BroadcastTo", "BroadcastTo", &[g, s], ta))]
        }
        "Cast" => {
            let a = x(0)?;
            let src = e.graph.node(op).attrs.get("SrcT").and_then(AttrValue::as_type).or_else(|| e.dtype_of(a));
            let dst = e.graph.node(op).attrs.get("DstT").and_then(AttrValue::as_type);
            match (src, dst) {
                (Some(src), Some(dst)) if is_float(src) && is_float(dst) => {
                    let attrs = [("SrcT", AttrValue::Type(dst)), ("DstT", AttrValue::Type(src))];
                    vec![Some(e.emit("Cast", "Cast", &[g], attrs))]
                }
                (Some(_), Some(_)) => vec![None],
                _ => return Err(Some("SrcT and DstT must be known".into())),
            }
        }
        "CrossReplicaSum" => {
            let group = x(1)?;
            vec![Some(e.emit("CrossReplicaSum", "CrossReplicaSum", &[g, group], ta)), None]
        }
        "Fill" => {
            let rank = e.emit("Rank", "Rank", &[g], None);
            let all = range(e, rank, 1);
            vec![None, Some(sum(e, "Sum", g, all, false, &ta))]
        }
        other => return super::nn_functions::gradient(e, op, other, inputs, g),
    })
}

/// Op types through which no gradient flows (integer, boolean or shape results, and StopGradient).
pub fn is_not_differentiable(op_type: &str) -> bool {
    matches!(
        op_type,
        "StopGradient"
            | "Shape"
            | "Size"
            | "Rank"
            | "BroadcastGradientArgs"
            | "ZerosLike"
            | "OnesLike"
            | "InvertPermutation"
            | "Range"
            | "Greater"
            | "GreaterEqual"
            | "Less"
            | "LessEqual"
            | "Equal"
            | "NotEqual"
            | "FloorMod"
            | "FloorDiv"
            | "DynamicStitch"
            | "Pack"
            | "Const"
            | "Placeholder"
            | "VarHandleOp"
            | "ReplicaId"
            | "XlaReplicaId"
            | "RandomUniform"
            | "RandomStandardNormal"
            | "Sign"
            | "Round"
            | "Rint"
            | "Floor"
            | "Ceil"
            | "IsFinite"
            | "IsNan"
            | "IsInf"
            | "LogicalAnd"
            | "LogicalOr"
            | "LogicalNot"
            | "ArgMax"
            | "ArgMin"
            | "OneHot"
            | "ShapeN"
            | "BroadcastArgs"
            | "ConcatOffset"
            | "Where"
            | "ApproximateEqual"
            | "BitwiseAnd"
            | "BitwiseOr"
            | "BitwiseXor"
            | "Invert"
            | "LeftShift"
            | "RightShift"
            | "PopulationCount"
            | "TruncateDiv"
            | "TensorArrayCloseV3"
            | "TensorArrayGradV3"
            | "TensorArraySizeV3"
            | "TensorArrayV3"
    )
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

fn pass_first(n: usize, g: Tensor) -> Vec<Option<Tensor>> {
    let mut v = vec![None; n];
    if let Some(first) = v.first_mut() {
        *first = Some(g);
    }
    v
}

/// The broadcast reduction of a binary op: `Shape(x)`, `Shape(y)` and their `BroadcastGradientArgs`.
pub(super) struct Broadcast {
    sx: Tensor,
    sy: Tensor,
    rx: Tensor,
    ry: Tensor,
}

impl Broadcast {
    pub(super) fn new(e: &mut Emitter<'_>, x: Tensor, y: Tensor) -> Broadcast {
        let sx = e.shape("Shape", x);
        let sy = e.shape("Shape", y);
        let args = e.emit("BroadcastGradientArgs", "BroadcastGradientArgs", &[sx, sy], e.t_attr(Some(DType::I32)));
        Broadcast { sx, sy, rx: args, ry: Tensor { node: args.node, output: 1 } }
    }

    /// `Reshape(Sum(g, rx), Shape(x))`.
    pub(super) fn reduce_x(&self, e: &mut Emitter<'_>, g: Tensor, ta: &TAttr) -> Tensor {
        let s = sum(e, "Sum", g, self.rx, false, ta);
        e.emit("Reshape", "Reshape", &[s, self.sx], ta.clone())
    }

    /// `Reshape(Sum(g, ry), Shape(y))`.
    pub(super) fn reduce_y(&self, e: &mut Emitter<'_>, g: Tensor, ta: &TAttr) -> Tensor {
        let s = sum(e, "Sum", g, self.ry, false, ta);
        e.emit("Reshape", "Reshape", &[s, self.sy], ta.clone())
    }
}

/// `Sum(g, axes)`.
fn sum(e: &mut Emitter<'_>, base: &str, g: Tensor, axes: Tensor, keep_dims: bool, ta: &TAttr) -> Tensor {
    let attrs = [("keep_dims", AttrValue::Bool(keep_dims))].into_iter().chain(ta.clone());
    e.emit("Sum", base, &[g, axes], attrs)
}

/// `Sum(g, axis, keep_dims = true)` with the axis a constant `Sum/reduction_indices`.
fn sum_keep(e: &mut Emitter<'_>, g: Tensor, axis: i32, ta: &TAttr) -> Tensor {
    let name = e.fresh_name("Sum");
    let axes = e.int_const_named(format!("{name}/reduction_indices"), &[axis], true);
    let attrs = [("keep_dims", AttrValue::Bool(true))].into_iter().chain(ta.clone());
    e.emit_named(name, "Sum", &[g, axes], attrs)
}

/// `Range(0, limit, delta)` with constants `range/start` and `range/delta`.
fn range(e: &mut Emitter<'_>, limit: Tensor, delta: i32) -> Tensor {
    let name = e.fresh_name("range");
    let start = e.int_const_named(format!("{name}/start"), &[0], true);
    let delta = e.int_const_named(format!("{name}/delta"), &[delta], true);
    e.emit_named(name, "Range", &[start, limit, delta], [("Tidx", AttrValue::Type(DType::I32))])
}

/// Reduces `g` (shaped like the op's output, `out_shape`) to the shape of `x` (SelectV2's rule).
pub(super) fn reduce_to_shape_of(e: &mut Emitter<'_>, g: Tensor, x: Tensor, out_shape: Tensor, ta: &TAttr) -> Tensor {
    let sx = e.shape("Shape", x);
    let args = e.emit("BroadcastGradientArgs", "BroadcastGradientArgs", &[sx, out_shape], e.t_attr(Some(DType::I32)));
    let s = sum(e, "Sum", g, args, true, ta);
    e.emit("Reshape", "Reshape", &[s, sx], ta.clone())
}

/// The shape of `Sum(x, axes)` with kept dims (TensorFlow's `reduced_shape`, with
/// `DynamicStitch`), and `Shape(x)`.
fn reduced_shape(e: &mut Emitter<'_>, x: Tensor, axes: Tensor) -> (Tensor, Tensor) {
    let i32_t = e.t_attr(Some(DType::I32));
    // The shape arithmetic below is in i32; i64 reduction indices are narrowed first.
    let axes = if e.dtype_of(axes) == Some(DType::I64) {
        let attrs = [("SrcT", AttrValue::Type(DType::I64)), ("DstT", AttrValue::Type(DType::I32))];
        e.emit("Cast", "Cast", &[axes], attrs)
    } else {
        axes
    };
    let input_shape = e.shape("Shape", x);
    let rank = e.emit("Size", "Size", &[input_shape], [("out_type", AttrValue::Type(DType::I32))]);
    let shifted = e.emit("AddV2", "add", &[axes, rank], i32_t.clone());
    let axes = e.emit("FloorMod", "mod", &[shifted, rank], i32_t.clone());
    let axes_shape = e.shape("Shape", axes);
    let positions = range(e, rank, 1);
    let fill = e.fresh_name("Fill");
    let one = e.int_const_named(format!("{fill}/value"), &[1], true);
    let ones = e.emit_named(fill, "Fill", &[axes_shape, one], i32_t);
    let kept = e.emit(
        "DynamicStitch",
        "DynamicStitch",
        &[positions, axes, input_shape, ones],
        [("N", AttrValue::Int(2)), ("T", AttrValue::Type(DType::I32))],
    );
    (kept, input_shape)
}

/// The gradient of `Sum(x, axes)`: reshape `g` to the reduced shape with kept dims, then tile it
/// back to the shape of `x`.
pub(super) fn sum_grad(e: &mut Emitter<'_>, x: Tensor, axes: Tensor, g: Tensor, ta: &TAttr) -> Tensor {
    let i32_t = e.t_attr(Some(DType::I32));
    let (kept, input_shape) = reduced_shape(e, x, axes);
    let max = e.fresh_name("Maximum");
    let one = e.int_const_named(format!("{max}/y"), &[1], true);
    let safe = e.emit_named(max, "Maximum", &[kept, one], i32_t.clone());
    let scaling = e.emit("FloorDiv", "floordiv", &[input_shape, safe], i32_t);
    let reshaped = e.emit("Reshape", "Reshape", &[g, kept], ta.clone());
    e.emit("Tile", "Tile", &[reshaped, scaling], ta.clone())
}

/// The gradient of `Tile(x, multiples)`: split each dim into (multiple, size) and sum the
/// multiples away.
fn tile_grad(e: &mut Emitter<'_>, x: Tensor, multiples: Tensor, g: Tensor, ta: &TAttr) -> Tensor {
    let i32_t = e.t_attr(Some(DType::I32));
    let input_shape = e.shape("Shape", x);
    let pack_attrs = [("N", AttrValue::Int(2)), ("axis", AttrValue::Int(0))].into_iter().chain(i32_t.clone());
    let stacked = e.emit("Pack", "stack", &[multiples, input_shape], pack_attrs);
    let transpose = e.fresh_name("transpose");
    let perm = e.int_const_named(format!("{transpose}/perm"), &[1, 0], false);
    let transposed = e.emit_named(transpose, "Transpose", &[stacked, perm], i32_t.clone());
    let reshape = e.fresh_name("Reshape");
    let flat = e.int_const_named(format!("{reshape}/shape"), &[-1], false);
    let split_shape = e.emit_named(reshape, "Reshape", &[transposed, flat], i32_t);
    let size = e.emit("Size", "Size", &[split_shape], [("out_type", AttrValue::Type(DType::I32))]);
    let axes = range(e, size, 2);
    let reshaped = e.emit("Reshape", "Reshape", &[g, split_shape], ta.clone());
    sum(e, "Sum", reshaped, axes, false, ta)
}
