//! Op → builder: one small function per TensorFlow op type, in one table,
//! in the style of TensorFlow's legalize-tf patterns.
//!
//! A builder receives the op's operands as SSA values (and their values
//! where they are compile-time constants: axes, shapes, permutations), its
//! result types (known from the trace, see `trace`) and its
//! attributes, and appends StableHLO ops to the context. Ops whose results
//! are all constants never reach a builder: the emitter prints them as
//! `stablehlo.constant`. Ops on variables (reads, assignments, optimizer
//! updates, gathers and scatters on a resource) are handled by the
//! emitter, which calls the builders of [`state`] with the variables'
//! current values.
//!
//! The builders live one file per family: [`elementwise`] (arithmetic,
//! comparisons, math, logic), [`activation`] (activations and their
//! gradients), [`nn`] (softmax, losses, bias, batch norm), [`linalg`]
//! (matmuls, einsum), [`reduce`] (reductions, arg max, cumsum), [`shape`]
//! (reshapes, slices, concatenation, padding), [`gather`] (gathers,
//! scatters, segment sums, one-hot), [`conv`] (convolutions and pools;
//! [`conv3d`] their volumetric forms;
//! [`nchw`] runs them and the batch norms in NCHW), [`list`] (TensorLists
//! and Optionals), [`special`] (special functions, truncating divisions,
//! bitwise ops), [`complex`] (complex numbers and FFTs), [`collective`]
//! (all-reduce, broadcast, replica id), [`spmd`] (sharding annotations,
//! dynamic sizes, tiled splits and concatenations), [`dynamic_shape`]
//! (ops whose output size depends on values: padded buffers and their
//! sizes), [`xla_ext`] (custom
//! calls, channels) and [`state`] (variable updates). [`NOT_LOWERED`] gives the reason for every op the
//! simulator runs that has no builder. Invariant: [`TABLE`] is sorted by op
//! name (a test checks it), so lookups are a binary search.

mod activation;
mod check;
pub(super) mod collective;
mod complex;
mod conv;
mod conv3d;
mod data_ops;
pub(crate) mod dynamic_shape;
mod elementwise;
mod gather;
mod igamma;
mod image;
mod index;
mod linalg;
mod linalg_diag;
mod linalg_factor;
mod linalg_solve;
mod linalg_solve_eig;
mod list;
mod nchw;
mod nn;
mod prand;
mod ptn;
mod quant;
pub mod random;
mod random_state;
mod reduce;
mod segment;
mod shape;
mod spatial;
mod special;
mod spmd;
pub(super) mod stack;
pub mod state;
mod stateful_random;
pub(super) mod tensor_array;
mod uniform_quant;
mod xla_ext;
pub(super) mod xla_fn;
pub mod xla_misc;
mod xla_ops;

use super::text::{Cmp, Ctx, Reducer, Ty, Val};
use crate::exec::Tensor;
use crate::ir::{AttrMap, DType};

use activation as act;
use complex as cx;
use elementwise as ew;
use special as sp;

/// What a builder gets.
pub struct Call<'a> {
    /// The op type.
    pub op: &'a str,
    /// The node's attributes.
    pub attrs: &'a AttrMap,
    /// The operands, in order.
    pub inputs: Vec<Val>,
    /// Operand values known at compile time.
    pub consts: Vec<Option<Tensor>>,
    /// Result types, one per output.
    pub outputs: &'a [Ty],
    /// How many replicas the program runs as.
    pub num_replicas: usize,
}

impl Call<'_> {
    fn input(&self, i: usize) -> Result<&Val, String> {
        self.inputs.get(i).ok_or_else(|| format!("expected at least {} operands", i + 1))
    }

    fn out(&self, i: usize) -> Result<&Ty, String> {
        self.outputs.get(i).ok_or_else(|| format!("no type for output {i}"))
    }

    /// Operand `i` as a compile-time list of integers.
    fn ints(&self, i: usize, what: &str) -> Result<Vec<i64>, String> {
        let t = self
            .consts
            .get(i)
            .and_then(Option::as_ref)
            .ok_or_else(|| format!("operand {i} ({what}) must be a compile-time constant"))?;
        t.to_i64_vec(self.op, what).map_err(|e| e.to_string())
    }

    /// An integer attribute, or `default`.
    fn int_attr(&self, key: &str, default: i64) -> i64 {
        self.attrs.get_int(key).unwrap_or(default)
    }

    /// A float attribute (or an integer one), or `default`.
    fn float_attr(&self, key: &str, default: f64) -> f64 {
        match self.attrs.get(key) {
            Some(crate::ir::AttrValue::Float(f)) => f64::from(*f),
            Some(crate::ir::AttrValue::Int(i)) => *i as f64,
            _ => default,
        }
    }

    /// A list-of-integers attribute (empty when absent).
    fn int_list(&self, key: &str) -> Vec<i64> {
        self.attrs.get(key).and_then(|v| v.as_list()).unwrap_or_default().iter().filter_map(|v| v.as_int()).collect()
    }
}

/// A builder: appends the op and returns its results.
pub type Builder = fn(&mut Ctx, &Call) -> Result<Vec<Val>, String>;

