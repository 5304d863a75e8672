//! The SPMD form of a lowered module, and its expanded view.
//!
//! A lowered module holds one program per (cluster, logical core) and one
//! per (cluster, outside-compilation cluster), whatever the replica count.
//! Each such program carries `num_replicas` and no `replica`: it runs once
//! per replica, and what differs between replicas is computed when it runs:
//! - `ReplicaId` (and TensorFlow's `XlaReplicaId`) gives the running replica's id;
//! - a collective (`CollectiveAllReduce`, `CollectiveAllGather`,
//!   `CollectiveBroadcast`) names a `group` base and, when it does not span
//!   every replica, a `group_assignment`; the replica's group key, group
//!   size and rank follow from them ([`collective_member`]);
//! - a `_Send` or `_Recv` is qualified by the running replica, unless it
//!   names one itself (`replica = r`) or every one (`all_replicas = N`: a
//!   send to each replica, or a recv of a control token from each);
//! - a `VarHandleOp` with `mirrored = true` names the replica's own copy of
//!   a mirrored variable ([`mirrored_name`]: replica 0 keeps the variable's
//!   name, replica `r > 0` is `<name>/replica_<r>`, as TPUStrategy names
//!   them).
//!
//! The host program carries the device assignment as data: `topology`
//! (`HOSTSxCORES`) and `device_assignment`, an `[replicas, cores]` i32
//! tensor of flat physical core indices (`task * cores_per_host + core`).
//!
//! [`expand`] makes the per-device view: one program per replica and core,
//! with the replica bound. It is for reading; the mesh runs either form.
//! Its cost is one graph clone (which shares node storage) plus one changed
//! node per replica-dependent node, per replica.

use std::sync::Arc;

use super::error::LowerError;
use super::topology::{DeviceAssignment, PhysicalCore, Topology};
use crate::ir::{AttrValue, DType, Graph, Module, TensorData, TensorLit};

/// Graph attribute: how many replicas run an SPMD program.
pub const NUM_REPLICAS: &str = "num_replicas";
/// Host graph attribute: the topology (`HOSTSxCORES`).
pub const TOPOLOGY: &str = "topology";
/// Host graph attribute: `[replicas, cores]` flat physical core indices.
pub const DEVICE_ASSIGNMENT: &str = "device_assignment";
/// Channel endpoint attribute: the one replica it talks to.
pub const REPLICA: &str = "replica";
/// Channel endpoint attribute: it talks to every replica `0..N`.
pub const ALL_REPLICAS: &str = "all_replicas";
/// `VarHandleOp` attribute: the handle names the running replica's copy.
pub const MIRRORED: &str = "mirrored";

/// The name of replica `replica`'s copy of a mirrored variable `name`.
pub fn mirrored_name(name: &str, replica: u32) -> String {
    if replica == 0 {
        name.to_string()
    } else {
        format!("{name}/replica_{replica}")
    }
}

/// Where one replica stands in a collective.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The key every member of the replica's group shares.
    pub group: String,
    /// How many replicas the group holds.
    pub group_size: i64,
    /// The replica's position in its group, from 0.
    pub rank: i64,
}

/// The member of collective `attrs` that `replica` is, out of `num_replicas`.
///
/// With a `group_assignment` (rows of replica ids), the group is the row
/// holding the replica: key `<group>/group_<row>`. Without one, every
/// replica: key `<group>/all`, rank = the replica.
pub fn collective_member(attrs: &crate::ir::AttrMap, replica: u32, num_replicas: u32) -> Result<Member, String> {
    let base = attrs.get_str("group").ok_or("missing string attribute `group`")?;
    match attrs.get("group_assignment").and_then(AttrValue::as_tensor) {
        Some(t) => {
            let rows = groups_of(t).ok_or("`group_assignment` must be a [groups, size] integer tensor")?;
            rows.iter()
                .enumerate()
                .find_map(|(gi, row)| {
                    let rank = row.iter().position(|&r| r == i64::from(replica))?;
                    Some(Member {
                        group: format!("{base}/group_{gi}"),
                        group_size: row.len() as i64,
                        rank: rank as i64,
                    })
                })
                .ok_or_else(|| format!("replica {replica} is in no group of `group_assignment`"))
        }
        None => {
            Ok(Member { group: format!("{base}/all"), group_size: i64::from(num_replicas), rank: i64::from(replica) })
        }
    }
}

