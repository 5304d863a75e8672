//! TF1 control flow in the mesh: `Switch`, `Merge`, `Enter`, `Exit`,
//! `NextIteration` and `LoopCond`, run with TensorFlow's semantics.
//!
//! The dataflow scheduler of a program runs each node once per step and
//! knows nothing of dead tensors or iterations. So each *control-flow
//! region* becomes one step ([`Unit::Region`]) that an interpreter here runs
//! whole, and the region's nodes become [`Unit::Member`] steps that only
//! hand on the region's outputs for them (so fetches and consumers outside
//! see them as before). A region is a weakly connected set of
//! - every node inside a loop frame (its frame, found as TensorFlow's
//!   executor finds it: an `Enter` starts the child frame named by its
//!   `frame_name`, an `Exit` returns to the parent, every other edge stays
//!   in its frame), and
//! - at the top level, the nodes a `Switch` reaches up to the `Merge` that
//!   closes it (each `Switch` on the way opens one more level, each `Merge`
//!   closes one), as `tf.cond` builds them.
//!
//! Semantics, as TensorFlow's executor has them:
//! - `Switch(data, pred)` forwards `data` on output 1 when `pred` is true,
//!   else on output 0; the other output is *dead*;
//! - a node with a dead data or control input is dead (all its outputs),
//!   except `Merge`, which forwards its first live input and its index, and
//!   is dead only when every input that arrived is dead;
//! - `Enter` moves a value into its frame in the first iteration; an
//!   `is_constant` `Enter` gives it in every iteration;
//! - `NextIteration` hands its value to the next iteration (its consumers,
//!   the `Merge`s, read it there); a dead one ends the loop;
//! - `LoopCond` forwards the predicate; `Exit` leaves the frame with the
//!   value of the iteration where its input was live (dead if none was).
//!
//! A frame runs iteration by iteration: each iteration evaluates the frame's
//! nodes and inner frames once, in a topological order that ignores the
//! back edges (`NextIteration` -> `Merge`), and the loop ends when no
//! `NextIteration` produced a live value. A node whose input has not
//! arrived in an iteration (a non-constant `Enter` after the first) does
//! not run. Building is linear in the graph size; a run costs the region's
//! size per iteration and holds one value per node.
//!
//! Limits: a region cannot hold `_Recv`s or collectives (they must be
//! scheduled with the other devices); a dead tensor that leaves a region
//! for a consumer outside it is an error, and so is a fetch of one. Top-level nodes of a region and `Exit`s can be fetched, values
//! inside a loop cannot (nor can they in TensorFlow). Feeding a tensor
//! inside a region does not replace it there.

use std::collections::{HashMap, VecDeque};

use super::worker::{call_kernel, node_error, Run};
use super::*;
use assign::{assign_frames, Frames};

mod assign;

/// What a step of a program stands for.
#[derive(Default)]
pub(super) enum Unit {
    /// A node, run by its kernel.
    #[default]
    Node,
    /// A control-flow region, run whole by [`run_region`].
    Region(Box<Region>),
    /// A node of a region: its outputs are its inputs, the region's outputs for it.
    Member,
}

/// The control-flow role of an op type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Enter,
    Exit,
    Merge,
    Switch,
    NextIteration,
    /// `LoopCond`: forwards its input.
    Forward,
    Other,
}

impl Kind {
    fn of(op: &str) -> Kind {
        match op {
            "Enter" => Kind::Enter,
            "Exit" => Kind::Exit,
            "Merge" => Kind::Merge,
            "Switch" => Kind::Switch,
            "NextIteration" => Kind::NextIteration,
            "LoopCond" => Kind::Forward,
            _ => Kind::Other,
        }
    }
}

const NONE: u32 = u32::MAX;
const ROOT: u32 = 0;

/// Where a member's input comes from.
#[derive(Clone, Copy, Debug)]
enum Src {
    /// Output `.1` of member `.0` (a local index).
    Member(u32, u32),
    /// Input `.0` of the region step (a value from outside the region).
    Outer(u32),
}

/// One node of a region.
struct MemberNode {
    /// Its step index in the program.
    step: usize,
    kind: Kind,
    /// An `Enter` with `is_constant = true`.
    constant: bool,
    inputs: Vec<Src>,
    /// Members among its control (and data) predecessors: it is dead if one is.
    preds: Vec<u32>,
}

