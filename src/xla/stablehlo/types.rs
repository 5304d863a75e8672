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
//! An op with no rule, or whose rule fails (a host op such as `Where`,
//! whose shape depends on values), is named in a note and gets its types
//! from its kernel run on its operands' values: the subgraph of the
//! program it depends on is run on the host with the arguments' values
//! (replica 0's; compiling only, ones of the arguments' types, as unfed
//! placeholders are), as the trace would. When that subgraph reads a
//! variable the step has already updated, or a variable op with results,
//! the whole program is traced instead ([`Typed::Whole`]). Programs with
//! call ops (`While`, `If`, ...), TensorLists or Optionals, whose types can
//! depend on values (loop trip counts, list lengths), are traced whole
//! ([`needs_values`]). Cost: one rule per op; kernels only on constants
//! and on the subgraphs of the ops without a rule.

use std::collections::HashMap;

use super::ops::{state, SHAPE_ONLY};
use super::text::Ty;
use super::trace::{gathered, Trace, Traced, GATHERS};
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
    XlaError::lowering(graph.node(id), message)
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
        } else if op.contains("TensorList")
            || op.starts_with("Optional")
            || op.starts_with("TensorArray")
            || super::ops::stack::is_stack_op(op)
        {
            Some((id, "a TensorList, TensorArray, stack or Optional op, whose lengths and element types are traced"))
        } else if TF1_CONTROL_FLOW.contains(&op) {
            Some((id, "TF1 control flow"))
        } else {
            None
        }
    })
}

/// A stand-in value of type `ty`: ones (true), as an unfed placeholder's.
fn stand_in(ty: &Ty) -> Result<Tensor, String> {
    let n: usize = ty.shape.iter().product();
    let s = &ty.shape;
    let t = match ty.dtype {
        DType::F32 => Tensor::from_vec(s, vec![1f32; n]),
        DType::F64 => Tensor::from_vec(s, vec![1f64; n]),
        DType::BF16 => Tensor::from_vec(s, vec![half::bf16::ONE; n]),
        DType::F16 => Tensor::from_vec(s, vec![half::f16::ONE; n]),
        DType::I32 => Tensor::from_vec(s, vec![1i32; n]),
        DType::I64 => Tensor::from_vec(s, vec![1i64; n]),
        DType::I8 => Tensor::from_vec(s, vec![1i8; n]),
        DType::U8 => Tensor::from_vec(s, vec![1u8; n]),
        DType::I16 => Tensor::from_vec(s, vec![1i16; n]),
        DType::U16 => Tensor::from_vec(s, vec![1u16; n]),
        DType::U32 => Tensor::from_vec(s, vec![1u32; n]),
        DType::U64 => Tensor::from_vec(s, vec![1u64; n]),
        DType::C64 => Tensor::from_vec(s, vec![num_complex::Complex32::new(1.0, 0.0); n]),
        DType::C128 => Tensor::from_vec(s, vec![num_complex::Complex64::new(1.0, 0.0); n]),
        DType::Bool => Tensor::from_vec(s, vec![true; n]),
        other => return Err(format!("no stand-in value of dtype {other}")),
    };
    t.map_err(|e| e.to_string())
}

/// A constant of `ty` filled with ones (`one`) or zeros.
fn filled(ty: &Ty, one: bool) -> Result<Tensor, String> {
    let t = stand_in(ty)?;
    if one {
        return Ok(t);
    }
    run_kernel("ZerosLike", &crate::ir::AttrMap::default(), &[t]).map(|mut v| v.remove(0)).map_err(|e| e.to_string())
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

/// The outcome of static typing.
pub(crate) enum Typed {
    /// Every value typed.
    Done(Trace),
    /// The program must be traced whole, for the reason given.
    Whole(String),
}

/// The walk's state.
struct Walk<'a> {
    graph: &'a Graph,
    values: HashMap<(NodeId, u32), Traced>,
    /// Each variable's type.
    vars: HashMap<NodeId, Ty>,
    /// Variables some op of the step has updated so far.
    updated: std::collections::HashSet<NodeId>,
    /// Reads of a variable after an update (their values are not the initial ones).
    stale_reads: std::collections::HashSet<NodeId>,
    /// The arguments' keys.
    arg_keys: std::collections::HashSet<(NodeId, u32)>,
    /// Argument values by key (replica 0's), when given.
    arg_values: HashMap<(NodeId, u32), Tensor>,
    /// Variable values by handle, when given.
    var_values: HashMap<NodeId, Tensor>,
    /// Host values of the subgraphs run for ops without a rule.
    memo: HashMap<(NodeId, u32), Tensor>,
    notes: Vec<String>,
}

