//! A printer of GraphDefs in protobuf text format, in the style of Python's
//! `str(graph_def)`: fields in field-number order, two spaces per level,
//! one repeated value per line, bytes C-escaped with octal for non-printable
//! bytes, floats in Python's shortest `repr` form (`1e-05`, `0.5`, `inf`),
//! enum values by name. Map entries print sorted by key.
//!
//! [`super::pbtxt::parse_graphdef_text`] reads everything this writes back
//! to an equal message.
//!
//! Nodes, versions and attribute values, the bulk of a graph, are printed
//! from the typed messages directly. The function library, the debug info
//! and a tensor's resource handles and variants are printed by walking
//! their prost-reflect [`DynamicMessage`] in the same style; prost-reflect's
//! own printer is not used because it writes maps in hash order (so the
//! text would differ from run to run) and repeated fields as `[...]` lists,
//! unlike TensorFlow.

use std::fmt::Write;

use prost_reflect::{DynamicMessage, Kind, MapKey};

use super::proto::{
    data_type_name, descriptor_pool, full_type_name, AttrValue, ExperimentalDebugInfo, FullTypeAttr, FullTypeDef,
    GraphDef, ListValue, NameAttrList, NodeDef, TensorProto, TensorShapeProto, Value, VersionDef,
};

/// Prints a GraphDef, every field of it.
pub fn print_graphdef(graph: &GraphDef) -> String {
    let mut w = Writer { out: String::with_capacity(graph.node.len() * 400), depth: 0 };
    for node in &graph.node {
        w.message("node", |w| w.node(node));
    }
    if let Some(library) = &graph.library {
        w.reflected("library", library, "tensorflow.FunctionDefLibrary");
    }
    if graph.version != 0 {
        w.scalar("version", graph.version);
    }
    if let Some(v) = &graph.versions {
        w.message("versions", |w| w.versions(v));
    }
    if let Some(debug_info) = &graph.debug_info {
        w.reflected("debug_info", debug_info, "tensorflow.GraphDebugInfo");
    }
    w.out
}

struct Writer {
    out: String,
    depth: usize,
}

