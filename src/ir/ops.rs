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
    /// The op type, as nodes name it (`MatMul`).
    pub name: &'static str,
    /// How many outputs a node of this type has.
    pub outputs: Outputs,
    /// The attributes the verifier checks, with the kind of value each must have.
    pub attrs: &'static [(&'static str, AttrKind)],
    /// Where the op may run.
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
    "Acos" => Fixed(1), Tpu, ["T": Type];
    "Acosh" => Fixed(1), Tpu, ["T": Type];
    "Add" => Fixed(1), Tpu, ["T": Type];
    "AddN" => Fixed(1), Tpu, ["N": Int, "T": Type];
    "AddV2" => Fixed(1), Tpu, ["T": Type];
    "AdjustContrastv2" => Fixed(1), Tpu, ["T": Type];
    "AdjustHue" => Fixed(1), Tpu, ["T": Type];
    "AdjustSaturation" => Fixed(1), Tpu, ["T": Type];
    "All" => Fixed(1), Tpu, ["Tidx": Type, "keep_dims": Bool];
    "AllGather" => Fixed(1), Tpu, ["T": Type];
    "AllReduce" => SameAsInputs, Tpu, ["reduce_op": Str];
    "Angle" => Fixed(1), Tpu, ["T": Type, "Tout": Type];
    "Any" => Fixed(1), Tpu, ["Tidx": Type, "keep_dims": Bool];
    "ApproxTopK" => Fixed(2), Tpu, ["k": Int, "reduction_dimension": Int, "recall_target": Float, "is_max_k": Bool, "reduction_input_size_override": Int, "aggregate_to_topk": Bool, "T": Type];
    "ApproximateEqual" => Fixed(1), Tpu, ["T": Type, "tolerance": Float];
    "ArgMax" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "output_type": Type];
    "ArgMin" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "output_type": Type];
    "Asin" => Fixed(1), Tpu, ["T": Type];
    "Asinh" => Fixed(1), Tpu, ["T": Type];
    "Assert" => Fixed(0), HostOnly, ["T": List, "summarize": Int];
    "AssignAddVariableOp" => Fixed(0), Tpu, ["dtype": Type];
    "AssignSubVariableOp" => Fixed(0), Tpu, ["dtype": Type];
    "AssignVariableOp" => Fixed(0), Tpu, ["dtype": Type];
    "AssignVariableXlaConcatND" => Fixed(0), Tpu, ["N": Int, "T": Type, "num_concats": List, "paddings": List];
    "Atan" => Fixed(1), Tpu, ["T": Type];
    "Atan2" => Fixed(1), Tpu, ["T": Type];
    "Atanh" => Fixed(1), Tpu, ["T": Type];
    "AvgPool" => Fixed(1), Tpu, ["T": Type, "ksize": List, "strides": List, "padding": Str, "data_format": Str];
    "AvgPool3D" => Fixed(1), Tpu, ["T": Type, "ksize": List, "strides": List, "padding": Str, "data_format": Str];
    "AvgPool3DGrad" => Fixed(1), Tpu, ["T": Type, "ksize": List, "strides": List, "padding": Str, "data_format": Str];
    "AvgPoolGrad" => Fixed(1), Tpu, ["T": Type, "ksize": List, "strides": List, "padding": Str, "data_format": Str];
    "BatchMatMul" => Fixed(1), Tpu, ["T": Type, "adj_x": Bool, "adj_y": Bool];
    "BatchMatMulV2" => Fixed(1), Tpu, ["T": Type, "adj_x": Bool, "adj_y": Bool];
    "BatchMatMulV3" => Fixed(1), Tpu, ["Ta": Type, "Tb": Type, "Tout": Type, "adj_x": Bool, "adj_y": Bool];
    "BatchToSpace" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "block_size": Int];
    "BatchToSpaceND" => Fixed(1), Tpu, ["T": Type, "Tblock_shape": Type, "Tcrops": Type];
    "BesselI0e" => Fixed(1), Tpu, ["T": Type];
    "BesselI1e" => Fixed(1), Tpu, ["T": Type];
    "Betainc" => Fixed(1), Tpu, ["T": Type];
    "BiasAdd" => Fixed(1), Tpu, ["T": Type, "data_format": Str];
    "BiasAddGrad" => Fixed(1), Tpu, ["T": Type, "data_format": Str];
    "BiasAddV1" => Fixed(1), Tpu, ["T": Type];
    "Bincount" => Fixed(1), Tpu, ["T": Type];
    "Bitcast" => Fixed(1), Tpu, ["T": Type, "type": Type];
    "BitwiseAnd" => Fixed(1), Tpu, ["T": Type];
    "BitwiseOr" => Fixed(1), Tpu, ["T": Type];
    "BitwiseXor" => Fixed(1), Tpu, ["T": Type];
    "Broadcast" => Fixed(1), Tpu, [];
    "BroadcastArgs" => Fixed(1), Tpu, ["T": Type];
    "BroadcastGradientArgs" => Fixed(2), Tpu, ["T": Type];
    "BroadcastTo" => Fixed(1), Tpu, ["T": Type, "Tidx": Type];
    "Bucketize" => Fixed(1), Tpu, ["T": Type, "boundaries": List];
    "Case" => FromListAttr("Tout"), Tpu, ["Tin": List, "Tout": List, "branches": List];
    "Cast" => Fixed(1), Tpu, ["SrcT": Type, "DstT": Type, "Truncate": Bool];
    "Ceil" => Fixed(1), Tpu, ["T": Type];
    "CheckNumerics" => Fixed(1), Tpu, ["T": Type, "message": Str];
    "Cholesky" => Fixed(1), Tpu, ["T": Type];
    "ClipByValue" => Fixed(1), Tpu, ["T": Type];
    "CollectiveAssignGroupV2" => Fixed(2), Tpu, [];
    "CollectiveReduceV2" => Fixed(1), Tpu, ["Nordering_token": Int, "T": Type, "communication_hint": Str, "final_op": Str, "max_subdivs_per_device": Int, "merge_op": Str, "timeout_seconds": Float];
    "Complex" => Fixed(1), Tpu, ["T": Type, "Tout": Type];
    "ComplexAbs" => Fixed(1), Tpu, ["T": Type, "Tout": Type];
    "Concat" => Fixed(1), Tpu, ["N": Int, "T": Type];
    "ConcatOffset" => FromAttr("N"), Tpu, ["N": Int, "shape_type": Type];
    "ConcatV2" => Fixed(1), Tpu, ["N": Int, "T": Type, "Tidx": Type];
    "Conj" => Fixed(1), Tpu, ["T": Type];
    "ConjugateTranspose" => Fixed(1), Tpu, ["T": Type, "Tperm": Type];
    "Const" => Fixed(1), Tpu, ["dtype": Type, "value": Tensor];
    "ControlTrigger" => Fixed(0), Tpu, [];
    "Conv" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "explicit_paddings": List, "data_format": Str, "dilations": List, "batch_dims": Int, "groups": Int];
    "Conv2D" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "explicit_paddings": List, "data_format": Str, "dilations": List, "use_cudnn_on_gpu": Bool];
    "Conv2DBackpropFilter" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "explicit_paddings": List, "data_format": Str, "dilations": List, "use_cudnn_on_gpu": Bool];
    "Conv2DBackpropInput" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "explicit_paddings": List, "data_format": Str, "dilations": List, "use_cudnn_on_gpu": Bool];
    "Conv3D" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "data_format": Str, "dilations": List];
    "Conv3DBackpropFilterV2" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "data_format": Str, "dilations": List];
    "Conv3DBackpropInputV2" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "data_format": Str, "dilations": List, "Tshape": Type];
    "Cos" => Fixed(1), Tpu, ["T": Type];
    "Cosh" => Fixed(1), Tpu, ["T": Type];
    "Cross" => Fixed(1), Tpu, ["T": Type];
    "CrossReplicaSum" => Fixed(1), Tpu, ["T": Type];
    "Cumprod" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "exclusive": Bool, "reverse": Bool];
    "Cumsum" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "exclusive": Bool, "reverse": Bool];
    "CumulativeLogsumexp" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "exclusive": Bool, "reverse": Bool];
    "DataFormatDimMap" => Fixed(1), Tpu, ["T": Type, "src_format": Str, "dst_format": Str];
    "DataFormatVecPermute" => Fixed(1), Tpu, ["T": Type, "src_format": Str, "dst_format": Str];
    "DecodeJpeg" => Fixed(1), HostOnly, [];
    "DenseBincount" => Fixed(1), Tpu, ["Tidx": Type, "T": Type, "binary_output": Bool];
    "DepthToSpace" => Fixed(1), Tpu, ["T": Type, "block_size": Int, "data_format": Str];
    "DepthwiseConv2dNative" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "explicit_paddings": List, "data_format": Str, "dilations": List];
    "DepthwiseConv2dNativeBackpropFilter" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "explicit_paddings": List, "data_format": Str, "dilations": List];
    "DepthwiseConv2dNativeBackpropInput" => Fixed(1), Tpu, ["T": Type, "strides": List, "padding": Str, "explicit_paddings": List, "data_format": Str, "dilations": List];
    "Dequantize" => Fixed(1), Tpu, ["T": Type, "mode": Str, "narrow_range": Bool, "axis": Int, "dtype": Type];
    "DeviceIndex" => Fixed(1), Tpu, ["device_names": List];
    "Diag" => Fixed(1), Tpu, ["T": Type];
    "DiagPart" => Fixed(1), Tpu, ["T": Type];
    "Digamma" => Fixed(1), Tpu, ["T": Type];
    "Div" => Fixed(1), Tpu, ["T": Type];
    "DivNoNan" => Fixed(1), Tpu, ["T": Type];
    "DynamicPartition" => FromAttr("num_partitions"), Tpu, ["T": Type, "num_partitions": Int];
    "EagerPyFunc" => FromListAttr("Tout"), HostOnly, ["token": Str, "Tin": List, "Tout": List];
    "Einsum" => Fixed(1), Tpu, ["equation": Str, "N": Int, "T": Type];
    "Elu" => Fixed(1), Tpu, ["T": Type];
    "EluGrad" => Fixed(1), Tpu, ["T": Type];
    "Empty" => Fixed(1), Tpu, ["dtype": Type, "init": Bool];
    "EmptyTensorList" => Fixed(1), Tpu, ["element_dtype": Type, "shape_type": Type];
    "EnsureShape" => Fixed(1), Tpu, ["T": Type, "shape": Shape];
    "Enter" => Fixed(1), Tpu, ["T": Type, "frame_name": Str, "is_constant": Bool, "parallel_iterations": Int];
    "Equal" => Fixed(1), Tpu, ["T": Type, "incompatible_shape_error": Bool];
    "Erf" => Fixed(1), Tpu, ["T": Type];
    "Erfc" => Fixed(1), Tpu, ["T": Type];
    "Erfinv" => Fixed(1), Tpu, ["T": Type];
    "Exit" => Fixed(1), Tpu, ["T": Type];
    "Exp" => Fixed(1), Tpu, ["T": Type];
    "ExpandDims" => Fixed(1), Tpu, ["T": Type, "Tdim": Type];
    "Expm1" => Fixed(1), Tpu, ["T": Type];
    "ExtractImagePatches" => Fixed(1), Tpu, ["T": Type, "ksizes": List, "strides": List, "rates": List, "padding": Str];
    "FFT" => Fixed(1), Tpu, ["Tcomplex": Type];
    "FFT2D" => Fixed(1), Tpu, ["Tcomplex": Type];
    "FFT3D" => Fixed(1), Tpu, ["Tcomplex": Type];
    "FakeParam" => Fixed(1), Tpu, ["dtype": Type, "shape": Shape];
    "FakeQuantWithMinMaxArgs" => Fixed(1), Tpu, ["min": Float, "max": Float, "num_bits": Int, "narrow_range": Bool];
    "FakeQuantWithMinMaxArgsGradient" => Fixed(1), Tpu, ["min": Float, "max": Float, "num_bits": Int, "narrow_range": Bool];
    "FakeQuantWithMinMaxVars" => Fixed(1), Tpu, ["num_bits": Int, "narrow_range": Bool];
    "FakeQuantWithMinMaxVarsGradient" => Fixed(3), Tpu, ["num_bits": Int, "narrow_range": Bool];
    "FakeQuantWithMinMaxVarsPerChannel" => Fixed(1), Tpu, ["num_bits": Int, "narrow_range": Bool];
    "FakeQuantWithMinMaxVarsPerChannelGradient" => Fixed(3), Tpu, ["num_bits": Int, "narrow_range": Bool];
    "Fill" => Fixed(1), Tpu, ["T": Type, "index_type": Type];
    "Floor" => Fixed(1), Tpu, ["T": Type];
    "FloorDiv" => Fixed(1), Tpu, ["T": Type];
    "FloorMod" => Fixed(1), Tpu, ["T": Type];
    "FusedBatchNorm" => Fixed(5), Tpu, ["T": Type, "epsilon": Float, "exponential_avg_factor": Float, "data_format": Str, "is_training": Bool];
    "FusedBatchNormGrad" => Fixed(5), Tpu, ["T": Type, "epsilon": Float, "data_format": Str, "is_training": Bool];
    "FusedBatchNormGradV2" => Fixed(5), Tpu, ["T": Type, "U": Type, "epsilon": Float, "data_format": Str, "is_training": Bool];
    "FusedBatchNormGradV3" => Fixed(5), Tpu, ["T": Type, "U": Type, "epsilon": Float, "data_format": Str, "is_training": Bool];
    "FusedBatchNormV2" => Fixed(5), Tpu, ["T": Type, "U": Type, "epsilon": Float, "exponential_avg_factor": Float, "data_format": Str, "is_training": Bool];
    "FusedBatchNormV3" => Fixed(6), Tpu, ["T": Type, "U": Type, "epsilon": Float, "exponential_avg_factor": Float, "data_format": Str, "is_training": Bool];
    "Gather" => Fixed(1), Tpu, ["Tparams": Type, "Tindices": Type, "validate_indices": Bool];
    "GatherNd" => Fixed(1), Tpu, ["Tparams": Type, "Tindices": Type];
    "GatherV2" => Fixed(1), Tpu, ["Tparams": Type, "Tindices": Type, "Taxis": Type, "batch_dims": Int];
    "Greater" => Fixed(1), Tpu, ["T": Type];
    "GreaterEqual" => Fixed(1), Tpu, ["T": Type];
    "HSVToRGB" => Fixed(1), Tpu, ["T": Type];
    "IFFT" => Fixed(1), Tpu, ["Tcomplex": Type];
    "IFFT2D" => Fixed(1), Tpu, ["Tcomplex": Type];
    "IFFT3D" => Fixed(1), Tpu, ["Tcomplex": Type];
    "IRFFT" => Fixed(1), Tpu, ["Treal": Type, "Tcomplex": Type];
    "IRFFT2D" => Fixed(1), Tpu, ["Treal": Type, "Tcomplex": Type];
    "IRFFT3D" => Fixed(1), Tpu, ["Treal": Type, "Tcomplex": Type];
    "Identity" => Fixed(1), Tpu, ["T": Type];
    "IdentityN" => FromListAttr("T"), Tpu, ["T": List];
    "If" => FromListAttr("Tout"), Tpu, ["Tcond": Type, "Tin": List, "Tout": List, "then_branch": Func, "else_branch": Func];
    "Igamma" => Fixed(1), Tpu, ["T": Type];
    "IgammaGradA" => Fixed(1), Tpu, ["T": Type];
    "Igammac" => Fixed(1), Tpu, ["T": Type];
    "Imag" => Fixed(1), Tpu, ["T": Type, "Tout": Type];
    "InTopKV2" => Fixed(1), Tpu, ["T": Type];
    "Inv" => Fixed(1), Tpu, ["T": Type];
    "Invert" => Fixed(1), Tpu, ["T": Type];
    "InvertPermutation" => Fixed(1), Tpu, ["T": Type];
    "IsFinite" => Fixed(1), Tpu, ["T": Type];
    "IsInf" => Fixed(1), Tpu, ["T": Type];
    "IsNan" => Fixed(1), Tpu, ["T": Type];
    "L2Loss" => Fixed(1), Tpu, ["T": Type];
    "LRN" => Fixed(1), Tpu, ["T": Type, "depth_radius": Int, "bias": Float, "alpha": Float, "beta": Float];
    "LRNGrad" => Fixed(1), Tpu, ["T": Type, "depth_radius": Int, "bias": Float, "alpha": Float, "beta": Float];
    "LeakyRelu" => Fixed(1), Tpu, ["T": Type, "alpha": Float];
    "LeakyReluGrad" => Fixed(1), Tpu, ["T": Type, "alpha": Float];
    "LeftShift" => Fixed(1), Tpu, ["T": Type];
    "Less" => Fixed(1), Tpu, ["T": Type];
    "LessEqual" => Fixed(1), Tpu, ["T": Type];
    "Lgamma" => Fixed(1), Tpu, ["T": Type];
    "LinSpace" => Fixed(1), Tpu, ["T": Type, "Tidx": Type];
    "ListDiff" => Fixed(2), Tpu, ["T": Type, "out_idx": Type];
    "Log" => Fixed(1), Tpu, ["T": Type];
    "Log1p" => Fixed(1), Tpu, ["T": Type];
    "LogSoftmax" => Fixed(1), Tpu, ["T": Type];
    "LogicalAnd" => Fixed(1), Tpu, [];
    "LogicalNot" => Fixed(1), Tpu, [];
    "LogicalOr" => Fixed(1), Tpu, [];
    "LoopCond" => Fixed(1), Tpu, [];
    "LowerBound" => Fixed(1), Tpu, ["T": Type, "out_type": Type];
    "MatMul" => Fixed(1), Tpu, ["T": Type, "transpose_a": Bool, "transpose_b": Bool];
    "MatrixBandPart" => Fixed(1), Tpu, ["T": Type, "Tindex": Type];
    "MatrixDiag" => Fixed(1), Tpu, ["T": Type];
    "MatrixDiagPart" => Fixed(1), Tpu, ["T": Type];
    "MatrixDiagPartV2" => Fixed(1), Tpu, ["T": Type];
    "MatrixDiagPartV3" => Fixed(1), Tpu, ["T": Type, "align": Str];
    "MatrixDiagV2" => Fixed(1), Tpu, ["T": Type];
    "MatrixDiagV3" => Fixed(1), Tpu, ["T": Type, "align": Str];
    "MatrixInverse" => Fixed(1), Tpu, ["T": Type, "adjoint": Bool];
    "MatrixSetDiag" => Fixed(1), Tpu, ["T": Type];
    "MatrixSetDiagV2" => Fixed(1), Tpu, ["T": Type];
    "MatrixSetDiagV3" => Fixed(1), Tpu, ["T": Type, "align": Str];
    "MatrixSolve" => Fixed(1), Tpu, ["T": Type, "adjoint": Bool];
    "MatrixTriangularSolve" => Fixed(1), Tpu, ["T": Type, "lower": Bool, "adjoint": Bool];
    "Max" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "keep_dims": Bool];
    "MaxPool" => Fixed(1), Tpu, ["T": Type, "ksize": List, "strides": List, "padding": Str, "explicit_paddings": List, "data_format": Str];
    "MaxPool3D" => Fixed(1), Tpu, ["T": Type, "ksize": List, "strides": List, "padding": Str, "data_format": Str];
    "MaxPool3DGrad" => Fixed(1), Tpu, ["T": Type, "TInput": Type, "ksize": List, "strides": List, "padding": Str, "data_format": Str];
    "MaxPool3DGradGrad" => Fixed(1), Tpu, ["T": Type, "ksize": List, "strides": List, "padding": Str, "data_format": Str];
    "MaxPoolGrad" => Fixed(1), Tpu, ["T": Type, "ksize": List, "strides": List, "padding": Str, "explicit_paddings": List, "data_format": Str];
    "MaxPoolGradGrad" => Fixed(1), Tpu, ["T": Type, "ksize": List, "strides": List, "padding": Str, "data_format": Str];
    "MaxPoolGradGradV2" => Fixed(1), Tpu, ["T": Type, "padding": Str, "data_format": Str];
    "MaxPoolGradV2" => Fixed(1), Tpu, ["T": Type, "padding": Str, "data_format": Str];
    "MaxPoolV2" => Fixed(1), Tpu, ["T": Type, "padding": Str, "data_format": Str];
    "Maximum" => Fixed(1), Tpu, ["T": Type];
    "Mean" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "keep_dims": Bool];
    "Merge" => Fixed(2), Tpu, ["T": Type, "N": Int];
    "Min" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "keep_dims": Bool];
    "Minimum" => Fixed(1), Tpu, ["T": Type];
    "MirrorPad" => Fixed(1), Tpu, ["T": Type, "Tpaddings": Type, "mode": Str];
    "MirrorPadGrad" => Fixed(1), Tpu, ["T": Type, "Tpaddings": Type, "mode": Str];
    "MirroredVarHandleOp" => Fixed(1), HostOnly, ["dtype": Type, "shape": Shape, "devices": List, "shared_names": List];
    "Mod" => Fixed(1), Tpu, ["T": Type];
    "Mul" => Fixed(1), Tpu, ["T": Type];
    "MulNoNan" => Fixed(1), Tpu, ["T": Type];
    "Multinomial" => Fixed(1), Tpu, ["seed": Int, "seed2": Int, "T": Type, "output_dtype": Type];
    "Ndtri" => Fixed(1), Tpu, ["T": Type];
    "Neg" => Fixed(1), Tpu, ["T": Type];
    "NextAfter" => Fixed(1), Tpu, ["T": Type];
    "NextIteration" => Fixed(1), Tpu, ["T": Type];
    "NoOp" => Fixed(0), Tpu, [];
    "NonMaxSuppressionV3" => Fixed(1), Tpu, ["T": Type, "T_threshold": Type];
    "NonMaxSuppressionV4" => Fixed(2), Tpu, ["T": Type, "T_threshold": Type, "pad_to_max_output_size": Bool];
    "NotEqual" => Fixed(1), Tpu, ["T": Type, "incompatible_shape_error": Bool];
    "OneHot" => Fixed(1), Tpu, ["T": Type, "TI": Type, "axis": Int];
    "OnesLike" => Fixed(1), Tpu, ["T": Type];
    "OptionalFromValue" => Fixed(1), Tpu, ["Toutput_types": List];
    "OptionalGetValue" => FromListAttr("output_types"), Tpu, ["output_types": List, "output_shapes": List];
    "OptionalHasValue" => Fixed(1), Tpu, [];
    "OptionalNone" => Fixed(1), Tpu, [];
    "Pack" => Fixed(1), Tpu, ["N": Int, "T": Type, "axis": Int];
    "Pad" => Fixed(1), Tpu, ["T": Type, "Tpaddings": Type];
    "PadV2" => Fixed(1), Tpu, ["T": Type, "Tpaddings": Type];
    "ParallelDynamicStitch" => Fixed(1), Tpu, ["N": Int, "T": Type];
    "ParameterizedTruncatedNormal" => Fixed(1), Tpu, ["seed": Int, "seed2": Int, "dtype": Type, "T": Type];
    "PartitionedCall" => FromListAttr("Tout"), Tpu, ["Tin": List, "Tout": List, "f": Func];
    "Placeholder" => Fixed(1), HostOnly, ["dtype": Type, "shape": Shape];
    "PlaceholderWithDefault" => Fixed(1), HostOnly, ["dtype": Type, "shape": Shape];
    "Polygamma" => Fixed(1), Tpu, ["T": Type];
    "PopulationCount" => Fixed(1), Tpu, ["T": Type];
    "Pow" => Fixed(1), Tpu, ["T": Type];
    "PreventGradient" => Fixed(1), Tpu, ["T": Type, "message": Str];
    "Print" => Fixed(1), HostOnly, ["T": Type, "U": List, "message": Str, "first_n": Int, "summarize": Int];
    "PrintV2" => Fixed(0), HostOnly, ["output_stream": Str, "end": Str];
    "Prod" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "keep_dims": Bool];
    "PyFunc" => FromListAttr("Tout"), HostOnly, ["token": Str, "Tin": List, "Tout": List];
    "Qr" => Fixed(2), Tpu, ["T": Type, "full_matrices": Bool];
    "QuantizeAndDequantizeV2" => Fixed(1), Tpu, ["signed_input": Bool, "num_bits": Int, "range_given": Bool, "T": Type, "round_mode": Str, "narrow_range": Bool, "axis": Int];
    "QuantizeAndDequantizeV3" => Fixed(1), Tpu, ["signed_input": Bool, "range_given": Bool, "T": Type, "narrow_range": Bool, "axis": Int];
    "QuantizeAndDequantizeV4" => Fixed(1), Tpu, ["signed_input": Bool, "num_bits": Int, "range_given": Bool, "T": Type, "round_mode": Str, "narrow_range": Bool, "axis": Int];
    "RFFT" => Fixed(1), Tpu, ["Treal": Type, "Tcomplex": Type];
    "RFFT2D" => Fixed(1), Tpu, ["Treal": Type, "Tcomplex": Type];
    "RFFT3D" => Fixed(1), Tpu, ["Treal": Type, "Tcomplex": Type];
    "RGBToHSV" => Fixed(1), Tpu, ["T": Type];
    "RandomGammaGrad" => Fixed(1), Tpu, ["T": Type];
    "RandomShuffle" => Fixed(1), Tpu, ["seed": Int, "seed2": Int, "T": Type];
    "RandomStandardNormal" => Fixed(1), Tpu, ["seed": Int, "seed2": Int, "dtype": Type, "T": Type];
    "RandomUniform" => Fixed(1), Tpu, ["seed": Int, "seed2": Int, "dtype": Type, "T": Type];
    "RandomUniformInt" => Fixed(1), Tpu, ["seed": Int, "seed2": Int, "Tout": Type, "T": Type];
    "Range" => Fixed(1), Tpu, ["Tidx": Type];
    "Rank" => Fixed(1), Tpu, ["T": Type];
    "ReadVariableOp" => Fixed(1), Tpu, ["dtype": Type];
    "ReadVariableXlaSplitND" => FromAttr("N"), Tpu, ["N": Int, "T": Type, "num_splits": List, "paddings": List];
    "Real" => Fixed(1), Tpu, ["T": Type, "Tout": Type];
    "RealDiv" => Fixed(1), Tpu, ["T": Type];
    "Reciprocal" => Fixed(1), Tpu, ["T": Type];
    "ReciprocalGrad" => Fixed(1), Tpu, ["T": Type];
    "Relu" => Fixed(1), Tpu, ["T": Type];
    "Relu6" => Fixed(1), Tpu, ["T": Type];
    "Relu6Grad" => Fixed(1), Tpu, ["T": Type];
    "ReluGrad" => Fixed(1), Tpu, ["T": Type];
    "ReplicaId" => Fixed(1), Tpu, [];
    "Reshape" => Fixed(1), Tpu, ["T": Type, "Tshape": Type];
    "ResizeBilinear" => Fixed(1), Tpu, ["T": Type, "align_corners": Bool, "half_pixel_centers": Bool];
    "ResizeBilinearGrad" => Fixed(1), Tpu, ["T": Type, "align_corners": Bool, "half_pixel_centers": Bool];
    "ResizeNearestNeighbor" => Fixed(1), Tpu, ["T": Type, "align_corners": Bool, "half_pixel_centers": Bool];
    "ResizeNearestNeighborGrad" => Fixed(1), Tpu, ["T": Type, "align_corners": Bool, "half_pixel_centers": Bool];
    "ResourceApplyAdagradDA" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceApplyAddSign" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceApplyPowerSign" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceApplyProximalAdagrad" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceApplyProximalGradientDescent" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceScatterDiv" => Fixed(0), Tpu, ["dtype": Type, "Tindices": Type];
    "ResourceScatterMax" => Fixed(0), Tpu, ["dtype": Type, "Tindices": Type];
    "ResourceScatterMin" => Fixed(0), Tpu, ["dtype": Type, "Tindices": Type];
    "ResourceScatterMul" => Fixed(0), Tpu, ["dtype": Type, "Tindices": Type];
    "ResourceScatterNdAdd" => Fixed(0), Tpu, ["T": Type, "Tindices": Type, "use_locking": Bool, "bad_indices_policy": Str];
    "ResourceScatterNdSub" => Fixed(0), Tpu, ["T": Type, "Tindices": Type, "use_locking": Bool, "bad_indices_policy": Str];
    "ResourceScatterNdUpdate" => Fixed(0), Tpu, ["T": Type, "Tindices": Type, "use_locking": Bool, "bad_indices_policy": Str];
    "ResourceStridedSliceAssign" => Fixed(0), Tpu, ["T": Type, "Index": Type, "begin_mask": Int, "end_mask": Int, "ellipsis_mask": Int, "new_axis_mask": Int, "shrink_axis_mask": Int];
    "Reverse" => Fixed(1), Tpu, ["T": Type];
    "ReverseSequence" => Fixed(1), Tpu, ["seq_dim": Int, "batch_dim": Int, "T": Type, "Tlen": Type];
    "ReverseV2" => Fixed(1), Tpu, ["T": Type, "Tidx": Type];
    "ResourceApplyAdaMax" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceApplyAdadelta" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceApplyAdagrad" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool, "update_slots": Bool];
    "ResourceApplyAdagradV2" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool, "update_slots": Bool];
    "ResourceApplyAdam" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool, "use_nesterov": Bool];
    "ResourceApplyAdamWithAmsgrad" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceApplyCenteredRMSProp" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceApplyFtrl" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool, "multiply_linear_by_lr": Bool];
    "ResourceApplyFtrlV2" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool, "multiply_linear_by_lr": Bool];
    "ResourceApplyGradientDescent" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceApplyKerasMomentum" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool, "use_nesterov": Bool];
    "ResourceApplyMomentum" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool, "use_nesterov": Bool];
    "ResourceApplyRMSProp" => Fixed(0), Tpu, ["T": Type, "use_locking": Bool];
    "ResourceGather" => Fixed(1), Tpu, ["dtype": Type, "Tindices": Type, "batch_dims": Int, "validate_indices": Bool];
    "ResourceScatterAdd" => Fixed(0), Tpu, ["dtype": Type, "Tindices": Type];
    "ResourceScatterSub" => Fixed(0), Tpu, ["dtype": Type, "Tindices": Type];
    "ResourceScatterUpdate" => Fixed(0), Tpu, ["dtype": Type, "Tindices": Type];
    "RightShift" => Fixed(1), Tpu, ["T": Type];
    "Rint" => Fixed(1), Tpu, ["T": Type];
    "RngReadAndSkip" => Fixed(1), Tpu, [];
    "RngSkip" => Fixed(0), Tpu, [];
    "Roll" => Fixed(1), Tpu, ["T": Type, "Tshift": Type, "Taxis": Type];
    "Round" => Fixed(1), Tpu, ["T": Type];
    "Rsqrt" => Fixed(1), Tpu, ["T": Type];
    "RsqrtGrad" => Fixed(1), Tpu, ["T": Type];
    "ScalarSummary" => Fixed(1), HostOnly, ["T": Type];
    "ScatterNd" => Fixed(1), Tpu, ["T": Type, "Tindices": Type];
    "SegmentMaxV2" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "Tnumsegments": Type];
    "SegmentMinV2" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "Tnumsegments": Type];
    "SegmentProdV2" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "Tnumsegments": Type];
    "SegmentSumV2" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "Tnumsegments": Type];
    "Select" => Fixed(1), Tpu, ["T": Type];
    "SelectV2" => Fixed(1), Tpu, ["T": Type];
    "SelfAdjointEigV2" => Fixed(2), Tpu, ["T": Type, "compute_v": Bool];
    "Selu" => Fixed(1), Tpu, ["T": Type];
    "SeluGrad" => Fixed(1), Tpu, ["T": Type];
    "Shape" => Fixed(1), Tpu, ["T": Type, "out_type": Type];
    "ShapeN" => FromAttr("N"), Tpu, ["N": Int, "T": Type, "out_type": Type];
    "Sigmoid" => Fixed(1), Tpu, ["T": Type];
    "SigmoidGrad" => Fixed(1), Tpu, ["T": Type];
    "Sign" => Fixed(1), Tpu, ["T": Type];
    "Sin" => Fixed(1), Tpu, ["T": Type];
    "Sinh" => Fixed(1), Tpu, ["T": Type];
    "Size" => Fixed(1), Tpu, ["T": Type, "out_type": Type];
    "Slice" => Fixed(1), Tpu, ["T": Type, "Index": Type];
    "Softmax" => Fixed(1), Tpu, ["T": Type];
    "SoftmaxCrossEntropyWithLogits" => Fixed(2), Tpu, ["T": Type];
    "Softplus" => Fixed(1), Tpu, ["T": Type];
    "SoftplusGrad" => Fixed(1), Tpu, ["T": Type];
    "Softsign" => Fixed(1), Tpu, ["T": Type];
    "SoftsignGrad" => Fixed(1), Tpu, ["T": Type];
    "SpaceToBatch" => Fixed(1), Tpu, ["T": Type, "Tpaddings": Type, "block_size": Int];
    "SpaceToBatchND" => Fixed(1), Tpu, ["T": Type, "Tblock_shape": Type, "Tpaddings": Type];
    "SpaceToDepth" => Fixed(1), Tpu, ["T": Type, "block_size": Int, "data_format": Str];
    "SparseMatMul" => Fixed(1), Tpu, ["Ta": Type, "Tb": Type, "transpose_a": Bool, "transpose_b": Bool, "a_is_sparse": Bool, "b_is_sparse": Bool];
    "SparseSoftmaxCrossEntropyWithLogits" => Fixed(2), Tpu, ["T": Type, "Tlabels": Type];
    "SparseToDense" => Fixed(1), Tpu, ["validate_indices": Bool, "T": Type, "Tindices": Type];
    "Split" => FromAttr("num_split"), Tpu, ["T": Type, "num_split": Int];
    "SplitV" => FromAttr("num_split"), Tpu, ["T": Type, "Tlen": Type, "num_split": Int];
    "Sqrt" => Fixed(1), Tpu, ["T": Type];
    "SqrtGrad" => Fixed(1), Tpu, ["T": Type];
    "Square" => Fixed(1), Tpu, ["T": Type];
    "SquaredDifference" => Fixed(1), Tpu, ["T": Type];
    "Squeeze" => Fixed(1), Tpu, ["T": Type, "squeeze_dims": List];
    "StackCloseV2" => Fixed(0), Tpu, [];
    "StackPopV2" => Fixed(1), Tpu, ["elem_type": Type];
    "StackPushV2" => Fixed(1), Tpu, ["T": Type, "swap_memory": Bool];
    "StackV2" => Fixed(1), Tpu, ["elem_type": Type, "stack_name": Str];
    "StatefulPartitionedCall" => FromListAttr("Tout"), Tpu, ["Tin": List, "Tout": List, "f": Func];
    "StatefulStandardNormalV2" => Fixed(1), Tpu, ["dtype": Type, "shape_dtype": Type];
    "StatefulTruncatedNormal" => Fixed(1), Tpu, ["dtype": Type, "shape_dtype": Type];
    "StatefulUniform" => Fixed(1), Tpu, ["dtype": Type, "shape_dtype": Type];
    "StatefulUniformFullInt" => Fixed(1), Tpu, ["dtype": Type, "shape_dtype": Type];
    "StatefulUniformInt" => Fixed(1), Tpu, ["dtype": Type, "shape_dtype": Type];
    "StatelessCase" => FromListAttr("Tout"), Tpu, ["Tin": List, "Tout": List, "branches": List];
    "StatelessIf" => FromListAttr("Tout"), Tpu, ["Tcond": Type, "Tin": List, "Tout": List, "then_branch": Func, "else_branch": Func];
    "StatelessMultinomial" => Fixed(1), Tpu, ["T": Type, "Tseed": Type, "output_dtype": Type];
    "StatelessParameterizedTruncatedNormal" => Fixed(1), Tpu, ["S": Type, "Tseed": Type, "dtype": Type];
    "StatelessRandomGetAlg" => Fixed(1), Tpu, [];
    "StatelessRandomGetKeyCounter" => Fixed(2), Tpu, ["Tseed": Type];
    "StatelessRandomGetKeyCounterAlg" => Fixed(3), Tpu, ["Tseed": Type];
    "StatelessRandomNormal" => Fixed(1), Tpu, ["dtype": Type, "T": Type, "Tseed": Type];
    "StatelessRandomNormalV2" => Fixed(1), Tpu, ["dtype": Type, "Tshape": Type];
    "StatelessRandomUniform" => Fixed(1), Tpu, ["dtype": Type, "T": Type, "Tseed": Type];
    "StatelessRandomUniformFullInt" => Fixed(1), Tpu, ["dtype": Type, "T": Type, "Tseed": Type];
    "StatelessRandomUniformFullIntV2" => Fixed(1), Tpu, ["dtype": Type, "Tshape": Type];
    "StatelessRandomUniformInt" => Fixed(1), Tpu, ["dtype": Type, "T": Type, "Tseed": Type];
    "StatelessRandomUniformIntV2" => Fixed(1), Tpu, ["dtype": Type, "Tshape": Type];
    "StatelessRandomUniformV2" => Fixed(1), Tpu, ["dtype": Type, "Tshape": Type];
    "StatelessTruncatedNormal" => Fixed(1), Tpu, ["dtype": Type, "T": Type, "Tseed": Type];
    "StatelessTruncatedNormalV2" => Fixed(1), Tpu, ["dtype": Type, "Tshape": Type];
    "StatelessWhile" => SameAsInputs, Tpu, ["T": List, "cond": Func, "body": Func, "parallel_iterations": Int];
    "StochasticCastToInt" => Fixed(1), Tpu, ["Tin": Type, "Tout": Type];
    "StopGradient" => Fixed(1), Tpu, ["T": Type];
    "StridedSlice" => Fixed(1), Tpu, ["T": Type, "Index": Type, "begin_mask": Int, "end_mask": Int, "ellipsis_mask": Int, "new_axis_mask": Int, "shrink_axis_mask": Int];
    "StridedSliceGrad" => Fixed(1), Tpu, ["T": Type, "Index": Type, "begin_mask": Int, "end_mask": Int, "ellipsis_mask": Int, "new_axis_mask": Int, "shrink_axis_mask": Int];
    "StringFormat" => Fixed(1), HostOnly, ["T": List, "template": Str, "placeholder": Str, "summarize": Int];
    "StringJoin" => Fixed(1), HostOnly, ["N": Int, "separator": Str];
    "Sub" => Fixed(1), Tpu, ["T": Type];
    "Sum" => Fixed(1), Tpu, ["T": Type, "Tidx": Type, "keep_dims": Bool];
    "Svd" => Fixed(3), Tpu, ["T": Type, "compute_uv": Bool, "full_matrices": Bool];
    "Switch" => Fixed(2), Tpu, ["T": Type];
    "SymbolicGradient" => FromListAttr("Tout"), Tpu, ["Tin": List, "Tout": List, "f": Func];
    "TPUCompilationResult" => Fixed(1), TpuSystem, [];
    "TPUReplicateMetadata" => Fixed(0), TpuSystem, ["num_replicas": Int, "num_cores_per_replica": Int, "topology": Str, "use_tpu": Bool, "device_assignment": List, "computation_shape": List, "host_compute_core": List, "padding_map": List, "allow_soft_placement": Bool];
    "TPUReplicatedInput" => Fixed(1), TpuSystem, ["N": Int, "T": Type, "index": Int, "is_mirrored_variable": Bool, "is_packed": Bool];
    "TPUReplicatedOutput" => FromAttr("num_replicas"), TpuSystem, ["num_replicas": Int, "T": Type, "reduce_op": Str];
    "Tan" => Fixed(1), Tpu, ["T": Type];
    "Tanh" => Fixed(1), Tpu, ["T": Type];
    "TanhGrad" => Fixed(1), Tpu, ["T": Type];
    "TensorArrayCloseV3" => Fixed(0), Tpu, [];
    "TensorArrayConcatV3" => Fixed(2), Tpu, ["dtype": Type, "element_shape_except0": Shape];
    "TensorArrayGatherV3" => Fixed(1), Tpu, ["dtype": Type, "element_shape": Shape];
    "TensorArrayGradV3" => Fixed(2), Tpu, ["source": Str];
    "TensorArrayReadV3" => Fixed(1), Tpu, ["dtype": Type];
    "TensorArrayScatterV3" => Fixed(1), Tpu, ["T": Type];
    "TensorArraySizeV3" => Fixed(1), Tpu, [];
    "TensorArraySplitV3" => Fixed(1), Tpu, ["T": Type];
    "TensorArrayV3" => Fixed(2), Tpu, ["dtype": Type, "element_shape": Shape, "dynamic_size": Bool, "clear_after_read": Bool, "identical_element_shapes": Bool, "tensor_array_name": Str];
    "TensorArrayWriteV3" => Fixed(1), Tpu, ["T": Type];
    "TensorListConcatV2" => Fixed(2), Tpu, ["element_dtype": Type, "shape_type": Type];
    "TensorListElementShape" => Fixed(1), Tpu, ["shape_type": Type];
    "TensorListFromTensor" => Fixed(1), Tpu, ["element_dtype": Type, "shape_type": Type];
    "TensorListGather" => Fixed(1), Tpu, ["element_dtype": Type];
    "TensorListGetItem" => Fixed(1), Tpu, ["element_dtype": Type];
    "TensorListLength" => Fixed(1), Tpu, [];
    "TensorListPopBack" => Fixed(2), Tpu, ["element_dtype": Type];
    "TensorListPushBack" => Fixed(1), Tpu, ["element_dtype": Type];
    "TensorListReserve" => Fixed(1), Tpu, ["element_dtype": Type, "shape_type": Type];
    "TensorListResize" => Fixed(1), Tpu, [];
    "TensorListScatterIntoExistingList" => Fixed(1), Tpu, ["element_dtype": Type];
    "TensorListSetItem" => Fixed(1), Tpu, ["element_dtype": Type];
    "TensorListSplit" => Fixed(1), Tpu, ["element_dtype": Type, "shape_type": Type];
    "TensorListStack" => Fixed(1), Tpu, ["element_dtype": Type, "num_elements": Int];
    "TensorScatterAdd" => Fixed(1), Tpu, ["T": Type, "Tindices": Type];
    "TensorScatterMax" => Fixed(1), Tpu, ["T": Type, "Tindices": Type];
    "TensorScatterMin" => Fixed(1), Tpu, ["T": Type, "Tindices": Type];
    "TensorScatterSub" => Fixed(1), Tpu, ["T": Type, "Tindices": Type];
    "TensorScatterUpdate" => Fixed(1), Tpu, ["T": Type, "Tindices": Type];
    "TensorStridedSliceUpdate" => Fixed(1), Tpu, ["T": Type, "Index": Type, "begin_mask": Int, "end_mask": Int, "ellipsis_mask": Int, "new_axis_mask": Int, "shrink_axis_mask": Int];
    "Tile" => Fixed(1), Tpu, ["T": Type, "Tmultiples": Type];
    "ToBool" => Fixed(1), Tpu, ["T": Type];
    "TopKV2" => Fixed(2), Tpu, ["T": Type, "sorted": Bool, "Tk": Type, "index_type": Type];
    "Transpose" => Fixed(1), Tpu, ["T": Type, "Tperm": Type];
    "TridiagonalMatMul" => Fixed(1), Tpu, ["T": Type];
    "TridiagonalSolve" => Fixed(1), Tpu, ["T": Type, "partial_pivoting": Bool, "perturb_singular": Bool];
    "TruncateDiv" => Fixed(1), Tpu, ["T": Type];
    "TruncateMod" => Fixed(1), Tpu, ["T": Type];
    "TruncatedNormal" => Fixed(1), Tpu, ["seed": Int, "seed2": Int, "dtype": Type, "T": Type];
    "UniformDequantize" => Fixed(1), Tpu, ["Tin": Type, "Tout": Type, "quantization_axis": Int, "quantization_min_val": Int, "quantization_max_val": Int];
    "UniformQuantize" => Fixed(1), Tpu, ["Tin": Type, "Tout": Type, "quantization_axis": Int, "quantization_min_val": Int, "quantization_max_val": Int];
    "UniformQuantizedAdd" => Fixed(1), Tpu, ["T": Type, "lhs_quantization_axis": Int, "lhs_quantization_min_val": Int, "lhs_quantization_max_val": Int, "rhs_quantization_axis": Int, "rhs_quantization_min_val": Int, "rhs_quantization_max_val": Int, "output_quantization_axis": Int, "output_quantization_min_val": Int, "output_quantization_max_val": Int];
    "UniformQuantizedClipByValue" => Fixed(1), Tpu, ["T": Type, "quantization_axis": Int, "quantization_min_val": Int, "quantization_max_val": Int];
    "UniformQuantizedConvolution" => Fixed(1), Tpu, ["Tin": Type, "Tout": Type, "window_strides": List, "padding": Str, "explicit_padding": List, "lhs_dilation": List, "rhs_dilation": List, "batch_group_count": Int, "feature_group_count": Int, "dimension_numbers": Str, "lhs_quantization_axis": Int, "lhs_quantization_min_val": Int, "lhs_quantization_max_val": Int, "rhs_quantization_axis": Int, "rhs_quantization_min_val": Int, "rhs_quantization_max_val": Int, "output_quantization_axis": Int, "output_quantization_min_val": Int, "output_quantization_max_val": Int];
    "UniformQuantizedDot" => Fixed(1), Tpu, ["Tin": Type, "Tout": Type, "lhs_quantization_axis": Int, "lhs_quantization_min_val": Int, "lhs_quantization_max_val": Int, "rhs_quantization_axis": Int, "rhs_quantization_min_val": Int, "rhs_quantization_max_val": Int, "output_quantization_axis": Int, "output_quantization_min_val": Int, "output_quantization_max_val": Int];
    "UniformRequantize" => Fixed(1), Tpu, ["Tin": Type, "Tout": Type, "input_quantization_axis": Int, "input_quantization_min_val": Int, "input_quantization_max_val": Int, "output_quantization_axis": Int, "output_quantization_min_val": Int, "output_quantization_max_val": Int];
    "Unique" => Fixed(2), Tpu, ["T": Type, "out_idx": Type];
    "UniqueV2" => Fixed(2), Tpu, ["T": Type, "Taxis": Type, "out_idx": Type];
    "Unpack" => FromAttr("num"), Tpu, ["T": Type, "num": Int, "axis": Int];
    "UnsortedSegmentMax" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "Tnumsegments": Type];
    "UnsortedSegmentMin" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "Tnumsegments": Type];
    "UnsortedSegmentProd" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "Tnumsegments": Type];
    "UnsortedSegmentSum" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "Tnumsegments": Type];
    "Update" => Fixed(0), Tpu, ["fn": Str, "dtype": Type];
    "UpdateNonSlot" => Fixed(0), HostOnly, ["fn": Str, "dtype": Type];
    "UpperBound" => Fixed(1), Tpu, ["T": Type, "out_type": Type];
    "VarHandleOp" => Fixed(1), Tpu, ["dtype": Type, "shape": Shape, "container": Str, "shared_name": Str];
    "VarIsInitializedOp" => Fixed(1), Tpu, [];
    "VariableShape" => Fixed(1), Tpu, ["out_type": Type];
    "Where" => Fixed(1), Tpu, ["T": Type];
    "While" => SameAsInputs, Tpu, ["T": List, "cond": Func, "body": Func, "parallel_iterations": Int];
    "Xdivy" => Fixed(1), Tpu, ["T": Type];
    "XlaAllReduce" => Fixed(1), Tpu, ["T": Type, "mode": Str, "reduce_op": Str];
    "XlaBroadcastHelper" => Fixed(2), Tpu, ["T": Type, "Tindices": Type];
    "XlaCallModule" => FromListAttr("Tout"), Tpu, ["Tin": List, "Tout": List, "Sout": List, "version": Int, "module": Str, "dim_args_spec": List, "platforms": List, "function_list": List, "has_token_input_output": Bool, "disabled_checks": List, "use_shardy_partitioner": Bool];
    "XlaConcatND" => Fixed(1), Tpu, ["N": Int, "T": Type, "num_concats": List, "paddings": List];
    "XlaConv" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "dimension_numbers": Str, "precision_config": Str];
    "XlaConvV2" => Fixed(1), Tpu, ["LhsT": Type, "RhsT": Type, "Tindices": Type, "dimension_numbers": Str, "precision_config": Str, "preferred_element_type": Type, "batch_group_count": Int];
    "XlaCustomCall" => Fixed(1), Tpu, ["T": List, "target_name": Str, "backend_config": Str, "dtype": Type, "shape": Shape];
    "XlaCustomCallV2" => FromListAttr("result_dtypes"), Tpu, ["operand_dtypes": List, "call_target_name": Str, "backend_config": Str, "has_side_effect": Bool, "result_dtypes": List, "result_shapes": List];
    "XlaDequantize" => Fixed(1), Tpu, ["min_range": Float, "max_range": Float, "mode": Str, "transpose_output": Bool];
    "XlaDot" => Fixed(1), Tpu, ["T": Type, "dimension_numbers": Str, "precision_config": Str];
    "XlaDotV2" => Fixed(1), Tpu, ["LhsT": Type, "RhsT": Type, "dimension_numbers": Str, "precision_config": Str, "preferred_element_type": Type];
    "XlaDynamicSlice" => Fixed(1), Tpu, ["T": Type, "Tindices": Type];
    "XlaDynamicUpdateSlice" => Fixed(1), Tpu, ["T": Type, "Tindices": Type];
    "XlaEinsum" => Fixed(1), Tpu, ["T": Type, "equation": Str];
    "XlaGather" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "dimension_numbers": Str, "indices_are_sorted": Bool];
    "XlaIf" => FromListAttr("Tout"), Tpu, ["Tcond": Type, "Tin": List, "Tout": List, "then_branch": Func, "else_branch": Func];
    "XlaKeyValueSort" => Fixed(2), Tpu, ["K": Type, "V": Type];
    "XlaOptimizationBarrier" => FromListAttr("T"), Tpu, ["T": List];
    "XlaPad" => Fixed(1), Tpu, ["T": Type, "Tindices": Type];
    "XlaRecv" => Fixed(1), Tpu, ["dtype": Type, "tensor_name": Str, "shape": Shape];
    "XlaReduce" => Fixed(1), Tpu, ["T": Type, "dimensions_to_reduce": List, "reducer": Func];
    "XlaReducePrecision" => Fixed(1), Tpu, ["T": Type, "exponent_bits": Int, "mantissa_bits": Int];
    "XlaReduceScatter" => Fixed(1), Tpu, ["T": Type, "reduce_op": Str];
    "XlaReduceWindow" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "computation": Func];
    "XlaRemoveDynamicDimensionSize" => Fixed(1), Tpu, ["T": Type];
    "XlaReplicaId" => Fixed(1), Tpu, [];
    "XlaRngBitGenerator" => Fixed(2), Tpu, ["dtype": Type, "Tshape": Type];
    "XlaScatter" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "update_computation": Func, "dimension_numbers": Str, "indices_are_sorted": Bool];
    "XlaSelectAndScatter" => Fixed(1), Tpu, ["T": Type, "Tindices": Type, "select": Func, "scatter": Func];
    "XlaSelfAdjointEig" => Fixed(2), Tpu, ["T": Type, "lower": Bool, "max_iter": Int, "epsilon": Float];
    "XlaSend" => Fixed(0), Tpu, ["T": Type, "tensor_name": Str];
    "XlaSetBound" => Fixed(1), Tpu, [];
    "XlaSetDynamicDimensionSize" => Fixed(1), Tpu, ["T": Type];
    "XlaSharding" => Fixed(1), Tpu, ["T": Type, "sharding": Str, "unspecified_dims": List];
    "XlaSort" => Fixed(1), Tpu, ["T": Type];
    "XlaSplitND" => FromAttr("N"), Tpu, ["N": Int, "T": Type, "num_splits": List, "paddings": List];
    "XlaSpmdFullToShardShape" => Fixed(1), Tpu, ["T": Type, "dim": Int, "manual_sharding": Str, "unspecified_dims": List];
    "XlaSpmdShardToFullShape" => Fixed(1), Tpu, ["T": Type, "dim": Int, "full_shape": Shape, "manual_sharding": Str, "unspecified_dims": List];
    "XlaSvd" => Fixed(3), Tpu, ["T": Type, "max_iter": Int, "epsilon": Float, "precision_config": Str];
    "XlaVariadicReduce" => FromAttr("N"), Tpu, ["N": Int, "T": Type, "dimensions_to_reduce": List, "reducer": Func];
    "XlaVariadicReduceV2" => FromListAttr("T"), Tpu, ["T": List, "dimensions_to_reduce": List, "reducer": Func];
    "XlaVariadicSort" => FromListAttr("T"), Tpu, ["T": List, "comparator": Func, "is_stable": Bool];
    "XlaWhile" => SameAsInputs, Tpu, ["T": List, "cond": Func, "body": Func];
    "Xlog1py" => Fixed(1), Tpu, ["T": Type];
    "Xlogy" => Fixed(1), Tpu, ["T": Type];
    "ZerosLike" => Fixed(1), Tpu, ["T": Type];
    "Zeta" => Fixed(1), Tpu, ["T": Type];
    "_Arg" => Fixed(1), Tpu, ["T": Type, "index": Int];
    "_Retval" => Fixed(0), Tpu, ["T": Type, "index": Int];
};

/// The registry entry for `op`, if the op type is known: one hash lookup
/// (passes and the verifier ask once per node, against a few hundred ops).
pub fn lookup(op: &str) -> Option<&'static OpDef> {
    static BY_NAME: std::sync::LazyLock<rustc_hash::FxHashMap<&'static str, &'static OpDef>> =
        std::sync::LazyLock::new(|| REGISTRY.iter().map(|d| (d.name, d)).collect());
    BY_NAME.get(op).copied()
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
