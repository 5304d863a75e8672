//! Outside compilation inside one module: the device program reaches the
//! host programs through host calls instead of being split into stages.
//!
//! Meaning: the stages of a cluster ([`super::stage`]) are joined into one
//! `@step`; after the ops of stage k, host program k (the
//! outside-compilation ops that follow stage k) is called with the device
//! values it reads and returns the values later ops read. Two forms:
//!
//! - [`HostTransfer::Callback`]: one `stablehlo.custom_call
//!   @tpu_rewrite_host` (`api_version = 4`, typed XLA FFI) per host
//!   program. Its operands are the replica id (`tensor<i32>`), then the
//!   device values; its results are the host values; `backend_config`
//!   carries `oc_program` (k) and `run` (the id under which the run's host
//!   programs are registered, [`crate::xla::callback`]). A PJRT client
//!   must register a handler for the target on its platform.
//! - [`HostTransfer::SendRecv`]: as TensorFlow's TPU bridge writes it, one
//!   `stablehlo.send` per device value and one `stablehlo.recv` per host
//!   value, each with `is_host_transfer = true`, its own channel handle
//!   (type 2 device→host, 3 host→device) and the
//!   `_xla_host_transfer_handler_name` / `_xla_host_transfer_rendezvous`
//!   frontend attributes, threaded on one token. For TPU and GPU runtimes;
//!   untested on hardware.
//!
//! Invariants: host program k's operands are computed by device ops or by
//! host programs before k; constants are folded on both sides. Cost:
//! linear in the program.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::text::{element, Ctx, Ty, Val};
use super::trace::{Emitter, Trace};
use super::{Analysis, ArgSource, Program};
use crate::ir::{DType, Graph, NodeId};
use crate::xla::error::XlaError;

/// The custom-call target of the host callback.
pub const TARGET: &str = "tpu_rewrite_host";

/// How a device program reaches its outside-compilation ops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum HostTransfer {
    /// One module; `stablehlo.custom_call` to a host callback (XLA FFI).
    #[default]
    Callback,
    /// One module; host `stablehlo.send` / `stablehlo.recv` (TPU, GPU).
    SendRecv,
    /// One module per stage; the host runs its ops between executions.
    Stages,
}

/// The form of one host call in a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallForm {
    /// A custom call carrying the run's registry id.
    Callback {
        /// The `run` attribute: the registry id of the run's host programs.
        run: u64,
    },
    /// Host send/recv.
    SendRecv {
        /// The channel handle of its first transfer (the next ones follow).
        first_channel: i64,
    },
}

/// One host program call inside the joined `@step`.
#[derive(Clone, Debug)]
pub struct HostCall {
    /// The host program's index (`oc_program`).
    pub index: usize,
    /// The position in the program's nodes before which the call is printed.
    pub at: usize,
    /// The outside-compilation ops it runs, in dependency order.
    pub ops: Vec<NodeId>,
    /// Device values it reads, in operand order (after the replica id).
    pub operands: Vec<(NodeId, u32)>,
    /// Values it returns, in result order.
    pub results: Vec<(NodeId, u32)>,
    /// Callback or send/recv.
    pub form: CallForm,
}

/// Joins the stages into one program with a host call after each stage
/// that has host ops.
pub(super) fn join(
    graph: &Graph,
    analysis: &Analysis,
    programs: Vec<Program>,
    host_ops: &[Vec<NodeId>],
    traced: &Trace,
    transfer: HostTransfer,
    run: u64,
) -> (Program, Vec<HostCall>) {
    let constant = |key: &(NodeId, u32)| traced.values.get(key).is_some_and(|t| t.constant);
    let device: HashSet<NodeId> = programs.iter().flat_map(|p| p.nodes.iter().copied()).collect();
    let producer: HashMap<NodeId, usize> =
        host_ops.iter().enumerate().flat_map(|(k, ops)| ops.iter().map(move |&id| (id, k))).collect();
    // Values each host program hands on: read by a device op or a later host program.
    let mut needed: Vec<BTreeSet<(NodeId, u32)>> = vec![BTreeSet::new(); host_ops.len()];
    let readers = device.iter().copied().chain(producer.keys().copied());
    for id in readers {
        let own = producer.get(&id).copied();
        for input in graph.data_inputs(id) {
            let key = (input.src, input.output.unwrap_or(0));
            if let Some(&k) = producer.get(&input.src) {
                if own != Some(k) && !constant(&key) {
                    needed[k].insert(key);
                }
            }
        }
    }
    let mut args: Vec<ArgSource> = Vec::new();
    let mut nodes = Vec::new();
    let mut calls = Vec::new();
    let mut channel = 1i64;
    for program in &programs {
        nodes.extend(program.nodes.iter().copied());
        args.extend(program.args.iter().filter(|a| !matches!(a, ArgSource::Carried(..))).cloned());
        let k = program.stage;
        let Some(ops) = host_ops.get(k).filter(|ops| !ops.is_empty()) else { continue };
        let mut operands = Vec::new();
        let mut seen = HashSet::new();
        for &id in ops {
            for input in graph.data_inputs(id) {
                let key = (input.src, input.output.unwrap_or(0));
                let earlier = producer.get(&input.src).is_some_and(|&j| j < k);
                let replicated = &*graph.node(input.src).op == "TPUReplicatedInput";
                if constant(&key) || !(device.contains(&input.src) || earlier || replicated) {
                    continue;
                }
                if replicated {
                    args.push(ArgSource::Replicated(input.src));
                }
                if seen.insert(key) {
                    operands.push(key);
                }
            }
        }
        let results: Vec<(NodeId, u32)> = needed[k].iter().copied().collect();
        let form = match transfer {
            HostTransfer::SendRecv => CallForm::SendRecv { first_channel: channel },
            _ => CallForm::Callback { run },
        };
        channel += (operands.len() + results.len()) as i64;
        calls.push(HostCall { index: k, at: nodes.len(), ops: ops.clone(), operands, results, form });
    }
    let mut unique = HashSet::new();
    args.retain(|a| unique.insert(a.clone()));
    args.sort_by_key(ArgSource::rank);
    let joined = Program {
        nodes,
        args,
        outputs: analysis.whole.outputs.clone(),
        carried: Vec::new(),
        stage: 0,
        stages: 1,
        calls: calls.clone(),
    };
    (joined, calls)
}

