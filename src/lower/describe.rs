//! Strategy facts: what a TPUStrategy user learns about a device assignment.
//!
//! [`describe`] derives, from a [`DeviceAssignment`], the numbers and
//! devices TensorFlow's TPUStrategy reports for the same assignment:
//! - `num_replicas_in_sync`: the assignment's replica count;
//! - `num_hosts`: the distinct hosts of the replicas' logical core 0;
//! - `num_replicas_per_host`: `min(num_replicas, cores_per_host / cores_per_replica)`;
//! - worker and parameter devices: logical core 0 of each replica, in replica order;
//! - the strategy's host device: the host of replica 0's logical core 0;
//! - per replica, its host and its logical devices;
//! - the input workers: the replicas' hosts in order of first appearance,
//!   each with the replicas it feeds, and one input context per worker
//!   (`num_input_pipelines`, `input_pipeline_id`, `num_replicas_in_sync`
//!   and, for a given global batch, the per-replica batch size).
//!
//! Everything is computed from the assignment alone; nothing is cached.

use std::fmt;

use super::error::LowerError;
use super::topology::DeviceAssignment;

/// One host that feeds input to the replicas whose logical core 0 it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputWorker {
    /// The host's CPU device.
    pub host: String,
    /// The host's task number.
    pub task: u32,
    /// The replicas it feeds, ascending.
    pub replicas: Vec<u32>,
    /// The TPU devices (logical core 0) of those replicas.
    pub devices: Vec<String>,
}

/// What the input function of one input pipeline is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputContext {
    /// How many input pipelines there are: one per input worker.
    pub num_input_pipelines: u32,
    /// This pipeline's index, from 0.
    pub input_pipeline_id: u32,
    /// How many replicas train in lockstep.
    pub num_replicas_in_sync: u32,
    /// The per-replica batch size, when a global batch size was given.
    pub per_replica_batch_size: Option<u64>,
}

impl InputContext {
    /// The per-replica batch size for `global_batch_size`; an error when it
    /// does not divide by the replicas in sync.
    pub fn per_replica_batch_size(&self, global_batch_size: u64) -> Result<u64, LowerError> {
        per_replica_batch_size(global_batch_size, self.num_replicas_in_sync)
    }
}

/// The devices and host of one replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaFacts {
    /// The replica's index, from 0.
    pub replica: u32,
    /// The host of the replica's logical core 0.
    pub host: String,
    /// The TPU device of each logical core, in logical-core order.
    pub logical_devices: Vec<String>,
}

/// The strategy facts of a device assignment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrategyFacts {
    /// How many replicas train in lockstep.
    pub num_replicas_in_sync: u32,
    /// How many hosts feed input (the input workers).
    pub num_hosts: u32,
    /// How many replicas fit on one host.
    pub num_replicas_per_host: u32,
    /// How many cores each replica spans (model parallelism).
    pub logical_devices_per_replica: u32,
    /// The strategy's host device (non-slot variables, `update_non_slot`).
    pub host_device: String,
    /// Each replica's logical core 0, in replica order.
    pub worker_devices: Vec<String>,
    /// Where mirrored variables live: the same devices as the workers.
    pub parameter_devices: Vec<String>,
    /// The devices and host of each replica, in replica order.
    pub replicas: Vec<ReplicaFacts>,
    /// The hosts that feed input, each with its replicas.
    pub input_workers: Vec<InputWorker>,
    /// What each input pipeline's input function is told, one per input worker.
    pub input_contexts: Vec<InputContext>,
    /// The global batch size the contexts' per-replica sizes are for.
    pub global_batch_size: Option<u64>,
    /// The topology's cores no replica runs on, summarised by host
    /// (`None` when every core is used).
    pub idle_cores: Option<String>,
}

/// The per-replica batch size, with TensorFlow's error when it does not divide.
pub fn per_replica_batch_size(global_batch_size: u64, num_replicas_in_sync: u32) -> Result<u64, LowerError> {
    let n = u64::from(num_replicas_in_sync);
    if n == 0 || !global_batch_size.is_multiple_of(n) {
        return Err(LowerError::IndivisibleBatch { global_batch_size, num_replicas_in_sync });
    }
    Ok(global_batch_size / n)
}

/// The input workers of `assignment`: each replica's logical core 0 is fed
/// by its host; hosts are listed in order of their first replica.
pub fn input_workers(assignment: &DeviceAssignment) -> Vec<InputWorker> {
    let mut workers: Vec<InputWorker> = Vec::new();
    for replica in 0..assignment.num_replicas {
        let task = assignment.core(replica, 0).task;
        let device = assignment.tpu_device(replica, 0);
        match workers.iter_mut().find(|w| w.task == task) {
            Some(w) => {
                w.replicas.push(replica);
                w.devices.push(device);
            }
            None => workers.push(InputWorker {
                host: assignment.topology.host_device(task),
                task,
                replicas: vec![replica],
                devices: vec![device],
            }),
        }
    }
    workers
}

