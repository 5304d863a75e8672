//! Static typing of a device program: every value's dtype and shape from
//! the op type rules (`ir::shapes::rules`), without running the program.
//!
//! Meaning: arguments take the types of their host values (a feed fixes
//! only the dims a placeholder leaves open; its values are not read);
//! variables keep their initial types through the step. A value is a
//! compile-time constant as in the trace: its op is pure and every data
//! operand is constant, or its op reads only its operands' shapes
//! (`Shape`, `Size`, `Rank`, `ZerosLike`, ...). Only constants are
//! computed, by the simulator's kernels; they are the small values that
//! must be static (shapes, axes, permutations, sizes) and the constants
//! the program holds. Every other value is a type.
//!
//! An op with no rule, or whose rule fails, gets its types from its
//! kernel run on stand-in operands (ones, or zeros for integers and
//! booleans, in place of the non-constant operands), and is named in a
//! note. The lowerable ops' shapes depend only on their operands' shapes
//! and constant operands, so stand-ins give the true types. Programs with
//! call ops (`While`, `If`, ...), TensorLists or Optionals, whose types can
//! depend on values (loop trip counts, list lengths), are traced whole
//! ([`needs_values`]). Cost: one rule per op; kernels only on constants.

use std::collections::HashMap;

use super::ops::{state, SHAPE_ONLY};
use super::text::Ty;
use super::trace::{Trace, Traced};
use super::{ArgSource, Program};
use crate::exec::{run_kernel, run_kernel_without_effects, Tensor};
use crate::ir::shapes::rules::{self, Operand};
use crate::ir::{DType, Graph, NodeId};
use crate::xla::error::XlaError;

/// Ops typed as the identity of their data operands.
const COLLECTIVES: &[&str] =
    &["CrossReplicaSum", "AllReduce", "Broadcast", "CollectiveAllReduce", "CollectiveBroadcast"];

/// Constant integer operands of at most this many elements are given to
/// the rules (shapes, axes and paddings are far smaller).
const MAX_RULE_CONSTANT: usize = 1 << 16;

fn lowering(graph: &Graph, id: NodeId, message: impl Into<String>) -> XlaError {
    let node = graph.node(id);
    XlaError::Lowering { node: node.name.to_string(), op: node.op.to_string(), message: message.into() }
}

/// The first op whose types can depend on values (a call op, a TensorList
/// or Optional op, TF1 control flow), with why; `None` when the program
/// can be typed statically.
pub(crate) fn needs_values(graph: &Graph, program: &Program) -> Option<(NodeId, &'static str)> {
    const TF1_CONTROL_FLOW: &[&str] = &["Enter", "Exit", "LoopCond", "Merge", "NextIteration", "Switch"];
    program.nodes.iter().find_map(|&id| {
        let op = &*graph.node(id).op;
        if crate::ir::functions::call_kind(op).is_some() {
            Some((id, "a call op, whose loop trip counts and function results are traced"))
        } else if op.contains("TensorList") || op.starts_with("Optional") {
            Some((id, "a TensorList or Optional op, whose lengths and element types are traced"))
        } else if TF1_CONTROL_FLOW.contains(&op) {
            Some((id, "TF1 control flow"))
        } else {
            None
        }
    })
}

/// A stand-in value of type `ty`: ones, or zeros for integers and booleans.
fn stand_in(ty: &Ty) -> Result<Tensor, String> {
    let n: usize = ty.shape.iter().product();
    let s = &ty.shape;
    let t = match ty.dtype {
        DType::F32 => Tensor::from_vec(s, vec![1f32; n]),
        DType::F64 => Tensor::from_vec(s, vec![1f64; n]),
        DType::BF16 => Tensor::from_vec(s, vec![half::bf16::ONE; n]),
        DType::F16 => Tensor::from_vec(s, vec![half::f16::ONE; n]),
        DType::I32 => Tensor::from_vec(s, vec![0i32; n]),
        DType::I64 => Tensor::from_vec(s, vec![0i64; n]),
        DType::I8 => Tensor::from_vec(s, vec![0i8; n]),
        DType::U8 => Tensor::from_vec(s, vec![0u8; n]),
        DType::U64 => Tensor::from_vec(s, vec![0u64; n]),
        DType::Bool => Tensor::from_vec(s, vec![false; n]),
        other => return Err(format!("no stand-in value of dtype {other}")),
    };
    t.map_err(|e| e.to_string())
}

