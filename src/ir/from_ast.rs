//! AST → IR: declares every node, then wires operands by name.
//!
//! Names are resolved over the whole graph, so operands may refer forward
//! (TensorFlow GraphDefs are unordered). A node whose operands are all
//! declared already is wired at once; the others wait for the end of the
//! graph. Literals are typed here: a float literal is parsed straight to
//! `f32` or `f64` as its context needs, and attributes of registered ops are
//! checked against the registry with the attribute's own span.
//! Broken input is normal: [`build`] always returns a module, with every
//! problem it found.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use super::attrs::AttrMap;
use super::error::IrError;
use super::graph::{Graph, Input, Module, Node, NodeId, NodeKind, Region, RegionId, RegionKind, ValueRef};
use super::ops;
use super::types::{AttrKind, AttrValue, DType, FuncRef, Shape, Storage, TensorData, TensorLit};
use crate::syntax::ast;
use crate::syntax::sink::{replay, Sink};
use crate::syntax::Span;

/// Builds the IR of a parsed module.
pub fn build(module: ast::Module<'_>) -> (Module, Vec<IrError>) {
    let header: Vec<String> = module.header.iter().map(|s| s.to_string()).collect();
    let builder = ModuleBuilder::new(0, 0);
    replay(module, &builder);
    let (mut module, errors) = builder.finish();
    module.header = header;
    (module, errors)
}

/// Builds IR from parse events (see [`crate::syntax::sink`]).
pub struct ModuleBuilder {
    state: RefCell<State>,
}

struct State {
    graphs: Vec<Graph>,
    current: Option<Builder>,
    errors: Vec<IrError>,
    seen: HashMap<String, Span>,
    op_types: HashMap<Box<str>, Arc<str>>,
    devices: HashMap<Box<str>, Arc<str>>,
    keys: HashMap<Box<str>, Arc<str>>,
    maps: SharedMaps,
    capacity_hint: (usize, usize),
}

impl ModuleBuilder {
    /// A builder expecting about `nodes` nodes and `edges` edges.
    pub fn new(nodes: usize, edges: usize) -> ModuleBuilder {
        let capacity_hint = (nodes, edges);
        ModuleBuilder {
            state: RefCell::new(State {
                graphs: Vec::new(),
                current: None,
                errors: Vec::new(),
                seen: HashMap::new(),
                op_types: HashMap::new(),
                devices: HashMap::new(),
                keys: HashMap::new(),
                maps: SharedMaps::default(),
                capacity_hint,
            }),
        }
    }

    /// The module and every problem found.
    pub fn finish(self) -> (Module, Vec<IrError>) {
        let state = self.state.into_inner();
        (Module { header: Vec::new(), graphs: state.graphs }, state.errors)
    }
}

macro_rules! split {
    ($state:expr, $sh:ident, $current:ident) => {
        let st = &mut *$state.borrow_mut();
        let State { current: $current, errors, op_types, devices, keys, maps, .. } = st;
        #[allow(unused_mut)]
        let mut $sh = Shared { errors, op_types, devices, keys, maps };
    };
}

impl<'s> Sink<'s> for ModuleBuilder {
    fn graph_begin(&self, name: Cow<'s, str>, name_span: Span, attrs: Vec<ast::Attr<'s>>, start: usize) {
        let st = &mut *self.state.borrow_mut();
        if st.seen.insert(name.to_string(), name_span).is_some() {
            st.errors.push(IrError::DuplicateGraph { name: name.to_string(), span: name_span });
        }
        let mut graph = Graph::new(name.into_owned());
        graph.span = Span::new(start, start);
        graph.reserve(st.capacity_hint.0, st.capacity_hint.1);
        st.capacity_hint = (0, 0);
        let mut sh = Shared {
            errors: &mut st.errors,
            op_types: &mut st.op_types,
            devices: &mut st.devices,
            keys: &mut st.keys,
            maps: &mut st.maps,
        };
        graph.attrs = sh.attrs(None, attrs);
        st.current = Some(Builder { graph, pending: Vec::new(), pending_returns: Vec::new(), regions: Vec::new() });
    }

