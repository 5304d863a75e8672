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

use std::collections::HashMap;
use std::sync::Arc;

use super::attrs::AttrMap;
use super::error::IrError;
use super::graph::{Graph, Input, Module, Node, NodeId, NodeKind, Region, RegionId, RegionKind, ValueRef};
use super::ops;
use super::types::{AttrKind, AttrValue, DType, FuncRef, Shape, Storage, TensorData, TensorLit};
use crate::syntax::ast;
use crate::syntax::Span;

/// Builds the IR of a parsed module. Consumes the AST to keep memory low.
pub fn build(module: ast::Module<'_>) -> (Module, Vec<IrError>) {
    let mut errors = Vec::new();
    let mut graphs: Vec<Graph> = Vec::with_capacity(module.graphs.len());
    let mut seen: HashMap<String, Span> = HashMap::new();
    let header: Vec<String> = module.header.iter().map(|s| s.to_string()).collect();
    for g in module.graphs {
        if seen.insert(g.name.to_string(), g.name_span).is_some() {
            errors.push(IrError::DuplicateGraph { name: g.name.to_string(), span: g.name_span });
        }
        graphs.push(build_graph(g, &mut errors));
    }
    (Module { header, graphs }, errors)
}

struct PendingOperand {
    name: Box<str>,
    output: Option<u32>,
    span: Span,
}

struct Builder<'e> {
    graph: Graph,
    errors: &'e mut Vec<IrError>,
    /// Nodes whose operands name nodes not declared yet.
    pending: Vec<(NodeId, Vec<PendingOperand>)>,
    /// Region outputs waiting for resolution.
    pending_returns: Vec<(RegionId, Vec<PendingOperand>)>,
    op_types: HashMap<Box<str>, Arc<str>>,
    devices: HashMap<Box<str>, Arc<str>>,
}

fn build_graph(g: ast::Graph<'_>, errors: &mut Vec<IrError>) -> Graph {
    let mut graph = Graph::new(g.name.to_string());
    graph.span = g.span;
    let mut b = Builder {
        graph,
        errors,
        pending: Vec::new(),
        pending_returns: Vec::new(),
        op_types: HashMap::new(),
        devices: HashMap::new(),
    };
    b.graph.attrs = b.attrs(None, g.attrs);
    let estimate = g.body.len();
    b.graph.reserve(estimate, estimate * 2);
    b.stmts(g.body, None);
    b.resolve_pending();
    b.graph.shrink_to_fit();
    b.graph
}

