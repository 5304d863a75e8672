//! The canonical `.opg` printer.
//!
//! Deterministic: nodes print in text order (`seq`), attributes sorted by
//! key, one statement per line, two spaces per nesting level, one blank line
//! between graphs. `parse(print(m)) == m` for every module the parser or a
//! pass produces; floats print in their shortest round-tripping form.

use std::fmt::Write;

use crate::ir::graph::{Graph, Module, NodeId, NodeKind, RegionId, RegionKind};
use crate::ir::types::{AttrValue, Shape, TensorData, TensorLit};
use crate::ir::AttrMap;
use crate::syntax::literal::{escape_into, is_plain_name};

/// Printed text the parser would refuse: larger than it reads.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic, PartialEq, Eq)]
#[error("the printed module is {size} bytes; `.opg` text is read back only up to {max} bytes")]
#[diagnostic(
    code(tpu_rewrite::emit::too_large),
    help("write a GraphDef (`--format pb`) or split the module; fewer replicas do not shrink an SPMD module")
)]
pub struct TooLarge {
    /// The size of the printed text.
    pub size: usize,
    /// The parser's limit ([`crate::syntax::MAX_SOURCE_BYTES`]).
    pub max: usize,
}

/// [`print_module`], refusing text that would not parse back.
pub fn print_module_checked(module: &Module) -> Result<String, TooLarge> {
    let text = print_module(module);
    match text.len() {
        size if size > crate::syntax::MAX_SOURCE_BYTES => Err(TooLarge { size, max: crate::syntax::MAX_SOURCE_BYTES }),
        _ => Ok(text),
    }
}

/// Prints a module as canonical `.opg` text.
pub fn print_module(module: &Module) -> String {
    // A node prints as about 110 bytes in lowered modules. Reserving more
    // than the text needs costs address space, not memory (untouched pages
    // are never faulted in), while growing a 100 MB buffer copies it and
    // holds both copies at once.
    let mut out = String::with_capacity(module.node_count() * 192);
    for line in &module.header {
        out.push_str("//");
        if !line.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
        out.push('\n');
    }
    for (i, graph) in module.graphs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        print_graph_into(&mut out, graph);
    }
    out
}

/// Prints one graph.
pub fn print_graph(graph: &Graph) -> String {
    let mut out = String::new();
    print_graph_into(&mut out, graph);
    out
}

enum Item {
    Node(NodeId),
    Region(RegionId),
}

struct Printer<'g> {
    graph: &'g Graph,
    /// Items per region; index 0 is the top level, `r + 1` region `r`.
    children: Vec<Vec<(u64, Item)>>,
}

fn print_graph_into(out: &mut String, graph: &Graph) {
    let mut children: Vec<Vec<(u64, Item)>> = (0..=graph.regions.len()).map(|_| Vec::new()).collect();
    for id in graph.node_ids() {
        let node = graph.node(id);
        if matches!(node.kind, NodeKind::RegionInput { .. }) {
            continue;
        }
        let slot = node.region.map_or(0, |r| r.0 as usize + 1);
        children[slot].push((node.seq, Item::Node(id)));
    }
    for (i, region) in graph.regions.iter().enumerate() {
        let slot = region.parent.map_or(0, |r| r.0 as usize + 1);
        children[slot].push((region.seq, Item::Region(RegionId(i as u32))));
    }
    for list in &mut children {
        list.sort_unstable_by_key(|(seq, _)| *seq);
    }
    let printer = Printer { graph, children };
    out.push_str("graph @");
    push_name(out, &graph.name);
    if !graph.attrs.is_empty() {
        out.push(' ');
        push_attrs(out, &graph.attrs, '(', ')');
    }
    out.push_str(" {\n");
    printer.body(out, 0, 1);
    out.push_str("}\n");
}

fn indent(out: &mut String, depth: usize) {
    const SPACES: &str = "                                ";
    let mut width = depth * 2;
    while width > 0 {
        let n = width.min(SPACES.len());
        out.push_str(&SPACES[..n]);
        width -= n;
    }
}

/// Writes an integer without going through `fmt` (itoa).
fn push_int(out: &mut String, value: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(value));
}