/// A constant of `ty` filled with `one` (true) or zero (false).
fn filled(ty: &Ty, one: bool) -> Result<Tensor, String> {
    let t = stand_in(ty)?;
    let kernel = if one { "OnesLike" } else { "ZerosLike" };
    run_kernel(kernel, &crate::ir::AttrMap::default(), &[t]).map(|mut v| v.remove(0)).map_err(|e| e.to_string())
}

/// A shape as a vector constant of `dtype` (`I32` unless `I64`).
fn shape_tensor(shape: &[usize], dtype: DType) -> Tensor {
    if dtype == DType::I64 {
        Tensor::vector(shape.iter().map(|&d| d as i64).collect())
    } else {
        Tensor::vector(shape.iter().map(|&d| d as i32).collect())
    }
}

/// The constant integers of a traced value, when small enough for a rule.
fn rule_ints(t: &Traced) -> Option<Vec<i64>> {
    let v = t.value.as_ref().filter(|_| t.constant)?;
    if !matches!(v.dtype(), DType::I32 | DType::I64) || v.len() > MAX_RULE_CONSTANT {
        return None;
    }
    v.to_i64_vec("", "").ok()
}

/// Types the program from `args` (the argument types, in `program.args` order).
pub(crate) fn infer(graph: &Graph, program: &Program, args: &[Ty]) -> Result<Trace, XlaError> {
    let mut values: HashMap<(NodeId, u32), Traced> = HashMap::new();
    let mut vars: HashMap<NodeId, Ty> = HashMap::new();
    let mut notes = Vec::new();
    for (arg, ty) in program.args.iter().zip(args) {
        match *arg {
            ArgSource::Replicated(id) => {
                values.insert((id, 0), Traced::typed(ty.clone()));
            }
            ArgSource::Host(id, o) | ArgSource::Carried(id, o) => {
                values.insert((id, o), Traced::typed(ty.clone()));
            }
            ArgSource::Variable(id) => {
                vars.insert(id, ty.clone());
            }
        }
    }
    for &id in &program.nodes {
        let node = graph.node(id);
        let op = &*node.op;
        let inputs = graph.data_inputs(id);
        let operand = |values: &HashMap<(NodeId, u32), Traced>, i: usize| -> Result<Traced, XlaError> {
            let input = inputs.get(i).ok_or_else(|| lowering(graph, id, format!("has no operand {i}")))?;
            values.get(&(input.src, input.output.unwrap_or(0))).cloned().ok_or_else(|| {
                lowering(graph, id, format!("operand {i} (`{}`) has no value", graph.node(input.src).name))
            })
        };
        let var = |vars: &HashMap<NodeId, Ty>| {
            let h = inputs.first().ok_or_else(|| lowering(graph, id, "has no variable operand"))?.src;
            vars.get(&h).cloned().ok_or_else(|| lowering(graph, id, "names an unknown variable"))
        };
        let outputs: Vec<Traced> = match op {
            "ReadVariableOp" => vec![Traced::typed(var(&vars)?)],
            "VarIsInitializedOp" => vec![Traced::known(Tensor::scalar(true), true)],
            "VariableShape" => {
                let dtype = node.attrs.get("out_type").and_then(|v| v.as_type()).unwrap_or(DType::I32);
                vec![Traced::known(shape_tensor(&var(&vars)?.shape, dtype), true)]
            }
            "AssignVariableOp" | "AssignAddVariableOp" | "AssignSubVariableOp" | "Update" => {
                var(&vars)?;
                operand(&values, 1)?;
                Vec::new()
            }
            "ReplicaId" => vec![Traced::typed(Ty::scalar(DType::I32))],
            "ResourceGather" => {
                let v = var(&vars)?;
                let indices = operand(&values, 1)?.ty;
                let batch = usize::try_from(node.attrs.get_int("batch_dims").unwrap_or(0)).unwrap_or(0);
                let mut shape = indices.shape.clone();
                shape.extend(v.shape.iter().skip(batch + 1));
                vec![Traced::typed(Ty::new(v.dtype, shape))]
            }
            // The other variable updates have no results; the variables keep their types.
            _ if state::has_builder(op) => {
                var(&vars)?;
                Vec::new()
            }
            _ if COLLECTIVES.contains(&op) => {
                let n = if op == "CrossReplicaSum" { 1 } else { inputs.len() };
                (0..n).map(|i| operand(&values, i).map(|t| Traced::typed(t.ty))).collect::<Result<_, _>>()?
            }
            _ => {
                let ops: Vec<Traced> = (0..inputs.len()).map(|i| operand(&values, i)).collect::<Result<_, _>>()?;
                let all_constant = ops.iter().all(|t| t.constant && t.value.is_some());
                if all_constant && !super::ops::random::DRAWS.contains(&op) {
                    // A fold: the kernel computes the constant.
                    let args: Vec<Tensor> = ops.iter().filter_map(|t| t.value.clone()).collect();
                    run_kernel_without_effects(op, &node.attrs, &args)
                        .map_err(|e| lowering(graph, id, e.to_string()))?
                        .into_iter()
                        .map(|v| Traced::known(v, true))
                        .collect()
                } else if SHAPE_ONLY.contains(&op) {
                    shape_only(graph, id, &ops)?
                } else {
                    typed(graph, id, &ops, &mut notes)?
                }
            }
        };
        for (i, t) in outputs.into_iter().enumerate() {
            values.insert((id, i as u32), t);
        }
    }
    Ok(Trace { values, call_vars: HashMap::new(), notes })
}

