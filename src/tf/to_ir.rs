//! GraphDef → IR: one graph `@main`, one op node per `NodeDef`, in order.
//!
//! Every NodeDef field is kept: name, op, device (`""` is no device), the
//! inputs as data edges (`a`, `a:k`) and control edges (`^a`), every
//! attribute, and the two experimental fields as encoded bytes under the
//! reserved attribute keys [`DEBUG_INFO_ATTR`] and [`FULL_TYPE_ATTR`].
//! The GraphDef's own fields become graph attributes (see [`graph_attr`]).
//! Each function of the library also becomes a graph of the module, after
//! `@main` ([`super::functions`]); the library itself stays a graph
//! attribute, which the export writes back unchanged.
//!
//! Attribute values map one to one onto [`ir::AttrValue`], with these
//! choices: a list concatenates its `s, i, f, b, type, shape, tensor, func`
//! items in that order (the export regroups them, so a list round-trips);
//! shape dimension names, a tensor's `version_number` and its
//! `resource_handle_val`, `variant_val` and `float8_val` are dropped with a
//! warning; a tensor's values go to the [`TensorData`] variant of the field
//! that holds them, with `scomplex_val` as `Float` and `dcomplex_val` as
//! `Double` under their complex dtype; a tensor without `tensor_shape`
//! imports as a scalar and exports with an empty shape. An input `a:0`
//! imports as output 0 and exports as `a`, TensorFlow's canonical spelling.
//!
//! Edges are added after all nodes exist, in node order, so GraphDefs in
//! any order import; an input whose producer comes earlier is resolved as
//! its node is added, while its producer is still in cache. A name lookup
//! per input keeps the whole import linear.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use prost::Message;

use super::error::ImportError;
use super::pbtxt::NodeSpans;
use super::proto::{self, GraphDef, NodeDef, TensorProto, TensorShapeProto, Value};
use super::stream::{Attrs, SplitNode};
use crate::ir::types::FuncRef;
use crate::ir::{self, AttrMap, DType, Graph, Module, Node, NodeId, Shape, TensorData, TensorLit};
use crate::syntax::Span;

/// Node attribute holding the encoded `NodeDef.experimental_debug_info`.
pub const DEBUG_INFO_ATTR: &str = ".experimental_debug_info";
/// Node attribute holding the encoded `NodeDef.experimental_type`.
pub const FULL_TYPE_ATTR: &str = ".experimental_type";

/// Graph attribute keys for the GraphDef's own fields.
pub mod graph_attr {
    /// `versions.producer` (present exactly when `versions` is).
    pub const PRODUCER: &str = "producer";
    /// `versions.min_consumer`, when not 0.
    pub const MIN_CONSUMER: &str = "min_consumer";
    /// `versions.bad_consumers`, when not empty: a list of ints.
    pub const BAD_CONSUMERS: &str = "bad_consumers";
    /// The deprecated `version`, when not 0.
    pub const VERSION: &str = "version";
    /// The `library`: an encoded `FunctionDefLibrary` (bytes). Decode it
    /// with [`crate::tf::library`].
    pub const LIBRARY: &str = "library";
    /// The `debug_info`: an encoded `GraphDebugInfo` (bytes).
    pub const DEBUG_INFO: &str = "debug_info";
}

/// The name of the imported IR graph.
pub const GRAPH_NAME: &str = "main";

/// Nodes per batch that the binary importer's decoding thread hands over.
const DECODE_BATCH: usize = 1024;

/// How many distinct encoded attribute maps [`convert`] remembers before it
/// starts over; bounds the table when most maps are distinct (the `value`
/// of every weight's `Const`).
const SHARED_ATTRS_LIMIT: usize = 1 << 16;

/// Converts a decoded GraphDef into a module of one graph. `spans`, when
/// given, has one entry per node (from the text parser).
pub fn graphdef_to_module(graph_def: GraphDef, spans: Option<Vec<NodeSpans>>) -> (Module, Vec<ImportError>) {
    graphdef_to_module_observed(graph_def, spans, &crate::progress::NoProgress)
}

