//! The kernels that need the device: variables and their mirrored copies,
//! channels, collectives and optimizer updates.

use super::worker::{node_error, Run};
use super::*;

/// The kernels that need the device: variables, channels, collectives.
pub(super) fn device_kernel(
    run: Run<'_>,
    step: &Step,
    inputs: Vec<Tensor>,
    shared: &StepShared<'_>,
) -> Result<Vec<Tensor>, Stop> {
    let op = &*step.op;
    let err = |e: KernelError| node_error(run, step, e);
    let instance = run.instance;
    let handle = |inputs: &[Tensor]| -> Result<ResourceHandle, Stop> {
        kernels::arg(op, inputs, 0)
            .map_err(err)?
            .as_resource()
            .cloned()
            .ok_or_else(|| err(KernelError::invalid(op, "input 0 must be a resource handle (from VarHandleOp)")))
    };
    let check_dtype = |t: &Tensor| -> Result<(), Stop> {
        match step.attrs.get("dtype").and_then(|v| v.as_type()) {
            Some(d) if d != t.dtype() => {
                Err(err(KernelError::invalid(op, format!("the variable holds {} but the op expects {d}", t.dtype()))))
            }
            _ => Ok(()),
        }
    };
    let mesh = shared.mesh;
    match op {
        "Placeholder" => Err(err(KernelError::invalid(op, format!("`%{}` must be fed", step.name)))),
        "ReplicaId" | "XlaReplicaId" => match instance.replica {
            Some(r) => Ok(vec![Tensor::scalar(
                i32::try_from(r).map_err(|_| err(KernelError::invalid(op, "replica id too large")))?,
            )]),
            None => Err(err(KernelError::invalid(op, format!("graph `@{}` runs on no replica", instance.name)))),
        },
        "TPUReplicatedInput" => {
            let index = if inputs.len() > 1 { instance.replica.unwrap_or(0) } else { 0 };
            let picked = usize::try_from(index).ok().and_then(|i| inputs.get(i)).cloned();
            picked.map(|t| vec![t]).ok_or_else(|| {
                err(KernelError::invalid(op, format!("replica {index} has no operand among {} inputs", inputs.len())))
            })
        }
        "VarHandleOp" => Ok(vec![Tensor::Resource(variable_handle(run.program, instance, step))]),
        "MirroredVarHandleOp" if step.attrs.contains_key("programs") => {
            let copies = mirror_copies(shared.mesh, step).map_err(|m| err(KernelError::invalid(op, m)))?;
            let mut copies = copies.into_iter();
            let (device, name) = copies.next().ok_or_else(|| err(KernelError::invalid(op, "lists no copies")))?;
            Ok(vec![Tensor::Resource(ResourceHandle { device, name, mirrors: copies.collect() })])
        }
        "MirroredVarHandleOp" => {
            let list = |key: &str| -> Vec<Arc<str>> {
                let items = step.attrs.get(key).and_then(|v| v.as_list()).unwrap_or_default();
                items.iter().filter_map(|v| v.as_str().map(Arc::from)).collect()
            };
            let (devices, names) = (list("devices"), list("shared_names"));
            if devices.is_empty() || devices.len() != names.len() {
                return Err(err(KernelError::invalid(
                    op,
                    format!(
                        "needs as many `devices` as `shared_names`, at least one (got {} and {})",
                        devices.len(),
                        names.len()
                    ),
                )));
            }
            let mut copies = devices.into_iter().zip(names);
            let (device, name) = copies.next().expect("checked non-empty");
            Ok(vec![Tensor::Resource(ResourceHandle { device, name, mirrors: copies.collect() })])
        }
        "ReadVariableOp" => {
            let h = handle(&inputs)?;
            let value = mesh.device_variable(&h.device, &h.name).ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            check_dtype(&value)?;
            Ok(vec![value])
        }
        "ReadVariableXlaSplitND" => {
            // The variable's value, padded and split into tiles by `XlaSplitND`'s kernel.
            let h = handle(&inputs)?;
            let value = mesh.device_variable(&h.device, &h.name).ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            match step.attrs.get("T").and_then(|v| v.as_type()) {
                Some(d) if d != value.dtype() => Err(err(KernelError::invalid(
                    op,
                    format!("the variable holds {} but the op expects {d}", value.dtype()),
                ))),
                _ => kernels::run_kernel("XlaSplitND", &step.attrs, &[value]).map_err(err),
            }
        }
        "AssignVariableXlaConcatND" => {
            // The tiles joined by `XlaConcatND`'s kernel, less the padding, as the variable's value.
            let h = handle(&inputs)?;
            let tiles = inputs.get(1..).unwrap_or_default();
            let value = kernels::run_kernel("XlaConcatND", &step.attrs, tiles).map_err(err)?.remove(0);
            let mut stores = mesh.stores();
            for (device, name) in h.copies() {
                stores.entry(device.clone()).or_default().insert(name.to_string(), value.clone());
            }
            Ok(Vec::new())
        }
        "VariableShape" => {
            let h = handle(&inputs)?;
            let value = mesh.device_variable(&h.device, &h.name).ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            let out = step.attrs.get("out_type").and_then(|v| v.as_type()).unwrap_or(crate::ir::DType::I32);
            Ok(vec![kernels::shape_of(op, &value, out).map_err(err)?])
        }
        "VarIsInitializedOp" => {
            let h = handle(&inputs)?;
            Ok(vec![Tensor::scalar(mesh.device_variable(&h.device, &h.name).is_some())])
        }
        "AssignVariableOp" | "AssignAddVariableOp" | "AssignSubVariableOp" | "Update" | "UpdateNonSlot" => {
            let update = match op {
                "Update" | "UpdateNonSlot" => match step.attrs.get_str("fn").unwrap_or_default() {
                    "Assign" => "AssignVariableOp",
                    "AssignAdd" => "AssignAddVariableOp",
                    "AssignSub" => "AssignSubVariableOp",
                    other => {
                        return Err(err(KernelError::invalid(
                            op,
                            format!("fn must be \"Assign\", \"AssignAdd\" or \"AssignSub\", not {other:?}"),
                        )))
                    }
                },
                _ => op,
            };
            let h = handle(&inputs)?;
            let value = kernels::arg(op, &inputs, 1).map_err(err)?.clone();
            check_dtype(&value)?;
            let mut stores = mesh.stores();
            // Every copy: a mirrored handle from outside the cluster writes them all.
            for (device, name) in h.copies() {
                let store = stores.entry(device.clone()).or_default();
                let new = if update == "AssignVariableOp" {
                    value.clone()
                } else {
                    let old = store.get(&**name).ok_or_else(|| {
                        err(KernelError::invalid(op, format!("variable `{name}` on {device} is not initialised")))
                    })?;
                    if old.shape() != value.shape() {
                        return Err(err(KernelError::invalid(
                            op,
                            format!(
                                "variable `{name}` has shape {:?} but the update has {:?}",
                                old.shape(),
                                value.shape()
                            ),
                        )));
                    }
                    let b = if update == "AssignAddVariableOp" { "AddV2" } else { "Sub" };
                    kernels::run_kernel(b, &AttrMap::new(), &[old.clone(), value.clone()]).map_err(err)?.remove(0)
                };
                store.insert(name.to_string(), new);
            }
            Ok(Vec::new())
        }
        "_Send" => {
            let value = kernels::arg(op, &inputs, 0).map_err(err)?.clone();
            for key in step.channel_keys(run.program, instance) {
                let sender = shared.senders.get(&key).ok_or_else(|| {
                    Stop::Failed(ExecError::Internal { message: format!("no sender for channel `{}`", key.0) })
                })?;
                // The receiver lives until the step ends, so this cannot fail.
                sender.send(value.clone()).map_err(|_| Stop::Cancelled)?;
            }
            Ok(Vec::new())
        }
        "CollectiveAllReduce" | "CollectiveBroadcast" | "CollectiveAllGather" => collective(run, step, inputs, shared),
        "ResourceGather" => {
            let h = handle(&inputs)?;
            let value = mesh.device_variable(&h.device, &h.name).ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            let indices = kernels::arg(op, &inputs, 1).map_err(err)?;
            let batch_dims = step.attrs.get_int("batch_dims").unwrap_or(0);
            kernels::gather::resource_gather(op, &value, indices, batch_dims).map(|t| vec![t]).map_err(err)
        }
        "ResourceScatterAdd" | "ResourceScatterSub" | "ResourceScatterUpdate" => {
            // The sparse (IndexedSlices) updates of embedding tables.
            let h = handle(&inputs)?;
            let (indices, updates) =
                (kernels::arg(op, &inputs, 1).map_err(err)?, kernels::arg(op, &inputs, 2).map_err(err)?);
            let mut stores = mesh.stores();
            let old = stores.get(&h.device).and_then(|s| s.get(&*h.name)).cloned().ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            use kernels::gather::Combine;
            let (how, negate) = match op {
                "ResourceScatterAdd" => (Combine::Add, false),
                "ResourceScatterSub" => (Combine::Add, true),
                _ => (Combine::Replace, false),
            };
            let new = kernels::gather::scatter_rows(op, &old, indices, updates, how, negate).map_err(err)?;
            for (device, name) in h.copies() {
                stores.entry(device.clone()).or_default().insert(name.to_string(), new.clone());
            }
            Ok(Vec::new())
        }
        "ResourceStridedSliceAssign" => {
            // The variable's value with a strided slice replaced (`TensorStridedSliceUpdate`'s kernel).
            let h = handle(&inputs)?;
            let mut stores = mesh.stores();
            let old = stores.get(&h.device).and_then(|s| s.get(&*h.name)).cloned().ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            let mut operands = vec![old];
            operands.extend(inputs.iter().skip(1).cloned());
            let new = kernels::run_kernel("TensorStridedSliceUpdate", &step.attrs, &operands).map_err(err)?.remove(0);
            for (device, name) in h.copies() {
                stores.entry(device.clone()).or_default().insert(name.to_string(), new.clone());
            }
            Ok(Vec::new())
        }
        _ if kernels::random::SEEDED.contains(&op) => {
            // The node's generator lives in the mesh: each run draws past the blocks of the last.
            let key = (instance.name.clone(), step.name.clone());
            let mut generators = mesh.generators.lock().unwrap_or_else(|p| p.into_inner());
            let skip = generators.get(&key).copied().unwrap_or(0);
            let (out, reserved) =
                kernels::random::seeded_draw(op, &step.name, &step.attrs, &inputs, skip).map_err(err)?;
            generators.insert(key, skip.wrapping_add(reserved));
            Ok(out)
        }
        _ if kernels::random_state::SKIP_OPS.contains(&op) || kernels::stateful_random::DRAW_OPS.contains(&op) => {
            // A generator's state variable: its counter moves on (after a draw, for the draws).
            let h = handle(&inputs)?;
            let mut stores = mesh.stores();
            let old = stores.get(&h.device).and_then(|s| s.get(&*h.name)).cloned().ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            let (new, out) = if kernels::random_state::SKIP_OPS.contains(&op) {
                let (alg, delta) =
                    (kernels::arg(op, &inputs, 1).map_err(err)?, kernels::arg(op, &inputs, 2).map_err(err)?);
                kernels::random_state::skip(op, &old, alg, delta).map_err(err)?
            } else {
                kernels::stateful_random::draw(op, &step.attrs, &old, &inputs[1..]).map_err(err)?
            };
            for (device, name) in h.copies() {
                stores.entry(device.clone()).or_default().insert(name.to_string(), new.clone());
            }
            Ok(out)
        }
        _ if kernels::segment::RESOURCE_SCATTERS.contains(&op) => {
            let h = handle(&inputs)?;
            let (indices, updates) =
                (kernels::arg(op, &inputs, 1).map_err(err)?, kernels::arg(op, &inputs, 2).map_err(err)?);
            let mut stores = mesh.stores();
            let old = stores.get(&h.device).and_then(|s| s.get(&*h.name)).cloned().ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            let new = kernels::segment::resource_scatter(op, &old, indices, updates).map_err(err)?;
            for (device, name) in h.copies() {
                stores.entry(device.clone()).or_default().insert(name.to_string(), new.clone());
            }
            Ok(Vec::new())
        }
        _ if kernels::stack::OPS.contains(&op) => {
            kernels::stack::run(op, &step.attrs, &inputs, &shared.stacks).map_err(err)
        }
        _ if kernels::optimizers::resource_inputs(op).is_some() => resource_apply(step, &inputs, mesh).map_err(err),
        _ if kernels::control_flow::is_call_op(op) => {
            // The variable ops of a function body run here, as nodes of this program would.
            let device = |body_op: &str, attrs: &AttrMap, inputs: Vec<Tensor>| {
                let inner = Step {
                    name: step.name.clone(),
                    op: body_op.into(),
                    attrs: attrs.clone(),
                    channel: None,
                    span: step.span,
                    device: step.device.clone(),
                    inputs: Vec::new(),
                    preds: Vec::new(),
                    succs: Vec::new(),
                    seq: step.seq,
                    class: Class::Compute,
                    unit: super::frames::Unit::Node,
                    constant: None,
                };
                device_kernel(run, &inner, inputs, shared).map_err(|stop| match stop {
                    Stop::Failed(e) => KernelError::invalid(body_op, e.to_string()),
                    Stop::Cancelled => KernelError::invalid(body_op, "the step was cancelled"),
                })
            };
            let cancelled = || shared.cancelled.load(std::sync::atomic::Ordering::Relaxed);
            kernels::control_flow::call(op, &step.attrs, inputs, &mesh.functions, &device, &cancelled).map_err(err)
        }
        _ => kernels::run_kernel(op, &step.attrs, &inputs).map_err(err),
    }
}

