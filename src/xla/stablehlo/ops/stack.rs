//! TensorFlow 1's stacks on the device: `StackV2` makes a fixed-size
//! buffer `tensor<max_size x E>` and an `i32` depth (a TensorList's form,
//! so pushes and pops are the list's `dynamic_update_slice` and
//! `dynamic_slice`), which the emitter keeps as the current value of the
//! `StackV2` node, as it keeps a variable's. As tf2xla's stack kernels:
//! - `max_size` must be a compile-time constant (TensorFlow's gradient
//!   code gives a loop's `maximum_iterations`), else the `StackV2` is
//!   refused with a diagnostic naming it. An unbounded stack (`max_size`
//!   -1, as TensorFlow makes a gradient's stacks outside an XLA context)
//!   gets the most elements the trace sees it hold, provided that cannot
//!   depend on run-time values: every `While` that may push onto it has a
//!   trip count fixed at compile time (`lists::static_trip_count`), and no
//!   `If`/`Case` pushes onto it;
//! - every element has the shape of the first one pushed, which the trace
//!   learns; pushes of other shapes are refused;
//! - a push past `max_size` or a pop of an empty stack is not checked on the
//!   device (XLA clamps the index) unless a device-check scope is open;
//! - a TensorArray's flow pushed onto a float stack (TensorFlow's gradient
//!   of a loop that writes a TensorArray saves the flow so) is pushed as
//!   TensorFlow's flow value, a float 0: the flow only orders ops.
//!
//! The trace (host side) runs the same ops on a TensorList per stack. A
//! stack op's handle must come straight from a `StackV2` of the same
//! program or from an `_Arg` of a function the stack is passed into: a
//! stack crosses `While`, `If`, `Case` and calls as a variable does, by
//! value (its buffer and depth, `calls`), its element shape learned from
//! the pushes the call makes. A handle from any other op is refused with a
//! diagnostic naming the op. Cost: one slice or update per push or pop.

use std::collections::HashMap;

use super::Call;
use crate::exec::variant::{TensorList, Variant};
use crate::exec::Tensor;
use crate::ir::functions::ARG_OP;
use crate::ir::{AttrMap, DType, Graph, NodeId};
use crate::xla::stablehlo::text::{Ctx, Ty, Val};

pub use crate::exec::kernels::stack::OPS;

/// True for the stack ops (lowered here, with the emitter's state).
pub fn is_stack_op(op: &str) -> bool {
    OPS.contains(&op)
}

/// The node a stack op's handle (operand 0) comes from: a `StackV2`, or
/// the `_Arg` of a function the stack is passed into.
pub(crate) fn stack_of(graph: &Graph, id: NodeId) -> Result<NodeId, String> {
    let src = graph.data_inputs(id).first().map(|i| i.src).ok_or("has no stack handle operand")?;
    if !matches!(&*graph.node(src).op, "StackV2" | ARG_OP) {
        return Err(format!(
            "its stack handle comes from `{}` ({}), not straight from a StackV2 or a function's argument: on \
             XLA a stack is lowered only where its handle passes from its StackV2 to its pushes and pops \
             directly or through calls",
            graph.node(src).name,
            graph.node(src).op
        ));
    }
    Ok(src)
}

/// The compile-time bound of a `StackV2` from its traced `max_size`:
/// `None` for an unbounded stack (`max_size` -1, whose capacity the trace
/// infers: see `trace`).
fn bound(max_size: Option<&Tensor>) -> Result<Option<usize>, String> {
    let t = max_size.ok_or(
        "its max_size must be a compile-time constant on XLA (TensorFlow's gradient code gives a while \
         loop's maximum_iterations; set maximum_iterations on the loop)",
    )?;
    let m = crate::exec::kernels::stack::max_size("StackV2", t).map_err(|e| e.to_string())?;
    match m {
        Some(m) if m > 0 => Ok(Some(m)),
        None => Ok(None),
        Some(m) => Err(format!("XLA needs a stack of at least one element, but max_size is {m}")),
    }
}

/// The refusal of an unbounded stack (`max_size` -1) whose depth can
/// depend on run-time values: `why` says where it grows.
pub(crate) fn unbounded(why: &str) -> String {
    format!(
        "XLA needs a fixed upper bound on the stack's size, but max_size is -1 and it {why} (set \
         maximum_iterations on the while loop that fills it)"
    )
}

/// The trace's state of each stack: its elements, as a list, by `StackV2` node.
pub(crate) type Stacks = HashMap<NodeId, TensorList>;

