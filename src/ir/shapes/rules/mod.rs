//! Type rules: the dtype and static shape of every output of an op, from
//! its attributes, its operands' types and the values of the operands that
//! must be compile-time constants (shapes, axes, permutations, sizes,
//! paddings), as TensorFlow's op registry gives each op a shape function.
//!
//! Meaning: [`infer`] looks the op up in `TABLE` (one small function
//! per op, sorted by op name, grouped by family in `elementwise`,
//! `complex`, `image`, `shape`, `reduce`, `nn`, `index`, `random`, `collective`
//! `xla_fn` and `xla_ext`) and applies its rule. A rule that
//! needs a constant operand it was not given, or meets operands it cannot
//! type, answers an error message; an op with no rule answers `None`. The
//! caller then learns the type another way (the StableHLO emitter runs the
//! op's kernel on stand-in operands).
//!
//! Invariant: a type given is the one the simulator's kernel produces for
//! operands of those types (the rules follow TensorFlow's shape functions
//! and the kernels' conventions, e.g. the empty reserve outputs of the
//! fused batch norms). Shapes are fully static: these rules serve programs
//! whose every dimension is known. The exception is `dynamic_shape`: an op
//! whose output size depends on values gets its bound (the padded buffer
//! its lowering fills), not the kernel's size. Cost: proportional to the ranks and the
//! constant operands read.

mod collective;
mod complex;
mod data_ops;
mod dynamic_shape;
mod elementwise;
mod image;
mod index;
pub mod linalg;
mod linalg_solve;
mod nn;
mod prand;
mod quant;
mod random;
mod random_state;
mod reduce;
mod shape;
mod spmd;
mod stateful_random;
pub mod uniform_quant;
mod xla_call_module;
mod xla_ext;
mod xla_fn;
pub mod xla_misc;
pub mod xla_ops;

pub use dynamic_shape::unique_axis;
pub use image::conv_as_fixed_rank;

use super::super::attrs::AttrMap;
use super::super::types::{AttrValue, DType};

/// One operand as a rule sees it.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The element type.
    pub dtype: DType,
    /// The static shape.
    pub shape: &'a [usize],
    /// The value, when it is a compile-time constant of integers.
    pub value: Option<&'a [i64]>,
}

/// An output type: element type and static shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutType {
    /// The element type.
    pub dtype: DType,
    /// The static shape.
    pub shape: Vec<usize>,
}

impl OutType {
    /// A type of `dtype` and `shape`.
    pub fn new(dtype: DType, shape: Vec<usize>) -> OutType {
        OutType { dtype, shape }
    }
}

/// What a rule gets: the op, its attributes and its operands.
pub struct Args<'a> {
    /// The op type.
    pub op: &'a str,
    /// The node's attributes.
    pub attrs: &'a AttrMap,
    /// The operands, in order.
    pub operands: &'a [Operand<'a>],
}

impl Args<'_> {
    /// Operand `i`.
    fn x(&self, i: usize) -> Result<&Operand<'_>, String> {
        self.operands.get(i).ok_or_else(|| format!("expected at least {} operands", i + 1))
    }

    /// The constant value of operand `i` (`what` names it in the error).
    fn ints(&self, i: usize, what: &str) -> Result<&[i64], String> {
        self.x(i)?.value.ok_or_else(|| format!("operand {i} ({what}) must be a compile-time constant"))
    }

    /// Operand `i`'s type, unchanged.
    fn same(&self, i: usize) -> Result<OutType, String> {
        let x = self.x(i)?;
        Ok(OutType::new(x.dtype, x.shape.to_vec()))
    }

    /// An integer attribute, or `default`.
    fn int_attr(&self, key: &str, default: i64) -> i64 {
        self.attrs.get_int(key).unwrap_or(default)
    }

    /// A boolean attribute, or `default`.
    fn bool_attr(&self, key: &str, default: bool) -> bool {
        self.attrs.get_bool(key).unwrap_or(default)
    }

    /// A string attribute, or `default`.
    fn str_attr<'s>(&'s self, key: &str, default: &'s str) -> &'s str {
        self.attrs.get_str(key).unwrap_or(default)
    }

    /// A type attribute, or `default`.
    fn type_attr(&self, key: &str, default: DType) -> DType {
        self.attrs.get(key).and_then(AttrValue::as_type).unwrap_or(default)
    }

    /// A list-of-integers attribute (empty when absent).
    fn int_list(&self, key: &str) -> Vec<i64> {
        self.attrs.get(key).and_then(AttrValue::as_int_list).unwrap_or_default()
    }
}

