//! Functions: the graphs of a module that functional control flow runs.
//!
//! TensorFlow 2 writes `tf.while_loop` as one `While` (or `StatelessWhile`)
//! node whose `cond` and `body` attributes name functions of the GraphDef's
//! library; `tf.cond` is an `If`, `tf.switch_case` a `Case`, a
//! `tf.function` call a `PartitionedCall`. Here a function is a graph of
//! the module with the attribute `role = "function"`: its arguments are
//! `_Arg` nodes (`T` = dtype, `index` = position) and its results
//! `_Retval` nodes (one data input each, `T`, `index`), as TensorFlow
//! instantiates a function body; the graph attribute `control_outputs`
//! lists the nodes it runs for their effect alone. A function runs only
//! what its results and control outputs need. A call node names its
//! functions with `func "name"` attributes.
//!
//! [`check_calls`] verifies every call of a module against the functions
//! it names (existence, argument and result counts, dtypes); the cost is
//! one pass over the nodes of the module.

use super::error::IrError;
use super::graph::{Graph, Module, Node, NodeKind};
use super::types::{AttrValue, DType, FuncRef};

/// The graph attribute that marks a function (`role = "function"`).
pub const ROLE_ATTR: &str = "role";
/// The value of [`ROLE_ATTR`] on a function.
pub const FUNCTION_ROLE: &str = "function";
/// The graph attribute listing the nodes a function runs although no
/// result needs them (TensorFlow's `control_ret`): a list of node names.
pub const CONTROL_OUTPUTS_ATTR: &str = "control_outputs";
/// The op of a function argument.
pub const ARG_OP: &str = "_Arg";
/// The op of a function result.
pub const RETVAL_OP: &str = "_Retval";

/// The family of a call op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// `While`, `StatelessWhile`: `cond` and `body`; inputs are the loop variables.
    While,
    /// `If`, `StatelessIf`: input 0 is the predicate, `then_branch` and `else_branch`.
    If,
    /// `Case`, `StatelessCase`: input 0 is the branch index, `branches`.
    Case,
    /// `PartitionedCall`, `StatefulPartitionedCall`: `f`; `SymbolicGradient`:
    /// the gradient function of its `f` (see [`called_function_attr`]).
    Call,
    /// The XLA ops that apply scalar functions to elements (`XlaReduce`,
    /// `XlaReduceWindow`, `XlaSelectAndScatter`, `XlaVariadicSort`, ...):
    /// the functions [`apply_functions`] names.
    Apply,
}

/// The call ops, with their family.
pub const CALL_OPS: &[(&str, CallKind)] = &[
    ("Case", CallKind::Case),
    ("If", CallKind::If),
    ("PartitionedCall", CallKind::Call),
    ("StatefulPartitionedCall", CallKind::Call),
    ("StatelessCase", CallKind::Case),
    ("StatelessIf", CallKind::If),
    ("StatelessWhile", CallKind::While),
    ("SymbolicGradient", CallKind::Call),
    ("While", CallKind::While),
    ("XlaCallModule", CallKind::Call),
    ("XlaIf", CallKind::If),
    ("XlaReduce", CallKind::Apply),
    ("XlaReduceWindow", CallKind::Apply),
    ("XlaScatter", CallKind::Apply),
    ("XlaSelectAndScatter", CallKind::Apply),
    ("XlaVariadicReduce", CallKind::Apply),
    ("XlaVariadicReduceV2", CallKind::Apply),
    ("XlaVariadicSort", CallKind::Apply),
    ("XlaWhile", CallKind::While),
];

/// The function attributes of an op of kind [`CallKind::Apply`], each with
/// how many scalar arguments its function takes per operand it applies to
/// and how many results it returns (`None`: one per operand), or `None`
/// for other ops.
pub fn apply_functions(op: &str) -> Option<&'static [(&'static str, usize, Option<usize>)]> {
    Some(match op {
        "XlaReduce" | "XlaVariadicReduce" | "XlaVariadicReduceV2" => &[("reducer", 2, None)],
        "XlaReduceWindow" => &[("computation", 2, Some(1))],
        "XlaScatter" => &[("update_computation", 2, Some(1))],
        "XlaSelectAndScatter" => &[("select", 2, Some(1)), ("scatter", 2, Some(1))],
        "XlaVariadicSort" => &[("comparator", 2, Some(1))],
        _ => return None,
    })
}

