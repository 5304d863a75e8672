//! One worker: runs one instance of a program for a step, node by node,
//! with its receives and its collectives in their fixed order.

use super::device::device_kernel;
use super::*;

/// A `_Recv` waiting for its value (or, with `all_replicas`, for one
/// token from each replica).
pub(super) struct PendingRecv<'a> {
    step: usize,
    channels: Vec<&'a Receiver<Tensor>>,
    since: Instant,
}

/// What a worker runs: a program, as one instance.
#[derive(Clone, Copy)]
pub(super) struct Run<'a> {
    pub(super) program: &'a Program,
    pub(super) instance: &'a Instance,
}

/// Runs one instance of a program for a step: the `active` nodes, keeping
/// the values of the `roots` (fetches); every other value is dropped once
/// its last consumer has run, so a worker holds only live tensors.
pub(super) fn run_program(
    program: &Program,
    instance: &Instance,
    (active, roots): (Vec<bool>, &[usize]),
    mut fed: HashMap<usize, Vec<(u32, Tensor)>>,
    receivers: &HashMap<&ChannelKey, Receiver<Tensor>>,
    shared: &StepShared<'_>,
) -> Result<Vec<Option<Vec<Tensor>>>, Stop> {
    let run = Run { program, instance };
    let n = program.steps.len();
    let mut values: Vec<Option<Vec<Tensor>>> = vec![None; n];
    // Count only active predecessors; fed nodes have none (they do not run).
    let is_fed: Vec<bool> = (0..n).map(|i| fed.contains_key(&i)).collect();
    let mut remaining: Vec<usize> = (0..n)
        .map(|i| if is_fed[i] { 0 } else { program.steps[i].preds.iter().filter(|&&p| active[p]).count() })
        .collect();
    // Collectives run in one fixed order, the same on every member: by
    // instance (lowering numbers them in a topological order of the source
    // graph). Running whichever is ready first could deadlock: two members
    // could each block in a different collective, waiting for the other.
    let mut collective_order: Vec<(i64, u64, usize)> = (0..n)
        .filter(|&i| active[i] && !is_fed[i] && program.steps[i].class == Class::Collective)
        .map(|i| (program.steps[i].attrs.get_int("instance").unwrap_or(0), program.steps[i].seq, i))
        .collect();
    collective_order.sort_unstable();
    let mut next_collective = 0;
    let mut compute: BTreeSet<(u64, usize)> = BTreeSet::new();
    let mut collectives: BTreeSet<(i64, u64, usize)> = BTreeSet::new();
    let mut recvs: Vec<PendingRecv<'_>> = Vec::new();
    for i in (0..n).filter(|&i| active[i] && remaining[i] == 0) {
        if is_fed[i] {
            compute.insert((program.steps[i].seq, i));
        } else {
            make_ready(run, i, receivers, &mut compute, &mut collectives, &mut recvs)?;
        }
    }
    // Data consumers still to run, per node; a root keeps its value.
    let mut uses: Vec<u32> = vec![0; n];
    for i in (0..n).filter(|&i| active[i] && !is_fed[i]) {
        for &(src, _) in &program.steps[i].inputs {
            uses[src] += 1;
        }
    }
    for &r in roots {
        uses[r] = u32::MAX;
    }
    let mut done = 0;
    let total = active.iter().filter(|&&a| a).count();
    while done < total {
        if shared.cancelled.load(Ordering::Relaxed) {
            return Err(Stop::Cancelled);
        }
        let next = if let Some((_, i)) = compute.pop_first() {
            let outputs = match fed.remove(&i) {
                Some(feeds) => Ok(feed_outputs(feeds)),
                None => run_node(run, i, &values, shared),
            };
            Some((i, outputs?))
        } else if let Some(got) = poll_recvs(&mut recvs) {
            Some(got)
        } else if collectives.first().is_some_and(|c| Some(c) == collective_order.get(next_collective)) {
            let (_, _, i) = collectives.pop_first().expect("checked non-empty");
            next_collective += 1;
            Some((i, run_node(run, i, &values, shared)?))
        } else if !recvs.is_empty() {
            wait_recvs(run, &mut recvs, shared)?
        } else {
            return Err(Stop::Failed(ExecError::Internal {
                message: format!("program `@{}` has no runnable node but {} of {total} ran", instance.name, done),
            }));
        };
        let Some((i, outputs)) = next else { continue };
        values[i] = Some(outputs);
        done += 1;
        if !is_fed[i] {
            for &(src, _) in &program.steps[i].inputs {
                uses[src] = uses[src].saturating_sub(1);
                if uses[src] == 0 {
                    values[src] = None;
                }
            }
        }
        for &s in &program.steps[i].succs {
            if !active[s] || is_fed[s] {
                continue;
            }
            remaining[s] -= 1;
            if remaining[s] == 0 {
                make_ready(run, s, receivers, &mut compute, &mut collectives, &mut recvs)?;
            }
        }
    }
    Ok(values)
}