/// [`graphdef_to_module`], reporting each node added and each node wired.
pub fn graphdef_to_module_observed(
    mut graph_def: GraphDef,
    spans: Option<Vec<NodeSpans>>,
    progress: &dyn crate::progress::Progress,
) -> (Module, Vec<ImportError>) {
    let nodes = std::mem::take(&mut graph_def.node);
    let input_count: usize = nodes.iter().map(|n| n.input.len()).sum();
    let count = nodes.len();
    let nodes = nodes.into_iter().map(|def| Ok(SplitNode::from(def)));
    let (module, errors) = convert(graph_def, nodes, (count, input_count), spans, progress)
        .unwrap_or_else(|e| (Module { header: Vec::new(), graphs: Vec::new() }, vec![e]));
    (module, errors)
}

/// Imports a binary GraphDef decoding one `NodeDef` at a time (see
/// [`super::stream`]): the decoded nodes never all exist at once.
pub fn pb_to_module_observed(
    bytes: &[u8],
    progress: &dyn crate::progress::Progress,
) -> Result<(Module, Vec<ImportError>), ImportError> {
    let split = super::stream::split(bytes)?;
    let sizes = (split.nodes.len(), split.input_count());
    fn decode<'a>(node: &&'a [u8]) -> Result<SplitNode<'a>, ImportError> {
        super::stream::decode_node_split(node)
    }
    if split.nodes.len() < 4 * DECODE_BATCH {
        return convert(split.header, split.nodes.iter().map(decode), sizes, None, progress);
    }
    // A second thread decodes batches of nodes while this one builds the
    // graph from the previous batches; a bounded channel keeps it at most
    // a few batches ahead. Dropping the receiver (an import error) stops it.
    let (send, receive) = crossbeam_channel::bounded::<Vec<Result<SplitNode<'_>, ImportError>>>(4);
    let nodes = &split.nodes;
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for batch in nodes.chunks(DECODE_BATCH) {
                if send.send(batch.iter().map(decode).collect()).is_err() {
                    break;
                }
            }
        });
        convert(split.header, receive.into_iter().flatten(), sizes, None, progress)
    })
}