/// One frame of a region (plan 0 is the top level).
#[derive(Default)]
struct Plan {
    /// Its nodes and inner frames in a topological order without back edges.
    order: Vec<Item>,
    /// Its own nodes.
    direct: Vec<u32>,
    next_iterations: Vec<u32>,
    exits: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
enum Item {
    Node(u32),
    Frame(u32),
}

/// A control-flow region, ready to run.
pub(super) struct Region {
    nodes: Vec<MemberNode>,
    plans: Vec<Plan>,
    /// The region step's outputs: (member, output).
    outputs: Vec<(u32, u32)>,
}

/// A node's value in the current iteration of its frame.
#[derive(Clone)]
enum Val {
    /// It did not run (an input never arrived).
    Absent,
    /// It ran on a dead input: every output is dead.
    Dead,
    /// Its outputs; `None` is a dead output (the untaken side of a `Switch`).
    Live(Vec<Option<Tensor>>),
}

/// An input's value.
enum In {
    Absent,
    Dead,
    Live(Tensor),
}

/// The name of the tensor that stands for a dead fetched value: a resource
/// handle no variable store can hold (names never contain NUL).
const DEAD: &str = "\0dead";

/// Whether any step is a TF1 control-flow op.
pub(super) fn has_control_flow(steps: &[Step]) -> bool {
    steps.iter().any(|s| Kind::of(&s.op) != Kind::Other)
}

/// Turns each control-flow region of `steps` (which have their inputs and
/// predecessors but no successors yet) into one region step; see the module
/// docs. Does nothing to a program without control-flow ops.
pub(super) fn collapse(graph: &str, steps: &mut Vec<Step>) -> Result<(), ExecError> {
    if !has_control_flow(steps) {
        return Ok(());
    }
    let n = steps.len();
    let kinds: Vec<Kind> = steps.iter().map(|s| Kind::of(&s.op)).collect();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, s) in steps.iter().enumerate() {
        for &p in &s.preds {
            succs[p].push(i);
        }
    }
    let frame_of = assign_frames(graph, steps, &kinds, &succs)?;
    // A node no source reaches is on (or after) a cycle without a way in.
    if let Some(i) = (0..n).find(|&i| frame_of.frame[i] == NONE) {
        return Err(ExecError::Cycle {
            graph: graph.to_string(),
            node: steps[i].name.to_string(),
            span: steps[i].span,
        });
    }

    // Members: every node in a loop frame, and each top-level `Switch`'s reach up to its `Merge`.
    let mut member: Vec<bool> = (0..n).map(|i| frame_of.frame[i] != ROOT).collect();
    let mut visited = vec![false; n];
    for s in (0..n).filter(|&i| kinds[i] == Kind::Switch && frame_of.frame[i] == ROOT) {
        if std::mem::replace(&mut visited[s], true) {
            continue;
        }
        member[s] = true;
        let mut stack = vec![(s, 1u32)];
        while let Some((a, depth)) = stack.pop() {
            for &b in &succs[a] {
                if std::mem::replace(&mut visited[b], true) {
                    continue;
                }
                member[b] = true;
                let depth = match (frame_of.frame[b] == ROOT, kinds[b]) {
                    (true, Kind::Switch) => depth + 1,
                    (true, Kind::Merge) => depth - 1,
                    _ => depth,
                };
                if depth > 0 {
                    stack.push((b, depth));
                }
            }
        }
    }

