//! Host-side values a device program needs: its replicated inputs, the
//! tensors it reads from outside the cluster, and the initial values of
//! its variables, computed with the simulator's pure kernels.
//!
//! Meaning: every node outside the clusters that the device program
//! depends on is evaluated once, memoized, in dependency order; a fed
//! tensor (`name:i` or `name`) replaces its node's output. A variable's
//! initial value is the value of the last `AssignVariableOp` outside any
//! cluster that writes it (what the init program does). A host
//! `ReadVariableOp` (e.g. a Keras `Normalization` layer's statistics, read
//! when the layer is built) gives that initial value, which every step
//! reads; a host read of a variable that a cluster op writes is refused,
//! since host values are computed once. Cost: one kernel call per host
//! node the program depends on.

use std::collections::{HashMap, HashSet};

use super::error::XlaError;
use crate::exec::{run_kernel, run_kernel_without_effects, Tensor};
use crate::ir::{DType, Graph, NodeId};
use crate::passes::common::TPU_REPLICATE;
use crate::xla::stablehlo::ops::state::handle_operands;

/// What an unfed `Placeholder` becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissingFeed {
    /// Ones of its declared shape (for printing a module without data;
    /// ones, not zeros, so that tracing an integer division of two
    /// placeholders does not fail).
    Ones,
    /// An error (for running).
    Error,
}

/// Checks that every feed names an output of a node of `graph`
/// (`name` or `name:k`), as the simulator does: a feed that matches
/// nothing would otherwise be ignored.
pub fn check_feed_names(graph: &Graph, feeds: &[(String, Tensor)]) -> Result<(), XlaError> {
    for (name, _) in feeds {
        let unknown = |reason: String| XlaError::UnknownFeed { name: name.clone(), reason };
        if name.starts_with('^') {
            return Err(unknown("an op (`^x`) cannot be fed".into()));
        }
        let (node, output) = match name.rsplit_once(':') {
            Some((n, k)) => (n, k.parse::<u32>().map_err(|_| unknown("the output index is not a number".into()))?),
            None => (name.as_str(), 0),
        };
        let id = graph.find(node).ok_or_else(|| unknown(format!("graph `@{}` has no node `{node}`", graph.name)))?;
        if let Some(outputs) = crate::ir::verify::output_count(graph, id) {
            if output >= outputs {
                return Err(unknown(format!("`{node}` has {outputs} output(s)")));
            }
        }
    }
    Ok(())
}

/// A memoizing evaluator of host nodes.
pub struct Host<'a> {
    graph: &'a Graph,
    feeds: HashMap<String, Tensor>,
    missing: MissingFeed,
    memo: HashMap<NodeId, Vec<Tensor>>,
    /// False: host ops that print or assert give their values only.
    effects: bool,
    /// The variables (`VarHandleOp`s) some cluster op writes; computed at
    /// the first host read of a variable.
    written: Option<HashSet<NodeId>>,
    /// False: host reads of variables are refused (after the step, where
    /// the run reports the variables themselves).
    variable_reads: bool,
}

impl<'a> Host<'a> {
    /// An evaluator over `graph` with `feeds` (tensor name → value).
    pub fn new(graph: &'a Graph, feeds: &[(String, Tensor)], missing: MissingFeed) -> Host<'a> {
        let feeds = feeds.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        Host { graph, feeds, missing, memo: HashMap::new(), effects: true, written: None, variable_reads: true }
    }

    /// The same evaluator, for compiling only: `Print`, `PrintV2` and
    /// `Assert` write nothing and stop nothing.
    pub fn without_effects(mut self) -> Host<'a> {
        self.effects = false;
        self
    }

