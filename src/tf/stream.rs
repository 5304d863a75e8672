//! A binary GraphDef read node by node.
//!
//! A GraphDef is mostly its repeated `node` field. Decoding the whole
//! message first holds every `NodeDef` (names, attribute maps, tensors) in
//! memory beside the IR built from it; [`split`] instead walks the
//! message's top-level fields once, keeps each node's bytes as a slice of
//! the input, and decodes the other fields (`library`, `versions`, …) as a
//! GraphDef without nodes. The importer then decodes one `NodeDef` at a
//! time and drops it as soon as its IR node exists.
//!
//! Invariants: the nodes come out in the order they are in the input, and
//! every other field is decoded exactly as `GraphDef::decode` would decode
//! it (repeated occurrences of a singular message field merge, in order).
//! Cost: one pass over the input's top level, no copies of node bytes.

use prost::bytes::Buf;
use prost::encoding::{decode_key, decode_varint, WireType};
use prost::Message;

use super::error::ImportError;
use super::proto::{GraphDef, NodeDef};

/// The `node` field's number in `GraphDef`.
const NODE_FIELD: u32 = 1;
/// The `input` field's number in `NodeDef`.
const INPUT_FIELD: u32 = 3;
/// The `attr` field's number in `NodeDef`.
const ATTR_FIELD: u32 = 5;

/// A binary GraphDef split at its top level.
pub struct Split<'a> {
    /// Each `node` field's encoded `NodeDef`, in order.
    pub nodes: Vec<&'a [u8]>,
    /// Every other field, decoded (its `node` list is empty).
    pub header: GraphDef,
}

impl Split<'_> {
    /// The number of `input` entries over all nodes, counted without
    /// decoding them (for reserving edge storage once).
    pub fn input_count(&self) -> usize {
        self.nodes.iter().map(|n| count_field(n, INPUT_FIELD)).sum()
    }
}

/// Splits `bytes`, a binary GraphDef, into its nodes' bytes and the rest.
pub fn split(bytes: &[u8]) -> Result<Split<'_>, ImportError> {
    let decode_error = |e: prost::DecodeError| ImportError::decode(e.to_string());
    let mut nodes = Vec::new();
    let mut rest = Vec::new();
    let mut buf = bytes;
    while buf.has_remaining() {
        let start = bytes.len() - buf.remaining();
        let (field, wire_type) = decode_key(&mut buf).map_err(decode_error)?;
        if field == NODE_FIELD && wire_type == WireType::LengthDelimited {
            let len = decode_varint(&mut buf).map_err(decode_error)?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= buf.len())
                .ok_or_else(|| ImportError::decode("failed to decode Protobuf message: buffer underflow"))?;
            nodes.push(&buf[..len]);
            buf.advance(len);
        } else {
            skip_field(wire_type, &mut buf).map_err(ImportError::decode)?;
            let end = bytes.len() - buf.remaining();
            rest.extend_from_slice(&bytes[start..end]);
        }
    }
    let header = GraphDef::decode(rest.as_slice()).map_err(decode_error)?;
    Ok(Split { nodes, header })
}

/// Decodes one node's bytes.
pub fn decode_node(bytes: &[u8]) -> Result<NodeDef, ImportError> {
    NodeDef::decode(bytes).map_err(|e| ImportError::decode(e.to_string()))
}

/// A node decoded without its attributes, which stay encoded.
pub struct SplitNode<'a> {
    /// The node; its `attr` map is empty when `attrs` is `Some`.
    pub def: NodeDef,
    /// The encoded `attr` entries, when they form one run of the node's bytes
    /// (TensorFlow writes them so). Equal bytes decode to equal attributes,
    /// so the importer converts each distinct run once; decoding the run as a
    /// `NodeDef` yields exactly the node's `attr` map.
    pub attrs: Option<&'a [u8]>,
}

/// Decodes one node's bytes except for its attributes ([`SplitNode`]); a
/// node whose attributes are not one run of bytes is decoded whole.
pub fn decode_node_split(bytes: &[u8]) -> Result<SplitNode<'_>, ImportError> {
    match attr_run(bytes) {
        Some((start, end)) => {
            let rest = (&bytes[..start]).chain(&bytes[end..]);
            let def = NodeDef::decode(rest).map_err(|e| ImportError::decode(e.to_string()))?;
            Ok(SplitNode { def, attrs: Some(&bytes[start..end]) })
        }
        None => Ok(SplitNode { def: decode_node(bytes)?, attrs: None }),
    }
}

/// The byte range of a node's `attr` fields when they are one unbroken run
/// (`None` for no attributes, attributes in several runs, or a malformed
/// message, which the whole decode then reports).
fn attr_run(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut buf = bytes;
    let mut run: Option<(usize, usize)> = None;
    while buf.has_remaining() {
        let start = bytes.len() - buf.remaining();
        let (number, wire_type) = decode_key(&mut buf).ok()?;
        skip_field(wire_type, &mut buf).ok()?;
        let end = bytes.len() - buf.remaining();
        if number == ATTR_FIELD {
            run = match run {
                None => Some((start, end)),
                Some((first, last)) if last == start => Some((first, end)),
                Some(_) => return None,
            };
        }
    }
    run
}

