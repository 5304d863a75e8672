//! Emission of gradient ops for one gradients call: names, colocation, cluster attributes.

use std::sync::Arc;

use petgraph::visit::EdgeRef;
use petgraph::Direction;
use rustc_hash::FxHashMap;

use super::colocation::{ColocationContext, OUTSIDE_COMPILATION_ATTR};
use super::TPU_REPLICATE_ATTR;
use crate::ir::types::{TensorData, TensorLit};
use crate::ir::{AttrMap, AttrValue, DType, EdgeKind, Graph, Node, NodeId, NodeKind, RegionId};
use crate::passes::error::PassError;
use crate::syntax::Span;

/// Output `output` of node `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tensor {
    /// The node.
    pub node: NodeId,
    /// Its output index.
    pub output: u32,
}

impl Tensor {
    /// Output 0 of `node`.
    pub fn of(node: NodeId) -> Tensor {
        Tensor { node, output: 0 }
    }
}

/// An attribute of an emitted op, besides the placement ones the emitter adds.
pub type Attr = (&'static str, AttrValue);

/// The `T` attribute of an emitted op, when its element type is known.
pub type TAttr = Option<Attr>;

/// Emits the ops of one gradients call.
pub struct Emitter<'g> {
    pub graph: &'g mut Graph,
    ctx: ColocationContext,
    uid: String,
    scope: String,
    /// The scope new op names go under: the call's, or `<scope>/<op>_grad`.
    op_scope: String,
    region: Option<RegionId>,
    tpu_replicate: Option<AttrValue>,
    span: Span,
    pub errors: Vec<PassError>,
    /// Element types that took more than one producer to infer (one is cheaper to read again).
    dtypes: FxHashMap<Tensor, Option<DType>>,
    /// For each name base found taken, the first `_<i>` suffix not known to be taken. Nodes are
    /// only added while a call is expanded, so a search for a free `base_<i>` can resume there;
    /// without this, the thousandth `AddN` of a call would probe a thousand taken names. Bases
    /// under an op scope go to `op_suffixes`, which is emptied with each op scope: forgetting an
    /// entry only makes a search start again at `_1`, and keeps the map small.
    suffixes: FxHashMap<String, u32>,
    op_suffixes: FxHashMap<String, u32>,
    /// True inside [`Emitter::in_op_scope`].
    in_op: bool,
    /// Op types and attribute keys, allocated once per call and shared by the emitted ops; keyed
    /// by the address and length of the static text, which is cheaper to hash than the text.
    strings: FxHashMap<(usize, usize), Arc<str>>,
    /// The keys of the placement attributes, shared by the emitted ops.
    class_key: Arc<str>,
    tpu_replicate_key: Arc<str>,
    outside_compilation_key: Arc<str>,
    /// The `_class` of ops colocated with the op it names, built once per colocation.
    class: Option<(NodeId, AttrValue)>,
    /// Buffers reused for every emitted op.
    name_buf: String,
    scope_buf: String,
    edge_buf: Vec<(NodeId, u32)>,
}