/// The lowering table: op type → builder, sorted by op type.
pub const TABLE: &[(&str, Builder)] = &[
    ("Abs", |c, n| ew::unary(c, n, "abs")),
    ("Acos", |c, n| ew::unary(c, n, "chlo.acos")),
    ("Acosh", |c, n| ew::unary(c, n, "chlo.acosh")),
    ("Add", ew::add),
    ("AddN", ew::add_n),
    ("AddV2", ew::add),
    ("AdjustContrastv2", image::adjust_contrast),
    ("AdjustHue", image::colour),
    ("AdjustSaturation", image::colour),
    ("All", |c, n| reduce::reduce(c, n, reduce::Kind::All)),
    ("AllGather", collective::all_gather),
    ("AllReduce", collective::all_reduce),
    ("Angle", cx::part),
    ("Any", |c, n| reduce::reduce(c, n, reduce::Kind::Any)),
    ("ApproxTopK", data_ops::approx_top_k),
    ("ApproximateEqual", sp::approximate_equal),
    ("ArgMax", |c, n| reduce::arg_extreme(c, n, true)),
    ("ArgMin", |c, n| reduce::arg_extreme(c, n, false)),
    ("Asin", |c, n| ew::unary(c, n, "chlo.asin")),
    ("Asinh", |c, n| ew::unary(c, n, "chlo.asinh")),
    ("Assert", check::assert),
    ("Atan", |c, n| ew::unary(c, n, "chlo.atan")),
    ("Atan2", |c, n| ew::binary(c, n, "atan2")),
    ("Atanh", |c, n| ew::unary(c, n, "chlo.atanh")),
    ("AvgPool", |c, n| nchw::with_layout(c, n, conv::avg_pool)),
    ("AvgPool3D", conv3d::avg_pool),
    ("AvgPool3DGrad", conv3d::avg_pool_grad),
    ("AvgPoolGrad", |c, n| nchw::with_layout(c, n, conv::avg_pool_grad)),
    ("BatchMatMul", linalg::batch_matmul),
    ("BatchMatMulV2", linalg::batch_matmul),
    ("BatchMatMulV3", linalg::batch_matmul),
    ("BatchToSpace", spatial::moved),
    ("BatchToSpaceND", spatial::moved),
    ("BesselI0e", sp::bessel_i0e),
    ("BesselI1e", |c, n| ew::unary(c, n, "chlo.bessel_i1e")),
    ("Betainc", igamma::betainc),
    ("BiasAdd", nn::bias_add),
    ("BiasAddGrad", nn::bias_add_grad),
    ("BiasAddV1", nn::bias_add),
    ("Bincount", data_ops::bincount),
    ("Bitcast", sp::bitcast),
    ("BitwiseAnd", |c, n| ew::binary(c, n, "and")),
    ("BitwiseOr", |c, n| ew::binary(c, n, "or")),
    ("BitwiseXor", |c, n| ew::binary(c, n, "xor")),
    ("Broadcast", collective::broadcast),
    ("BroadcastTo", shape::broadcast_to),
    ("Bucketize", index::bucketize),
    ("Cast", ew::cast),
    ("Ceil", |c, n| ew::unary(c, n, "ceil")),
    ("CheckNumerics", sp::check_numerics),
    ("Cholesky", linalg_factor::cholesky),
    ("ClipByValue", sp::clip_by_value),
    ("CollectiveAllGather", collective::collective_all_gather),
    ("CollectiveAllReduce", collective::collective_all_reduce),
    ("CollectiveAssignGroupV2", xla_misc::assign_group),
    ("CollectiveBroadcast", collective::broadcast),
    ("CollectiveReduceV2", spmd::collective_reduce_v2),
    ("Complex", cx::complex),
    ("ComplexAbs", cx::part),
    ("Concat", index::concat_v1),
    ("ConcatV2", shape::concat),
    ("Conj", cx::conj),
    ("ConjugateTranspose", cx::conjugate_transpose),
    ("ControlTrigger", |_, _| Ok(Vec::new())),
    ("Conv", image::generic_conv),
    ("Conv2D", |c, n| nchw::with_layout(c, n, |c, n| conv::conv(c, n, conv::Kind::Forward, false))),
    ("Conv2DBackpropFilter", |c, n| {
        nchw::with_layout(c, n, |c, n| conv::conv(c, n, conv::Kind::BackpropFilter, false))
    }),
    ("Conv2DBackpropInput", |c, n| nchw::with_layout(c, n, |c, n| conv::conv(c, n, conv::Kind::BackpropInput, false))),
    ("Conv3D", |c, n| conv3d::conv(c, n, conv::Kind::Forward)),
    ("Conv3DBackpropFilterV2", |c, n| conv3d::conv(c, n, conv::Kind::BackpropFilter)),
    ("Conv3DBackpropInputV2", |c, n| conv3d::conv(c, n, conv::Kind::BackpropInput)),
    ("Cos", |c, n| ew::unary(c, n, "cosine")),
    ("Cosh", |c, n| ew::unary(c, n, "chlo.cosh")),
    ("Cross", linalg_diag::cross),
    ("CrossReplicaSum", collective::cross_replica_sum),
    ("Cumprod", |c, n| reduce::cumulative(c, n, Reducer::Mul)),
    ("Cumsum", |c, n| reduce::cumulative(c, n, Reducer::Add)),
    ("CumulativeLogsumexp", data_ops::cumulative_logsumexp),
    ("DataFormatDimMap", spatial::data_format_dim_map),
    ("DataFormatVecPermute", spatial::moved),
    ("DenseBincount", data_ops::bincount),
    ("DepthToSpace", spatial::moved),
    ("DepthwiseConv2dNative", |c, n| nchw::with_layout(c, n, |c, n| conv::conv(c, n, conv::Kind::Forward, true))),
    ("DepthwiseConv2dNativeBackpropFilter", |c, n| {
        nchw::with_layout(c, n, |c, n| conv::conv(c, n, conv::Kind::BackpropFilter, true))
    }),
    ("DepthwiseConv2dNativeBackpropInput", |c, n| {
        nchw::with_layout(c, n, |c, n| conv::conv(c, n, conv::Kind::BackpropInput, true))
    }),
    ("Dequantize", uniform_quant::dequantize),
    ("Diag", linalg_diag::diag),
    ("DiagPart", linalg_diag::diag_part_full),
    ("Digamma", |c, n| ew::unary(c, n, "chlo.digamma")),
    ("Div", ew::div),
    ("DivNoNan", ew::div_no_nan),
    ("DynamicPartition", dynamic_shape::dynamic_partition),
    ("Einsum", linalg::einsum),
    ("Elu", act::elu),
    ("EluGrad", act::elu_grad),
    ("Empty", index::empty),
    ("EmptyTensorList", list::empty),
    ("EnsureShape", identity),
    ("Equal", |c, n| ew::compare(c, n, Cmp::Eq)),
    ("Erf", |c, n| ew::unary(c, n, "chlo.erf")),
    ("Erfc", |c, n| ew::unary(c, n, "chlo.erfc")),
    ("Erfinv", |c, n| ew::unary(c, n, "chlo.erf_inv")),
    ("Exp", |c, n| ew::unary(c, n, "exponential")),
    ("ExpandDims", shape::reshape),
    ("Expm1", |c, n| ew::unary(c, n, "exponential_minus_one")),
    ("ExtractImagePatches", spatial::moved),
    ("FFT", cx::fft),
    ("FFT2D", cx::fft),
    ("FFT3D", cx::fft),
    ("FakeQuantWithMinMaxArgs", quant::fake_quant_args),
    ("FakeQuantWithMinMaxArgsGradient", quant::fake_quant_args_grad),
    ("FakeQuantWithMinMaxVars", quant::fake_quant_vars),
    ("FakeQuantWithMinMaxVarsGradient", quant::fake_quant_vars_grad),
    ("FakeQuantWithMinMaxVarsPerChannel", quant::fake_quant_vars),
    ("FakeQuantWithMinMaxVarsPerChannelGradient", quant::fake_quant_vars_grad),
    ("Fill", shape::fill),
    ("Floor", |c, n| ew::unary(c, n, "floor")),
    ("FloorDiv", ew::floor_div),
    ("FloorMod", ew::floor_mod),
    ("FusedBatchNorm", |c, n| nchw::with_layout(c, n, nn::batch_norm)),
    ("FusedBatchNormGrad", |c, n| nchw::with_layout(c, n, nn::batch_norm_grad)),
    ("FusedBatchNormGradV2", |c, n| nchw::with_layout(c, n, nn::batch_norm_grad)),
    ("FusedBatchNormGradV3", |c, n| nchw::with_layout(c, n, nn::batch_norm_grad)),
    ("FusedBatchNormV2", |c, n| nchw::with_layout(c, n, nn::batch_norm)),
    ("FusedBatchNormV3", |c, n| nchw::with_layout(c, n, nn::batch_norm)),
    ("Gather", index::gather_v1),
    ("GatherNd", gather::gather_nd),
    ("GatherV2", gather::gather_v2),
    ("Greater", |c, n| ew::compare(c, n, Cmp::Gt)),
    ("GreaterEqual", |c, n| ew::compare(c, n, Cmp::Ge)),
    ("HSVToRGB", image::colour),
    ("IFFT", cx::fft),
    ("IFFT2D", cx::fft),
    ("IFFT3D", cx::fft),
    ("IRFFT", cx::fft),
    ("IRFFT2D", cx::fft),
    ("IRFFT3D", cx::fft),
    ("Identity", identity),
    ("IdentityN", identity),
    ("Igamma", igamma::igamma),
    ("IgammaGradA", igamma::igamma),
    ("Igammac", igamma::igamma),
    ("Imag", cx::part),
    ("InTopKV2", reduce::in_top_k),
    ("Inv", sp::inv),
    ("Invert", |c, n| ew::unary(c, n, "not")),
    ("IsFinite", |c, n| ew::float_test(c, n, ew::FloatTest::Finite)),
    ("IsInf", |c, n| ew::float_test(c, n, ew::FloatTest::Inf)),
    ("IsNan", |c, n| ew::float_test(c, n, ew::FloatTest::Nan)),
    ("L2Loss", nn::l2_loss),
    ("LRN", image::lrn),
    ("LRNGrad", image::lrn_grad),
    ("LeakyRelu", act::leaky_relu),
    ("LeakyReluGrad", act::leaky_relu_grad),
    ("LeftShift", |c, n| ew::binary(c, n, "shift_left")),
    ("Less", |c, n| ew::compare(c, n, Cmp::Lt)),
    ("LessEqual", |c, n| ew::compare(c, n, Cmp::Le)),
    ("Lgamma", |c, n| ew::unary(c, n, "chlo.lgamma")),
    ("LinSpace", index::lin_space),
    ("Log", |c, n| ew::unary(c, n, "log")),
    ("Log1p", |c, n| ew::unary(c, n, "log_plus_one")),
    ("LogSoftmax", nn::log_softmax),
    ("LogicalAnd", |c, n| ew::binary(c, n, "and")),
    ("LogicalNot", |c, n| ew::unary(c, n, "not")),
    ("LogicalOr", |c, n| ew::binary(c, n, "or")),
    ("LowerBound", |c, n| index::search_sorted(c, n, false)),
    ("MatMul", linalg::matmul),
    ("MatrixBandPart", linalg_diag::band_part),
    ("MatrixDiag", linalg_diag::matrix_diag),
    ("MatrixDiagPart", linalg_diag::diag_part),
    ("MatrixDiagPartV2", linalg_diag::diag_part),
    ("MatrixDiagPartV3", linalg_diag::diag_part),
    ("MatrixDiagV2", linalg_diag::matrix_diag),
    ("MatrixDiagV3", linalg_diag::matrix_diag),
    ("MatrixInverse", linalg_solve::inverse),
    ("MatrixSetDiag", linalg_diag::set_diag),
    ("MatrixSetDiagV2", linalg_diag::set_diag),
    ("MatrixSetDiagV3", linalg_diag::set_diag),
    ("MatrixSolve", linalg_solve::solve),
    ("MatrixTriangularSolve", linalg_factor::triangular_solve),
    ("Max", |c, n| reduce::reduce(c, n, reduce::Kind::Max)),
    ("MaxPool", |c, n| nchw::with_layout(c, n, conv::max_pool)),
    ("MaxPool3D", conv3d::max_pool),
    ("MaxPool3DGrad", conv3d::max_pool_grad),
    ("MaxPool3DGradGrad", image::max_pool_grad_grad),
    ("MaxPoolGrad", |c, n| nchw::with_layout(c, n, conv::max_pool_grad)),
    ("MaxPoolGradGrad", |c, n| nchw::with_layout(c, n, image::max_pool_grad_grad)),
    ("MaxPoolGradGradV2", image::max_pool_grad_grad_v2),
    ("MaxPoolGradV2", image::max_pool_grad_v2),
    ("MaxPoolV2", image::max_pool_v2),
    ("Maximum", |c, n| ew::binary(c, n, "maximum")),
    ("Mean", |c, n| reduce::reduce(c, n, reduce::Kind::Mean)),
    ("Min", |c, n| reduce::reduce(c, n, reduce::Kind::Min)),
    ("Minimum", |c, n| ew::binary(c, n, "minimum")),
    ("MirrorPad", spatial::moved),
    ("MirrorPadGrad", spatial::mirror_pad_grad),
    ("Mod", sp::truncate_mod),
    ("Mul", |c, n| ew::binary(c, n, "multiply")),
    ("MulNoNan", |c, n| sp::zero_where(c, n, 1, "multiply")),
    ("Multinomial", |c, n| random::multinomial(c, n, false)),
    ("Ndtri", sp::ndtri),
    ("Neg", |c, n| ew::unary(c, n, "negate")),
    ("NextAfter", |c, n| sp::chlo_binary(c, n, "chlo.next_after")),
    ("NonMaxSuppressionV3", dynamic_shape::non_max_suppression),
    ("NonMaxSuppressionV4", dynamic_shape::non_max_suppression),
    ("NotEqual", |c, n| ew::compare(c, n, Cmp::Ne)),
    ("OneHot", gather::one_hot),
    ("OptionalFromValue", list::optional_from_value),
    ("OptionalGetValue", list::optional_get_value),
    ("OptionalHasValue", list::optional_has_value),
    ("OptionalNone", list::optional_none),
    ("Pack", shape::pack),
    ("Pad", shape::pad),
    ("PadV2", shape::pad),
    ("ParallelDynamicStitch", data_ops::parallel_dynamic_stitch),
    ("ParameterizedTruncatedNormal", ptn::seeded),
    ("PlaceholderWithDefault", identity),
    ("Polygamma", |c, n| sp::chlo_binary(c, n, "chlo.polygamma")),
    ("PopulationCount", sp::population_count),
    ("Pow", |c, n| ew::binary(c, n, "power")),
    ("PreventGradient", identity),
    ("Prod", |c, n| reduce::reduce(c, n, reduce::Kind::Prod)),
    ("Qr", linalg_solve::qr),
    ("QuantizeAndDequantizeV2", quant::quantize_and_dequantize),
    ("QuantizeAndDequantizeV3", quant::quantize_and_dequantize),
    ("QuantizeAndDequantizeV4", quant::quantize_and_dequantize),
    ("RFFT", cx::fft),
    ("RFFT2D", cx::fft),
    ("RFFT3D", cx::fft),
    ("RGBToHSV", image::colour),
    ("RandomGammaGrad", igamma::igamma),
    ("RandomShuffle", random::shuffle),
    ("RandomStandardNormal", random::seeded_draw),
    ("RandomUniform", random::seeded_draw),
    ("RandomUniformInt", random::seeded_draw),
    ("Real", cx::part),
    ("RealDiv", ew::div),
    ("Reciprocal", ew::reciprocal),
    ("ReciprocalGrad", sp::reciprocal_grad),
    ("Relu", act::relu),
    ("Relu6", act::relu6),
    ("Relu6Grad", act::relu6_grad),
    ("ReluGrad", act::relu_grad),
    ("ReplicaId", collective::replica_id),
    ("Reshape", shape::reshape),
    ("ResizeBilinear", image::resize_bilinear),
    ("ResizeBilinearGrad", image::resize_bilinear_grad),
    ("ResizeNearestNeighbor", spatial::moved),
    ("ResizeNearestNeighborGrad", image::resize_nearest_grad),
    ("Reverse", index::reverse_v1),
    ("ReverseSequence", index::reverse_sequence),
    ("ReverseV2", shape::reverse),
    ("RightShift", sp::right_shift),
    ("Rint", |c, n| ew::unary(c, n, "round_nearest_even")),
    ("Roll", index::roll),
    ("Round", |c, n| ew::unary(c, n, "round_nearest_even")),
    ("Rsqrt", |c, n| ew::unary(c, n, "rsqrt")),
    ("RsqrtGrad", act::rsqrt_grad),
    ("ScatterNd", gather::scatter_nd),
    ("SegmentMaxV2", |c, n| segment::segment_reduce(c, n, Reducer::Max)),
    ("SegmentMinV2", |c, n| segment::segment_reduce(c, n, Reducer::Min)),
    ("SegmentProdV2", |c, n| segment::segment_reduce(c, n, Reducer::Mul)),
    ("SegmentSumV2", |c, n| segment::segment_reduce(c, n, Reducer::Add)),
    ("Select", ew::select_v1),
    ("SelectV2", ew::select),
    ("SelfAdjointEigV2", linalg_solve_eig::eigh),
    ("Selu", act::selu),
    ("SeluGrad", act::selu_grad),
    ("Sigmoid", |c, n| ew::unary(c, n, "logistic")),
    ("SigmoidGrad", act::sigmoid_grad),
    ("Sign", ew::sign),
    ("Sin", |c, n| ew::unary(c, n, "sine")),
    ("Sinh", |c, n| ew::unary(c, n, "chlo.sinh")),
    ("Slice", shape::slice),
    ("Snapshot", identity),
    ("Softmax", nn::softmax),
    ("SoftmaxCrossEntropyWithLogits", nn::softmax_xent),
    ("Softplus", act::softplus),
    ("SoftplusGrad", act::softplus_grad),
    ("Softsign", act::softsign),
    ("SoftsignGrad", act::softsign_grad),
    ("SpaceToBatch", spatial::moved),
    ("SpaceToBatchND", spatial::moved),
    ("SpaceToDepth", spatial::moved),
    ("SparseMatMul", linalg_factor::sparse_matmul),
    ("SparseSoftmaxCrossEntropyWithLogits", nn::sparse_softmax_xent),
    ("SparseToDense", data_ops::sparse_to_dense),
    ("Split", shape::split),
    ("SplitV", shape::split),
    ("Sqrt", |c, n| ew::unary(c, n, "sqrt")),
    ("SqrtGrad", act::sqrt_grad),
    ("Square", ew::square),
    ("SquaredDifference", ew::squared_difference),
    ("Squeeze", shape::reshape),
    ("StatelessMultinomial", |c, n| random::multinomial(c, n, true)),
    ("StatelessParameterizedTruncatedNormal", ptn::stateless),
    ("StatelessRandomGetAlg", random::get_alg),
    ("StatelessRandomGetKeyCounter", |c, n| random::get_key_counter(c, n, false)),
    ("StatelessRandomGetKeyCounterAlg", |c, n| random::get_key_counter(c, n, true)),
    ("StatelessRandomNormal", |c, n| random::float_draw(c, n, random::Dist::Normal, false)),
    ("StatelessRandomNormalV2", |c, n| random::float_draw(c, n, random::Dist::Normal, true)),
    ("StatelessRandomUniform", |c, n| random::float_draw(c, n, random::Dist::Uniform, false)),
    ("StatelessRandomUniformFullInt", |c, n| random::int_draw(c, n, false, None)),
    ("StatelessRandomUniformFullIntV2", |c, n| random::int_draw(c, n, true, None)),
    ("StatelessRandomUniformInt", |c, n| random::int_draw(c, n, false, Some(2))),
    ("StatelessRandomUniformIntV2", |c, n| random::int_draw(c, n, true, Some(4))),
    ("StatelessRandomUniformV2", |c, n| random::float_draw(c, n, random::Dist::Uniform, true)),
    ("StatelessTruncatedNormal", |c, n| random::float_draw(c, n, random::Dist::Truncated, false)),
    ("StatelessTruncatedNormalV2", |c, n| random::float_draw(c, n, random::Dist::Truncated, true)),
    ("StochasticCastToInt", prand::stochastic_cast),
    ("StopGradient", identity),
    ("StridedSlice", shape::strided_slice),
    ("StridedSliceGrad", shape::strided_slice_grad),
    ("Sub", |c, n| ew::binary(c, n, "subtract")),
    ("Sum", |c, n| reduce::reduce(c, n, reduce::Kind::Sum)),
    ("Svd", linalg_solve_eig::svd),
    ("Tan", |c, n| ew::unary(c, n, "chlo.tan")),
    ("Tanh", |c, n| ew::unary(c, n, "tanh")),
    ("TanhGrad", act::tanh_grad),
    ("TensorArrayCloseV3", tensor_array::close),
    ("TensorArrayConcatV3", tensor_array::concat),
    ("TensorArrayGatherV3", tensor_array::gather),
    ("TensorArrayGradV3", tensor_array::grad),
    ("TensorArrayReadV3", tensor_array::read),
    ("TensorArrayScatterV3", tensor_array::scatter),
    ("TensorArraySizeV3", tensor_array::size),
    ("TensorArraySplitV3", tensor_array::split),
    ("TensorArrayV3", tensor_array::array),
    ("TensorArrayWriteV3", tensor_array::write),
    ("TensorListConcatV2", list::concat),
    ("TensorListFromTensor", list::from_tensor),
    ("TensorListGather", list::gather_rows),
    ("TensorListGetItem", list::get_item),
    ("TensorListLength", list::length),
    ("TensorListPopBack", list::pop_back),
    ("TensorListPushBack", list::push_back),
    ("TensorListReserve", list::reserve),
    ("TensorListScatterIntoExistingList", list::scatter_rows),
    ("TensorListSetItem", list::set_item),
    ("TensorListSplit", list::split),
    ("TensorListStack", list::stack),
    ("TensorScatterAdd", |c, n| gather::tensor_scatter(c, n, true)),
    ("TensorScatterMax", |c, n| segment::tensor_scatter(c, n, gather::Combine::Max)),
    ("TensorScatterMin", |c, n| segment::tensor_scatter(c, n, gather::Combine::Min)),
    ("TensorScatterSub", |c, n| segment::tensor_scatter(c, n, gather::Combine::Sub)),
    ("TensorScatterUpdate", |c, n| gather::tensor_scatter(c, n, false)),
    ("TensorStridedSliceUpdate", data_ops::tensor_strided_slice_update),
    ("Tile", shape::tile),
    ("ToBool", sp::to_bool),
    ("TopKV2", index::top_k),
    ("Transpose", shape::transpose),
    ("TridiagonalMatMul", linalg_factor::tridiagonal_matmul),
    ("TridiagonalSolve", linalg_solve::tridiagonal_solve),
    ("TruncateDiv", sp::truncate_div),
    ("TruncateMod", sp::truncate_mod),
    ("TruncatedNormal", random::seeded_draw),
    ("UniformDequantize", uniform_quant::dequantize_uniform),
    ("UniformQuantize", uniform_quant::quantize),
    ("UniformQuantizedAdd", uniform_quant::add),
    ("UniformQuantizedClipByValue", uniform_quant::clip_by_value),
    ("UniformQuantizedConvolution", uniform_quant::convolution),
    ("UniformQuantizedDot", uniform_quant::dot),
    ("UniformRequantize", uniform_quant::requantize),
    ("Unique", dynamic_shape::unique),
    ("UniqueV2", dynamic_shape::unique),
    ("Unpack", shape::unpack),
    ("UnsortedSegmentMax", |c, n| segment::segment_reduce(c, n, Reducer::Max)),
    ("UnsortedSegmentMin", |c, n| segment::segment_reduce(c, n, Reducer::Min)),
    ("UnsortedSegmentProd", |c, n| segment::segment_reduce(c, n, Reducer::Mul)),
    ("UnsortedSegmentSum", gather::unsorted_segment_sum),
    ("UpperBound", |c, n| index::search_sorted(c, n, true)),
    ("Xdivy", |c, n| sp::zero_where(c, n, 0, "divide")),
    ("XlaAllReduce", spmd::xla_all_reduce),
    ("XlaBroadcastHelper", xla_ops::broadcast_helper),
    ("XlaConcatND", spmd::concat_nd),
    ("XlaConv", xla_ops::conv),
    ("XlaConvV2", xla_ops::conv),
    ("XlaCustomCall", xla_ext::custom_call),
    ("XlaCustomCallV2", xla_ext::custom_call),
    ("XlaDequantize", prand::dequantize),
    ("XlaDot", xla_ops::dot),
    ("XlaDotV2", xla_ops::dot),
    ("XlaDynamicSlice", xla_ops::dynamic_slice),
    ("XlaDynamicUpdateSlice", xla_ops::dynamic_update_slice),
    ("XlaEinsum", linalg::einsum),
    ("XlaGather", xla_ops::gather),
    ("XlaKeyValueSort", xla_fn::sort),
    ("XlaOptimizationBarrier", spmd::optimization_barrier),
    ("XlaPad", xla_ops::pad),
    ("XlaRecv", xla_ext::recv),
    ("XlaReducePrecision", xla_ops::reduce_precision),
    ("XlaReduceScatter", xla_misc::reduce_scatter),
    ("XlaRemoveDynamicDimensionSize", identity),
    ("XlaReplicaId", collective::replica_id),
    ("XlaRngBitGenerator", stateful_random::rng_bit_generator),
    ("XlaSelfAdjointEig", linalg_solve_eig::eigh),
    ("XlaSend", xla_ext::send),
    ("XlaSetBound", identity),
    ("XlaSetDynamicDimensionSize", spmd::set_dynamic_size),
    ("XlaSharding", spmd::sharding),
    ("XlaSort", xla_fn::sort),
    ("XlaSplitND", spmd::split_nd),
    ("XlaSpmdFullToShardShape", spmd::spmd_shape),
    ("XlaSpmdShardToFullShape", spmd::spmd_shape),
    ("XlaSvd", linalg_solve_eig::svd),
    ("Xlog1py", |c, n| sp::zero_where(c, n, 0, "log_plus_one")),
    ("Xlogy", |c, n| sp::zero_where(c, n, 0, "log")),
    ("Zeta", |c, n| sp::chlo_binary(c, n, "chlo.zeta")),
];