/// Types the program from `types` (the argument types, in `program.args`
/// order) and, for ops without a rule, `values` (the arguments' values;
/// ones of their types when `None`).
pub(crate) fn infer(
    graph: &Graph,
    program: &Program,
    types: &[Ty],
    values: Option<&[Tensor]>,
) -> Result<Typed, XlaError> {
    let mut w = Walk {
        graph,
        values: HashMap::new(),
        vars: HashMap::new(),
        updated: Default::default(),
        stale_reads: Default::default(),
        arg_keys: Default::default(),
        arg_values: HashMap::new(),
        var_values: HashMap::new(),
        memo: HashMap::new(),
        notes: Vec::new(),
    };
    for (k, (arg, ty)) in program.args.iter().zip(types).enumerate() {
        let value = values.and_then(|v| v.get(k)).cloned();
        match *arg {
            ArgSource::Replicated(id) | ArgSource::Host(id, _) | ArgSource::Carried(id, _) => {
                let o = match *arg {
                    ArgSource::Host(_, o) | ArgSource::Carried(_, o) => o,
                    _ => 0,
                };
                w.values.insert((id, o), Traced::typed(ty.clone()));
                w.arg_keys.insert((id, o));
                if let Some(v) = value {
                    w.arg_values.insert((id, o), v);
                }
            }
            ArgSource::Variable(id) => {
                w.vars.insert(id, ty.clone());
                if let Some(v) = value {
                    w.var_values.insert(id, v);
                }
            }
        }
    }
    for &id in &program.nodes {
        let outputs = match w.node(id)? {
            Ok(outputs) => outputs,
            Err(why) => return Ok(Typed::Whole(why)),
        };
        for (i, t) in outputs.into_iter().enumerate() {
            w.values.insert((id, i as u32), t);
        }
    }
    Ok(Typed::Done(Trace { values: w.values, call_vars: HashMap::new(), notes: w.notes }))
}

