//! FunctionDef → IR: each function of a GraphDef's library becomes a graph
//! of the module (see [`crate::ir::functions`] for the form).
//!
//! The graph is named after the function's signature and carries
//! `role = "function"`. Input argument `i` becomes an `_Arg` node named as
//! the argument (`T` = its dtype, `index = i`); each `node_def` an op node,
//! its attributes converted as the graph's are; output argument `j` a
//! `_Retval` node fed by the tensor `ret` maps it to (`T`, `index = j`),
//! named as the argument unless a node already has that name; the nodes
//! `control_ret` names are listed in the graph attribute `control_outputs`.
//!
//! Inside a function an input is `arg` (an argument), `node:out:k` (the
//! `k`-th tensor of the output argument `out` of `node`) or `^node`. The
//! output argument names of the ops with several (`TensorListPopBack`'s
//! `output_handle` and `tensor`, ...) come from TensorFlow's op registry
//! (`src/tf/op_output_args.rs`); for every other op the tensor is output
//! `k`, which is right for an op with one output argument, list or not. Cost: linear in the size of the library.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::error::ImportError;
use super::op_output_args::OUTPUT_ARGS;
use super::proto::{FunctionDef, FunctionDefLibrary, NodeDef};
use super::to_ir::{convert_attrs, intern, parse_input};
use crate::ir::functions::{ARG_OP, CONTROL_OUTPUTS_ATTR, FUNCTION_ROLE, RETVAL_OP, ROLE_ATTR};
use crate::ir::{AttrValue, DType, Graph, Node, NodeId};
use crate::syntax::Span;

/// The output index of tensor `k` of output argument `arg` of `op`.
pub(crate) fn output_index(op: &str, arg: &str, k: u32) -> Result<u32, String> {
    match OUTPUT_ARGS.iter().find(|(name, _)| *name == op).filter(|(_, args)| args.len() > 1) {
        None => Ok(k),
        Some((_, args)) => match args.iter().position(|a| *a == arg) {
            Some(i) if k == 0 => Ok(i as u32),
            Some(_) => Err(format!("output argument `{arg}` of {op} is a single tensor, not a list")),
            None => Err(format!("{op} has no output argument `{arg}` (it has {})", args.join(", "))),
        },
    }
}

/// The graphs of every function of `library`, in library order.
pub fn function_graphs(library: FunctionDefLibrary, errors: &mut Vec<ImportError>) -> Vec<Graph> {
    let mut interned = HashMap::default();
    library.function.into_iter().map(|f| function_graph(f, &mut interned, errors)).collect()
}

