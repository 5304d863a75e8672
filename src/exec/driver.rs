//! The driver: runs a lowered module for a number of steps.
//!
//! Order of a run:
//! 1. every node must have a kernel that takes its dtypes ([`check_kernels`]
//!    names every node that does not, before anything runs);
//! 2. the init program (variable initialisers outside the clusters) runs
//!    once on its own, and each initialised variable is written to every
//!    replica's mirrored copy: an assignment outside a cluster writes every
//!    copy;
//! 3. the replicated step runs `steps x steps_per_run` times; feeds go to
//!    the host program and stay the same for every step, fetches are read
//!    after the last step;
//! 4. mirrored variables read from the host side give the primary copy
//!    (replica 0), through the host's `MirroredVarHandleOp`, and host-side
//!    assignments write every copy.
//!
//! Feeding or fetching a tensor that the feed/fetch rule forbids (an op
//! compiled into a cluster) is refused before the run, with the rule named.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::time::Duration;

use super::{check_kernels, ExecError, Feeds, Fetch, Mesh, MeshConfig, Tensor};
use crate::ir::{Graph, Module};
use crate::passes::feed_fetch::{Access, FeedFetchRule};

/// Settings of a run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Replicated steps to run (each `steps_per_run` device iterations).
    pub steps: u32,
    /// The longest any single wait may take.
    pub timeout: Duration,
    /// The longest one step may run (see [`MeshConfig::deadline`]).
    pub deadline: Option<Duration>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig { steps: 1, timeout: Duration::from_secs(30), deadline: None }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// Fetched tensors after the last step, in the order asked (targets,
    /// `^x`, give none).
    pub fetched: Vec<(String, Tensor)>,
    /// Primary (replica 0) values of the mirrored variables, by name.
    pub variables: BTreeMap<String, Tensor>,
    /// Every replica's copy of each mirrored variable, in replica order.
    pub mirrors: BTreeMap<String, Vec<Tensor>>,
    /// Device iterations run.
    pub iterations: u64,
}

/// The name of the host program in a lowered module.
pub const HOST: &str = "host";
/// The name of the init program in a lowered module.
pub const INIT: &str = "init";

/// Checks names against the feed/fetch rule of the rewritten graph.
pub fn check_feeds_and_fetches(tagged: &Graph, feeds: &[String], fetches: &[String]) -> Result<(), ExecError> {
    let rule = FeedFetchRule::new(tagged);
    let named = |tensor: &str| tensor.trim_start_matches('^').split(':').next().unwrap_or_default().to_string();
    for (names, access) in [(feeds, Access::Feed), (fetches, Access::Fetch)] {
        for t in names {
            if let Some(id) = tagged.find(&named(t)) {
                rule.check(tagged, id, access).map_err(|e| ExecError::FeedFetch(Box::new(e)))?;
            }
        }
    }
    Ok(())
}

/// Runs `lowered` with `feeds` (tensor name → value, into the host program)
/// and returns the `fetches` after the last step. A fetch `^x` is a target:
/// op `x` runs each step and gives no value. `on_step` is called after
/// each step with the step index and the fetched values.
pub fn run(
    lowered: &Module,
    feeds: &[(String, Tensor)],
    fetches: &[String],
    config: &RunConfig,
    on_step: &mut dyn FnMut(u64, &[Tensor]),
) -> Result<RunOutcome, ExecError> {
    run_until(lowered, feeds, fetches, config, &mut |i, values| {
        on_step(i, values);
        ControlFlow::Continue(())
    })
}