impl<'g> Emitter<'g> {
    pub fn new(graph: &'g mut Graph, ctx: ColocationContext, call: &Node, scope: String, uid: String) -> Emitter<'g> {
        Emitter {
            graph,
            ctx,
            uid,
            op_scope: scope.clone(),
            scope,
            region: call.region,
            tpu_replicate: call.attrs.get(TPU_REPLICATE_ATTR).cloned(),
            span: call.span,
            errors: Vec::new(),
            dtypes: FxHashMap::default(),
            suffixes: FxHashMap::default(),
            op_suffixes: FxHashMap::default(),
            in_op: false,
            class_key: Arc::from("_class"),
            tpu_replicate_key: Arc::from(TPU_REPLICATE_ATTR),
            outside_compilation_key: Arc::from(OUTSIDE_COMPILATION_ATTR),
            strings: FxHashMap::default(),
            class: None,
            name_buf: String::new(),
            scope_buf: String::new(),
            edge_buf: Vec::new(),
        }
    }

    /// Enters the gradient colocation with `op`, recording any error.
    pub fn enter_colocation(&mut self, op: NodeId) {
        if let Err(e) = self.ctx.enter_gradient_colocation(self.graph, op, Some(&self.uid)) {
            self.errors.push(e);
        }
    }

    /// Leaves the gradient colocation with `op`, recording any error.
    pub fn exit_colocation(&mut self, op: NodeId) {
        if let Err(e) = self.ctx.exit_gradient_colocation(self.graph, op) {
            self.errors.push(e);
        }
    }

    /// Runs `f` with new names under `<scope>/<op>_grad`.
    pub fn in_op_scope<R>(&mut self, op: NodeId, f: impl FnOnce(&mut Self) -> R) -> R {
        let mut scope = std::mem::take(&mut self.scope_buf);
        scope.clear();
        scope.push_str(&self.scope);
        scope.push('/');
        scope.push_str(&self.graph.node(op).name);
        scope.push_str("_grad");
        let outer = std::mem::replace(&mut self.op_scope, scope);
        let outer_in_op = std::mem::replace(&mut self.in_op, true);
        self.op_suffixes.clear();
        let result = f(self);
        self.in_op = outer_in_op;
        self.scope_buf = std::mem::replace(&mut self.op_scope, outer);
        result
    }

    /// Checks that every colocation was left and returns the problems found.
    pub fn finish(mut self) -> Vec<PassError> {
        if self.ctx.depth() != 0 {
            self.errors.push(PassError::BadlyNestedColocation {
                message: format!("{} colocation(s) still open at the end of the call", self.ctx.depth()),
                span: self.span,
            });
        }
        self.errors
    }

    /// A free node name `<op scope>/<base>` (or with `_1`, `_2`, ...).
    pub fn fresh_name(&mut self, base: &str) -> String {
        let mut name = String::with_capacity(self.op_scope.len() + 1 + base.len());
        name.push_str(&self.op_scope);
        name.push('/');
        name.push_str(base);
        self.unique_name(name)
    }

    /// The graph's unique-name rule ([`Graph::unique_name`]): `base` if free, else the first free
    /// `base_1`, `base_2`, ..., resuming the search where the last one for `base` ended.
    pub fn unique_name(&mut self, base: String) -> String {
        if self.graph.find(&base).is_none() {
            return base;
        }
        self.unique_name_of_taken(base)
    }

    /// [`Emitter::unique_name`] of a `base` known to be taken.
    fn unique_name_of_taken(&mut self, base: String) -> String {
        let suffixes = if self.in_op { &mut self.op_suffixes } else { &mut self.suffixes };
        let mut i = suffixes.get(&base).copied().unwrap_or(1);
        let mut candidate = String::with_capacity(base.len() + 8);
        loop {
            candidate.clear();
            candidate.push_str(&base);
            candidate.push('_');
            push_decimal(&mut candidate, i);
            if self.graph.find(&candidate).is_none() {
                break;
            }
            i += 1;
        }
        // `candidate` is free now but may be taken by the caller, so the next search starts at it.
        suffixes.insert(base, i);
        candidate
    }

    /// Emits op `op_type` named `<op scope>/<base>` (made unique).
    pub fn emit(
        &mut self,
        op_type: &'static str,
        base: &str,
        inputs: &[Tensor],
        attrs: impl IntoIterator<Item = Attr>,
    ) -> Tensor {
        let mut buf = std::mem::take(&mut self.name_buf);
        buf.clear();
        buf.push_str(&self.op_scope);
        buf.push('/');
        buf.push_str(base);
        let node = self.make_node(Arc::from(buf.as_str()), op_type, attrs);
        let id = match self.graph.try_add_node(node) {
            Ok(id) => Ok(id),
            Err((mut node, _)) => {
                node.name = Arc::from(self.unique_name_of_taken(buf.clone()));
                self.add_free(node)
            }
        };
        self.name_buf = buf;
        self.connect(id, inputs)
    }

    /// Emits op `op_type` named `name` (made unique if taken).
    pub fn emit_named(
        &mut self,
        name: String,
        op_type: &'static str,
        inputs: &[Tensor],
        attrs: impl IntoIterator<Item = Attr>,
    ) -> Tensor {
        let node = self.make_node(Arc::from(name), op_type, attrs);
        let id = match self.graph.try_add_node(node) {
            Ok(id) => Ok(id),
            Err((mut node, _)) => {
                node.name = Arc::from(self.unique_name_of_taken(node.name.to_string()));
                self.add_free(node)
            }
        };
        self.connect(id, inputs)
    }

    /// Op `op_type` named `name` with `attrs` and the placement of the current colocation.
    fn make_node(&mut self, name: Arc<str>, op_type: &'static str, attrs: impl IntoIterator<Item = Attr>) -> Node {
        let mut node = Node::op(name, self.intern(op_type)).with_span(self.span);
        node.region = self.region;
        let attrs = attrs.into_iter();
        let colocated = self.ctx.colocated_with();
        let placement = usize::from(colocated.is_some())
            + usize::from(self.tpu_replicate.is_some())
            + usize::from(self.ctx.cluster().is_some());
        let mut entries: Vec<(Arc<str>, AttrValue)> = Vec::with_capacity(attrs.size_hint().0 + placement);
        for (key, value) in attrs {
            entries.push((self.intern(key), value));
        }
        if let Some(op) = colocated {
            let class = match &self.class {
                Some((cached, class)) if *cached == op => class.clone(),
                _ => {
                    let class = colocation_class(self.graph, op);
                    self.class = Some((op, class.clone()));
                    class
                }
            };
            entries.push((self.class_key.clone(), class));
        }
        if let Some(r) = &self.tpu_replicate {
            entries.push((self.tpu_replicate_key.clone(), r.clone()));
        }
        if let Some(c) = self.ctx.cluster() {
            entries.push((self.outside_compilation_key.clone(), AttrValue::str(c)));
        }
        node.attrs = AttrMap::from_entries(entries);
        node
    }

    /// Adds `node`, whose name was made unique; if it was taken all the same, records an internal
    /// error and returns the node holding the name.
    fn add_free(&mut self, node: Node) -> Result<NodeId, NodeId> {
        self.graph.try_add_node(node).map_err(|(_, other)| {
            let name = self.graph.node(other).name.to_string();
            self.errors.push(PassError::Internal { message: format!("`%{name}` was taken"), span: self.span });
            other
        })
    }

    /// Connects `inputs` to the data inputs of the added node `added`; output 0 of it. A node not
    /// added (`Err`) gets no inputs.
    fn connect(&mut self, added: Result<NodeId, NodeId>, inputs: &[Tensor]) -> Tensor {
        let id = match added {
            Ok(id) => id,
            Err(other) => return Tensor::of(other),
        };
        let mut edges = std::mem::take(&mut self.edge_buf);
        edges.clear();
        edges.extend(inputs.iter().map(|t| (t.node, t.output)));
        self.graph.add_data_inputs(id, &edges, Span::DETACHED);
        self.edge_buf = edges;
        Tensor::of(id)
    }

    /// The shared allocation of `s` for this call.
    fn intern(&mut self, s: &'static str) -> Arc<str> {
        self.strings.entry((s.as_ptr() as usize, s.len())).or_insert_with(|| Arc::from(s)).clone()
    }

    /// Sums `list` with an `AddN` at the call's scope, colocated with the first summand's producer.
    pub fn aggregate(&mut self, list: &[Tensor]) -> Option<Tensor> {
        match list {
            [] => None,
            [one] => Some(*one),
            [first, ..] => {
                let producer = first.node;
                self.enter_colocation(producer);
                let dtype = self.dtype_of(*first);
                let name = self.unique_name(format!("{}/AddN", self.scope));
                let attrs = [("N", AttrValue::Int(list.len() as i64))].into_iter().chain(self.t_attr(dtype));
                let sum = self.emit_named(name, "AddN", list, attrs);
                self.exit_colocation(producer);
                Some(sum)
            }
        }
    }

    /// The gradient of `op`'s output `k` from `out_grads`, or zeros shaped like
    /// that output when it is unconnected.
    pub fn grad_or_zeros(&mut self, op: NodeId, k: u32, out_grads: &[Option<Tensor>]) -> Tensor {
        match out_grads.get(k as usize).copied().flatten() {
            Some(g) => g,
            None => self.zeros_like_for_unconnected(Tensor { node: op, output: k }),
        }
    }

    /// `ZerosLike(x)` at the call's scope, colocated with x's op: the result for an unconnected x.
    pub fn zeros_like_for_unconnected(&mut self, x: Tensor) -> Tensor {
        self.enter_colocation(x.node);
        let dtype = self.dtype_of(x);
        let name = self.unique_name(format!("{}/zeros_like", self.scope));
        let attrs = self.t_attr(dtype);
        let zeros = self.emit_named(name, "ZerosLike", &[x], attrs);
        self.exit_colocation(x.node);
        zeros
    }

    /// `{T = dtype}` when the dtype is known.
    pub fn t_attr(&self, dtype: Option<DType>) -> TAttr {
        dtype.map(|d| ("T", AttrValue::Type(d)))
    }

    /// The element type of `t`, from the attributes of its producer or, failing that, of the
    /// producers of its first input, as far back as 64 ops.
    pub fn dtype_of(&mut self, t: Tensor) -> Option<DType> {
        let next = match dtype_step(self.graph, t) {
            DtypeStep::Found(found) => return found,
            DtypeStep::Next(next) => next,
        };
        if let Some(d) = self.dtypes.get(&t) {
            return *d;
        }
        let found = infer_dtype(self.graph, next, MAX_DTYPE_STEPS - 1);
        self.dtypes.insert(t, found);
        found
    }

    /// `Shape(x)` with `out_type = i32`.
    pub fn shape(&mut self, base: &str, x: Tensor) -> Tensor {
        let dtype = self.dtype_of(x);
        let attrs = [("out_type", AttrValue::Type(DType::I32))].into_iter().chain(self.t_attr(dtype));
        self.emit("Shape", base, &[x], attrs)
    }

    /// A scalar float constant of `dtype` (f32 if unknown) named exactly `name` (made unique).
    pub fn scalar_const_named(&mut self, name: &str, dtype: Option<DType>, value: f64) -> Tensor {
        let dtype = dtype.unwrap_or(DType::F32);
        let data = match dtype {
            DType::F64 => TensorData::Double(vec![value]),
            DType::I32 => TensorData::Int(vec![value as i32]),
            DType::I64 => TensorData::Int64(vec![value as i64]),
            // A complex scalar is one (real, imaginary) pair.
            DType::C64 => TensorData::Float(vec![value as f32, 0.0]),
            DType::C128 => TensorData::Double(vec![value, 0.0]),
            _ => TensorData::Float(vec![value as f32]),
        };
        let dtype = if matches!(dtype, DType::F64 | DType::I32 | DType::I64 | DType::C64 | DType::C128) {
            dtype
        } else {
            DType::F32
        };
        let lit = TensorLit { dtype, shape: Vec::new(), data };
        self.const_named(name.to_string(), lit)
    }

    /// An i32 constant named exactly `name` (made unique).
    pub fn int_const_named(&mut self, name: String, values: &[i32], scalar: bool) -> Tensor {
        let shape = if scalar { Vec::new() } else { vec![values.len() as i64] };
        let lit = TensorLit { dtype: DType::I32, shape, data: TensorData::Int(values.to_vec()) };
        self.const_named(name, lit)
    }

    fn const_named(&mut self, name: String, lit: TensorLit) -> Tensor {
        let name = self.unique_name(name);
        let attrs = [("dtype", AttrValue::Type(lit.dtype)), ("value", AttrValue::Tensor(Arc::new(lit)))];
        self.emit_named(name, "Const", &[], attrs)
    }
}

/// Appends the decimal digits of `n` to `out` (cheaper than the formatting machinery).
fn push_decimal(out: &mut String, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

/// The colocation class of gradient ops colocated with `op`: `op`'s own `_class` if it has one
/// (it is itself colocated), else `["loc:@op"]`.
fn colocation_class(graph: &Graph, op: NodeId) -> AttrValue {
    let node = graph.node(op);
    match super::op_attr(&node.attrs, "_class") {
        Some(class @ AttrValue::List(items)) if !items.is_empty() => class.clone(),
        _ => AttrValue::List(vec![AttrValue::str(format!("loc:@{}", node.name))]),
    }
}

/// How many producers [`Emitter::dtype_of`] looks at.
const MAX_DTYPE_STEPS: usize = 64;

/// One step of the element type inference: the type of `t` or the tensor to look at next.
enum DtypeStep {
    Found(Option<DType>),
    Next(Tensor),
}

fn dtype_step(graph: &Graph, t: Tensor) -> DtypeStep {
    if !graph.contains(t.node) {
        return DtypeStep::Found(None);
    }
    let node = graph.node(t.node);
    let next = |slot: u32| data_input(graph, t.node, slot).map_or(DtypeStep::Found(None), DtypeStep::Next);
    match node.kind {
        NodeKind::RegionInput { .. } => return next(0),
        NodeKind::Gradients { num_ys, .. } => return next(num_ys + t.output),
        NodeKind::Op => {}
    }
    let attrs = &node.attrs;
    let ty = |key: &str| super::op_attr(attrs, key).and_then(AttrValue::as_type);
    let found = match &*node.op {
        "Shape" | "Size" | "Rank" => Some(ty("out_type").unwrap_or(DType::I32)),
        "VarHandleOp" => Some(DType::Resource),
        "Cast" => ty("DstT"),
        "Complex" | "Real" | "Imag" | "ComplexAbs" | "Angle" => ty("Tout"),
        "FFT" | "FFT2D" | "FFT3D" | "IFFT" | "IFFT2D" | "IFFT3D" | "RFFT" | "RFFT2D" | "RFFT3D" => ty("Tcomplex"),
        "IRFFT" | "IRFFT2D" | "IRFFT3D" => ty("Treal"),
        "Range" => ty("Tidx").or(Some(DType::I32)),
        "BroadcastGradientArgs" | "InvertPermutation" => ty("T").or(Some(DType::I32)),
        "Greater" | "GreaterEqual" | "Less" | "LessEqual" | "Equal" | "NotEqual" => Some(DType::Bool),
        // TensorList ops: a list (a variant), or its elements, lengths or shape.
        "EmptyTensorList"
        | "TensorListFromTensor"
        | "TensorListPushBack"
        | "TensorListReserve"
        | "TensorListResize"
        | "TensorListScatterIntoExistingList"
        | "TensorListSetItem"
        | "TensorListSplit" => Some(DType::Variant),
        "TensorListPopBack" if t.output == 0 => Some(DType::Variant),
        "TensorListConcatV2" if t.output == 1 => Some(DType::I64),
        "TensorListLength" => Some(DType::I32),
        "TensorListElementShape" => ty("shape_type").or(Some(DType::I32)),
        op if op.starts_with("TensorList") => ty("element_dtype"),
        _ => ty("T").or_else(|| ty("dtype")),
    };
    match found {
        Some(_) => DtypeStep::Found(found),
        None => next(0),
    }
}

/// The element type of `t`, looking at `steps` producers at most.
fn infer_dtype(graph: &Graph, t: Tensor, steps: usize) -> Option<DType> {
    let mut cur = t;
    for _ in 0..steps {
        match dtype_step(graph, cur) {
            DtypeStep::Found(found) => return found,
            DtypeStep::Next(next) => cur = next,
        }
    }
    None
}

/// The tensor feeding data input `slot` of `node`.
fn data_input(graph: &Graph, node: NodeId, slot: u32) -> Option<Tensor> {
    graph.petgraph().edges_directed(node.0, Direction::Incoming).find_map(|e| match e.weight().kind {
        EdgeKind::Data { output, slot: s } if s == slot => Some(Tensor { node: NodeId(e.source()), output }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::push_decimal;

    #[test]
    fn decimal_digits_match_the_formatter() {
        for n in [0, 1, 9, 10, 11, 99, 100, 41_663, u32::MAX] {
            let mut out = String::from("AddN_");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("AddN_{n}"));
        }
    }
}
