//! Building a mesh: each graph becomes a program with its instances, every
//! channel is matched, and a step's active nodes are found.

use super::*;

pub(super) fn build_program(
    graph: &crate::ir::Graph,
    assignment: Option<&crate::lower::DeviceAssignment>,
) -> Result<Program, ExecError> {
    if let Some(region) = graph.regions.first() {
        return Err(ExecError::NotLowered {
            graph: graph.name.clone(),
            reason: "it still has replicate or outside_compilation regions".into(),
            span: region.keyword_span,
        });
    }
    let ids = graph.nodes_in_order();
    let index: HashMap<_, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let mut steps = Vec::with_capacity(ids.len());
    for &id in &ids {
        let node = graph.node(id);
        if node.kind != NodeKind::Op {
            return Err(ExecError::NotLowered {
                graph: graph.name.clone(),
                reason: format!(
                    "`%{}` is a {} and not an op",
                    node.name,
                    if node.op.is_empty() { "region input" } else { &node.op }
                ),
                span: node.span,
            });
        }
        let mut inputs = Vec::new();
        let mut preds = Vec::new();
        for input in graph.inputs(id) {
            let src = index[&input.src];
            if let Some(output) = input.output {
                inputs.push((src, output));
            }
            if !preds.contains(&src) {
                preds.push(src);
            }
        }
        let class = match &*node.op {
            "_Recv" => Class::Recv,
            "CollectiveAllReduce" | "CollectiveBroadcast" | "CollectiveAllGather" => Class::Collective,
            _ => Class::Compute,
        };
        let channel = match &*node.op {
            "_Send" | "_Recv" => Some(channel_of(graph, node)?),
            _ => None,
        };
        steps.push(Step {
            name: node.name.clone(),
            op: node.op.clone(),
            attrs: node.attrs.clone(),
            channel,
            span: node.span,
            device: node.device.clone(),
            inputs,
            preds,
            succs: Vec::new(),
            seq: node.seq,
            class,
            unit: frames::Unit::Node,
            constant: match &*node.op {
                "Const" => crate::exec::kernels::run_kernel("Const", &node.attrs, &[]).ok(),
                _ => None,
            },
        });
    }
    frames::collapse(&graph.name, &mut steps)?;
    for i in 0..steps.len() {
        for p in steps[i].preds.clone() {
            steps[p].succs.push(i);
        }
    }
    // Kahn's algorithm finds cycles now rather than as a hang later.
    let mut remaining: Vec<usize> = steps.iter().map(|s| s.preds.len()).collect();
    let mut queue: Vec<usize> = (0..steps.len()).filter(|&i| remaining[i] == 0).collect();
    let mut seen = 0;
    while let Some(i) = queue.pop() {
        seen += 1;
        for &s in &steps[i].succs {
            remaining[s] -= 1;
            if remaining[s] == 0 {
                queue.push(s);
            }
        }
    }
    if seen != steps.len() {
        let stuck = (0..steps.len()).find(|&i| remaining[i] > 0).unwrap_or(0);
        return Err(ExecError::Cycle {
            graph: graph.name.clone(),
            node: steps[stuck].name.to_string(),
            span: steps[stuck].span,
        });
    }
    let by_name = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| !matches!(s.unit, frames::Unit::Region(_)))
        .map(|(i, s)| (s.name.clone(), i))
        .collect();
    let mode = match graph.attrs.get_str("role") {
        Some("replica") | Some("host") => Mode::Whole,
        _ => Mode::Needed,
    };
    let not_lowered = |reason: String| ExecError::NotLowered { graph: graph.name.clone(), reason, span: graph.span };
    let spmd = spmd::is_spmd(graph);
    let instances = if spmd {
        let replicas = graph.attrs.get_int(spmd::NUM_REPLICAS).and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
        let a = assignment
            .ok_or_else(|| not_lowered("it runs once per replica, but the module has no `device_assignment`".into()))?;
        if replicas == 0 || replicas > a.num_replicas {
            return Err(not_lowered(format!(
                "it runs on {replicas} replica(s), but the device assignment has {}",
                a.num_replicas
            )));
        }
        (0..replicas)
            .map(|r| {
                let device = spmd::instance_device(graph, a, r)
                    .ok_or_else(|| not_lowered(format!("replica {r} has no device in the device assignment")))?;
                Ok(Instance { name: spmd::instance_name(graph, r), device: device.into(), replica: Some(r) })
            })
            .collect::<Result<Vec<_>, ExecError>>()?
    } else {
        let device: Arc<str> = graph.attrs.get_str("device").map_or_else(|| Arc::from(graph.name.as_str()), Arc::from);
        let replica = graph.attrs.get_int(spmd::REPLICA).and_then(|r| u32::try_from(r).ok());
        vec![Instance { name: graph.name.clone(), device, replica }]
    };
    let num_replicas = match graph.attrs.get_int(spmd::NUM_REPLICAS) {
        Some(n) => u32::try_from(n).unwrap_or(1),
        None => 1,
    };
    Ok(Program { name: graph.name.clone(), num_replicas, spmd, mode, steps, by_name, instances })
}