    fn graph_end(&self, end: usize) {
        let st = &mut *self.state.borrow_mut();
        if let Some(mut b) = st.current.take() {
            b.resolve_pending(&mut st.errors);
            b.graph.span = Span::new(b.graph.span.start as usize, end);
            st.graphs.push(b.graph);
        }
    }

    fn op(&self, op: ast::OpStmt<'s>) {
        split!(self.state, sh, current);
        if let Some(b) = current.as_mut() {
            b.op(&mut sh, op);
        }
    }

    fn gradients(&self, gradients: ast::Gradients<'s>) {
        split!(self.state, sh, current);
        if let Some(b) = current.as_mut() {
            b.gradients(&mut sh, gradients);
        }
    }

    fn replicate_begin(
        &self,
        attrs: Vec<ast::Attr<'s>>,
        inputs: Vec<ast::ReplicateInput<'s>>,
        keyword_span: Span,
        start: usize,
    ) {
        split!(self.state, sh, current);
        if let Some(b) = current.as_mut() {
            b.replicate(&mut sh, attrs, inputs, keyword_span, start);
        }
    }

    fn outside_compilation_begin(&self, attrs: Vec<ast::Attr<'s>>, keyword_span: Span, start: usize) {
        split!(self.state, sh, current);
        if let Some(b) = current.as_mut() {
            let attrs = b.attrs(&mut sh, None, attrs);
            let parent = b.regions.last().copied();
            let id = b.graph.add_region(Region {
                kind: RegionKind::OutsideCompilation,
                attrs,
                parent,
                seq: 0,
                span: Span::new(start, start),
                keyword_span,
                return_span: None,
            });
            b.regions.push(id);
        }
    }

    fn ret(&self, ret: ast::Return<'s>) {
        let st = &mut *self.state.borrow_mut();
        let Some(b) = st.current.as_mut() else { return };
        let Some(&r) = b.regions.last() else {
            st.errors.push(IrError::MalformedRegion {
                reason: "`return` outside a replicate region".into(),
                span: ret.span,
            });
            return;
        };
        b.graph.region_mut(r).return_span = Some(ret.span);
        let operands = ret.values.into_iter().map(pending_operand).collect();
        b.pending_returns.push((r, operands));
    }

    fn region_end(&self, end: usize) {
        let st = &mut *self.state.borrow_mut();
        if let Some(b) = st.current.as_mut() {
            if let Some(r) = b.regions.pop() {
                let region = b.graph.region_mut(r);
                region.span = Span::new(region.span.start as usize, end);
            }
        }
    }
}

/// The builder state a graph builder borrows: errors and interning tables.
struct Shared<'a> {
    errors: &'a mut Vec<IrError>,
    op_types: &'a mut HashMap<Box<str>, Arc<str>>,
    devices: &'a mut HashMap<Box<str>, Arc<str>>,
    keys: &'a mut HashMap<Box<str>, Arc<str>>,
    maps: &'a mut SharedMaps,
}

/// The attribute maps built so far, by op type and attributes as written,
/// so that ops written with equal attributes (`{T = f32}` on most ops of a
/// graph) share one map instead of each holding its own. Only maps of
/// scalar values, dtypes and shapes are kept, and only those whose building
/// reported nothing: such a map depends on the op type and the text alone,
/// so a later op with the same text gets the same map and the same (no)
/// diagnostics. Strings (names), tensors, lists and functions are usually
/// unique to their node and are built each time.
#[derive(Default)]
struct SharedMaps {
    maps: HashMap<Box<[u8]>, AttrMap>,
    /// The key being built, reused between ops.
    scratch: Vec<u8>,
}

/// The most maps [`SharedMaps`] keeps: beyond it, new maps are built
/// without being remembered, so a graph of many distinct attributes does
/// not grow the table without bound.
const SHARED_MAPS: usize = 1 << 16;