/// [`run`], where `on_step` also decides after each device iteration
/// whether the run goes on: `ControlFlow::Break` stops it with
/// [`ExecError::Interrupted`] (an embedder checks for Ctrl-C there).
pub fn run_until(
    lowered: &Module,
    feeds: &[(String, Tensor)],
    fetches: &[String],
    config: &RunConfig,
    on_step: &mut dyn FnMut(u64, &[Tensor]) -> ControlFlow<()>,
) -> Result<RunOutcome, ExecError> {
    check_kernels(lowered)?;
    let steps_per_run = lowered.graph(HOST).and_then(|g| g.attrs.get_int("steps_per_run")).unwrap_or(1).max(1) as u64;
    let mesh_config = MeshConfig { timeout: config.timeout, deadline: config.deadline };

    // The step programs, without the init program.
    let step_module =
        Module { header: Vec::new(), graphs: lowered.graphs.iter().filter(|g| g.name != INIT).cloned().collect() };
    let mesh = Mesh::new(&step_module, mesh_config.clone())?;
    if let Some(init) = lowered.graph(INIT) {
        initialise(init, lowered, &mesh, &mesh_config)?;
    }

    let mut step_feeds = Feeds::new();
    for (name, value) in feeds {
        step_feeds.insert(program_of(&mesh, name), name.as_str(), value.clone());
    }
    // `^x` runs op `x` for its effect, as a TensorFlow session target does.
    let (targets, tensors): (Vec<&String>, Vec<&String>) = fetches.iter().partition(|f| f.starts_with('^'));
    let fetch_list: Vec<Fetch> = tensors.iter().map(|f| Fetch::new(program_of(&mesh, f), f.as_str())).collect();
    let target_list: Vec<Fetch> = targets.iter().map(|t| Fetch::new(program_of(&mesh, t), t.as_str())).collect();
    let total = u64::from(config.steps.max(1)) * steps_per_run;
    let mut last = Vec::new();
    for i in 0..total {
        last = mesh.run_step_with_targets(&step_feeds, &fetch_list, &target_list)?;
        if on_step(i, &last).is_break() {
            return Err(ExecError::Interrupted { iterations: i + 1, total });
        }
    }
    let fetched = tensors.into_iter().cloned().zip(last).collect();
    let mirrors = mirrored_variables(&mesh);
    let variables = mirrors.iter().filter_map(|(k, v)| v.first().map(|t| (k.clone(), t.clone()))).collect();
    Ok(RunOutcome { fetched, variables, mirrors, iterations: total })
}

/// The program instance a fed or fetched name (`x`, `x:k`, `^x`) belongs
/// to: the host's, or else the one instance that has such a node (an
/// outside-compilation op with one replica, which the feed/fetch rule
/// allows). Unknown names stay with the host, which reports them.
fn program_of(mesh: &Mesh, tensor: &str) -> String {
    let node = tensor.trim_start_matches('^');
    let node = node.rsplit_once(':').filter(|(_, k)| k.parse::<u32>().is_ok()).map_or(node, |(n, _)| n);
    if mesh.has_node(HOST, node) {
        return HOST.to_string();
    }
    match mesh.instances_with_node(node).as_slice() {
        [only] => only.clone(),
        _ => HOST.to_string(),
    }
}

/// Runs the init program once and copies each variable to its mirrors.
fn initialise(init: &Graph, lowered: &Module, mesh: &Mesh, config: &MeshConfig) -> Result<(), ExecError> {
    let module = Module { header: Vec::new(), graphs: vec![init.clone()] };
    let init_mesh = Mesh::new(&module, config.clone())?;
    let targets: Vec<Fetch> = init
        .nodes_in_order()
        .into_iter()
        .filter(|&id| {
            let op = &*init.node(id).op;
            op.starts_with("Assign") && op.ends_with("VariableOp")
        })
        .map(|id| Fetch::new(INIT, format!("^{}", init.node(id).name)))
        .collect();
    init_mesh.run_step_with_targets(&Feeds::new(), &[], &targets)?;
    let copies = mesh.mirrored_copies();
    for id in init.nodes_in_order() {
        let node = init.node(id);
        if &*node.op != "VarHandleOp" {
            continue;
        }
        let key = node.attrs.get_str("shared_name").filter(|s| !s.is_empty()).unwrap_or(&node.name).to_string();
        let Some(value) = init_mesh.variable(INIT, &key) else { continue };
        // Every replica's copy of the variable.
        for copy in copies.iter().filter(|c| c.var == node.name) {
            mesh.set_device_variable(&copy.device, &copy.name, value.clone());
        }
        if lowered.graph(HOST).is_some_and(|g| g.find(&node.name).is_some()) {
            mesh.set_variable(HOST, &key, value.clone())?;
        }
    }
    Ok(())
}

/// Every replica's copy of each mirrored variable, by variable name, in replica order.
fn mirrored_variables(mesh: &Mesh) -> BTreeMap<String, Vec<Tensor>> {
    let mut found: BTreeMap<String, Vec<(u32, Tensor)>> = BTreeMap::new();
    for copy in mesh.mirrored_copies() {
        if let Some(v) = mesh.device_variable(&copy.device, &copy.name) {
            let copies = found.entry(copy.var.to_string()).or_default();
            // A replica whose cores each hold a copy counts once: its first core's.
            if !copies.iter().any(|(r, _)| *r == copy.replica) {
                copies.push((copy.replica, v));
            }
        }
    }
    found
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_by_key(|(r, _)| *r);
            (k, v.into_iter().map(|(_, t)| t).collect())
        })
        .collect()
}
