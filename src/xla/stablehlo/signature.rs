//! The signature of an emitted module's `@main`, for tools that call the
//! module without reading its attributes: each argument and result in
//! order, with the graph name a user knows, its kind, dtype and shape.
//! `lower --format stablehlo -o step.mlir` writes it beside the module as
//! `step.mlir.json` (docs/xla.md).
//!
//! Kinds: an argument is a `feed` (a placeholder, or a replicated input
//! whose replicas each get their own operand), a `host_value` (a tensor
//! computed on the host from no feed, such as a constant outside the
//! cluster), a `carried` value (computed by an earlier stage or an
//! outside-compilation op) or a `variable`; a result is an `output`, a
//! `size` (the true length of an output whose size depends on values,
//! along the axis `size_of` names: the output is padded past it), a
//! `carried` value or a `variable` (its value after the step, aliased to
//! its argument).

use serde::Serialize;

use super::text::Ty;
use super::ArgSource;
use crate::ir::{Graph, NodeId};

/// One argument or result of `@main`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The tensor it is in the graph (`x:0`; a variable's name).
    pub name: String,
    /// `feed`, `host_value`, `carried`, `variable` or `output`.
    pub kind: &'static str,
    /// The element type (`f32`, `i32`, ...).
    pub dtype: String,
    /// The static shape, outermost dimension first.
    pub shape: Vec<usize>,
    /// For a variable: the result it is aliased to (arguments) or the
    /// argument it comes from (results).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<usize>,
    /// For a replicated input: the tensor each replica gets, in replica order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replica_feeds: Vec<String>,
    /// For a `size` result: the output it gives the true length of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_of: Option<SizeOf>,
}

/// Which output a `size` result measures, and along which axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SizeOf {
    /// The output's result index.
    pub result: usize,
    /// The padded axis.
    pub axis: usize,
}

/// The signature of one module (one stage of a cluster).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Signature {
    /// The module's name (`@cluster`, or `@cluster_stage<k>`).
    pub module: String,
    /// How many replicas run it.
    pub num_replicas: usize,
    /// `@main`'s arguments, in order.
    pub arguments: Vec<Entry>,
    /// `@main`'s results, in order.
    pub results: Vec<Entry>,
}

/// `name:k` of a graph value.
pub(super) fn tensor_name(graph: &Graph, node: NodeId, k: u32) -> String {
    format!("{}:{k}", graph.node(node).name)
}

/// The value a computation output returns, as the user named it: what
/// the `TPUReplicatedOutput` reads, seen through the `Identity` the
/// fan-out wraps each output in.
pub(super) fn output_name(graph: &Graph, output: NodeId) -> String {
    let Some(read) = graph.data_inputs(output).into_iter().next() else {
        return graph.node(output).name.to_string();
    };
    let value = match &*graph.node(read.src).op {
        "Identity" => graph.data_inputs(read.src).into_iter().next().unwrap_or(read),
        _ => read,
    };
    tensor_name(graph, value.src, value.output.unwrap_or(0))
}

/// The entry of argument `arg` of type `ty` (`name` as its attribute says).
pub(super) fn argument(graph: &Graph, arg: &ArgSource, name: String, ty: &Ty, alias: Option<usize>) -> Entry {
    let (kind, replica_feeds) = match *arg {
        ArgSource::Replicated(input) => (
            "feed",
            graph.data_inputs(input).iter().map(|o| tensor_name(graph, o.src, o.output.unwrap_or(0))).collect(),
        ),
        ArgSource::Host(id, _) => {
            let feed = matches!(&*graph.node(id).op, "Placeholder" | "PlaceholderWithDefault");
            (if feed { "feed" } else { "host_value" }, Vec::new())
        }
        ArgSource::Carried(..) => ("carried", Vec::new()),
        ArgSource::Variable(_) => ("variable", Vec::new()),
    };
    Entry { name, kind, dtype: ty.dtype.to_string(), shape: ty.shape.clone(), alias, replica_feeds, size_of: None }
}

/// The entry of a result of type `ty`.
pub(super) fn result(name: String, kind: &'static str, ty: &Ty, alias: Option<usize>) -> Entry {
    Entry {
        name,
        kind,
        dtype: ty.dtype.to_string(),
        shape: ty.shape.clone(),
        alias,
        replica_feeds: Vec::new(),
        size_of: None,
    }
}