/// Ops whose results depend only on their operands' shapes: always constants.
pub const SHAPE_ONLY: &[&str] = &[
    "FakeParam",
    "OnesLike",
    "Rank",
    "Shape",
    "ShapeN",
    "Size",
    "TensorListElementShape",
    "VariableShape",
    "ZerosLike",
];

/// Ops with no StableHLO builder that must fold to constants (their
/// operands are shapes or index lists).
pub const FOLD_ONLY: &[&str] = &[
    "BroadcastArgs",
    "BroadcastGradientArgs",
    "ConcatOffset",
    "Const",
    "DeviceIndex",
    "DynamicStitch",
    "InvertPermutation",
    "ListDiff",
    "Range",
    "Rank",
    "Shape",
    "ShapeN",
    "Size",
    "Where",
];

/// Ops PJRT runs without a builder: arguments, results and metadata of @main.
const STRUCTURAL: &[&str] = &[
    "MirroredVarHandleOp",
    "NoOp",
    "Placeholder",
    "TPUCompilationResult",
    "TPUReplicateMetadata",
    "TPUReplicatedInput",
    "TPUReplicatedOutput",
    "VarHandleOp",
];

/// Ops the simulator runs that never reach a builder, and why.
pub const NOT_LOWERED: &[(&str, &str)] = &[
    ("Enter", "TF1 control flow (Switch/Merge frames) is not lowered"),
    ("Exit", "TF1 control flow (Switch/Merge frames) is not lowered"),
    ("LoopCond", "TF1 control flow (Switch/Merge frames) is not lowered"),
    ("Merge", "TF1 control flow (Switch/Merge frames) is not lowered"),
    ("NextIteration", "TF1 control flow (Switch/Merge frames) is not lowered"),
    ("Print", "host-only (strings): runs by outside compilation"),
    ("PrintV2", "host-only (strings): runs by outside compilation"),
    ("ScalarSummary", "host-only (strings): runs by outside compilation"),
    ("StringFormat", "host-only (strings): runs by outside compilation"),
    ("Switch", "TF1 control flow (Switch/Merge frames) is not lowered"),
    ("MirroredVarHandleOp", "a variable handle: the variable is an argument of @main"),
    ("NoOp", "no computation (control dependencies only)"),
    ("Placeholder", "a feed: an argument of @main"),
    ("TPUCompilationResult", "cluster metadata, not computation"),
    ("TPUReplicateMetadata", "cluster metadata, not computation"),
    ("TPUReplicatedInput", "a replicated input: an argument of @main"),
    ("TPUReplicatedOutput", "a replicated output: a result of @main"),
    ("VarHandleOp", "a variable handle: the variable is an argument of @main"),
    ("_Recv", "a transfer of the simulator's lowered form; the emitter reads the tagged graph"),
    ("_Send", "a transfer of the simulator's lowered form; the emitter reads the tagged graph"),
];