    // Top-level nodes on a path from a member to a member (a loop's results feeding a later loop
    // through top-level ops, as the loss between a loop and its gradient loop) join the members:
    // a region must run them itself, or it would wait on its own outputs.
    let mut after = member.clone();
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| member[i]).collect();
    while let Some(a) = queue.pop_front() {
        for &b in &succs[a] {
            if !std::mem::replace(&mut after[b], true) {
                queue.push_back(b);
            }
        }
    }
    let mut before = member.clone();
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| member[i]).collect();
    while let Some(b) = queue.pop_front() {
        for &a in &steps[b].preds {
            if !std::mem::replace(&mut before[a], true) {
                queue.push_back(a);
            }
        }
    }
    for i in 0..n {
        member[i] |= after[i] && before[i];
    }

    // Regions: weakly connected components of the members.
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for b in (0..n).filter(|&b| member[b]) {
        for &a in &steps[b].preds {
            if member[a] {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                if ra != rb {
                    parent[ra.max(rb)] = ra.min(rb);
                }
            }
        }
    }
    let mut regions: Vec<Vec<usize>> = Vec::new();
    let mut region_of_root: HashMap<usize, usize> = HashMap::new();
    for i in (0..n).filter(|&i| member[i]) {
        let root = find(&mut parent, i);
        let r = *region_of_root.entry(root).or_insert_with(|| {
            regions.push(Vec::new());
            regions.len() - 1
        });
        regions[r].push(i);
    }

    // How many outputs of each member nodes outside every region consume.
    let mut needed: Vec<usize> = vec![0; n];
    for s in (0..n).filter(|&i| !member[i]).map(|i| &steps[i]) {
        for &(src, output) in &s.inputs {
            if member[src] {
                needed[src] = needed[src].max(output as usize + 1);
            }
        }
    }
    let mut local = vec![NONE; n];
    for members in regions {
        for (l, &m) in members.iter().enumerate() {
            local[m] = l as u32;
        }
        let region_step = steps.len();
        let built = build_region(graph, steps, &kinds, &frame_of, &members, &local, &member, &needed)?;
        for &m in &members {
            local[m] = NONE;
        }
        let (region, outer_inputs, outer_preds, bases) = built;
        let first = &steps[members[0]];
        let step = Step {
            name: format!("{}/control_flow_region", first.name).into(),
            op: "_ControlFlowRegion".into(),
            attrs: AttrMap::default(),
            channel: None,
            span: first.span,
            device: first.device.clone(),
            inputs: outer_inputs,
            preds: outer_preds,
            succs: Vec::new(),
            seq: members.iter().map(|&m| steps[m].seq).min().unwrap_or(0),
            class: Class::Compute,
            unit: Unit::Region(Box::new(region)),
            constant: None,
        };
        for (&m, &(base, count)) in members.iter().zip(&bases) {
            let s = &mut steps[m];
            s.inputs = (base..base + count).map(|k| (region_step, k)).collect();
            s.preds = vec![region_step];
            s.unit = Unit::Member;
        }
        steps.push(step);
    }
    Ok(())
}

/// The plan directly inside `outer` on the way to `inner`, if `outer` strictly encloses `inner`.
fn child_toward(plan_parent: &[u32], outer: u32, mut inner: u32) -> Option<u32> {
    while inner != 0 {
        let up = plan_parent[inner as usize];
        if up == outer {
            return Some(inner);
        }
        inner = up;
    }
    None
}

type Built = (Region, Vec<(usize, u32)>, Vec<usize>, Vec<(u32, u32)>);

