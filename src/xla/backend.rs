//! `run --backend pjrt`: a rewritten (tagged) graph run on a PJRT plugin.
//!
//! Order of a run: find and load the plugin (refusing a TPU plugin at once
//! on a machine without TPU devices, and keeping libtpu off the cloud
//! metadata server with `TPU_SKIP_MDS_QUERY`); create a client (a CPU
//! plugin is asked for as many devices as the device assignment uses);
//! then, per cluster in text order: emit its StableHLO module
//! ([`super::stablehlo::emit_module`]), compile it with the replica count
//! and device assignment, copy its arguments to every replica's device,
//! and execute it `steps` times. Variables stay on the devices between
//! steps (their results replace their argument buffers, which the program
//! aliases) and are fetched after the last step with the outputs.
//!
//! Host ops the device program reads (feeds, defaults, constants) and
//! variable initialisers run once on the host with the simulator's
//! kernels. The result has the simulator driver's shape
//! ([`crate::exec::driver::RunOutcome`]), with outputs named as the
//! tagged graph's `output_<i>_shard_<r>` fetch identities.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::{Client, ClientConfig, DeviceBuffer};
use super::error::XlaError;
use super::host::MissingFeed;
use super::stablehlo::{self, ArgSource};
use super::{ffi, plugin};
use crate::exec::driver::RunOutcome;
use crate::exec::Tensor;
use crate::ir::Graph;
use crate::lower::DeviceAssignment;
use crate::passes::form_clusters;

/// Settings of a PJRT run.
#[derive(Clone, Debug, Default)]
pub struct RunConfig<'a> {
    /// `--pjrt-plugin`.
    pub plugin: Option<&'a Path>,
    /// Replicated steps (each `steps_per_run` device iterations).
    pub steps: u32,
    /// Device iterations per step, looped on the device.
    pub steps_per_run: u32,
    /// Feeds: tensor name → value.
    pub feeds: &'a [(String, Tensor)],
}

/// Where a run spent its time.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    pub load: Duration,
    pub client: Duration,
    pub emit: Duration,
    pub compile: Duration,
    pub transfer: Duration,
    /// Every `execute` call, summed.
    pub execute: Duration,
    pub executions: u32,
}

/// A PJRT run's results and timings.
pub struct Outcome {
    pub run: RunOutcome,
    pub timings: Timings,
}

/// Loads the plugin found by `flag`, `$TPU_REWRITE_PJRT_PLUGIN` or the cache.
pub fn load_plugin(flag: Option<&Path>) -> Result<Arc<ffi::Plugin>, XlaError> {
    let path = plugin::locate(flag)?;
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if name.contains("tpu") {
        if std::env::var_os("TPU_SKIP_MDS_QUERY").is_none() {
            // Single-threaded at this point of the CLI; keeps libtpu off the metadata server.
            std::env::set_var("TPU_SKIP_MDS_QUERY", "1");
        }
        let has_tpu = ["/dev/accel0", "/dev/vfio/0"].iter().any(|p| Path::new(p).exists())
            || std::fs::read_dir("/dev/vfio").is_ok_and(|d| d.filter_map(Result::ok).any(|e| e.file_name() != "vfio"));
        if !has_tpu {
            return Err(XlaError::NoDevices {
                path: path.display().to_string(),
                kind: "TPU".into(),
                looked: "/dev/accel*, /dev/vfio/*".into(),
            });
        }
    }
    ffi::load(&path).map(Arc::new)
}

/// Whether the plugin takes `cpu_device_count` (XLA's CPU plugins).
fn is_cpu_plugin(plugin: &ffi::Plugin) -> bool {
    plugin.path.file_name().is_some_and(|n| n.to_string_lossy().to_lowercase().contains("cpu"))
}

