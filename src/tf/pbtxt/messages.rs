//! The fields of each message the text parser decodes itself: one
//! [`TextMessage`] impl per message, mapping a field name to its parser.

use super::{unknown_field, Parser, Result, TextMessage};
use crate::syntax::Span;
use crate::tf::proto::{
    full_type_number, resource_handle_proto::DtypeAndShape, AttrValue, Dim, ExperimentalDebugInfo, FullTypeAttr,
    FullTypeDef, ListValue, NameAttrList, NodeDef, ResourceHandleProto, TensorProto, TensorShapeProto, Value,
    VariantTensorDataProto, VersionDef,
};

impl TextMessage for NodeDef {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"name" => self.name = p.scalar(|p| p.string("name"))?,
            b"op" => self.op = p.scalar(|p| p.string("op"))?,
            b"input" => p.repeated(&mut self.input, |p| {
                let begin = p.lex.peek()?.start;
                let s = p.string("input")?;
                p.inputs.push(Span::new(begin, p.last_end));
                Ok(s)
            })?,
            b"device" => self.device = p.scalar(|p| p.string("device"))?,
            b"attr" => {
                let entry: AttrEntry = p.message()?;
                self.attr.insert(entry.key, entry.value);
            }
            b"experimental_debug_info" => self.experimental_debug_info = Some(p.message()?),
            b"experimental_type" => self.experimental_type = Some(p.message()?),
            _ => {
                return Err(unknown_field(
                    "NodeDef",
                    "name, op, input, device, attr, experimental_debug_info, experimental_type",
                    name,
                    span,
                ))
            }
        }
        Ok(())
    }
}

/// A `map<string, AttrValue>` entry.
#[derive(Default)]
struct AttrEntry {
    key: String,
    value: AttrValue,
}

impl TextMessage for AttrEntry {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"key" => self.key = p.scalar(|p| p.string("key"))?,
            b"value" => self.value = p.message()?,
            _ => return Err(unknown_field("map entry", "key, value", name, span)),
        }
        Ok(())
    }
}

impl TextMessage for ExperimentalDebugInfo {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"original_node_names" => p.repeated(&mut self.original_node_names, |p| p.string("original_node_names")),
            b"original_func_names" => p.repeated(&mut self.original_func_names, |p| p.string("original_func_names")),
            _ => Err(unknown_field("ExperimentalDebugInfo", "original_node_names, original_func_names", name, span)),
        }
    }
}

impl TextMessage for FullTypeDef {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"type_id" => {
                self.type_id =
                    p.scalar(|p| p.enum_value("FullTypeId", full_type_number, super::super::proto::full_type_name))?
            }
            b"args" => self.args.push(p.message()?),
            b"s" => self.attr = Some(FullTypeAttr::S(p.scalar(|p| p.string("s"))?)),
            b"i" => self.attr = Some(FullTypeAttr::I(p.scalar(Parser::int)?)),
            _ => return Err(unknown_field("FullTypeDef", "type_id, args, s, i", name, span)),
        }
        Ok(())
    }
}

impl TextMessage for VersionDef {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"producer" => self.producer = p.scalar(Parser::int)?,
            b"min_consumer" => self.min_consumer = p.scalar(Parser::int)?,
            b"bad_consumers" => p.repeated(&mut self.bad_consumers, Parser::int)?,
            _ => return Err(unknown_field("VersionDef", "producer, min_consumer, bad_consumers", name, span)),
        }
        Ok(())
    }
}

impl TextMessage for AttrValue {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        self.value = Some(match name {
            b"list" => Value::List(Box::new(p.message()?)),
            b"s" => Value::S(p.scalar(Parser::bytes)?),
            b"i" => Value::I(p.scalar(Parser::int)?),
            b"f" => Value::F(p.scalar(Parser::f32)?),
            b"b" => Value::B(p.scalar(Parser::bool)?),
            b"type" => Value::Type(p.scalar(Parser::data_type)?),
            b"shape" => Value::Shape(p.message()?),
            b"tensor" => Value::Tensor(Box::new(p.message()?)),
            b"placeholder" => Value::Placeholder(p.scalar(|p| p.string("placeholder"))?),
            b"func" => Value::Func(p.message()?),
            _ => {
                return Err(unknown_field(
                    "AttrValue",
                    "list, s, i, f, b, type, shape, tensor, placeholder, func",
                    name,
                    span,
                ))
            }
        });
        Ok(())
    }
}

impl TextMessage for ListValue {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"s" => p.repeated(&mut self.s, Parser::bytes)?,
            b"i" => p.repeated(&mut self.i, Parser::int)?,
            b"f" => p.repeated(&mut self.f, Parser::f32)?,
            b"b" => p.repeated(&mut self.b, Parser::bool)?,
            b"type" => p.repeated(&mut self.r#type, Parser::data_type)?,
            b"shape" => self.shape.push(p.message()?),
            b"tensor" => self.tensor.push(p.message()?),
            b"func" => self.func.push(p.message()?),
            _ => return Err(unknown_field("ListValue", "s, i, f, b, type, shape, tensor, func", name, span)),
        }
        Ok(())
    }
}

