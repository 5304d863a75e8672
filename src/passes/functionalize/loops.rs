//! Loop frames into `While` ops (see the parent module): the frames are
//! found as TensorFlow's executor finds them and rewritten innermost first.
//! Cost: linear in the frame's size per frame, plus one topological order.

use super::*;

/// A loop frame: its name, its parent frame and its nodes.
struct Frame {
    name: String,
    parent: usize,
    members: Vec<NodeId>,
}

const ROOT: usize = 0;

/// Assigns every node its frame, as TensorFlow's executor does: an `Enter`
/// starts the child frame its `frame_name` names, an `Exit` returns to the
/// parent, every other edge stays in its frame.
fn assign_frames(graph: &Graph, order: &[NodeId]) -> Result<Vec<Frame>, PassError> {
    let mut frames = vec![Frame { name: String::new(), parent: ROOT, members: Vec::new() }];
    let mut frame_of = vec![usize::MAX; graph.petgraph().node_bound()];
    let mut children: HashMap<(usize, String), usize> = HashMap::new();
    let show = |frames: &[Frame], f: usize| {
        if f == ROOT {
            "the top level".to_string()
        } else {
            format!("loop frame `{}`", frames[f].name)
        }
    };
    // Whether frame `outer` is `inner` or encloses it.
    let encloses = |frames: &[Frame], outer: usize, mut inner: usize| loop {
        if inner == outer {
            return true;
        }
        if inner == ROOT {
            return false;
        }
        inner = frames[inner].parent;
    };
    for &id in order {
        // The frame of each input's value, data inputs first: they decide the node's frame. A
        // control input may come from an enclosing frame (TensorFlow satisfies it once, before
        // the inner frame starts), so a node with control inputs only is in the innermost.
        let mut inputs: Vec<(usize, Input)> = Vec::new();
        for input in graph.inputs(id) {
            if graph.is_back_edge(input.src, id) {
                continue;
            }
            let f = frame_of[input.src.0.index()];
            let out = if op(graph, input.src) == "Exit" {
                if f == ROOT {
                    let n = graph.node(input.src);
                    return Err(PassError::FrameCrossing {
                        node: n.name.to_string(),
                        reason: "it is an `Exit` outside every loop".into(),
                        span: n.span,
                    });
                }
                frames[f].parent
            } else {
                f
            };
            inputs.push((out, input));
        }
        inputs.sort_by_key(|(_, input)| input.is_control());
        let mut here: Option<(usize, NodeId)> = None;
        if inputs.first().is_some_and(|(_, i)| i.is_control()) {
            let depth = |mut f: usize| {
                let mut d = 0;
                while f != ROOT {
                    f = frames[f].parent;
                    d += 1;
                }
                d
            };
            here = inputs.iter().map(|&(f, i)| (f, i.src)).max_by_key(|&(f, _)| depth(f));
        }
        for &(out, input) in &inputs {
            match here {
                None => here = Some((out, input.src)),
                Some((f0, _)) if input.is_control() && encloses(&frames, out, f0) => {}
                Some((f0, src0)) if f0 != out => {
                    let n = graph.node(id);
                    return Err(PassError::FrameCrossing {
                        node: n.name.to_string(),
                        reason: format!(
                            "it reads `%{}` from {} and `%{}` from {}",
                            graph.node(src0).name,
                            show(&frames, f0),
                            graph.node(input.src).name,
                            show(&frames, out)
                        ),
                        span: input.span,
                    });
                }
                _ => {}
            }
        }
        let outer = here.map_or(ROOT, |h| h.0);
        let f = if op(graph, id) == "Enter" {
            let node = graph.node(id);
            let Some(frame_name) = node.attrs.get_str("frame_name") else {
                return Err(PassError::MalformedLoop {
                    frame: "a loop".into(),
                    reason: format!("`Enter` `%{}` has no `frame_name`", node.name),
                    span: node.span,
                });
            };
            let next = frames.len();
            let f = *children.entry((outer, frame_name.to_string())).or_insert(next);
            if f == next {
                frames.push(Frame { name: frame_name.to_string(), parent: outer, members: Vec::new() });
            }
            f
        } else {
            outer
        };
        frame_of[id.0.index()] = f;
        frames[f].members.push(id);
    }
    Ok(frames)
}