/// One stack op on the host: updates `stacks` and answers the op's
/// results (values, with the buffer type of a `StackV2` known after its
/// first push: see [`buffer_type`]). `operands` are the non-handle
/// operands' values; `max_size` is `StackV2`'s operand when constant. An
/// unbounded `StackV2` (`max_size` -1) gets `capacity` when the trace has
/// inferred one (the most elements the stack held in an earlier trace),
/// else it is traced without a bound and has no device form yet.
pub(crate) fn trace(
    graph: &Graph,
    id: NodeId,
    attrs: &AttrMap,
    operands: &[Tensor],
    max_size: Option<&Tensor>,
    capacity: Option<usize>,
    stacks: &mut Stacks,
) -> Result<Vec<Tensor>, String> {
    let op = &*graph.node(id).op;
    if op == "StackV2" {
        let cap = bound(max_size)?.or(capacity);
        let element_dtype = attrs.get("elem_type").and_then(|v| v.as_type()).ok_or("missing elem_type")?;
        let list = TensorList {
            element_dtype,
            element_shape: None,
            items: Vec::new(),
            max_num_elements: cap,
            gradient_source: None,
        };
        stacks.insert(id, list);
        return Ok(Vec::new());
    }
    let h = stack_of(graph, id)?;
    if op == "StackCloseV2" {
        stacks.remove(&h);
        return Ok(Vec::new());
    }
    let list = stacks.get_mut(&h).ok_or("its stack was closed")?;
    on_list(op, attrs, list, operands)
}

/// The trace of a push or pop on `list`, a stack's elements: the op's
/// results. A TensorArray's flow (a TensorList in the trace) pushed onto a
/// float stack goes on it as a float 0 (see the module doc).
pub(crate) fn on_list(
    op: &str,
    attrs: &AttrMap,
    list: &mut TensorList,
    operands: &[Tensor],
) -> Result<Vec<Tensor>, String> {
    match op {
        "StackPushV2" => {
            let x = operands.first().ok_or("has no element operand")?;
            let element = if is_flow(list.element_dtype, x) { Tensor::scalar(0f32) } else { x.clone() };
            if element.dtype() != list.element_dtype {
                return Err(format!("the stack holds {} but the element is {}", list.element_dtype, x.dtype()));
            }
            let dims: Vec<i64> = element.shape().iter().map(|&d| d as i64).collect();
            match &list.element_shape {
                Some(s) if *s != dims => {
                    return Err(format!(
                        "the element's shape {:?} is not that of the stack's first element {s:?}: on XLA every \
                         element of a stack has one shape",
                        element.shape()
                    ))
                }
                _ => list.element_shape = Some(dims),
            }
            if list.max_num_elements.is_some_and(|m| list.items.len() >= m) {
                return Err(format!("a push onto a full stack (max_size {})", list.max_num_elements.unwrap_or(0)));
            }
            list.items.push(Some(element));
            Ok(vec![x.clone()])
        }
        "StackPopV2" => {
            let want = attrs.get("elem_type").and_then(|v| v.as_type()).ok_or("missing elem_type")?;
            if want != list.element_dtype {
                return Err(format!("the stack holds {} but the op pops {want}", list.element_dtype));
            }
            let top = list.items.pop().flatten().ok_or("a pop from an empty stack")?;
            Ok(vec![top])
        }
        _ => Err(format!("{op} is not a push or a pop")),
    }
}

/// Whether `x` pushed onto a stack of `elem_type` is a TensorArray's flow
/// (a TensorList in the trace, a float in TensorFlow).
fn is_flow(elem_type: DType, x: &Tensor) -> bool {
    elem_type == DType::F32 && x.dtype() == DType::Variant
}

/// Whether function `f` may push onto the stack its argument `arg` is:
/// some op but a pop, a close or a `_Retval` takes the argument (a push,
/// or a call that may push). Cost: one pass over `f`.
pub(crate) fn may_push(f: &Graph, arg: usize) -> bool {
    let Some(param) = f.node_ids().find(|&id| {
        let node = f.node(id);
        &*node.op == ARG_OP && node.attrs.get_int("index") == Some(arg as i64)
    }) else {
        return false;
    };
    f.node_ids().any(|id| {
        let reads = f.data_inputs(id).iter().any(|i| i.src == param);
        reads && !matches!(&*f.node(id).op, "StackPopV2" | "StackCloseV2" | crate::ir::functions::RETVAL_OP)
    })
}

/// The stack a traced value holds (a call passes a stack as a list), if any.
pub(crate) fn as_stack(t: &Tensor) -> Option<&TensorList> {
    match t.as_variant() {
        Some(Variant::List(l)) => Some(l),
        _ => None,
    }
}

/// A stack's elements as the value a call passes.
pub(crate) fn as_tensor(list: TensorList) -> Tensor {
    Tensor::Variant(std::sync::Arc::new(Variant::List(list)))
}

/// The stack `passed` (a call's operand) with the element shape `after`
/// (the stack once the call ran) learned: the call's functions see the
/// stack in its device form.
pub(crate) fn with_shape_of(passed: &Tensor, after: &TensorList) -> Tensor {
    match as_stack(passed) {
        Some(l) if l.element_shape.is_none() => {
            as_tensor(TensorList { element_shape: after.element_shape.clone(), ..l.clone() })
        }
        _ => passed.clone(),
    }
}