/// Prints one host call; its results join the emitter's values.
pub(super) fn emit(e: &mut Emitter, c: &mut Ctx, call: &HostCall, cluster: &str) -> Result<(), XlaError> {
    let mut operands = Vec::with_capacity(call.operands.len() + 1);
    for &key in &call.operands {
        let v = e.value(c, key)?;
        // A padded buffer (ops::dynamic_shape) would reach the host op with its padding.
        if c.dynamic.contains_key(&v.name) {
            return Err(XlaError::lowering(
                e.graph.node(key.0),
                "a host op reads this value, a buffer whose size depends on values: on PJRT such a value \
                 can only be a plain program output (docs/xla.md, \"Ops whose output size depends on values\")",
            ));
        }
        operands.push(v);
    }
    let mut types = Vec::with_capacity(call.results.len());
    for key in &call.results {
        let t = e.traced.values.get(key).ok_or_else(|| {
            XlaError::lowering(e.graph.node(key.0), format!("output {} of a host op has no traced value", key.1))
        })?;
        types.push(t.ty.clone());
    }
    let results = match call.form {
        CallForm::Callback { run } => {
            operands.insert(0, c.replica_id(DType::I32));
            custom_call(c, call.index, run, &operands, &types)
        }
        CallForm::SendRecv { first_channel } => send_recv(c, call.index, first_channel, cluster, &operands, &types),
    };
    for (key, v) in call.results.iter().zip(results) {
        e.env.insert(*key, v);
    }
    Ok(())
}

fn signature(vals: &[Val]) -> (String, String) {
    let names: Vec<&str> = vals.iter().map(|v| v.name.as_str()).collect();
    let types: Vec<String> = vals.iter().map(|v| v.ty.mlir()).collect();
    (names.join(", "), types.join(", "))
}

/// `stablehlo.custom_call @tpu_rewrite_host`, typed FFI.
fn custom_call(c: &mut Ctx, index: usize, run: u64, operands: &[Val], types: &[Ty]) -> Vec<Val> {
    let (names, operand_types) = signature(operands);
    let result_types: Vec<String> = types.iter().map(Ty::mlir).collect();
    let attrs = format!(
        "{{api_version = 4 : i32, backend_config = {{oc_program = {index} : i64, run = {run} : i64}}, \
         call_target_name = \"{TARGET}\", has_side_effect = true}}"
    );
    let r = c.fresh();
    let head = match types.len() {
        0 => String::new(),
        1 => format!("{r} = "),
        n => format!("{r}:{n} = "),
    };
    c.line(&format!(
        "{head}\"stablehlo.custom_call\"({names}) {attrs} : ({operand_types}) -> ({})",
        result_types.join(", ")
    ));
    results(&r, types)
}

/// The values of an op with `types.len()` results named `r`.
fn results(r: &str, types: &[Ty]) -> Vec<Val> {
    match types.len() {
        1 => vec![Val { name: r.to_string(), ty: types[0].clone() }],
        _ => types.iter().enumerate().map(|(i, t)| Val { name: format!("{r}#{i}"), ty: t.clone() }).collect(),
    }
}

/// Host send/recv as TensorFlow's bridge writes it, on one token chain.
fn send_recv(c: &mut Ctx, index: usize, first: i64, cluster: &str, operands: &[Val], types: &[Ty]) -> Vec<Val> {
    let frontend = |ty: &Ty, key: String| {
        format!(
            "mhlo.frontend_attributes = {{_xla_host_transfer_handler_name = \"tf_rendezvous\", \
             _xla_host_transfer_original_type = \"{}\", _xla_host_transfer_rendezvous = \"{key}\"}}",
            element(ty.dtype)
        )
    };
    let mut token = c.fresh();
    c.line(&format!("{token} = \"stablehlo.after_all\"() : () -> !stablehlo.token"));
    let mut channel = first;
    for (i, v) in operands.iter().enumerate() {
        let t = c.fresh();
        c.line(&format!(
            "{t} = \"stablehlo.send\"({}, {token}) {{channel_handle = #stablehlo.channel_handle<handle = {channel}, type = 2>, \
             is_host_transfer = true, {}}} : ({}, !stablehlo.token) -> !stablehlo.token",
            v.name,
            frontend(&v.ty, format!("{cluster}_oc{index}_dtoh_{i}")),
            v.ty.mlir()
        ));
        token = t;
        channel += 1;
    }
    let mut out = Vec::with_capacity(types.len());
    for (j, ty) in types.iter().enumerate() {
        let r = c.fresh();
        c.line(&format!(
            "{r}:2 = \"stablehlo.recv\"({token}) {{channel_handle = #stablehlo.channel_handle<handle = {channel}, type = 3>, \
             is_host_transfer = true, {}}} : (!stablehlo.token) -> ({}, !stablehlo.token)",
            frontend(ty, format!("{cluster}_oc{index}_htod_{j}")),
            ty.mlir()
        ));
        out.push(Val { name: format!("{r}#0"), ty: ty.clone() });
        token = format!("{r}#1");
        channel += 1;
    }
    out
}