impl Writer {
    fn indent(&mut self) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
    }

    fn message(&mut self, name: &str, body: impl FnOnce(&mut Self)) {
        self.indent();
        self.out.push_str(name);
        self.out.push_str(" {\n");
        self.depth += 1;
        body(self);
        self.depth -= 1;
        self.indent();
        self.out.push_str("}\n");
    }

    /// Prints the typed message `value` of type `full_name` (a message of
    /// our schema) through reflection.
    fn reflected(&mut self, name: &str, value: &impl prost::Message, full_name: &str) {
        let decoded = descriptor_pool()
            .get_message_by_name(full_name)
            .and_then(|desc| DynamicMessage::decode(desc, value.encode_to_vec().as_slice()).ok());
        match decoded {
            Some(message) => self.message(name, |w| w.dynamic(&message)),
            // Our own types always decode with our own schema.
            None => self.message(name, |_| {}),
        }
    }

    /// Prints the set fields of a message in field-number order, map
    /// entries sorted by key.
    fn dynamic(&mut self, message: &DynamicMessage) {
        let mut fields: Vec<_> = message.fields().collect();
        fields.sort_by_key(|(f, _)| f.number());
        for (field, value) in fields {
            let kind = field.kind();
            match value {
                prost_reflect::Value::List(items) => {
                    for item in items {
                        self.dynamic_value(field.name(), item, &kind);
                    }
                }
                prost_reflect::Value::Map(map) => {
                    let mut entries: Vec<(&MapKey, &prost_reflect::Value)> = map.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    let value_kind = kind.as_message().map(|m| m.map_entry_value_field().kind());
                    for (key, value) in entries {
                        self.message(field.name(), |w| {
                            w.map_key(key);
                            if let Some(value_kind) = &value_kind {
                                w.dynamic_value("value", value, value_kind);
                            }
                        });
                    }
                }
                value => self.dynamic_value(field.name(), value, &kind),
            }
        }
    }

    fn map_key(&mut self, key: &MapKey) {
        match key {
            MapKey::String(s) => self.bytes("key", s.as_bytes()),
            MapKey::Bool(b) => self.scalar("key", b),
            MapKey::I32(i) => self.scalar("key", i),
            MapKey::I64(i) => self.scalar("key", i),
            MapKey::U32(i) => self.scalar("key", i),
            MapKey::U64(i) => self.scalar("key", i),
        }
    }

    fn dynamic_value(&mut self, name: &str, value: &prost_reflect::Value, kind: &Kind) {
        use prost_reflect::Value as V;
        match value {
            V::Bool(b) => self.scalar(name, b),
            V::I32(i) => self.scalar(name, i),
            V::I64(i) => self.scalar(name, i),
            V::U32(i) => self.scalar(name, i),
            V::U64(i) => self.scalar(name, i),
            V::F32(f) => self.f32(name, *f),
            V::F64(f) => self.f64(name, *f),
            V::String(s) => self.bytes(name, s.as_bytes()),
            V::Bytes(b) => self.bytes(name, b),
            V::EnumNumber(n) => match kind.as_enum().and_then(|e| e.get_value(*n)) {
                Some(v) => self.scalar(name, v.name()),
                None => self.scalar(name, n),
            },
            V::Message(m) => self.message(name, |w| w.dynamic(m)),
            // Lists and maps are fields, handled by `dynamic`.
            V::List(_) | V::Map(_) => {}
        }
    }

    fn scalar(&mut self, name: &str, value: impl std::fmt::Display) {
        self.indent();
        let _ = writeln!(self.out, "{name}: {value}");
    }

    fn bytes(&mut self, name: &str, value: &[u8]) {
        self.indent();
        self.out.push_str(name);
        self.out.push_str(": \"");
        escape_into(&mut self.out, value);
        self.out.push_str("\"\n");
    }

    fn f32(&mut self, name: &str, value: f32) {
        self.indent();
        self.out.push_str(name);
        self.out.push_str(": ");
        push_python_float(&mut self.out, format!("{value:e}"), value.is_finite(), value.is_nan());
        self.out.push('\n');
    }

    fn f64(&mut self, name: &str, value: f64) {
        self.indent();
        self.out.push_str(name);
        self.out.push_str(": ");
        push_python_float(&mut self.out, format!("{value:e}"), value.is_finite(), value.is_nan());
        self.out.push('\n');
    }

    fn data_type(&mut self, name: &str, value: i32) {
        match data_type_name(value) {
            Some(n) => self.scalar(name, n),
            None => self.scalar(name, value),
        }
    }

    fn node(&mut self, n: &NodeDef) {
        self.bytes("name", n.name.as_bytes());
        self.bytes("op", n.op.as_bytes());
        for input in &n.input {
            self.bytes("input", input.as_bytes());
        }
        if !n.device.is_empty() {
            self.bytes("device", n.device.as_bytes());
        }
        self.attr_map(&n.attr);
        if let Some(d) = &n.experimental_debug_info {
            self.message("experimental_debug_info", |w| w.debug_info(d));
        }
        if let Some(t) = &n.experimental_type {
            self.message("experimental_type", |w| w.full_type(t));
        }
    }

    fn attr_map<'a>(&mut self, attrs: impl IntoIterator<Item = (&'a String, &'a AttrValue)>) {
        for (key, value) in attrs {
            self.message("attr", |w| {
                w.bytes("key", key.as_bytes());
                w.message("value", |w| w.attr_value(value));
            });
        }
    }

    fn debug_info(&mut self, d: &ExperimentalDebugInfo) {
        for n in &d.original_node_names {
            self.bytes("original_node_names", n.as_bytes());
        }
        for n in &d.original_func_names {
            self.bytes("original_func_names", n.as_bytes());
        }
    }

    fn full_type(&mut self, t: &FullTypeDef) {
        if t.type_id != 0 {
            match full_type_name(t.type_id) {
                Some(name) => self.scalar("type_id", name),
                None => self.scalar("type_id", t.type_id),
            }
        }
        for arg in &t.args {
            self.message("args", |w| w.full_type(arg));
        }
        match &t.attr {
            Some(FullTypeAttr::S(s)) => self.bytes("s", s.as_bytes()),
            Some(FullTypeAttr::I(i)) => self.scalar("i", i),
            None => {}
        }
    }

    fn versions(&mut self, v: &VersionDef) {
        if v.producer != 0 {
            self.scalar("producer", v.producer);
        }
        if v.min_consumer != 0 {
            self.scalar("min_consumer", v.min_consumer);
        }
        for b in &v.bad_consumers {
            self.scalar("bad_consumers", b);
        }
    }

    fn attr_value(&mut self, v: &AttrValue) {
        match &v.value {
            None => {}
            Some(Value::List(l)) => self.message("list", |w| w.list(l)),
            Some(Value::S(s)) => self.bytes("s", s),
            Some(Value::I(i)) => self.scalar("i", i),
            Some(Value::F(f)) => self.f32("f", *f),
            Some(Value::B(b)) => self.scalar("b", b),
            Some(Value::Type(t)) => self.data_type("type", *t),
            Some(Value::Shape(s)) => self.message("shape", |w| w.shape(s)),
            Some(Value::Tensor(t)) => self.message("tensor", |w| w.tensor(t)),
            Some(Value::Placeholder(p)) => self.bytes("placeholder", p.as_bytes()),
            Some(Value::Func(f)) => self.message("func", |w| w.func(f)),
        }
    }

    fn list(&mut self, l: &ListValue) {
        for s in &l.s {
            self.bytes("s", s);
        }
        for i in &l.i {
            self.scalar("i", i);
        }
        for f in &l.f {
            self.f32("f", *f);
        }
        for b in &l.b {
            self.scalar("b", b);
        }
        for t in &l.r#type {
            self.data_type("type", *t);
        }
        for s in &l.shape {
            self.message("shape", |w| w.shape(s));
        }
        for t in &l.tensor {
            self.message("tensor", |w| w.tensor(t));
        }
        for f in &l.func {
            self.message("func", |w| w.func(f));
        }
    }

    fn func(&mut self, f: &NameAttrList) {
        self.bytes("name", f.name.as_bytes());
        self.attr_map(&f.attr);
    }

    fn shape(&mut self, s: &TensorShapeProto) {
        for d in &s.dim {
            self.message("dim", |w| {
                if d.size != 0 {
                    w.scalar("size", d.size);
                }
                if !d.name.is_empty() {
                    w.bytes("name", d.name.as_bytes());
                }
            });
        }
        if s.unknown_rank {
            self.scalar("unknown_rank", true);
        }
    }

    fn tensor(&mut self, t: &TensorProto) {
        if t.dtype != 0 {
            self.data_type("dtype", t.dtype);
        }
        if let Some(s) = &t.tensor_shape {
            self.message("tensor_shape", |w| w.shape(s));
        }
        if t.version_number != 0 {
            self.scalar("version_number", t.version_number);
        }
        if !t.tensor_content.is_empty() {
            self.bytes("tensor_content", &t.tensor_content);
        }
        for v in &t.float_val {
            self.f32("float_val", *v);
        }
        for v in &t.double_val {
            self.f64("double_val", *v);
        }
        for v in &t.int_val {
            self.scalar("int_val", v);
        }
        for v in &t.string_val {
            self.bytes("string_val", v);
        }
        for v in &t.scomplex_val {
            self.f32("scomplex_val", *v);
        }
        for v in &t.int64_val {
            self.scalar("int64_val", v);
        }
        for v in &t.bool_val {
            self.scalar("bool_val", v);
        }
        for v in &t.dcomplex_val {
            self.f64("dcomplex_val", *v);
        }
        for v in &t.half_val {
            self.scalar("half_val", v);
        }
        for v in &t.resource_handle_val {
            self.reflected("resource_handle_val", v, "tensorflow.ResourceHandleProto");
        }
        for v in &t.variant_val {
            self.reflected("variant_val", v, "tensorflow.VariantTensorDataProto");
        }
        for v in &t.uint32_val {
            self.scalar("uint32_val", v);
        }
        for v in &t.uint64_val {
            self.scalar("uint64_val", v);
        }
        if !t.float8_val.is_empty() {
            self.bytes("float8_val", &t.float8_val);
        }
    }
}