/// A data or control reference inside a function body.
enum Ref<'a> {
    Data(&'a str, u32),
    Control(&'a str),
}

fn function_graph(f: FunctionDef, interned: &mut HashMap<String, Arc<str>>, errors: &mut Vec<ImportError>) -> Graph {
    let signature = f.signature.unwrap_or_default();
    let name = signature.name.clone();
    let mut graph = Graph::new(name.as_str());
    graph.attrs.insert(ROLE_ATTR, AttrValue::Str(FUNCTION_ROLE.into()));
    let problem = |node: &str, reason: String| ImportError::FunctionBody {
        function: name.clone(),
        node: node.to_string(),
        reason,
        span: Span::DETACHED,
    };
    let arg_node = |op: &str, arg: &super::proto::ArgDef, index: usize| {
        let mut node = Node::op(arg.name.as_str(), op);
        if arg.r#type != 0 {
            node.attrs.insert("T", AttrValue::Type(DType::from_number(arg.r#type)));
        }
        node.attrs.insert("index", AttrValue::Int(index as i64));
        node
    };
    for (i, arg) in signature.input_arg.iter().enumerate() {
        if graph.add_node(arg_node(ARG_OP, arg, i)).is_err() {
            errors.push(problem(&arg.name, "two arguments share this name".into()));
        }
    }
    let mut pending: Vec<(NodeId, Vec<String>)> = Vec::with_capacity(f.node_def.len());
    for node_def in f.node_def {
        let NodeDef { name: node_name, op, input, device, attr, .. } = node_def;
        let attrs = convert_attrs(&node_name, Span::DETACHED, attr, interned, errors);
        let mut node = Node::op(node_name.as_str(), intern(interned, op));
        node.attrs = attrs;
        if !device.is_empty() {
            node.device = Some(intern(interned, device));
        }
        match graph.add_node(node) {
            Ok(id) => pending.push((id, input)),
            Err(_) => errors.push(problem(&node_name, "a node or argument already has this name".into())),
        }
    }
    // Resolves `arg`, `node:out:k` and `^node` to a producer and an output.
    let resolve = |graph: &Graph, text: &str| -> Result<(NodeId, Option<u32>), String> {
        let r = match text.strip_prefix('^') {
            Some(n) => Ref::Control(n),
            None => match text.split(':').collect::<Vec<_>>()[..] {
                [arg] => Ref::Data(arg, 0),
                [node, out, k] => {
                    let k: u32 = k.parse().map_err(|_| format!("`{text}`: `{k}` is not an output index"))?;
                    let src = graph.find(node).ok_or_else(|| format!("`{text}`: no node `{node}`"))?;
                    let index = output_index(&graph.node(src).op, out, k)?;
                    return Ok((src, Some(index)));
                }
                // A graph-style `node:k` (some writers use it inside functions).
                [node, k] => match parse_input(text) {
                    Some((n, Some(k))) => Ref::Data(n, k),
                    _ => return Err(format!("`{text}`: `{node}:{k}` is not `node:output:index`")),
                },
                _ => return Err(format!("`{text}` is not `arg`, `node:output:index` or `^node`")),
            },
        };
        match r {
            Ref::Data(n, k) => {
                graph.find(n).map(|id| (id, Some(k))).ok_or_else(|| format!("`{text}`: no argument or node `{n}`"))
            }
            Ref::Control(n) => graph.find(n).map(|id| (id, None)).ok_or_else(|| format!("`{text}`: no node `{n}`")),
        }
    };
    for (id, inputs) in pending {
        for text in inputs {
            match resolve(&graph, &text) {
                Ok((src, Some(k))) => {
                    graph.add_data_input(id, src, k, Span::DETACHED);
                }
                Ok((src, None)) => {
                    graph.add_control_input(id, src, Span::DETACHED);
                }
                Err(reason) => errors.push(problem(graph.node(id).name.as_ref(), reason)),
            }
        }
    }
    // `control_ret` maps each control output to a node; the graph lists those nodes.
    let mut control_outputs = Vec::new();
    for (out, node) in &f.control_ret {
        match graph.find(node) {
            Some(_) => control_outputs.push(AttrValue::Str(node.as_str().into())),
            None => errors.push(problem(out, format!("control output names no node `{node}`"))),
        }
    }
    if !control_outputs.is_empty() {
        graph.attrs.insert(CONTROL_OUTPUTS_ATTR, AttrValue::List(control_outputs));
    }
    for (j, arg) in signature.output_arg.iter().enumerate() {
        let Some(text) = f.ret.get(&arg.name) else {
            errors.push(problem(&arg.name, "the output argument has no `ret` entry".into()));
            continue;
        };
        let src = match resolve(&graph, text) {
            Ok((src, Some(k))) => (src, k),
            Ok((_, None)) => {
                errors.push(problem(&arg.name, format!("`ret` maps it to a control input `{text}`")));
                continue;
            }
            Err(reason) => {
                errors.push(problem(&arg.name, reason));
                continue;
            }
        };
        let id = graph.add_node_unique(arg_node(RETVAL_OP, arg, j));
        graph.add_data_input(id, src.0, src.1, Span::DETACHED);
    }
    graph
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_arguments_map_to_indices() {
        assert_eq!(output_index("TensorListPopBack", "tensor", 0), Ok(1));
        assert_eq!(output_index("MatMul", "product", 0), Ok(0));
        assert_eq!(output_index("Unpack", "output", 2), Ok(2));
        assert!(output_index("TensorListPopBack", "nope", 0).is_err());
        assert!(output_index("TensorListPopBack", "tensor", 1).is_err());
    }
}
