//! MLIR's generic textual form of a [`Module`], for diagnostics and tests.
//!
//! The output follows what `mlir-opt --mlir-print-op-generic` prints for the
//! same module after VHLO is legalized back to StableHLO: quoted operation
//! names, `<{...}>` for inherent attributes (names without a dot) and
//! `{...}` for discardable ones (dialect-prefixed names), sorted by name;
//! dense data of more than 100 elements in hex. It differs where MLIR's
//! printer makes choices of its own: values are numbered `%N` by the tree, a
//! multi-result definition lists every result (`%3, %4 = ...`), and floats
//! that six digits do not round-trip are printed in Rust's shortest form.

use std::collections::HashMap;
use std::fmt::{self, Write};

use super::{
    Attribute, Block, DenseValues, Dim, ElementType, Function, Module, NamedAttribute, Operation, Region, TensorType,
    Type, ValueId, Visibility,
};

/// Non-splat dense data with more elements than this prints in hex.
const HEX_THRESHOLD: usize = 100;

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (inherent, discardable) = split(&self.attributes);
        write!(f, "\"builtin.module\"()")?;
        write_dict(f, "<{", &inherent, "}>")?;
        writeln!(f, " ({{")?;
        for func in &self.functions {
            write_function(f, func)?;
        }
        write!(f, "}})")?;
        write_dict(f, "{", &discardable, "}")?;
        writeln!(f, " : () -> ()")
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tensor(t) => write!(f, "{t}"),
            Type::Element(e) => write!(f, "{e}"),
            Type::Token => write!(f, "!stablehlo.token"),
            Type::Tuple(items) => {
                write!(f, "tuple<")?;
                list(f, items)?;
                write!(f, ">")
            }
            Type::Function { inputs, results } => {
                write!(f, "(")?;
                list(f, inputs)?;
                write!(f, ") -> ")?;
                write_results(f, results)
            }
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tensor<")?;
        match &self.dims {
            None => write!(f, "*x")?,
            Some(dims) => {
                for d in dims {
                    match d {
                        Dim::Static(n) => write!(f, "{n}x")?,
                        Dim::Dynamic => write!(f, "?x")?,
                    }
                }
            }
        }
        write!(f, "{}", self.element)?;
        if !self.bounds.is_empty() {
            write!(f, ", #stablehlo.bounds<")?;
            for (i, b) in self.bounds.iter().enumerate() {
                if i > 0 {
                    write!(f, ", ")?;
                }
                match b {
                    Some(b) => write!(f, "{b}")?,
                    None => write!(f, "?")?,
                }
            }
            write!(f, ">")?;
        }
        write!(f, ">")
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElementType::I1 => write!(f, "i1"),
            ElementType::Signed(w) => write!(f, "si{w}"),
            ElementType::Unsigned(w) => write!(f, "ui{w}"),
            ElementType::Signless(w) => write!(f, "i{w}"),
            ElementType::Index => write!(f, "index"),
            ElementType::F16 => write!(f, "f16"),
            ElementType::BF16 => write!(f, "bf16"),
            ElementType::F32 => write!(f, "f32"),
            ElementType::F64 => write!(f, "f64"),
            ElementType::F8(name) => write!(f, "{name}"),
            ElementType::Complex(inner) => write!(f, "complex<{inner}>"),
        }
    }
}

impl fmt::Display for Attribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_attr(f, self, false)
    }
}