/// Queues node `i`, whose inputs are ready, by its class.
pub(super) fn make_ready<'r>(
    run: Run<'_>,
    i: usize,
    receivers: &'r HashMap<&ChannelKey, Receiver<Tensor>>,
    compute: &mut BTreeSet<(u64, usize)>,
    collectives: &mut BTreeSet<(i64, u64, usize)>,
    recvs: &mut Vec<PendingRecv<'r>>,
) -> Result<(), Stop> {
    let s = &run.program.steps[i];
    match s.class {
        Class::Compute => {
            compute.insert((s.seq, i));
        }
        Class::Collective => {
            collectives.insert((s.attrs.get_int("instance").unwrap_or(0), s.seq, i));
        }
        Class::Recv => {
            let channels = s
                .channel_keys(run.program, run.instance)
                .iter()
                .map(|key| {
                    receivers.get(key).ok_or_else(|| {
                        Stop::Failed(ExecError::Internal { message: format!("no receiver for channel `{}`", key.0) })
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            recvs.push(PendingRecv { step: i, channels, since: Instant::now() });
        }
    }
    Ok(())
}

pub(super) fn feed_outputs(mut feeds: Vec<(u32, Tensor)>) -> Vec<Tensor> {
    feeds.sort_by_key(|f| f.0);
    let len = feeds.last().map_or(0, |f| f.0 as usize + 1);
    let mut out = vec![Tensor::scalar(0.0f32); len];
    for (k, t) in feeds {
        out[k as usize] = t;
    }
    out
}

/// Takes what has arrived for the pending recvs; returns a recv that has
/// all it waits for.
pub(super) fn poll_recvs(recvs: &mut Vec<PendingRecv<'_>>) -> Option<(usize, Vec<Tensor>)> {
    for pos in 0..recvs.len() {
        if let Some(got) = take_arrived(recvs, pos, None) {
            return Some(got);
        }
    }
    None
}

/// Takes what has arrived on pending recv `pos` (and `first`, a value
/// already taken from its channel `first.0`); removes and returns the recv
/// when nothing more is due.
pub(super) fn take_arrived(
    recvs: &mut Vec<PendingRecv<'_>>,
    pos: usize,
    first: Option<(usize, Tensor)>,
) -> Option<(usize, Vec<Tensor>)> {
    let r = &mut recvs[pos];
    let mut last = None;
    if let Some((ci, t)) = first {
        r.channels.swap_remove(ci);
        last = Some(t);
    }
    let mut k = 0;
    while k < r.channels.len() {
        match r.channels[k].try_recv() {
            Ok(t) => {
                r.channels.swap_remove(k);
                last = Some(t);
            }
            Err(_) => k += 1,
        }
    }
    if !r.channels.is_empty() {
        return None;
    }
    let r = recvs.remove(pos);
    // A gather of tokens from every replica gives one token.
    last.map(|t| (r.step, vec![t]))
}

/// Blocks until one pending `_Recv` gets a value, the step is cancelled,
/// or the oldest one times out.
pub(super) fn wait_recvs(
    run: Run<'_>,
    recvs: &mut Vec<PendingRecv<'_>>,
    shared: &StepShared<'_>,
) -> Result<Option<(usize, Vec<Tensor>)>, Stop> {
    let timeout = shared.mesh.config.timeout;
    let oldest = recvs.iter().map(|r| r.since).min().unwrap_or_else(Instant::now);
    let now = Instant::now();
    let deadline = oldest.checked_add(timeout).unwrap_or(now + MAX_TIMEOUT);
    if now >= deadline {
        let r = recvs.iter().find(|r| r.since == oldest).unwrap_or(&recvs[0]);
        let s = &run.program.steps[r.step];
        let channel = s.channel.as_ref().map_or("", |c| &*c.0);
        return Err(Stop::Failed(ExecError::Timeout {
            graph: run.instance.name.clone(),
            device: run.instance.device.to_string(),
            node: s.name.to_string(),
            op: s.op.to_string(),
            what: format!("channel `{channel}`"),
            waited: timeout,
            span: s.span,
        }));
    }
    let mut select = Select::new();
    let mut owners = Vec::new();
    for (pos, r) in recvs.iter().enumerate() {
        for (ci, channel) in r.channels.iter().enumerate() {
            select.recv(channel);
            owners.push((pos, ci));
        }
    }
    let limit = POLL.min(deadline - now);
    match select.select_timeout(limit) {
        Ok(op) => {
            let (pos, ci) = owners[op.index()];
            match op.recv(recvs[pos].channels[ci]) {
                Ok(t) => Ok(take_arrived(recvs, pos, Some((ci, t)))),
                Err(_) => Err(Stop::Cancelled),
            }
        }
        Err(_) => Ok(None),
    }
}

pub(super) fn node_error(run: Run<'_>, step: &Step, source: KernelError) -> Stop {
    if matches!(source, KernelError::MemoryBudget { .. }) {
        return Stop::Failed(ExecError::MemoryBudget {
            graph: run.instance.name.clone(),
            device: run.instance.device.to_string(),
            node: step.name.to_string(),
            op: step.op.to_string(),
            source,
            span: step.span,
        });
    }
    Stop::Failed(ExecError::Kernel {
        graph: run.instance.name.clone(),
        device: run.instance.device.to_string(),
        node: step.name.to_string(),
        op: step.op.to_string(),
        source,
        span: step.span,
    })
}

/// Runs node `i` with its inputs from `values`; panics become errors.
pub(super) fn run_node(
    run: Run<'_>,
    i: usize,
    values: &[Option<Vec<Tensor>>],
    shared: &StepShared<'_>,
) -> Result<Vec<Tensor>, Stop> {
    let program = run.program;
    let step = &program.steps[i];
    let inputs: Vec<Tensor> = step
        .inputs
        .iter()
        .map(|&(src, output)| {
            values[src].as_ref().and_then(|outs| outs.get(output as usize)).cloned().ok_or_else(|| {
                let producer = &program.steps[src];
                let why = if frames::is_dead_member(producer) {
                    "is dead: it depends on the untaken side of a TF1 `Switch`"
                } else {
                    "has no value (its op has no such output)"
                };
                node_error(
                    run,
                    step,
                    KernelError::invalid(&step.op, format!("input `%{}:{output}` {why}", producer.name)),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    match &step.unit {
        frames::Unit::Node => call_kernel(run, step, inputs, shared),
        frames::Unit::Region(region) => frames::run_region(run, region, inputs, shared),
        frames::Unit::Member => Ok(frames::member_outputs(inputs)),
    }
}

/// Runs the kernel of `step` on `inputs`; panics become errors.
pub(super) fn call_kernel(
    run: Run<'_>,
    step: &Step,
    inputs: Vec<Tensor>,
    shared: &StepShared<'_>,
) -> Result<Vec<Tensor>, Stop> {
    if let Some(outputs) = &step.constant {
        return Ok(outputs.clone());
    }
    // Optimizer updates and other device kernels flush denormals as the pure kernels do.
    let _flush = crate::exec::kernels::denormals::FlushDenormals::new();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| device_kernel(run, step, inputs, shared)));
    match result {
        Ok(Ok(outputs)) => match crate::exec::memory::check_live(&step.op) {
            Ok(()) => Ok(outputs),
            Err(e) => Err(node_error(run, step, e)),
        },
        Ok(Err(stop)) => Err(stop),
        Err(payload) => Err(Stop::Failed(ExecError::Panic {
            graph: run.instance.name.clone(),
            device: run.instance.device.to_string(),
            node: step.name.to_string(),
            op: step.op.to_string(),
            message: panic_message(payload.as_ref()),
            span: step.span,
        })),
    }
}
