//! IR → TensorFlow GraphDef, as binary (`.pb`) or text (`.pbtxt`).
//!
//! The inverse of [`crate::tf::to_ir`]: nodes in text order, data inputs
//! then control inputs (`a`, `a:k`, `^a`), the device when set, every
//! attribute, the reserved experimental attributes back into their NodeDef
//! fields and the graph attributes back into `versions`, `version`,
//! `library` and `debug_info`. A GraphDef imported and exported is equal to
//! the original as a protobuf message, whichever format each step used: the
//! function library and the debug info are decoded messages, so both
//! formats hold them.
//!
//! Nothing is dropped silently: what a GraphDef cannot hold is an error
//! ([`export_errors`] lists them all, and [`to_graphdef`] fails with them).
//! That is a graph that is not flat (regions and `gradients` calls, which
//! the rewrite passes remove) and attribute lists holding lists or
//! placeholders. Cost: linear in the graph.

use std::collections::BTreeMap;

use prost::Message;

use crate::ir::types::FuncRef;
use crate::ir::{self, AttrMap, DType, Graph, NodeKind, Shape, TensorData, TensorLit};
use crate::syntax::Span;
use crate::tf::error::ImportError;
use crate::tf::proto::{
    self, Dim, ExperimentalDebugInfo, FullTypeDef, FunctionDefLibrary, GraphDebugInfo, GraphDef, ListValue,
    NameAttrList, NodeDef, TensorProto, TensorShapeProto, Value, VersionDef,
};
use crate::tf::to_ir::{graph_attr, DEBUG_INFO_ATTR, FULL_TYPE_ATTR};

/// The GraphDef of a graph, or everything in the graph a GraphDef cannot
/// hold.
pub fn to_graphdef(graph: &Graph) -> Result<GraphDef, Vec<ImportError>> {
    let mut errors = not_flat(graph);
    let order = graph.nodes_in_order();
    let mut nodes = Vec::with_capacity(order.len());
    for id in order {
        let input = graph
            .inputs(id)
            .into_iter()
            .map(|i| {
                let name = &graph.node(i.src).name;
                match i.output {
                    None => format!("^{name}"),
                    Some(0) => name.to_string(),
                    Some(k) => format!("{name}:{k}"),
                }
            })
            .collect();
        nodes.push(node_def(graph, id, input, &mut errors));
    }
    let attrs = &graph.attrs;
    let int = |key: &str| attrs.get_int(key).and_then(|v| i32::try_from(v).ok());
    let versions = int(graph_attr::PRODUCER).map(|producer| VersionDef {
        producer,
        min_consumer: int(graph_attr::MIN_CONSUMER).unwrap_or(0),
        bad_consumers: attrs
            .get(graph_attr::BAD_CONSUMERS)
            .and_then(ir::AttrValue::as_int_list)
            .map(|l| l.into_iter().filter_map(|v| i32::try_from(v).ok()).collect())
            .unwrap_or_default(),
    });
    let mut cx = Cx { node: &graph.name, span: Span::DETACHED, errors: &mut errors };
    let library = attrs.get(graph_attr::LIBRARY).and_then(|v| cx.decode::<FunctionDefLibrary>(graph_attr::LIBRARY, v));
    let debug_info =
        attrs.get(graph_attr::DEBUG_INFO).and_then(|v| cx.decode::<GraphDebugInfo>(graph_attr::DEBUG_INFO, v));
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(GraphDef { node: nodes, library, version: int(graph_attr::VERSION).unwrap_or(0), versions, debug_info })
}

/// Node `id` as a NodeDef with the operand names `input`: its op, device
/// and every attribute, the reserved experimental attributes back in their
/// NodeDef fields.
pub(super) fn node_def(graph: &Graph, id: ir::NodeId, input: Vec<String>, errors: &mut Vec<ImportError>) -> NodeDef {
    let node = graph.node(id);
    let mut cx = Cx { node: &node.name, span: node.span, errors };
    let mut attr = BTreeMap::new();
    let mut experimental_debug_info = None;
    let mut experimental_type = None;
    for (key, value) in node.attrs.iter() {
        match key {
            DEBUG_INFO_ATTR => experimental_debug_info = cx.decode::<ExperimentalDebugInfo>(key, value),
            FULL_TYPE_ATTR => experimental_type = cx.decode::<FullTypeDef>(key, value),
            _ => {
                attr.insert(key.to_string(), cx.attr_value(value));
            }
        }
    }
    let op = match node.kind {
        NodeKind::Op => node.op.to_string(),
        NodeKind::RegionInput { .. } => "RegionInput".to_string(),
        NodeKind::Gradients { .. } => "gradients".to_string(),
    };
    NodeDef {
        name: node.name.to_string(),
        op,
        input,
        device: node.device.as_deref().unwrap_or("").to_string(),
        attr,
        experimental_debug_info,
        experimental_type,
    }
}

/// The graph as protobuf text, in the style of Python's `str(graph_def)`.
pub fn to_pbtxt(graph: &Graph) -> Result<String, Vec<ImportError>> {
    Ok(crate::tf::pbtxt_print::print_graphdef(&to_graphdef(graph)?))
}

/// The graph as a binary GraphDef.
pub fn to_pb(graph: &Graph) -> Result<Vec<u8>, Vec<ImportError>> {
    Ok(to_graphdef(graph)?.encode_to_vec())
}

/// Everything in `graph` that a GraphDef cannot hold (empty when it exports).
pub fn export_errors(graph: &Graph) -> Vec<ImportError> {
    to_graphdef(graph).err().unwrap_or_default()
}

