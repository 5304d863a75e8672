//! IR function graph → FunctionDef, and a GraphDef whose library holds
//! every function of a module (the inverse of [`super::functions`]).
//!
//! Meaning: a function graph's `_Arg` nodes, by `index`, become the
//! signature's input arguments (named as the node, typed by `T`); its
//! `_Retval` nodes, by `index`, the output arguments and their `ret`
//! entries; the graph attribute `control_outputs` the `control_ret`
//! entries; every other node a `node_def`. Inside the body an operand is
//! named as TensorFlow names it: an argument by its name, output `k` of
//! a node `n` as `n:arg:k` for an op with one output argument (list or
//! not) and `n:args[k]:0` for an op with several, from the output
//! argument names of TensorFlow's op registry (`src/tf/op_output_args.rs`).
//!
//! Invariants: nothing is dropped silently. A function that the graph's
//! imported `library` already holds keeps its imported FunctionDef, byte
//! for byte, while its graph is unchanged; a function edited since (its
//! graph differs from the imported FunctionDef's) and any other function
//! is built here, and an operand of an op
//! whose output argument names are unknown, or a function graph that is
//! not in function form, is an error naming the node. Cost: linear in the
//! functions' nodes and edges.

use std::collections::{BTreeMap, HashMap};

use super::error::ImportError;
use super::export::{node_def, to_graphdef};
use super::op_output_args::OUTPUT_ARGS;
use super::proto::{op_def::ArgDef, FunctionDef, FunctionDefLibrary, GraphDef, OpDef};
use crate::ir::functions::{ARG_OP, CONTROL_OUTPUTS_ATTR, RETVAL_OP};
use crate::ir::{AttrValue, Graph, Input, NodeId};