/// Why `op` has no lowering, for the ops that have none.
pub fn reason(op: &str) -> Option<&'static str> {
    if let Some((_, why)) = NOT_LOWERED.iter().find(|(name, _)| *name == op) {
        return Some(why);
    }
    if lowering_of(op).is_some() {
        return None;
    }
    crate::exec::kernels::control_flow::VARIANT_OPS.contains(&op).then_some(
        "this TensorList op has no StableHLO lowering (lists lower as a buffer and a size: see docs/xla.md); \
         the simulator runs it",
    )
}

/// How many leading operands the builder of `op` reads, where it reads
/// fewer than all: an `Assert`'s data (strings, most often) stay on the
/// host, and only its condition goes to the device.
pub fn operands_read(op: &str) -> Option<usize> {
    match op {
        "Assert" => Some(1),
        _ => None,
    }
}

/// The builder of `op`.
pub fn builder(op: &str) -> Option<Builder> {
    TABLE.binary_search_by(|(name, _)| name.cmp(&op)).ok().map(|i| TABLE[i].1)
}

/// How the PJRT backend runs `op` (`control flow`: a call op over private
/// functions, see `calls.rs`), or `None` when it does not (the
/// simulator's transfer ops, which no program PJRT runs contains).
pub fn lowering_of(op: &str) -> Option<&'static str> {
    if builder(op).is_some() {
        Some("builder")
    } else if state::is_state_op(op) {
        Some("variable update")
    } else if stack::is_stack_op(op) {
        Some("stack (buffer and depth)")
    } else if SHAPE_ONLY.contains(&op) || FOLD_ONLY.contains(&op) {
        Some("constant")
    } else if crate::ir::functions::call_kind(op).is_some() {
        Some("control flow")
    } else if op == crate::ir::functions::ARG_OP || op == crate::ir::functions::RETVAL_OP {
        Some("function signature")
    } else {
        STRUCTURAL.contains(&op).then_some("structural")
    }
}

