//! The functions a gradients call differentiates through, and the gradient functions it adds.
//!
//! A call op (`PartitionedCall`, `If`, `Case`, `While`) runs functions of the module. Its gradient
//! runs a *gradient function* of each: a copy of the function whose extra trailing arguments are
//! the gradients of its float results, and whose results are the gradients of its float arguments.
//! The copy recomputes the function's values from its arguments, then holds an ordinary
//! `gradients` call over them, expanded like any other (so a call inside a function is
//! differentiated through its own gradient function, to [`MAX_DEPTH`] levels).
//!
//! Invariants: a gradient function is made once per function and choice of arguments and results,
//! and kept in [`LibraryState::added`] until the pass appends those to the module; names of new
//! functions are free among the module's graphs and the ones added.

use rustc_hash::{FxHashMap, FxHashSet};

use super::GradientsConfig;
use crate::ir::functions::{ARG_OP, CONTROL_OUTPUTS_ATTR, RETVAL_OP};
use crate::ir::{AttrValue, DType, Graph, Node, NodeId, NodeKind};
use crate::passes::error::PassError;

/// How deeply gradient functions may nest (a call in a function in a function ...).
pub const MAX_DEPTH: usize = 32;

/// What lives across the graphs of one run of the pass.
#[derive(Default)]
pub struct LibraryState {
    /// The gradient and loop functions made so far, in the order they were made.
    pub added: Vec<Graph>,
    /// The gradient function of (function, differentiated arguments, differentiated results).
    cache: FxHashMap<(String, Vec<usize>, Vec<usize>), String>,
    /// Graph names in use (the module's and the added ones).
    taken: FxHashSet<String>,
    depth: usize,
}

/// The module's graphs (the one being expanded left out) and the state of the pass.
pub struct Library<'m> {
    pub graphs: &'m [Graph],
    pub state: &'m mut LibraryState,
    pub config: GradientsConfig,
}

/// An argument or result of a function: its position and element type.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub node: NodeId,
    pub dtype: DType,
}

/// True for the element types gradients flow through.
pub fn is_differentiable(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::C64 | DType::C128)
}

impl LibraryState {
    /// A state knowing the names of `graphs`.
    pub fn new(graphs: &[Graph]) -> LibraryState {
        LibraryState { taken: graphs.iter().map(|g| g.name.clone()).collect(), ..LibraryState::default() }
    }
}