/// The GraphDef of `graph` whose library also holds `functions`: each
/// function the imported library lacks, or holds in a form that differs
/// from the function's graph now, gets a FunctionDef built from its graph
/// (see the module docs).
pub fn to_graphdef_with_functions(graph: &Graph, functions: &[&Graph]) -> Result<GraphDef, Vec<ImportError>> {
    let mut graph_def = to_graphdef(graph)?;
    let had_library = graph_def.library.is_some();
    let mut library = graph_def.library.take().unwrap_or_default();
    // The graphs the imported FunctionDefs give, to tell an edited function
    // from an unchanged one. A FunctionDef that does not import keeps its
    // bytes: no graph of the module can stand for it.
    let mut import_errors = Vec::new();
    let imported: HashMap<String, Graph> = super::functions::function_graphs(library.clone(), &mut import_errors)
        .into_iter()
        .map(|g| (g.name.to_string(), g))
        .collect();
    let position = |library: &FunctionDefLibrary, name: &str| {
        library.function.iter().position(|f| f.signature.as_ref().is_some_and(|s| s.name == name))
    };
    let mut errors = Vec::new();
    for function in functions {
        let slot = position(&library, &function.name);
        let unchanged = match (slot, imported.get(&*function.name)) {
            (Some(_), Some(original)) => original == *function,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if unchanged {
            continue;
        }
        match (function_def(function), slot) {
            (Ok(f), Some(i)) => library.function[i] = f,
            (Ok(f), None) => library.function.push(f),
            (Err(mut e), _) => errors.append(&mut e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if had_library || !library.function.is_empty() {
        graph_def.library = Some(library);
    }
    Ok(graph_def)
}

/// The FunctionDef of a function graph.
pub fn function_def(graph: &Graph) -> Result<FunctionDef, Vec<ImportError>> {
    let mut errors = Vec::new();
    let problem = |node: &str, reason: String| ImportError::FunctionBody {
        function: graph.name.clone(),
        node: node.to_string(),
        reason,
        span: crate::syntax::Span::DETACHED,
    };
    let order = graph.nodes_in_order();
    let by_index = |op: &str| {
        let mut nodes: Vec<(i64, NodeId)> = order
            .iter()
            .filter(|&&id| &*graph.node(id).op == op)
            .map(|&id| (graph.node(id).attrs.get_int("index").unwrap_or(-1), id))
            .collect();
        nodes.sort_unstable();
        nodes
    };
    let arg_def = |id: NodeId| {
        let node = graph.node(id);
        let r#type = node.attrs.get("T").and_then(AttrValue::as_type).map_or(0, |t| t.number());
        ArgDef { name: node.name.to_string(), r#type, ..ArgDef::default() }
    };
    let (args, retvals) = (by_index(ARG_OP), by_index(RETVAL_OP));
    for (expected, (index, id)) in args.iter().chain(&retvals).enumerate() {
        let expected = if expected < args.len() { expected } else { expected - args.len() };
        if *index != expected as i64 {
            errors.push(problem(
                &graph.node(*id).name,
                format!("`index` is {index}, but the {} in order is number {expected}", graph.node(*id).op),
            ));
        }
    }
    let tensor = |input: Input| -> Result<String, String> {
        let src = graph.node(input.src);
        let k = input.output.unwrap_or(0);
        if &*src.op == ARG_OP {
            return Ok(src.name.to_string());
        }
        match OUTPUT_ARGS.binary_search_by_key(&&*src.op, |(op, _)| op).map(|i| OUTPUT_ARGS[i].1) {
            Ok([arg]) => Ok(format!("{}:{arg}:{k}", src.name)),
            Ok(args) => match args.get(k as usize) {
                Some(arg) => Ok(format!("{}:{arg}:0", src.name)),
                None => {
                    Err(format!("{} has {} outputs; output {k} of `{}` does not exist", src.op, args.len(), src.name))
                }
            },
            Err(_) => Err(format!(
                "the output argument names of {} are not known, so output {k} of `{}` has no FunctionDef name",
                src.op, src.name
            )),
        }
    };
    let mut node_defs = Vec::new();
    for &id in &order {
        let op = &*graph.node(id).op;
        if op == ARG_OP || op == RETVAL_OP {
            continue;
        }
        let mut inputs = Vec::new();
        for input in graph.inputs(id) {
            if input.is_control() {
                inputs.push(format!("^{}", graph.node(input.src).name));
                continue;
            }
            match tensor(input) {
                Ok(name) => inputs.push(name),
                Err(reason) => errors.push(problem(&graph.node(id).name, reason)),
            }
        }
        node_defs.push(node_def(graph, id, inputs, &mut errors));
    }
    let mut ret = BTreeMap::new();
    for &(_, id) in &retvals {
        let name = graph.node(id).name.to_string();
        match graph.data_inputs(id).first().copied().map(tensor) {
            Some(Ok(t)) => {
                ret.insert(name, t);
            }
            Some(Err(reason)) => errors.push(problem(&name, reason)),
            None => errors.push(problem(&name, "the result has no operand".into())),
        }
    }
    let mut control_ret = BTreeMap::new();
    for name in graph.attrs.get(CONTROL_OUTPUTS_ATTR).and_then(AttrValue::as_list).unwrap_or_default() {
        if let Some(name) = name.as_str() {
            control_ret.insert(name.to_string(), name.to_string());
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let signature = OpDef {
        name: graph.name.clone(),
        input_arg: args.iter().map(|&(_, id)| arg_def(id)).collect(),
        output_arg: retvals.iter().map(|&(_, id)| arg_def(id)).collect(),
        control_output: control_ret.keys().cloned().collect(),
        ..OpDef::default()
    };
    Ok(FunctionDef { signature: Some(signature), node_def: node_defs, ret, control_ret, ..FunctionDef::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_argument_table_is_sorted() {
        assert!(OUTPUT_ARGS.windows(2).all(|w| w[0].0 < w[1].0));
        let table = |op: &str| OUTPUT_ARGS.iter().find(|(o, _)| *o == op).map(|(_, a)| *a);
        assert_eq!(table("MatMul"), Some(&["product"][..]));
        assert_eq!(table("TensorListPopBack"), Some(&["output_handle", "tensor"][..]));
        assert_eq!(table("NoOp"), Some(&[][..]));
    }
}