/// C-escapes bytes as protobuf's text printer does: `\n \r \t \" \' \\`
/// by name, other bytes outside printable ASCII as three octal digits.
pub fn escape_into(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
}

/// Writes a float given as Rust's shortest `{:e}` form (`1.5e-5`) the way
/// Python's `repr` does: positional for exponents -4..16 (`1.0`, `0.0001`),
/// otherwise `1.5e-05` / `1e+16`; `inf`, `-inf`, `nan`.
fn push_python_float(out: &mut String, sci: String, finite: bool, nan: bool) {
    if nan {
        out.push_str("nan");
        return;
    }
    if !finite {
        out.push_str(if sci.starts_with('-') { "-inf" } else { "inf" });
        return;
    }
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    out.push_str(sign);
    if (-4..16).contains(&exponent) {
        if exponent < 0 {
            out.push_str("0.");
            for _ in 0..(-exponent - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(f: f64) -> String {
        let mut s = String::new();
        push_python_float(&mut s, format!("{f:e}"), f.is_finite(), f.is_nan());
        s
    }

    #[test]
    fn floats_print_like_python_repr() {
        assert_eq!(py(1e-5), "1e-05");
        assert_eq!(py(0.0001), "0.0001");
        assert_eq!(py(1.0), "1.0");
        assert_eq!(py(0.0), "0.0");
        assert_eq!(py(-0.5), "-0.5");
        assert_eq!(py(123.25), "123.25");
        assert_eq!(py(1500.0), "1500.0");
        assert_eq!(py(1e16), "1e+16");
        assert_eq!(py(-2.5e-7), "-2.5e-07");
        assert_eq!(py(f64::NEG_INFINITY), "-inf");
        assert_eq!(py(f64::NAN), "nan");
    }
}