/// Builds the module from the GraphDef's other fields (`header`) and its
/// nodes; `sizes` is (nodes, inputs) for reserving storage once. A node
/// that does not decode ends the import.
///
/// Nodes whose attributes come encoded ([`SplitNode::attrs`]) share one
/// [`AttrMap`] per distinct encoding: most ops of a model carry the same
/// few attributes (`T`, the cluster tag), so this saves a map per node and
/// its decoding. A map whose conversion reported anything is not shared,
/// so that each node reports its own.
fn convert<'a>(
    header: GraphDef,
    nodes: impl Iterator<Item = Result<SplitNode<'a>, ImportError>>,
    (node_count, input_count): (usize, usize),
    spans: Option<Vec<NodeSpans>>,
    progress: &dyn crate::progress::Progress,
) -> Result<(Module, Vec<ImportError>), ImportError> {
    use crate::progress::REPORT_EVERY;
    progress.phase("importing nodes", 2 * node_count as u64);
    let mut errors = Vec::new();
    let mut graph = Graph::new(GRAPH_NAME);
    graph.attrs = graph_attrs(&header);
    let library = header.library;
    graph.reserve(node_count, input_count);

    let mut spans = spans.map(Vec::into_iter);
    let mut interned: HashMap<String, Arc<str>> = HashMap::default();
    let mut pending = PendingInputs::with_capacity(node_count, input_count);
    let mut shared_attrs: HashMap<&[u8], AttrMap> = HashMap::default();
    let mut seen_entries = HashMap::default();
    for (n, node) in nodes.enumerate() {
        let SplitNode { name, op, device, inputs, attrs, debug_info, full_type } = node?;
        if n as u64 % REPORT_EVERY == REPORT_EVERY - 1 {
            progress.advance(REPORT_EVERY);
        }
        let node_spans = spans.as_mut().and_then(Iterator::next).unwrap_or_default();
        let mut attrs = match attrs {
            Attrs::Decoded(attr) => convert_attrs(&name, node_spans.node, attr, &mut interned, &mut errors),
            Attrs::Encoded(encoded) => match shared_attrs.get(encoded) {
                Some(shared) => shared.clone(),
                None => {
                    let reported = errors.len();
                    let mut seen = (&mut seen_entries, &mut interned, &mut errors);
                    let attrs = convert_encoded_attrs(&name, node_spans.node, encoded, &mut seen)?;
                    if errors.len() == reported {
                        if shared_attrs.len() >= SHARED_ATTRS_LIMIT {
                            shared_attrs.clear();
                        }
                        shared_attrs.insert(encoded, attrs.clone());
                    }
                    attrs
                }
            },
        };
        if let Some(info) = debug_info {
            attrs.insert(DEBUG_INFO_ATTR, ir::AttrValue::from_bytes(info.encode_to_vec()));
        }
        if let Some(t) = full_type {
            attrs.insert(FULL_TYPE_ATTR, ir::AttrValue::from_bytes(t.encode_to_vec()));
        }
        let mut node = Node::op(&*name, intern_str(&mut interned, &op));
        if !device.is_empty() {
            node.device = Some(intern_str(&mut interned, &device));
        }
        node.attrs = attrs;
        node.span = node_spans.node;
        match graph.add_node(node) {
            Ok(id) => pending.push(&graph, id, inputs.iter(), node_spans.inputs),
            Err(_) => errors.push(ImportError::DuplicateNode { name: name.into_owned(), span: node_spans.node }),
        }
    }

    for (n, (id, operands, input_spans)) in pending.nodes().enumerate() {
        if n as u64 % REPORT_EVERY == REPORT_EVERY - 1 {
            progress.advance(REPORT_EVERY);
        }
        let mut seen_control = false;
        for (i, operand) in operands.iter().enumerate() {
            let span = input_spans.get(i).copied().unwrap_or(graph.node(id).span);
            let node_name = || graph.node(id).name.to_string();
            let (src, output) = match pending.resolve(&graph, operand) {
                Ok(resolved) => resolved,
                Err(Unresolved::Malformed(input)) => {
                    errors.push(ImportError::MalformedInput { node: node_name(), input: input.to_string(), span });
                    continue;
                }
                Err(Unresolved::Unknown(input, name)) => {
                    errors.push(ImportError::UnknownInput {
                        node: node_name(),
                        input: input.to_string(),
                        name: name.to_string(),
                        span,
                    });
                    continue;
                }
            };
            match output {
                None => {
                    seen_control = true;
                    graph.add_control_input(id, src, span);
                }
                Some(k) => {
                    if seen_control {
                        let input = pending.spelling(&graph, operand);
                        errors.push(ImportError::DataAfterControl { node: node_name(), input, span });
                    }
                    graph.add_data_input(id, src, k, span);
                }
            }
        }
    }
    graph.shrink_to_fit();
    let mut graphs = vec![graph];
    if let Some(library) = library {
        graphs.extend(super::functions::function_graphs(library, &mut errors));
    }
    Ok((Module { header: Vec::new(), graphs }, errors))
}

/// The inputs of the imported nodes, kept from the first pass (adding
/// nodes) to the second (adding edges in node order, so that edge order and
/// error order do not depend on the GraphDef's node order).
///
/// An input whose producer already exists when its node is added (every
/// input of a GraphDef in topological order, TensorFlow's usual order) is
/// stored resolved, in 8 bytes; only the others keep their string.
struct PendingInputs {
    /// Per node: its id, the end of its operands in `operands`, its input spans.
    nodes: Vec<(NodeId, u32, Vec<Span>)>,
    operands: Vec<Operand>,
    /// The spelling of every input that was not resolved in the first pass.
    strings: Vec<String>,
}