impl SharedMaps {
    /// Writes the key of `op`'s `attrs` into the scratch buffer; false when
    /// a value is of a kind that is not shared.
    fn key(&mut self, op: &str, attrs: &[ast::Attr<'_>]) -> bool {
        let k = &mut self.scratch;
        k.clear();
        k.extend_from_slice(op.as_bytes());
        for attr in attrs {
            k.push(0);
            k.extend_from_slice(attr.key.as_bytes());
            k.push(0);
            match &attr.value {
                ast::Value::Int(i, _) => {
                    k.push(b'i');
                    k.extend_from_slice(&i.to_le_bytes());
                }
                ast::Value::DTypeNumber(i, _) => {
                    k.push(b'n');
                    k.extend_from_slice(&i.to_le_bytes());
                }
                ast::Value::Bool(b, _) => k.extend_from_slice(if *b { b"t" } else { b"f" }),
                ast::Value::Float(text, _) => {
                    k.push(b'x');
                    k.extend_from_slice(text.as_bytes());
                }
                ast::Value::Ident(name, _) => {
                    k.push(b'd');
                    k.extend_from_slice(name.as_bytes());
                }
                ast::Value::Shape(dims, _) => {
                    k.push(b's');
                    for d in dims.iter().flatten() {
                        k.extend_from_slice(&d.to_le_bytes());
                    }
                    k.push(u8::from(dims.is_some()));
                }
                _ => return false,
            }
        }
        true
    }
}

struct PendingOperand {
    name: Box<str>,
    output: Option<u32>,
    span: Span,
}

struct Builder {
    graph: Graph,
    /// Nodes whose operands name nodes not declared yet.
    pending: Vec<(NodeId, Vec<PendingOperand>)>,
    /// Region outputs waiting for resolution.
    pending_returns: Vec<(RegionId, Vec<PendingOperand>)>,
    /// The open regions, innermost last.
    regions: Vec<RegionId>,
}

fn intern(map: &mut HashMap<Box<str>, Arc<str>>, s: &str) -> Arc<str> {
    if let Some(a) = map.get(s) {
        return a.clone();
    }
    let a: Arc<str> = s.into();
    map.insert(s.into(), a.clone());
    a
}

impl Builder {
    fn declare(&mut self, sh: &mut Shared<'_>, node: Node, operands: Operands<'_>) -> Option<NodeId> {
        let span = node.span;
        let name = node.name.clone();
        match self.graph.add_node(node) {
            Ok(id) => {
                self.wire(id, operands);
                Some(id)
            }
            Err(taken) => {
                let first = self.graph.node(taken.0).span;
                sh.errors.push(IrError::DuplicateName { name: name.to_string(), span, first });
                None
            }
        }
    }

    /// Wires operands now if all are declared, else defers the whole list.
    fn wire(&mut self, id: NodeId, operands: Operands<'_>) {
        match operands {
            Operands::Refs(refs) => {
                if refs.is_empty() {
                    return;
                }
                let resolved: Option<Vec<NodeId>> = refs.iter().map(|r| self.graph.find(&r.name.text)).collect();
                match resolved {
                    Some(srcs) => {
                        for (src, r) in srcs.into_iter().zip(&refs) {
                            let output = if r.control { None } else { Some(r.output.unwrap_or(0)) };
                            self.graph.add_input(id, Input { src, output, span: r.span });
                        }
                    }
                    None => self.pending.push((id, refs.into_iter().map(pending_operand).collect())),
                }
            }
        }
    }

    fn resolve_pending(&mut self, errors: &mut Vec<IrError>) {
        let pending = std::mem::take(&mut self.pending);
        for (id, operands) in pending {
            for o in operands {
                match self.graph.find(&o.name) {
                    Some(src) => self.graph.add_input(id, Input { src, output: o.output, span: o.span }),
                    None => self.unknown(errors, &o),
                }
            }
        }
        let returns = std::mem::take(&mut self.pending_returns);
        for (region, operands) in returns {
            let mut values = Vec::with_capacity(operands.len());
            for o in operands {
                match self.graph.find(&o.name) {
                    Some(node) => values.push(ValueRef { node, output: o.output, span: o.span }),
                    None => self.unknown(errors, &o),
                }
            }
            if let RegionKind::Replicate { outputs, .. } = &mut self.graph.region_mut(region).kind {
                *outputs = values;
            }
        }
    }

