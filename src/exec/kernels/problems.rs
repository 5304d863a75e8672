//! Checks of a whole module before a run: every node needs a kernel that
//! takes its dtypes ([`kernel_problems`]), and string tensors stay off
//! the TPU device programs.

use std::collections::BTreeSet;

use super::{has_kernel, FLOAT_ONLY};
use crate::exec::error::{ExecError, KernelProblem};
use crate::ir::{AttrMap, DType, Module, NodeKind};

/// Attributes that name the dtype of an op's values.
const DTYPE_ATTRS: &[&str] = &["T", "dtype", "SrcT", "DstT", "Tparams", "Tout", "out_type", "output_type"];

/// True when a tensor of the executor can hold `d`: every fixed-width
/// dtype (quantized ones as their plain integers), strings, handles and
/// variants.
fn holds(d: DType) -> bool {
    d.size_bytes().is_some() || matches!(d, DType::Str | DType::Resource | DType::Variant)
}

/// Every node of `module` that cannot run, in graph and text order: op
/// types without a kernel, and dtype attributes (`T`, `dtype`, `DstT`, ...)
/// naming a dtype the executor cannot hold (quantized 16-bit, or
/// another dtype no `Tensor` holds) or an integer where the kernel computes in
/// floating point; string tensors in a TPU device program (`role =
/// "replica"`). A node cloned into several programs (one per replica)
/// is reported once, for the first. Cost: one pass over the nodes and
/// their attributes.
pub fn kernel_problems(module: &Module) -> Vec<KernelProblem> {
    let mut problems = Vec::new();
    // (node, op, attribute) already reported.
    let mut seen: std::collections::HashSet<(String, String, &str)> = std::collections::HashSet::new();
    for graph in &module.graphs {
        // A TPU device program of a lowered module (the host and init programs run on the host).
        let on_device = graph.attrs.get_str("role") == Some("replica");
        for id in graph.nodes_in_order() {
            let node = graph.node(id);
            if matches!(node.kind, NodeKind::RegionInput { .. }) {
                continue;
            }
            let at = |op: &str| (graph.name.clone(), node.name.to_string(), op.to_string(), node.span);
            if !has_kernel(&node.op) {
                let (graph, node, op, span) = at(&node.op);
                if seen.insert((node.clone(), op.clone(), "")) {
                    problems.push(KernelProblem::NoKernel { graph, node, op, span });
                }
                continue;
            }
            if on_device && carries_string(&node.op, &node.attrs) {
                let (graph, node, op, span) = at(&node.op);
                if seen.insert((node.clone(), op.clone(), "string")) {
                    problems.push(KernelProblem::StringOnDevice { graph, node, op, span });
                }
                continue;
            }
            for key in DTYPE_ATTRS {
                let Some(value) = node.attrs.get(key) else { continue };
                let dtypes: Vec<DType> = match value.as_list() {
                    Some(items) => items.iter().filter_map(|v| v.as_type()).collect(),
                    None => value.as_type().into_iter().collect(),
                };
                let float_only = FLOAT_ONLY.contains(&&*node.op) && *key == "T";
                for d in dtypes {
                    let is_float = matches!(d, DType::F32 | DType::F64 | DType::BF16 | DType::F16);
                    if (!holds(d) || (float_only && !is_float))
                        && seen.insert((node.name.to_string(), node.op.to_string(), key))
                    {
                        let (graph, node, op, span) = at(&node.op);
                        problems.push(KernelProblem::UnsupportedDType {
                            graph,
                            node,
                            op,
                            attr: key.to_string(),
                            dtype: d,
                            span,
                        });
                    }
                }
            }
        }
    }
    problems
}

/// Ops whose values are strings whatever their attributes say.
const STRING_OPS: &[&str] = &["PrintV2", "ScalarSummary", "StringFormat", "StringJoin"];

/// True when a node of op `op` makes or takes a string tensor: a string op,
/// a dtype attribute (or list of them) naming `string`, or a string `Const`.
fn carries_string(op: &str, attrs: &AttrMap) -> bool {
    let is_str = |v: &crate::ir::AttrValue| match v.as_list() {
        Some(items) => items.iter().any(|i| i.as_type() == Some(DType::Str)),
        None => v.as_type() == Some(DType::Str),
    };
    STRING_OPS.contains(&op)
        || DTYPE_ATTRS.iter().chain(&["U", "Tin"]).filter_map(|k| attrs.get(k)).any(is_str)
        || attrs.get("value").and_then(|v| v.as_tensor()).is_some_and(|lit| lit.dtype == DType::Str)
}

/// [`kernel_problems`] as an error, or `Ok` when every node can run.
pub fn check_kernels(module: &Module) -> Result<(), ExecError> {
    let problems = kernel_problems(module);
    if problems.is_empty() {
        return Ok(());
    }
    Err(ExecError::MissingKernels { ops: missing_kernels(module), problems })
}

/// Every op type of `module` that has no kernel, sorted, each once.
///
/// Region inputs (an authoring construct) are not ops and are not listed;
/// `gradients` calls are listed, since the executor cannot run them.
pub fn missing_kernels(module: &Module) -> Vec<String> {
    let mut missing = BTreeSet::new();
    for graph in &module.graphs {
        for id in graph.node_ids() {
            let node = graph.node(id);
            if matches!(node.kind, NodeKind::RegionInput { .. }) {
                continue;
            }
            if !has_kernel(&node.op) {
                missing.insert(node.op.to_string());
            }
        }
    }
    missing.into_iter().collect()
}
