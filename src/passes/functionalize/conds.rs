//! Conditionals into `If` ops (see the parent module): each node's stack
//! of (predicate, side) levels is found in one topological pass, the
//! `Switch`es and `Merge`s of one conditional are joined with union-find,
//! and the conditionals are rewritten innermost first.
//! Cost: linear in the graph size, plus each node copied once per
//! conditional that holds it.

use super::*;

/// One level of a node's conditional context: the side `port` of the
/// `Switch`es on predicate `pred` (an `Identity` chain looked through),
/// of conditional `inst` (a union-find element).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Level {
    pred: (NodeId, u32),
    port: u32,
    inst: usize,
}

/// Union-find over conditional instances (one element per `Switch`).
#[derive(Default)]
struct Instances(Vec<usize>);

impl Instances {
    fn add(&mut self) -> usize {
        self.0.push(self.0.len());
        self.0.len() - 1
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        self.0[a.max(b)] = a.min(b);
    }
}

/// The predicate a `Switch` tests, through `Identity` chains (`pred_id`).
fn canonical(graph: &Graph, mut value: (NodeId, u32)) -> (NodeId, u32) {
    let mut steps = 0;
    while op(graph, value.0) == "Identity" && steps < graph.node_count() {
        match graph.data_inputs(value.0).first() {
            Some(i) => value = (i.src, i.output.unwrap_or(0)),
            None => break,
        }
        steps += 1;
    }
    value
}

/// Makes `into` the longer of two contexts when one extends the other,
/// joining the conditionals they share; false when they diverge.
fn combine(into: &mut Vec<Level>, other: &[Level], instances: &mut Instances) -> bool {
    let common = into.len().min(other.len());
    for (a, b) in into[..common].iter().zip(&other[..common]) {
        if (a.pred, a.port) != (b.pred, b.port) {
            return false;
        }
        instances.union(a.inst, b.inst);
    }
    if other.len() > into.len() {
        *into = other.to_vec();
    }
    true
}

/// The nodes of one conditional.
#[derive(Default)]
struct Cond {
    switches: Vec<NodeId>,
    /// The nodes of the false (0) and true (1) side.
    sides: [Vec<NodeId>; 2],
    merges: Vec<NodeId>,
    depth: usize,
    /// The conditional and side this one sits in.
    parent: Option<(usize, u32)>,
    /// The predicate its `Switch`es test.
    pred: Option<(NodeId, u32)>,
}

fn malformed_cond(graph: &Graph, id: NodeId, reason: String) -> PassError {
    PassError::MalformedCond { node: name(graph, id), reason, span: graph.node(id).span }
}

