//! `XlaCallModule`: a StableHLO module (as jax2tf and `jax.export` serialize
//! it) raised into an IR function the node calls.
//!
//! Meaning: the node's `module` attribute holds a StableHLO portable
//! artifact. [`raise_xla_call_modules`] decodes it (with the decoder it is
//! given, normally [`crate::syntax::mlir`]'s reader) and converts each
//! `func.func` the module's `main` reaches into a function of the IR module,
//! made of TensorFlow and XLA ops both backends already run (`XlaDotV2`,
//! `XlaConvV2`, `XlaVariadicReduceV2`, `XlaGather`, `While`, `Case`, elementwise
//! math, ...). The conversion is a table keyed by StableHLO op name
//! (`xla_call_module_ops`), one small function
//! per op. Regions become functions of their own: a `while`'s condition and
//! body, each branch of a `case` or `if`, and the scalar computations of
//! `reduce`, `reduce_window`, `select_and_scatter`, `scatter` and `sort`.
//! Values a region uses from outside (StableHLO regions capture implicitly)
//! become extra arguments: extra loop-carried values of a `While`, extra
//! operands of a `Case` or `If`; the scalar computations may capture
//! nothing, as XLA's. The node keeps its op and every attribute and gains
//! [`XLA_CALL_MODULE_ATTR`], naming the function; the simulator and the
//! StableHLO lowering then run it like a `PartitionedCall`.
//!
//! Refused with a diagnostic naming what is refused: a module op with no
//! conversion (`unsupported_op`); shape polymorphism, `dim_args_spec` or any
//! dynamic dimension (`dynamic_shape`); `platforms` listing neither `CPU`
//! nor `TPU` (`platform`); tokens (`has_token_input_output`, token
//! arguments or results: `token`); a module whose `main` disagrees with
//! `Tin`, `Tout` or `Sout`, or bytes that do not decode (`invalid`). A
//! module serialized for several platforms takes the platform index as its
//! first argument (calling convention 7 on); the raise passes the index of
//! `CPU`, else of `TPU`, as TensorFlow does for the device it runs on.
//!
//! Invariants: a node already naming its function is left alone, so the
//! pass may run more than once; made functions have names no graph of the
//! module has; the pass imports no backend. Cost: one walk over the nodes,
//! plus, per XlaCallModule, decoding its bytes and one visit of each
//! operation of its module (functions called twice are converted once).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::error::PassError;
use super::xla_call_module_ops::convert;
use crate::ir::functions::{is_unraised_module, ARG_OP, FUNCTION_ROLE, RETVAL_OP, ROLE_ATTR, XLA_CALL_MODULE_ATTR};
use crate::ir::types::{FuncRef, TensorData, TensorLit};
use crate::ir::{AttrMap, AttrValue, DType, Graph, Module, Node, NodeId};
use crate::syntax::mlir::{self, Block, Dim, ElementType, Operation, Region, TensorType, Type, ValueId};
use crate::syntax::Span;

/// A decoder of a `module` attribute's bytes.
pub type Decoder<'a> = &'a dyn Fn(&[u8]) -> Result<mlir::Module, String>;

pub use super::xla_call_module_ops::supported_ops;

/// Decodes a `module` attribute's bytes: a StableHLO portable artifact
/// ([`mlir::read_portable_artifact`]).
pub fn read_module(bytes: &[u8]) -> Result<mlir::Module, String> {
    mlir::read_portable_artifact(bytes).map_err(|e| {
        let help = miette::Diagnostic::help(&e).map(|h| format!(" ({h})")).unwrap_or_default();
        format!("{e}{help}")
    })
}