/// The nodes that are not plain ops: region members and inputs, gradients calls.
fn not_flat(graph: &Graph) -> Vec<ImportError> {
    let mut errors = Vec::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        let kind = match node.kind {
            NodeKind::Op if node.region.is_none() => continue,
            NodeKind::Op => "op inside a region",
            NodeKind::RegionInput { .. } => "replicate region input",
            NodeKind::Gradients { .. } => "gradients call",
        };
        errors.push(ImportError::NotFlat { node: node.name.to_string(), kind, span: node.span });
    }
    errors
}

fn as_bytes(value: &ir::AttrValue) -> Option<&[u8]> {
    match value {
        ir::AttrValue::Str(s) => Some(s.as_bytes()),
        ir::AttrValue::Bytes(b) => Some(b),
        _ => None,
    }
}

/// The node being exported, for errors.
struct Cx<'a> {
    node: &'a str,
    span: Span,
    errors: &'a mut Vec<ImportError>,
}

impl Cx<'_> {
    fn not_representable(&mut self, what: impl Into<String>) {
        self.errors.push(ImportError::NotRepresentable {
            node: self.node.to_string(),
            what: what.into(),
            span: self.span,
        });
    }

    /// Decodes the message a reserved attribute holds as encoded bytes.
    fn decode<M: Message + Default>(&mut self, key: &str, value: &ir::AttrValue) -> Option<M> {
        match as_bytes(value).map(M::decode) {
            Some(Ok(m)) => Some(m),
            Some(Err(e)) => {
                self.not_representable(format!("attribute `{key}` ({e})"));
                None
            }
            None => {
                self.not_representable(format!("attribute `{key}` (not an encoded message)"));
                None
            }
        }
    }

    /// An IR attribute value as a GraphDef `AttrValue`.
    fn attr_value(&mut self, value: &ir::AttrValue) -> proto::AttrValue {
        use ir::AttrValue as A;
        let v = match value {
            A::Str(s) => Value::S(s.as_bytes().to_vec()),
            A::Bytes(b) => Value::S(b.clone()),
            A::Int(i) => Value::I(*i),
            A::Float(f) => Value::F(*f),
            A::Bool(b) => Value::B(*b),
            A::Type(t) => Value::Type(t.number()),
            A::Shape(s) => Value::Shape(shape(s)),
            A::Tensor(t) => Value::Tensor(Box::new(tensor(t))),
            A::List(items) => Value::List(Box::new(self.list(items))),
            A::Func(f) => Value::Func(self.func(f)),
            A::Placeholder(p) => Value::Placeholder(p.clone()),
        };
        proto::AttrValue { value: Some(v) }
    }

    fn list(&mut self, items: &[ir::AttrValue]) -> ListValue {
        use ir::AttrValue as A;
        let mut l = ListValue::default();
        for item in items {
            match item {
                A::Str(s) => l.s.push(s.as_bytes().to_vec()),
                A::Bytes(b) => l.s.push(b.clone()),
                A::Int(i) => l.i.push(*i),
                A::Float(f) => l.f.push(*f),
                A::Bool(b) => l.b.push(*b),
                A::Type(t) => l.r#type.push(t.number()),
                A::Shape(s) => l.shape.push(shape(s)),
                A::Tensor(t) => l.tensor.push(tensor(t)),
                A::Func(f) => l.func.push(self.func(f)),
                A::List(_) => self.not_representable("a list inside a list"),
                A::Placeholder(_) => self.not_representable("a placeholder inside a list"),
            }
        }
        l
    }

    fn func(&mut self, f: &FuncRef) -> NameAttrList {
        NameAttrList { name: f.name.clone(), attr: self.attr_map(&f.attrs) }
    }

    fn attr_map(&mut self, attrs: &AttrMap) -> BTreeMap<String, proto::AttrValue> {
        attrs.iter().map(|(k, v)| (k.to_string(), self.attr_value(v))).collect()
    }
}

fn shape(s: &Shape) -> TensorShapeProto {
    match &s.dims {
        None => TensorShapeProto { dim: Vec::new(), unknown_rank: true },
        Some(dims) => TensorShapeProto { dim: dims_of(dims), unknown_rank: false },
    }
}

fn dims_of(dims: &[i64]) -> Vec<Dim> {
    dims.iter().map(|&size| Dim { size, name: String::new() }).collect()
}

fn tensor(t: &TensorLit) -> TensorProto {
    let mut p = TensorProto {
        dtype: t.dtype.number(),
        tensor_shape: Some(TensorShapeProto { dim: dims_of(&t.shape), unknown_rank: false }),
        ..TensorProto::default()
    };
    match &t.data {
        TensorData::Content(b) => p.tensor_content = b.clone(),
        TensorData::Float(v) if t.dtype == DType::C64 => p.scomplex_val = v.clone(),
        TensorData::Float(v) => p.float_val = v.clone(),
        TensorData::Double(v) if t.dtype == DType::C128 => p.dcomplex_val = v.clone(),
        TensorData::Double(v) => p.double_val = v.clone(),
        TensorData::Half(v) => p.half_val = v.clone(),
        TensorData::Int(v) => p.int_val = v.clone(),
        TensorData::Int64(v) => p.int64_val = v.clone(),
        TensorData::Uint32(v) => p.uint32_val = v.clone(),
        TensorData::Uint64(v) => p.uint64_val = v.clone(),
        TensorData::Bool(v) => p.bool_val = v.clone(),
        TensorData::Str(v) => p.string_val = v.clone(),
    }
    p
}
