//! Captured variables of TF2 function graphs.
//!
//! In `concrete_function.graph.as_graph_def()`, and in a SavedModel's
//! function bodies, each variable the function captures is an input of
//! dtype `resource`: a `Placeholder` that `ReadVariableOp`,
//! `Assign*VariableOp` and `ResourceApply*` take as their handle. No feed
//! can give a resource, so the importer makes each such placeholder a
//! variable handle (`VarHandleOp`) of the same name: its value then comes
//! from a checkpoint, from a feed of the variable's value, or starts as
//! zeros, as a plain graph's variables do.
//!
//! The handle's `dtype` is the one its readers and writers declare (their
//! `dtype` or `T`); its `shape` is the one given by the caller (a
//! SavedModel's object graph), else unknown: a value must then be fed, or
//! the run says the variable needs a known shape.

use std::collections::HashMap;

use crate::ir::{AttrValue, DType, Graph, NodeId, Shape};

/// What is known of a captured variable besides its placeholder.
#[derive(Clone, Debug, PartialEq)]
pub struct KnownVariable {
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<i64>,
}

/// Makes every `Placeholder` of dtype `resource` in `graph` a
/// `VarHandleOp`, with the dtype and shape `known` gives by node name, else
/// the dtype of its users. Returns the names of the handles made, in
/// graph order.
pub fn import_captured_variables(graph: &mut Graph, known: &HashMap<String, KnownVariable>) -> Vec<String> {
    let captured: Vec<NodeId> = graph
        .nodes_in_order()
        .into_iter()
        .filter(|&id| {
            let node = graph.node(id);
            &*node.op == "Placeholder" && node.attrs.get("dtype").and_then(AttrValue::as_type) == Some(DType::Resource)
        })
        .collect();
    let mut names = Vec::with_capacity(captured.len());
    for id in captured {
        let name = graph.node(id).name.to_string();
        let (dtype, shape) = match known.get(&name) {
            Some(k) => (Some(k.dtype), Shape { dims: Some(k.shape.clone()) }),
            None => (users_dtype(graph, id), Shape { dims: None }),
        };
        let node = graph.node_mut(id);
        node.op = "VarHandleOp".into();
        node.attrs.remove("dtype");
        node.attrs.remove("shape");
        node.attrs.remove("_user_specified_name");
        if let Some(dtype) = dtype {
            node.attrs.insert("dtype", AttrValue::Type(dtype));
        }
        node.attrs.insert("shape", AttrValue::Shape(shape));
        node.attrs.insert("container", AttrValue::Str("".into()));
        node.attrs.insert("shared_name", AttrValue::Str("".into()));
        names.push(name);
    }
    names
}

/// The value dtype the users of a resource handle declare.
fn users_dtype(graph: &Graph, id: NodeId) -> Option<DType> {
    graph.uses(id).iter().find_map(|(user, _)| {
        let attrs = &graph.node(*user).attrs;
        ["dtype", "T"].iter().find_map(|k| attrs.get(k).and_then(AttrValue::as_type)).filter(|t| *t != DType::Resource)
    })
}