fn list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            write!(f, ", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

fn write_results(f: &mut impl Write, results: &[Type]) -> fmt::Result {
    match results {
        [one] if !matches!(one, Type::Function { .. }) => write!(f, "{one}"),
        _ => {
            write!(f, "(")?;
            for (i, t) in results.iter().enumerate() {
                if i > 0 {
                    write!(f, ", ")?;
                }
                write!(f, "{t}")?;
            }
            write!(f, ")")
        }
    }
}

/// Inherent (undotted) and discardable (dialect-prefixed) attributes, each
/// sorted by name.
fn split(attrs: &[NamedAttribute]) -> (Vec<&NamedAttribute>, Vec<&NamedAttribute>) {
    let (mut discardable, mut inherent): (Vec<_>, Vec<_>) = attrs.iter().partition(|a| a.name.contains('.'));
    inherent.sort_by(|a, b| a.name.cmp(&b.name));
    discardable.sort_by(|a, b| a.name.cmp(&b.name));
    (inherent, discardable)
}

fn write_dict(f: &mut impl Write, open: &str, attrs: &[&NamedAttribute], close: &str) -> fmt::Result {
    if attrs.is_empty() {
        return Ok(());
    }
    write!(f, " {open}")?;
    for (i, a) in attrs.iter().enumerate() {
        if i > 0 {
            write!(f, ", ")?;
        }
        write_named(f, a)?;
    }
    write!(f, "{close}")
}

fn write_named(f: &mut impl Write, a: &NamedAttribute) -> fmt::Result {
    let bare = a.name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && a.name.chars().all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c));
    if bare {
        write!(f, "{}", a.name)?;
    } else {
        write_string(f, a.name.as_bytes())?;
    }
    if a.value != Attribute::Unit {
        write!(f, " = ")?;
        write_attr(f, &a.value, false)?;
    }
    Ok(())
}

fn write_function(f: &mut fmt::Formatter<'_>, func: &Function) -> fmt::Result {
    let mut props = vec![
        NamedAttribute {
            name: "function_type".into(),
            value: Attribute::Type(Type::Function { inputs: func.inputs.clone(), results: func.results.clone() }),
        },
        NamedAttribute { name: "sym_name".into(), value: Attribute::String(func.name.clone().into_bytes()) },
        NamedAttribute {
            name: "sym_visibility".into(),
            value: Attribute::String(match func.visibility {
                Visibility::Public => b"public".to_vec(),
                Visibility::Private => b"private".to_vec(),
            }),
        },
    ];
    let dicts =
        |v: &[Vec<NamedAttribute>]| Attribute::Array(v.iter().map(|d| Attribute::Dictionary(d.clone())).collect());
    if !func.arg_attributes.is_empty() {
        props.push(NamedAttribute { name: "arg_attrs".into(), value: dicts(&func.arg_attributes) });
    }
    if !func.result_attributes.is_empty() {
        props.push(NamedAttribute { name: "res_attrs".into(), value: dicts(&func.result_attributes) });
    }
    let (inherent, _) = split(&props);
    write!(f, "  \"func.func\"()")?;
    write_dict(f, "<{", &inherent, "}>")?;
    let mut types = HashMap::new();
    let mut out = String::new();
    write_region(&mut out, &func.body, 1, &mut types)?;
    writeln!(f, " ({out}) : () -> ()")
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// A region as `{...}`, its blocks' operations at `level + 1`.
fn write_region(out: &mut String, region: &Region, level: usize, types: &mut HashMap<ValueId, Type>) -> fmt::Result {
    out.push_str("{\n");
    for (i, block) in region.blocks.iter().enumerate() {
        write_block(out, block, i, region.blocks.len(), level, types)?;
    }
    indent(out, level);
    out.push('}');
    Ok(())
}

fn write_block(
    out: &mut String,
    block: &Block,
    index: usize,
    count: usize,
    level: usize,
    types: &mut HashMap<ValueId, Type>,
) -> fmt::Result {
    if !block.arguments.is_empty() || count > 1 {
        indent(out, level);
        write!(out, "^bb{index}")?;
        if !block.arguments.is_empty() {
            out.push('(');
            for (i, a) in block.arguments.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write!(out, "{}: {}", a.id, a.ty)?;
                types.insert(a.id, a.ty.clone());
            }
            out.push(')');
        }
        out.push_str(":\n");
    }
    for op in &block.operations {
        write_op(out, op, level + 1, types)?;
    }
    Ok(())
}

