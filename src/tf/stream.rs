//! A binary GraphDef read node by node.
//!
//! A GraphDef is mostly its repeated `node` field. Decoding the whole
//! message first holds every `NodeDef` (names, attribute maps, tensors) in
//! memory beside the IR built from it; [`split`] instead walks the
//! message's top-level fields once, keeps each node's bytes as a slice of
//! the input, and decodes the other fields (`library`, `versions`, …) as a
//! GraphDef without nodes. The importer then reads one node at a time
//! ([`decode_node_split`]): its name, op, device and inputs as slices of
//! the input, its attributes as their encoded bytes; a node of any other
//! form is decoded by prost.
//!
//! Invariants: the nodes come out in the order they are in the input, and
//! every field is read exactly as `GraphDef::decode` would decode it
//! (repeated occurrences of a singular field: the last string wins, messages
//! merge in order). Cost: one pass over the input's top level and one over
//! each node's fields, no copies of node bytes.

use prost::bytes::Buf;
use prost::encoding::{decode_key, decode_varint, WireType};
use prost::Message;

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::error::ImportError;
use super::proto::{self, ExperimentalDebugInfo, FullTypeDef, GraphDef, NodeDef};

/// The `node` field's number in `GraphDef`.
const NODE_FIELD: u32 = 1;
/// The numbers of `NodeDef`'s fields.
const NAME_FIELD: u32 = 1;
const OP_FIELD: u32 = 2;
const INPUT_FIELD: u32 = 3;
const DEVICE_FIELD: u32 = 4;
const ATTR_FIELD: u32 = 5;
const DEBUG_INFO_FIELD: u32 = 6;
const FULL_TYPE_FIELD: u32 = 7;

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

/// A node as the importer consumes it: read in place from the input's
/// bytes when it has the usual form, else decoded by prost.
pub struct SplitNode<'a> {
    /// The node's name.
    pub name: Cow<'a, str>,
    /// The op type.
    pub op: Cow<'a, str>,
    /// The requested device (`""` for none).
    pub device: Cow<'a, str>,
    /// The `input` entries.
    pub inputs: Inputs<'a>,
    /// The `attr` map.
    pub attrs: Attrs<'a>,
    /// `experimental_debug_info`, when set.
    pub debug_info: Option<ExperimentalDebugInfo>,
    /// `experimental_type`, when set.
    pub full_type: Option<FullTypeDef>,
}

/// A node's `input` entries: decoded, or still in the node's bytes.
pub enum Inputs<'a> {
    /// Decoded strings.
    Decoded(Vec<String>),
    /// The node's bytes, whose `input` fields were checked to be UTF-8.
    Encoded(&'a [u8]),
}

impl<'a> Inputs<'a> {
    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        let (decoded, encoded) = match self {
            Inputs::Decoded(v) => (Some(v.iter().map(String::as_str)), None),
            Inputs::Encoded(bytes) => (None, Some(Fields { buf: bytes })),
        };
        let encoded = encoded.into_iter().flatten().filter_map(|(number, value)| match value {
            // `read_node` checked every `input` field, so this never skips one.
            FieldValue::Bytes(b) if number == INPUT_FIELD => std::str::from_utf8(b).ok(),
            _ => None,
        });
        decoded.into_iter().flatten().chain(encoded)
    }
}

/// A node's `attr` map: decoded, or its entries' bytes.
pub enum Attrs<'a> {
    /// The decoded map.
    Decoded(BTreeMap<String, proto::AttrValue>),
    /// The encoded `attr` fields, one unbroken run of the node's bytes (as
    /// TensorFlow writes them). Equal bytes decode to equal attributes, so
    /// the importer converts each distinct run once; decoding the run as a
    /// `NodeDef` yields exactly the node's `attr` map.
    Encoded(&'a [u8]),
}

impl From<NodeDef> for SplitNode<'_> {
    fn from(def: NodeDef) -> Self {
        SplitNode {
            name: Cow::Owned(def.name),
            op: Cow::Owned(def.op),
            device: Cow::Owned(def.device),
            inputs: Inputs::Decoded(def.input),
            attrs: Attrs::Decoded(def.attr),
            debug_info: def.experimental_debug_info,
            full_type: def.experimental_type,
        }
    }
}