/// An op that reads only its operands' shapes: a constant from their types.
fn shape_only(graph: &Graph, id: NodeId, ops: &[Traced]) -> Result<Vec<Traced>, XlaError> {
    let node = graph.node(id);
    let out_type = node.attrs.get("out_type").and_then(|v| v.as_type()).unwrap_or(DType::I32);
    let first = || ops.first().map(|t| &t.ty).ok_or_else(|| lowering(graph, id, "has no operand"));
    let size = |ty: &Ty| ty.shape.iter().product::<usize>();
    let value = match &*node.op {
        "Shape" => vec![shape_tensor(&first()?.shape, out_type)],
        "ShapeN" => ops.iter().map(|t| shape_tensor(&t.ty.shape, out_type)).collect(),
        "Size" if out_type == DType::I64 => vec![Tensor::scalar(size(first()?) as i64)],
        "Size" => vec![Tensor::scalar(size(first()?) as i32)],
        "Rank" => vec![Tensor::scalar(first()?.shape.len() as i32)],
        "ZerosLike" | "OnesLike" => {
            vec![filled(first()?, &*node.op == "OnesLike").map_err(|m| lowering(graph, id, m))?]
        }
        other => return Err(lowering(graph, id, format!("{other} is not typed without its operands' values"))),
    };
    Ok(value.into_iter().map(|v| Traced::known(v, true)).collect())
}

/// A computed (non-constant) op: its rule's types, or its kernel's on
/// stand-in operands (named in `notes`).
fn typed(graph: &Graph, id: NodeId, ops: &[Traced], notes: &mut Vec<String>) -> Result<Vec<Traced>, XlaError> {
    let node = graph.node(id);
    let ints: Vec<Option<Vec<i64>>> = ops.iter().map(rule_ints).collect();
    let operands: Vec<Operand> = ops
        .iter()
        .zip(&ints)
        .map(|(t, v)| Operand { dtype: t.ty.dtype, shape: &t.ty.shape, value: v.as_deref() })
        .collect();
    let why = match rules::infer(&node.op, &node.attrs, &operands) {
        Some(Ok(types)) => {
            return Ok(types.into_iter().map(|t| Traced::typed(Ty::new(t.dtype, t.shape))).collect());
        }
        Some(Err(m)) => format!("its type rule failed: {m}"),
        None => "no type rule".to_string(),
    };
    let mut args = Vec::with_capacity(ops.len());
    for t in ops {
        args.push(match &t.value {
            Some(v) => v.clone(),
            None => stand_in(&t.ty).map_err(|m| lowering(graph, id, m))?,
        });
    }
    let out = run_kernel_without_effects(&node.op, &node.attrs, &args).map_err(|e| lowering(graph, id, e.to_string()))?;
    notes.push(format!("`{}` ({}): typed by its kernel on stand-in values ({why})", node.name, node.op));
    Ok(out.into_iter().map(|v| Traced::typed(Ty::of(&v))).collect())
}
