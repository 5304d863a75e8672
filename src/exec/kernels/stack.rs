//! TensorFlow 1's stacks (`StackV2`, `StackPushV2`, `StackPopV2`,
//! `StackCloseV2`): the accumulators of control-flow-v1 while-loop
//! gradients (a push per forward iteration, a pop per backward one).
//!
//! A stack lives only behind its resource handle (it has no flow value),
//! so its elements are per-run mutable state: a [`StackTable`] that the
//! step owns. Each run of `StackV2` makes a new, empty stack with a fresh
//! name in the table and returns a handle naming it; the other ops find
//! the stack by the handle's name.
//!
//! Invariants, as TensorFlow's CPU kernels: a push checks the element's
//! dtype against the stack's `elem_type` and fails once the stack holds
//! `max_size` elements (a negative `max_size` means no bound); a pop from
//! an empty stack fails; a closed stack is gone (any later use fails).
//! The ops are ordered only by the graph's control edges, as in
//! TensorFlow. A float stack also takes a TensorArray's flow (a list
//! here, see [`fits`]). Cost: a push or pop moves one element pointer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::arg;
use crate::exec::error::KernelError;
use crate::exec::tensor::{ResourceHandle, Tensor};
use crate::ir::{AttrMap, AttrValue, DType};

/// The stack ops, sorted.
pub const OPS: &[&str] = &["StackCloseV2", "StackPopV2", "StackPushV2", "StackV2"];

/// The device name in every stack handle (stacks are not variables).
const DEVICE: &str = "stack";

/// One stack: its element dtype, its bound and its elements (last on top).
#[derive(Debug)]
struct Stack {
    elem_type: DType,
    max_size: Option<usize>,
    items: Vec<Tensor>,
}

/// The stacks of one run, by the names their handles carry.
#[derive(Debug, Default)]
pub struct StackTable {
    stacks: Mutex<HashMap<Arc<str>, Stack>>,
    made: AtomicU64,
}

fn dtype_attr(op: &str, attrs: &AttrMap, key: &str) -> Result<DType, KernelError> {
    attrs
        .get(key)
        .and_then(AttrValue::as_type)
        .ok_or_else(|| KernelError::invalid(op, format!("missing dtype attribute `{key}`")))
}

/// The stack's bound from `StackV2`'s `max_size` operand (`None`: unbounded).
pub fn max_size(op: &str, t: &Tensor) -> Result<Option<usize>, KernelError> {
    if !t.shape().is_empty() {
        return Err(KernelError::invalid(op, format!("max_size must be a scalar, got shape {:?}", t.shape())));
    }
    let v = t.to_i64_vec(op, "max_size")?[0];
    Ok(usize::try_from(v).ok())
}

fn name_of<'a>(op: &str, inputs: &'a [Tensor]) -> Result<&'a Arc<str>, KernelError> {
    match arg(op, inputs, 0)?.as_resource() {
        Some(h) if &*h.device == DEVICE => Ok(&h.name),
        _ => Err(KernelError::invalid(op, "input 0 must be a stack handle (from StackV2)")),
    }
}

/// Whether `elem` may go on a stack of `elem_type`: its own dtype, or a
/// TensorList on a float stack (a TensorArray's `flow`, a float in
/// TensorFlow, carries the array here: see `tensor_array`), as TensorFlow's
/// gradient of a loop that writes a TensorArray pushes the flow.
pub fn fits(elem_type: DType, elem: &Tensor) -> bool {
    elem.dtype() == elem_type || (elem_type == DType::F32 && elem.dtype() == DType::Variant)
}