fn write_op(out: &mut String, op: &Operation, level: usize, types: &mut HashMap<ValueId, Type>) -> fmt::Result {
    indent(out, level);
    if !op.results.is_empty() {
        for (i, r) in op.results.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write!(out, "{}", r.id)?;
        }
        out.push_str(" = ");
    }
    write!(out, "\"{}\"(", op.name)?;
    for (i, v) in op.operands.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write!(out, "{v}")?;
    }
    out.push(')');
    let (inherent, discardable) = split(&op.attributes);
    write_dict(out, "<{", &inherent, "}>")?;
    if !op.regions.is_empty() {
        out.push_str(" (");
        for (i, region) in op.regions.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_region(out, region, level, types)?;
        }
        out.push(')');
    }
    write_dict(out, "{", &discardable, "}")?;
    out.push_str(" : (");
    for (i, v) in op.operands.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match types.get(v) {
            Some(t) => write!(out, "{t}")?,
            None => out.push_str("<<unknown>>"),
        }
    }
    out.push_str(") -> ");
    let results: Vec<Type> = op.results.iter().map(|r| r.ty.clone()).collect();
    write_results(out, &results)?;
    out.push('\n');
    for r in &op.results {
        types.insert(r.id, r.ty.clone());
    }
    Ok(())
}

fn write_string(f: &mut impl Write, s: &[u8]) -> fmt::Result {
    f.write_char('"')?;
    for &b in s {
        match b {
            b'"' | b'\\' => write!(f, "\\{}", b as char)?,
            b' '..=b'~' => f.write_char(b as char)?,
            b'\n' => f.write_str("\\n")?,
            b'\t' => f.write_str("\\t")?,
            _ => write!(f, "\\{b:02X}")?,
        }
    }
    f.write_char('"')
}

/// An attribute; `bare` drops the `: type` of integers and floats and prints
/// dense arrays as `[...]`, as inside StableHLO's structured attributes.
fn write_attr(f: &mut impl Write, a: &Attribute, bare: bool) -> fmt::Result {
    match a {
        Attribute::Unit => write!(f, "unit"),
        Attribute::Bool(b) => write!(f, "{b}"),
        Attribute::Integer { value, ty } => {
            if matches!(ty, Type::Element(ElementType::I1)) {
                write!(f, "{}", *value != 0)
            } else if bare {
                write!(f, "{value}")
            } else {
                write!(f, "{value} : {ty}")
            }
        }
        Attribute::Float { value, ty } => {
            let element = match ty {
                Type::Element(e) => e.clone(),
                _ => ElementType::F64,
            };
            write_float(f, *value, &element)?;
            if bare {
                Ok(())
            } else {
                write!(f, " : {ty}")
            }
        }
        Attribute::String(s) => write_string(f, s),
        Attribute::Type(t) => write!(f, "{t}"),
        Attribute::Array(items) => {
            f.write_char('[')?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write_attr(f, item, bare)?;
            }
            f.write_char(']')
        }
        Attribute::Dictionary(entries) => {
            let mut sorted: Vec<&NamedAttribute> = entries.iter().collect();
            sorted.sort_by(|a, b| a.name.cmp(&b.name));
            f.write_char('{')?;
            for (i, e) in sorted.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write_named(f, e)?;
            }
            f.write_char('}')
        }
        Attribute::DenseArray { element, values } => {
            if bare {
                f.write_char('[')?;
                write_flat(f, values, element, ", ")?;
                return f.write_char(']');
            }
            write!(f, "array<{element}")?;
            if !values.is_empty() {
                f.write_str(": ")?;
                write_flat(f, values, element, ", ")?;
            }
            f.write_char('>')
        }
        Attribute::DenseElements { ty, values, splat } => {
            f.write_str("dense<")?;
            write_dense(f, ty, values, *splat)?;
            write!(f, "> : {ty}")
        }
        Attribute::SymbolRef(s) => write!(f, "@{s}"),
        Attribute::Enum { kind, value } if kind == "result_accuracy_mode" => write!(f, "#stablehlo.{kind}<{value}>"),
        Attribute::Enum { kind, value } => write!(f, "#stablehlo<{kind} {value}>"),
        Attribute::Struct { kind, fields } if kind == "conv" => write_conv(f, fields),
        Attribute::Struct { kind, fields } => {
            write!(f, "#stablehlo.{kind}<")?;
            let mut first = true;
            for field in fields {
                let empty = matches!(&field.value, Attribute::DenseArray { values, .. } if values.is_empty());
                if empty && matches!(kind.as_str(), "dot" | "gather" | "scatter") {
                    continue;
                }
                if !first {
                    f.write_str(", ")?;
                }
                first = false;
                write!(f, "{} = ", field.name)?;
                write_attr(f, &field.value, true)?;
            }
            f.write_char('>')
        }
    }
}