/// Rewrites every conditional of `graph` (which has no loop frames) into
/// an `If`, innermost first.
pub(super) fn functionalize_conds(graph: &mut Graph, lib: &mut Library) -> Result<(), PassError> {
    if !graph.node_ids().any(|id| matches!(op(graph, id), "Switch" | "Merge")) {
        return Ok(());
    }
    let order = topological_order(graph)?;
    let bound = graph.petgraph().node_bound();
    let mut ctx: Vec<Vec<Level>> = vec![Vec::new(); bound];
    let mut instances = Instances::default();
    let mut switch_level: HashMap<NodeId, ((NodeId, u32), usize)> = HashMap::new();
    let mut merge_inst: HashMap<NodeId, (usize, [u32; 2])> = HashMap::new();
    for &id in &order {
        let inputs = graph.inputs(id);
        let of = |input: &Input, ctx: &[Vec<Level>]| -> Vec<Level> {
            let mut c = ctx[input.src.0.index()].clone();
            if let (Some(&(pred, inst)), Some(port)) = (switch_level.get(&input.src), input.output) {
                c.push(Level { pred, port, inst });
            }
            c
        };
        if op(graph, id) == "Merge" {
            let data: Vec<&Input> = inputs.iter().filter(|i| !i.is_control()).collect();
            if let Some(next) = data.iter().find(|i| op(graph, i.src) == "NextIteration") {
                return Err(PassError::MalformedLoop {
                    frame: "a loop".into(),
                    reason: format!(
                        "`%{}` merges `NextIteration` `%{}`, but no `Enter` starts its frame",
                        graph.node(id).name,
                        graph.node(next.src).name
                    ),
                    span: graph.node(id).span,
                });
            }
            let [a, b] = data[..] else {
                return Err(malformed_cond(
                    graph,
                    id,
                    format!("it merges {} value(s); a conditional's `Merge` has two", data.len()),
                ));
            };
            let (mut ca, cb) = (of(a, &ctx), of(b, &ctx));
            let (Some(ta), Some(tb)) = (ca.pop(), cb.last().copied()) else {
                return Err(malformed_cond(graph, id, "no `Switch` separates the values it merges".into()));
            };
            if cb.len() != ca.len() + 1
                || !combine(&mut ca, &cb[..cb.len() - 1], &mut instances)
                || ta.pred != tb.pred
                || ta.port == tb.port
            {
                return Err(malformed_cond(
                    graph,
                    id,
                    "its inputs are not the two sides of one conditional's `Switch`es".into(),
                ));
            }
            instances.union(ta.inst, tb.inst);
            for c in inputs.iter().filter(|i| i.is_control()) {
                if !combine(&mut ca, &of(c, &ctx), &mut instances) {
                    return Err(malformed_cond(graph, id, "its control inputs come from another conditional".into()));
                }
            }
            merge_inst.insert(id, (ta.inst, [ta.port, tb.port]));
            ctx[id.0.index()] = ca;
            continue;
        }
        let mut here: Vec<Level> = Vec::new();
        for input in &inputs {
            if !combine(&mut here, &of(input, &ctx), &mut instances) {
                return Err(malformed_cond(
                    graph,
                    id,
                    format!(
                        "it reads `%{}` from a side of a conditional that its other inputs are not on",
                        graph.node(input.src).name
                    ),
                ));
            }
        }
        if op(graph, id) == "Switch" {
            let data: Vec<&Input> = inputs.iter().filter(|i| !i.is_control()).collect();
            let [_, pred] = data[..] else {
                return Err(PassError::UnmatchedSwitch {
                    node: name(graph, id),
                    reason: "it needs a value and a predicate".into(),
                    span: graph.node(id).span,
                });
            };
            let pred = canonical(graph, (pred.src, pred.output.unwrap_or(0)));
            switch_level.insert(id, (pred, instances.add()));
        }
        ctx[id.0.index()] = here;
    }

    // Group the nodes by conditional.
    let mut conds: HashMap<usize, Cond> = HashMap::new();
    for &id in &order {
        let here = ctx[id.0.index()].clone();
        if let Some(top) = here.last() {
            let root = instances.find(top.inst);
            conds.entry(root).or_default().sides[top.port as usize].push(id);
        }
        let parent = here.last().map(|t| (instances.find(t.inst), t.port));
        let own = switch_level.get(&id).map(|s| s.1).or_else(|| merge_inst.get(&id).map(|m| m.0));
        if let Some(inst) = own {
            let cond = conds.entry(instances.find(inst)).or_default();
            if let Some(&(pred, _)) = switch_level.get(&id) {
                cond.switches.push(id);
                cond.pred = Some(pred);
            } else {
                cond.merges.push(id);
            }
            cond.depth = here.len() + 1;
            cond.parent = parent;
        }
    }
    // Switches whose sides reach no Merge (a `switch_t` Identity no branch
    // op waits on) join a conditional on the same predicate in the same place.
    let mut lone: Vec<usize> = conds.iter().filter(|(_, c)| c.merges.is_empty()).map(|(k, _)| *k).collect();
    lone.sort_unstable();
    for key in lone {
        let (pred, parent) = (conds[&key].pred, conds[&key].parent);
        let mut siblings: Vec<usize> = conds
            .iter()
            .filter(|(k, c)| **k != key && !c.merges.is_empty() && c.pred == pred && c.parent == parent)
            .map(|(k, _)| *k)
            .collect();
        siblings.sort_unstable();
        if let Some(&into) = siblings.first() {
            let from = conds.remove(&key).expect("a conditional");
            let target = conds.get_mut(&into).expect("a conditional");
            target.switches.extend(from.switches);
            for (side, more) in target.sides.iter_mut().zip(from.sides) {
                side.extend(more);
            }
        }
    }
    let mut keys: Vec<usize> = conds.keys().copied().collect();
    keys.sort_by_key(|k| (std::cmp::Reverse(conds[k].depth), *k));
    for key in keys {
        let Some(mut cond) = conds.remove(&key) else { continue };
        cond.switches.sort_by_key(|&id| graph.node(id).seq);
        let made = functionalize_cond(graph, &cond, &merge_inst, lib)?;
        // The If takes the place of the Switches (now removed) in the enclosing conditional.
        if let Some((parent, port)) = cond.parent {
            if let Some(p) = conds.get_mut(&parent) {
                for side in &mut p.sides {
                    side.retain(|id| !cond.switches.contains(id));
                }
                p.sides[port as usize].push(made);
            }
        }
    }
    Ok(())
}