fn identity(_: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    Ok(n.inputs.clone())
}

/// True for floating-point dtypes.
fn is_float(dtype: DType) -> bool {
    super::text::float_dtype(dtype)
}

/// `axis` (negative counts from the end) as an index below `rank`.
fn axis(axis: i64, rank: usize, op: &str) -> Result<usize, String> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || (a as usize >= rank && rank > 0) {
        return Err(format!("{op}: axis {axis} is out of range for rank {rank}"));
    }
    Ok(a as usize)
}

/// `broadcast_dimensions = array<i64: ...>` keeping every dimension but `skip`.
fn dims_except(rank: usize, skip: &[usize]) -> String {
    let dims: Vec<String> = (0..rank).filter(|d| !skip.contains(d)).map(|d| d.to_string()).collect();
    format!("broadcast_dimensions = array<i64{}>", super::text::list(&dims))
}

/// `array<i64: a, b>` of a list of integers.
fn i64s<T: ToString>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("array<i64{}>", super::text::list(&items))
}

/// Broadcasts `v` (of `out`'s shape with dimensions `skip` removed) back to `out`'s shape.
fn expand(c: &mut Ctx, v: &Val, shape: &[usize], skip: &[usize]) -> Val {
    c.op("stablehlo.broadcast_in_dim", &[v], &dims_except(shape.len(), skip), v.ty.with_shape(shape.to_vec()))
}

