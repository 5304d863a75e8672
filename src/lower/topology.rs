//! Topologies and device assignments.
//!
//! A [`Topology`] is `hosts x cores_per_host` TPU cores under one job.
//! Core `n` of task `t` is `/job:<job>/replica:0/task:<t>/device:TPU:<n>`,
//! and its host is `/job:<job>/replica:0/task:<t>/device:CPU:0`.
//!
//! A [`DeviceAssignment`] maps (replica, logical core) to a physical core.
//! The default is TensorFlow's full mesh: the flat core index of replica
//! `i`, logical core `k` is `i * cores_per_replica + k`, which lies on task
//! `index / cores_per_host`, core `index % cores_per_host`.

use super::error::LowerError;

/// A mesh of TPU hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// How many hosts (tasks) there are.
    pub hosts: u32,
    /// How many TPU cores each host has.
    pub cores_per_host: u32,
    /// The job the hosts belong to, as in `/job:<job>`.
    pub job: String,
}

impl Default for Topology {
    fn default() -> Self {
        Topology { hosts: 1, cores_per_host: 8, job: "worker".into() }
    }
}

impl Topology {
    /// Parses `HOSTSxCORES`, e.g. `2x4`.
    pub fn parse(text: &str) -> Result<Topology, LowerError> {
        let err = |reason: &str| LowerError::Topology { text: text.to_string(), reason: reason.to_string() };
        let (h, c) = text.split_once(['x', 'X']).ok_or_else(|| err("expected HOSTSxCORES"))?;
        let hosts: u32 = h.trim().parse().map_err(|_| err("the host count is not a number"))?;
        let cores: u32 = c.trim().parse().map_err(|_| err("the core count is not a number"))?;
        if hosts == 0 || cores == 0 {
            return Err(err("counts must be at least 1"));
        }
        if hosts.checked_mul(cores).is_none_or(|n| n > 65_536) {
            return Err(err("more than 65536 cores"));
        }
        Ok(Topology { hosts, cores_per_host: cores, job: "worker".into() })
    }

    /// Total number of TPU cores.
    pub fn num_cores(&self) -> u32 {
        self.hosts * self.cores_per_host
    }

    /// The TPU device name of a core.
    pub fn tpu_device(&self, core: PhysicalCore) -> String {
        format!("/job:{}/replica:0/task:{}/device:TPU:{}", self.job, core.task, core.core)
    }

    /// The host CPU of a task.
    pub fn host_device(&self, task: u32) -> String {
        format!("/job:{}/replica:0/task:{task}/device:CPU:0", self.job)
    }
}

/// The host CPU device of a device name: its `device:` part becomes `CPU:0`.
pub fn host_for_device(device: &str) -> String {
    match device.rfind("/device:") {
        Some(i) => format!("{}/device:CPU:0", &device[..i]),
        None => format!("{device}/device:CPU:0"),
    }
}

/// One physical core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PhysicalCore {
    /// The host (task) the core is on.
    pub task: u32,
    /// The core's index on its host.
    pub core: u32,
}

/// Where each logical core of each replica runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAssignment {
    /// The hosts and cores assigned from.
    pub topology: Topology,
    /// How many replicas there are.
    pub num_replicas: u32,
    /// How many logical cores each replica has.
    pub cores_per_replica: u32,
    /// `cores[replica][logical]`.
    pub cores: Vec<Vec<PhysicalCore>>,
}

impl DeviceAssignment {
    /// TensorFlow's default full-mesh assignment.
    pub fn full_mesh(topology: &Topology, num_replicas: u32, cores_per_replica: u32) -> Result<Self, LowerError> {
        let needed = num_replicas.saturating_mul(cores_per_replica);
        if num_replicas == 0 || cores_per_replica == 0 {
            return Err(LowerError::DeviceAssignment { reason: "replica and core counts must be at least 1".into() });
        }
        if needed > topology.num_cores() {
            return Err(LowerError::TooFewCores {
                num_replicas,
                cores_per_replica,
                needed,
                available: topology.num_cores(),
                hosts: topology.hosts,
                cores_per_host: topology.cores_per_host,
            });
        }
        // Several hosts, one of them partly used: refused (see `UnevenHosts`).
        let hosts_used = needed.div_ceil(topology.cores_per_host);
        let last_cores = needed % topology.cores_per_host;
        if hosts_used > 1 && last_cores != 0 {
            let suggested = (1..=topology.cores_per_host)
                .rev()
                .find(|c| needed.is_multiple_of(*c))
                .map_or_else(|| format!("1x{needed}"), |c| format!("{}x{c}", needed / c));
            return Err(LowerError::UnevenHosts {
                num_replicas,
                cores_per_replica,
                needed,
                hosts: topology.hosts,
                cores_per_host: topology.cores_per_host,
                hosts_used,
                last_host: hosts_used - 1,
                last_cores,
                suggested,
                fill: hosts_used * topology.cores_per_host / cores_per_replica,
            });
        }
        let cores = (0..num_replicas)
            .map(|r| {
                (0..cores_per_replica)
                    .map(|k| {
                        let index = r * cores_per_replica + k;
                        PhysicalCore { task: index / topology.cores_per_host, core: index % topology.cores_per_host }
                    })
                    .collect()
            })
            .collect();
        Ok(DeviceAssignment { topology: topology.clone(), num_replicas, cores_per_replica, cores })
    }