/// Rewrites one conditional into an `If`; returns it.
fn functionalize_cond(
    graph: &mut Graph,
    cond: &Cond,
    merge_inst: &HashMap<NodeId, (usize, [u32; 2])>,
    lib: &mut Library,
) -> Result<NodeId, PassError> {
    let Some(&first_switch) = cond.switches.first() else {
        return Err(PassError::Internal {
            message: "a conditional without a `Switch`".into(),
            span: graph.node(cond.merges[0]).span,
        });
    };
    let Some(&first_merge) = cond.merges.first() else {
        return Err(PassError::UnmatchedSwitch {
            node: name(graph, first_switch),
            reason: "its outputs never meet again at a `Merge`".into(),
            span: graph.node(first_switch).span,
        });
    };
    // Members of this conditional, by side (merges and switches of inner
    // conditionals rewritten already are gone; merges of this one are not members).
    let mut side_of: HashMap<NodeId, u32> = HashMap::new();
    for (port, side) in cond.sides.iter().enumerate() {
        for &id in side {
            if graph.contains(id) && !cond.merges.contains(&id) {
                side_of.insert(id, port as u32);
            }
        }
    }
    let switch_index: HashMap<NodeId, usize> = cond.switches.iter().enumerate().map(|(k, &s)| (s, k)).collect();
    let mut all: Vec<NodeId> = cond.switches.iter().chain(&cond.merges).copied().collect();
    all.extend(side_of.keys().copied());
    all.sort_by_key(|&id| graph.node(id).seq);
    let tags = construct_tags(graph, &all, &format!("the conditional of `%{}`", name(graph, first_merge)))?;

    // Operands: the switched values, then values read from outside.
    let mut operands: Vec<Input> = Vec::new();
    let mut types: Vec<DType> = Vec::new();
    for &s in &cond.switches {
        let data = graph.data_inputs(s);
        types.push(
            graph
                .node(s)
                .attrs
                .get("T")
                .and_then(AttrValue::as_type)
                .ok_or_else(|| malformed_cond(graph, s, format!("`Switch` `%{}` has no dtype `T`", name(graph, s))))?,
        );
        operands.push(data[0]);
    }
    let mut captured: HashMap<(NodeId, u32), usize> = HashMap::new();
    let mut controls: Vec<Input> = Vec::new();
    let mut members: Vec<NodeId> = side_of.keys().copied().collect();
    members.sort_by_key(|&id| graph.node(id).seq);
    for &id in &members {
        for input in graph.inputs(id) {
            if switch_index.contains_key(&input.src) || side_of.contains_key(&input.src) {
                continue;
            }
            match input.output {
                Some(o) => {
                    if let std::collections::hash_map::Entry::Vacant(v) = captured.entry((input.src, o)) {
                        let dtype = output_dtype(graph, input.src, o).ok_or_else(|| {
                            malformed_cond(
                                graph,
                                id,
                                format!(
                                    "cannot tell the dtype of `%{}`, which a branch reads",
                                    graph.node(input.src).name
                                ),
                            )
                        })?;
                        v.insert(operands.len());
                        operands.push(input);
                        types.push(dtype);
                    }
                }
                None => {
                    if !controls.iter().any(|c| c.src == input.src) {
                        controls.push(input);
                    }
                }
            }
        }
    }

    let classify_for = |port: u32| {
        let (switch_index, side_of, captured) = (&switch_index, &side_of, &captured);
        move |graph: &Graph, node: NodeId, input: &Input| -> Result<Src, PassError> {
            if let Some(&k) = switch_index.get(&input.src) {
                return match input.output {
                    None => Ok(Src::Drop),
                    Some(o) if o == port => Ok(Src::Arg(k)),
                    Some(_) => Err(malformed_cond(
                        graph,
                        node,
                        format!("it reads the other side of `Switch` `%{}`", graph.node(input.src).name),
                    )),
                };
            }
            match side_of.get(&input.src) {
                Some(&p) if p == port => Ok(Src::Node(input.src, input.output)),
                Some(_) => Err(malformed_cond(
                    graph,
                    node,
                    format!("it reads `%{}` from the other branch", graph.node(input.src).name),
                )),
                None => Ok(match input.output {
                    Some(o) => Src::Arg(captured[&(input.src, o)]),
                    None => Src::Drop,
                }),
            }
        }
    };
    // Results: each Merge's value on that side, then the taken index of
    // each Merge whose index output is used.
    let mut out_types: Vec<DType> = Vec::new();
    for &m in &cond.merges {
        out_types.push(
            graph
                .node(m)
                .attrs
                .get("T")
                .and_then(AttrValue::as_type)
                .ok_or_else(|| malformed_cond(graph, m, format!("`Merge` `%{}` has no dtype `T`", name(graph, m))))?,
        );
    }
    let indexed: Vec<NodeId> = cond
        .merges
        .iter()
        .copied()
        .filter(|&m| graph.uses(m).iter().any(|(_, e)| matches!(e.kind, crate::ir::EdgeKind::Data { output: 1, .. })))
        .collect();
    let scope = name(graph, first_merge).rsplit_once('/').map_or(name(graph, first_merge), |s| s.0.to_string());
    let args: Vec<(String, DType, Span)> = operands
        .iter()
        .zip(&types)
        .enumerate()
        .map(|(k, (input, t))| {
            let base = match cond.switches.get(k) {
                Some(&s) => name(graph, s),
                None => format!("{}_{}", graph.node(input.src).name, input.output.unwrap_or(0)),
            };
            (base, *t, input.span)
        })
        .collect();
    let mut branch_names = Vec::new();
    for (port, suffix) in [(1u32, "then"), (0, "else")] {
        let fname = lib.fresh(&format!("{scope}_{suffix}"));
        let classify = classify_for(port);
        let mut rets = Vec::new();
        for (&m, &t) in cond.merges.iter().zip(&out_types) {
            let (_, ports) = merge_inst[&m];
            let j = ports.iter().position(|&p| p == port).expect("a merge has both sides");
            let input = graph.data_inputs(m)[j];
            rets.push((format!("{}/{suffix}", name(graph, m)), t, classify(graph, m, &input)?));
        }
        let nodes: Vec<NodeId> = members.iter().copied().filter(|id| side_of[id] == port).collect();
        let spec = FunctionSpec { name: fname.clone(), args: args.clone(), nodes, rets, classify: &classify };
        let mut f = build_function(graph, &spec)?;
        // The taken index of each indexed Merge is a constant of the branch.
        for (k, &m) in indexed.iter().enumerate() {
            let (_, ports) = merge_inst[&m];
            let j = ports.iter().position(|&p| p == port).expect("a merge has both sides") as i32;
            let value = crate::ir::types::TensorLit {
                dtype: DType::I32,
                shape: Vec::new(),
                data: crate::ir::types::TensorData::Int(vec![j]),
            };
            let c = f.add_node_unique(
                Node::op(format!("{}/index", name(graph, m)), "Const")
                    .with_attr("dtype", AttrValue::Type(DType::I32))
                    .with_attr("value", AttrValue::Tensor(Arc::new(value))),
            );
            let r = f.add_node_unique(
                Node::op(format!("{}/index/{suffix}", name(graph, m)), RETVAL_OP)
                    .with_attr("T", AttrValue::Type(DType::I32))
                    .with_attr("index", AttrValue::Int((cond.merges.len() + k) as i64)),
            );
            f.add_data_input(r, c, 0, Span::DETACHED);
        }
        functionalize_conds(&mut f, lib)?;
        lib.new.push(f);
        branch_names.push(fname);
    }
    let mut tout = out_types.clone();
    tout.extend(indexed.iter().map(|_| DType::I32));
    let pred = graph.data_inputs(first_switch)[1];
    let mut node = Node::op(graph.unique_name(&format!("{scope}/If")), "If")
        .with_attr("Tcond", AttrValue::Type(DType::Bool))
        .with_attr("Tin", type_list(&types))
        .with_attr("Tout", type_list(&tout))
        .with_attr("then_branch", func_attr(&branch_names[0]))
        .with_attr("else_branch", func_attr(&branch_names[1]))
        .with_span(graph.node(first_merge).span);
    node = tags.apply(node);
    // The If takes the text position of the first node it replaces (the Merges stay).
    let seq = cond.switches.iter().chain(side_of.keys()).map(|&id| graph.node(id).seq).min().unwrap_or(0);
    let made = graph
        .add_node(node)
        .map_err(|_| PassError::Internal { message: "a fresh name was taken".into(), span: Span::DETACHED })?;
    graph.node_mut(made).seq = seq;
    let mut inputs = vec![pred];
    inputs.extend(operands);
    inputs.extend(controls);
    graph.add_inputs(made, &inputs);
    for (i, (&m, &t)) in cond.merges.iter().zip(&out_types).enumerate() {
        let span = graph.node(m).span;
        let mut values = vec![(Input { src: made, output: Some(i as u32), span }, t)];
        if let Some(k) = indexed.iter().position(|&x| x == m) {
            let output = Some((cond.merges.len() + k) as u32);
            values.push((Input { src: made, output, span }, DType::I32));
        }
        become_forward(graph, m, &values);
    }
    // Control consumers of a Switch outside the branches wait for the If instead.
    for &s in &cond.switches {
        for (user, edge) in graph.uses(s) {
            if matches!(edge.kind, crate::ir::EdgeKind::Control { .. }) && !side_of.contains_key(&user) {
                graph.add_control_input(user, made, edge.span);
            }
        }
    }
    for id in cond.switches.iter().chain(side_of.keys()) {
        graph.remove_node(*id);
    }
    Ok(made)
}