impl Walk<'_> {
    fn operand(&self, id: NodeId, i: usize) -> Result<Traced, XlaError> {
        let graph = self.graph;
        let inputs = graph.data_inputs(id);
        let input = inputs.get(i).ok_or_else(|| lowering(graph, id, format!("has no operand {i}")))?;
        self.values
            .get(&(input.src, input.output.unwrap_or(0)))
            .cloned()
            .ok_or_else(|| lowering(graph, id, format!("operand {i} (`{}`) has no value", graph.node(input.src).name)))
    }

    /// The variable operand 0 of `id` names, and its type.
    fn var(&self, id: NodeId) -> Result<(NodeId, Ty), XlaError> {
        let h =
            self.graph.data_inputs(id).first().ok_or_else(|| lowering(self.graph, id, "has no variable operand"))?.src;
        let ty = self.vars.get(&h).cloned().ok_or_else(|| lowering(self.graph, id, "names an unknown variable"))?;
        Ok((h, ty))
    }

    /// The outputs of `id`, or (inner `Err`) why the program must be traced whole.
    fn node(&mut self, id: NodeId) -> Result<Result<Vec<Traced>, String>, XlaError> {
        let graph = self.graph;
        let node = graph.node(id);
        let op = &*node.op;
        let inputs = graph.data_inputs(id);
        let outputs: Vec<Traced> = match op {
            "ReadVariableOp" => {
                let (h, ty) = self.var(id)?;
                if self.updated.contains(&h) {
                    self.stale_reads.insert(id);
                }
                vec![Traced::typed(ty)]
            }
            "VarIsInitializedOp" => vec![Traced::known(Tensor::scalar(true), true)],
            "VariableShape" => {
                let dtype = node.attrs.get("out_type").and_then(|v| v.as_type()).unwrap_or(DType::I32);
                vec![Traced::known(shape_tensor(&self.var(id)?.1.shape, dtype), true)]
            }
            "AssignVariableOp" | "AssignAddVariableOp" | "AssignSubVariableOp" | "Update" => {
                let (h, _) = self.var(id)?;
                self.operand(id, 1)?;
                self.updated.insert(h);
                Vec::new()
            }
            "CollectiveAssignGroupV2" => {
                let shape = self.operand(id, 0)?.ty.shape;
                let v = super::ops::xla_misc::assign_group_values(&shape).map_err(|m| lowering(graph, id, m))?;
                v.into_iter().map(|t| Traced::known(t, true)).collect()
            }
            "ReplicaId" | "XlaReplicaId" => vec![Traced::typed(Ty::scalar(DType::I32))],
            // The variable's tiles, by `XlaSplitND`'s rule.
            "ReadVariableXlaSplitND" => {
                let (_, v) = self.var(id)?;
                let operand = crate::ir::shapes::rules::Operand { dtype: v.dtype, shape: &v.shape, value: None };
                let tiles = crate::ir::shapes::rules::infer("XlaSplitND", &node.attrs, &[operand])
                    .unwrap_or_else(|| Err("XlaSplitND has no type rule".into()))
                    .map_err(|m| lowering(graph, id, m))?;
                tiles.into_iter().map(|t| Traced::typed(Ty::new(t.dtype, t.shape))).collect()
            }
            "ResourceGather" => {
                let (_, v) = self.var(id)?;
                let indices = self.operand(id, 1)?.ty;
                let batch = usize::try_from(node.attrs.get_int("batch_dims").unwrap_or(0)).unwrap_or(0);
                let mut shape = indices.shape.clone();
                shape.extend(v.shape.iter().skip(batch + 1));
                vec![Traced::typed(Ty::new(v.dtype, shape))]
            }
            // A generator's state as read before its counter moves: the variable's type.
            "RngReadAndSkip" => {
                let (h, v) = self.var(id)?;
                self.updated.insert(h);
                vec![Traced::typed(v)]
            }
            // A draw from a generator's state: the type its rule gives (the handle stands aside).
            _ if crate::exec::kernels::stateful_random::DRAW_OPS.contains(&op) => {
                let (h, _) = self.var(id)?;
                self.updated.insert(h);
                let mut ops = vec![Traced::typed(Ty::scalar(DType::Resource))];
                for i in 1..inputs.len() {
                    ops.push(self.operand(id, i)?);
                }
                return self.typed(id, &ops);
            }
            // The other variable updates have no results; the variables keep their types.
            _ if state::has_builder(op) => {
                for input in inputs.iter().take(state::handle_operands(op)) {
                    self.updated.insert(input.src);
                }
                self.var(id)?;
                Vec::new()
            }
            _ if COLLECTIVES.contains(&op) => {
                let n = if op == "CrossReplicaSum" { 1 } else { inputs.len() };
                (0..n).map(|i| self.operand(id, i).map(|t| Traced::typed(t.ty))).collect::<Result<_, _>>()?
            }
            // Never folded: the other members' values are not known here.
            _ if GATHERS.contains(&op) => {
                let ops: Vec<Traced> = (0..inputs.len()).map(|i| self.operand(id, i)).collect::<Result<_, _>>()?;
                return self.typed(id, &ops);
            }
            _ => {
                let ops: Vec<Traced> = (0..inputs.len()).map(|i| self.operand(id, i)).collect::<Result<_, _>>()?;
                let all_constant = ops.iter().all(|t| t.constant && t.value.is_some());
                if all_constant && !super::ops::random::is_draw(op) {
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
                    return self.typed(id, &ops);
                }
            }
        };
        Ok(Ok(outputs))
    }

    /// A computed (non-constant) op: its rule's types, or its kernel's on
    /// its operands' host values (named in the notes).
    fn typed(&mut self, id: NodeId, ops: &[Traced]) -> Result<Result<Vec<Traced>, String>, XlaError> {
        let graph = self.graph;
        let node = graph.node(id);
        let ints: Vec<Option<Vec<i64>>> = ops.iter().map(rule_ints).collect();
        let operands: Vec<Operand> = ops
            .iter()
            .zip(&ints)
            .map(|(t, v)| Operand { dtype: t.ty.dtype, shape: &t.ty.shape, value: v.as_deref() })
            .collect();
        let why = match rules::infer(&node.op, &node.attrs, &operands) {
            Some(Ok(types)) => {
                return Ok(Ok(types.into_iter().map(|t| Traced::typed(Ty::new(t.dtype, t.shape))).collect()));
            }
            Some(Err(m)) => format!("its type rule failed: {m}"),
            None => "it has no type rule".to_string(),
        };
        let mut args = Vec::with_capacity(ops.len());
        for input in graph.data_inputs(id) {
            match self.host_value(input.src, input.output.unwrap_or(0))? {
                Ok(v) => args.push(v),
                Err(m) => return Ok(Err(format!("`{}` ({}) {why}, and {m}", node.name, node.op))),
            }
        }
        let out =
            run_kernel_without_effects(&node.op, &node.attrs, &args).map_err(|e| lowering(graph, id, e.to_string()))?;
        self.notes.push(format!(
            "`{}` ({}) was typed by running it and the ops it depends on on the host: {why}",
            node.name, node.op
        ));
        let mut traced = Vec::with_capacity(out.len());
        for (o, v) in out.into_iter().enumerate() {
            traced.push(Traced::typed(Ty::of(&v)));
            self.memo.insert((id, o as u32), v);
        }
        Ok(Ok(traced))
    }

    /// The host value of `(node, output)`: known, an argument's, or run
    /// (with the ops it depends on, in an iterative post-order). The inner
    /// `Err` says why it cannot be run here.
    fn host_value(&mut self, node: NodeId, output: u32) -> Result<Result<Tensor, String>, XlaError> {
        let graph = self.graph;
        if let Some(v) = self.memo.get(&(node, output)).cloned().or_else(|| self.known(node, output)) {
            return Ok(Ok(v));
        }
        let mut stack = vec![(node, false)];
        while let Some((id, ready)) = stack.pop() {
            if self.memo.contains_key(&(id, 0)) {
                continue;
            }
            let inputs = graph.data_inputs(id);
            let op = &*graph.node(id).op;
            if !ready {
                stack.push((id, true));
                if op != "ReadVariableOp" {
                    for i in &inputs {
                        let key = (i.src, i.output.unwrap_or(0));
                        // A variable handle is not a value: the op that names it reads it.
                        let handle = self.vars.contains_key(&i.src);
                        if !handle && !self.memo.contains_key(&key) && self.known(key.0, key.1).is_none() {
                            stack.push((i.src, false));
                        }
                    }
                }
                continue;
            }
            let value = |w: &Self, i: usize| {
                let input = inputs.get(i).ok_or_else(|| lowering(graph, id, format!("has no operand {i}")))?;
                let key = (input.src, input.output.unwrap_or(0));
                w.memo.get(&key).cloned().or_else(|| w.known(key.0, key.1)).ok_or_else(|| {
                    lowering(graph, id, format!("operand {i} (`{}`) has no value", graph.node(input.src).name))
                })
            };
            let outputs = match op {
                "ReadVariableOp" => {
                    if self.stale_reads.contains(&id) {
                        return Ok(Err(format!("it reads `{}` after the step updates it", graph.node(id).name)));
                    }
                    let (h, ty) = self.var(id)?;
                    let v = match self.var_values.get(&h) {
                        Some(v) => v.clone(),
                        None => stand_in(&ty).map_err(|m| lowering(graph, id, m))?,
                    };
                    vec![v]
                }
                "ReplicaId" | "XlaReplicaId" => vec![Tensor::scalar(0i32)],
                "CollectiveAssignGroupV2" => {
                    let shape = value(self, 0)?.shape().to_vec();
                    super::ops::xla_misc::assign_group_values(&shape).map_err(|m| lowering(graph, id, m))?
                }
                _ if COLLECTIVES.contains(&op) => {
                    let n = if op == "CrossReplicaSum" { 1 } else { inputs.len() };
                    (0..n).map(|i| value(self, i)).collect::<Result<_, _>>()?
                }
                _ if GATHERS.contains(&op) => {
                    let args: Vec<Tensor> = (0..inputs.len()).map(|i| value(self, i)).collect::<Result<_, _>>()?;
                    vec![gathered(op, &graph.node(id).attrs, &args).map_err(|m| lowering(graph, id, m))?]
                }
                _ if state::is_state_op(op) => {
                    return Ok(Err(format!("it depends on variable op `{}`", graph.node(id).name)));
                }
                _ => {
                    let args: Vec<Tensor> = (0..inputs.len()).map(|i| value(self, i)).collect::<Result<_, _>>()?;
                    run_kernel_without_effects(op, &graph.node(id).attrs, &args)
                        .map_err(|e| lowering(graph, id, e.to_string()))?
                }
            };
            for (o, v) in outputs.into_iter().enumerate() {
                self.memo.insert((id, o as u32), v);
            }
        }
        let got = self.memo.get(&(node, output)).cloned().or_else(|| self.known(node, output));
        got.map(Ok).ok_or_else(|| lowering(graph, node, format!("output {output} has no value")))
    }

    /// A value known without running anything: a constant, or an argument
    /// (its value, or ones of its type).
    fn known(&self, id: NodeId, output: u32) -> Option<Tensor> {
        let t = self.values.get(&(id, output))?;
        if let Some(v) = &t.value {
            return Some(v.clone());
        }
        if let Some(v) = self.arg_values.get(&(id, output)) {
            return Some(v.clone());
        }
        self.arg_keys.contains(&(id, output)).then(|| stand_in(&t.ty).ok()).flatten()
    }
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