impl TextMessage for NameAttrList {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"name" => self.name = p.scalar(|p| p.string("name"))?,
            b"attr" => {
                let entry: AttrEntry = p.message()?;
                self.attr.insert(entry.key, entry.value);
            }
            _ => return Err(unknown_field("NameAttrList", "name, attr", name, span)),
        }
        Ok(())
    }
}

impl TextMessage for TensorShapeProto {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"dim" => self.dim.push(p.message()?),
            b"unknown_rank" => self.unknown_rank = p.scalar(Parser::bool)?,
            _ => return Err(unknown_field("TensorShapeProto", "dim, unknown_rank", name, span)),
        }
        Ok(())
    }
}

impl TextMessage for Dim {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"size" => self.size = p.scalar(Parser::int)?,
            b"name" => self.name = p.scalar(|p| p.string("name"))?,
            _ => return Err(unknown_field("TensorShapeProto.Dim", "size, name", name, span)),
        }
        Ok(())
    }
}

impl TextMessage for TensorProto {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"dtype" => self.dtype = p.scalar(Parser::data_type)?,
            b"tensor_shape" => self.tensor_shape = Some(p.message()?),
            b"version_number" => self.version_number = p.scalar(Parser::int)?,
            b"tensor_content" => self.tensor_content = p.scalar(Parser::bytes)?,
            b"half_val" => p.repeated(&mut self.half_val, Parser::int)?,
            b"float_val" => p.repeated(&mut self.float_val, Parser::f32)?,
            b"double_val" => p.repeated(&mut self.double_val, Parser::f64)?,
            b"int_val" => p.repeated(&mut self.int_val, Parser::int)?,
            b"string_val" => p.repeated(&mut self.string_val, Parser::bytes)?,
            b"scomplex_val" => p.repeated(&mut self.scomplex_val, Parser::f32)?,
            b"int64_val" => p.repeated(&mut self.int64_val, Parser::int)?,
            b"bool_val" => p.repeated(&mut self.bool_val, Parser::bool)?,
            b"dcomplex_val" => p.repeated(&mut self.dcomplex_val, Parser::f64)?,
            b"uint32_val" => p.repeated(&mut self.uint32_val, Parser::int)?,
            b"uint64_val" => p.repeated(&mut self.uint64_val, Parser::int)?,
            b"float8_val" => self.float8_val = p.scalar(Parser::bytes)?,
            b"resource_handle_val" => self.resource_handle_val.push(p.message()?),
            b"variant_val" => self.variant_val.push(p.message()?),
            _ => {
                return Err(unknown_field(
                    "TensorProto",
                    "dtype, tensor_shape, version_number, tensor_content, half_val, float_val, double_val, int_val, \
                     string_val, scomplex_val, int64_val, bool_val, dcomplex_val, uint32_val, uint64_val, float8_val, \
                     resource_handle_val, variant_val",
                    name,
                    span,
                ))
            }
        }
        Ok(())
    }
}

impl TextMessage for ResourceHandleProto {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"device" => self.device = p.scalar(|p| p.string("device"))?,
            b"container" => self.container = p.scalar(|p| p.string("container"))?,
            b"name" => self.name = p.scalar(|p| p.string("name"))?,
            b"hash_code" => self.hash_code = p.scalar(Parser::int)?,
            b"maybe_type_name" => self.maybe_type_name = p.scalar(|p| p.string("maybe_type_name"))?,
            b"dtypes_and_shapes" => self.dtypes_and_shapes.push(p.message()?),
            _ => {
                return Err(unknown_field(
                    "ResourceHandleProto",
                    "device, container, name, hash_code, maybe_type_name, dtypes_and_shapes",
                    name,
                    span,
                ))
            }
        }
        Ok(())
    }
}

impl TextMessage for DtypeAndShape {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"dtype" => self.dtype = p.scalar(Parser::data_type)?,
            b"shape" => self.shape = Some(p.message()?),
            _ => return Err(unknown_field("ResourceHandleProto.DtypeAndShape", "dtype, shape", name, span)),
        }
        Ok(())
    }
}

impl TextMessage for VariantTensorDataProto {
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()> {
        match name {
            b"type_name" => self.type_name = p.scalar(|p| p.string("type_name"))?,
            b"metadata" => self.metadata = p.scalar(Parser::bytes)?,
            b"tensors" => self.tensors.push(p.message()?),
            _ => return Err(unknown_field("VariantTensorDataProto", "type_name, metadata, tensors", name, span)),
        }
        Ok(())
    }
}
