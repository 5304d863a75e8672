//! Graphviz DOT output.
//!
//! Each graph of a module is a `cluster` subgraph when there are several
//! (lowered modules: one per device, labelled with device and role).
//! Regions are nested subgraphs; in rewritten graphs, which have no
//! regions, ops are grouped by their `_tpu_replicate` cluster and, inside
//! it, by `_xla_outside_compilation`. Control edges are dashed. Between
//! graphs, `_Send`/`_Recv` pairs with the same channel are joined by bold
//! edges and the members of each collective (same group and instance) by a
//! dotted ring. A lowered module's device assignment is drawn as a legend:
//! each replica's logical cores and the devices they run on.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::ir::graph::{EdgeKind, Graph, Module, NodeId, RegionKind};

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn node_key(graph_index: usize, id: NodeId) -> String {
    format!("g{graph_index}n{}", id.0.index())
}

/// Renders a module as DOT.
pub fn to_dot(module: &Module) -> String {
    let mut out = String::from("digraph tpu_rewrite {\n  compound=true;\n  node [shape=box, fontsize=10];\n");
    let multi = module.graphs.len() > 1;
    for (gi, g) in module.graphs.iter().enumerate() {
        if multi {
            let mut label = format!("@{}", g.name);
            for key in ["device", "role"] {
                if let Some(v) = g.attrs.get_str(key) {
                    let _ = write!(label, "\\n{key}: {}", esc(v));
                }
            }
            if let Some(n) =
                g.attrs.get_int(crate::lower::spmd::NUM_REPLICAS).filter(|_| g.attrs.get_int("replica").is_none())
            {
                let _ = write!(label, "\\nruns on each of {n} replicas");
            }
            let _ = writeln!(
                out,
                "  subgraph cluster_graph{gi} {{\n    label=\"{}\";",
                esc(&label).replace("\\\\n", "\\n")
            );
        }
        graph_body(&mut out, gi, g);
        if multi {
            out.push_str("  }\n");
        }
    }
    cross_graph_edges(&mut out, module);
    if let Some(Ok(a)) = module.graphs.iter().find_map(crate::lower::spmd::assignment_of) {
        assignment_legend(&mut out, &a);
    }
    out.push_str("}\n");
    out
}

/// The most replicas the legend lists one by one.
const LEGEND_ROWS: usize = 16;

/// The device assignment as a legend node: one line per replica.
fn assignment_legend(out: &mut String, a: &crate::lower::DeviceAssignment) {
    let mut label = format!(
        "device assignment: {} replica(s) x {} core(s) on {}x{}\\l",
        a.num_replicas, a.cores_per_replica, a.topology.hosts, a.topology.cores_per_host
    );
    for (r, row) in a.cores.iter().enumerate().take(LEGEND_ROWS) {
        let cores: Vec<String> =
            row.iter().enumerate().map(|(k, c)| format!("core {k} -> task {} TPU {}", c.task, c.core)).collect();
        let _ = write!(label, "replica {r}: {}\\l", cores.join(", "));
    }
    if a.cores.len() > LEGEND_ROWS {
        let _ = write!(label, "... and {} more replica(s)\\l", a.cores.len() - LEGEND_ROWS);
    }
    let _ = writeln!(out, "  legend [shape=note, fontsize=9, label=\"{label}\"];");
}

fn graph_body(out: &mut String, gi: usize, g: &Graph) {
    // Group nodes: by region when the graph has regions, else by tags.
    let mut groups: BTreeMap<Vec<String>, Vec<NodeId>> = BTreeMap::new();
    for id in g.nodes_in_order() {
        let n = g.node(id);
        let path: Vec<String> = if !g.regions.is_empty() {
            let mut chain: Vec<String> = g
                .region_chain(n.region)
                .map(|r| match g.region(r).kind {
                    RegionKind::Replicate { .. } => format!("replicate {r}"),
                    RegionKind::OutsideCompilation => format!("outside_compilation {r}"),
                })
                .collect();
            chain.reverse();
            chain
        } else {
            let mut p = Vec::new();
            if let Some(c) = n.attrs.get_str("_tpu_replicate") {
                p.push(format!("_tpu_replicate = {c}"));
                if let Some(oc) = n.attrs.get_str("_xla_outside_compilation") {
                    p.push(format!("_xla_outside_compilation = {oc}"));
                }
            }
            p
        };
        groups.entry(path).or_default().push(id);
    }
    // Emit nested subgraphs by walking the sorted paths.
    let mut open: Vec<String> = Vec::new();
    let mut counter = 0usize;
    for (path, ids) in &groups {
        while !path.starts_with(&open) {
            open.pop();
            out.push_str("    }\n");
        }
        for label in &path[open.len()..] {
            counter += 1;
            let _ = writeln!(
                out,
                "    subgraph cluster_g{gi}_{counter} {{\n      label=\"{}\"; style=rounded;",
                esc(label)
            );
            open.push(label.clone());
        }
        for &id in ids {
            let n = g.node(id);
            let label =
                if n.op.is_empty() { format!("%{}", n.name) } else { format!("%{}\\n{}", esc(&n.name), esc(&n.op)) };
            let _ = writeln!(out, "      {} [label=\"{}\"];", node_key(gi, id), label.replace("\\\\n", "\\n"));
        }
    }
    for _ in open {
        out.push_str("    }\n");
    }
    for id in g.node_ids() {
        for input in g.inputs(id) {
            let style = if input.is_control() { " [style=dashed]" } else { "" };
            let _ = writeln!(out, "    {} -> {}{style};", node_key(gi, input.src), node_key(gi, id));
        }
    }
    let _ = EdgeKind::Control { slot: 0 };
}

fn cross_graph_edges(out: &mut String, module: &Module) {
    // An SPMD program's channel end stands for every replica's: a channel
    // may have several ends on each side.
    let mut sends: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut recvs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut collectives: BTreeMap<(String, i64), Vec<(i64, String)>> = BTreeMap::new();
    for (gi, g) in module.graphs.iter().enumerate() {
        for id in g.node_ids() {
            let n = g.node(id);
            match &*n.op {
                "_Send" => {
                    if let Some(c) = n.attrs.get_str("channel") {
                        sends.entry(c.to_string()).or_default().push(node_key(gi, id));
                    }
                }
                "_Recv" => {
                    if let Some(c) = n.attrs.get_str("channel") {
                        recvs.entry(c.to_string()).or_default().push(node_key(gi, id));
                    }
                }
                op if op.starts_with("Collective") => {
                    let group = n.attrs.get_str("group").unwrap_or_default().to_string();
                    let instance = n.attrs.get_int("instance").unwrap_or(0);
                    let rank = n.attrs.get_int("rank").unwrap_or(0);
                    collectives.entry((group, instance)).or_default().push((rank, node_key(gi, id)));
                }
                _ => {}
            }
        }
    }
    for (channel, from) in &sends {
        for recv in recvs.get(channel).into_iter().flatten() {
            for send in from {
                let _ = writeln!(out, "  {send} -> {recv} [style=bold, color=blue, label=\"{}\"];", esc(channel));
            }
        }
    }
    for (_, mut members) in collectives {
        members.sort();
        if members.len() < 2 {
            continue;
        }
        for i in 0..members.len() {
            let next = (i + 1) % members.len();
            let _ =
                writeln!(out, "  {} -> {} [style=dotted, color=red, constraint=false];", members[i].1, members[next].1);
        }
    }
}