/// Builds the region of `members` (sorted step indices, `local` their
/// positions; `needed` how many outputs of each step consumers outside use):
/// the region, its outer data inputs and predecessors, and each member's
/// (first output, output count) among the region's outputs.
#[allow(clippy::too_many_arguments)]
fn build_region(
    graph: &str,
    steps: &[Step],
    kinds: &[Kind],
    frames: &Frames,
    members: &[usize],
    local: &[u32],
    member: &[bool],
    needed: &[usize],
) -> Result<Built, ExecError> {
    let error = |i: usize, reason: String| ExecError::ControlFlow {
        graph: graph.to_string(),
        node: steps[i].name.to_string(),
        reason,
        span: steps[i].span,
    };
    let mut outer_inputs: Vec<(usize, u32)> = Vec::new();
    let mut outer_index: HashMap<(usize, u32), u32> = HashMap::new();
    let mut outer_preds: Vec<usize> = Vec::new();
    let mut nodes = Vec::with_capacity(members.len());
    for &m in members {
        let s = &steps[m];
        if s.class != Class::Compute {
            return Err(error(
                m,
                "is inside a TF1 control-flow region, which runs as one unit: it cannot hold a `_Recv` or a collective"
                    .into(),
            ));
        }
        let inputs = s
            .inputs
            .iter()
            .map(|&(src, output)| {
                if member[src] {
                    Src::Member(local[src], output)
                } else {
                    let next = outer_inputs.len() as u32;
                    let k = *outer_index.entry((src, output)).or_insert(next);
                    if k == next {
                        outer_inputs.push((src, output));
                    }
                    Src::Outer(k)
                }
            })
            .collect();
        let mut preds = Vec::new();
        for &p in &s.preds {
            if member[p] {
                preds.push(local[p]);
            } else if !outer_preds.contains(&p) {
                outer_preds.push(p);
            }
        }
        let constant = s.attrs.get("is_constant").and_then(|v| v.as_bool()).unwrap_or(false);
        nodes.push(MemberNode { step: m, kind: kinds[m], constant, inputs, preds });
    }

    // One plan per frame that holds members, and each of its ancestors.
    let mut plan_of: HashMap<u32, u32> = HashMap::from([(ROOT, 0)]);
    let mut plans: Vec<Plan> = vec![Plan::default()];
    // The plan each plan's frame is an item of (the top level's own for the top level).
    let mut plan_parent: Vec<u32> = vec![0];
    let mut plan_for = |f: u32, plans: &mut Vec<Plan>, plan_parent: &mut Vec<u32>| -> u32 {
        let mut chain = Vec::new();
        let mut cur = f;
        while !plan_of.contains_key(&cur) {
            chain.push(cur);
            cur = frames.parent[cur as usize];
        }
        for &g in chain.iter().rev() {
            let id = plans.len() as u32;
            plans.push(Plan::default());
            let outer = plan_of[&frames.parent[g as usize]];
            plans[outer as usize].order.push(Item::Frame(id));
            plan_parent.push(outer);
            plan_of.insert(g, id);
        }
        plan_of[&f]
    };
    let mut plan_of_node = Vec::with_capacity(nodes.len());
    for (l, node) in nodes.iter().enumerate() {
        let p = plan_for(frames.frame[node.step], &mut plans, &mut plan_parent);
        let plan = &mut plans[p as usize];
        plan.direct.push(l as u32);
        plan.order.push(Item::Node(l as u32));
        match node.kind {
            Kind::NextIteration => plan.next_iterations.push(l as u32),
            Kind::Exit => plan.exits.push(l as u32),
            _ => {}
        }
        plan_of_node.push(p);
    }
    if !plans[0].exits.is_empty() {
        let l = plans[0].exits[0] as usize;
        return Err(error(nodes[l].step, "is an `Exit` outside every loop".into()));
    }
    // Each plan's items in a topological order (Kahn's algorithm over its items). The frames
    // nest as `assign_frames` checked, so each edge orders two items of one plan: a node and the
    // inner frame its `Enter` starts, the inner frame its `Exit` leaves and a node, or two nodes.
    let mut position: Vec<usize> = vec![0; nodes.len()];
    let mut frame_position: Vec<usize> = vec![0; plans.len()];
    for plan in &plans {
        for (k, item) in plan.order.iter().enumerate() {
            match *item {
                Item::Node(l) => position[l as usize] = k,
                Item::Frame(q) => frame_position[q as usize] = k,
            }
        }
    }
    let mut edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); plans.len()];
    for (lb, node) in nodes.iter().enumerate() {
        for &la in &node.preds {
            let la = la as usize;
            if nodes[la].kind == Kind::NextIteration {
                continue;
            }
            let (pa, pb) = (plan_of_node[la], plan_of_node[lb]);
            let (p, ka, kb) = if pa == pb {
                (pa, position[la], position[lb])
            } else if node.kind == Kind::Enter
                && nodes[la].kind == Kind::Exit
                && plan_parent[pa as usize] == plan_parent[pb as usize]
            {
                // A loop's result entering a sibling loop: the first loop runs before the second.
                (plan_parent[pa as usize], frame_position[pa as usize], frame_position[pb as usize])
            } else if node.kind == Kind::Enter {
                (pa, position[la], frame_position[pb as usize])
            } else if nodes[la].kind == Kind::Exit {
                (pb, frame_position[pa as usize], position[lb])
            } else if let Some(inner) =
                (!node.inputs.iter().any(|s| matches!(*s, Src::Member(l, _) if l as usize == la)))
                    .then(|| child_toward(&plan_parent, pa, pb))
                    .flatten()
            {
                // A control input from an enclosing frame: it runs before the inner frame starts.
                (pa, position[la], frame_position[inner as usize])
            } else {
                return Err(error(
                    node.step,
                    format!("and its input `%{}` are in different frames", steps[nodes[la].step].name),
                ));
            };
            if ka != kb {
                edges[p as usize].push((ka, kb));
            }
        }
    }
    for (plan, plan_edges) in plans.iter_mut().zip(edges) {
        let count = plan.order.len();
        let mut out_edges: Vec<Vec<usize>> = vec![Vec::new(); count];
        let mut indegree = vec![0usize; count];
        for (a, b) in plan_edges {
            out_edges[a].push(b);
            indegree[b] += 1;
        }
        let mut queue: VecDeque<usize> = (0..count).filter(|&k| indegree[k] == 0).collect();
        let mut order = Vec::with_capacity(count);
        while let Some(k) = queue.pop_front() {
            order.push(plan.order[k]);
            for &t in &out_edges[k] {
                indegree[t] -= 1;
                if indegree[t] == 0 {
                    queue.push_back(t);
                }
            }
        }
        if order.len() != count {
            let stuck = (0..count).find(|&k| indegree[k] > 0).and_then(|k| match plan.order[k] {
                Item::Node(l) => Some(nodes[l as usize].step),
                Item::Frame(_) => None,
            });
            let step = stuck.unwrap_or(members[0]);
            return Err(ExecError::Cycle {
                graph: graph.to_string(),
                node: steps[step].name.to_string(),
                span: steps[step].span,
            });
        }
        plan.order = order;
    }

    // Outputs: what consumers outside use, and every output of `Exit`s and top-level nodes (a
    // fetch may name them; values inside a loop are not fetchable, as in TensorFlow).
    let mut used = vec![0usize; nodes.len()];
    for node in &nodes {
        for src in &node.inputs {
            if let Src::Member(l, k) = *src {
                used[l as usize] = used[l as usize].max(k as usize + 1);
            }
        }
    }
    let mut outputs = Vec::new();
    let mut bases = Vec::with_capacity(nodes.len());
    for (l, node) in nodes.iter().enumerate() {
        let natural = match node.kind {
            Kind::Exit => 1,
            _ if plan_of_node[l] != 0 => 0,
            Kind::Merge | Kind::Switch => 2,
            _ => used[l].max(1),
        };
        let count = needed[node.step].max(natural);
        bases.push((outputs.len() as u32, count as u32));
        for k in 0..count {
            outputs.push((l as u32, k as u32));
        }
    }
    Ok((Region { nodes, plans, outputs }, outer_inputs, outer_preds, bases))
}

