//! IR → TensorFlow GraphDef, as binary (`.pb`) or text (`.pbtxt`).
//!
//! The inverse of [`crate::import`]: nodes in text order, data inputs then
//! control inputs (`a`, `a:k`, `^a`), the device when set, every attribute,
//! the reserved experimental attributes back into their NodeDef fields and
//! the graph attributes back into `versions`, `version`, `library` and
//! `debug_info`. A GraphDef imported and exported in the same format is
//! equal to the original as a protobuf message.
//!
//! The graph must be flat: regions and `gradients` calls are authoring
//! constructs the rewrite passes remove. If any remain, their nodes export
//! as ops named after their kind and the region structure is lost.
//! Values a GraphDef cannot hold are left out: a list nested in a list, a
//! placeholder inside a list. Opaque parts only export in the format they
//! were read from; [`export_warnings`] names what a conversion drops.

use std::collections::BTreeMap;

use prost::Message;

use crate::ir::types::FuncRef;
use crate::ir::{self, AttrMap, DType, Graph, NodeKind, Shape, TensorData, TensorLit};
use crate::tf::error::ImportError;
use crate::tf::pbtxt::OpaqueText;
use crate::tf::proto::{
    self, Dim, ExperimentalDebugInfo, FullTypeDef, GraphDef, ListValue, NameAttrList, NodeDef, TensorProto,
    TensorShapeProto, Value, VersionDef,
};
use crate::tf::to_ir::{graph_attr, DEBUG_INFO_ATTR, FULL_TYPE_ATTR};
use crate::tf::GraphDefFormat;

/// The GraphDef of a graph; opaque text parts (from `.pbtxt`) are not in it.
pub fn to_graphdef(graph: &Graph) -> GraphDef {
    let order = graph.nodes_in_order();
    let mut nodes = Vec::with_capacity(order.len());
    for id in order {
        let node = graph.node(id);
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
        let mut attr = BTreeMap::new();
        let mut experimental_debug_info = None;
        let mut experimental_type = None;
        for (key, value) in node.attrs.iter() {
            match key {
                DEBUG_INFO_ATTR => {
                    experimental_debug_info = as_bytes(value).and_then(|b| ExperimentalDebugInfo::decode(b).ok())
                }
                FULL_TYPE_ATTR => experimental_type = as_bytes(value).and_then(|b| FullTypeDef::decode(b).ok()),
                _ => {
                    attr.insert(key.to_string(), attr_value(value));
                }
            }
        }
        let op = match node.kind {
            NodeKind::Op => node.op.to_string(),
            NodeKind::RegionInput { .. } => "RegionInput".to_string(),
            NodeKind::Gradients { .. } => "gradients".to_string(),
        };
        nodes.push(NodeDef {
            name: node.name.to_string(),
            op,
            input,
            device: node.device.as_deref().unwrap_or("").to_string(),
            attr,
            experimental_debug_info,
            experimental_type,
        });
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
    GraphDef {
        node: nodes,
        library: attrs.get(graph_attr::LIBRARY).and_then(as_bytes).map(<[u8]>::to_vec),
        version: int(graph_attr::VERSION).unwrap_or(0),
        versions,
        debug_info: attrs.get(graph_attr::DEBUG_INFO).and_then(as_bytes).map(<[u8]>::to_vec),
    }
}

/// The graph as protobuf text, in the style of Python's `str(graph_def)`.
pub fn to_pbtxt(graph: &Graph) -> String {
    let graph_def = to_graphdef(graph);
    let text = |key: &str| graph.attrs.get_str(key).map(str::to_string);
    let opaque =
        OpaqueText { library: text(graph_attr::LIBRARY_PBTXT), debug_info: text(graph_attr::DEBUG_INFO_PBTXT) };
    crate::tf::pbtxt_print::print_graphdef(&graph_def, &opaque)
}

/// The graph as a binary GraphDef.
pub fn to_pb(graph: &Graph) -> Vec<u8> {
    to_graphdef(graph).encode_to_vec()
}

/// What exporting `graph` as `format` leaves out: opaque parts read from the
/// other format, and non-op nodes (regions, gradients calls).
pub fn export_warnings(graph: &Graph, format: GraphDefFormat) -> Vec<ImportError> {
    let mut warnings = Vec::new();
    let opaque = [
        ("library", graph_attr::LIBRARY, graph_attr::LIBRARY_PBTXT),
        ("debug_info", graph_attr::DEBUG_INFO, graph_attr::DEBUG_INFO_PBTXT),
    ];
    for (field, binary_key, text_key) in opaque {
        let (key, from, to) = match format {
            GraphDefFormat::Text => (binary_key, "binary", "text"),
            GraphDefFormat::Binary => (text_key, "text", "binary"),
        };
        if graph.attrs.contains_key(key) {
            warnings.push(ImportError::OpaqueNotConvertible { field, from, to });
        }
    }
    for id in graph.node_ids() {
        let node = graph.node(id);
        let kind = match node.kind {
            NodeKind::Op if node.region.is_none() => continue,
            NodeKind::Op => "op inside a region",
            NodeKind::RegionInput { .. } => "replicate region input",
            NodeKind::Gradients { .. } => "gradients call",
        };
        warnings.push(ImportError::NotFlat { node: node.name.to_string(), kind, span: node.span });
    }
    warnings
}

fn as_bytes(value: &ir::AttrValue) -> Option<&[u8]> {
    match value {
        ir::AttrValue::Str(s) => Some(s.as_bytes()),
        ir::AttrValue::Bytes(b) => Some(b),
        _ => None,
    }
}

/// An IR attribute value as a GraphDef `AttrValue`.
fn attr_value(value: &ir::AttrValue) -> proto::AttrValue {
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
        A::List(items) => Value::List(Box::new(list(items))),
        A::Func(f) => Value::Func(func(f)),
        A::Placeholder(p) => Value::Placeholder(p.clone()),
    };
    proto::AttrValue { value: Some(v) }
}

fn list(items: &[ir::AttrValue]) -> ListValue {
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
            A::Func(f) => l.func.push(func(f)),
            // A GraphDef list holds no lists or placeholders.
            A::List(_) | A::Placeholder(_) => {}
        }
    }
    l
}

fn func(f: &FuncRef) -> NameAttrList {
    NameAttrList { name: f.name.clone(), attr: attr_map(&f.attrs) }
}

fn attr_map(attrs: &AttrMap) -> BTreeMap<String, proto::AttrValue> {
    attrs.iter().map(|(k, v)| (k.to_string(), attr_value(v))).collect()
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
