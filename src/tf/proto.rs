//! Our own declarations of the TensorFlow protobuf messages a GraphDef uses.
//!
//! Written by hand with `prost` derives; the field numbers are those of
//! `tensorflow/core/framework/{graph,node_def,attr_value,tensor,
//! tensor_shape,versions,full_type}.proto`. Enum fields (`DataType`,
//! `FullTypeId`) are plain `i32`, which is their wire encoding; the name
//! tables for the text format are [`DATA_TYPE_NAMES`] and
//! [`FULL_TYPE_NAMES`].
//!
//! Kept opaque: the function library (`GraphDef.library`), the graph debug
//! info (`GraphDef.debug_info`) and the tensor fields `resource_handle_val`
//! and `variant_val`. They are raw encoded bytes here; the text parser keeps
//! library and debug info as canonical text instead (see `pbtxt`).
//! Unknown fields of a binary GraphDef are skipped by the decoder.

use std::collections::BTreeMap;

/// `tensorflow.GraphDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphDef {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeDef>,
    /// The encoded `FunctionDefLibrary`, kept opaque.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub library: Option<Vec<u8>>,
    /// The deprecated single version number.
    #[prost(int32, tag = "3")]
    pub version: i32,
    #[prost(message, optional, tag = "4")]
    pub versions: Option<VersionDef>,
    /// The encoded `GraphDebugInfo`, kept opaque.
    #[prost(bytes = "vec", optional, tag = "5")]
    pub debug_info: Option<Vec<u8>>,
}

/// `tensorflow.NodeDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeDef {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub op: String,
    #[prost(string, repeated, tag = "3")]
    pub input: Vec<String>,
    #[prost(string, tag = "4")]
    pub device: String,
    #[prost(btree_map = "string, message", tag = "5")]
    pub attr: BTreeMap<String, AttrValue>,
    #[prost(message, optional, tag = "6")]
    pub experimental_debug_info: Option<ExperimentalDebugInfo>,
    #[prost(message, optional, tag = "7")]
    pub experimental_type: Option<FullTypeDef>,
}

/// `tensorflow.NodeDef.ExperimentalDebugInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExperimentalDebugInfo {
    #[prost(string, repeated, tag = "1")]
    pub original_node_names: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub original_func_names: Vec<String>,
}

/// `tensorflow.FullTypeDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FullTypeDef {
    /// A `FullTypeId`.
    #[prost(int32, tag = "1")]
    pub type_id: i32,
    #[prost(message, repeated, tag = "2")]
    pub args: Vec<FullTypeDef>,
    #[prost(oneof = "FullTypeAttr", tags = "3, 4")]
    pub attr: Option<FullTypeAttr>,
}

/// The `attr` oneof of `FullTypeDef`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum FullTypeAttr {
    #[prost(string, tag = "3")]
    S(String),
    #[prost(int64, tag = "4")]
    I(i64),
}

/// `tensorflow.VersionDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionDef {
    #[prost(int32, tag = "1")]
    pub producer: i32,
    #[prost(int32, tag = "2")]
    pub min_consumer: i32,
    #[prost(int32, repeated, tag = "3")]
    pub bad_consumers: Vec<i32>,
}

/// `tensorflow.AttrValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttrValue {
    #[prost(oneof = "Value", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10")]
    pub value: Option<Value>,
}

/// The `value` oneof of `AttrValue`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    #[prost(message, boxed, tag = "1")]
    List(Box<ListValue>),
    #[prost(bytes = "vec", tag = "2")]
    S(Vec<u8>),
    #[prost(int64, tag = "3")]
    I(i64),
    #[prost(float, tag = "4")]
    F(f32),
    #[prost(bool, tag = "5")]
    B(bool),
    /// A `DataType`.
    #[prost(int32, tag = "6")]
    Type(i32),
    #[prost(message, tag = "7")]
    Shape(TensorShapeProto),
    #[prost(message, boxed, tag = "8")]
    Tensor(Box<TensorProto>),
    #[prost(string, tag = "9")]
    Placeholder(String),
    #[prost(message, tag = "10")]
    Func(NameAttrList),
}

/// `tensorflow.AttrValue.ListValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListValue {
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub s: Vec<Vec<u8>>,
    #[prost(int64, repeated, tag = "3")]
    pub i: Vec<i64>,
    #[prost(float, repeated, tag = "4")]
    pub f: Vec<f32>,
    #[prost(bool, repeated, tag = "5")]
    pub b: Vec<bool>,
    /// `DataType`s.
    #[prost(int32, repeated, tag = "6")]
    pub r#type: Vec<i32>,
    #[prost(message, repeated, tag = "7")]
    pub shape: Vec<TensorShapeProto>,
    #[prost(message, repeated, tag = "8")]
    pub tensor: Vec<TensorProto>,
    #[prost(message, repeated, tag = "9")]
    pub func: Vec<NameAttrList>,
}

/// `tensorflow.NameAttrList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NameAttrList {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(btree_map = "string, message", tag = "2")]
    pub attr: BTreeMap<String, AttrValue>,
}

/// `tensorflow.TensorShapeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<Dim>,
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

/// `tensorflow.TensorShapeProto.Dim`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dim {
    #[prost(int64, tag = "1")]
    pub size: i64,
    #[prost(string, tag = "2")]
    pub name: String,
}

