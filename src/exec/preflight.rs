//! Checks before a run, so that a run fails at once, with every problem
//! listed and located, instead of at the first op that trips over one:
//! feeds against their placeholders ([`check_feeds`]) and ops without a
//! kernel ([`check_kernels`]). Both are linear in the size of the module.

use super::error::ExecError;
use super::tensor::Tensor;
use crate::ir::Module;

/// Checks `feeds` (tensor name → value) against the placeholders of the
/// host program of `lowered`, before anything runs: each fed placeholder's
/// `dtype` and `shape` (a -1 dim takes any size), and every `Placeholder`
/// that is not fed. Returns every problem at once, each at its node's span.
/// Feeds that name other nodes are left to the run, which resolves them.
pub fn check_feeds(lowered: &Module, feeds: &[(String, Tensor)]) -> Vec<ExecError> {
    let Some(host) = lowered.graph(super::driver::HOST) else { return Vec::new() };
    let mut errors = Vec::new();
    let mut fed = std::collections::HashSet::new();
    for (tensor, value) in feeds {
        let (name, output) = tensor.rsplit_once(':').map_or((tensor.as_str(), "0"), |(n, o)| (n, o));
        let Some(id) = host.find(name) else { continue };
        let node = host.node(id);
        if !matches!(&*node.op, "Placeholder" | "PlaceholderWithDefault") || output != "0" {
            continue;
        }
        fed.insert(id);
        let mismatch = |expected: String, found: String| ExecError::FeedMismatch {
            tensor: tensor.clone(),
            node: node.name.to_string(),
            expected,
            found,
            span: node.span,
        };
        if let Some(dtype) = node.attrs.get("dtype").and_then(|v| v.as_type()) {
            if dtype != value.dtype() {
                errors.push(mismatch(format!("dtype {dtype}"), format!("dtype {}", value.dtype())));
                continue;
            }
        }
        if let Some(dims) = node.attrs.get("shape").and_then(|v| v.as_shape()).and_then(|s| s.dims.as_ref()) {
            let found = value.shape();
            let fits =
                dims.len() == found.len() && dims.iter().zip(found).all(|(&d, &f)| d < 0 || d as u64 == f as u64);
            if !fits {
                let shape = crate::ir::Shape::known(dims.clone());
                errors.push(mismatch(format!("{shape}"), format!("shape{found:?}")));
            }
        }
    }
    for id in host.nodes_in_order() {
        let node = host.node(id);
        if &*node.op == "Placeholder" && !fed.contains(&id) {
            errors.push(ExecError::MissingFeed { node: node.name.to_string(), span: node.span });
        }
    }
    errors
}

/// Every op type of `lowered` without a kernel, one error per type at its
/// first node (in text order), naming how many nodes have it.
pub fn check_kernels(lowered: &Module) -> Vec<ExecError> {
    let mut first: Vec<(String, usize, crate::syntax::Span, String)> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for graph in &lowered.graphs {
        for id in graph.nodes_in_order() {
            let node = graph.node(id);
            if super::kernels::has_kernel(&node.op) {
                continue;
            }
            match seen.get(&*node.op) {
                Some(&i) => {
                    let entry: &mut (String, usize, crate::syntax::Span, String) = &mut first[i];
                    entry.1 += 1;
                }
                None => {
                    seen.insert(node.op.to_string(), first.len());
                    first.push((node.op.to_string(), 1, node.span, node.name.to_string()));
                }
            }
        }
    }
    first.into_iter().map(|(op, nodes, span, node)| ExecError::NoKernel { op, node, nodes, span }).collect()
}
