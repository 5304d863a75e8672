//! The op registry: what the verifier and passes know about op types.
//!
//! An op type missing here is not an error: TensorFlow has thousands of op
//! types and graphs may carry any of them. For registered ops the verifier
//! checks output indices and attribute kinds, and the unsupported-op report
//! knows which ops cannot be compiled for a TPU.

use super::types::AttrKind;

/// How many outputs an op has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outputs {
    /// Exactly this many.
    Fixed(u32),
    /// As many as the int attribute of this name (e.g. `num_replicas`).
    FromAttr(&'static str),
    /// As many as the list attribute of this name has items (e.g. `T` of IdentityN).
    FromListAttr(&'static str),
    /// As many as the op has data inputs.
    SameAsInputs,
}

/// Where an op may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Compiles for the TPU.
    Tpu,
    /// Runs on the host only; inside a cluster it needs outside_compilation.
    HostOnly,
    /// A TPU system op that the replicate rewrite itself manages.
    TpuSystem,
}

/// What the registry knows of one op type.
#[derive(Clone, Copy, Debug)]
pub struct OpDef {
    pub name: &'static str,
    pub outputs: Outputs,
    pub attrs: &'static [(&'static str, AttrKind)],
    pub placement: Placement,
}

use AttrKind as K;
use Outputs::*;
use Placement::*;

macro_rules! ops {
    ($( $name:literal => $outputs:expr, $placement:expr, [$($key:literal : $kind:ident),*] ;)*) => {
        &[ $( OpDef { name: $name, outputs: $outputs, placement: $placement, attrs: &[$(($key, K::$kind)),*] } ),* ]
    };
}