/// `#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`.
fn write_conv(f: &mut impl Write, fields: &[NamedAttribute]) -> fmt::Result {
    let get = |name: &str| fields.iter().find(|a| a.name == name).map(|a| &a.value);
    let int = |name: &str| match get(name) {
        Some(Attribute::Integer { value, .. }) => Some(*value as i64),
        _ => None,
    };
    let ints = |name: &str| match get(name) {
        Some(Attribute::DenseArray { values: DenseValues::Int(v), .. }) => v.clone(),
        _ => Vec::new(),
    };
    let layout = |f: &mut dyn Write, a: (&str, &str), b: (&str, &str), spatial: &str| -> fmt::Result {
        let spatial = ints(spatial);
        let mut labels = vec![String::from("?"); spatial.len() + 2];
        for (dim, label) in [(int(a.0), a.1), (int(b.0), b.1)] {
            if let Some(slot) = dim.and_then(|d| usize::try_from(d).ok()).and_then(|d| labels.get_mut(d)) {
                *slot = label.to_string();
            }
        }
        for (i, d) in spatial.iter().enumerate() {
            if let Some(slot) = usize::try_from(*d).ok().and_then(|d| labels.get_mut(d)) {
                *slot = i.to_string();
            }
        }
        write!(f, "[{}]", labels.join(", "))
    };
    f.write_str("#stablehlo.conv<")?;
    layout(f, ("input_batch_dimension", "b"), ("input_feature_dimension", "f"), "input_spatial_dimensions")?;
    f.write_char('x')?;
    layout(
        f,
        ("kernel_input_feature_dimension", "i"),
        ("kernel_output_feature_dimension", "o"),
        "kernel_spatial_dimensions",
    )?;
    f.write_str("->")?;
    layout(f, ("output_batch_dimension", "b"), ("output_feature_dimension", "f"), "output_spatial_dimensions")?;
    f.write_char('>')
}

fn write_dense(f: &mut impl Write, ty: &TensorType, values: &DenseValues, splat: bool) -> fmt::Result {
    if splat || ty.dims.as_ref().is_some_and(|d| d.is_empty()) {
        return write_flat(f, values, &ty.element, ", ");
    }
    if values.len() > HEX_THRESHOLD {
        return write_hex(f, values, &ty.element);
    }
    let dims: Vec<usize> =
        ty.dims.iter().flatten().map(|d| if let Dim::Static(n) = d { *n as usize } else { 0 }).collect();
    let mut index = 0;
    write_nested(f, values, &ty.element, &dims, &mut index)
}

fn write_nested(
    f: &mut impl Write,
    values: &DenseValues,
    e: &ElementType,
    dims: &[usize],
    index: &mut usize,
) -> fmt::Result {
    f.write_char('[')?;
    let n = dims.first().copied().unwrap_or(0);
    for i in 0..n {
        if i > 0 {
            f.write_str(", ")?;
        }
        if dims.len() > 1 {
            write_nested(f, values, e, &dims[1..], index)?;
        } else {
            write_one(f, values, e, *index)?;
            *index += 1;
        }
    }
    f.write_char(']')
}

fn write_flat(f: &mut impl Write, values: &DenseValues, e: &ElementType, sep: &str) -> fmt::Result {
    for i in 0..values.len() {
        if i > 0 {
            f.write_str(sep)?;
        }
        write_one(f, values, e, i)?;
    }
    Ok(())
}