/// One input: `src` and `output` (`CONTROL` for `^src`), or, with `src ==
/// UNRESOLVED`, `output` is the index of its spelling in `strings`.
#[derive(Clone, Copy)]
struct Operand {
    src: u32,
    output: u32,
}

impl Operand {
    const CONTROL: u32 = u32::MAX;
    const UNRESOLVED: u32 = u32::MAX;
}

/// Why an input does not name an existing output.
enum Unresolved<'a> {
    /// Not `a`, `a:k` or `^a`.
    Malformed(&'a str),
    /// The input, and the node name it asks for, which no node has.
    Unknown(&'a str, &'a str),
}

impl PendingInputs {
    fn with_capacity(nodes: usize, inputs: usize) -> PendingInputs {
        PendingInputs { nodes: Vec::with_capacity(nodes), operands: Vec::with_capacity(inputs), strings: Vec::new() }
    }

    /// Records the inputs of node `id`, resolving those whose producer `graph` already has.
    /// A data input after a control input is kept as written, for its error.
    fn push<'s>(&mut self, graph: &Graph, id: NodeId, inputs: impl Iterator<Item = &'s str>, spans: Vec<Span>) {
        let mut seen_control = false;
        for input in inputs {
            let parsed = parse_input(input);
            let data_after_control = seen_control && matches!(parsed, Some((_, Some(_))));
            seen_control |= matches!(parsed, Some((_, None)));
            let resolved = parsed
                .filter(|_| !data_after_control)
                .and_then(|(name, output)| Some((graph.find(name)?, output)))
                .filter(|(src, _)| src.0.index() < Operand::UNRESOLVED as usize);
            self.operands.push(match resolved {
                Some((src, output)) => {
                    Operand { src: src.0.index() as u32, output: output.unwrap_or(Operand::CONTROL) }
                }
                None => {
                    self.strings.push(input.to_string());
                    Operand { src: Operand::UNRESOLVED, output: self.strings.len() as u32 - 1 }
                }
            });
        }
        self.nodes.push((id, self.operands.len() as u32, spans));
    }

    /// Every recorded node with its operands, in the order they were pushed.
    fn nodes(&self) -> impl Iterator<Item = (NodeId, &[Operand], &[Span])> + '_ {
        let mut start = 0;
        self.nodes.iter().map(move |(id, end, spans)| {
            let operands = &self.operands[start as usize..*end as usize];
            start = *end;
            (*id, operands, spans.as_slice())
        })
    }

    /// The producer and output (`None`: control) of an operand.
    fn resolve<'a>(&'a self, graph: &Graph, operand: &Operand) -> Result<(NodeId, Option<u32>), Unresolved<'a>> {
        if operand.src != Operand::UNRESOLVED {
            let output = (operand.output != Operand::CONTROL).then_some(operand.output);
            return Ok((NodeId(operand.src.into()), output));
        }
        let input = self.strings[operand.output as usize].as_str();
        let (name, output) = parse_input(input).ok_or(Unresolved::Malformed(input))?;
        let src = graph.find(name).ok_or(Unresolved::Unknown(input, name))?;
        Ok((src, output))
    }

    /// The input as the GraphDef spelled it (exact for the inputs [`PendingInputs::push`] keeps as
    /// written; TensorFlow's canonical spelling for the others).
    fn spelling(&self, graph: &Graph, operand: &Operand) -> String {
        if operand.src == Operand::UNRESOLVED {
            return self.strings[operand.output as usize].clone();
        }
        let name = &graph.node(NodeId(operand.src.into())).name;
        match operand.output {
            Operand::CONTROL => format!("^{name}"),
            0 => name.to_string(),
            k => format!("{name}:{k}"),
        }
    }
}