/// How many operands of `op` (with `inputs` data inputs) its functions
/// apply to: each reduced or sorted operand (the init values, windows and
/// sort dimension are not).
fn applied_operands(op: &str, inputs: usize) -> usize {
    match op {
        "XlaReduce" | "XlaVariadicReduce" | "XlaVariadicReduceV2" => inputs / 2,
        "XlaVariadicSort" => inputs.saturating_sub(1),
        _ => 1,
    }
}

/// The attribute of a `SymbolicGradient` naming the function it runs: the
/// gradient function of its `f`, which the gradients pass makes and names
/// here (arguments: `f`'s arguments, then one gradient per result of `f`;
/// results: one gradient per argument of `f`).
pub const SYMBOLIC_GRADIENT_ATTR: &str = "_symbolic_gradient";

/// The attribute of an `XlaCallModule` naming the function it runs: its
/// StableHLO module raised into a function of the module by
/// `passes::xla_call_module` (same arguments and results as the node).
pub const XLA_CALL_MODULE_ATTR: &str = "_xla_call_module";

/// The function attribute a call of kind [`CallKind::Call`] runs: `f`,
/// [`SYMBOLIC_GRADIENT_ATTR`] for `SymbolicGradient`, whose `f` is the
/// function it differentiates, or [`XLA_CALL_MODULE_ATTR`] for
/// `XlaCallModule`.
pub fn called_function_attr(op: &str) -> &'static str {
    match op {
        "SymbolicGradient" => SYMBOLIC_GRADIENT_ATTR,
        "XlaCallModule" => XLA_CALL_MODULE_ATTR,
        _ => "f",
    }
}

/// True for an `XlaCallModule` whose module is not raised into a function
/// yet (it has no [`XLA_CALL_MODULE_ATTR`]).
pub fn is_unraised_module(node: &Node) -> bool {
    node.op.as_ref() == "XlaCallModule" && !node.attrs.contains_key(XLA_CALL_MODULE_ATTR)
}

/// The family of call op `op`, if it is one.
pub fn call_kind(op: &str) -> Option<CallKind> {
    CALL_OPS.iter().find(|(name, _)| *name == op).map(|&(_, kind)| kind)
}

/// True when `graph` is a function.
pub fn is_function(graph: &Graph) -> bool {
    graph.attrs.get_str(ROLE_ATTR) == Some(FUNCTION_ROLE)
}

/// The functions of `module`.
pub fn functions(module: &Module) -> impl Iterator<Item = &Graph> {
    module.graphs.iter().filter(|g| is_function(g))
}

/// Appends the functions of `from` that `to` does not have yet, so that a
/// lowered module keeps the bodies its `While` and `If` nodes run.
pub fn carry_functions(from: &Module, to: &mut Module) {
    for f in functions(from) {
        if to.graph(&f.name).is_none() {
            to.graphs.push(f.clone());
        }
    }
}

/// A function's arguments and results: the `T` of each `_Arg` and
/// `_Retval` by `index` (`None` for an index with no node or no `T`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Signature {
    /// The dtype of each argument, by `_Arg` index.
    pub args: Vec<Option<DType>>,
    /// The dtype of each result, by `_Retval` index.
    pub rets: Vec<Option<DType>>,
}

/// The signature of `graph`, or a message naming what is malformed (an
/// index missing, negative or used twice).
pub fn signature(graph: &Graph) -> Result<Signature, String> {
    let mut args: Vec<(i64, Option<DType>)> = Vec::new();
    let mut rets: Vec<(i64, Option<DType>)> = Vec::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        let list = match &*node.op {
            ARG_OP => &mut args,
            RETVAL_OP => &mut rets,
            _ => continue,
        };
        let index = node.attrs.get_int("index").ok_or_else(|| format!("`%{}` has no int `index`", node.name))?;
        list.push((index, node.attrs.get("T").and_then(AttrValue::as_type)));
    }
    let dense = |mut list: Vec<(i64, Option<DType>)>, what: &str| -> Result<Vec<Option<DType>>, String> {
        list.sort_by_key(|&(i, _)| i);
        for (k, &(i, _)) in list.iter().enumerate() {
            if i != k as i64 {
                return Err(format!("its {what} indices are not 0..{} each once (found {i})", list.len()));
            }
        }
        Ok(list.into_iter().map(|(_, t)| t).collect())
    };
    Ok(Signature { args: dense(args, "_Arg")?, rets: dense(rets, "_Retval")? })
}