/// Raises the module of every `XlaCallModule` of `module` that names no
/// function yet, appending the functions made; returns the problems with
/// the graph each was found in. A refused node stays unraised (running it
/// is refused by its kernel).
pub fn raise_xla_call_modules(module: &mut Module, decode: Decoder<'_>) -> Vec<(String, PassError)> {
    let todo: Vec<(usize, NodeId)> = module
        .graphs
        .iter()
        .enumerate()
        .flat_map(|(i, g)| g.node_ids().filter(move |&id| is_unraised_module(g.node(id))).map(move |id| (i, id)))
        .collect();
    let mut found = Vec::new();
    let mut taken: HashSet<String> = module.graphs.iter().map(|g| g.name.clone()).collect();
    let mut added = Vec::new();
    let mut named = Vec::new();
    for (i, id) in todo {
        let graph = &module.graphs[i];
        let node = graph.node(id);
        match raise_node(node, decode, &mut taken) {
            Ok((name, functions)) => {
                added.extend(functions);
                named.push((i, id, name));
            }
            Err(e) => found.push((graph.name.clone(), e)),
        }
    }
    for (i, id, name) in named {
        let attr = AttrValue::Func(Box::new(FuncRef { name, attrs: AttrMap::new() }));
        module.graphs[i].node_mut(id).attrs.insert(XLA_CALL_MODULE_ATTR, attr);
    }
    module.graphs.append(&mut added);
    found
}