/// The attribute entries [`convert_encoded_attrs`] has converted, by their
/// encoding; the interned names; the import's errors.
type EntryCache<'a, 'b> =
    (&'b mut HashMap<&'a [u8], (Arc<str>, ir::AttrValue)>, &'b mut HashMap<String, Arc<str>>, &'b mut Vec<ImportError>);

/// Converts a node's encoded `attr` run ([`Attrs::Encoded`]) entry by entry:
/// an entry whose bytes were converted before is cloned (most nodes share
/// a few entries, `T`, `_output_shapes`, the cluster tag, even when their
/// maps differ). An entry whose conversion reported anything is not
/// remembered, so that each node reports its own. A run of another form
/// than [`super::stream::attr_entries`] reads, or a value that does not
/// decode, is decoded as a whole, which reports the error as prost words it.
fn convert_encoded_attrs<'a>(
    node: &str,
    span: Span,
    run: &'a [u8],
    (seen, interned, errors): &mut EntryCache<'a, '_>,
) -> Result<AttrMap, ImportError> {
    let start = errors.len();
    let decode_whole = |interned: &mut HashMap<String, Arc<str>>, errors: &mut Vec<ImportError>| {
        errors.truncate(start);
        let attr = NodeDef::decode(run).map_err(|e| ImportError::decode(e.to_string()))?.attr;
        Ok(convert_attrs(node, span, attr, interned, errors))
    };
    let Some(entries) = super::stream::attr_entries(run) else { return decode_whole(interned, errors) };
    let mut converted = Vec::with_capacity(entries.len());
    for entry in entries {
        if let Some(done) = seen.get(entry.bytes) {
            converted.push(done.clone());
            continue;
        }
        let value = match entry.value.map(proto::AttrValue::decode) {
            None => proto::AttrValue::default(),
            Some(Ok(value)) => value,
            Some(Err(_)) => return decode_whole(interned, errors),
        };
        let reported = errors.len();
        let Some(value) = (Ctx { node, span, errors }).attr_value(value) else { continue };
        let done = (intern_str(interned, entry.key), value);
        if errors.len() == reported {
            if seen.len() >= SHARED_ATTRS_LIMIT {
                seen.clear();
            }
            seen.insert(entry.bytes, done.clone());
        }
        converted.push(done);
    }
    Ok(AttrMap::from_entries(converted))
}

/// Converts the attributes of a `NodeDef` (of the graph or of a function
/// body), interning the keys; values a GraphDef attribute cannot carry
/// over are reported in `errors`.
pub(super) fn convert_attrs(
    node: &str,
    span: Span,
    attr: std::collections::BTreeMap<String, proto::AttrValue>,
    interned: &mut HashMap<String, Arc<str>>,
    errors: &mut Vec<ImportError>,
) -> AttrMap {
    let mut ctx = Ctx { node, span, errors };
    let mut attrs = AttrMap::new();
    for (key, value) in attr {
        if let Some(v) = ctx.attr_value(value) {
            attrs.insert_shared(intern(interned, key), v);
        }
    }
    attrs
}

pub(super) fn intern(map: &mut HashMap<String, Arc<str>>, s: String) -> Arc<str> {
    if let Some(a) = map.get(&s) {
        return a.clone();
    }
    let a: Arc<str> = s.as_str().into();
    map.insert(s, a.clone());
    a
}

/// [`intern`] of a borrowed string: copies it only when it is new.
fn intern_str(map: &mut HashMap<String, Arc<str>>, s: &str) -> Arc<str> {
    match map.get(s) {
        Some(a) => a.clone(),
        None => intern(map, s.to_string()),
    }
}

/// Splits `^a`, `a:k` and `a` into a name and `None` (control) or the output.
pub(super) fn parse_input(input: &str) -> Option<(&str, Option<u32>)> {
    if let Some(name) = input.strip_prefix('^') {
        return (!name.is_empty()).then_some((name, None));
    }
    let (name, output) = match input.rsplit_once(':') {
        Some((name, k)) => {
            if k.is_empty() || !k.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (name, k.parse().ok()?)
        }
        None => (input, 0),
    };
    (!name.is_empty()).then_some((name, Some(output)))
}

