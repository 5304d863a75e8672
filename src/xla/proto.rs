//! `xla.CompileOptionsProto`: the part of it tpu-rewrite sets, as prost
//! messages with XLA's field numbers.
//!
//! Only the fields below are ever written; protobuf readers skip nothing and
//! default the rest, so the encoding is a valid `CompileOptionsProto`.

use prost::Message;

/// `xla.DeviceAssignmentProto.ComputationDevice`: the device of each replica
/// for one computation (logical core).
#[derive(Clone, PartialEq, Message)]
pub struct ComputationDevice {
    /// The device of each replica, in replica order.
    #[prost(int64, repeated, tag = "1")]
    pub replica_device_ids: Vec<i64>,
}

/// `xla.DeviceAssignmentProto`.
#[derive(Clone, PartialEq, Message)]
pub struct DeviceAssignmentProto {
    /// How many replicas there are.
    #[prost(int32, tag = "1")]
    pub replica_count: i32,
    /// How many computations (partitions) each replica has.
    #[prost(int32, tag = "2")]
    pub computation_count: i32,
    /// The devices of each computation, in computation order.
    #[prost(message, repeated, tag = "3")]
    pub computation_devices: Vec<ComputationDevice>,
}

/// `xla.ExecutableBuildOptionsProto`.
#[derive(Clone, PartialEq, Message)]
pub struct ExecutableBuildOptionsProto {
    /// -1: not set (the device assignment decides).
    #[prost(int64, tag = "1")]
    pub device_ordinal: i64,
    /// How many replicas the program runs as.
    #[prost(int64, tag = "4")]
    pub num_replicas: i64,
    /// How many partitions (logical cores) each replica has.
    #[prost(int64, tag = "5")]
    pub num_partitions: i64,
    /// On with several partitions: XLA's SPMD partitioner places the
    /// maximally sharded ops (XLA:CPU refuses partitions without it).
    #[prost(bool, tag = "6")]
    pub use_spmd_partitioning: bool,
    /// Which device runs each replica and partition.
    #[prost(message, optional, tag = "9")]
    pub device_assignment: Option<DeviceAssignmentProto>,
}

/// `xla.CompileOptionsProto`.
#[derive(Clone, PartialEq, Message)]
pub struct CompileOptionsProto {
    /// The build options of the executable.
    #[prost(message, optional, tag = "3")]
    pub executable_build_options: Option<ExecutableBuildOptionsProto>,
}

/// The serialized compile options for `num_replicas` x `num_partitions`
/// devices; `devices[r][p]` is the device id of replica r, partition p.
pub fn compile_options(num_replicas: usize, num_partitions: usize, devices: &[Vec<i64>]) -> Vec<u8> {
    let computation_devices = (0..num_partitions)
        .map(|p| ComputationDevice { replica_device_ids: devices.iter().map(|row| row[p]).collect() })
        .collect();
    let options = CompileOptionsProto {
        executable_build_options: Some(ExecutableBuildOptionsProto {
            device_ordinal: -1,
            num_replicas: num_replicas as i64,
            num_partitions: num_partitions as i64,
            use_spmd_partitioning: num_partitions > 1,
            device_assignment: Some(DeviceAssignmentProto {
                replica_count: num_replicas as i32,
                computation_count: num_partitions as i32,
                computation_devices,
            }),
        }),
    };
    options.encode_to_vec()
}