/// The strategy facts of `assignment`; with `global_batch_size`, the input
/// contexts carry the per-replica batch size, and a size that does not
/// divide by the replica count is an error.
pub fn describe(assignment: &DeviceAssignment, global_batch_size: Option<u64>) -> Result<StrategyFacts, LowerError> {
    let n = assignment.num_replicas;
    let per_batch = global_batch_size.map(|g| per_replica_batch_size(g, n)).transpose()?;
    let worker_devices: Vec<String> = (0..n).map(|r| assignment.tpu_device(r, 0)).collect();
    let replicas: Vec<ReplicaFacts> = (0..n)
        .map(|r| ReplicaFacts {
            replica: r,
            host: assignment.host_device(r, 0),
            logical_devices: (0..assignment.cores_per_replica).map(|k| assignment.tpu_device(r, k)).collect(),
        })
        .collect();
    let input_workers = input_workers(assignment);
    let num_workers = input_workers.len() as u32;
    let input_contexts = (0..num_workers)
        .map(|i| InputContext {
            num_input_pipelines: num_workers,
            input_pipeline_id: i,
            num_replicas_in_sync: n,
            per_replica_batch_size: per_batch,
        })
        .collect();
    let max_models_per_host = assignment.topology.cores_per_host / assignment.cores_per_replica.max(1);
    Ok(StrategyFacts {
        num_replicas_in_sync: n,
        num_hosts: num_workers,
        num_replicas_per_host: n.min(max_models_per_host),
        logical_devices_per_replica: assignment.cores_per_replica,
        host_device: if n == 0 { assignment.topology.host_device(0) } else { assignment.host_device(0, 0) },
        parameter_devices: worker_devices.clone(),
        worker_devices,
        replicas,
        input_workers,
        input_contexts,
        global_batch_size,
        idle_cores: assignment.idle_summary(),
    })
}