/// Raises one node's module: the name of its entry function and every function made.
fn raise_node(
    node: &Node,
    decode: Decoder<'_>,
    taken: &mut HashSet<String>,
) -> Result<(String, Vec<Graph>), PassError> {
    let name = node.name.to_string();
    let span = node.span;
    let invalid = |problem: String| PassError::XlaCallModuleInvalid { node: name.clone(), problem, span };
    let attrs = &node.attrs;
    let strings = |key: &str| -> Vec<String> {
        let list = attrs.get(key).and_then(AttrValue::as_list).unwrap_or(&[]);
        list.iter()
            .map(|v| match v {
                AttrValue::Str(s) => s.to_string(),
                AttrValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
            .collect()
    };
    let platforms = strings("platforms");
    let platform_index = if platforms.is_empty() {
        None
    } else {
        let at = |p: &str| platforms.iter().position(|q| q.eq_ignore_ascii_case(p));
        match at("CPU").or_else(|| at("TPU")) {
            Some(k) => Some(k),
            None => return Err(PassError::XlaCallModulePlatform { node: name, platforms: platforms.join(", "), span }),
        }
    };
    let dynamic = |what: String| PassError::XlaCallModuleDynamic { node: name.clone(), what, span };
    if !strings("dim_args_spec").is_empty() {
        return Err(dynamic(format!("`dim_args_spec` is [{}]", strings("dim_args_spec").join(", "))));
    }
    if attrs.get_bool("has_token_input_output") == Some(true) {
        let what = "`has_token_input_output` is true".to_string();
        return Err(PassError::XlaCallModuleToken { node: name, what, span });
    }
    if !strings("function_list").is_empty() {
        return Err(invalid(
            "`function_list` names TensorFlow functions the module calls back; host callbacks are not supported".into(),
        ));
    }
    let bytes: &[u8] = match attrs.get("module") {
        Some(AttrValue::Str(s)) => s.as_bytes(),
        Some(AttrValue::Bytes(b)) => b,
        _ => return Err(invalid("it has no string attribute `module`".into())),
    };
    let tree = decode(bytes).map_err(|e| invalid(format!("its `module` does not decode: {e}")))?;
    let main = tree.function("main").ok_or_else(|| invalid("its module has no function `main`".into()))?;
    if tree.attributes.iter().any(|a| a.name == "jax.uses_shape_polymorphism" && a.value == mlir::Attribute::Bool(true))
    {
        return Err(dynamic("the module uses shape polymorphism".into()));
    }
    // The node's operands and results against `main`'s signature.
    let declared = |key: &str| -> Vec<Option<DType>> {
        attrs.get(key).and_then(AttrValue::as_list).unwrap_or(&[]).iter().map(AttrValue::as_type).collect()
    };
    let (tin, tout) = (declared("Tin"), declared("Tout"));
    let leading = usize::from(platform_index.is_some() && platforms.len() > 1);
    if main.inputs.len() != tin.len() + leading {
        return Err(invalid(format!(
            "it passes {} operand(s) but `main` takes {}{}",
            tin.len(),
            main.inputs.len(),
            if leading == 1 { " (the first is the platform index)" } else { "" }
        )));
    }
    if main.results.len() != tout.len() {
        return Err(invalid(format!("`Tout` has {} type(s) but `main` returns {}", tout.len(), main.results.len())));
    }
    let sout: Vec<Option<Vec<i64>>> = attrs
        .get("Sout")
        .and_then(AttrValue::as_list)
        .unwrap_or(&[])
        .iter()
        .map(|s| s.as_shape().and_then(|s| s.dims.clone()))
        .collect();
    let check = |what: &str, i: usize, ty: &Type, dtype: Option<DType>, shape: Option<&Option<Vec<i64>>>| {
        let (got, dims) = tensor_type(ty).map_err(|e| match e {
            Refusal::Dynamic(w) => dynamic(format!("{what} {i} of `main` is {w}")),
            Refusal::Token => PassError::XlaCallModuleToken {
                node: name.clone(),
                what: format!("{what} {i} of `main` is a token"),
                span,
            },
            Refusal::Other(m) => invalid(format!("{what} {i} of `main`: {m}")),
        })?;
        if dtype.is_some_and(|d| d != got) {
            return Err(invalid(format!("{what} {i} is declared {} but `main` has {got}", dtype.unwrap_or(got))));
        }
        if let Some(Some(declared)) = shape {
            if declared.iter().any(|&d| d < 0) {
                return Err(dynamic(format!("`Sout` entry {i} has an unknown dimension")));
            }
            if *declared != dims {
                return Err(invalid(format!("`Sout` entry {i} is {declared:?} but `main` returns {dims:?}")));
            }
        }
        Ok(())
    };
    for (i, ty) in main.inputs.iter().enumerate().skip(leading) {
        check("argument", i, ty, tin[i - leading], None)?;
    }
    for (i, ty) in main.results.iter().enumerate() {
        check("result", i, ty, tout[i], sout.get(i))?;
    }
    let base = format!("{}__xla_call_module", node.name.replace('/', "_"));
    let mut cx = Cx { tree: &tree, base, taken, made: Vec::new(), called: HashMap::new() };
    let entry = cx.fresh("main");
    let leading_value = platform_index.filter(|_| leading == 1).map(|k| k as i64);
    cx.function(&entry, main, leading_value).map_err(|(op, function, reason)| match reason {
        Refusal::Dynamic(what) => dynamic(format!("`{op}` in `@{function}` has {what}")),
        Refusal::Token => PassError::XlaCallModuleToken {
            node: name.clone(),
            what: format!("`{op}` in `@{function}` uses a token"),
            span,
        },
        Refusal::Other(reason) => PassError::XlaCallModuleOp { node: name.clone(), op, function, reason, span },
    })?;
    Ok((entry, cx.made))
}

/// Why a type or an op cannot be raised.
#[derive(Debug)]
pub(super) enum Refusal {
    /// A dynamic dimension or an unranked tensor (what, e.g. `a dynamic dimension`).
    Dynamic(String),
    /// A token.
    Token,
    /// Anything else.
    Other(String),
}

impl From<String> for Refusal {
    fn from(s: String) -> Refusal {
        Refusal::Other(s)
    }
}

impl From<&str> for Refusal {
    fn from(s: &str) -> Refusal {
        Refusal::Other(s.to_string())
    }
}

/// The IR dtype of a StableHLO element type.
pub(super) fn dtype_of(e: &ElementType) -> Result<DType, Refusal> {
    Ok(match e {
        ElementType::I1 => DType::Bool,
        ElementType::Signed(8) | ElementType::Signless(8) => DType::I8,
        ElementType::Signed(16) | ElementType::Signless(16) => DType::I16,
        ElementType::Signed(32) | ElementType::Signless(32) => DType::I32,
        ElementType::Signed(64) | ElementType::Signless(64) => DType::I64,
        ElementType::Unsigned(8) => DType::U8,
        ElementType::Unsigned(16) => DType::U16,
        ElementType::Unsigned(32) => DType::U32,
        ElementType::Unsigned(64) => DType::U64,
        ElementType::F16 => DType::F16,
        ElementType::BF16 => DType::BF16,
        ElementType::F32 => DType::F32,
        ElementType::F64 => DType::F64,
        ElementType::Complex(inner) if **inner == ElementType::F32 => DType::C64,
        ElementType::Complex(inner) if **inner == ElementType::F64 => DType::C128,
        other => return Err(Refusal::Other(format!("element type {other:?} has no TensorFlow dtype"))),
    })
}

/// The dtype and static dimensions of a tensor type.
pub(super) fn tensor_type(ty: &Type) -> Result<(DType, Vec<i64>), Refusal> {
    match ty {
        Type::Tensor(t) => static_tensor(t),
        Type::Token => Err(Refusal::Token),
        other => Err(Refusal::Other(format!("type {other:?} is not a tensor"))),
    }
}

/// The dtype and static dimensions of a tensor type, or why not.
pub(super) fn static_tensor(t: &TensorType) -> Result<(DType, Vec<i64>), Refusal> {
    let dims = t.dims.as_ref().ok_or_else(|| Refusal::Dynamic("an unranked tensor".into()))?;
    let dims = dims
        .iter()
        .map(|d| match d {
            Dim::Static(n) => Ok(*n),
            Dim::Dynamic => Err(Refusal::Dynamic("a dynamic dimension".into())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((dtype_of(&t.element)?, dims))
}

/// What a failed conversion reports: the op, the module function, why.
type Failure = (String, String, Refusal);

/// The state of one node's raise: the module, the names given, the functions made.
pub(super) struct Cx<'a> {
    tree: &'a mlir::Module,
    base: String,
    taken: &'a mut HashSet<String>,
    made: Vec<Graph>,
    /// Module function → the IR function made of it.
    called: HashMap<String, String>,
}

impl Cx<'_> {
    /// A function name no graph has, made of `what`.
    pub(super) fn fresh(&mut self, what: &str) -> String {
        let stem = format!("{}__{}", self.base, what.replace(['/', '.', '@'], "_"));
        let mut name = stem.clone();
        let mut k = 1;
        while self.taken.contains(&name) {
            name = format!("{stem}_{k}");
            k += 1;
        }
        self.taken.insert(name.clone());
        name
    }

    /// Converts module function `f` into IR function `name`; a `leading`
    /// value replaces its first argument (the platform index).
    fn function(&mut self, name: &str, f: &mlir::Function, leading: Option<i64>) -> Result<(), Failure> {
        let block = entry_block(&f.body).map_err(|r| ("func.func".to_string(), f.name.clone(), r))?;
        let mut fb = Fb::new(self, name, &f.name);
        let mut index = 0;
        for (k, arg) in block.arguments.iter().enumerate() {
            let (dtype, dims) = tensor_type(&arg.ty).map_err(|r| ("func.func".to_string(), f.name.clone(), r))?;
            if k == 0 {
                if let Some(value) = leading {
                    let c = fb.scalar(dtype, value as f64);
                    fb.bind(arg.id, c, dtype, dims);
                    continue;
                }
            }
            let a = fb.arg(index, dtype);
            index += 1;
            fb.bind(arg.id, (a, 0), dtype, dims);
        }
        let g = fb.body(block)?;
        self.made.push(g);
        Ok(())
    }

    /// The IR function made of module function `callee`, converting it once.
    pub(super) fn callee(&mut self, callee: &str) -> Result<String, Refusal> {
        if let Some(name) = self.called.get(callee) {
            return Ok(name.clone());
        }
        let tree = self.tree;
        let f = tree.function(callee).ok_or_else(|| format!("the module has no function `@{callee}`"))?;
        let name = self.fresh(callee);
        self.called.insert(callee.to_string(), name.clone());
        self.function(&name, f, None).map_err(|(op, function, r)| match r {
            Refusal::Other(m) => Refusal::Other(format!("in `@{function}`, `{op}`: {m}")),
            other => other,
        })?;
        Ok(name)
    }

    /// Makes a function of `block` (a region's), whose arguments are the
    /// block's, then the `captured` values (with their types); returns its name.
    pub(super) fn region(
        &mut self,
        what: &str,
        function: &str,
        block: &Block,
        captured: &[(ValueId, DType, Vec<i64>)],
    ) -> Result<String, Refusal> {
        let name = self.fresh(what);
        let mut fb = Fb::new(self, &name, function);
        let mut index = 0;
        for arg in &block.arguments {
            let (dtype, dims) = tensor_type(&arg.ty)?;
            let a = fb.arg(index, dtype);
            index += 1;
            fb.bind(arg.id, (a, 0), dtype, dims);
        }
        for (id, dtype, dims) in captured {
            let a = fb.arg(index, *dtype);
            index += 1;
            fb.bind(*id, (a, 0), *dtype, dims.clone());
        }
        let g = fb.body(block).map_err(|(op, _, r)| match r {
            Refusal::Other(m) => Refusal::Other(format!("in a region, `{op}`: {m}")),
            other => other,
        })?;
        self.made.push(g);
        Ok(name)
    }
}

/// The single block of a region.
pub(super) fn entry_block(region: &Region) -> Result<&Block, Refusal> {
    match region.blocks.as_slice() {
        [block] => Ok(block),
        blocks => Err(Refusal::Other(format!("a region of {} blocks (StableHLO regions have one)", blocks.len()))),
    }
}

/// The values `region` uses but does not define, in order of first use.
pub(super) fn captures(region: &Region) -> Vec<ValueId> {
    fn walk(region: &Region, defined: &mut HashSet<ValueId>, used: &mut Vec<ValueId>) {
        for block in &region.blocks {
            defined.extend(block.arguments.iter().map(|a| a.id));
            for op in &block.operations {
                used.extend(op.operands.iter().copied());
                for r in &op.regions {
                    walk(r, defined, used);
                }
                defined.extend(op.results.iter().map(|r| r.id));
            }
        }
    }
    let mut defined = HashSet::new();
    let mut used = Vec::new();
    walk(region, &mut defined, &mut used);
    let mut seen = HashSet::new();
    used.into_iter().filter(|v| !defined.contains(v) && seen.insert(*v)).collect()
}

/// A value's place, dtype and dimensions.
type Bound = ((NodeId, u32), DType, Vec<i64>);

/// A function being built from a block of the module.
pub(super) struct Fb<'c, 'a> {
    pub(super) cx: &'c mut Cx<'a>,
    pub(super) g: Graph,
    /// The module function being converted (for messages).
    pub(super) function: String,
    vals: HashMap<ValueId, Bound>,
    /// The `stablehlo.constant`s converted so far, by result: a scalar
    /// computation that uses one gets its own copy.
    pub(super) consts: HashMap<ValueId, Operation>,
    /// Nodes made so far: numbers their names.
    count: usize,
}

impl<'c, 'a> Fb<'c, 'a> {
    fn new(cx: &'c mut Cx<'a>, name: &str, function: &str) -> Fb<'c, 'a> {
        let mut g = Graph::new(name);
        g.attrs.insert(ROLE_ATTR, AttrValue::str(FUNCTION_ROLE));
        Fb { cx, g, function: function.to_string(), vals: HashMap::new(), consts: HashMap::new(), count: 0 }
    }

    /// Records what value `id` is.
    pub(super) fn bind(&mut self, id: ValueId, at: (NodeId, u32), dtype: DType, dims: Vec<i64>) {
        self.vals.insert(id, (at, dtype, dims));
    }

    /// Where value `id` is.
    pub(super) fn at(&self, id: ValueId) -> Result<(NodeId, u32), Refusal> {
        self.vals.get(&id).map(|v| v.0).ok_or_else(|| Refusal::Other(format!("{id} is used before it is defined")))
    }

    /// The dtype and dimensions of value `id`.
    pub(super) fn ty(&self, id: ValueId) -> Result<(DType, Vec<i64>), Refusal> {
        self.vals.get(&id).map(|v| (v.1, v.2.clone())).ok_or_else(|| Refusal::Other(format!("{id} has no type")))
    }

    /// Argument `index` of the function.
    fn arg(&mut self, index: usize, dtype: DType) -> NodeId {
        let node = Node::op(self.g.unique_name(&format!("arg_{index}")), ARG_OP)
            .with_attr("T", AttrValue::Type(dtype))
            .with_attr("index", AttrValue::Int(index as i64));
        self.g.add_node_unique(node)
    }

    /// A node of `op` on `inputs` with `attrs`.
    pub(super) fn node(&mut self, op: &str, inputs: &[(NodeId, u32)], attrs: Vec<(&str, AttrValue)>) -> NodeId {
        self.count += 1;
        let mut node = Node::op(format!("{}_{}", op.to_ascii_lowercase(), self.count), op);
        for (k, v) in attrs {
            node = node.with_attr(k, v);
        }
        let id = self.g.add_node_unique(node);
        self.g.add_data_inputs(id, inputs, Span::DETACHED);
        id
    }

    /// A `Const` of `lit`.
    pub(super) fn constant(&mut self, lit: TensorLit) -> (NodeId, u32) {
        let dtype = lit.dtype;
        let id = self.node(
            "Const",
            &[],
            vec![("dtype", AttrValue::Type(dtype)), ("value", AttrValue::Tensor(Arc::new(lit)))],
        );
        (id, 0)
    }

    /// An i64 vector `Const`.
    pub(super) fn ints(&mut self, values: &[i64]) -> (NodeId, u32) {
        self.constant(TensorLit {
            dtype: DType::I64,
            shape: vec![values.len() as i64],
            data: TensorData::Int64(values.to_vec()),
        })
    }

    /// An i64 `Const` of shape `shape`.
    pub(super) fn ints_shaped(&mut self, values: &[i64], shape: Vec<i64>) -> (NodeId, u32) {
        self.constant(TensorLit { dtype: DType::I64, shape, data: TensorData::Int64(values.to_vec()) })
    }

    /// A scalar `Const` of `dtype` holding `value`.
    pub(super) fn scalar(&mut self, dtype: DType, value: f64) -> (NodeId, u32) {
        let lit = super::xla_call_module_ops::literal(dtype, Vec::new(), &mlir::DenseValues::Float(vec![value]))
            .unwrap_or(TensorLit { dtype, shape: Vec::new(), data: TensorData::Double(vec![value]) });
        self.constant(lit)
    }

    /// Converts every operation of `block`, its terminator giving the results.
    fn body(mut self, block: &Block) -> Result<Graph, Failure> {
        let function = self.function.clone();
        let fail = |op: &Operation, r: Refusal| (op.name.clone(), function.clone(), r);
        let (last, ops) = block
            .operations
            .split_last()
            .ok_or_else(|| ("func.func".to_string(), function.clone(), Refusal::Other("an empty block".into())))?;
        for op in ops {
            if op.name == "stablehlo.constant" {
                if let Some(r) = op.results.first() {
                    self.consts.insert(r.id, op.clone());
                }
            }
            let outs = convert(&mut self, op).map_err(|r| fail(op, r))?;
            if outs.len() != op.results.len() {
                let m = format!("made {} value(s) for {} result(s)", outs.len(), op.results.len());
                return Err(fail(op, Refusal::Other(m)));
            }
            for (r, at) in op.results.iter().zip(outs) {
                let (dtype, dims) = tensor_type(&r.ty).map_err(|e| fail(op, e))?;
                self.bind(r.id, at, dtype, dims);
            }
        }
        if !matches!(last.name.as_str(), "func.return" | "stablehlo.return") {
            return Err(fail(last, Refusal::Other("a block must end in `func.return` or `stablehlo.return`".into())));
        }
        for (index, &v) in last.operands.iter().enumerate() {
            let at = self.at(v).map_err(|r| fail(last, r))?;
            let (dtype, _) = self.ty(v).map_err(|r| fail(last, r))?;
            let node = Node::op(self.g.unique_name(&format!("result_{index}")), RETVAL_OP)
                .with_attr("T", AttrValue::Type(dtype))
                .with_attr("index", AttrValue::Int(index as i64));
            let id = self.g.add_node_unique(node);
            self.g.add_data_input(id, at.0, at.1, Span::DETACHED);
        }
        Ok(self.g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;
    use crate::syntax::mlir::{Attribute, DenseValues, NamedAttribute, Value, Visibility};

    fn f32s(dims: &[i64]) -> Type {
        let dims = Some(dims.iter().map(|&d| Dim::Static(d)).collect());
        Type::Tensor(TensorType { dims, element: ElementType::F32, bounds: Vec::new() })
    }

    fn op(name: &str, operands: &[u32], result: Option<(u32, Type)>, regions: Vec<Region>) -> Operation {
        Operation {
            name: name.into(),
            operands: operands.iter().map(|&v| ValueId(v)).collect(),
            results: result.into_iter().map(|(id, ty)| Value { id: ValueId(id), ty }).collect(),
            attributes: Vec::new(),
            regions,
        }
    }

    fn block(args: &[(u32, Type)], operations: Vec<Operation>) -> Block {
        Block {
            arguments: args.iter().map(|(id, ty)| Value { id: ValueId(*id), ty: ty.clone() }).collect(),
            operations,
        }
    }

    /// `main(%0: x) -> body's result`, with `ops` between.
    fn module(arg: Type, result: Type, ops: Vec<Operation>) -> mlir::Module {
        let main = mlir::Function {
            name: "main".into(),
            visibility: Visibility::Public,
            inputs: vec![arg.clone()],
            results: vec![result],
            arg_attributes: Vec::new(),
            result_attributes: Vec::new(),
            body: Region { blocks: vec![block(&[(0, arg)], ops)] },
        };
        mlir::Module { functions: vec![main], attributes: Vec::new() }
    }

    /// `tanh(x) * x` on f32[3].
    fn tanh_times_x() -> mlir::Module {
        module(
            f32s(&[3]),
            f32s(&[3]),
            vec![
                op("stablehlo.tanh", &[0], Some((1, f32s(&[3]))), Vec::new()),
                op("stablehlo.multiply", &[1, 0], Some((2, f32s(&[3]))), Vec::new()),
                op("func.return", &[2], None, Vec::new()),
            ],
        )
    }

    const G: &str = r#"
graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[3]}
  %m = XlaCallModule(%x) {Tin = [f32], Tout = [f32], Sout = [shape[3]], version = 10, module = "m", platforms = ["CPU"], has_token_input_output = false}
}
"#;

    fn raise(text: &str, tree: &mlir::Module) -> (Module, Vec<(String, PassError)>) {
        let (mut m, errors) = parse_module(text.as_bytes()).expect("parses");
        assert!(errors.is_empty(), "{errors:?}");
        let found = raise_xla_call_modules(&mut m, &|_| Ok(tree.clone()));
        (m, found)
    }

    fn code(e: &PassError) -> String {
        miette::Diagnostic::code(e).map(|c| c.to_string()).unwrap_or_default()
    }

    #[test]
    fn a_module_becomes_a_function_the_node_names() {
        let (m, found) = raise(G, &tanh_times_x());
        assert!(found.is_empty(), "{found:?}");
        let g = &m.graphs[0];
        let node = g.node(g.find("m").expect("the node"));
        // The node keeps its op and attributes and names the function made.
        assert_eq!(&*node.op, "XlaCallModule");
        assert_eq!(node.attrs.get_str("module"), Some("m"));
        let Some(AttrValue::Func(f)) = node.attrs.get(XLA_CALL_MODULE_ATTR) else { panic!("no function named") };
        let f = m.graph(&f.name).expect("the function");
        let ops: Vec<&str> = f.node_ids().map(|id| &*f.node(id).op).collect();
        for want in ["_Arg", "Tanh", "Mul", "_Retval"] {
            assert!(ops.contains(&want), "{want} missing from {ops:?}");
        }
        let mut errors = Vec::new();
        crate::ir::functions::check_calls(&m, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn platforms_without_cpu_or_tpu_are_refused() {
        let (_, found) = raise(&G.replace("[\"CPU\"]", "[\"CUDA\", \"ROCM\"]"), &tanh_times_x());
        assert_eq!(found.len(), 1);
        assert_eq!(code(&found[0].1), "tpu_rewrite::passes::xla_call_module::platform");
        assert!(found[0].1.to_string().contains("CUDA, ROCM"), "{}", found[0].1);
    }

    #[test]
    fn tokens_and_dynamic_shapes_are_refused() {
        let (_, found) =
            raise(&G.replace("has_token_input_output = false", "has_token_input_output = true"), &tanh_times_x());
        assert_eq!(code(&found[0].1), "tpu_rewrite::passes::xla_call_module::token");
        let (_, found) = raise(&G.replace("version = 10", "version = 10, dim_args_spec = [\"0.0\"]"), &tanh_times_x());
        assert_eq!(code(&found[0].1), "tpu_rewrite::passes::xla_call_module::dynamic_shape");
        let dynamic =
            Type::Tensor(TensorType { dims: Some(vec![Dim::Dynamic]), element: ElementType::F32, bounds: Vec::new() });
        let tree = module(dynamic.clone(), dynamic, vec![op("func.return", &[0], None, Vec::new())]);
        let (_, found) = raise(G, &tree);
        assert_eq!(code(&found[0].1), "tpu_rewrite::passes::xla_call_module::dynamic_shape");
    }

    #[test]
    fn an_unknown_op_is_named() {
        let mut tree = tanh_times_x();
        tree.functions[0].body.blocks[0].operations[0].name = "stablehlo.rng".into();
        let (m, found) = raise(G, &tree);
        assert_eq!(found.len(), 1);
        assert_eq!(code(&found[0].1), "tpu_rewrite::passes::xla_call_module::unsupported_op");
        assert!(found[0].1.to_string().contains("`stablehlo.rng`"), "{}", found[0].1);
        // The node stays unraised and no function is added.
        assert_eq!(m.graphs.len(), 1);
        assert!(is_unraised_module(m.graphs[0].node(m.graphs[0].find("m").expect("node"))));
    }

    #[test]
    fn batching_dimensions_that_do_not_pair_are_refused() {
        let mut tree = tanh_times_x();
        let mut gather = op("stablehlo.gather", &[0, 0], Some((1, f32s(&[3]))), Vec::new());
        let dims = Attribute::DenseArray { element: ElementType::Signless(64), values: DenseValues::Int(vec![0]) };
        gather.attributes.push(NamedAttribute { name: "operand_batching_dims".into(), value: dims });
        tree.functions[0].body.blocks[0].operations[0] = gather;
        let (_, found) = raise(G, &tree);
        assert_eq!(found.len(), 1);
        assert_eq!(code(&found[0].1), "tpu_rewrite::passes::xla_call_module::unsupported_op");
        assert!(found[0].1.to_string().contains("do not pair"), "{}", found[0].1);
    }

    #[test]
    fn a_signature_that_disagrees_with_the_node_is_refused() {
        let (_, found) = raise(&G.replace("Sout = [shape[3]]", "Sout = [shape[4]]"), &tanh_times_x());
        assert_eq!(code(&found[0].1), "tpu_rewrite::passes::xla_call_module::invalid");
        let (_, found) = raise(&G.replace("Tout = [f32]", "Tout = [f64]"), &tanh_times_x());
        assert_eq!(code(&found[0].1), "tpu_rewrite::passes::xla_call_module::invalid");
    }

    #[test]
    fn a_while_passes_its_captured_values_through() {
        // while (v < 5) { v = v + c } with `c` (a constant of main) used inside the body.
        let scalar = || f32s(&[]);
        let pred = Type::Tensor(TensorType { dims: Some(Vec::new()), element: ElementType::I1, bounds: Vec::new() });
        let mut five = op("stablehlo.constant", &[], Some((1, scalar())), Vec::new());
        let lit = TensorType { dims: Some(Vec::new()), element: ElementType::F32, bounds: Vec::new() };
        five.attributes.push(NamedAttribute {
            name: "value".into(),
            value: Attribute::DenseElements { ty: lit, values: DenseValues::Float(vec![5.0]), splat: true },
        });
        let mut less = op("stablehlo.compare", &[10, 1], Some((11, pred)), Vec::new());
        less.attributes.push(NamedAttribute {
            name: "comparison_direction".into(),
            value: Attribute::Enum { kind: "comparison_direction".into(), value: "LT".into() },
        });
        let cond = block(&[(10, scalar())], vec![less, op("stablehlo.return", &[11], None, Vec::new())]);
        let body = block(
            &[(20, scalar())],
            vec![
                op("stablehlo.add", &[20, 1], Some((21, scalar())), Vec::new()),
                op("stablehlo.return", &[21], None, Vec::new()),
            ],
        );
        let regions = vec![Region { blocks: vec![cond] }, Region { blocks: vec![body] }];
        let tree = module(
            scalar(),
            scalar(),
            vec![
                five,
                op("stablehlo.while", &[0], Some((2, scalar())), regions),
                op("func.return", &[2], None, Vec::new()),
            ],
        );
        let (m, found) = raise(&G.replace("shape[3]", "shape[]"), &tree);
        assert!(found.is_empty(), "{found:?}");
        let main = m.graphs.iter().find(|g| g.name.ends_with("__main")).expect("main");
        let w = main.node_ids().find(|&id| &*main.node(id).op == "StatelessWhile").expect("a While");
        // The loop value and the captured constant.
        assert_eq!(main.data_inputs(w).len(), 2);
        let mut errors = Vec::new();
        crate::ir::functions::check_calls(&m, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
    }
}