/// The device form (buffer, depth) of a stack the trace filled: `None`
/// when nothing was ever pushed (its element shape is unknown).
pub(crate) fn buffer_type(list: &TensorList) -> Option<Ty> {
    let shape = list.element_shape.as_ref()?;
    let mut dims = vec![list.max_num_elements?];
    dims.extend(shape.iter().map(|&d| d as usize));
    Some(Ty::composite(vec![Ty::new(list.element_dtype, dims), Ty::scalar(DType::I32)]))
}

/// `StackV2`: a zero buffer of type `ty` (from the trace) and depth 0.
pub(crate) fn make(c: &mut Ctx, ty: &Ty) -> Result<Val, String> {
    let buffer = ty.parts.first().ok_or("a stack's type is a buffer and a depth")?;
    let buffer = c.splat(buffer, 0.0);
    let depth = c.splat(&Ty::scalar(DType::I32), 0.0);
    Ok(Val::composite(&[buffer, depth]))
}

/// A push, pop or close on the stack's current value `stack`: its new
/// value and the op's results.
pub(crate) fn emit(
    c: &mut Ctx,
    op: &str,
    attrs: &AttrMap,
    stack: Val,
    operands: Vec<Val>,
    num_replicas: usize,
) -> Result<(Val, Vec<Val>), String> {
    let mut inputs = vec![stack.clone()];
    inputs.extend(operands);
    let call = Call { op, attrs, inputs, consts: Vec::new(), outputs: &[], num_replicas };
    match op {
        "StackPushV2" => {
            let elem = call.input(1)?.clone();
            let new = if elem.ty.parts.is_empty() {
                super::list::push_back(c, &call)?.remove(0)
            } else {
                // A TensorArray's flow goes on a float stack as 0 (see the module doc).
                let zero = c.splat(&Ty::scalar(DType::F32), 0.0);
                let flow = Call { inputs: vec![stack.clone(), zero], ..call };
                super::list::push_back(c, &flow)?.remove(0)
            };
            Ok((new, vec![elem]))
        }
        "StackPopV2" => {
            let mut out = super::list::pop_back(c, &call)?;
            let top = out.pop().ok_or("a pop gives an element")?;
            Ok((out.remove(0), vec![top]))
        }
        "StackCloseV2" => Ok((stack, Vec::new())),
        _ => Err("not a stack op".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_float_stack() -> TensorList {
        TensorList {
            element_dtype: DType::F32,
            element_shape: None,
            items: Vec::new(),
            max_num_elements: Some(2),
            gradient_source: None,
        }
    }

    #[test]
    fn max_size_minus_one_is_unbounded_and_zero_or_unknown_is_refused() {
        assert_eq!(bound(Some(&Tensor::scalar(3i32))), Ok(Some(3)));
        assert_eq!(bound(Some(&Tensor::scalar(-1i32))), Ok(None));
        assert!(bound(Some(&Tensor::scalar(0i32))).unwrap_err().contains("max_size is 0"));
        assert!(bound(None).unwrap_err().contains("compile-time constant"));
    }

    #[test]
    fn a_flow_goes_on_a_float_stack_as_zero_and_pops_come_last_first() {
        let mut stack = empty_float_stack();
        let flow = as_tensor(empty_float_stack());
        let pushed = on_list("StackPushV2", &AttrMap::new(), &mut stack, std::slice::from_ref(&flow)).unwrap();
        assert_eq!(pushed, vec![flow], "a push answers its operand");
        assert_eq!(stack.items, vec![Some(Tensor::scalar(0f32))]);
        assert_eq!(stack.element_shape, Some(Vec::new()));
        on_list("StackPushV2", &AttrMap::new(), &mut stack, &[Tensor::scalar(2f32)]).unwrap();
        let full = on_list("StackPushV2", &AttrMap::new(), &mut stack, &[Tensor::scalar(3f32)]).unwrap_err();
        assert!(full.contains("full stack"), "{full}");
        let wrong = on_list("StackPushV2", &AttrMap::new(), &mut empty_float_stack(), &[Tensor::scalar(1i32)]);
        assert!(wrong.unwrap_err().contains("holds f32"));
        let mut pop = AttrMap::new();
        pop.insert("elem_type", crate::ir::AttrValue::Type(DType::F32));
        assert_eq!(on_list("StackPopV2", &pop, &mut stack, &[]).unwrap(), vec![Tensor::scalar(2f32)]);
        assert_eq!(on_list("StackPopV2", &pop, &mut stack, &[]).unwrap(), vec![Tensor::scalar(0f32)]);
        assert!(on_list("StackPopV2", &pop, &mut stack, &[]).unwrap_err().contains("empty"));
    }
}