impl Printer<'_> {
    /// Prints the items of `slot`. A long list is printed in pieces on the
    /// rayon pool, a window at a time, each piece into its own buffer,
    /// appended in order: the text is the same as printed in one go, and the
    /// extra memory is one window's text.
    fn body(&self, out: &mut String, slot: usize, depth: usize) {
        use rayon::prelude::*;
        const PIECE: usize = 4096;
        const WINDOW: usize = 64 * PIECE;
        let items = &self.children[slot];
        if items.len() < 4 * PIECE {
            self.items(out, items, depth);
            return;
        }
        for window in items.chunks(WINDOW) {
            let pieces: Vec<String> = window
                .par_chunks(PIECE)
                .map(|piece| {
                    let mut text = String::with_capacity(piece.len() * 64);
                    self.items(&mut text, piece, depth);
                    text
                })
                .collect();
            for text in pieces {
                out.push_str(&text);
            }
        }
    }

    fn items(&self, out: &mut String, items: &[(u64, Item)], depth: usize) {
        for (_, item) in items {
            match item {
                Item::Node(id) => self.node(out, *id, depth),
                Item::Region(r) => self.region(out, *r, depth),
            }
        }
    }

    fn node(&self, out: &mut String, id: NodeId, depth: usize) {
        let g = self.graph;
        let node = g.node(id);
        indent(out, depth);
        out.push('%');
        push_name(out, &node.name);
        out.push_str(" = ");
        let inputs = g.inputs(id);
        if let NodeKind::Gradients { num_ys, num_xs, has_grad_ys } = node.kind {
            let data: Vec<_> = inputs.iter().filter(|i| !i.is_control()).collect();
            let (ys, rest) = data.split_at((num_ys as usize).min(data.len()));
            let (xs, grad_ys) = rest.split_at((num_xs as usize).min(rest.len()));
            out.push_str("gradients(ys = [");
            self.operands(out, ys.iter().copied());
            out.push_str("], xs = [");
            self.operands(out, xs.iter().copied());
            out.push(']');
            if has_grad_ys {
                out.push_str(", grad_ys = [");
                self.operands(out, grad_ys.iter().copied());
                out.push(']');
            }
            out.push_str(")\n");
            return;
        }
        out.push_str(&node.op);
        out.push('(');
        self.operands(out, inputs.iter());
        out.push(')');
        if let Some(device) = &node.device {
            out.push_str(" on ");
            push_str_lit(out, device.as_bytes());
        }
        if !node.attrs.is_empty() {
            out.push(' ');
            push_attrs(out, &node.attrs, '{', '}');
        }
        out.push('\n');
    }

    fn operands<'a>(&self, out: &mut String, inputs: impl Iterator<Item = &'a crate::ir::Input>) {
        for (i, input) in inputs.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.operand(out, input.src, input.output);
        }
    }

    fn operand(&self, out: &mut String, src: NodeId, output: Option<u32>) {
        match output {
            None => {
                out.push_str("^%");
                push_name(out, &self.graph.node(src).name);
            }
            Some(k) => {
                out.push('%');
                push_name(out, &self.graph.node(src).name);
                if k != 0 {
                    out.push(':');
                    push_int(out, k);
                }
            }
        }
    }

    fn region(&self, out: &mut String, id: RegionId, depth: usize) {
        let region = self.graph.region(id);
        indent(out, depth);
        match &region.kind {
            RegionKind::Replicate { inputs, outputs } => {
                out.push_str("replicate ");
                push_attrs(out, &region.attrs, '(', ')');
                if !inputs.is_empty() {
                    out.push_str(" (");
                    for (i, &input) in inputs.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        out.push('%');
                        push_name(out, &self.graph.node(input).name);
                        out.push_str(" = [");
                        self.operands(out, self.graph.inputs(input).iter());
                        out.push(']');
                    }
                    out.push(')');
                }
                out.push_str(" {\n");
                self.body(out, id.0 as usize + 1, depth + 1);
                if region.return_span.is_some() || !outputs.is_empty() {
                    indent(out, depth + 1);
                    out.push_str("return");
                    for (i, v) in outputs.iter().enumerate() {
                        out.push_str(if i == 0 { " " } else { ", " });
                        self.operand(out, v.node, v.output);
                    }
                    out.push('\n');
                }
            }
            RegionKind::OutsideCompilation => {
                out.push_str("outside_compilation");
                if !region.attrs.is_empty() {
                    out.push(' ');
                    push_attrs(out, &region.attrs, '(', ')');
                }
                out.push_str(" {\n");
                self.body(out, id.0 as usize + 1, depth + 1);
            }
        }
        indent(out, depth);
        out.push_str("}\n");
    }
}