/// The functions a node calls: `(attribute, function)` pairs, in the
/// order the op defines them (`cond`, `body`; `then_branch`,
/// `else_branch`; each of `branches`; `f`).
pub fn callees(node: &Node) -> Vec<(&'static str, &FuncRef)> {
    let keys: &[&'static str] = match call_kind(&node.op) {
        Some(CallKind::While) => &["cond", "body"],
        Some(CallKind::If) => &["then_branch", "else_branch"],
        Some(CallKind::Case) => &["branches"],
        Some(CallKind::Call)
            if node.op.as_ref() == "SymbolicGradient" && !node.attrs.contains_key(SYMBOLIC_GRADIENT_ATTR) =>
        {
            &["f"]
        }
        // Its module is raised into a function only when it runs.
        Some(CallKind::Call) if is_unraised_module(node) => return Vec::new(),
        Some(CallKind::Call) => &[called_function_attr(&node.op)],
        Some(CallKind::Apply) => {
            let keys = apply_functions(&node.op).unwrap_or_default();
            return keys
                .iter()
                .filter_map(|&(key, _, _)| match node.attrs.get(key) {
                    Some(AttrValue::Func(f)) => Some((key, &**f)),
                    _ => None,
                })
                .collect();
        }
        None => return Vec::new(),
    };
    let mut out = Vec::new();
    for &key in keys {
        match node.attrs.get(key) {
            Some(AttrValue::Func(f)) => out.push((key, &**f)),
            Some(AttrValue::List(items)) => {
                out.extend(items.iter().filter_map(|v| match v {
                    AttrValue::Func(f) => Some((key, &**f)),
                    _ => None,
                }));
            }
            _ => {}
        }
    }
    out
}

/// The dtypes of a type-list attribute, if present.
fn type_list(node: &Node, key: &str) -> Option<Vec<Option<DType>>> {
    Some(node.attrs.get(key)?.as_list()?.iter().map(AttrValue::as_type).collect())
}

/// Why a `SymbolicGradient` of `operands` operands (types `declared_in`,
/// results `declared_out`) does not fit `f` of signature `sig`, if it does not.
fn symbolic_gradient_mismatch(
    sig: &Signature,
    operands: usize,
    declared_in: &Option<Vec<Option<DType>>>,
    declared_out: &Option<Vec<Option<DType>>>,
) -> Option<String> {
    let takes: Vec<Option<DType>> = sig.args.iter().chain(&sig.rets).copied().collect();
    if takes.len() != operands {
        return Some(format!(
            "it passes {operands} operand(s); the gradient of `f` takes {} ({} argument(s), {} result gradient(s))",
            takes.len(),
            sig.args.len(),
            sig.rets.len()
        ));
    }
    let differ = |declared: &Option<Vec<Option<DType>>>, actual: &[Option<DType>]| {
        let declared = declared.as_ref()?;
        if declared.len() != actual.len() {
            return Some(format!("declares {} type(s) where `f` gives {}", declared.len(), actual.len()));
        }
        declared.iter().zip(actual).enumerate().find_map(|(i, (a, b))| match (a, b) {
            (Some(a), Some(b)) if a != b => Some(format!("type {i} is declared {a} but `f` gives {b}")),
            _ => None,
        })
    };
    differ(declared_in, &takes)
        .map(|m| format!("`Tin` {m}"))
        .or_else(|| differ(declared_out, &sig.args).map(|m| format!("`Tout` {m}")))
}