/// The state of one run of a region.
struct State<'a, 'r> {
    run: Run<'a>,
    shared: &'a StepShared<'r>,
    region: &'a Region,
    outer: Vec<Tensor>,
    vals: Vec<Val>,
    /// The value each `NextIteration` hands to the next iteration of its frame.
    carry: Vec<Option<Tensor>>,
    /// The value each `Exit` left its frame with.
    exited: Vec<Option<Tensor>>,
}

/// Runs a region step: its frames, then its outputs.
pub(super) fn run_region(
    run: Run<'_>,
    region: &Region,
    inputs: Vec<Tensor>,
    shared: &StepShared<'_>,
) -> Result<Vec<Tensor>, Stop> {
    let n = region.nodes.len();
    let mut state = State {
        run,
        shared,
        region,
        outer: inputs,
        vals: vec![Val::Absent; n],
        carry: vec![None; n],
        exited: vec![None; n],
    };
    state.run_plan(0)?;
    let dead =
        || Tensor::Resource(ResourceHandle { device: Arc::from(""), name: Arc::from(DEAD), mirrors: Vec::new() });
    Ok(region
        .outputs
        .iter()
        .map(|&(l, k)| match &state.vals[l as usize] {
            Val::Live(outs) => outs.get(k as usize).cloned().flatten().unwrap_or_else(dead),
            _ => dead(),
        })
        .collect())
}

/// A member step's outputs: its inputs up to the first dead one. A consumer
/// or fetch of a dead output finds no value and says it is dead
/// ([`is_dead_member`]).
pub(super) fn member_outputs(mut inputs: Vec<Tensor>) -> Vec<Tensor> {
    let is_dead = |t: &Tensor| matches!(t, Tensor::Resource(h) if &*h.name == DEAD);
    if let Some(first) = inputs.iter().position(is_dead) {
        inputs.truncate(first);
    }
    inputs
}

/// Whether a missing output of `step` is a dead tensor of a control-flow region.
pub(super) fn is_dead_member(step: &Step) -> bool {
    matches!(step.unit, Unit::Member)
}