/// Writes a node or graph name, quoting it when needed.
pub fn push_name(out: &mut String, name: &str) {
    if is_plain_name(name) {
        out.push_str(name);
    } else {
        push_str_lit(out, name.as_bytes());
    }
}

fn push_str_lit(out: &mut String, bytes: &[u8]) {
    out.push('"');
    escape_into(out, bytes);
    out.push('"');
}

fn is_plain_key(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(key, "true" | "false")
}

/// Writes `open k = v, ... close`.
pub fn push_attrs(out: &mut String, attrs: &AttrMap, open: char, close: char) {
    out.push(open);
    for (i, (key, value)) in attrs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if is_plain_key(key) {
            out.push_str(key);
        } else {
            push_str_lit(out, key.as_bytes());
        }
        out.push_str(" = ");
        push_value(out, value);
    }
    out.push(close);
}

fn push_f32(out: &mut String, f: f32) {
    if f.is_nan() {
        out.push_str("nan");
    } else {
        let _ = write!(out, "{f:?}");
    }
}

fn push_f64(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("nan");
    } else {
        let _ = write!(out, "{f:?}");
    }
}

/// Writes an attribute value.
pub fn push_value(out: &mut String, value: &AttrValue) {
    match value {
        AttrValue::Str(s) => push_str_lit(out, s.as_bytes()),
        AttrValue::Bytes(b) => push_str_lit(out, b),
        AttrValue::Int(i) => push_int(out, *i),
        AttrValue::Float(f) => push_f32(out, *f),
        AttrValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        AttrValue::Type(t) => {
            let _ = write!(out, "{t}");
        }
        AttrValue::Shape(s) => push_shape(out, s),
        AttrValue::Tensor(t) => push_tensor(out, t),
        AttrValue::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_value(out, item);
            }
            out.push(']');
        }
        AttrValue::Func(f) => {
            out.push_str("func ");
            push_str_lit(out, f.name.as_bytes());
            if !f.attrs.is_empty() {
                out.push(' ');
                push_attrs(out, &f.attrs, '{', '}');
            }
        }
        AttrValue::Placeholder(p) => {
            out.push_str("placeholder ");
            push_str_lit(out, p.as_bytes());
        }
    }
}

/// Writes a shape as its `Display` does (`shape[2, ?]`, `shape[*]`).
fn push_shape(out: &mut String, shape: &Shape) {
    match &shape.dims {
        None => out.push_str("shape[*]"),
        Some(dims) => {
            out.push_str("shape[");
            for (i, d) in dims.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if *d < 0 {
                    out.push('?');
                } else {
                    push_int(out, *d);
                }
            }
            out.push(']');
        }
    }
}

fn push_list<T>(out: &mut String, items: &[T], mut each: impl FnMut(&mut String, &T)) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        each(out, item);
    }
    out.push(']');
}

fn push_tensor(out: &mut String, t: &TensorLit) {
    let _ = write!(out, "tensor({}, [", t.dtype);
    for (i, d) in t.shape.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_int(out, *d);
    }
    out.push_str("]) ");
    match &t.data {
        TensorData::Content(bytes) => {
            out.push_str("bytes ");
            push_str_lit(out, bytes);
        }
        TensorData::Float(v) => push_list(out, v, |o, x| push_f32(o, *x)),
        TensorData::Double(v) => push_list(out, v, |o, x| push_f64(o, *x)),
        TensorData::Half(v) | TensorData::Int(v) => push_list(out, v, |o, x| push_int(o, *x)),
        TensorData::Int64(v) => push_list(out, v, |o, x| push_int(o, *x)),
        TensorData::Uint32(v) => push_list(out, v, |o, x| push_int(o, *x)),
        TensorData::Uint64(v) => push_list(out, v, |o, x| push_int(o, *x)),
        TensorData::Bool(v) => push_list(out, v, |o, x| o.push_str(if *x { "true" } else { "false" })),
        TensorData::Str(v) => push_list(out, v, |o, x| push_str_lit(o, x)),
    }
}