    /// The same evaluator, refusing host reads of variables (for host ops
    /// after the step: the run reports the final variables instead).
    pub fn without_variable_reads(mut self) -> Host<'a> {
        self.variable_reads = false;
        self
    }

    /// Gives node `id` the values `outputs` (a device result, e.g. a
    /// `TPUReplicatedOutput`'s per-replica values), so host ops after the
    /// device step read them.
    pub fn seed(&mut self, id: NodeId, outputs: Vec<Tensor>) {
        self.memo.insert(id, outputs);
    }

    /// Output `output` of host node `id`.
    pub fn value(&mut self, id: NodeId, output: u32) -> Result<Tensor, XlaError> {
        let name = &self.graph.node(id).name;
        for key in [format!("{name}:{output}"), if output == 0 { name.to_string() } else { String::new() }] {
            if let Some(t) = self.feeds.get(&key) {
                return Ok(t.clone());
            }
        }
        let outputs = self.outputs(id)?;
        outputs
            .get(output as usize)
            .cloned()
            .ok_or_else(|| XlaError::Host { node: name.to_string(), message: format!("has no output {output}") })
    }

    /// Runs host node `id` (and the host nodes it reads) for its effect,
    /// e.g. a `PrintV2` or `Assert` target after the device step.
    pub fn evaluate(&mut self, id: NodeId) -> Result<(), XlaError> {
        self.outputs(id).map(|_| ())
    }

    fn outputs(&mut self, root: NodeId) -> Result<Vec<Tensor>, XlaError> {
        // Iterative post-order: a long chain of host ops must not overflow the stack.
        let mut stack = vec![(root, false)];
        while let Some((id, ready)) = stack.pop() {
            if self.memo.contains_key(&id) {
                continue;
            }
            let inputs = self.graph.data_inputs(id);
            if !ready {
                stack.push((id, true));
                for i in inputs.iter().rev() {
                    if !self.memo.contains_key(&i.src) {
                        stack.push((i.src, false));
                    }
                }
                continue;
            }
            let node = self.graph.node(id);
            if node.attrs.get_str(TPU_REPLICATE).is_some() {
                return Err(XlaError::UnsupportedGraph {
                    message: format!(
                        "host op depends on `{}`, an op of cluster `{}`; the pjrt backend runs host ops before the device step and, for --fetch, pure host ops on its results after it",
                        node.name,
                        node.attrs.get_str(TPU_REPLICATE).unwrap_or_default()
                    ),
                });
            }
            if &*node.op == "ReadVariableOp" {
                if let Some(handle) = inputs.first().map(|i| i.src).filter(|&h| self.is_variable(h)) {
                    let value = self.host_read(id, handle)?;
                    self.memo.insert(id, vec![value]);
                    continue;
                }
            }
            let mut args = Vec::with_capacity(inputs.len());
            for i in &inputs {
                args.push(self.value(i.src, i.output.unwrap_or(0))?);
            }
            let result = match &*node.op {
                "Placeholder" => match self.fed(id) {
                    Some(t) => vec![t],
                    None => vec![self.unfed(id)?],
                },
                "VarHandleOp" | "MirroredVarHandleOp" => Vec::new(),
                op if !self.effects => run_kernel_without_effects(op, &node.attrs, &args)
                    .map_err(|e| XlaError::Host { node: node.name.to_string(), message: e.to_string() })?,
                op => run_kernel(op, &node.attrs, &args)
                    .map_err(|e| XlaError::Host { node: node.name.to_string(), message: e.to_string() })?,
            };
            self.memo.insert(id, result);
        }
        Ok(self.memo.get(&root).cloned().unwrap_or_default())
    }

    /// True when `id` is a variable's handle op.
    fn is_variable(&self, id: NodeId) -> bool {
        matches!(&*self.graph.node(id).op, "VarHandleOp" | "MirroredVarHandleOp")
    }

    /// The value host op `read` (a `ReadVariableOp`) reads from variable
    /// `handle`: its initial value, unless a cluster op writes it.
    fn host_read(&mut self, read: NodeId, handle: NodeId) -> Result<Tensor, XlaError> {
        let graph = self.graph;
        if !self.variable_reads {
            return Err(XlaError::Host {
                node: graph.node(read).name.to_string(),
                message: format!(
                    "reads variable `{}` on the host after the step; the run reports the variables' final values \
                     instead",
                    graph.node(handle).name
                ),
            });
        }
        let written = self.written.get_or_insert_with(|| {
            let mut written = HashSet::new();
            for id in graph.nodes_in_order() {
                let node = graph.node(id);
                let op = &*node.op;
                if node.attrs.get_str(TPU_REPLICATE).is_none()
                    || matches!(op, "ReadVariableOp" | "VarIsInitializedOp" | "ResourceGather")
                {
                    continue;
                }
                let handles = handle_operands(op);
                written.extend(graph.data_inputs(id).iter().take(handles).map(|i| i.src));
            }
            written
        });
        if written.contains(&handle) {
            return Err(XlaError::Host {
                node: graph.node(read).name.to_string(),
                message: format!(
                    "reads variable `{}` on the host, which the step writes; the pjrt backend computes host values \
                     once, before the first step (read it inside the cluster instead)",
                    graph.node(handle).name
                ),
            });
        }
        self.initial_value(handle)
    }

    /// The fed value of placeholder `id` (`name:0` or `name`).
    fn fed(&self, id: NodeId) -> Option<Tensor> {
        let name = &self.graph.node(id).name;
        self.feeds.get(&format!("{name}:0")).or_else(|| self.feeds.get(&**name)).cloned()
    }

    /// An unfed placeholder: ones of its shape, or an error.
    fn unfed(&self, id: NodeId) -> Result<Tensor, XlaError> {
        let node = self.graph.node(id);
        let fail = |why: &str| XlaError::Host { node: node.name.to_string(), message: why.to_string() };
        if self.missing == MissingFeed::Error {
            return Err(fail("this placeholder is not fed (give it with --feeds or --feed)"));
        }
        let dims = node
            .attrs
            .get("shape")
            .and_then(|s| s.as_shape())
            .and_then(|s| s.dims.clone())
            .ok_or_else(|| fail("an unfed placeholder needs a known `shape`"))?;
        let shape: Vec<usize> = dims.iter().map(|&d| d.max(1) as usize).collect();
        let count: usize = shape.iter().product();
        let dtype = node
            .attrs
            .get("dtype")
            .and_then(|v| v.as_type())
            .ok_or_else(|| fail("an unfed placeholder needs a `dtype`"))?;
        let t = match dtype {
            DType::F32 => Tensor::from_vec(&shape, vec![1f32; count]),
            DType::F64 => Tensor::from_vec(&shape, vec![1f64; count]),
            DType::I32 => Tensor::from_vec(&shape, vec![1i32; count]),
            DType::I64 => Tensor::from_vec(&shape, vec![1i64; count]),
            DType::Bool => Tensor::from_vec(&shape, vec![true; count]),
            DType::BF16 => Tensor::from_vec(&shape, vec![half::bf16::ONE; count]),
            DType::F16 => Tensor::from_vec(&shape, vec![half::f16::ONE; count]),
            DType::I8 => Tensor::from_vec(&shape, vec![1i8; count]),
            DType::U8 => Tensor::from_vec(&shape, vec![1u8; count]),
            DType::I16 => Tensor::from_vec(&shape, vec![1i16; count]),
            DType::U16 => Tensor::from_vec(&shape, vec![1u16; count]),
            DType::U32 => Tensor::from_vec(&shape, vec![1u32; count]),
            DType::U64 => Tensor::from_vec(&shape, vec![1u64; count]),
            other => {
                return Err(fail(&format!("an unfed placeholder of dtype {other} has no stand-in value: feed it")))
            }
        };
        t.map_err(|e| fail(&e.to_string()))
    }

    /// The initial value of the variable `handle`.
    pub fn initial_value(&mut self, handle: NodeId) -> Result<Tensor, XlaError> {
        let graph = self.graph;
        let init = graph
            .nodes_in_order()
            .into_iter()
            .rev()
            .find(|&id| {
                let n = graph.node(id);
                &*n.op == "AssignVariableOp"
                    && n.attrs.get_str(TPU_REPLICATE).is_none()
                    && graph.data_inputs(id).first().is_some_and(|i| i.src == handle)
            })
            .ok_or_else(|| XlaError::Host {
                node: graph.node(handle).name.to_string(),
                message: "this variable has no initialiser (an AssignVariableOp outside the cluster)".into(),
            })?;
        let value = graph.data_inputs(init).get(1).map(|i| (i.src, i.output.unwrap_or(0))).ok_or_else(|| {
            XlaError::Host { node: graph.node(init).name.to_string(), message: "has no value operand".into() }
        })?;
        self.value(value.0, value.1)
    }
}
