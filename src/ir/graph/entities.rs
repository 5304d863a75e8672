//! The graph IR's entities: node and region ids, nodes, edges, operand
//! references and regions, each displayed as the text IR writes it.

use std::fmt;
use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;

use super::super::attrs::AttrMap;
use super::super::types::AttrValue;
use crate::syntax::Span;

/// A node of a graph. Displays as `#n`; the text IR names nodes `%name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub NodeIndex<u32>);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0.index())
    }
}

/// A region of a graph, an index into [`Graph::regions`](super::Graph::regions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(pub u32);

impl fmt::Display for RegionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "region{}", self.0)
    }
}

/// What a node stands for.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// An ordinary op.
    Op,
    /// Computation input `index` of a replicate region; its data inputs are
    /// the per-replica operands, in replica order.
    RegionInput {
        /// The replicate region the input belongs to.
        region: RegionId,
        /// The input's position among the region's inputs.
        index: u32,
    },
    /// A `gradients(ys, xs, grad_ys)` call; its data inputs are ys, then xs,
    /// then grad_ys. Output `i` is the gradient with respect to `xs[i]`.
    Gradients {
        /// How many values are differentiated.
        num_ys: u32,
        /// How many values the gradients are taken with respect to.
        num_xs: u32,
        /// Whether initial gradients for the ys are given (one per y).
        has_grad_ys: bool,
    },
}

/// A node: an op, a region input or a gradients call.
#[derive(Clone, Debug)]
pub struct Node {
    /// The node's name, unique in its graph (`%name` without `%`).
    pub name: Arc<str>,
    /// Whether the node is an op, a region input or a gradients call.
    pub kind: NodeKind,
    /// The op type (`MatMul`); empty for region inputs, `gradients` for calls.
    pub op: Arc<str>,
    /// The requested device (`@"/device:TPU:0"`), if any.
    pub device: Option<Arc<str>>,
    /// The node's attributes.
    pub attrs: AttrMap,
    /// The innermost region the node sits in.
    pub region: Option<RegionId>,
    /// Position in the text order.
    pub seq: u64,
    /// Where the node is defined in the source.
    pub span: Span,
}

impl Node {
    /// A new op node with no attributes.
    pub fn op(name: impl Into<Arc<str>>, op: impl Into<Arc<str>>) -> Node {
        Node {
            name: name.into(),
            kind: NodeKind::Op,
            op: op.into(),
            device: None,
            attrs: AttrMap::new(),
            region: None,
            seq: 0,
            span: Span::DETACHED,
        }
    }

    /// Builder: sets an attribute.
    pub fn with_attr(mut self, key: &str, value: AttrValue) -> Node {
        self.attrs.insert(key, value);
        self
    }

    /// Builder: sets the device.
    pub fn with_device(mut self, device: impl Into<Arc<str>>) -> Node {
        self.device = Some(device.into());
        self
    }

    /// Builder: sets the span.
    pub fn with_span(mut self, span: Span) -> Node {
        self.span = span;
        self
    }
}

/// An edge from a producer to a consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeKind {
    /// Output `output` of the source feeds data input `slot` of the target.
    Data {
        /// The producer's output index.
        output: u32,
        /// The consumer's data input index.
        slot: u32,
    },
    /// The target runs after the source; `slot` orders control inputs.
    Control {
        /// The position among the consumer's control inputs.
        slot: u32,
    },
}

/// An edge with the span of the operand that wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    /// Whether the edge carries data or only orders execution.
    pub kind: EdgeKind,
    /// The operand in the source that wrote the edge.
    pub span: Span,
}

/// One operand of a node, as returned by [`Graph::inputs`](super::Graph::inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Input {
    /// The producer.
    pub src: NodeId,
    /// `None` for a control input.
    pub output: Option<u32>,
    /// The operand in the source.
    pub span: Span,
}

impl Input {
    /// True for a control input.
    pub fn is_control(&self) -> bool {
        self.output.is_none()
    }
}

/// A reference to a tensor or, with `output == None`, to an op for control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRef {
    /// The producer.
    pub node: NodeId,
    /// Which output of the producer; `None` for a control reference.
    pub output: Option<u32>,
    /// The reference in the source.
    pub span: Span,
}

/// The kind of a region.
#[derive(Clone, Debug, PartialEq)]
pub enum RegionKind {
    /// `replicate (...) (...) { ... }`: the inputs are region-input nodes,
    /// the outputs the values named by `return`.
    Replicate {
        /// The region-input nodes, in order.
        inputs: Vec<NodeId>,
        /// The values the region returns, in order.
        outputs: Vec<ValueRef>,
    },
    /// `outside_compilation (...) { ... }`.
    OutsideCompilation,
}

/// A region: an authoring construct that groups ops.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// Replicate or outside_compilation, with the kind's own data.
    pub kind: RegionKind,
    /// The region's attributes (`num_replicas`, `output_reduce_ops`, ...).
    pub attrs: AttrMap,
    /// The region this one is nested in, if any.
    pub parent: Option<RegionId>,
    /// Position in the text order, shared with the nodes.
    pub seq: u64,
    /// The whole region in the source.
    pub span: Span,
    /// The span of the keyword, for short labels.
    pub keyword_span: Span,
    /// The span of the `return` statement, if any.
    pub return_span: Option<Span>,
}

impl Region {
    /// The `num_replicas` attribute of a replicate region.
    pub fn num_replicas(&self) -> Option<i64> {
        self.attrs.get_int("num_replicas")
    }
}
