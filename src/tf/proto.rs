//! TensorFlow's GraphDef messages, generated from `proto/tf_graph.proto`.
//!
//! `build.rs` compiles the schema with protox (no `protoc`) and generates the
//! Rust types with prost-build; this module includes them and adds short
//! aliases for the nested types the importer uses, the name tables of the
//! two enums, and the schema's [`descriptor_pool`] for reflection.
//! Every message is decoded completely, the function library included;
//! unknown fields of a binary GraphDef are skipped by the decoder.
//! Enum fields are `i32` (their wire encoding), so values this schema does
//! not name still round-trip.

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.rs"));
}

pub use generated::*;

/// `AttrValue.ListValue`.
pub type ListValue = attr_value::ListValue;
/// The `value` oneof of `AttrValue`.
pub type Value = attr_value::Value;
/// `TensorShapeProto.Dim`.
pub type Dim = tensor_shape_proto::Dim;
/// `NodeDef.ExperimentalDebugInfo`.
pub type ExperimentalDebugInfo = node_def::ExperimentalDebugInfo;
/// The `attr` oneof of `FullTypeDef`.
pub type FullTypeAttr = full_type_def::Attr;
/// `OpDef.ArgDef`: one input or output of a function signature.
pub type ArgDef = op_def::ArgDef;
/// `OpDef.AttrDef`: one attribute of a function signature.
pub type AttrDef = op_def::AttrDef;

/// The encoded `FileDescriptorSet` of `proto/tf_graph.proto`.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tf_graph.bin"));

/// The schema as a prost-reflect descriptor pool (built once).
pub fn descriptor_pool() -> &'static prost_reflect::DescriptorPool {
    static POOL: std::sync::OnceLock<prost_reflect::DescriptorPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        // The bytes come from protox at build time, so they always decode.
        prost_reflect::DescriptorPool::decode(FILE_DESCRIPTOR_SET).unwrap_or_default()
    })
}

/// The number of a `DataType` name, `_REF` names included.
pub fn data_type_number(name: &str) -> Option<i32> {
    DataType::from_str_name(name).map(|t| t as i32)
}

/// The name of a `DataType` number, if it has one.
pub fn data_type_name(number: i32) -> Option<&'static str> {
    DataType::try_from(number).ok().map(|t| t.as_str_name())
}

/// The number of a `FullTypeId` name.
pub fn full_type_number(name: &str) -> Option<i32> {
    FullTypeId::from_str_name(name).map(|t| t as i32)
}

/// The name of a `FullTypeId` number, if it has one.
pub fn full_type_name(number: i32) -> Option<&'static str> {
    FullTypeId::try_from(number).ok().map(|t| t.as_str_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_names_round_trip() {
        assert_eq!(data_type_number("DT_FLOAT"), Some(1));
        assert_eq!(data_type_number("DT_FLOAT_REF"), Some(101));
        assert_eq!(data_type_name(119), Some("DT_HALF_REF"));
        assert_eq!(data_type_name(99), None);
        assert_eq!(full_type_number("TFT_TENSOR"), Some(1000));
        assert_eq!(full_type_name(10203), Some("TFT_LEGACY_VARIANT"));
    }

    #[test]
    fn descriptor_pool_holds_the_schema() {
        let pool = descriptor_pool();
        for name in ["GraphDef", "FunctionDefLibrary", "FunctionDef", "OpDef.ArgDef", "TensorProto"] {
            assert!(pool.get_message_by_name(&format!("tensorflow.{name}")).is_some(), "{name}");
        }
    }
}