/// The registered op types, sorted by name.
static REGISTRY: &[OpDef] = ops! {
    "Abs" => Fixed(1), Tpu, ["T": Type];
    "Add" => Fixed(1), Tpu, ["T": Type];
    "AddN" => Fixed(1), Tpu, ["N": Int, "T": Type];
    "AddV2" => Fixed(1), Tpu, ["T": Type];
    "AllReduce" => SameAsInputs, Tpu, ["reduce_op": Str];
    "AssignAddVariableOp" => Fixed(0), Tpu, ["dtype": Type];
    "AssignSubVariableOp" => Fixed(0), Tpu, ["dtype": Type];
    "AssignVariableOp" => Fixed(0), Tpu, ["dtype": Type];
    "BatchMatMul" => Fixed(1), Tpu, ["T": Type, "adj_x": Bool, "adj_y": Bool];
    "BatchMatMulV2" => Fixed(1), Tpu, ["T": Type, "adj_x": Bool, "adj_y": Bool];
    "BiasAdd" => Fixed(1), Tpu, ["T": Type, "data_format": Str];
    "BiasAddGrad" => Fixed(1), Tpu, ["T": Type, "data_format": Str];
    "Broadcast" => Fixed(1), Tpu, [];
    "BroadcastGradientArgs" => Fixed(2), Tpu, ["T": Type];
    "BroadcastTo" => Fixed(1), Tpu, ["T": Type, "Tidx": Type];
    "Cast" => Fixed(1), Tpu, ["SrcT": Type, "DstT": Type, "Truncate": Bool];
    "Const" => Fixed(1), Tpu, ["dtype": Type, "value": Tensor];
    "CrossReplicaSum" => Fixed(1), Tpu, ["T": Type];
    "DecodeJpeg" => Fixed(1), HostOnly, [];
    "Einsum" => Fixed(1), Tpu, ["equation": Str, "N": Int, "T": Type];
    "Erfc" => Fixed(1), Tpu, ["T": Type];
    "Exp" => Fixed(1), Tpu, ["T": Type];
    "Fill" => Fixed(1), Tpu, ["T": Type, "index_type": Type];
    "FloorDiv" => Fixed(1), Tpu, ["T": Type];
    "Identity" => Fixed(1), Tpu, ["T": Type];
    "IdentityN" => FromListAttr("T"), Tpu, ["T": List];
    "InvertPermutation" => Fixed(1), Tpu, ["T": Type];
    "Log" => Fixed(1), Tpu, ["T": Type];
    "MatMul" => Fixed(1), Tpu, ["T": Type, "transpose_a": Bool, "transpose_b": Bool];
    "Maximum" => Fixed(1), Tpu, ["T": Type];
    "Mean" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "keep_dims": Bool];
    "Minimum" => Fixed(1), Tpu, ["T": Type];
    "MirroredVarHandleOp" => Fixed(1), HostOnly, ["dtype": Type, "shape": Shape, "devices": List, "shared_names": List];
    "Mul" => Fixed(1), Tpu, ["T": Type];
    "Neg" => Fixed(1), Tpu, ["T": Type];
    "NoOp" => Fixed(0), Tpu, [];
    "OnesLike" => Fixed(1), Tpu, ["T": Type];
    "Placeholder" => Fixed(1), HostOnly, ["dtype": Type, "shape": Shape];
    "PlaceholderWithDefault" => Fixed(1), HostOnly, ["dtype": Type, "shape": Shape];
    "Pow" => Fixed(1), Tpu, ["T": Type];
    "Print" => Fixed(1), HostOnly, ["T": Type, "U": List, "message": Str, "first_n": Int, "summarize": Int];
    "PrintV2" => Fixed(0), HostOnly, ["output_stream": Str, "end": Str];
    "PyFunc" => FromListAttr("Tout"), HostOnly, ["token": Str, "Tin": List, "Tout": List];
    "EagerPyFunc" => FromListAttr("Tout"), HostOnly, ["token": Str, "Tin": List, "Tout": List];
    "RealDiv" => Fixed(1), Tpu, ["T": Type];
    "Reciprocal" => Fixed(1), Tpu, ["T": Type];
    "ReadVariableOp" => Fixed(1), Tpu, ["dtype": Type];
    "Relu" => Fixed(1), Tpu, ["T": Type];
    "ReluGrad" => Fixed(1), Tpu, ["T": Type];
    "ReplicaId" => Fixed(1), Tpu, [];
    "Reshape" => Fixed(1), Tpu, ["T": Type, "Tshape": Type];
    "Rsqrt" => Fixed(1), Tpu, ["T": Type];
    "RsqrtGrad" => Fixed(1), Tpu, ["T": Type];
    "Shape" => Fixed(1), Tpu, ["T": Type, "out_type": Type];
    "Sigmoid" => Fixed(1), Tpu, ["T": Type];
    "SigmoidGrad" => Fixed(1), Tpu, ["T": Type];
    "Softmax" => Fixed(1), Tpu, ["T": Type];
    "Sqrt" => Fixed(1), Tpu, ["T": Type];
    "Square" => Fixed(1), Tpu, ["T": Type];
    "SquaredDifference" => Fixed(1), Tpu, ["T": Type];
    "StopGradient" => Fixed(1), Tpu, ["T": Type];
    "StringFormat" => Fixed(1), HostOnly, ["template": Str];
    "StringJoin" => Fixed(1), HostOnly, ["N": Int, "separator": Str];
    "Sub" => Fixed(1), Tpu, ["T": Type];
    "Sum" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "keep_dims": Bool];
    "TPUCompilationResult" => Fixed(1), TpuSystem, [];
    "TPUReplicateMetadata" => Fixed(0), TpuSystem, ["num_replicas": Int, "num_cores_per_replica": Int, "topology": Str, "use_tpu": Bool, "device_assignment": List, "computation_shape": List, "host_compute_core": List, "padding_map": List, "allow_soft_placement": Bool];
    "TPUReplicatedInput" => Fixed(1), TpuSystem, ["N": Int, "T": Type, "index": Int, "is_mirrored_variable": Bool, "is_packed": Bool];
    "TPUReplicatedOutput" => FromAttr("num_replicas"), TpuSystem, ["num_replicas": Int, "T": Type, "reduce_op": Str];
    "Tanh" => Fixed(1), Tpu, ["T": Type];
    "TanhGrad" => Fixed(1), Tpu, ["T": Type];
    "Tile" => Fixed(1), Tpu, ["T": Type, "Tmultiples": Type];
    "Transpose" => Fixed(1), Tpu, ["T": Type, "Tperm": Type];
    "Update" => Fixed(0), Tpu, ["fn": Str, "dtype": Type];
    "UpdateNonSlot" => Fixed(0), HostOnly, ["fn": Str, "dtype": Type];
    "VarHandleOp" => Fixed(1), Tpu, ["dtype": Type, "shape": Shape, "container": Str, "shared_name": Str];
    "VarIsInitializedOp" => Fixed(1), Tpu, [];
    "ZerosLike" => Fixed(1), Tpu, ["T": Type];
};

/// The registry entry for `op`, if the op type is known.
pub fn lookup(op: &str) -> Option<&'static OpDef> {
    REGISTRY.iter().find(|d| d.name == op)
}

/// The expected kind of attribute `key` on `op`, if both are known.
pub fn attr_kind(op: &str, key: &str) -> Option<AttrKind> {
    lookup(op)?.attrs.iter().find(|(k, _)| *k == key).map(|(_, kind)| *kind)
}

/// True for op types that cannot be compiled for a TPU.
pub fn is_host_only(op: &str) -> bool {
    lookup(op).is_some_and(|d| d.placement == Placement::HostOnly)
}

/// All registered op types.
pub fn all() -> &'static [OpDef] {
    REGISTRY
}