/// The channel of a `_Send` or `_Recv` node, and its peer.
pub(super) fn channel_of(graph: &crate::ir::Graph, node: &crate::ir::Node) -> Result<(Arc<str>, Peer), ExecError> {
    let missing = |problem: String| ExecError::Channel {
        graph: graph.name.clone(),
        channel: String::new(),
        problem,
        span: node.span,
    };
    let channel = node
        .attrs
        .get_str("channel")
        .ok_or_else(|| missing(format!("is missing: `%{}` has no string attribute `channel`", node.name)))?;
    let count = |key: &str| -> Result<Option<u32>, ExecError> {
        match node.attrs.get_int(key) {
            None => Ok(None),
            Some(v) => u32::try_from(v)
                .map(Some)
                .map_err(|_| missing(format!("of `%{}` has `{key} = {v}`, which is not a replica", node.name))),
        }
    };
    let peer = match (count(spmd::REPLICA)?, count(spmd::ALL_REPLICAS)?) {
        (Some(r), _) => Peer::Replica(r),
        (None, Some(n)) => Peer::All(n),
        (None, None) => Peer::Implied,
    };
    Ok((Arc::from(channel), peer))
}

/// Checks every `_Recv` has exactly one `_Send`; returns the channel keys.
pub(super) fn check_channels(programs: &[Program], workers: &[Worker]) -> Result<Vec<ChannelKey>, ExecError> {
    let spell = |(channel, replica): &ChannelKey| match replica {
        Some(r) => format!("{channel} (replica {r})"),
        None => channel.to_string(),
    };
    let mut sends: HashMap<ChannelKey, ()> = HashMap::new();
    for &(pi, ii) in workers {
        let (p, instance) = (&programs[pi], &programs[pi].instances[ii]);
        for s in p.steps.iter().filter(|s| &*s.op == "_Send") {
            for key in s.channel_keys(p, instance) {
                if sends.contains_key(&key) {
                    return Err(ExecError::Channel {
                        graph: instance.name.clone(),
                        channel: spell(&key),
                        problem: "is written by two `_Send` ops".into(),
                        span: s.span,
                    });
                }
                sends.insert(key, ());
            }
        }
    }
    let mut recvs: HashMap<ChannelKey, ()> = HashMap::new();
    for &(pi, ii) in workers {
        let (p, instance) = (&programs[pi], &programs[pi].instances[ii]);
        for s in p.steps.iter().filter(|s| &*s.op == "_Recv") {
            for key in s.channel_keys(p, instance) {
                if !sends.contains_key(&key) {
                    return Err(ExecError::Channel {
                        graph: instance.name.clone(),
                        channel: spell(&key),
                        problem: "has no `_Send` anywhere in the module".into(),
                        span: s.span,
                    });
                }
                if recvs.insert(key.clone(), ()).is_some() {
                    return Err(ExecError::Channel {
                        graph: instance.name.clone(),
                        channel: spell(&key),
                        problem: "is read by two `_Recv` ops".into(),
                        span: s.span,
                    });
                }
            }
        }
    }
    let mut keys: Vec<ChannelKey> = sends.into_keys().collect();
    keys.sort();
    Ok(keys)
}

/// The nodes a program runs this step: all, or the ancestors of the roots
/// and of every `_Send`, stopping at fed nodes.
pub(super) fn active_set(program: &Program, roots: &[usize], fed: &HashMap<usize, Vec<(u32, Tensor)>>) -> Vec<bool> {
    if program.mode == Mode::Whole {
        return vec![true; program.steps.len()];
    }
    let mut active = vec![false; program.steps.len()];
    let mut stack: Vec<usize> = roots.to_vec();
    stack.extend(program.steps.iter().enumerate().filter(|(_, s)| &*s.op == "_Send").map(|(i, _)| i));
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut active[i], true) {
            continue;
        }
        if !fed.contains_key(&i) {
            stack.extend(program.steps[i].preds.iter().copied());
        }
    }
    active
}