/// Reads one node's bytes. A node of the usual form (name, op, inputs,
/// device and one run of attributes, each field with its schema's wire
/// type, strings in UTF-8) is read in place, without decoding its
/// attributes; any other node is decoded whole by prost, which also
/// reports what is malformed.
pub fn decode_node_split(bytes: &[u8]) -> Result<SplitNode<'_>, ImportError> {
    match read_node(bytes) {
        Some(node) => Ok(node),
        None => decode_node(bytes).map(SplitNode::from),
    }
}

/// [`decode_node_split`]'s reading in place; `None` for a node it leaves to prost.
fn read_node(bytes: &[u8]) -> Option<SplitNode<'_>> {
    let (mut name, mut op, mut device) = ("", "", "");
    let mut attrs: Option<(usize, usize)> = None;
    let mut fields = Fields { buf: bytes };
    loop {
        let start = bytes.len() - fields.buf.len();
        let Some((number, value)) = fields.next_field()? else { break };
        let text = || match value {
            FieldValue::Bytes(b) => std::str::from_utf8(b).ok(),
            FieldValue::Other => None,
        };
        match number {
            NAME_FIELD => name = text()?,
            OP_FIELD => op = text()?,
            INPUT_FIELD => drop(text()?),
            DEVICE_FIELD => device = text()?,
            ATTR_FIELD => {
                let FieldValue::Bytes(_) = value else { return None };
                let end = bytes.len() - fields.buf.len();
                attrs = match attrs {
                    None => Some((start, end)),
                    Some((first, last)) if last == start => Some((first, end)),
                    Some(_) => return None,
                };
            }
            // The experimental fields are messages that repeated occurrences merge: prost's job.
            DEBUG_INFO_FIELD | FULL_TYPE_FIELD => return None,
            _ => {}
        }
    }
    Some(SplitNode {
        name: Cow::Borrowed(name),
        op: Cow::Borrowed(op),
        device: Cow::Borrowed(device),
        inputs: Inputs::Encoded(bytes),
        attrs: match attrs {
            Some((start, end)) => Attrs::Encoded(&bytes[start..end]),
            None => Attrs::Decoded(BTreeMap::new()),
        },
        debug_info: None,
        full_type: None,
    })
}

/// One entry of a node's encoded `attr` map.
pub struct AttrEntry<'a> {
    /// The key.
    pub key: &'a str,
    /// The whole entry's bytes: equal bytes are equal entries.
    pub bytes: &'a [u8],
    /// The encoded `AttrValue` (`None`: the entry has no value, which
    /// decodes as the default `AttrValue`).
    pub value: Option<&'a [u8]>,
}

/// The entries of an encoded `attr` run ([`Attrs::Encoded`]) in key order,
/// of equal keys the last one (the one a decoded map keeps). `None` when an
/// entry is not of the usual form (a key that is not UTF-8, a field of
/// another wire type, a repeated value, which merges): decode the run then.
pub fn attr_entries(run: &[u8]) -> Option<Vec<AttrEntry<'_>>> {
    let mut entries = Vec::new();
    let mut run_fields = Fields { buf: run };
    while let Some((number, value)) = run_fields.next_field()? {
        let (ATTR_FIELD, FieldValue::Bytes(bytes)) = (number, value) else { return None };
        let (mut key, mut value) = ("", None);
        let mut fields = Fields { buf: bytes };
        while let Some((number, field)) = fields.next_field()? {
            match (number, field) {
                (1, FieldValue::Bytes(b)) => key = std::str::from_utf8(b).ok()?,
                (2, FieldValue::Bytes(b)) if value.is_none() => value = Some(b),
                (1 | 2, _) => return None,
                _ => {}
            }
        }
        entries.push(AttrEntry { key, bytes, value });
    }
    // A stable sort keeps equal keys in order; keep the last of each.
    entries.sort_by(|a, b| a.key.cmp(b.key));
    entries.dedup_by(|later, earlier| {
        let same = later.key == earlier.key;
        if same {
            std::mem::swap(later, earlier);
        }
        same
    });
    Some(entries)
}