/// `tensorflow.TensorProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// A `DataType`.
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShapeProto>,
    #[prost(int32, tag = "3")]
    pub version_number: i32,
    #[prost(bytes = "vec", tag = "4")]
    pub tensor_content: Vec<u8>,
    #[prost(int32, repeated, tag = "13")]
    pub half_val: Vec<i32>,
    #[prost(float, repeated, tag = "5")]
    pub float_val: Vec<f32>,
    #[prost(double, repeated, tag = "6")]
    pub double_val: Vec<f64>,
    #[prost(int32, repeated, tag = "7")]
    pub int_val: Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
    #[prost(float, repeated, tag = "9")]
    pub scomplex_val: Vec<f32>,
    #[prost(int64, repeated, tag = "10")]
    pub int64_val: Vec<i64>,
    #[prost(bool, repeated, tag = "11")]
    pub bool_val: Vec<bool>,
    #[prost(double, repeated, tag = "12")]
    pub dcomplex_val: Vec<f64>,
    /// Encoded `ResourceHandleProto`s, kept opaque.
    #[prost(bytes = "vec", repeated, tag = "14")]
    pub resource_handle_val: Vec<Vec<u8>>,
    /// Encoded `VariantTensorDataProto`s, kept opaque.
    #[prost(bytes = "vec", repeated, tag = "15")]
    pub variant_val: Vec<Vec<u8>>,
    #[prost(uint32, repeated, tag = "16")]
    pub uint32_val: Vec<u32>,
    #[prost(uint64, repeated, tag = "17")]
    pub uint64_val: Vec<u64>,
    /// `DT_FLOAT8_*` values, one byte each.
    #[prost(bytes = "vec", tag = "18")]
    pub float8_val: Vec<u8>,
}

/// `DataType` names and numbers. Reference types (`DT_FLOAT_REF`, ...) are
/// the base number plus 100 and are handled by [`data_type_number`].
pub const DATA_TYPE_NAMES: &[(&str, i32)] = &[
    ("DT_INVALID", 0),
    ("DT_FLOAT", 1),
    ("DT_DOUBLE", 2),
    ("DT_INT32", 3),
    ("DT_UINT8", 4),
    ("DT_INT16", 5),
    ("DT_INT8", 6),
    ("DT_STRING", 7),
    ("DT_COMPLEX64", 8),
    ("DT_INT64", 9),
    ("DT_BOOL", 10),
    ("DT_QINT8", 11),
    ("DT_QUINT8", 12),
    ("DT_QINT32", 13),
    ("DT_BFLOAT16", 14),
    ("DT_QINT16", 15),
    ("DT_QUINT16", 16),
    ("DT_UINT16", 17),
    ("DT_COMPLEX128", 18),
    ("DT_HALF", 19),
    ("DT_RESOURCE", 20),
    ("DT_VARIANT", 21),
    ("DT_UINT32", 22),
    ("DT_UINT64", 23),
    ("DT_FLOAT8_E5M2", 24),
    ("DT_FLOAT8_E4M3FN", 25),
    ("DT_FLOAT8_E4M3FNUZ", 26),
    ("DT_FLOAT8_E4M3B11FNUZ", 27),
    ("DT_FLOAT8_E5M2FNUZ", 28),
    ("DT_INT4", 29),
    ("DT_UINT4", 30),
    ("DT_INT2", 31),
    ("DT_UINT2", 32),
];

/// The number of a `DataType` name, `_REF` names included.
pub fn data_type_number(name: &str) -> Option<i32> {
    let (base, offset) = match name.strip_suffix("_REF") {
        Some(base) => (base, 100),
        None => (name, 0),
    };
    let number = DATA_TYPE_NAMES.iter().find(|e| e.0 == base)?.1;
    (offset == 0 || number != 0).then_some(number + offset)
}

/// The name of a `DataType` number, if it has one.
pub fn data_type_name(number: i32) -> Option<String> {
    let (base, suffix) = if number > 100 { (number - 100, "_REF") } else { (number, "") };
    let name = DATA_TYPE_NAMES.iter().find(|e| e.1 == base)?.0;
    Some(format!("{name}{suffix}"))
}

/// `FullTypeId` names and numbers.
pub const FULL_TYPE_NAMES: &[(&str, i32)] = &[
    ("TFT_UNSET", 0),
    ("TFT_VAR", 1),
    ("TFT_ANY", 2),
    ("TFT_PRODUCT", 3),
    ("TFT_NAMED", 4),
    ("TFT_FOR_EACH", 20),
    ("TFT_CALLABLE", 100),
    ("TFT_TENSOR", 1000),
    ("TFT_ARRAY", 1001),
    ("TFT_OPTIONAL", 1002),
    ("TFT_LITERAL", 1003),
    ("TFT_ENCODED", 1004),
    ("TFT_SHAPE_TENSOR", 1005),
    ("TFT_BOOL", 200),
    ("TFT_UINT8", 201),
    ("TFT_UINT16", 202),
    ("TFT_UINT32", 203),
    ("TFT_UINT64", 204),
    ("TFT_INT8", 205),
    ("TFT_INT16", 206),
    ("TFT_INT32", 207),
    ("TFT_INT64", 208),
    ("TFT_HALF", 209),
    ("TFT_FLOAT", 210),
    ("TFT_DOUBLE", 211),
    ("TFT_COMPLEX64", 212),
    ("TFT_COMPLEX128", 213),
    ("TFT_STRING", 214),
    ("TFT_BFLOAT16", 215),
    ("TFT_DATASET", 10102),
    ("TFT_RAGGED", 10103),
    ("TFT_ITERATOR", 10104),
    ("TFT_MUTEX_LOCK", 10202),
    ("TFT_LEGACY_VARIANT", 10203),
];