pub(super) fn functionalize_loops(graph: &mut Graph, lib: &mut Library) -> Result<(), PassError> {
    if !graph.node_ids().any(|id| op(graph, id) == "Enter") {
        return Ok(());
    }
    let order = topological_order(graph)?;
    let mut frames = assign_frames(graph, &order)?;
    // Children are made after their parents: the reverse order is innermost first.
    for f in (1..frames.len()).rev() {
        let members = std::mem::take(&mut frames[f].members);
        let (made, kept) = functionalize_frame(graph, &frames[f].name, members, lib)?;
        let parent = frames[f].parent;
        frames[parent].members.extend(made);
        frames[parent].members.extend(kept);
    }
    Ok(())
}

/// A loop variable: `Enter -> Merge -> Switch`, closed by `NextIteration`.
struct LoopVar {
    enter: NodeId,
    merge: NodeId,
    next: NodeId,
    exits: Vec<NodeId>,
    dtype: DType,
}

/// What a structural node of a frame stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Enter(usize),
    Merge(usize),
    Switch(usize),
    Next,
    Exit,
    Invariant(usize),
    LoopCond,
}

/// Rewrites one frame into a `While`; returns the new node and the `Exit`s
/// (now `Identity`s), which belong to the parent frame.
fn functionalize_frame(
    graph: &mut Graph,
    frame: &str,
    mut members: Vec<NodeId>,
    lib: &mut Library,
) -> Result<(Vec<NodeId>, Vec<NodeId>), PassError> {
    members.sort_by_key(|id| graph.node(*id).seq);
    let member_set: HashSet<NodeId> = members.iter().copied().collect();
    let first = members[0];
    let malformed = |graph: &Graph, at: NodeId, reason: String| PassError::MalformedLoop {
        frame: format!("loop frame `{frame}`"),
        reason,
        span: graph.node(at).span,
    };
    let tags = construct_tags(graph, &members, &format!("loop frame `{frame}`"))?;
    let loop_conds: Vec<NodeId> = members.iter().copied().filter(|&id| op(graph, id) == "LoopCond").collect();
    let [loop_cond] = loop_conds[..] else {
        return Err(malformed(graph, first, format!("it has {} `LoopCond` ops; a loop has one", loop_conds.len())));
    };
    let mut vars: Vec<LoopVar> = Vec::new();
    let mut invariants: Vec<(NodeId, DType)> = Vec::new();
    let mut role: HashMap<NodeId, Role> = HashMap::new();
    role.insert(loop_cond, Role::LoopCond);
    for &id in members.iter().filter(|&&id| op(graph, id) == "Enter") {
        let dtype = dtype_attr(graph, id, "T", frame)?;
        if graph.data_inputs(id).len() != 1 {
            return Err(malformed(graph, id, format!("`Enter` `%{}` needs one data input", name(graph, id))));
        }
        if graph.node(id).attrs.get_bool("is_constant") == Some(true) {
            role.insert(id, Role::Invariant(invariants.len()));
            invariants.push((id, dtype));
            continue;
        }
        let data_uses: Vec<NodeId> = graph
            .uses(id)
            .into_iter()
            .filter(|(_, e)| matches!(e.kind, crate::ir::EdgeKind::Data { .. }))
            .map(|u| u.0)
            .collect();
        let [merge] = data_uses[..] else {
            return Err(malformed(
                graph,
                id,
                format!("loop variable `%{}` feeds {} ops; it must feed one `Merge`", name(graph, id), data_uses.len()),
            ));
        };
        let merge_inputs = graph.data_inputs(merge);
        let next = merge_inputs.iter().find(|i| i.src != id).map(|i| i.src);
        let (true, 2, Some(next)) = (op(graph, merge) == "Merge", merge_inputs.len(), next) else {
            return Err(malformed(
                graph,
                id,
                format!("loop variable `%{}` must enter a two-input `Merge` with its `NextIteration`", name(graph, id)),
            ));
        };
        if op(graph, next) != "NextIteration" || !member_set.contains(&next) {
            return Err(malformed(
                graph,
                merge,
                format!("`%{}` does not merge a `NextIteration` of the frame", name(graph, merge)),
            ));
        }
        let switches: Vec<NodeId> = graph
            .uses(merge)
            .into_iter()
            .filter(|(u, e)| {
                op(graph, *u) == "Switch"
                    && matches!(e.kind, crate::ir::EdgeKind::Data { slot: 0, .. })
                    && graph.data_inputs(*u).get(1).is_some_and(|p| p.src == loop_cond)
            })
            .map(|u| u.0)
            .collect();
        let [switch] = switches[..] else {
            return Err(malformed(
                graph,
                merge,
                format!("`%{}` must feed one `Switch` on the `LoopCond`, found {}", name(graph, merge), switches.len()),
            ));
        };
        let mut exits = Vec::new();
        for (user, edge) in graph.uses(switch) {
            if let crate::ir::EdgeKind::Data { output: 0, .. } = edge.kind {
                if op(graph, user) != "Exit" {
                    return Err(malformed(
                        graph,
                        user,
                        format!(
                            "`%{}` reads the exit side of `Switch` `%{}`; only an `Exit` may",
                            name(graph, user),
                            name(graph, switch)
                        ),
                    ));
                }
                exits.push(user);
            }
        }
        let i = vars.len();
        for (node, r) in [(id, Role::Enter(i)), (merge, Role::Merge(i)), (switch, Role::Switch(i)), (next, Role::Next)]
        {
            if role.insert(node, r).is_some() {
                return Err(malformed(graph, node, format!("`%{}` belongs to two loop variables", name(graph, node))));
            }
        }
        for &x in &exits {
            role.insert(x, Role::Exit);
        }
        vars.push(LoopVar { enter: id, merge, next, exits, dtype });
    }
    if vars.is_empty() {
        return Err(malformed(graph, first, "it has no loop variable (a non-constant `Enter`)".into()));
    }
    // Every loop-structure op of the frame must be part of a variable.
    if let Some(&stray) = members
        .iter()
        .find(|&&id| matches!(op(graph, id), "NextIteration" | "Exit" | "Enter") && !role.contains_key(&id))
    {
        return Err(malformed(graph, stray, format!("`%{}` is not part of a loop variable", name(graph, stray))));
    }
    let nv = vars.len();
    let classify_in = |graph: &Graph, in_cond: bool, node: NodeId, input: &Input| -> Result<Src, PassError> {
        let control = input.is_control();
        match role.get(&input.src) {
            Some(Role::Merge(i)) => Ok(if control { Src::Drop } else { Src::Arg(*i) }),
            Some(Role::Switch(_)) if control => Ok(Src::Drop),
            Some(Role::Switch(i)) if input.output == Some(1) && !in_cond => Ok(Src::Arg(*i)),
            Some(Role::Invariant(j)) => Ok(if control { Src::Drop } else { Src::Arg(nv + j) }),
            Some(Role::Enter(_) | Role::LoopCond) if control => Ok(Src::Drop),
            Some(_) => Err(PassError::MalformedLoop {
                frame: format!("loop frame `{frame}`"),
                reason: format!(
                    "`%{}` reads `%{}` ({}), which the {} cannot",
                    graph.node(node).name,
                    graph.node(input.src).name,
                    graph.node(input.src).op,
                    if in_cond { "loop condition" } else { "loop body" }
                ),
                span: input.span,
            }),
            None if member_set.contains(&input.src) => Ok(Src::Node(input.src, input.output)),
            // A control input from an enclosing frame (`assign_frames` checked that it encloses
            // this one): the `While` waits for it instead.
            None if control => Ok(Src::Drop),
            None => Err(PassError::FrameCrossing {
                node: graph.node(node).name.to_string(),
                reason: format!(
                    "it reads `%{}` from outside loop frame `{frame}` without an `Enter`",
                    graph.node(input.src).name
                ),
                span: input.span,
            }),
        }
    };
    // The nodes a set of seeds needs, within the frame, up to its structure.
    let closure = |graph: &Graph, in_cond: bool, seeds: Vec<NodeId>| -> Result<Vec<NodeId>, PassError> {
        let mut seen: HashSet<NodeId> = seeds.iter().copied().collect();
        let mut stack = seeds;
        let mut out = Vec::new();
        while let Some(id) = stack.pop() {
            out.push(id);
            for input in graph.inputs(id) {
                if let Src::Node(n, _) = classify_in(graph, in_cond, id, &input)? {
                    if seen.insert(n) {
                        stack.push(n);
                    }
                }
            }
        }
        out.sort_by_key(|&id| graph.node(id).seq);
        Ok(out)
    };
    let pred = graph
        .data_inputs(loop_cond)
        .first()
        .copied()
        .ok_or_else(|| malformed(graph, loop_cond, "the `LoopCond` has no input".into()))?;
    let pred_src = classify_in(graph, true, loop_cond, &pred)?;
    let cond_nodes = match pred_src {
        Src::Node(n, _) => closure(graph, true, vec![n])?,
        _ => Vec::new(),
    };
    let cond_set: HashSet<NodeId> = cond_nodes.iter().copied().collect();
    let mut seeds: Vec<NodeId> =
        members.iter().copied().filter(|id| !role.contains_key(id) && !cond_set.contains(id)).collect();
    for v in &vars {
        for input in graph.inputs(v.next) {
            if let Src::Node(n, _) = classify_in(graph, false, v.next, &input)? {
                seeds.push(n);
            }
        }
    }
    seeds.sort();
    seeds.dedup();
    let body_nodes = closure(graph, false, seeds)?;

    let prefix = frame.strip_suffix("/while_context").unwrap_or(frame).to_string();
    let mut args: Vec<(String, DType, Span)> =
        vars.iter().map(|v| (name(graph, v.merge), v.dtype, graph.node(v.enter).span)).collect();
    args.extend(invariants.iter().map(|&(e, t)| (name(graph, e), t, graph.node(e).span)));
    let cond_name = lib.fresh(&format!("{prefix}_cond"));
    let body_name = lib.fresh(&format!("{prefix}_body"));
    let cond_fn = {
        let classify = |g: &Graph, n: NodeId, i: &Input| classify_in(g, true, n, i);
        let spec = FunctionSpec {
            name: cond_name.clone(),
            args: args.clone(),
            nodes: cond_nodes,
            rets: vec![(name(graph, loop_cond), DType::Bool, pred_src)],
            classify: &classify,
        };
        build_function(graph, &spec)?
    };
    let body_fn = {
        let classify = |g: &Graph, n: NodeId, i: &Input| classify_in(g, false, n, i);
        let mut rets = Vec::new();
        for v in &vars {
            let input = graph
                .data_inputs(v.next)
                .first()
                .copied()
                .ok_or_else(|| malformed(graph, v.next, "the `NextIteration` has no input".into()))?;
            rets.push((name(graph, v.next), v.dtype, classify_in(graph, false, v.next, &input)?));
        }
        for (j, &(e, t)) in invariants.iter().enumerate() {
            rets.push((format!("{}/next", name(graph, e)), t, Src::Arg(nv + j)));
        }
        let spec = FunctionSpec { name: body_name.clone(), args, nodes: body_nodes, rets, classify: &classify };
        build_function(graph, &spec)?
    };
    for mut f in [cond_fn, body_fn] {
        functionalize_conds(&mut f, lib)?;
        lib.new.push(f);
    }

    // The While, at the place of the frame's first node.
    let mut types: Vec<DType> = vars.iter().map(|v| v.dtype).collect();
    types.extend(invariants.iter().map(|i| i.1));
    let parallel = graph.node(vars[0].enter).attrs.get_int("parallel_iterations").unwrap_or(10);
    let mut node = Node::op(graph.unique_name(&format!("{prefix}/While")), "While")
        .with_attr("T", type_list(&types))
        .with_attr("cond", func_attr(&cond_name))
        .with_attr("body", func_attr(&body_name))
        .with_attr("parallel_iterations", AttrValue::Int(parallel))
        .with_span(graph.node(vars[0].enter).span);
    node = tags.apply(node);
    let seq = graph.node(first).seq;
    let w = graph
        .add_node(node)
        .map_err(|_| PassError::Internal { message: "a fresh name was taken".into(), span: Span::DETACHED })?;
    graph.node_mut(w).seq = seq;
    let enters: Vec<NodeId> = vars.iter().map(|v| v.enter).chain(invariants.iter().map(|i| i.0)).collect();
    let mut inputs: Vec<Input> = enters.iter().map(|&e| graph.data_inputs(e)[0]).collect();
    // The control inputs from outside the frame (the `Enter`s' and those from enclosing frames).
    let mut controls: HashSet<NodeId> = HashSet::new();
    for &m in enters.iter().chain(&members) {
        for input in graph.inputs(m).into_iter().filter(Input::is_control) {
            if !member_set.contains(&input.src) && controls.insert(input.src) {
                inputs.push(input);
            }
        }
    }
    graph.add_inputs(w, &inputs);
    let mut kept = Vec::new();
    let mut exits = HashSet::new();
    for (i, v) in vars.iter().enumerate() {
        for &x in &v.exits {
            let span = graph.node(x).span;
            become_identity(graph, x, Input { src: w, output: Some(i as u32), span }, v.dtype);
            kept.push(x);
            exits.insert(x);
        }
    }
    for id in members {
        if !exits.contains(&id) {
            graph.remove_node(id);
        }
    }
    Ok((vec![w], kept))
}