/// One field's value: a length-delimited payload, or anything else.
#[derive(Clone, Copy)]
enum FieldValue<'a> {
    Bytes(&'a [u8]),
    Other,
}

/// The top-level fields of a message, in order.
struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    /// The next field; `Some(None)` at the end, `None` when the message is
    /// malformed (prost then reports it).
    fn next_field(&mut self) -> Option<Option<(u32, FieldValue<'a>)>> {
        if self.buf.is_empty() {
            return Some(None);
        }
        let (number, wire_type) = decode_key(&mut self.buf).ok()?;
        if wire_type == WireType::LengthDelimited {
            let len = usize::try_from(decode_varint(&mut self.buf).ok()?).ok()?;
            let payload = self.buf.get(..len)?;
            self.buf = &self.buf[len..];
            return Some(Some((number, FieldValue::Bytes(payload))));
        }
        skip_field(wire_type, &mut self.buf).ok()?;
        Some(Some((number, FieldValue::Other)))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = (u32, FieldValue<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        self.next_field().flatten()
    }
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

    /// The node a [`SplitNode`] stands for, its attributes decoded.
    fn whole(split: SplitNode<'_>) -> NodeDef {
        NodeDef {
            name: split.name.into_owned(),
            op: split.op.into_owned(),
            input: split.inputs.iter().map(str::to_string).collect(),
            device: split.device.into_owned(),
            attr: match split.attrs {
                Attrs::Decoded(attr) => attr,
                Attrs::Encoded(bytes) => NodeDef::decode(bytes).expect("the run decodes").attr,
            },
            experimental_debug_info: split.debug_info,
            experimental_type: split.full_type,
        }
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
        assert!(matches!(split.name, Cow::Borrowed("m")));
        assert!(matches!(split.inputs, Inputs::Encoded(_)));
        assert!(matches!(split.attrs, Attrs::Encoded(_)));
        assert_eq!(whole(split), with_attrs);

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
        let Attrs::Decoded(attr) = &split.attrs else { panic!("decoded whole") };
        assert_eq!(attr.len(), 2);
        assert_eq!(whole(split), decode_node(&broken).expect("decodes"));
    }

    #[test]
    fn a_node_read_in_place_equals_prost_decoding_it() {
        use crate::tf::proto::{node_def::ExperimentalDebugInfo, FullTypeDef};
        let plain = node("a", &["x", "y:1", "^z"]);
        // A repeated name: the last one wins, as in prost.
        let mut renamed = plain.encode_to_vec();
        renamed.extend_from_slice(&NodeDef { name: "b".into(), ..NodeDef::default() }.encode_to_vec());
        // An unknown field (number 99, varint) is skipped.
        let mut unknown = plain.encode_to_vec();
        unknown.extend_from_slice(&[0x98, 0x06, 0x05]);
        let experimental = NodeDef {
            experimental_debug_info: Some(ExperimentalDebugInfo {
                original_node_names: vec!["o".into()],
                ..ExperimentalDebugInfo::default()
            }),
            experimental_type: Some(FullTypeDef { type_id: 1000, ..FullTypeDef::default() }),
            ..plain.clone()
        };
        for bytes in [plain.encode_to_vec(), renamed, unknown, experimental.encode_to_vec()] {
            let split = decode_node_split(&bytes).expect("decodes");
            assert_eq!(whole(split), decode_node(&bytes).expect("decodes"));
        }
        // A name that is not UTF-8, or an input of the wrong wire type, is prost's error.
        let bad_name = [0x0a, 0x01, 0xff];
        let bad_input = [0x18, 0x01];
        for bytes in [&bad_name[..], &bad_input[..]] {
            let ours = decode_node_split(bytes).err().map(|e| e.to_string());
            assert_eq!(ours, decode_node(bytes).err().map(|e| e.to_string()));
            assert!(ours.is_some());
        }
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