    fn unknown(&self, errors: &mut Vec<IrError>, o: &PendingOperand) {
        let help = match closest_name(&self.graph, &o.name) {
            Some(near) => format!("did you mean `%{near}`?"),
            None => "declare the node with `%name = OpType(...)`".to_string(),
        };
        errors.push(IrError::UnknownInput { name: o.name.to_string(), help, span: o.span });
    }

    fn op(&mut self, sh: &mut Shared<'_>, op: ast::OpStmt<'_>) {
        let op_type = intern(sh.op_types, op.op_type);
        let device = op.device.map(|(d, _)| intern(sh.devices, &d));
        let attrs = sh.attrs(Some(op.op_type), op.attrs);
        let node = Node {
            name: op.name.text.as_ref().into(),
            kind: NodeKind::Op,
            op: op_type,
            device,
            attrs,
            region: self.regions.last().copied(),
            seq: 0,
            span: op.span,
        };
        self.declare(sh, node, Operands::Refs(op.inputs));
    }

    fn replicate(
        &mut self,
        sh: &mut Shared<'_>,
        attrs: Vec<ast::Attr<'_>>,
        inputs: Vec<ast::ReplicateInput<'_>>,
        keyword_span: Span,
        start: usize,
    ) {
        let attrs = sh.attrs(None, attrs);
        let id = self.graph.add_region(Region {
            kind: RegionKind::Replicate { inputs: Vec::new(), outputs: Vec::new() },
            attrs,
            parent: self.regions.last().copied(),
            seq: 0,
            span: Span::new(start, start),
            keyword_span,
            return_span: None,
        });
        let mut nodes = Vec::with_capacity(inputs.len());
        for (index, input) in inputs.into_iter().enumerate() {
            let node = Node {
                name: input.name.text.as_ref().into(),
                kind: NodeKind::RegionInput { region: id, index: index as u32 },
                op: "".into(),
                device: None,
                attrs: AttrMap::new(),
                region: Some(id),
                seq: 0,
                span: input.span,
            };
            if let Some(node) = self.declare(sh, node, Operands::Refs(input.operands)) {
                nodes.push(node);
            }
        }
        if let RegionKind::Replicate { inputs: slot, .. } = &mut self.graph.region_mut(id).kind {
            *slot = nodes;
        }
        self.regions.push(id);
    }

    fn gradients(&mut self, sh: &mut Shared<'_>, g: ast::Gradients<'_>) {
        let num_ys = g.ys.len() as u32;
        let num_xs = g.xs.len() as u32;
        let has_grad_ys = g.grad_ys.is_some();
        let mut operands = g.ys;
        operands.extend(g.xs);
        operands.extend(g.grad_ys.into_iter().flatten());
        let node = Node {
            name: g.name.text.as_ref().into(),
            kind: NodeKind::Gradients { num_ys, num_xs, has_grad_ys },
            op: "gradients".into(),
            device: None,
            attrs: AttrMap::new(),
            region: self.regions.last().copied(),
            seq: 0,
            span: g.span,
        };
        self.declare(sh, node, Operands::Refs(operands));
    }

    fn attrs(&mut self, sh: &mut Shared<'_>, op: Option<&str>, attrs: Vec<ast::Attr<'_>>) -> AttrMap {
        sh.attrs(op, attrs)
    }
}

/// Operands as written.
enum Operands<'s> {
    Refs(Vec<ast::InputRef<'s>>),
}

impl Shared<'_> {
    fn attrs(&mut self, op: Option<&str>, attrs: Vec<ast::Attr<'_>>) -> AttrMap {
        let Some(op) = op.filter(|_| !attrs.is_empty()) else { return self.build_attrs(op, attrs) };
        if !self.maps.key(op, &attrs) {
            return self.build_attrs(Some(op), attrs);
        }
        if let Some(map) = self.maps.maps.get(self.maps.scratch.as_slice()) {
            return map.clone();
        }
        let key: Box<[u8]> = self.maps.scratch.as_slice().into();
        let errors = self.errors.len();
        let map = self.build_attrs(Some(op), attrs);
        if self.errors.len() == errors && self.maps.maps.len() < SHARED_MAPS {
            self.maps.maps.insert(key, map.clone());
        }
        map
    }