/// An optimizer op (`ResourceApply*`): reads the variables behind its
/// resource inputs, computes their new values, writes every copy.
pub(super) fn resource_apply(step: &Step, inputs: &[Tensor], mesh: &Mesh) -> Result<Vec<Tensor>, KernelError> {
    let op = &*step.op;
    let n = kernels::optimizers::resource_inputs(op).unwrap_or(0);
    if inputs.len() < n {
        return Err(KernelError::invalid(op, format!("expected {n} resource inputs, got {} inputs", inputs.len())));
    }
    let handles = inputs[..n]
        .iter()
        .map(|t| t.as_resource().ok_or_else(|| KernelError::invalid(op, "the slot inputs must be resource handles")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut stores = mesh.stores();
    let slots = handles
        .iter()
        .map(|h| {
            stores.get(&h.device).and_then(|s| s.get(&*h.name)).cloned().ok_or_else(|| {
                KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let updated = kernels::optimizers::apply(op, &step.attrs, &slots, &inputs[n..])?;
    for (h, value) in handles.iter().zip(updated) {
        for (device, name) in h.copies() {
            stores.entry(device.clone()).or_default().insert(name.to_string(), value.clone());
        }
    }
    Ok(Vec::new())
}

pub(super) fn collective(
    run: Run<'_>,
    step: &Step,
    inputs: Vec<Tensor>,
    shared: &StepShared<'_>,
) -> Result<Vec<Tensor>, Stop> {
    let op = &*step.op;
    let err = |m: String| node_error(run, step, KernelError::invalid(op, m));
    let int = |key: &str, default: Option<i64>| -> Result<i64, Stop> {
        step.attrs.get_int(key).or(default).ok_or_else(|| err(format!("missing int attribute `{key}`")))
    };
    // A bound collective names its group and rank; an SPMD one takes them
    // from the running replica.
    let member = match (step.attrs.get_int("rank"), run.instance.replica) {
        (None, Some(replica)) if run.program.spmd => {
            spmd::collective_member(&step.attrs, replica, run.program.num_replicas).map_err(err)?
        }
        _ => spmd::Member {
            group: step.attrs.get_str("group").ok_or_else(|| err("missing string attribute `group`".into()))?.into(),
            group_size: int("group_size", None)?,
            rank: int("rank", None)?,
        },
    };
    let group = member.group.as_str();
    let instance = int("instance", Some(0))?;
    let group_size = usize::try_from(member.group_size).map_err(|_| err("group_size must be >= 1".into()))?;
    let rank = usize::try_from(member.rank).map_err(|_| err("rank must be >= 0".into()))?;
    let kind = match op {
        "CollectiveAllReduce" => match step.attrs.get_str("reduce_op").unwrap_or("SUM") {
            "SUM" | "Add" => Kind::AllReduce(ReduceOp::Sum),
            "MEAN" | "Mean" => Kind::AllReduce(ReduceOp::Mean),
            "MAX" | "Max" => Kind::AllReduce(ReduceOp::Max),
            "MIN" | "Min" => Kind::AllReduce(ReduceOp::Min),
            "PROD" | "Mul" => Kind::AllReduce(ReduceOp::Prod),
            other => return Err(err(format!("reduce_op `{other}`: one of SUM, MEAN, MAX, MIN, PROD"))),
        },
        "CollectiveAllGather" => Kind::AllGather,
        _ => Kind::Broadcast {
            source: usize::try_from(int("source", Some(0))?).map_err(|_| err("source must be >= 0".into()))?,
        },
    };
    let call = Call { group, instance, group_size, rank, kind };
    let waiter = Waiter { timeout: shared.mesh.config.timeout, cancelled: &shared.cancelled };
    // bf16 / f16 / i8 / u8 values are reduced in f32 / i32 and rounded back
    // once; an all-gather only moves them.
    let (inputs, widened) = match kernels::dtypes::widen(op, &inputs) {
        _ if kind == Kind::AllGather => (inputs, None),
        Ok(Some((wide, how))) => (wide, Some(how)),
        Ok(None) => (inputs, None),
        Err(e) => return Err(node_error(run, step, e)),
    };
    let outputs = shared.collectives.run(&call, inputs, &waiter).map_err(|e| match e {
        CollectiveError::Cancelled => Stop::Cancelled,
        CollectiveError::Mismatch(message) => Stop::Failed(ExecError::Collective {
            graph: run.instance.name.clone(),
            node: step.name.to_string(),
            group: group.to_string(),
            instance,
            message,
            span: step.span,
        }),
        CollectiveError::Timeout => Stop::Failed(ExecError::Timeout {
            graph: run.instance.name.clone(),
            device: run.instance.device.to_string(),
            node: step.name.to_string(),
            op: op.to_string(),
            what: format!("the other members of collective group `{group}` instance {instance} ({group_size} members)"),
            waited: shared.mesh.config.timeout,
            span: step.span,
        }),
    })?;
    let outputs = match widened {
        Some(how) => kernels::dtypes::narrow(op, &step.attrs, &how, outputs).map_err(|e| node_error(run, step, e))?,
        None => outputs,
    };
    match step.attrs.get_int("scatter_dimension") {
        // A reduce-scatter (TensorFlow's `XlaReduceScatter`): this member's block of the reduced value.
        Some(d) => scattered(op, outputs, d, group_size, rank).map_err(|e| node_error(run, step, e)),
        None => Ok(outputs),
    }
}

/// Block `rank` of `group_size` equal blocks along dimension `d` of the one output.
fn scattered(
    op: &str,
    outputs: Vec<Tensor>,
    d: i64,
    group_size: usize,
    rank: usize,
) -> Result<Vec<Tensor>, KernelError> {
    let x = kernels::arg(op, &outputs, 0)?;
    let shape = x.shape();
    let axis = usize::try_from(d).ok().filter(|&a| a < shape.len()).ok_or_else(|| {
        KernelError::invalid(op, format!("scatter_dimension {d} is outside the rank {} of the operand", shape.len()))
    })?;
    if !shape[axis].is_multiple_of(group_size) {
        return Err(KernelError::invalid(
            op,
            format!("dimension {axis} ({}) does not split into {group_size} equal blocks", shape[axis]),
        ));
    }
    let block = shape[axis] / group_size;
    let begin: Vec<i64> = (0..shape.len()).map(|k| if k == axis { (rank * block) as i64 } else { 0 }).collect();
    let size: Vec<i64> =
        shape.iter().enumerate().map(|(k, &n)| if k == axis { block as i64 } else { n as i64 }).collect();
    kernels::run_kernel("Slice", &AttrMap::new(), &[x.clone(), Tensor::vector(begin), Tensor::vector(size)])
}

/// The variable a `VarHandleOp` names when `instance` runs it: in the
/// store of the node's device (else the instance's), under `shared_name`
/// (else the node's name); in an SPMD program a `mirrored` handle names
/// the running replica's copy.
pub(super) fn variable_handle(program: &Program, instance: &Instance, step: &Step) -> ResourceHandle {
    let shared = match step.attrs.get_str("shared_name") {
        Some(s) if !s.is_empty() => s,
        _ => &step.name,
    };
    let name: Arc<str> = match instance.replica {
        Some(r) if program.spmd && step.attrs.get_bool(spmd::MIRRORED) == Some(true) => {
            spmd::mirrored_name(shared, r).into()
        }
        _ => Arc::from(shared),
    };
    let device = step.device.clone().unwrap_or_else(|| instance.device.clone());
    ResourceHandle::new(device, name)
}

/// The copies a `MirroredVarHandleOp` with `programs` names: each replica's
/// copy in each listed program, replica 0's first, each (device, name) once.
/// A variable copy: (device, name in its store).
pub(super) type Copy = (Arc<str>, Arc<str>);

pub(super) fn mirror_copies(mesh: &Mesh, step: &Step) -> Result<Vec<Copy>, String> {
    let names: Vec<&str> = step
        .attrs
        .get("programs")
        .and_then(|v| v.as_list())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let shared = step.attrs.get_str("shared_name").unwrap_or(&step.name);
    let mut listed = Vec::with_capacity(names.len());
    for name in names {
        let program = mesh.programs.iter().find(|p| p.name == name).ok_or_else(|| format!("no program `@{name}`"))?;
        listed.push(program);
    }
    let replicas = listed.iter().map(|p| p.instances.len()).max().unwrap_or(0);
    let mut copies: Vec<Copy> = Vec::new();
    for r in 0..replicas {
        for p in &listed {
            let Some(instance) = p.instances.get(r) else { continue };
            let name: Arc<str> = spmd::mirrored_name(shared, r as u32).into();
            let copy = (instance.device.clone(), name);
            if !copies.contains(&copy) {
                copies.push(copy);
            }
        }
    }
    Ok(copies)
}