/// Runs every cluster of the tagged `graph` on the plugin.
pub fn run(graph: &Graph, assignment: &DeviceAssignment, config: &RunConfig) -> Result<Outcome, XlaError> {
    let mut timings = Timings::default();
    let t = Instant::now();
    let plugin = load_plugin(config.plugin)?;
    timings.load = t.elapsed();
    let (clusters, errors) = form_clusters(graph);
    if let Some(e) = errors.first() {
        return Err(XlaError::UnsupportedGraph { message: e.to_string() });
    }
    if clusters.is_empty() {
        return Err(XlaError::UnsupportedGraph {
            message: "the graph has no replicate cluster: nothing runs on a device".into(),
        });
    }
    let devices = assignment
        .cores
        .iter()
        .flatten()
        .map(|c| (c.task * assignment.topology.cores_per_host + c.core) as usize + 1)
        .max()
        .unwrap_or(1)
        .max(clusters.iter().map(|c| c.num_replicas as usize).max().unwrap_or(1));
    let t = Instant::now();
    let client_config = ClientConfig { cpu_device_count: is_cpu_plugin(&plugin).then_some(devices) };
    let client = Client::new(plugin, &client_config)?;
    if client.device_count() == 0 {
        return Err(XlaError::Devices {
            program: "the run".into(),
            needed: 1,
            available: 0,
            platform: client.platform.clone(),
        });
    }
    timings.client = t.elapsed();

    let mut fetched = Vec::new();
    let mut mirrors: BTreeMap<String, Vec<Tensor>> = BTreeMap::new();
    let emit_config = stablehlo::Config {
        steps_per_run: config.steps_per_run.max(1),
        feeds: config.feeds,
        missing_feed: MissingFeed::Error,
    };
    for cluster in &clusters {
        let t = Instant::now();
        let emitted = stablehlo::emit_module(graph, cluster, assignment, &emit_config)?;
        timings.emit += t.elapsed();
        let program = format!("cluster `{}`", cluster.name);
        let t = Instant::now();
        let exe = client.compile(&program, &emitted.module, emitted.num_replicas, emitted.num_partitions)?;
        timings.compile += t.elapsed();
        let replicas = emitted.num_replicas;
        let t = Instant::now();
        // buffers[replica][argument]
        let mut buffers: Vec<Vec<DeviceBuffer>> = Vec::with_capacity(replicas);
        for r in 0..replicas {
            let mut row = Vec::with_capacity(emitted.args.len());
            for (arg, values) in emitted.args.iter().zip(&emitted.arg_values) {
                row.push(client.to_device(&values[r], r, &stablehlo::arg_name(graph, arg))?);
            }
            buffers.push(row);
        }
        timings.transfer += t.elapsed();
        let first_var =
            emitted.args.iter().position(|a| matches!(a, ArgSource::Variable(_))).unwrap_or(emitted.args.len());
        let num_outputs = emitted.outputs.len();
        let mut last: Vec<Vec<DeviceBuffer>> = Vec::new();
        for _ in 0..config.steps.max(1) {
            let t = Instant::now();
            let args: Vec<Vec<&DeviceBuffer>> = buffers.iter().map(|row| row.iter().collect()).collect();
            let mut outputs = exe.execute(&args)?;
            timings.execute += t.elapsed();
            timings.executions += 1;
            // Variables: results after the outputs replace their (donated) arguments.
            for (row, out) in buffers.iter_mut().zip(outputs.iter_mut()) {
                let vars = out.split_off(num_outputs);
                row.truncate(first_var);
                row.extend(vars);
            }
            last = outputs;
        }
        for (i, out) in emitted.outputs.iter().enumerate() {
            for (r, row) in last.iter().enumerate() {
                let name = output_name(graph, out.node, r);
                fetched.push((name.clone(), row[i].to_host(&name)?));
            }
        }
        for (v, &handle) in emitted.variables.iter().enumerate() {
            let name = graph.node(handle).name.to_string();
            let mut copies = Vec::with_capacity(replicas);
            for row in &buffers {
                copies.push(row[first_var + v].to_host(&name)?);
            }
            mirrors.insert(name, copies);
        }
        let _ = first_var;
    }
    let variables = mirrors.iter().filter_map(|(k, v)| v.first().map(|t| (k.clone(), t.clone()))).collect();
    let iterations = u64::from(config.steps.max(1)) * u64::from(config.steps_per_run.max(1));
    Ok(Outcome { run: RunOutcome { fetched, variables, mirrors, iterations }, timings })
}

/// The fetch name of output `node`'s replica `r`: the tagged graph's
/// `Identity` reading it (`output_<i>_shard_<r>:0`), else `node:r`.
fn output_name(graph: &Graph, node: crate::ir::NodeId, r: usize) -> String {
    graph
        .uses(node)
        .into_iter()
        .map(|(user, _)| user)
        .find(|&user| {
            &*graph.node(user).op == "Identity"
                && graph.data_inputs(user).first().is_some_and(|i| i.src == node && i.output.unwrap_or(0) as usize == r)
        })
        .map(|user| format!("{}:0", graph.node(user).name))
        .unwrap_or_else(|| format!("{}:{r}", graph.node(node).name))
}