impl Ty {
    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_so_lookups_find_every_entry() {
        for (name, _) in TABLE {
            assert!(builder(name).is_some(), "{name}");
        }
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0), "TABLE is not sorted");
        assert!(builder("NoSuchOp").is_none());
    }

    #[test]
    fn every_simulator_op_lowers_or_has_a_documented_reason() {
        use crate::exec::kernels::{control_flow, DEVICE_OPS, PURE_OPS};
        let ops = PURE_OPS
            .iter()
            .chain(DEVICE_OPS)
            .chain(control_flow::VARIANT_OPS)
            .chain(["While", "If", "Case", "_Arg", "_Retval"].iter());
        let missing: Vec<&str> = ops.copied().filter(|op| lowering_of(op).is_none() && reason(op).is_none()).collect();
        assert!(missing.is_empty(), "simulator ops with neither a builder nor a reason: {missing:?}");
    }

    #[test]
    fn call_ops_lower_and_variants_are_excused() {
        for op in ["While", "StatelessWhile", "If", "StatelessIf", "Case", "PartitionedCall", "StatefulPartitionedCall"]
        {
            assert_eq!(lowering_of(op), Some("control flow"), "{op}");
            assert_eq!(reason(op), None, "{op}");
        }
        assert!(reason("TensorListResize").is_some_and(|r| r.contains("TensorList")));
        for op in
            ["EmptyTensorList", "TensorListPushBack", "TensorListPopBack", "TensorListElementShape", "OptionalGetValue"]
        {
            assert!(lowering_of(op).is_some(), "{op}");
            assert_eq!(reason(op), None, "{op}");
        }
    }

    #[test]
    fn no_op_is_both_lowered_and_excused() {
        for (op, _) in NOT_LOWERED {
            assert!(builder(op).is_none() && !state::is_state_op(op), "{op} has a builder and a reason");
            assert!(lowering_of(op).is_none() || STRUCTURAL.contains(op), "{op} lowers and is excused");
        }
        assert_eq!(lowering_of("NoSuchOp"), None);
    }
}