impl Library<'_> {
    /// The function named `name`, among the module's graphs and the added ones.
    pub fn function(&self, name: &str) -> Option<&Graph> {
        self.state.added.iter().chain(self.graphs).find(|g| g.name == name)
    }

    /// A free graph name: `base`, or `base_1`, `base_2`, ...
    pub fn fresh_name(&mut self, base: &str) -> String {
        let name = if self.state.taken.contains(base) {
            (1..).map(|i| format!("{base}_{i}")).find(|c| !self.state.taken.contains(c)).unwrap_or_default()
        } else {
            base.to_string()
        };
        self.state.taken.insert(name.clone());
        name
    }

    /// Adds a finished function.
    pub fn add(&mut self, graph: Graph) {
        self.state.taken.insert(graph.name.clone());
        self.state.added.push(graph);
    }

    /// The name of the gradient function of `function` with respect to its arguments `args`
    /// (positions), given the gradients of its results `results` (positions): arguments are the
    /// function's own, then one gradient per result of `results`; results are one gradient per
    /// argument of `args`. Errors met while expanding it are appended to `errors`.
    pub fn gradient_function(
        &mut self,
        function: &str,
        args: &[usize],
        results: &[usize],
        errors: &mut Vec<PassError>,
    ) -> Result<String, String> {
        let key = (function.to_string(), args.to_vec(), results.to_vec());
        if let Some(name) = self.state.cache.get(&key) {
            return Ok(name.clone());
        }
        if self.state.depth >= MAX_DEPTH {
            return Err(format!("gradient functions nest deeper than {MAX_DEPTH} levels at `{function}`"));
        }
        let Some(f) = self.function(function) else {
            return Err(format!("the module has no function `{function}`"));
        };
        let mut g = f.clone();
        g.name = self.fresh_name(&format!("{function}_grad"));
        // The copy runs for its values; effects stay with the forward call.
        g.attrs.remove(CONTROL_OUTPUTS_ATTR);
        let (fargs, frets) = signature(&g)?;
        let ret_inputs: Vec<(NodeId, u32)> = frets
            .iter()
            .map(|r| {
                let input = g.data_inputs(r.node).first().map(|i| (i.src, i.output.unwrap_or(0)));
                input.ok_or_else(|| format!("result `{}` of `{function}` has no input", g.node(r.node).name))
            })
            .collect::<Result<_, _>>()?;
        for r in &frets {
            g.remove_node(r.node);
        }
        let mut grad_args = Vec::with_capacity(results.len());
        for (k, &j) in results.iter().enumerate() {
            let slot = frets.get(j).ok_or_else(|| format!("`{function}` has no result {j}"))?;
            let name = g.unique_name(&format!("grad_result_{j}"));
            let node = Node::op(name, ARG_OP)
                .with_attr("T", AttrValue::Type(slot.dtype))
                .with_attr("index", AttrValue::Int((fargs.len() + k) as i64));
            grad_args.push(add(&mut g, node)?);
        }
        let mut outputs: Vec<(NodeId, u32)> = Vec::with_capacity(args.len());
        if results.is_empty() {
            for &i in args {
                let x = fargs.get(i).ok_or_else(|| format!("`{function}` has no argument {i}"))?;
                let node = Node::op(g.unique_name(&format!("zeros_{i}")), "ZerosLike")
                    .with_attr("T", AttrValue::Type(x.dtype));
                let z = add(&mut g, node)?;
                g.add_data_input(z, x.node, 0, crate::syntax::Span::DETACHED);
                outputs.push((z, 0));
            }
        } else {
            let call = Node {
                kind: NodeKind::Gradients {
                    num_ys: results.len() as u32,
                    num_xs: args.len() as u32,
                    has_grad_ys: true,
                },
                ..Node::op(g.unique_name("gradients_of_body"), "gradients")
            };
            let call = add(&mut g, call)?;
            let mut edges: Vec<(NodeId, u32)> = results.iter().map(|&j| ret_inputs[j]).collect();
            for &i in args {
                let x = fargs.get(i).ok_or_else(|| format!("`{function}` has no argument {i}"))?;
                edges.push((x.node, 0));
            }
            edges.extend(grad_args.iter().map(|&a| (a, 0)));
            g.add_data_inputs(call, &edges, crate::syntax::Span::DETACHED);
            outputs.extend((0..args.len()).map(|k| (call, k as u32)));
        }
        // Identities keep each result's input distinct from the gradients call until it expands.
        for (k, (&i, &(src, output))) in args.iter().zip(&outputs).enumerate() {
            let node = Node::op(g.unique_name(&format!("grad_arg_{i}")), RETVAL_OP)
                .with_attr("T", AttrValue::Type(fargs[i].dtype))
                .with_attr("index", AttrValue::Int(k as i64));
            let r = add(&mut g, node)?;
            g.add_data_input(r, src, output, crate::syntax::Span::DETACHED);
        }
        self.state.depth += 1;
        let config = self.config.clone();
        let found = super::expand_gradients_with(&mut g, &config, self);
        self.state.depth -= 1;
        // An argument no result depends on has a zero gradient, as TensorFlow's function gradients
        // give; that is not worth a warning.
        errors.extend(found.into_iter().filter(|e| !matches!(e, PassError::UnconnectedGradient { .. })));
        let name = g.name.clone();
        self.add(g);
        self.state.cache.insert(key, name.clone());
        Ok(name)
    }
}

/// Adds `node` to a graph being built, whose names were made unique.
fn add(g: &mut Graph, node: Node) -> Result<NodeId, String> {
    let name = node.name.to_string();
    g.add_node(node).map_err(|_| format!("`{name}` is taken in `{}`", g.name))
}

/// The `_Arg` and `_Retval` nodes of a function, by index, with their element types.
pub fn signature(f: &Graph) -> Result<(Vec<Slot>, Vec<Slot>), String> {
    let mut args: Vec<(i64, Slot)> = Vec::new();
    let mut rets: Vec<(i64, Slot)> = Vec::new();
    for id in f.node_ids() {
        let node = f.node(id);
        let list = match &*node.op {
            ARG_OP => &mut args,
            RETVAL_OP => &mut rets,
            _ => continue,
        };
        let index = node.attrs.get_int("index").ok_or_else(|| format!("`{}` has no index", node.name))?;
        let dtype =
            node.attrs.get("T").and_then(AttrValue::as_type).ok_or_else(|| format!("`{}` has no T", node.name))?;
        list.push((index, Slot { node: id, dtype }));
    }
    args.sort_by_key(|(i, _)| *i);
    rets.sort_by_key(|(i, _)| *i);
    let ok = |list: &[(i64, Slot)]| list.iter().enumerate().all(|(k, (i, _))| *i == k as i64);
    if !ok(&args) || !ok(&rets) {
        return Err(format!("the indices of `{}`'s arguments or results are not 0, 1, 2, ...", f.name));
    }
    Ok((args.into_iter().map(|(_, s)| s).collect(), rets.into_iter().map(|(_, s)| s).collect()))
}