    /// Builds the attribute map of `attrs`, checking each against `op`'s registered kinds.
    fn build_attrs(&mut self, op: Option<&str>, attrs: Vec<ast::Attr<'_>>) -> AttrMap {
        // Collected first and made into a map once: one allocation of exactly its entries.
        let mut entries: Vec<(Arc<str>, AttrValue)> = Vec::with_capacity(attrs.len());
        let mut spans: Vec<(String, Span)> = Vec::new();
        for attr in attrs {
            let expected = op.and_then(|op| ops::attr_kind(op, &attr.key));
            let value_span = attr.value.span();
            let Some(value) = self.value(attr.value, expected) else { continue };
            if let (Some(op), Some(expected)) = (op, expected) {
                if value.kind() != expected {
                    self.errors.push(IrError::AttrType {
                        op: op.to_string(),
                        key: attr.key.to_string(),
                        expected: expected.to_string(),
                        found: value.kind().to_string(),
                        span: value_span,
                    });
                }
            }
            if let Some((_, first)) = spans.iter().find(|(k, _)| *k == attr.key) {
                self.errors.push(IrError::DuplicateName {
                    name: format!("attribute {}", attr.key),
                    span: attr.key_span,
                    first: *first,
                });
                continue;
            }
            spans.push((attr.key.to_string(), attr.key_span));
            entries.push((intern(self.keys, &attr.key), value));
        }
        // Keys are distinct (a repeated one was reported and skipped above).
        AttrMap::from_entries(entries)
    }

    fn invalid(&mut self, reason: impl Into<String>, span: Span) {
        self.errors.push(IrError::InvalidValue { reason: reason.into(), span });
    }

    fn dtype(&mut self, name: &str, span: Span) -> Option<DType> {
        match DType::from_name(name) {
            Some(d) => Some(d),
            None => {
                let known = DType::names().collect::<Vec<_>>().join(", ");
                self.errors.push(IrError::UnknownDType { name: name.to_string(), known, span });
                None
            }
        }
    }