fn write_one(f: &mut impl Write, values: &DenseValues, e: &ElementType, i: usize) -> fmt::Result {
    match values {
        DenseValues::Bool(v) => write!(f, "{}", v.get(i).copied().unwrap_or(false)),
        DenseValues::Int(v) => write!(f, "{}", v.get(i).copied().unwrap_or(0)),
        DenseValues::UInt(v) => write!(f, "{}", v.get(i).copied().unwrap_or(0)),
        DenseValues::Float(v) => write_float(f, v.get(i).copied().unwrap_or(0.0), e),
        DenseValues::Complex(v) => {
            let inner = match e {
                ElementType::Complex(inner) => inner.as_ref(),
                other => other,
            };
            f.write_char('(')?;
            write_float(f, v.get(2 * i).copied().unwrap_or(0.0), inner)?;
            f.write_char(',')?;
            write_float(f, v.get(2 * i + 1).copied().unwrap_or(0.0), inner)?;
            f.write_char(')')
        }
    }
}

/// The bits of `v` as stored in `e`, for hex printing.
fn float_bits(v: f64, e: &ElementType) -> (u64, usize) {
    match e {
        ElementType::F16 => (u64::from(half::f16::from_f64(v).to_bits()), 2),
        ElementType::BF16 => (u64::from(half::bf16::from_f64(v).to_bits()), 2),
        ElementType::F32 => (u64::from((v as f32).to_bits()), 4),
        _ => (v.to_bits(), 8),
    }
}

/// Whether `text` reads back as `v` in the precision of `e`.
fn round_trips(text: &str, v: f64, e: &ElementType) -> bool {
    text.parse::<f64>().is_ok_and(|p| float_bits(p, e).0 == float_bits(v, e).0)
}

/// A float as MLIR prints it: six digits in scientific form when that reads
/// back exactly, the bits in hex when not finite, else the shortest form.
fn write_float(f: &mut impl Write, v: f64, e: &ElementType) -> fmt::Result {
    if !v.is_finite() {
        let (bits, bytes) = float_bits(v, e);
        return write!(f, "0x{bits:0width$X}", width = bytes * 2);
    }
    let sci = format!("{v:.6e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let text = format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    if round_trips(&text, v, e) {
        return f.write_str(&text);
    }
    match e {
        ElementType::F32 => write!(f, "{:?}", v as f32),
        ElementType::F16 => write!(f, "{:?}", half::f16::from_f64(v).to_f32()),
        ElementType::BF16 => write!(f, "{:?}", half::bf16::from_f64(v).to_f32()),
        _ => write!(f, "{v:?}"),
    }
}

/// Dense data as `"0x..."`: each element's little-endian storage bytes.
fn write_hex(f: &mut impl Write, values: &DenseValues, e: &ElementType) -> fmt::Result {
    let width = |e: &ElementType| match e {
        ElementType::Signless(w) | ElementType::Signed(w) | ElementType::Unsigned(w) => (*w as usize).div_ceil(8),
        ElementType::Index => 8,
        _ => 1,
    };
    let bytes = |f: &mut dyn Write, bits: u64, n: usize| -> fmt::Result {
        for b in &bits.to_le_bytes()[..n] {
            write!(f, "{b:02X}")?;
        }
        Ok(())
    };
    f.write_str("\"0x")?;
    match values {
        DenseValues::Bool(v) => v.iter().try_for_each(|b| bytes(f, u64::from(*b), 1))?,
        DenseValues::Int(v) => v.iter().try_for_each(|x| bytes(f, *x as u64, width(e)))?,
        DenseValues::UInt(v) => v.iter().try_for_each(|x| bytes(f, *x, width(e)))?,
        DenseValues::Float(v) => v.iter().try_for_each(|x| {
            let (bits, n) = float_bits(*x, e);
            bytes(f, bits, n)
        })?,
        DenseValues::Complex(v) => {
            let inner = match e {
                ElementType::Complex(inner) => inner.as_ref(),
                other => other,
            };
            v.iter().try_for_each(|x| {
                let (bits, n) = float_bits(*x, inner);
                bytes(f, bits, n)
            })?
        }
    }
    f.write_char('"')
}