/// The rows of a `[groups, size]` group-assignment tensor.
pub fn groups_of(t: &TensorLit) -> Option<Vec<Vec<i64>>> {
    let values = t.to_f64_vec()?;
    let width = *t.shape.last()? as usize;
    if width == 0 || t.shape.len() != 2 {
        return None;
    }
    Some(values.chunks(width).map(|row| row.iter().map(|&v| v as i64).collect()).collect())
}

/// The device assignment as the host graph's attributes.
pub fn assignment_attrs(a: &DeviceAssignment) -> [(&'static str, AttrValue); 2] {
    let per_host = a.topology.cores_per_host;
    let flat: Vec<i32> = a.cores.iter().flatten().map(|c| (c.task * per_host + c.core) as i32).collect();
    let table = TensorLit {
        dtype: DType::I32,
        shape: vec![i64::from(a.num_replicas), i64::from(a.cores_per_replica)],
        data: TensorData::Int(flat),
    };
    [
        (TOPOLOGY, AttrValue::str(format!("{}x{}", a.topology.hosts, a.topology.cores_per_host))),
        (DEVICE_ASSIGNMENT, AttrValue::Tensor(Arc::new(table))),
    ]
}

/// Reads the device assignment back from a graph's attributes.
pub fn assignment_of(graph: &Graph) -> Option<Result<DeviceAssignment, LowerError>> {
    let topology = graph.attrs.get_str(TOPOLOGY)?;
    let table = graph.attrs.get(DEVICE_ASSIGNMENT)?.as_tensor()?;
    Some(assignment_from(topology, table))
}

fn assignment_from(topology: &str, table: &TensorLit) -> Result<DeviceAssignment, LowerError> {
    let topology = Topology::parse(topology)?;
    let bad = |reason: &str| LowerError::DeviceAssignment { reason: reason.to_string() };
    let [replicas, cores] = table.shape[..] else { return Err(bad("`device_assignment` must be [replicas, cores]")) };
    let values = table.to_f64_vec().ok_or_else(|| bad("`device_assignment` must hold integers"))?;
    let (replicas, cores) = (u32::try_from(replicas), u32::try_from(cores));
    let (Ok(replicas), Ok(cores)) = (replicas, cores) else { return Err(bad("negative `device_assignment` shape")) };
    if replicas == 0 || cores == 0 || values.len() != (replicas as usize) * (cores as usize) {
        return Err(bad("`device_assignment` has no entries, or fewer than its shape says"));
    }
    let total = topology.num_cores();
    let per_host = topology.cores_per_host;
    let mut rows = Vec::with_capacity(replicas as usize);
    for row in values.chunks(cores as usize) {
        let mut out = Vec::with_capacity(cores as usize);
        for &v in row {
            if !(0.0..f64::from(total)).contains(&v) {
                return Err(bad(&format!("core {v} is outside the {} x {} topology", topology.hosts, per_host)));
            }
            let flat = v as u32;
            out.push(PhysicalCore { task: flat / per_host, core: flat % per_host });
        }
        rows.push(out);
    }
    Ok(DeviceAssignment { topology, num_replicas: replicas, cores_per_replica: cores, cores: rows })
}

/// Whether a program runs once per replica (an SPMD program).
pub fn is_spmd(graph: &Graph) -> bool {
    graph.attrs.get_int(NUM_REPLICAS).is_some() && graph.attrs.get_int(REPLICA).is_none()
}

/// The name of replica `replica`'s instance of SPMD program `graph`.
///
/// `cluster` → `cluster/replica_r`, `cluster/core_k` →
/// `cluster/replica_r/core_k`, `cluster/oc_0` → `cluster/oc_0/replica_r`.
pub fn instance_name(graph: &Graph, replica: u32) -> String {
    let cluster = graph.attrs.get_str("cluster").unwrap_or(&graph.name);
    if graph.attrs.get_str("outside_compilation").is_some() {
        return format!("{}/replica_{replica}", graph.name);
    }
    match graph.attrs.get_int("logical_core") {
        Some(core) if core > 0 => format!("{cluster}/replica_{replica}/core_{core}"),
        _ => format!("{cluster}/replica_{replica}"),
    }
}

/// The device replica `replica`'s instance of SPMD program `graph` runs on:
/// its logical core's TPU, or for an outside-compilation program the host
/// of that core.
pub fn instance_device(graph: &Graph, a: &DeviceAssignment, replica: u32) -> Option<String> {
    let core = u32::try_from(graph.attrs.get_int("logical_core").unwrap_or(0)).ok()?;
    if replica >= a.num_replicas || core >= a.cores_per_replica {
        return None;
    }
    Some(if graph.attrs.get_str("role") == Some("host") {
        a.host_device(replica, core)
    } else {
        a.tpu_device(replica, core)
    })
}

/// The per-device view of an SPMD module: each SPMD program becomes one
/// program per replica, named and placed as its instance, with the replica
/// bound (`ReplicaId` a constant, collectives with their group and rank,
/// channel ends with their `replica`, mirrored handles with their copy's
/// name, which the mesh then takes as it is). A host `MirroredVarHandleOp` lists every copy (`devices`,
/// `shared_names`). Other programs are unchanged.
pub fn expand(module: &Module) -> Result<Module, LowerError> {
    let assignment = match module.graphs.iter().find_map(assignment_of) {
        Some(a) => Some(a?),
        None => None,
    };
    let mut graphs = Vec::new();
    for g in &module.graphs {
        if !is_spmd(g) {
            graphs.push(list_copies(g, module, assignment.as_ref())?);
            continue;
        }
        let replicas = u32::try_from(g.attrs.get_int(NUM_REPLICAS).unwrap_or(1)).unwrap_or(1);
        let a = assignment.as_ref().ok_or_else(|| LowerError::DeviceAssignment {
            reason: "the module has SPMD programs but no `device_assignment` on any graph".into(),
        })?;
        for r in 0..replicas {
            graphs.push(bind_replica(g, a, r, replicas)?);
        }
    }
    Ok(Module { header: module.header.clone(), graphs })
}

/// `g` with each `MirroredVarHandleOp` that names `programs` listing
/// every copy instead, replica 0's first.
fn list_copies(g: &Graph, module: &Module, a: Option<&DeviceAssignment>) -> Result<Graph, LowerError> {
    let mut out = g.clone();
    for id in g.nodes_in_order() {
        let node = g.node(id);
        let Some(listed) = node.attrs.get("programs").and_then(AttrValue::as_list) else { continue };
        if &*node.op != "MirroredVarHandleOp" {
            continue;
        }
        let a = a.ok_or_else(|| LowerError::DeviceAssignment {
            reason: "a mirrored variable names programs, but the module has no `device_assignment`".into(),
        })?;
        let shared = node.attrs.get_str("shared_name").unwrap_or(&node.name);
        let programs: Vec<&Graph> = listed.iter().filter_map(|p| module.graph(p.as_str()?)).collect();
        let replicas = programs.iter().filter_map(|p| p.attrs.get_int(NUM_REPLICAS)).max().unwrap_or(0);
        let mut copies: Vec<(String, String)> = Vec::new();
        for r in 0..u32::try_from(replicas).unwrap_or(0) {
            for p in &programs {
                if let Some(device) = instance_device(p, a, r) {
                    let copy = (device, mirrored_name(shared, r));
                    if !copies.contains(&copy) {
                        copies.push(copy);
                    }
                }
            }
        }
        let (devices, names): (Vec<_>, Vec<_>) =
            copies.into_iter().map(|(d, n)| (AttrValue::str(d), AttrValue::str(n))).unzip();
        let attrs = &mut out.node_mut(id).attrs;
        attrs.remove("programs");
        attrs.insert("devices", AttrValue::List(devices));
        attrs.insert("shared_names", AttrValue::List(names));
    }
    Ok(out)
}

/// SPMD program `g` with `replica` bound.
fn bind_replica(g: &Graph, a: &DeviceAssignment, replica: u32, replicas: u32) -> Result<Graph, LowerError> {
    let mut out = g.clone();
    out.name = instance_name(g, replica);
    out.attrs.remove(NUM_REPLICAS);
    if let Some(device) = instance_device(g, a, replica) {
        out.attrs.insert("device", AttrValue::str(device));
    }
    out.attrs.insert(REPLICA, AttrValue::Int(i64::from(replica)));
    for id in g.nodes_in_order() {
        let node = g.node(id);
        match &*node.op {
            "ReplicaId" | "XlaReplicaId" => {
                let n = out.node_mut(id);
                n.op = "Const".into();
                n.attrs = crate::ir::AttrMap::new();
                n.attrs.insert("dtype", AttrValue::Type(DType::I32));
                n.attrs.insert(
                    "value",
                    AttrValue::Tensor(Arc::new(TensorLit {
                        dtype: DType::I32,
                        shape: vec![],
                        data: TensorData::Int(vec![replica as i32]),
                    })),
                );
            }
            "CollectiveAllReduce" | "CollectiveAllGather" | "CollectiveBroadcast"
                if node.attrs.get_int("rank").is_none() =>
            {
                let m = collective_member(&node.attrs, replica, replicas)
                    .map_err(|reason| LowerError::Internal { message: format!("`%{}`: {reason}", node.name) })?;
                let attrs = &mut out.node_mut(id).attrs;
                attrs.remove("group_assignment");
                attrs.insert("group", AttrValue::str(m.group));
                attrs.insert("group_size", AttrValue::Int(m.group_size));
                attrs.insert("rank", AttrValue::Int(m.rank));
            }
            // The program no longer runs per replica: its own channel ends
            // name the replica they belong to.
            "_Send" | "_Recv" if !node.attrs.contains_key(REPLICA) && !node.attrs.contains_key(ALL_REPLICAS) => {
                out.node_mut(id).attrs.insert(REPLICA, AttrValue::Int(i64::from(replica)));
            }
            "VarHandleOp" if node.attrs.get(MIRRORED).and_then(AttrValue::as_bool) == Some(true) => {
                let shared = node.attrs.get_str("shared_name").unwrap_or(&node.name).to_string();
                out.node_mut(id).attrs.insert("shared_name", AttrValue::str(mirrored_name(&shared, replica)));
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrMap;

    fn attrs(group: &str, rows: Option<(Vec<i32>, i64)>) -> AttrMap {
        let mut a = AttrMap::new();
        a.insert("group", AttrValue::str(group));
        if let Some((values, width)) = rows {
            let shape = vec![values.len() as i64 / width, width];
            let t = TensorLit { dtype: DType::I32, shape, data: TensorData::Int(values) };
            a.insert("group_assignment", AttrValue::Tensor(Arc::new(t)));
        }
        a
    }

    #[test]
    fn members_over_all_replicas_and_over_groups() {
        let all = collective_member(&attrs("s", None), 3, 8).unwrap();
        assert_eq!(all, Member { group: "s/all".into(), group_size: 8, rank: 3 });
        let pairs = attrs("s", Some((vec![0, 2, 1, 3], 2)));
        assert_eq!(
            collective_member(&pairs, 3, 4).unwrap(),
            Member { group: "s/group_1".into(), group_size: 2, rank: 1 }
        );
        assert!(collective_member(&pairs, 5, 8).unwrap_err().contains("replica 5"));
    }

    #[test]
    fn replica_zero_keeps_the_variable_name() {
        assert_eq!(mirrored_name("w", 0), "w");
        assert_eq!(mirrored_name("w", 3), "w/replica_3");
    }

    #[test]
    fn assignment_round_trips_through_attributes() {
        let t = Topology::parse("2x4").unwrap();
        let a = DeviceAssignment::full_mesh(&t, 4, 2).unwrap();
        let mut g = Graph::new("host");
        for (k, v) in assignment_attrs(&a) {
            g.attrs.insert(k, v);
        }
        assert_eq!(assignment_of(&g).unwrap().unwrap(), a);
    }
}