/// Skips one field's value of `wire_type`.
fn skip_field(wire_type: WireType, buf: &mut &[u8]) -> Result<(), String> {
    let len = match wire_type {
        WireType::Varint => {
            decode_varint(buf).map_err(|e| e.to_string())?;
            0
        }
        WireType::SixtyFourBit => 8,
        WireType::ThirtyTwoBit => 4,
        WireType::LengthDelimited => decode_varint(buf).map_err(|e| e.to_string())?,
        WireType::StartGroup | WireType::EndGroup => {
            return Err("failed to decode Protobuf message: groups are not used by GraphDef".into());
        }
    };
    let underflow = || "failed to decode Protobuf message: buffer underflow".to_string();
    let len = usize::try_from(len).map_err(|_| underflow())?;
    if len > buf.remaining() {
        return Err(underflow());
    }
    buf.advance(len);
    Ok(())
}

/// How often `field` occurs at the top level of the message `bytes`; a
/// malformed message counts what precedes the fault (the decoder reports it).
fn count_field(bytes: &[u8], field: u32) -> usize {
    let mut buf = bytes;
    let mut count = 0;
    while buf.has_remaining() {
        let Ok((number, wire_type)) = decode_key(&mut buf) else { break };
        count += usize::from(number == field);
        if skip_field(wire_type, &mut buf).is_err() {
            break;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tf::proto::{FunctionDefLibrary, VersionDef};

    fn node(name: &str, inputs: &[&str]) -> NodeDef {
        NodeDef {
            name: name.into(),
            op: "Identity".into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            ..NodeDef::default()
        }
    }

    #[test]
    fn splitting_gives_the_nodes_in_order_and_decodes_the_rest() {
        let graph = GraphDef {
            node: vec![node("a", &[]), node("b", &["a", "^a"]), node("c", &["b:0"])],
            versions: Some(VersionDef { producer: 2100, ..VersionDef::default() }),
            library: Some(FunctionDefLibrary::default()),
            ..GraphDef::default()
        };
        let bytes = graph.encode_to_vec();
        let split = split(&bytes).expect("splits");
        let nodes: Vec<NodeDef> = split.nodes.iter().map(|n| decode_node(n).expect("decodes")).collect();
        assert_eq!(nodes, graph.node);
        assert_eq!(split.input_count(), 3);
        assert_eq!(split.header, GraphDef { node: Vec::new(), ..graph });
    }

    #[test]
    fn a_node_splits_into_its_attribute_bytes_and_the_rest() {
        use crate::tf::proto::{attr_value, AttrValue};
        let mut with_attrs = node("m", &["a", "^b"]);
        with_attrs.device = "/device:CPU:0".into();
        for (key, ty) in [("T", 1), ("Tidx", 3)] {
            with_attrs.attr.insert(key.into(), AttrValue { value: Some(attr_value::Value::Type(ty)) });
        }
        let bytes = with_attrs.encode_to_vec();
        let split = decode_node_split(&bytes).expect("decodes");
        let attrs = split.attrs.expect("one run of attributes");
        assert!(split.def.attr.is_empty());
        assert_eq!(NodeDef::decode(attrs).expect("the run decodes").attr, with_attrs.attr);
        assert_eq!(NodeDef { attr: with_attrs.attr.clone(), ..split.def }, with_attrs);

        // Attributes split by another field are decoded with the node.
        let mut broken = node("n", &[]).encode_to_vec();
        let (key_t, key_u) = (
            NodeDef { attr: [("T".into(), AttrValue::default())].into(), ..NodeDef::default() }.encode_to_vec(),
            NodeDef { attr: [("U".into(), AttrValue::default())].into(), ..NodeDef::default() }.encode_to_vec(),
        );
        broken.extend_from_slice(&key_t);
        broken.extend_from_slice(&NodeDef { device: "d".into(), ..NodeDef::default() }.encode_to_vec());
        broken.extend_from_slice(&key_u);
        let split = decode_node_split(&broken).expect("decodes");
        assert!(split.attrs.is_none());
        assert_eq!(split.def.attr.len(), 2);
        assert_eq!(split.def, decode_node(&broken).expect("decodes"));
    }

    #[test]
    fn a_truncated_graph_is_a_decode_error() {
        let bytes = GraphDef { node: vec![node("a", &[])], ..GraphDef::default() }.encode_to_vec();
        for cut in 1..bytes.len() {
            assert!(split(&bytes[..cut])
                .and_then(|s| s.nodes.iter().try_for_each(|n| decode_node(n).map(drop)))
                .is_err());
        }
    }
}