/// Runs stack op `op` on the run's `table`.
pub fn run(op: &str, attrs: &AttrMap, inputs: &[Tensor], table: &StackTable) -> Result<Vec<Tensor>, KernelError> {
    if op == "StackV2" {
        let elem_type = dtype_attr(op, attrs, "elem_type")?;
        let max_size = max_size(op, arg(op, inputs, 0)?)?;
        let n = table.made.fetch_add(1, Ordering::Relaxed);
        let base = attrs.get_str("stack_name").filter(|s| !s.is_empty()).unwrap_or("stack");
        let name: Arc<str> = Arc::from(format!("{base}#{n}"));
        let stack = Stack { elem_type, max_size, items: Vec::new() };
        table.stacks.lock().unwrap_or_else(|p| p.into_inner()).insert(name.clone(), stack);
        return Ok(vec![Tensor::Resource(ResourceHandle::new(Arc::from(DEVICE), name))]);
    }
    let name = name_of(op, inputs)?;
    let mut stacks = table.stacks.lock().unwrap_or_else(|p| p.into_inner());
    let stack = stacks
        .get_mut(name)
        .ok_or_else(|| KernelError::invalid(op, format!("stack `{name}` does not exist (or was closed)")))?;
    match op {
        "StackPushV2" => {
            let elem = arg(op, inputs, 1)?;
            if !fits(stack.elem_type, elem) {
                return Err(KernelError::invalid(
                    op,
                    format!("stack `{name}` holds {} but the element is {}", stack.elem_type, elem.dtype()),
                ));
            }
            if stack.max_size.is_some_and(|m| stack.items.len() >= m) {
                let m = stack.max_size.unwrap_or_default();
                return Err(KernelError::invalid(op, format!("stack `{name}` overflowed its max_size ({m})")));
            }
            stack.items.push(elem.clone());
            Ok(vec![elem.clone()])
        }
        "StackPopV2" => {
            let want = dtype_attr(op, attrs, "elem_type")?;
            if want != stack.elem_type {
                return Err(KernelError::invalid(
                    op,
                    format!("stack `{name}` holds {} but the op pops {want}", stack.elem_type),
                ));
            }
            let top = stack.items.pop().ok_or_else(|| KernelError::invalid(op, format!("stack `{name}` is empty")))?;
            Ok(vec![top])
        }
        "StackCloseV2" => {
            stacks.remove(name);
            Ok(Vec::new())
        }
        _ => Err(KernelError::invalid(op, "not a stack op")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, AttrValue)]) -> AttrMap {
        let mut m = AttrMap::new();
        for (k, v) in pairs {
            m.insert(*k, v.clone());
        }
        m
    }

    #[test]
    fn pushes_pop_last_first_and_the_bound_and_emptiness_are_checked() {
        let table = StackTable::default();
        let make = attrs(&[("elem_type", AttrValue::Type(DType::F32))]);
        let h = run("StackV2", &make, &[Tensor::scalar(2i32)], &table).unwrap().remove(0);
        let (a, b) = (Tensor::scalar(1.0f32), Tensor::scalar(2.0f32));
        let pushed = run("StackPushV2", &AttrMap::new(), &[h.clone(), a.clone()], &table).unwrap();
        assert_eq!(pushed, vec![a.clone()]);
        run("StackPushV2", &AttrMap::new(), &[h.clone(), b.clone()], &table).unwrap();
        let full = run("StackPushV2", &AttrMap::new(), &[h.clone(), a.clone()], &table).unwrap_err();
        assert!(full.to_string().contains("overflowed its max_size (2)"), "{full}");
        let wrong = run("StackPushV2", &AttrMap::new(), &[h.clone(), Tensor::scalar(1i32)], &table).unwrap_err();
        assert!(wrong.to_string().contains("holds f32"), "{wrong}");
        assert_eq!(run("StackPopV2", &make, std::slice::from_ref(&h), &table).unwrap(), vec![b]);
        assert_eq!(run("StackPopV2", &make, std::slice::from_ref(&h), &table).unwrap(), vec![a]);
        let empty = run("StackPopV2", &make, std::slice::from_ref(&h), &table).unwrap_err();
        assert!(empty.to_string().contains("is empty"), "{empty}");
        run("StackCloseV2", &AttrMap::new(), std::slice::from_ref(&h), &table).unwrap();
        assert!(run("StackPopV2", &make, &[h], &table).is_err());
    }

    #[test]
    fn each_stack_is_its_own_and_a_negative_bound_is_none() {
        let table = StackTable::default();
        let make = attrs(&[("elem_type", AttrValue::Type(DType::I32))]);
        let h1 = run("StackV2", &make, &[Tensor::scalar(-1i32)], &table).unwrap().remove(0);
        let h2 = run("StackV2", &make, &[Tensor::scalar(-1i32)], &table).unwrap().remove(0);
        for i in 0..5 {
            run("StackPushV2", &AttrMap::new(), &[h1.clone(), Tensor::scalar(i)], &table).unwrap();
        }
        assert!(run("StackPopV2", &make, &[h2], &table).is_err());
        assert_eq!(run("StackPopV2", &make, &[h1], &table).unwrap(), vec![Tensor::scalar(4i32)]);
        assert!(run("StackPopV2", &make, &[Tensor::scalar(0i32)], &table).is_err());
    }
}
