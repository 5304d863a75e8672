//! What a module needs before it runs or lowers, for the XLA extension ops:
//! each `SymbolicGradient` names its gradient function
//! ([`gradients::expand_symbolic_gradients`]), each `XlaCallModule` names
//! the function its StableHLO module is raised into
//! ([`super::xla_call_module`]), and each `XlaRecv` reads the value of the
//! `XlaSend` of its `tensor_name`.
//!
//! `XlaSend`/`XlaRecv` are transfers through a channel named by
//! `tensor_name`. Within one graph, the channel is written as a data edge:
//! the recv gets the sent value as its operand (`XlaRecv` declares none),
//! so the simulator and the StableHLO lowering both pass the value on, and
//! the send's value is computed before the recv runs. A recv whose
//! `tensor_name` no `XlaSend` of its graph writes, two sends of one name, or
//! a send of another dtype or shape than the recv declares are diagnostics
//! naming the `tensor_name`. Invariant: a recv with an operand is paired,
//! so the pass may run more than once. Cost: linear in the nodes.

use std::collections::HashMap;

use super::error::PassError;
use super::gradients::{self, GradientsConfig};
use crate::ir::{AttrValue, Graph, Module, NodeId};
use crate::syntax::Span;

/// Prepares every graph of `module` (see the module doc); returns the
/// problems with the name of the graph each was found in.
pub fn prepare(module: &mut Module) -> Vec<(String, PassError)> {
    let mut found = gradients::expand_symbolic_gradients(module, &GradientsConfig::default());
    found.extend(super::xla_call_module::raise_xla_call_modules(module, &super::xla_call_module::read_module));
    for graph in &mut module.graphs {
        let name = graph.name.clone();
        found.extend(pair_channels(graph).into_iter().map(|e| (name.clone(), e)));
    }
    found
}

/// Gives each unpaired `XlaRecv` of `graph` the value its `XlaSend` sends.
pub fn pair_channels(graph: &mut Graph) -> Vec<PassError> {
    let mut errors = Vec::new();
    let of = |graph: &Graph, op: &str| -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = graph.node_ids().filter(|&id| &*graph.node(id).op == op).collect();
        ids.sort_by_key(|&id| graph.node(id).seq);
        ids
    };
    let recvs = of(graph, "XlaRecv");
    if recvs.is_empty() {
        return errors;
    }
    let error = |graph: &Graph, id: NodeId, tensor_name: &str, problem: String| PassError::XlaChannel {
        node: graph.node(id).name.to_string(),
        tensor_name: tensor_name.to_string(),
        problem,
        span: graph.node(id).span,
    };
    let mut sends: HashMap<String, NodeId> = HashMap::new();
    for id in of(graph, "XlaSend") {
        let name = graph.node(id).attrs.get_str("tensor_name").unwrap_or_default().to_string();
        if let Some(&first) = sends.get(&name) {
            let problem = format!("`%{}` sends this name too; a channel has one sender", graph.node(first).name);
            errors.push(error(graph, id, &name, problem));
            continue;
        }
        sends.insert(name, id);
    }
    for id in recvs {
        if !graph.data_inputs(id).is_empty() {
            continue;
        }
        let node = graph.node(id);
        let name = node.attrs.get_str("tensor_name").unwrap_or_default().to_string();
        let Some(&send) = sends.get(&name) else {
            let problem = format!("no XlaSend of graph `@{}` sends this name", graph.name);
            errors.push(error(graph, id, &name, problem));
            continue;
        };
        let Some(input) = graph.data_inputs(send).first().copied() else {
            errors.push(error(graph, send, &name, "the XlaSend has no operand".into()));
            continue;
        };
        let sent = graph.node(send).attrs.get("T").and_then(AttrValue::as_type);
        let wanted = node.attrs.get("dtype").and_then(AttrValue::as_type);
        if let (Some(sent), Some(wanted)) = (sent, wanted) {
            if sent != wanted {
                errors.push(error(
                    graph,
                    id,
                    &name,
                    format!("the XlaSend sends {sent} but the XlaRecv expects {wanted}"),
                ));
                continue;
            }
        }
        graph.add_data_input(id, input.src, input.output.unwrap_or(0), Span::DETACHED);
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;

    fn graph(text: &str) -> Graph {
        let (m, errors) = parse_module(text.as_bytes()).expect("parses");
        assert!(errors.is_empty(), "{errors:?}");
        m.graphs.into_iter().next().expect("a graph")
    }

    const G: &str = r#"
graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %y = Neg(%x) {T = f32}
  %s = XlaSend(%y) {T = f32, tensor_name = "t"}
  %r = XlaRecv() {dtype = f32, tensor_name = "t", shape = shape[2]}
}
"#;

    #[test]
    fn a_recv_reads_its_send() {
        let mut g = graph(G);
        assert!(pair_channels(&mut g).is_empty());
        let r = g.find("r").expect("the recv");
        let inputs = g.data_inputs(r);
        assert_eq!(inputs.len(), 1);
        assert_eq!(&*g.node(inputs[0].src).name, "y");
        // Paired once: a second run adds nothing.
        assert!(pair_channels(&mut g).is_empty());
        assert_eq!(g.data_inputs(r).len(), 1);
    }

    #[test]
    fn a_recv_without_a_send_names_its_tensor_name() {
        let mut g = graph(&G.replace("tensor_name = \"t\", shape", "tensor_name = \"u\", shape"));
        let errors = pair_channels(&mut g);
        assert_eq!(errors.len(), 1);
        let shown = errors[0].to_string();
        assert!(shown.contains("`u`") && shown.contains("%r"), "{shown}");
        let code = miette::Diagnostic::code(&errors[0]).map(|c| c.to_string());
        assert_eq!(code.as_deref(), Some("tpu_rewrite::passes::xla_channel"));
    }

    #[test]
    fn a_dtype_mismatch_is_refused() {
        let mut g = graph(&G.replace("%r = XlaRecv() {dtype = f32", "%r = XlaRecv() {dtype = i32"));
        let errors = pair_channels(&mut g);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("sends f32"), "{}", errors[0]);
    }
}
