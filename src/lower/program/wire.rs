//! Wiring the partitioned programs: edges inside a program stay edges;
//! edges between programs become `_Send`/`_Recv` pairs, with the host's
//! per-replica ends of replicated inputs and outputs, the all-replica
//! control recvs, and the host's handles on mirrored variables.

use super::*;

impl Builder<'_> {
    pub(super) fn wire(&mut self, order: &[NodeId]) {
        let src = self.src;
        // Fan-out first: the host reads each replica's result, one recv
        // per output and replica; room for them is made once.
        let fan_outs: Vec<(NodeId, u32, Input)> = order
            .iter()
            .filter_map(|&id| match self.parts[part_index(id)] {
                Part::FanOut { cluster } => Some((id, cluster, *src.data_inputs(id).first()?)),
                _ => None,
            })
            .collect();
        let recvs: Vec<Vec<Node>> =
            fan_outs.par_iter().map(|&(id, cluster, operand)| self.output_recv_nodes(id, cluster, operand)).collect();
        if let Some(&host) = self.index.get(&Program::Host) {
            let count = recvs.iter().map(Vec::len).sum();
            self.programs[host].1.reserve(count, count);
        }
        let mut pending = PendingRecvs::default();
        for (&(id, cluster, operand), recvs) in fan_outs.iter().zip(recvs) {
            self.wire_fan_out(id, cluster, operand, recvs, &mut pending);
        }
        self.add_pending_recvs(&mut pending);
        // Edges within one program, in parallel over the built programs;
        // a node with any operand from elsewhere is deferred whole.
        let mut deferred: Vec<(usize, NodeId)> = self
            .for_each_built_program(|this, w| this.wire_local(w))
            .into_iter()
            .flat_map(|(pi, ids)| ids.into_iter().map(move |id| (pi, id)))
            .collect();
        // The rest in the text order (then by program, as programs_of lists
        // them), so that sends and recvs are made in a fixed order.
        let mut rank = vec![u32::MAX; self.parts.len()];
        for (i, &id) in order.iter().enumerate() {
            rank[part_index(id)] = i as u32;
        }
        deferred.sort_by_key(|&(pi, id)| (rank[part_index(id)], pi));
        let mut operands: Vec<Input> = Vec::new();
        let mut lowered: Vec<Input> = Vec::new();
        for (pi, id) in deferred {
            src.inputs_into(id, &mut operands);
            let program = self.programs[pi].0;
            let Some(dst) = self.placed(pi, id) else { continue };
            lowered.clear();
            for (slot, &input) in operands.iter().enumerate() {
                if self.skips_operand(id, program, slot) {
                    continue;
                }
                if let Some(x) = self.resolve(input, id, (pi, program), &mut lowered) {
                    lowered.push(x);
                }
            }
            self.programs[pi].1.add_inputs(dst, &lowered);
        }
    }

    /// Wires the nodes of one program whose operands all lie in it; records
    /// the others in `w.deferred`, in the text order.
    fn wire_local(&self, w: &mut Placement) {
        let src = self.src;
        let program = self.programs[w.pi].0;
        let mut operands: Vec<Input> = Vec::new();
        let mut lowered: Vec<Input> = Vec::new();
        for &id in &self.members[w.pi] {
            let slot = w.placed.get(part_index(id));
            if slot == UNPLACED {
                continue;
            }
            src.inputs_into(id, &mut operands);
            if operands.is_empty() {
                continue;
            }
            lowered.clear();
            let mut local = true;
            for (slot, &input) in operands.iter().enumerate() {
                if self.skips_operand(id, program, slot) {
                    continue;
                }
                let producer = w.placed.get(part_index(input.src));
                if program == Program::Host && self.mirrored[part_index(input.src)] {
                    local = false;
                    break;
                }
                if producer == UNPLACED {
                    // A control dependency on metadata or fan-out means nothing
                    // here (as in `resolve`); any other operand is wired later.
                    if input.is_control()
                        && matches!(self.parts[part_index(input.src)], Part::Drop | Part::FanOut { .. })
                    {
                        continue;
                    }
                    local = false;
                    break;
                }
                lowered.push(Input { src: NodeId(NodeIndex::new(producer as usize)), ..input });
            }
            if local {
                w.graph.add_inputs(NodeId(NodeIndex::new(slot as usize)), &lowered);
            } else {
                w.deferred.push(id);
            }
        }
    }

    /// The lowered operand for `input` of `consumer` in `program`.
    ///
    /// A control operand on a replicated op, seen from the host, stands for
    /// one recv per replica: those go straight into `lowered`.
    fn resolve(
        &mut self,
        input: Input,
        consumer: NodeId,
        (pi, program): (usize, Program),
        lowered: &mut Vec<Input>,
    ) -> Option<Input> {
        let src = self.src;
        let producer = input.src;
        let part = self.parts[part_index(producer)];
        if program == Program::Host && self.mirrored[part_index(producer)] {
            return Some(Input { src: self.mirrored_handle(producer), ..input });
        }
        // Same program: a plain edge.
        if let Some(local) = self.placed(pi, producer) {
            return Some(Input { src: local, ..input });
        }
        let replicated = program.is_replicated();
        match part {
            Part::FanIn { .. } => {
                if !replicated {
                    self.escape(consumer, producer);
                    return None;
                }
                let recv = self.transfer_fan_in(producer, program)?;
                Some(Input { src: recv, output: input.output.map(|_| 0), span: input.span })
            }
            _ if self.mirrored[part_index(producer)] && replicated => {
                let var = src.node(producer);
                let g = &mut self.programs[pi].1;
                let handle = match g.find(&var.name) {
                    Some(h) => h,
                    None => {
                        let mut node = Node::op(var.name.clone(), "VarHandleOp");
                        node.attrs = var.attrs.clone();
                        if var.attrs.get_str("shared_name").is_none_or(str::is_empty) {
                            node.attrs.insert("shared_name", AttrValue::Str(var.name.clone()));
                        }
                        node.attrs.insert(MIRRORED, AttrValue::Bool(true));
                        node.span = var.span;
                        g.add_node_unique(node)
                    }
                };
                self.placed[pi].set(part_index(producer), handle.0.index() as u32);
                Some(Input { src: handle, ..input })
            }
            _ if &*src.node(producer).op == "Const" && replicated && src.inputs(producer).is_empty() => {
                // Constants are cheaper to copy than to send.
                let g = &mut self.programs[pi].1;
                let name = src.node(producer).name.clone();
                let local = match g.find(&name) {
                    Some(h) => h,
                    None => {
                        let mut node = Node::op(name, "Const");
                        node.attrs = src.node(producer).attrs.without(&[TPU_REPLICATE]);
                        node.span = src.node(producer).span;
                        g.add_node_unique(node)
                    }
                };
                self.placed[pi].set(part_index(producer), local.0.index() as u32);
                Some(Input { src: local, ..input })
            }
            Part::Drop | Part::FanOut { .. } => {
                // A control dependency on metadata or fan-out has no runtime meaning here.
                if input.is_control() {
                    return None;
                }
                if let Part::FanOut { .. } = part {
                    // Handled in wire_fan_out: the host's recv replaced the output.
                    let r = input.output.unwrap_or(0);
                    let recv = match self.output_recvs.get(&producer).and_then(|recvs| recvs.get(r as usize)) {
                        Some(&recv) if program == Program::Host => Some(recv),
                        _ => self.programs[pi].1.find(&format!("{}/replica_{r}", src.node(producer).name)),
                    };
                    return recv.map(|recv| Input { src: recv, output: Some(0), span: input.span });
                }
                self.escape(consumer, producer);
                None
            }
            Part::Device { cluster, .. } | Part::Oc { cluster, .. } => {
                let [Some(source), _] = self.programs_of(part) else { return None };
                match program.cluster() {
                    // Another program of the same replica (another core, or outside compilation).
                    Some(consumer_cluster) => {
                        if self.num_replicas(consumer_cluster) != self.num_replicas(cluster) {
                            self.escape(consumer, producer);
                            return None;
                        }
                        let recv = self.transfer_from(input, source, program)?;
                        Some(Input { src: recv, output: input.output.map(|_| 0), span: input.span })
                    }
                    // The host waits for every replica's op.
                    None if input.is_control() => {
                        self.placed(pi, consumer)?;
                        let recv = self.transfer_to_host(input, source, program)?;
                        lowered.push(Input { src: recv, output: None, span: input.span });
                        None
                    }
                    None => {
                        self.escape(consumer, producer);
                        None
                    }
                }
            }
            // The init program runs before the first step: a step's control
            // dependency on an initialiser holds without a transfer.
            Part::Init if input.is_control() && program != Program::Init => None,
            Part::Host | Part::Init | Part::Shared => {
                let source = match part {
                    Part::Host => Program::Host,
                    Part::Init => Program::Init,
                    // A shared handle or constant outside its programs has no single source.
                    _ => return None,
                };
                let recv = self.transfer_from(input, source, program)?;
                Some(Input { src: recv, output: input.output.map(|_| 0), span: input.span })
            }
        }
    }

    fn channel_name(&self, from: Program, to: Program, producer: NodeId) -> String {
        let name = &self.src.node(producer).name;
        match (from, to) {
            (Program::Device { cluster, .. }, Program::Oc { oc, .. }) => {
                format!("host_compute_channel_{}_args/{name}", self.oc_names[cluster as usize][oc as usize])
            }
            (Program::Oc { cluster, oc, .. }, Program::Device { .. }) => {
                format!("host_compute_channel_{}_retvals/{name}", self.oc_names[cluster as usize][oc as usize])
            }
            _ => format!("value/{name}"),
        }
    }

    /// The host's `MirroredVarHandleOp` `<var>/mirrored` for a mirrored
    /// variable; [`Builder::list_mirrors`] fills in the programs that hold
    /// its copies.
    fn mirrored_handle(&mut self, var: NodeId) -> NodeId {
        let src = self.src.node(var);
        let name = format!("{}/mirrored", src.name);
        let host = &mut self.programs[self.index[&Program::Host]].1;
        if let Some(h) = host.find(&name) {
            return h;
        }
        let mut node = Node::op(name, "MirroredVarHandleOp");
        for key in ["dtype", "shape"] {
            if let Some(v) = src.attrs.get(key) {
                node.attrs.insert(key, v.clone());
            }
        }
        let shared = src.attrs.get_str("shared_name").filter(|s| !s.is_empty()).unwrap_or(&src.name);
        node.attrs.insert("shared_name", AttrValue::str(shared));
        node.span = src.span;
        host.add_node_unique(node)
    }

    /// Lists, on each host `MirroredVarHandleOp`, the SPMD programs that
    /// hold a copy of its variable (`programs`): each replica of each of
    /// them has one, named by [`spmd::mirrored_name`].
    pub(super) fn list_mirrors(&mut self) {
        let host = self.index[&Program::Host];
        let handles: Vec<(NodeId, String)> = {
            let g = &self.programs[host].1;
            g.nodes_in_order()
                .into_iter()
                .filter(|&id| &*g.node(id).op == "MirroredVarHandleOp")
                .filter_map(|id| Some((id, g.node(id).name.strip_suffix("/mirrored")?.to_string())))
                .collect()
        };
        for (id, var) in handles {
            let programs: Vec<AttrValue> = self
                .programs
                .iter()
                .filter(|(p, g)| {
                    p.is_replicated() && g.find(&var).is_some_and(|h| g.node(h).attrs.get_bool(MIRRORED) == Some(true))
                })
                .map(|(_, g)| AttrValue::str(g.name.as_str()))
                .collect();
            self.programs[host].1.node_mut(id).attrs.insert("programs", AttrValue::List(programs));
        }
    }

    fn escape(&mut self, consumer: NodeId, producer: NodeId) {
        let cluster = self.src.node(producer).attrs.get_str(TPU_REPLICATE).unwrap_or("?").to_string();
        self.errors.push(LowerError::ClusterEscape {
            cluster,
            consumer: self.src.node(consumer).name.to_string(),
            producer: self.src.node(producer).name.to_string(),
            span: self.src.node(consumer).span,
        });
    }

    /// Adds a `_Send` of `value` (placed in program `fi` as `producer`)
    /// with `key`, to `peer`.
    fn add_send(&mut self, fi: usize, producer: NodeId, value: Input, key: &str, peer: Peer) -> NodeId {
        let producer_name = self.src.node(value.src).name.clone();
        let g = &mut self.programs[fi].1;
        let sent = if value.is_control() {
            let mut token = Node::op(format!("{producer_name}/_token"), "Const");
            token.attrs.insert("dtype", AttrValue::Type(DType::Bool));
            token.attrs.insert(
                "value",
                AttrValue::Tensor(Arc::new(TensorLit {
                    dtype: DType::Bool,
                    shape: vec![],
                    data: TensorData::Bool(vec![true]),
                })),
            );
            let t = g.add_node_unique(token);
            g.add_control_input(t, producer, value.span);
            Input { src: t, output: Some(0), span: value.span }
        } else {
            Input { src: producer, output: Some(value.output.unwrap_or(0)), span: value.span }
        };
        let mut send = Node::op(format!("{producer_name}/_send"), "_Send");
        send.attrs.insert("channel", AttrValue::str(key));
        add_peer(&mut send, peer);
        let s = g.add_node_unique(send);
        g.add_input(s, sent);
        s
    }

    /// Adds a `_Recv` named `name` for `value` (its dtype) with `key`, from `peer`.
    fn add_recv(&mut self, ti: usize, name: String, value: Input, key: &str, peer: Peer) -> NodeId {
        let mut recv = Node::op(name, "_Recv");
        recv.attrs.insert("channel", AttrValue::str(key));
        let dtype = if value.is_control() { Some(DType::Bool) } else { output_dtype(self.src, value.src) };
        if let Some(d) = dtype {
            recv.attrs.insert("dtype", AttrValue::Type(d));
        }
        add_peer(&mut recv, peer);
        self.programs[ti].1.add_node_unique(recv)
    }

    /// The name of a recv of `value`'s producer.
    fn recv_name(&self, value: Input) -> String {
        format!("{}/_recv", self.src.node(value.src).name)
    }

    /// Sends `value` from `from` to `to`, once; returns the recv in `to`.
    ///
    /// At most one side is the host or init program. A host-side send to
    /// an SPMD program goes to every replica.
    fn transfer_from(&mut self, value: Input, from: Program, to: Program) -> Option<NodeId> {
        let fi = self.index[&from];
        let ti = self.index[&to];
        let port = match value.output {
            Some(out) => Port::Data(out),
            None => Port::Control,
        };
        if let Some(&recv) = self.channels.get(&(fi, ti, value.src, port)) {
            return Some(recv);
        }
        let channel = self.channel_name(from, to, value.src);
        let to_name = &self.programs[ti].1.name;
        let key = match port {
            Port::Data(out) => format!("{channel}:{out}->{to_name}"),
            Port::Control => format!("{channel}:ctl->{to_name}"),
        };
        let Some(producer) = self.placed(fi, value.src) else {
            self.errors.push(LowerError::Internal {
                message: format!("`{}` is not placed in the sending program", self.src.node(value.src).name),
            });
            return None;
        };
        let peer = match (from.is_replicated(), to.cluster()) {
            (false, Some(c)) => Peer::All(self.num_replicas(c)),
            _ => Peer::Implied,
        };
        self.add_send(fi, producer, value, &key, peer);
        let recv = self.add_recv(ti, self.recv_name(value), value, &key, Peer::Implied);
        self.channels.insert((fi, ti, value.src, port), recv);
        Some(recv)
    }

    /// Sends a per-replica op's control token from every replica to the
    /// host-side `to`, once; returns the host's recv, which takes one
    /// token from each replica.
    fn transfer_to_host(&mut self, value: Input, from: Program, to: Program) -> Option<NodeId> {
        let fi = self.index[&from];
        let ti = self.index[&to];
        if let Some(&recv) = self.control_to_host.get(&(fi, ti, value.src)) {
            return Some(recv);
        }
        let key = format!("ctl/{}->{}", self.src.node(value.src).name, self.programs[ti].1.name);
        let replicas = from.cluster().map_or(1, |c| self.num_replicas(c));
        let producer = self.placed(fi, value.src)?;
        self.add_send(fi, producer, value, &key, Peer::Implied);
        let recv = self.add_recv(ti, self.recv_name(value), value, &key, Peer::All(replicas));
        self.control_to_host.insert((fi, ti, value.src), recv);
        Some(recv)
    }

    /// The cluster program's parameter for a replicated input (a recv,
    /// `<input>/_recv`), with the host's send of each replica's operand.
    fn transfer_fan_in(&mut self, fan_in: NodeId, program: Program) -> Option<NodeId> {
        let src = self.src;
        let ti = self.index[&program];
        if let Some(&recv) = self.fan_in_recvs.get(&(fan_in, ti)) {
            return Some(recv);
        }
        let key = format!("{}->{}", src.node(fan_in).name, self.programs[ti].1.name);
        let operands = src.data_inputs(fan_in);
        let replicas = program.cluster().map_or(1, |c| self.num_replicas(c));
        let mut first = None;
        for r in 0..replicas {
            let Some(&operand) = operands.get(r as usize) else { continue };
            let source = match self.parts[part_index(operand.src)] {
                Part::Host | Part::Shared => Program::Host,
                Part::Init => Program::Init,
                _ => {
                    // Operands of a replicated input come from the host.
                    self.escape(fan_in, operand.src);
                    return None;
                }
            };
            let fi = self.index[&source];
            let Some(producer) = self.placed(fi, operand.src) else { continue };
            self.add_send(fi, producer, operand, &key, Peer::Replica(r));
            first.get_or_insert(operand);
        }
        let name = format!("{}/_recv", src.node(fan_in).name);
        let recv = self.add_recv(ti, name, first?, &key, Peer::Implied);
        self.fan_in_recvs.insert((fan_in, ti), recv);
        Some(recv)
    }

    /// The host's recv of each replica's result of the output `id`, in
    /// replica order, not yet added: made apart (in parallel) because
    /// there is one per output and replica.
    fn output_recv_nodes(&self, id: NodeId, cluster: u32, operand: Input) -> Vec<Node> {
        let src = self.src;
        let dtype = output_dtype(src, operand.src);
        let output: &Arc<str> = &src.node(id).name;
        let shared = &self.host_recv;
        (0..self.num_replicas(cluster))
            .map(|r| {
                let mut attrs = Vec::with_capacity(3);
                attrs.push((shared.channel.clone(), AttrValue::Str(output.clone())));
                if let Some(d) = dtype {
                    attrs.push((shared.dtype.clone(), AttrValue::Type(d)));
                }
                attrs.push((shared.replica.clone(), AttrValue::Int(i64::from(r))));
                // Spelled out: `format!` grows its buffer several times, and
                // there is one of these per output and replica.
                use std::fmt::Write;
                let mut name = String::with_capacity(output.len() + "/replica_".len() + 10);
                let _ = write!(name, "{output}/replica_{r}");
                let mut recv = Node::op(name, shared.op.clone());
                recv.attrs = AttrMap::from_entries(attrs);
                recv.span = src.node(id).span;
                recv
            })
            .collect()
    }

    /// Adds the host recvs [`Builder::wire_fan_out`] left pending, all at
    /// once, in their order.
    fn add_pending_recvs(&mut self, pending: &mut PendingRecvs) {
        if pending.nodes.is_empty() {
            return;
        }
        let host = self.index[&Program::Host];
        let added = self.programs[host].1.add_nodes_unique(std::mem::take(&mut pending.nodes));
        for (output, recv) in pending.outputs.drain(..).zip(added) {
            self.output_recvs.entry(output).or_default().push(recv);
        }
    }

    /// Sends each replica's result of the output `id` to the host, which
    /// receives it with `recvs` (from [`Builder::output_recv_nodes`]).
    fn wire_fan_out(&mut self, id: NodeId, cluster: u32, operand: Input, recvs: Vec<Node>, pending: &mut PendingRecvs) {
        let src = self.src;
        let host = self.index[&Program::Host];
        let output_name: Arc<str> = src.node(id).name.clone();
        let part = self.parts[part_index(operand.src)];
        let per_replica = matches!(part, Part::Device { .. } | Part::Oc { .. });
        let from = match part {
            Part::Device { .. } | Part::Oc { .. } => self.programs_of(part)[0],
            Part::Host | Part::Shared => Some(Program::Host),
            _ => None,
        };
        let Some(from) = from else { return };
        let fi = self.index[&from];
        let Some(producer) = self.placed(fi, operand.src) else { return };
        if fi == host {
            // Sends go to the host too: keep the order.
            self.add_pending_recvs(pending);
        }
        let value = Input { src: producer, output: operand.output, span: operand.span };
        let send_one = |this: &mut Self, value: Input, peer: Peer| {
            let g = &mut this.programs[fi].1;
            let mut send = Node::op(format!("{output_name}/_send"), "_Send");
            send.attrs.insert("channel", AttrValue::Str(output_name.clone()));
            add_peer(&mut send, peer);
            let s = g.add_node_unique(send);
            g.add_input(s, value);
        };
        if per_replica {
            // One send in the SPMD program; each replica's goes to its own recv.
            let value = match src.node(id).attrs.get_str("reduce_op") {
                Some(reduce) => self.reduce_output(id, reduce, value, fi, cluster),
                None => value,
            };
            send_one(self, value, Peer::Implied);
        } else {
            for r in 0..recvs.len() as u32 {
                send_one(self, value, Peer::Replica(r));
            }
        }
        for recv in recvs {
            if fi == host {
                let recv = self.programs[host].1.add_node_unique(recv);
                self.output_recvs.entry(id).or_default().push(recv);
            } else {
                pending.outputs.push(id);
                pending.nodes.push(recv);
            }
        }
    }

    /// All-reduces `value`, each replica's result of the marked output `id`,
    /// in program `pi`; returns the reduced value.
    fn reduce_output(&mut self, id: NodeId, reduce: &str, value: Input, pi: usize, cluster: u32) -> Input {
        let output = self.src.node(id);
        if reduce != "SUM" && reduce != "MEAN" {
            self.errors.push(LowerError::ReduceOp { op: reduce.to_string(), span: output.span });
            return value;
        }
        let next = self.collective_instance.len() as i64;
        let instance = *self.collective_instance.entry((cluster, id)).or_insert(next);
        let mut node = Node::op(format!("{}/reduce", output.name), "CollectiveAllReduce");
        node.attrs.insert("group", AttrValue::Str(output.name.clone()));
        node.attrs.insert("instance", AttrValue::Int(instance));
        node.attrs.insert("reduce_op", AttrValue::str(reduce));
        node.span = output.span;
        let g = &mut self.programs[pi].1;
        let reduced = g.add_node_unique(node);
        g.add_input(reduced, value);
        Input { src: reduced, output: Some(0), span: value.span }
    }
}

/// Marks a channel end with the replicas it talks to.
fn add_peer(node: &mut Node, peer: Peer) {
    match peer {
        Peer::Implied => {}
        Peer::Replica(r) => {
            node.attrs.insert(REPLICA, AttrValue::Int(i64::from(r)));
        }
        Peer::All(n) => {
            node.attrs.insert(ALL_REPLICAS, AttrValue::Int(i64::from(n)));
        }
    }
}