impl fmt::Display for StrategyFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "num_replicas_in_sync: {}", self.num_replicas_in_sync)?;
        writeln!(f, "num_hosts: {}", self.num_hosts)?;
        writeln!(f, "num_replicas_per_host: {}", self.num_replicas_per_host)?;
        writeln!(f, "logical_devices_per_replica: {}", self.logical_devices_per_replica)?;
        writeln!(f, "host_device: {}", self.host_device)?;
        writeln!(f, "worker_devices:")?;
        for d in &self.worker_devices {
            writeln!(f, "  {d}")?;
        }
        writeln!(f, "parameter_devices:")?;
        for d in &self.parameter_devices {
            writeln!(f, "  {d}")?;
        }
        writeln!(f, "replicas:")?;
        for r in &self.replicas {
            writeln!(f, "  replica {}: host {}", r.replica, r.host)?;
            for (k, d) in r.logical_devices.iter().enumerate() {
                writeln!(f, "    logical device {k}: {d}")?;
            }
        }
        if let Some(idle) = &self.idle_cores {
            writeln!(f, "idle_cores: {idle}")?;
        }
        writeln!(f, "input_pipelines:")?;
        for (w, c) in self.input_workers.iter().zip(&self.input_contexts) {
            let replicas: Vec<String> = w.replicas.iter().map(u32::to_string).collect();
            writeln!(f, "  pipeline {} on {}: replicas [{}]", c.input_pipeline_id, w.host, replicas.join(", "))?;
            write!(
                f,
                "    num_input_pipelines: {}, input_pipeline_id: {}, num_replicas_in_sync: {}",
                c.num_input_pipelines, c.input_pipeline_id, c.num_replicas_in_sync
            )?;
            match (c.per_replica_batch_size, self.global_batch_size) {
                (Some(b), Some(g)) => writeln!(f, ", per_replica_batch_size: {b} (global {g})")?,
                _ => writeln!(f)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::Topology;

    fn dev(task: u32, core: u32) -> String {
        format!("/job:worker/replica:0/task:{task}/device:TPU:{core}")
    }

    fn host(task: u32) -> String {
        format!("/job:worker/replica:0/task:{task}/device:CPU:0")
    }

    #[test]
    fn idle_cores_are_named_by_host() {
        let t = Topology::parse("1x16").unwrap();
        let a = DeviceAssignment::full_mesh(&t, 8, 1).unwrap();
        let facts = describe(&a, None).unwrap();
        let idle = facts.idle_cores.as_deref().expect("8 idle cores");
        assert_eq!(idle, "8 of the 16 cores idle (task 0: TPU:8-15)");
        assert!(facts.to_string().contains("idle_cores: 8 of the 16 cores idle"));
        let t = Topology::parse("2x4").unwrap();
        let table = DeviceAssignment::parse_table(&t, "0:0;0:2;1:3").unwrap();
        assert_eq!(table.idle_summary().as_deref(), Some("5 of the 8 cores idle (task 0: TPU:1,3; task 1: TPU:0-2)"));
        let full = DeviceAssignment::full_mesh(&t, 8, 1).unwrap();
        assert_eq!(describe(&full, None).unwrap().idle_cores, None);
    }

    #[test]
    fn two_by_four_with_eight_replicas() {
        let t = Topology::parse("2x4").unwrap();
        let a = DeviceAssignment::full_mesh(&t, 8, 1).unwrap();
        let facts = describe(&a, Some(64)).unwrap();
        // num_replicas_in_sync = device_assignment.num_replicas = 8.
        assert_eq!(facts.num_replicas_in_sync, 8);
        // Replica r sits on flat core r: task r / 4. Hosts {task 0, task 1}: 2.
        assert_eq!(facts.num_hosts, 2);
        // min(num_replicas = 8, cores_per_host 4 // cores_per_replica 1 = 4) = 4.
        assert_eq!(facts.num_replicas_per_host, 4);
        assert_eq!(facts.logical_devices_per_replica, 1);
        // worker_devices = tpu_devices[:, 0]: task r / 4, core r % 4.
        let expected: Vec<String> = (0..8).map(|r| dev(r / 4, r % 4)).collect();
        assert_eq!(facts.worker_devices, expected);
        assert_eq!(facts.parameter_devices, expected);
        // The host device is get_host_for_device(tpu_devices[0][0]).
        assert_eq!(facts.host_device, host(0));
        assert_eq!(facts.replicas[5].host, host(1));
        assert_eq!(facts.replicas[5].logical_devices, vec![dev(1, 1)]);
        // Two input workers: task 0 feeds replicas 0..4, task 1 feeds 4..8.
        assert_eq!(facts.input_workers.len(), 2);
        assert_eq!(facts.input_workers[0].replicas, vec![0, 1, 2, 3]);
        assert_eq!(facts.input_workers[1].replicas, vec![4, 5, 6, 7]);
        assert_eq!(facts.input_workers[1].host, host(1));
        // InputContext(num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=8);
        // per-replica batch = 64 // 8 = 8.
        for (i, c) in facts.input_contexts.iter().enumerate() {
            assert_eq!(
                *c,
                InputContext {
                    num_input_pipelines: 2,
                    input_pipeline_id: i as u32,
                    num_replicas_in_sync: 8,
                    per_replica_batch_size: Some(8)
                }
            );
        }
    }

    #[test]
    fn four_replicas_of_two_cores() {
        let t = Topology::parse("2x4").unwrap();
        let a = DeviceAssignment::full_mesh(&t, 4, 2).unwrap();
        let facts = describe(&a, Some(16)).unwrap();
        assert_eq!(facts.num_replicas_in_sync, 4);
        // Replica r, core k sits on flat core 2r + k: replicas 0, 1 on task 0, replicas 2, 3 on task 1.
        assert_eq!(facts.num_hosts, 2);
        // min(num_replicas = 4, cores_per_host 4 // cores_per_replica 2 = 2) = 2.
        assert_eq!(facts.num_replicas_per_host, 2);
        assert_eq!(facts.logical_devices_per_replica, 2);
        // Logical core 0 of replica r: flat core 2r, i.e. (0,0), (0,2), (1,0), (1,2).
        assert_eq!(facts.worker_devices, vec![dev(0, 0), dev(0, 2), dev(1, 0), dev(1, 2)]);
        assert_eq!(facts.replicas[1].logical_devices, vec![dev(0, 2), dev(0, 3)]);
        assert_eq!(facts.replicas[2].host, host(1));
        assert_eq!(facts.input_workers[0].replicas, vec![0, 1]);
        assert_eq!(facts.input_workers[1].replicas, vec![2, 3]);
        // 16 // 4 = 4 per replica.
        assert_eq!(facts.input_contexts[1].per_replica_batch_size, Some(4));
        assert_eq!(facts.input_contexts[1].input_pipeline_id, 1);
        assert_eq!(facts.input_contexts[1].num_input_pipelines, 2);
        let text = facts.to_string();
        assert!(text.contains("num_replicas_per_host: 2\n"), "{text}");
        assert!(
            text.contains("  pipeline 1 on /job:worker/replica:0/task:1/device:CPU:0: replicas [2, 3]\n"),
            "{text}"
        );
    }

    #[test]
    fn indivisible_global_batch_uses_tensorflow_wording() {
        let t = Topology::parse("1x2").unwrap();
        let a = DeviceAssignment::full_mesh(&t, 2, 1).unwrap();
        let e = describe(&a, Some(7)).unwrap_err();
        assert_eq!(e.to_string(), "The `global_batch_size` 7 is not divisible by `num_replicas_in_sync` 2");
        assert_eq!(describe(&a, None).unwrap().input_contexts[0].per_replica_batch_size, None);
    }

    #[test]
    fn explicit_table_groups_replicas_by_first_appearance() {
        let t = Topology::parse("2x2").unwrap();
        let a = DeviceAssignment::parse_table(&t, "1:0; 0:0; 1:1").unwrap();
        let workers = input_workers(&a);
        assert_eq!(workers[0].task, 1);
        assert_eq!(workers[0].replicas, vec![0, 2]);
        assert_eq!(workers[1].replicas, vec![1]);
        let facts = describe(&a, None).unwrap();
        assert_eq!(facts.host_device, host(1));
        // min(3, 2 // 1) = 2.
        assert_eq!(facts.num_replicas_per_host, 2);
    }
}