    fn value(&mut self, value: ast::Value<'_>, expected: Option<AttrKind>) -> Option<AttrValue> {
        Some(match value {
            ast::Value::Str(bytes, _) => AttrValue::from_bytes(bytes.into_owned()),
            ast::Value::Int(i, span) => {
                if expected == Some(AttrKind::Float) {
                    AttrValue::Float(i as f32)
                } else {
                    let _ = span;
                    AttrValue::Int(i)
                }
            }
            ast::Value::Float(text, span) => match parse_f32(text) {
                Some(f) => AttrValue::Float(f),
                None => {
                    self.invalid("not a float", span);
                    return None;
                }
            },
            ast::Value::Bool(b, _) => AttrValue::Bool(b),
            ast::Value::Ident(name, span) => match name {
                "inf" => AttrValue::Float(f32::INFINITY),
                "nan" => AttrValue::Float(f32::NAN),
                _ => AttrValue::Type(self.dtype(name, span)?),
            },
            ast::Value::DTypeNumber(n, span) => match i32::try_from(n) {
                Ok(n) => AttrValue::Type(DType::from_number(n)),
                Err(_) => {
                    self.invalid("DataType number out of range", span);
                    return None;
                }
            },
            ast::Value::Shape(dims, span) => {
                // `?` is -1; anything lower is no size.
                if let Some(bad) = dims.iter().flatten().find(|&&d| d < -1) {
                    self.invalid(format!("shape dims are sizes or `?`, found {bad}"), span);
                    return None;
                }
                AttrValue::Shape(Shape { dims })
            }
            ast::Value::Tensor { dtype, shape, body, span } => {
                let dtype = match dtype {
                    ast::DTypeRef::Named(name, span) => self.dtype(name, span)?,
                    ast::DTypeRef::Number(n, span) => match i32::try_from(n) {
                        Ok(n) => DType::from_number(n),
                        Err(_) => {
                            self.invalid("DataType number out of range", span);
                            return None;
                        }
                    },
                };
                if let Some(bad) = shape.iter().find(|&&d| d < 0) {
                    self.invalid(format!("tensor dims must be known, found {bad}"), span);
                    return None;
                }
                let data = self.tensor_data(dtype, body)?;
                AttrValue::Tensor(Arc::new(TensorLit { dtype, shape, data }))
            }
            ast::Value::List(items, _) => {
                let item_kind = None;
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.value(item, item_kind)?);
                }
                AttrValue::List(out)
            }
            ast::Value::Func { name, attrs, .. } => {
                let attrs = self.attrs(None, attrs);
                AttrValue::Func(Box::new(FuncRef { name: name.into_owned(), attrs }))
            }
            ast::Value::Placeholder(name, _) => AttrValue::Placeholder(name.into_owned()),
        })
    }

    fn tensor_data(&mut self, dtype: DType, body: ast::TensorBody<'_>) -> Option<TensorData> {
        let values = match body {
            ast::TensorBody::Bytes(bytes, _) => return Some(TensorData::Content(bytes.into_owned())),
            ast::TensorBody::Values(values) => values,
        };
        macro_rules! collect {
            ($variant:ident, $conv:expr) => {{
                let mut out = Vec::with_capacity(values.len());
                for v in values {
                    let span = v.span();
                    match $conv(&v) {
                        Some(x) => out.push(x),
                        None => {
                            self.invalid(format!("not a value of dtype {dtype}"), span);
                            return None;
                        }
                    }
                }
                TensorData::$variant(out)
            }};
        }
        Some(match dtype.storage() {
            Storage::Float => collect!(Float, |v: &ast::Value<'_>| float_of(v).and_then(|t| parse_f32(&t))),
            Storage::Double => collect!(Double, |v: &ast::Value<'_>| float_of(v).and_then(|t| parse_f64(&t))),
            Storage::Half => collect!(Half, |v: &ast::Value<'_>| int_of(v).and_then(|i| i32::try_from(i).ok())),
            Storage::Int => collect!(Int, |v: &ast::Value<'_>| int_of(v).and_then(|i| i32::try_from(i).ok())),
            Storage::Int64 => collect!(Int64, int_of),
            Storage::Uint32 => collect!(Uint32, |v: &ast::Value<'_>| int_of(v).and_then(|i| u32::try_from(i).ok())),
            Storage::Uint64 => collect!(Uint64, |v: &ast::Value<'_>| int_of(v).and_then(|i| u64::try_from(i).ok())),
            Storage::Bool => collect!(Bool, |v: &ast::Value<'_>| match v {
                ast::Value::Bool(b, _) => Some(*b),
                _ => None,
            }),
            Storage::Str => collect!(Str, |v: &ast::Value<'_>| match v {
                ast::Value::Str(b, _) => Some(b.to_vec()),
                _ => None,
            }),
            Storage::Opaque => {
                if values.is_empty() {
                    TensorData::Content(Vec::new())
                } else {
                    self.invalid(format!("{dtype} tensors are written as `bytes \"...\"`"), values[0].span());
                    return None;
                }
            }
        })
    }
}

fn pending_operand(r: ast::InputRef<'_>) -> PendingOperand {
    PendingOperand {
        name: r.name.text.as_ref().into(),
        output: if r.control { None } else { Some(r.output.unwrap_or(0)) },
        span: r.span,
    }
}

fn int_of(v: &ast::Value<'_>) -> Option<i64> {
    match v {
        ast::Value::Int(i, _) => Some(*i),
        _ => None,
    }
}

/// The text of a numeric literal usable as a float.
fn float_of(v: &ast::Value<'_>) -> Option<String> {
    match v {
        ast::Value::Float(t, _) => Some(t.to_string()),
        ast::Value::Int(i, _) => Some(i.to_string()),
        ast::Value::Ident(t @ ("inf" | "nan"), _) => Some(t.to_string()),
        _ => None,
    }
}

/// Parses a float literal straight to `f32` (no double rounding).
pub fn parse_f32(text: &str) -> Option<f32> {
    text.parse::<f32>().ok()
}

/// Parses a float literal to `f64`.
pub fn parse_f64(text: &str) -> Option<f64> {
    text.parse::<f64>().ok()
}

/// The declared name closest to `name`, for "did you mean" help.
fn closest_name(graph: &Graph, name: &str) -> Option<String> {
    // A full scan is linear; it only runs for broken input.
    if graph.node_count() > 200_000 {
        return None;
    }
    super::suggest::closest(name, graph.node_ids().map(|id| &*graph.node(id).name)).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::super::{parse_module, IrError};

    fn attrs_of<'m>(m: &'m super::Module, name: &str) -> &'m super::AttrMap {
        let g = &m.graphs[0];
        &g.node(g.find(name).expect("the node exists")).attrs
    }

    #[test]
    fn ops_written_with_equal_attributes_share_one_map() {
        let src = b"graph @g {\n  %a = Placeholder() {dtype = f32, shape = shape[2]}\n  %b = Placeholder() {dtype = f32, shape = shape[2]}\n  %c = Relu(%a) {T = f32}\n  %d = Relu(%b) {T = f32}\n  %e = Neg(%a) {T = f32}\n  %f = Relu(%c) {T = f64}\n  %v = VarHandleOp() {dtype = f32, shape = shape[2], shared_name = \"v\"}\n  %w = VarHandleOp() {dtype = f32, shape = shape[2], shared_name = \"v\"}\n}\n";
        let (m, errors) = parse_module(src).expect("parses");
        let relevant: Vec<_> = errors.iter().filter(|e| matches!(e, IrError::AttrType { .. })).collect();
        assert!(relevant.is_empty(), "{relevant:?}");
        assert!(attrs_of(&m, "a").shares_storage(attrs_of(&m, "b")));
        assert!(attrs_of(&m, "c").shares_storage(attrs_of(&m, "d")));
        // Another op type or another value: a map of its own, with its own values.
        assert!(!attrs_of(&m, "c").shares_storage(attrs_of(&m, "e")));
        assert_eq!(attrs_of(&m, "c"), attrs_of(&m, "e"));
        assert!(!attrs_of(&m, "c").shares_storage(attrs_of(&m, "f")));
        assert_eq!(attrs_of(&m, "f").get("T"), Some(&super::AttrValue::Type(super::DType::F64)));
        // Maps with strings are built per node.
        assert!(!attrs_of(&m, "v").shares_storage(attrs_of(&m, "w")));
        assert_eq!(attrs_of(&m, "v"), attrs_of(&m, "w"));
    }

    #[test]
    fn a_shared_map_still_reports_each_nodes_wrong_attribute() {
        // `transpose_a` is a bool: each node's mistake is reported at its own span.
        let src = b"graph @g {\n  %a = Placeholder() {dtype = f32, shape = shape[2, 2]}\n  %b = MatMul(%a, %a) {T = f32, transpose_a = 1}\n  %c = MatMul(%a, %a) {T = f32, transpose_a = 1}\n}\n";
        let (_, errors) = parse_module(src).expect("parses");
        let spans: Vec<_> = errors
            .iter()
            .filter_map(|e| match e {
                IrError::AttrType { key, span, .. } if key == "transpose_a" => Some(span.start),
                _ => None,
            })
            .collect();
        assert_eq!(spans.len(), 2, "{errors:?}");
        assert_ne!(spans[0], spans[1]);
    }
}