impl Builder<'_> {
    fn intern(map: &mut HashMap<Box<str>, Arc<str>>, s: &str) -> Arc<str> {
        if let Some(a) = map.get(s) {
            return a.clone();
        }
        let a: Arc<str> = s.into();
        map.insert(s.into(), a.clone());
        a
    }

    fn stmts(&mut self, stmts: Vec<ast::Stmt<'_>>, region: Option<RegionId>) {
        for stmt in stmts {
            match stmt {
                ast::Stmt::Op(op) => self.op(op, region),
                ast::Stmt::Replicate(r) => self.replicate(r, region),
                ast::Stmt::OutsideCompilation(oc) => {
                    let attrs = self.attrs(None, oc.attrs);
                    let id = self.graph.add_region(Region {
                        kind: RegionKind::OutsideCompilation,
                        attrs,
                        parent: region,
                        seq: 0,
                        span: oc.span,
                        keyword_span: oc.keyword_span,
                        return_span: None,
                    });
                    self.stmts(oc.body, Some(id));
                }
                ast::Stmt::Gradients(g) => self.gradients(g, region),
                ast::Stmt::Return(ret) => {
                    // The grammar only allows `return` last in a replicate body.
                    let Some(r) = region else {
                        self.errors.push(IrError::MalformedRegion {
                            reason: "`return` outside a replicate region".into(),
                            span: ret.span,
                        });
                        continue;
                    };
                    self.graph.region_mut(r).return_span = Some(ret.span);
                    let operands = ret.values.into_iter().map(pending_operand).collect();
                    self.pending_returns.push((r, operands));
                }
            }
        }
    }

    fn declare(&mut self, node: Node, operands: Vec<PendingOperand>) -> Option<NodeId> {
        let span = node.span;
        let name = node.name.clone();
        match self.graph.add_node(node) {
            Ok(id) => {
                self.wire(id, operands);
                Some(id)
            }
            Err(taken) => {
                let first = self.graph.node(taken.0).span;
                self.errors.push(IrError::DuplicateName { name: name.to_string(), span, first });
                None
            }
        }
    }

    /// Wires operands now if all are declared, else defers the whole list.
    fn wire(&mut self, id: NodeId, operands: Vec<PendingOperand>) {
        if operands.is_empty() {
            return;
        }
        if operands.iter().all(|o| self.graph.find(&o.name).is_some()) {
            for o in operands {
                let src = self.graph.find(&o.name).expect("checked above");
                self.graph.add_input(id, Input { src, output: o.output, span: o.span });
            }
        } else {
            self.pending.push((id, operands));
        }
    }

    fn resolve_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for (id, operands) in pending {
            for o in operands {
                match self.graph.find(&o.name) {
                    Some(src) => self.graph.add_input(id, Input { src, output: o.output, span: o.span }),
                    None => self.unknown(&o),
                }
            }
        }
        let returns = std::mem::take(&mut self.pending_returns);
        for (region, operands) in returns {
            let mut values = Vec::with_capacity(operands.len());
            for o in operands {
                match self.graph.find(&o.name) {
                    Some(node) => values.push(ValueRef { node, output: o.output, span: o.span }),
                    None => self.unknown(&o),
                }
            }
            if let RegionKind::Replicate { outputs, .. } = &mut self.graph.region_mut(region).kind {
                *outputs = values;
            }
        }
    }

    fn unknown(&mut self, o: &PendingOperand) {
        let help = match closest_name(&self.graph, &o.name) {
            Some(near) => format!("did you mean `%{near}`?"),
            None => "declare the node with `%name = OpType(...)`".to_string(),
        };
        self.errors.push(IrError::UnknownInput { name: o.name.to_string(), help, span: o.span });
    }

    fn op(&mut self, op: ast::OpStmt<'_>, region: Option<RegionId>) {
        let op_type = Self::intern(&mut self.op_types, op.op_type);
        let device = op.device.map(|(d, _)| Self::intern(&mut self.devices, &d));
        let attrs = self.attrs(Some(op.op_type), op.attrs);
        let node = Node {
            name: op.name.text.as_ref().into(),
            kind: NodeKind::Op,
            op: op_type,
            device,
            attrs,
            region,
            seq: 0,
            span: op.span,
        };
        let operands = op.inputs.into_iter().map(pending_operand).collect();
        self.declare(node, operands);
    }

    fn replicate(&mut self, r: ast::Replicate<'_>, parent: Option<RegionId>) {
        let attrs = self.attrs(None, r.attrs);
        let id = self.graph.add_region(Region {
            kind: RegionKind::Replicate { inputs: Vec::new(), outputs: Vec::new() },
            attrs,
            parent,
            seq: 0,
            span: r.span,
            keyword_span: r.keyword_span,
            return_span: None,
        });
        let mut inputs = Vec::with_capacity(r.inputs.len());
        for (index, input) in r.inputs.into_iter().enumerate() {
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
            let operands = input.operands.into_iter().map(pending_operand).collect();
            if let Some(node) = self.declare(node, operands) {
                inputs.push(node);
            }
        }
        if let RegionKind::Replicate { inputs: slot, .. } = &mut self.graph.region_mut(id).kind {
            *slot = inputs;
        }
        self.stmts(r.body, Some(id));
    }

    fn gradients(&mut self, g: ast::Gradients<'_>, region: Option<RegionId>) {
        let num_ys = g.ys.len() as u32;
        let num_xs = g.xs.len() as u32;
        let has_grad_ys = g.grad_ys.is_some();
        let mut operands: Vec<PendingOperand> = Vec::new();
        operands.extend(g.ys.into_iter().map(pending_operand));
        operands.extend(g.xs.into_iter().map(pending_operand));
        operands.extend(g.grad_ys.into_iter().flatten().map(pending_operand));
        let node = Node {
            name: g.name.text.as_ref().into(),
            kind: NodeKind::Gradients { num_ys, num_xs, has_grad_ys },
            op: "gradients".into(),
            device: None,
            attrs: AttrMap::new(),
            region,
            seq: 0,
            span: g.span,
        };
        self.declare(node, operands);
    }

    fn attrs(&mut self, op: Option<&str>, attrs: Vec<ast::Attr<'_>>) -> AttrMap {
        let mut map = AttrMap::new();
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
            map.insert(attr.key.into_owned(), value);
        }
        map.shrink_to_fit();
        map
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
            ast::Value::Shape(dims, _) => AttrValue::Shape(Shape { dims }),
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
                AttrValue::Tensor(Box::new(TensorLit { dtype, shape, data }))
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
    let mut best: Option<(usize, String)> = None;
    if graph.node_count() > 200_000 {
        return None;
    }
    for id in graph.node_ids() {
        let candidate = &graph.node(id).name;
        if candidate.len().abs_diff(name.len()) > 3 {
            continue;
        }
        let d = edit_distance(name, candidate);
        if d <= (name.chars().count() / 3).clamp(1, 2)
            && best.as_ref().is_none_or(|(bd, bn)| d < *bd || (d == *bd && **candidate < **bn))
        {
            best = Some((d, candidate.to_string()));
        }
    }
    best.map(|b| b.1)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