    /// Parses a table: replicas separated by `;`, logical cores by `,`, each `task:core`.
    pub fn parse_table(topology: &Topology, text: &str) -> Result<Self, LowerError> {
        let bad = |reason: String| LowerError::DeviceAssignment { reason };
        let mut cores: Vec<Vec<PhysicalCore>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (r, replica) in text.split(';').map(str::trim).filter(|s| !s.is_empty()).enumerate() {
            let mut row = Vec::new();
            for item in replica.split(',').map(str::trim) {
                let (t, c) = item.split_once(':').ok_or_else(|| bad(format!("`{item}` is not task:core")))?;
                let task: u32 = t.parse().map_err(|_| bad(format!("`{t}` is not a task number")))?;
                let core: u32 = c.parse().map_err(|_| bad(format!("`{c}` is not a core number")))?;
                if task >= topology.hosts || core >= topology.cores_per_host {
                    return Err(bad(format!(
                        "core {task}:{core} of replica {r} is outside the {}x{} topology",
                        topology.hosts, topology.cores_per_host
                    )));
                }
                if !seen.insert((task, core)) {
                    return Err(bad(format!("core {task}:{core} is assigned twice")));
                }
                row.push(PhysicalCore { task, core });
            }
            cores.push(row);
        }
        let Some(first) = cores.first() else { return Err(bad("the table is empty".into())) };
        let per = first.len() as u32;
        if let Some((r, row)) = cores.iter().enumerate().find(|(_, row)| row.len() as u32 != per) {
            return Err(bad(format!("replica {r} has {} logical cores, replica 0 has {per}", row.len())));
        }
        Ok(DeviceAssignment {
            topology: topology.clone(),
            num_replicas: cores.len() as u32,
            cores_per_replica: per,
            cores,
        })
    }

    /// The physical core of (replica, logical core).
    pub fn core(&self, replica: u32, logical: u32) -> PhysicalCore {
        self.cores[replica as usize][logical as usize]
    }

    /// The TPU device of (replica, logical core).
    pub fn tpu_device(&self, replica: u32, logical: u32) -> String {
        self.topology.tpu_device(self.core(replica, logical))
    }

    /// The host CPU of a replica: the host of its logical core `logical`.
    pub fn host_device(&self, replica: u32, logical: u32) -> String {
        self.topology.host_device(self.core(replica, logical).task)
    }

    /// The cores of the topology no replica uses, by task then core.
    pub fn idle_cores(&self) -> Vec<PhysicalCore> {
        let used: std::collections::HashSet<PhysicalCore> = self.cores.iter().flatten().copied().collect();
        (0..self.topology.hosts)
            .flat_map(|task| (0..self.topology.cores_per_host).map(move |core| PhysicalCore { task, core }))
            .filter(|c| !used.contains(c))
            .collect()
    }

    /// The idle cores as ranges per host (`task 0: TPU:8-15`), or `None`
    /// when every core runs a replica.
    pub fn idle_summary(&self) -> Option<String> {
        let idle = self.idle_cores();
        if idle.is_empty() {
            return None;
        }
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < idle.len() {
            let task = idle[i].task;
            let mut ranges: Vec<String> = Vec::new();
            while i < idle.len() && idle[i].task == task {
                let first = idle[i].core;
                while i + 1 < idle.len() && idle[i + 1].task == task && idle[i + 1].core == idle[i].core + 1 {
                    i += 1;
                }
                let last = idle[i].core;
                ranges.push(if first == last { format!("{first}") } else { format!("{first}-{last}") });
                i += 1;
            }
            parts.push(format!("task {task}: TPU:{}", ranges.join(",")));
        }
        Some(format!("{} of the {} cores idle ({})", idle.len(), self.topology.num_cores(), parts.join("; ")))
    }

    /// Distinct tasks that hold at least one replica, in order.
    pub fn tasks(&self) -> Vec<u32> {
        let mut tasks: Vec<u32> = self.cores.iter().flatten().map(|c| c.task).collect();
        tasks.sort_unstable();
        tasks.dedup();
        tasks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_mesh_places_replicas_like_tensorflow() {
        let t = Topology::parse("2x4").unwrap();
        let a = DeviceAssignment::full_mesh(&t, 8, 1).unwrap();
        assert_eq!(a.tpu_device(5, 0), "/job:worker/replica:0/task:1/device:TPU:1");
        assert_eq!(a.host_device(5, 0), "/job:worker/replica:0/task:1/device:CPU:0");
        let a = DeviceAssignment::full_mesh(&t, 4, 2).unwrap();
        assert_eq!(a.core(1, 1), PhysicalCore { task: 0, core: 3 });
        assert_eq!(a.core(2, 0), PhysicalCore { task: 1, core: 0 });
    }

    #[test]
    fn too_few_cores_message_has_the_numbers() {
        let t = Topology::parse("2x4").unwrap();
        let e = DeviceAssignment::full_mesh(&t, 32, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "num_replicas (32) x num_cores_per_replica (1) needs 32 cores, but the topology has 8 (2 hosts x 4 cores)"
        );
    }

    #[test]
    fn host_for_device_swaps_the_device_part() {
        assert_eq!(
            host_for_device("/job:worker/replica:0/task:3/device:TPU:1"),
            "/job:worker/replica:0/task:3/device:CPU:0"
        );
    }

    #[test]
    fn table_parses_and_checks() {
        let t = Topology::parse("1x4").unwrap();
        let a = DeviceAssignment::parse_table(&t, "0:3,0:2; 0:1,0:0").unwrap();
        assert_eq!(a.num_replicas, 2);
        assert_eq!(a.core(0, 0), PhysicalCore { task: 0, core: 3 });
        assert!(DeviceAssignment::parse_table(&t, "0:0;0:0").is_err());
        assert!(DeviceAssignment::parse_table(&t, "0:9").is_err());
        assert!(Topology::parse("0x4").is_err());
        assert!(Topology::parse("abc").is_err());
    }
}