/// Verifies every call of `module` against the functions it names, and
/// every function's signature; appends the problems to `errors`.
pub fn check_calls(module: &Module, errors: &mut Vec<IrError>) {
    let mut signatures = std::collections::HashMap::new();
    for f in functions(module) {
        match signature(f) {
            Ok(s) => {
                signatures.insert(f.name.as_str(), s);
            }
            Err(reason) => errors.push(IrError::FunctionSignature { function: f.name.clone(), reason, span: f.span }),
        }
    }
    for graph in &module.graphs {
        for id in graph.node_ids() {
            let node = graph.node(id);
            let Some(kind) = (node.kind == NodeKind::Op).then(|| call_kind(&node.op)).flatten() else { continue };
            let inputs = graph.data_inputs(id).len();
            // The operands the functions receive, and the dtypes the node declares for them and its results.
            let (operands, declared_in, declared_out) = match kind {
                CallKind::While => (inputs, type_list(node, "T"), type_list(node, "T")),
                CallKind::If | CallKind::Case => {
                    (inputs.saturating_sub(1), type_list(node, "Tin"), type_list(node, "Tout"))
                }
                CallKind::Call => (inputs, type_list(node, "Tin"), type_list(node, "Tout")),
                // Per function below: its scalar arguments and results.
                CallKind::Apply => (applied_operands(&node.op, inputs), None, None),
            };
            let callees = callees(node);
            if callees.is_empty() && !is_unraised_module(node) {
                errors.push(IrError::CallSignature {
                    op: node.op.to_string(),
                    node: node.name.to_string(),
                    function: String::new(),
                    reason: "it names no function (a `func` attribute)".into(),
                    span: node.span,
                });
            }
            for (key, f) in callees {
                let Some(sig) = signatures.get(f.name.as_str()) else {
                    // A function whose own signature is malformed was reported above.
                    if !module.graph(&f.name).is_some_and(is_function) {
                        errors.push(IrError::UnknownFunction {
                            op: node.op.to_string(),
                            node: node.name.to_string(),
                            attr: key.to_string(),
                            name: f.name.clone(),
                            span: node.span,
                        });
                    }
                    continue;
                };
                let mut bad = |reason: String| {
                    errors.push(IrError::CallSignature {
                        op: node.op.to_string(),
                        node: node.name.to_string(),
                        function: f.name.clone(),
                        reason,
                        span: node.span,
                    })
                };
                let apply = apply_functions(&node.op).and_then(|keys| keys.iter().find(|k| k.0 == key));
                let operands = apply.map_or(operands, |&(_, per, _)| per * operands);
                if key == "f" && node.op.as_ref() == "SymbolicGradient" {
                    // Before the gradients pass names its gradient function: `f`'s arguments and
                    // one gradient per result of `f` in, one gradient per argument out.
                    if let Some(reason) = symbolic_gradient_mismatch(sig, operands, &declared_in, &declared_out) {
                        bad(reason);
                    }
                    continue;
                }
                if sig.args.len() != operands {
                    bad(format!("it passes {operands} operand(s) to `{key}`, which takes {}", sig.args.len()));
                    continue;
                }
                let want_rets = match (kind, key) {
                    (CallKind::Apply, _) => apply.map(|&(_, per, rets)| rets.unwrap_or(operands / per)),
                    (CallKind::While, "cond") => Some(1),
                    (CallKind::While, _) => Some(operands),
                    _ => declared_out.as_ref().map(Vec::len),
                };
                if let Some(n) = want_rets {
                    if sig.rets.len() != n {
                        bad(format!("`{key}` returns {} value(s), the op expects {n}", sig.rets.len()));
                        continue;
                    }
                }
                let mismatch = |declared: &Option<Vec<Option<DType>>>, actual: &[Option<DType>]| {
                    declared.as_ref().and_then(|d| {
                        d.iter().zip(actual).enumerate().find_map(|(i, (a, b))| match (a, b) {
                            (Some(a), Some(b)) if a != b => Some((i, *a, *b)),
                            _ => None,
                        })
                    })
                };
                if let Some((i, want, got)) = mismatch(&declared_in, &sig.args) {
                    bad(format!("operand {i} is {want} but argument {i} of `{key}` is {got}"));
                } else if key != "cond" {
                    if let Some((i, want, got)) = mismatch(&declared_out, &sig.rets) {
                        bad(format!("result {i} is declared {want} but `{key}` returns {got}"));
                    }
                }
                if key == "cond" && sig.rets.first().copied().flatten().is_some_and(|d| d != DType::Bool) {
                    bad("`cond` must return a bool".into());
                }
            }
        }
    }
}