impl State<'_, '_> {
    fn run_plan(&mut self, p: u32) -> Result<(), Stop> {
        let region = self.region;
        let plan = &region.plans[p as usize];
        let mut iteration = 0u64;
        loop {
            for &l in &plan.direct {
                self.vals[l as usize] = Val::Absent;
            }
            for &item in &plan.order {
                match item {
                    Item::Node(l) => {
                        let v = self.eval(l as usize, iteration)?;
                        self.vals[l as usize] = v;
                    }
                    Item::Frame(q) => self.run_plan(q)?,
                }
            }
            if p == 0 {
                return Ok(());
            }
            for &e in &plan.exits {
                if let Val::Live(outs) = &self.vals[e as usize] {
                    if let Some(Some(t)) = outs.first() {
                        self.exited[e as usize] = Some(t.clone());
                    }
                }
            }
            let mut more = false;
            for &ni in &plan.next_iterations {
                let next = match &self.vals[ni as usize] {
                    Val::Live(outs) => outs.first().cloned().flatten(),
                    _ => None,
                };
                more |= next.is_some();
                self.carry[ni as usize] = next;
            }
            if !more {
                break;
            }
            iteration += 1;
            if self.shared.cancelled.load(Ordering::Relaxed) {
                return Err(Stop::Cancelled);
            }
        }
        for &e in &plan.exits {
            self.vals[e as usize] = match self.exited[e as usize].take() {
                Some(t) => Val::Live(vec![Some(t)]),
                None => Val::Dead,
            };
        }
        Ok(())
    }

    fn input(&self, src: Src) -> In {
        match src {
            Src::Outer(k) => self.outer.get(k as usize).cloned().map_or(In::Dead, In::Live),
            Src::Member(l, k) => {
                if self.region.nodes[l as usize].kind == Kind::NextIteration {
                    return self.carry[l as usize].clone().map_or(In::Absent, In::Live);
                }
                match &self.vals[l as usize] {
                    Val::Absent => In::Absent,
                    Val::Dead => In::Dead,
                    Val::Live(outs) => match outs.get(k as usize) {
                        Some(Some(t)) => In::Live(t.clone()),
                        _ => In::Dead,
                    },
                }
            }
        }
    }

    /// Whether a member control predecessor has not run (`Absent`) or is dead.
    fn preds_state(&self, node: &MemberNode) -> Val {
        let mut state = Val::Live(Vec::new());
        for &c in &node.preds {
            let c = c as usize;
            if self.region.nodes[c].kind == Kind::NextIteration {
                if self.carry[c].is_none() {
                    return Val::Absent;
                }
                continue;
            }
            match &self.vals[c] {
                Val::Absent => return Val::Absent,
                Val::Dead => state = Val::Dead,
                Val::Live(_) => {}
            }
        }
        state
    }

    fn eval(&self, l: usize, iteration: u64) -> Result<Val, Stop> {
        let node = &self.region.nodes[l];
        if node.kind == Kind::Merge {
            let mut any_dead = false;
            for (k, &src) in node.inputs.iter().enumerate() {
                match self.input(src) {
                    In::Live(t) => return Ok(Val::Live(vec![Some(t), Some(Tensor::scalar(k as i32))])),
                    In::Dead => any_dead = true,
                    In::Absent => {}
                }
            }
            return Ok(if any_dead { Val::Dead } else { Val::Absent });
        }
        if node.kind == Kind::Enter && iteration > 0 && !node.constant {
            return Ok(Val::Absent);
        }
        let mut dead = false;
        let mut inputs = Vec::with_capacity(node.inputs.len());
        for &src in &node.inputs {
            match self.input(src) {
                In::Absent => return Ok(Val::Absent),
                In::Dead => dead = true,
                In::Live(t) => inputs.push(t),
            }
        }
        match self.preds_state(node) {
            Val::Absent => return Ok(Val::Absent),
            Val::Dead => dead = true,
            Val::Live(_) => {}
        }
        if dead {
            return Ok(Val::Dead);
        }
        let step = &self.run.program.steps[node.step];
        let fail = |message: String| node_error(self.run, step, KernelError::invalid(&step.op, message));
        match node.kind {
            Kind::Enter | Kind::Exit | Kind::NextIteration | Kind::Forward | Kind::Merge => {
                let t = inputs.into_iter().next().ok_or_else(|| fail("needs one input".into()))?;
                Ok(Val::Live(vec![Some(t)]))
            }
            Kind::Switch => {
                let [data, pred]: [Tensor; 2] =
                    inputs.try_into().map_err(|_| fail("needs two inputs: data and pred".into()))?;
                let taken = match pred.to_vec::<bool>().as_deref() {
                    Some([b]) => *b,
                    _ => {
                        return Err(fail(format!(
                            "pred must be a bool scalar, got {} of shape {:?}",
                            pred.dtype(),
                            pred.shape()
                        )))
                    }
                };
                Ok(Val::Live(if taken { vec![None, Some(data)] } else { vec![Some(data), None] }))
            }
            Kind::Other => {
                let outs = call_kernel(self.run, step, inputs, self.shared)?;
                Ok(Val::Live(outs.into_iter().map(Some).collect()))
            }
        }
    }
}