fn graph_attrs(g: &GraphDef) -> AttrMap {
    use ir::AttrValue as A;
    let mut attrs = AttrMap::new();
    if let Some(v) = &g.versions {
        attrs.insert(graph_attr::PRODUCER, A::Int(v.producer.into()));
        if v.min_consumer != 0 {
            attrs.insert(graph_attr::MIN_CONSUMER, A::Int(v.min_consumer.into()));
        }
        if !v.bad_consumers.is_empty() {
            let list = v.bad_consumers.iter().map(|&b| A::Int(b.into())).collect();
            attrs.insert(graph_attr::BAD_CONSUMERS, A::List(list));
        }
    }
    if g.version != 0 {
        attrs.insert(graph_attr::VERSION, A::Int(g.version.into()));
    }
    if let Some(lib) = &g.library {
        attrs.insert(graph_attr::LIBRARY, A::from_bytes(lib.encode_to_vec()));
    }
    if let Some(info) = &g.debug_info {
        attrs.insert(graph_attr::DEBUG_INFO, A::from_bytes(info.encode_to_vec()));
    }
    attrs
}

/// The node being converted, for warnings.
struct Ctx<'a> {
    node: &'a str,
    span: Span,
    errors: &'a mut Vec<ImportError>,
}

impl Ctx<'_> {
    fn drop_warning(&mut self, what: impl Into<String>) {
        self.errors.push(ImportError::UnsupportedValue {
            node: self.node.to_string(),
            what: what.into(),
            span: self.span,
        });
    }

    fn attr_value(&mut self, v: proto::AttrValue) -> Option<ir::AttrValue> {
        use ir::AttrValue as A;
        Some(match v.value {
            None => {
                self.drop_warning("an attribute value with no kind set");
                return None;
            }
            Some(Value::List(list)) => {
                let l = *list;
                let mut items = Vec::with_capacity(
                    l.s.len() + l.i.len() + l.f.len() + l.b.len() + l.r#type.len() + l.shape.len() + l.tensor.len(),
                );
                items.extend(l.s.into_iter().map(A::from_bytes));
                items.extend(l.i.into_iter().map(A::Int));
                items.extend(l.f.into_iter().map(A::Float));
                items.extend(l.b.into_iter().map(A::Bool));
                items.extend(l.r#type.into_iter().map(|t| A::Type(DType::from_number(t))));
                for s in l.shape {
                    items.push(A::Shape(self.shape(s)));
                }
                for t in l.tensor {
                    items.push(A::Tensor(Arc::new(self.tensor(t))));
                }
                for f in l.func {
                    items.push(A::Func(Box::new(self.func(f))));
                }
                A::List(items)
            }
            Some(Value::S(s)) => A::from_bytes(s),
            Some(Value::I(i)) => A::Int(i),
            Some(Value::F(f)) => A::Float(f),
            Some(Value::B(b)) => A::Bool(b),
            Some(Value::Type(t)) => A::Type(DType::from_number(t)),
            Some(Value::Shape(s)) => A::Shape(self.shape(s)),
            Some(Value::Tensor(t)) => A::Tensor(Arc::new(self.tensor(*t))),
            Some(Value::Placeholder(p)) => A::Placeholder(p),
            Some(Value::Func(f)) => A::Func(Box::new(self.func(f))),
        })
    }

    fn func(&mut self, f: proto::NameAttrList) -> FuncRef {
        let mut attrs = AttrMap::new();
        for (key, value) in f.attr {
            if let Some(v) = self.attr_value(value) {
                attrs.insert(key, v);
            }
        }
        FuncRef { name: f.name, attrs }
    }

    fn shape(&mut self, s: TensorShapeProto) -> Shape {
        if s.dim.iter().any(|d| !d.name.is_empty()) {
            self.drop_warning("a shape dimension name");
        }
        if s.unknown_rank {
            if !s.dim.is_empty() {
                self.drop_warning("the dimensions of a shape of unknown rank");
            }
            return Shape::unknown();
        }
        if let Some(dim) = s.dim.iter().map(|d| d.size).find(|&d| d < -1) {
            self.errors.push(ImportError::NegativeDim {
                node: self.node.to_string(),
                what: "a shape".into(),
                dim,
                span: self.span,
            });
        }
        Shape::known(s.dim.into_iter().map(|d| d.size).collect())
    }

    fn tensor(&mut self, t: TensorProto) -> TensorLit {
        let dtype = DType::from_number(t.dtype);
        let shape = match t.tensor_shape {
            Some(s) => match self.shape(s).dims {
                Some(dims) => dims,
                None => {
                    self.drop_warning("the unknown rank of a tensor's shape");
                    Vec::new()
                }
            },
            None => Vec::new(),
        };
        if let Some(&dim) = shape.iter().find(|&&d| d < 0) {
            self.errors.push(ImportError::NegativeDim {
                node: self.node.to_string(),
                what: "a tensor".into(),
                dim,
                span: self.span,
            });
        }
        if t.version_number != 0 {
            self.drop_warning("a tensor's version_number");
        }
        for (len, field) in [
            (t.resource_handle_val.len(), "resource_handle_val"),
            (t.variant_val.len(), "variant_val"),
            (t.float8_val.len(), "float8_val"),
        ] {
            if len > 0 {
                self.drop_warning(format!("a tensor's {field}"));
            }
        }
        let mut found: Vec<TensorData> = Vec::new();
        macro_rules! take {
            ($field:expr, $variant:ident) => {
                if !$field.is_empty() {
                    found.push(TensorData::$variant($field));
                }
            };
        }
        take!(t.tensor_content, Content);
        take!(t.float_val, Float);
        take!(t.scomplex_val, Float);
        take!(t.double_val, Double);
        take!(t.dcomplex_val, Double);
        take!(t.half_val, Half);
        take!(t.int_val, Int);
        take!(t.int64_val, Int64);
        take!(t.uint32_val, Uint32);
        take!(t.uint64_val, Uint64);
        take!(t.bool_val, Bool);
        take!(t.string_val, Str);
        if found.len() > 1 {
            self.drop_warning("all but the first value field of a tensor that sets several");
        }
        let data = match found.into_iter().next() {
            Some(data) => data,
            None => empty_data(dtype),
        };
        TensorLit { dtype, shape, data }
    }
}

/// The value list a tensor of `dtype` with no values would be written with.
fn empty_data(dtype: DType) -> TensorData {
    use crate::ir::types::Storage;
    match dtype.storage() {
        Storage::Float => TensorData::Float(Vec::new()),
        Storage::Double => TensorData::Double(Vec::new()),
        Storage::Half => TensorData::Half(Vec::new()),
        Storage::Int => TensorData::Int(Vec::new()),
        Storage::Int64 => TensorData::Int64(Vec::new()),
        Storage::Uint32 => TensorData::Uint32(Vec::new()),
        Storage::Uint64 => TensorData::Uint64(Vec::new()),
        Storage::Bool => TensorData::Bool(Vec::new()),
        Storage::Str => TensorData::Str(Vec::new()),
        Storage::Opaque => TensorData::Content(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_split_into_name_and_output() {
        assert_eq!(parse_input("a"), Some(("a", Some(0))));
        assert_eq!(parse_input("a/b:3"), Some(("a/b", Some(3))));
        assert_eq!(parse_input("^a"), Some(("a", None)));
        assert_eq!(parse_input("a:x"), None);
        assert_eq!(parse_input("^"), None);
        assert_eq!(parse_input(":1"), None);
    }
}