/// A rule: the op's output types.
pub type Rule = fn(&Args) -> Result<Vec<OutType>, String>;

/// The output types of `op`, or `None` when no rule knows it.
pub fn infer(op: &str, attrs: &AttrMap, operands: &[Operand]) -> Option<Result<Vec<OutType>, String>> {
    let rule = rule(op)?;
    Some(rule(&Args { op, attrs, operands }))
}

/// The rule of `op`.
pub fn rule(op: &str) -> Option<Rule> {
    let found = TABLE.binary_search_by(|(name, _)| (*name).cmp(op)).ok().map(|i| TABLE[i].1);
    found.or_else(|| LOWERED.iter().find(|(name, _)| *name == op).map(|(_, r)| *r))
}

/// The rules of ops that only the lowering makes (not in the op registry).
const LOWERED: &[(&str, Rule)] = &[("CollectiveAllGather", collective::all_gather)];

/// The op types that have a rule, sorted.
pub fn ops() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|(name, _)| *name)
}

/// `axis` (negative counts from the end) as an index into `rank` dims.
fn axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

/// A non-negative constant as a dimension.
fn dim(v: i64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{what} {v} is negative"))
}

use complex as cx;
use elementwise as ew;

/// The rule table, sorted by op name (a test checks it).
const TABLE: &[(&str, Rule)] = &[
    ("Abs", ew::same),
    ("Acos", ew::same),
    ("Acosh", ew::same),
    ("Add", ew::broadcast),
    ("AddN", ew::same),
    ("AddV2", ew::broadcast),
    ("AdjustContrastv2", ew::same),
    ("AdjustHue", ew::same),
    ("AdjustSaturation", ew::same),
    ("All", reduce::reduce),
    ("AllGather", collective::all_gather),
    ("Angle", cx::part),
    ("Any", reduce::reduce),
    ("ApproxTopK", data_ops::approx_top_k),
    ("ApproximateEqual", ew::predicate),
    ("ArgMax", reduce::arg_extreme),
    ("ArgMin", reduce::arg_extreme),
    ("Asin", ew::same),
    ("Asinh", ew::same),
    ("Atan", ew::same),
    ("Atan2", ew::broadcast),
    ("Atanh", ew::same),
    ("AvgPool", nn::pool),
    ("AvgPool3D", nn::pool3d),
    ("AvgPool3DGrad", nn::avg_pool_grad),
    ("AvgPoolGrad", nn::avg_pool_grad),
    ("BatchMatMul", nn::batch_matmul),
    ("BatchMatMulV2", nn::batch_matmul),
    ("BatchMatMulV3", nn::batch_matmul),
    ("BatchToSpace", image::space_batch),
    ("BatchToSpaceND", image::space_batch),
    ("BesselI0e", ew::same),
    ("BesselI1e", ew::same),
    ("Betainc", ew::betainc),
    ("BiasAdd", ew::same),
    ("BiasAddGrad", nn::bias_add_grad),
    ("BiasAddV1", ew::same),
    ("Bincount", data_ops::bincount),
    ("Bitcast", ew::bitcast),
    ("BitwiseAnd", ew::broadcast),
    ("BitwiseOr", ew::broadcast),
    ("BitwiseXor", ew::broadcast),
    ("BroadcastTo", shape::broadcast_to),
    ("Bucketize", index::bucketize),
    ("Cast", ew::cast),
    ("Ceil", ew::same),
    ("CheckNumerics", ew::same),
    ("Cholesky", linalg::cholesky),
    ("ClipByValue", ew::same),
    ("CollectiveAssignGroupV2", xla_misc::assign_group),
    ("CollectiveReduceV2", spmd::same),
    ("Complex", cx::complex),
    ("ComplexAbs", cx::part),
    ("Concat", index::concat_v1),
    ("ConcatV2", shape::concat),
    ("Conj", cx::same_complex),
    ("ConjugateTranspose", shape::transpose),
    ("ControlTrigger", spmd::none),
    ("Conv", image::generic_conv),
    ("Conv2D", nn::conv2d),
    ("Conv2DBackpropFilter", nn::conv_backprop_filter),
    ("Conv2DBackpropInput", nn::conv_backprop_input),
    ("Conv3D", nn::conv3d),
    ("Conv3DBackpropFilterV2", nn::conv_backprop_filter),
    ("Conv3DBackpropInputV2", nn::conv_backprop_input),
    ("Cos", ew::same),
    ("Cosh", ew::same),
    ("Cross", linalg::same_matrix),
    ("Cumprod", ew::same),
    ("Cumsum", ew::same),
    ("CumulativeLogsumexp", ew::same),
    ("DataFormatDimMap", ew::same),
    ("DataFormatVecPermute", ew::same),
    ("DenseBincount", data_ops::bincount),
    ("DepthToSpace", image::depth_space),
    ("DepthwiseConv2dNative", nn::depthwise_conv2d),
    ("DepthwiseConv2dNativeBackpropFilter", nn::conv_backprop_filter),
    ("DepthwiseConv2dNativeBackpropInput", nn::conv_backprop_input),
    ("Dequantize", uniform_quant::dequantize),
    ("DeviceIndex", spmd::device_index),
    ("Diag", linalg::diag_full),
    ("DiagPart", linalg::diag_part_full),
    ("Digamma", ew::same),
    ("Div", ew::broadcast),
    ("DivNoNan", ew::broadcast),
    ("DynamicPartition", dynamic_shape::dynamic_partition),
    ("Einsum", index::einsum),
    ("Elu", ew::same),
    ("EluGrad", ew::same),
    ("Empty", index::empty),
    ("EnsureShape", ew::same),
    ("Equal", ew::compare),
    ("Erf", ew::same),
    ("Erfc", ew::same),
    ("Erfinv", ew::same),
    ("Exp", ew::same),
    ("ExpandDims", shape::expand_dims),
    ("Expm1", ew::same),
    ("ExtractImagePatches", image::patches),
    ("FFT", cx::same_complex),
    ("FFT2D", cx::same_complex),
    ("FFT3D", cx::same_complex),
    ("FakeQuantWithMinMaxArgs", ew::same),
    ("FakeQuantWithMinMaxArgsGradient", ew::same),
    ("FakeQuantWithMinMaxVars", ew::same),
    ("FakeQuantWithMinMaxVarsGradient", quant::fake_quant_grad),
    ("FakeQuantWithMinMaxVarsPerChannel", ew::same),
    ("FakeQuantWithMinMaxVarsPerChannelGradient", quant::fake_quant_grad),
    ("Fill", shape::fill),
    ("Floor", ew::same),
    ("FloorDiv", ew::broadcast),
    ("FloorMod", ew::broadcast),
    ("FusedBatchNorm", nn::batch_norm),
    ("FusedBatchNormGrad", nn::batch_norm_grad),
    ("FusedBatchNormGradV2", nn::batch_norm_grad),
    ("FusedBatchNormGradV3", nn::batch_norm_grad),
    ("FusedBatchNormV2", nn::batch_norm),
    ("FusedBatchNormV3", nn::batch_norm),
    ("Gather", index::gather_v1),
    ("GatherNd", index::gather_nd),
    ("GatherV2", shape::gather),
    ("Greater", ew::compare),
    ("GreaterEqual", ew::compare),
    ("HSVToRGB", ew::same),
    ("IFFT", cx::same_complex),
    ("IFFT2D", cx::same_complex),
    ("IFFT3D", cx::same_complex),
    ("IRFFT", cx::irfft),
    ("IRFFT2D", cx::irfft),
    ("IRFFT3D", cx::irfft),
    ("Identity", ew::same),
    ("IdentityN", ew::identity_n),
    ("Igamma", ew::broadcast),
    ("IgammaGradA", ew::broadcast),
    ("Igammac", ew::broadcast),
    ("Imag", cx::part),
    ("InTopKV2", index::in_top_k),
    ("Inv", ew::same),
    ("Invert", ew::same),
    ("IsFinite", ew::predicate),
    ("IsInf", ew::predicate),
    ("IsNan", ew::predicate),
    ("L2Loss", nn::l2_loss),
    ("LRN", ew::same),
    ("LRNGrad", ew::same),
    ("LeakyRelu", ew::same),
    ("LeakyReluGrad", ew::same),
    ("LeftShift", ew::broadcast),
    ("Less", ew::compare),
    ("LessEqual", ew::compare),
    ("Lgamma", ew::same),
    ("LinSpace", index::lin_space),
    ("Log", ew::same),
    ("Log1p", ew::same),
    ("LogSoftmax", ew::same),
    ("LogicalAnd", ew::broadcast),
    ("LogicalNot", ew::same),
    ("LogicalOr", ew::broadcast),
    ("LowerBound", index::search_sorted),
    ("MatMul", nn::matmul),
    ("MatrixBandPart", linalg::same_matrix),
    ("MatrixDiag", linalg::diag),
    ("MatrixDiagPart", linalg::diag_part),
    ("MatrixDiagPartV2", linalg::diag_part),
    ("MatrixDiagPartV3", linalg::diag_part),
    ("MatrixDiagV2", linalg::diag),
    ("MatrixDiagV3", linalg::diag),
    ("MatrixInverse", linalg_solve::inverse),
    ("MatrixSetDiag", linalg::set_diag),
    ("MatrixSetDiagV2", linalg::set_diag),
    ("MatrixSetDiagV3", linalg::set_diag),
    ("MatrixSolve", linalg_solve::solve),
    ("MatrixTriangularSolve", linalg::triangular_solve),
    ("Max", reduce::reduce),
    ("MaxPool", nn::pool),
    ("MaxPool3D", nn::pool3d),
    ("MaxPool3DGrad", ew::same),
    ("MaxPool3DGradGrad", image::pooled),
    ("MaxPoolGrad", ew::same),
    ("MaxPoolGradGrad", image::pooled),
    ("MaxPoolGradGradV2", image::pooled),
    ("MaxPoolGradV2", ew::same),
    ("MaxPoolV2", image::max_pool_v2),
    ("Maximum", ew::broadcast),
    ("Mean", reduce::reduce),
    ("Min", reduce::reduce),
    ("Minimum", ew::broadcast),
    ("MirrorPad", shape::pad),
    ("MirrorPadGrad", image::mirror_pad_grad),
    ("Mod", ew::broadcast),
    ("Mul", ew::broadcast),
    ("MulNoNan", ew::broadcast),
    ("Multinomial", random::multinomial),
    ("Ndtri", ew::same),
    ("Neg", ew::same),
    ("NextAfter", ew::broadcast),
    ("NonMaxSuppressionV3", dynamic_shape::non_max_suppression),
    ("NonMaxSuppressionV4", dynamic_shape::non_max_suppression),
    ("NotEqual", ew::compare),
    ("OneHot", index::one_hot),
    ("Pack", shape::pack),
    ("Pad", shape::pad),
    ("PadV2", shape::pad),
    ("ParallelDynamicStitch", data_ops::dynamic_stitch),
    ("ParameterizedTruncatedNormal", random::float_draw),
    ("PlaceholderWithDefault", ew::same),
    ("Polygamma", ew::broadcast),
    ("PopulationCount", ew::population_count),
    ("Pow", ew::broadcast),
    ("PreventGradient", ew::same),
    ("Print", ew::same),
    ("Prod", reduce::reduce),
    ("Qr", linalg_solve::qr),
    ("QuantizeAndDequantizeV2", ew::same),
    ("QuantizeAndDequantizeV3", ew::same),
    ("QuantizeAndDequantizeV4", ew::same),
    ("RFFT", cx::rfft),
    ("RFFT2D", cx::rfft),
    ("RFFT3D", cx::rfft),
    ("RGBToHSV", ew::same),
    ("RandomGammaGrad", ew::broadcast),
    ("RandomShuffle", ew::same),
    ("RandomStandardNormal", random::float_draw),
    ("RandomUniform", random::float_draw),
    ("RandomUniformInt", random::seeded_int_draw),
    ("Real", cx::part),
    ("RealDiv", ew::broadcast),
    ("Reciprocal", ew::same),
    ("ReciprocalGrad", ew::same),
    ("Relu", ew::same),
    ("Relu6", ew::same),
    ("Relu6Grad", ew::same),
    ("ReluGrad", ew::same),
    ("Reshape", shape::reshape),
    ("ResizeBilinear", image::resize),
    ("ResizeBilinearGrad", image::pooled),
    ("ResizeNearestNeighbor", image::resize),
    ("ResizeNearestNeighborGrad", image::resize),
    ("Reverse", ew::same),
    ("ReverseSequence", ew::same),
    ("ReverseV2", ew::same),
    ("RightShift", ew::broadcast),
    ("Rint", ew::same),
    ("RngReadAndSkip", random_state::read_and_skip),
    ("Roll", ew::same),
    ("Round", ew::same),
    ("Rsqrt", ew::same),
    ("RsqrtGrad", ew::same),
    ("ScatterNd", index::scatter_nd),
    ("SegmentMaxV2", index::unsorted_segment),
    ("SegmentMinV2", index::unsorted_segment),
    ("SegmentProdV2", index::unsorted_segment),
    ("SegmentSumV2", index::unsorted_segment),
    ("Select", ew::select),
    ("SelectV2", ew::select),
    ("SelfAdjointEigV2", linalg_solve::eigh),
    ("Selu", ew::same),
    ("SeluGrad", ew::same),
    ("Sigmoid", ew::same),
    ("SigmoidGrad", ew::same),
    ("Sign", ew::same),
    ("Sin", ew::same),
    ("Sinh", ew::same),
    ("Slice", shape::slice),
    ("Softmax", ew::same),
    ("SoftmaxCrossEntropyWithLogits", nn::softmax_cross_entropy),
    ("Softplus", ew::same),
    ("SoftplusGrad", ew::same),
    ("Softsign", ew::same),
    ("SoftsignGrad", ew::same),
    ("SpaceToBatch", image::space_batch),
    ("SpaceToBatchND", image::space_batch),
    ("SpaceToDepth", image::depth_space),
    ("SparseMatMul", linalg::sparse_matmul),
    ("SparseSoftmaxCrossEntropyWithLogits", nn::softmax_cross_entropy),
    ("SparseToDense", data_ops::sparse_to_dense),
    ("Split", shape::split),
    ("SplitV", shape::split_v),
    ("Sqrt", ew::same),
    ("SqrtGrad", ew::same),
    ("Square", ew::same),
    ("SquaredDifference", ew::broadcast),
    ("Squeeze", shape::squeeze),
    ("StatefulStandardNormalV2", stateful_random::draw),
    ("StatefulTruncatedNormal", stateful_random::draw),
    ("StatefulUniform", stateful_random::draw),
    ("StatefulUniformFullInt", stateful_random::draw),
    ("StatefulUniformInt", stateful_random::draw),
    ("StatelessMultinomial", random::multinomial),
    ("StatelessParameterizedTruncatedNormal", random::float_draw),
    ("StatelessRandomGetAlg", random::alg),
    ("StatelessRandomGetKeyCounter", random::key_counter),
    ("StatelessRandomGetKeyCounterAlg", random::key_counter_alg),
    ("StatelessRandomNormal", random::float_draw),
    ("StatelessRandomNormalV2", random::float_draw),
    ("StatelessRandomUniform", random::float_draw),
    ("StatelessRandomUniformFullInt", random::full_int_draw),
    ("StatelessRandomUniformFullIntV2", random::full_int_draw),
    ("StatelessRandomUniformInt", random::int_draw),
    ("StatelessRandomUniformIntV2", random::int_draw),
    ("StatelessRandomUniformV2", random::float_draw),
    ("StatelessTruncatedNormal", random::float_draw),
    ("StatelessTruncatedNormalV2", random::float_draw),
    ("StochasticCastToInt", prand::stochastic_cast),
    ("StopGradient", ew::same),
    ("StridedSlice", index::strided_slice),
    ("StridedSliceGrad", index::strided_slice_grad),
    ("Sub", ew::broadcast),
    ("Sum", reduce::reduce),
    ("Svd", linalg_solve::svd),
    ("SymbolicGradient", xla_ext::symbolic_gradient),
    ("Tan", ew::same),
    ("Tanh", ew::same),
    ("TanhGrad", ew::same),
    ("TensorScatterAdd", ew::same),
    ("TensorScatterMax", ew::same),
    ("TensorScatterMin", ew::same),
    ("TensorScatterSub", ew::same),
    ("TensorScatterUpdate", ew::same),
    ("TensorStridedSliceUpdate", ew::same),
    ("Tile", shape::tile),
    ("ToBool", ew::to_bool),
    ("TopKV2", index::top_k),
    ("Transpose", shape::transpose),
    ("TridiagonalMatMul", linalg::tridiagonal_matmul),
    ("TridiagonalSolve", linalg_solve::tridiagonal_solve),
    ("TruncateDiv", ew::broadcast),
    ("TruncateMod", ew::broadcast),
    ("TruncatedNormal", random::float_draw),
    ("UniformDequantize", uniform_quant::to_tout),
    ("UniformQuantize", uniform_quant::to_tout),
    ("UniformQuantizedAdd", ew::broadcast),
    ("UniformQuantizedClipByValue", ew::same),
    ("UniformQuantizedConvolution", uniform_quant::conv),
    ("UniformQuantizedDot", uniform_quant::dot),
    ("UniformRequantize", uniform_quant::to_tout),
    ("Unique", dynamic_shape::unique),
    ("UniqueV2", dynamic_shape::unique_v2),
    ("Unpack", shape::unpack),
    ("UnsortedSegmentMax", index::unsorted_segment),
    ("UnsortedSegmentMin", index::unsorted_segment),
    ("UnsortedSegmentProd", index::unsorted_segment),
    ("UnsortedSegmentSum", index::unsorted_segment),
    ("UpperBound", index::search_sorted),
    ("Xdivy", ew::broadcast),
    ("XlaAllReduce", spmd::same),
    ("XlaBroadcastHelper", xla_ops::broadcast_helper),
    ("XlaCallModule", xla_call_module::xla_call_module),
    ("XlaConcatND", spmd::concat_nd),
    ("XlaConv", xla_ops::conv),
    ("XlaConvV2", xla_ops::conv),
    ("XlaCustomCall", xla_ext::custom_call),
    ("XlaCustomCallV2", xla_ext::custom_call_v2),
    ("XlaDequantize", prand::dequantize),
    ("XlaDot", xla_ops::dot),
    ("XlaDotV2", xla_ops::dot),
    ("XlaDynamicSlice", xla_ops::dynamic_slice),
    ("XlaDynamicUpdateSlice", ew::same),
    ("XlaEinsum", index::einsum),
    ("XlaGather", xla_ops::gather),
    ("XlaKeyValueSort", xla_fn::key_value_sort),
    ("XlaOptimizationBarrier", spmd::each),
    ("XlaPad", xla_ops::pad),
    ("XlaRecv", xla_ext::recv),
    ("XlaReduce", xla_fn::reduce),
    ("XlaReducePrecision", ew::same),
    ("XlaReduceScatter", xla_misc::reduce_scatter),
    ("XlaReduceWindow", xla_fn::reduce_window),
    ("XlaRemoveDynamicDimensionSize", spmd::same),
    ("XlaRngBitGenerator", stateful_random::rng_bit_generator),
    ("XlaScatter", xla_misc::scatter),
    ("XlaSelectAndScatter", xla_fn::select_and_scatter),
    ("XlaSelfAdjointEig", linalg_solve::eigh),
    ("XlaSend", xla_ext::send),
    ("XlaSetBound", spmd::same),
    ("XlaSetDynamicDimensionSize", spmd::set_dynamic_size),
    ("XlaSharding", spmd::same),
    ("XlaSort", xla_fn::sort),
    ("XlaSplitND", spmd::split_nd),
    ("XlaSpmdFullToShardShape", spmd::spmd_shape),
    ("XlaSpmdShardToFullShape", spmd::spmd_shape),
    ("XlaSvd", linalg_solve::svd),
    ("XlaVariadicReduce", xla_fn::reduce),
    ("XlaVariadicReduceV2", xla_fn::reduce),
    ("XlaVariadicSort", xla_fn::variadic_sort),
    ("Xlog1py", ew::broadcast),
    ("Xlogy", ew::broadcast),
    ("Zeta", ew::broadcast),
];

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A test operand: dtype, shape and an optional constant value.
    pub(crate) type TestOperand = (DType, Vec<usize>, Option<Vec<i64>>);

    /// An operand of a test: dtype, shape and an optional constant value.
    pub(crate) fn x(dtype: DType, shape: &[usize]) -> TestOperand {
        (dtype, shape.to_vec(), None)
    }

    /// A constant integer vector operand.
    pub(crate) fn k(values: &[i64]) -> TestOperand {
        (DType::I32, vec![values.len()], Some(values.to_vec()))
    }

    /// A constant integer scalar operand.
    pub(crate) fn k0(value: i64) -> TestOperand {
        (DType::I32, Vec::new(), Some(vec![value]))
    }

    /// Infers `op` with `attrs` over `operands` and compares with `expect`
    /// (`Ok` types, or `Err` with a part of the message).
    pub(crate) fn check(
        op: &str,
        attrs: &[(&str, AttrValue)],
        operands: &[TestOperand],
        expect: Result<&[(DType, &[usize])], &str>,
    ) {
        let attrs: AttrMap = attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let ops: Vec<Operand> =
            operands.iter().map(|(d, s, v)| Operand { dtype: *d, shape: s, value: v.as_deref() }).collect();
        let got = infer(op, &attrs, &ops).unwrap_or_else(|| panic!("{op} has no rule"));
        match (got, expect) {
            (Ok(got), Ok(want)) => {
                let want: Vec<OutType> = want.iter().map(|(d, s)| OutType::new(*d, s.to_vec())).collect();
                assert_eq!(got, want, "{op}");
            }
            (Err(e), Err(part)) => assert!(e.contains(part), "{op}: {e:?} lacks {part:?}"),
            (got, want) => panic!("{op}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn the_table_is_sorted_and_names_registered_ops() {
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0), "TABLE is sorted");
        let unknown: Vec<&str> = ops().filter(|op| crate::ir::ops::lookup(op).is_none()).collect();
        assert!(unknown.is_empty(), "not in the op registry: {unknown:?}");
    }

    #[test]
    fn an_op_without_a_rule_is_none() {
        assert!(infer("Where", &AttrMap::default(), &[]).is_none());
    }

    #[test]
    fn axes_normalise_and_are_checked() {
        assert_eq!(axis(-1, 3), Ok(2));
        assert_eq!(axis(0, 1), Ok(0));
        assert!(axis(3, 3).is_err());
        assert!(axis(-4, 3).is_err());
    }
}
