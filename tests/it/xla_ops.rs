//! Per-op differential tests of the StableHLO lowering table: each case is
//! a small graph under a two-replica `replicate`, run on the simulator and
//! on XLA through the pinned PJRT CPU plugin, and every output and variable
//! copy must agree (|a − b| ≤ 1e-5 + 1e-4·|b|; bf16 and f16 to their
//! precision; integers and bools exactly). Together with the corpus and
//! example tests (`xla_backend`, `xla_corpus`) they cover every builder
//! of the StableHLO lowering table and every optimizer and sparse variable
//! update; `every_builder_has_a_case` checks that.

use crate::support::lowering;
use crate::support::pjrt as support;

use std::collections::BTreeSet;

use lowering::{default_fetches, prepare};
use tpu_rewrite::exec::driver;
use tpu_rewrite::exec::Tensor;
use tpu_rewrite::xla::backend;

/// One case: replicated inputs (name, dtype, shape), the body, what it returns.
struct Case {
    name: &'static str,
    inputs: &'static [(&'static str, &'static str, &'static [usize])],
    /// Ops before the replicate (variables and their initial values).
    setup: &'static str,
    body: &'static str,
    returns: &'static str,
}

const X23: &[(&str, &str, &[usize])] = &[("x", "f32", &[2, 3])];
const XY23: &[(&str, &str, &[usize])] = &[("x", "f32", &[2, 3]), ("y", "f32", &[2, 3])];
const IMG: &[(&str, &str, &[usize])] = &[("x", "f32", &[1, 5, 5, 2])];
const IMG_NCHW: &[(&str, &str, &[usize])] = &[("x", "f32", &[2, 2, 5, 4])];

const fn case(name: &'static str, body: &'static str) -> Case {
    Case { name, inputs: X23, setup: "", body, returns: "%out" }
}

const fn case2(name: &'static str, body: &'static str) -> Case {
    Case { name, inputs: XY23, setup: "", body, returns: "%out" }
}

const fn img(name: &'static str, body: &'static str) -> Case {
    Case { name, inputs: IMG, setup: "", body, returns: "%out" }
}

const fn nchw(name: &'static str, body: &'static str, returns: &'static str) -> Case {
    Case { name, inputs: IMG_NCHW, setup: "", body, returns }
}

/// Elementwise math, activations and their gradients.
const ELEMENTWISE: &[Case] = &[
    case("Floor", "%out = Floor(%x) {T = f32}"),
    case("Ceil", "%out = Ceil(%x) {T = f32}"),
    case("Round", "%h = Const() {dtype = f32, value = tensor(f32, [6]) [0.5, 1.5, 2.5, -0.5, -1.5, 1.4]}\n%out = Round(%h) {T = f32}"),
    case("Sign", "%out = Sign(%x) {T = f32}"),
    case("Erf", "%out = Erf(%x) {T = f32}"),
    case("Erfc", "%out = Erfc(%x) {T = f32}"),
    case("Sin", "%out = Sin(%x) {T = f32}"),
    case("Cos", "%out = Cos(%x) {T = f32}"),
    case("Tan", "%out = Tan(%x) {T = f32}"),
    case("Atan", "%out = Atan(%x) {T = f32}"),
    case("Sinh", "%out = Sinh(%x) {T = f32}"),
    case("Cosh", "%out = Cosh(%x) {T = f32}"),
    case("Asinh", "%out = Asinh(%x) {T = f32}"),
    case("Asin", "%t = Tanh(%x) {T = f32}\n%out = Asin(%t) {T = f32}"),
    case("Acos", "%t = Tanh(%x) {T = f32}\n%out = Acos(%t) {T = f32}"),
    case("Atanh", "%t = Tanh(%x) {T = f32}\n%out = Atanh(%t) {T = f32}"),
    case("Acosh", "%a = Abs(%x) {T = f32}\n%one = Const() {dtype = f32, value = tensor(f32, []) [1.0]}\n%b = AddV2(%a, %one) {T = f32}\n%out = Acosh(%b) {T = f32}"),
    case("Rint", "%h = Const() {dtype = f32, value = tensor(f32, [6]) [0.5, 1.5, 2.5, -0.5, -1.5, 1.4]}\n%out = Rint(%h) {T = f32}"),
    case("Expm1", "%out = Expm1(%x) {T = f32}"),
    case("Log1p", "%a = Abs(%x) {T = f32}\n%out = Log1p(%a) {T = f32}"),
    case("Elu", "%out = Elu(%x) {T = f32}"),
    case("Selu", "%out = Selu(%x) {T = f32}"),
    case("Softplus", "%big = Const() {dtype = f32, value = tensor(f32, [3]) [30.0, -30.0, 0.5]}\n%s = Softplus(%x) {T = f32}\n%b = Softplus(%big) {T = f32}\n%out = Identity(%s) {T = f32}"),
    case("Softsign", "%out = Softsign(%x) {T = f32}"),
    case("Relu6", "%k = Const() {dtype = f32, value = tensor(f32, []) [4.0]}\n%m = Mul(%x, %k) {T = f32}\n%out = Relu6(%m) {T = f32}"),
    case("LeakyRelu", "%out = LeakyRelu(%x) {T = f32, alpha = 0.3}"),
    case("IsFinite", "%z = Const() {dtype = f32, value = tensor(f32, [2, 3]) [0.0, 1.0, 0.0, 2.0, 0.0, 3.0]}\n%d = RealDiv(%x, %z) {T = f32}\n%out = IsFinite(%d) {T = f32}"),
    case("IsInf", "%z = Const() {dtype = f32, value = tensor(f32, [2, 3]) [0.0, 1.0, 0.0, 2.0, 0.0, 3.0]}\n%d = RealDiv(%x, %z) {T = f32}\n%out = IsInf(%d) {T = f32}"),
    case("IsNan", "%z = Const() {dtype = f32, value = tensor(f32, [2, 3]) [0.0, 1.0, 0.0, 2.0, 0.0, 3.0]}\n%d = RealDiv(%z, %z) {T = f32}\n%s = Mul(%d, %x) {T = f32}\n%out = IsNan(%s) {T = f32}"),
    case2("LogicalAnd", "%a = Greater(%x, %y) {T = f32}\n%b = Less(%x, %y) {T = f32}\n%n = LogicalNot(%b)\n%o = LogicalOr(%a, %b)\n%out = LogicalAnd(%n, %o)"),
    case2("Select", "%p = Const() {dtype = bool, value = tensor(bool, [2]) [true, false]}\n%out = Select(%p, %x, %y) {T = f32}"),
    case2("EluGrad", "%e = Elu(%y) {T = f32}\n%out = EluGrad(%x, %e) {T = f32}"),
    case2("SeluGrad", "%e = Selu(%y) {T = f32}\n%out = SeluGrad(%x, %e) {T = f32}"),
    case2("SoftplusGrad", "%out = SoftplusGrad(%x, %y) {T = f32}"),
    case2("SoftsignGrad", "%out = SoftsignGrad(%x, %y) {T = f32}"),
    case2("Relu6Grad", "%k = Const() {dtype = f32, value = tensor(f32, []) [4.0]}\n%m = Mul(%y, %k) {T = f32}\n%out = Relu6Grad(%x, %m) {T = f32}"),
    case2("LeakyReluGrad", "%out = LeakyReluGrad(%x, %y) {T = f32, alpha = 0.1}"),
    case2("SqrtGrad", "%a = Abs(%y) {T = f32}\n%one = Const() {dtype = f32, value = tensor(f32, []) [1.0]}\n%b = AddV2(%a, %one) {T = f32}\n%out = SqrtGrad(%b, %x) {T = f32}"),
    case2("Comparisons", "%a = GreaterEqual(%x, %y) {T = f32}\n%b = LessEqual(%x, %y) {T = f32}\n%c = NotEqual(%x, %y) {T = f32}\n%d = LogicalAnd(%a, %b)\n%e = LogicalOr(%d, %c)\n%out = SelectV2(%e, %x, %y) {T = f32}"),
    case2("Arithmetic", "%a = Abs(%x) {T = f32}\n%one = Const() {dtype = f32, value = tensor(f32, []) [1.0]}\n%b = AddV2(%a, %one) {T = f32}\n%l = Log(%b) {T = f32}\n%s = Sqrt(%b) {T = f32}\n%p = Pow(%b, %y) {T = f32}\n%r = Reciprocal(%b) {T = f32}\n%m = Minimum(%l, %s) {T = f32}\n%d = Div(%p, %r) {T = f32}\n%sg = Sigmoid(%y) {T = f32}\n%g = SigmoidGrad(%sg, %x) {T = f32}\n%i = StopGradient(%d) {T = f32}\n%n = Snapshot(%m) {T = f32}\n%id = IdentityN(%i, %n) {T = [f32, f32]}\n%t = AddN(%id:0, %id:1, %g) {T = f32, N = 3}\n%k = Const() {dtype = i32, value = tensor(i32, [2]) [7, -7]}\n%q = Const() {dtype = i32, value = tensor(i32, [2]) [2, 2]}\n%iq = Div(%k, %q) {T = i32}\n%out = Identity(%t) {T = f32}"),
    case2("FloorDivMod", "%a = FloorDiv(%x, %y) {T = f32}\n%b = FloorMod(%x, %y) {T = f32}\n%out = AddV2(%a, %b) {T = f32}"),
];

/// Reductions, arg max, cumulative sums, casts.
const REDUCE: &[Case] = &[
    case("Max", "%ax = Const() {dtype = i32, value = tensor(i32, [1]) [1]}\n%out = Max(%x, %ax) {T = f32, keep_dims = true}"),
    case("Min", "%ax = Const() {dtype = i32, value = tensor(i32, [1]) [0]}\n%out = Min(%x, %ax) {T = f32}"),
    case("Prod", "%ax = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}\n%out = Prod(%x, %ax) {T = f32}"),
    case("Any", "%z = Const() {dtype = f32, value = tensor(f32, []) [0.5]}\n%g = Greater(%x, %z) {T = f32}\n%ax = Const() {dtype = i32, value = tensor(i32, [1]) [1]}\n%out = Any(%g, %ax)"),
    case("All", "%z = Const() {dtype = f32, value = tensor(f32, []) [-1.5]}\n%g = Greater(%x, %z) {T = f32}\n%ax = Const() {dtype = i32, value = tensor(i32, [1]) [1]}\n%out = All(%g, %ax)"),
    case("Mean", "%ax = Const() {dtype = i32, value = tensor(i32, [1]) [-1]}\n%out = Mean(%x, %ax) {T = f32, keep_dims = true}"),
    case("ArgMax", "%ax = Const() {dtype = i32, value = tensor(i32, []) [1]}\n%out = ArgMax(%x, %ax) {T = f32, output_type = i64}"),
    case("ArgMin", "%ax = Const() {dtype = i32, value = tensor(i32, []) [0]}\n%out = ArgMin(%x, %ax) {T = f32, output_type = i32}"),
    case("Cumsum", "%ax = Const() {dtype = i32, value = tensor(i32, []) [1]}\n%out = Cumsum(%x, %ax) {T = f32}"),
    case("CumsumExclusiveReverse", "%ax = Const() {dtype = i32, value = tensor(i32, []) [1]}\n%out = Cumsum(%x, %ax) {T = f32, exclusive = true, reverse = true}"),
    case("CollectiveAllReduce", "%out = CollectiveAllReduce(%x) {T = f32, group = \"g\", group_size = 2, instance = 0, reduce_op = \"MEAN\"}"),
    case("CollectiveBroadcast", "%out = CollectiveBroadcast(%x) {T = f32, group = \"b\", group_size = 2, instance = 1, source = 1}"),
    case("AllGather", "%g = Const() {dtype = i32, value = tensor(i32, [1, 2]) [1, 0]}\n%out = AllGather(%x, %g) {T = f32}"),
    case("CollectiveAllGather", "%i = Cast(%x) {SrcT = f32, DstT = i32}\n%out = CollectiveAllGather(%i) {T = i32, group = \"a\", group_size = 2, instance = 2}"),
    case("CumprodExclusive", "%ax = Const() {dtype = i32, value = tensor(i32, []) [1]}\n%a = Cumprod(%x, %ax) {T = f32, exclusive = true}\n%b = Cumprod(%x, %ax) {T = f32, reverse = true}\n%out = AddV2(%a, %b) {T = f32}"),
    case("L2Loss", "%out = L2Loss(%x) {T = f32}"),
    case("CastBf16", "%b = Cast(%x) {SrcT = f32, DstT = bf16}\n%s = Mul(%b, %b) {T = bf16}\n%out = Cast(%s) {SrcT = bf16, DstT = f32}"),
    Case { name: "CastBf16Rounding", inputs: X23, setup: "", body: "%k = Const() {dtype = f32, value = tensor(f32, [2, 3]) [1.005859375, 1.00390625, 1.01171875, -1.005859375, 3.0, 0.1]}\n%zero = Const() {dtype = f32, value = tensor(f32, []) [0.0]}\n%xz = Mul(%x, %zero) {T = f32}\n%kx = AddV2(%k, %xz) {T = f32}\n%b = Cast(%kx) {SrcT = f32, DstT = bf16}\n%w = Cast(%x) {SrcT = f32, DstT = bf16}\n%m = MatMul(%w, %w) {T = bf16, transpose_b = true}\n%r = Cast(%m) {SrcT = bf16, DstT = f32}\n%out = Cast(%b) {SrcT = bf16, DstT = f32}", returns: "%out, %r" },
    case("CastF16", "%b = Cast(%x) {SrcT = f32, DstT = f16}\n%out = Add(%b, %b) {T = f16}"),
    case("CastI8U8", "%k = Const() {dtype = f32, value = tensor(f32, []) [10.0]}\n%m = Mul(%x, %k) {T = f32}\n%a = Cast(%m) {SrcT = f32, DstT = i8}\n%b = Cast(%a) {SrcT = i8, DstT = i64}\n%u = Abs(%m) {T = f32}\n%c = Cast(%u) {SrcT = f32, DstT = u8}\n%d = Cast(%c) {SrcT = u8, DstT = i64}\n%out = Add(%b, %d) {T = i64}"),
    case("CastBool", "%b = Cast(%x) {SrcT = f32, DstT = bool}\n%out = Cast(%b) {SrcT = bool, DstT = i32}"),
];

/// Shapes: concatenation, slices, splits, padding.
const SHAPE: &[Case] = &[
    case2("ConcatV2", "%ax = Const() {dtype = i32, value = tensor(i32, []) [1]}\n%out = ConcatV2(%x, %y, %ax) {T = f32, N = 2}"),
    case("Slice", "%b = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}\n%s = Const() {dtype = i32, value = tensor(i32, [2]) [-1, 2]}\n%out = Slice(%x, %b, %s) {T = f32}"),
    case("StridedSlice", "%b = Const() {dtype = i32, value = tensor(i32, [2]) [1, -1]}\n%e = Const() {dtype = i32, value = tensor(i32, [2]) [2, 0]}\n%s = Const() {dtype = i32, value = tensor(i32, [2]) [1, -1]}\n%out = StridedSlice(%x, %b, %e, %s) {T = f32, begin_mask = 0, end_mask = 2, ellipsis_mask = 0, new_axis_mask = 0, shrink_axis_mask = 1}"),
    case("StridedSliceNewAxis", "%b = Const() {dtype = i32, value = tensor(i32, [3]) [0, 0, 1]}\n%e = Const() {dtype = i32, value = tensor(i32, [3]) [0, 0, 3]}\n%s = Const() {dtype = i32, value = tensor(i32, [3]) [1, 1, 2]}\n%out = StridedSlice(%x, %b, %e, %s) {T = f32, begin_mask = 1, end_mask = 1, ellipsis_mask = 0, new_axis_mask = 2, shrink_axis_mask = 0}"),
    case("StridedSliceGrad", "%sh = Const() {dtype = i32, value = tensor(i32, [2]) [2, 3]}\n%b = Const() {dtype = i32, value = tensor(i32, [2]) [0, 0]}\n%e = Const() {dtype = i32, value = tensor(i32, [2]) [2, 3]}\n%s = Const() {dtype = i32, value = tensor(i32, [2]) [1, 2]}\n%dy = Const() {dtype = f32, value = tensor(f32, [2, 2]) [1.0, 2.0, 3.0, 4.0]}\n%g = StridedSliceGrad(%sh, %b, %e, %s, %dy) {T = f32, Index = i32, begin_mask = 0, end_mask = 0, ellipsis_mask = 0, new_axis_mask = 0, shrink_axis_mask = 0}\n%out = Mul(%g, %x) {T = f32}"),
    Case { name: "Split", inputs: X23, setup: "", body: "%ax = Const() {dtype = i32, value = tensor(i32, []) [0]}\n%p = Split(%ax, %x) {T = f32, num_split = 2}", returns: "%p:0, %p:1" },
    Case { name: "SplitV", inputs: X23, setup: "", body: "%sz = Const() {dtype = i32, value = tensor(i32, [2]) [1, -1]}\n%ax = Const() {dtype = i32, value = tensor(i32, []) [1]}\n%p = SplitV(%x, %sz, %ax) {T = f32, num_split = 2, Tlen = i32}", returns: "%p:0, %p:1" },
    Case { name: "Unpack", inputs: X23, setup: "", body: "%p = Unpack(%x) {T = f32, num = 3, axis = 1}", returns: "%p:0, %p:2" },
    case("TransposeBroadcastTo", "%p = Const() {dtype = i32, value = tensor(i32, [2]) [1, 0]}\n%t = Transpose(%x, %p) {T = f32, Tperm = i32}\n%s = Const() {dtype = i32, value = tensor(i32, [3]) [2, 3, 2]}\n%out = BroadcastTo(%t, %s) {T = f32, Tidx = i32}"),
    case2("BatchMatMul", "%p = Const() {dtype = i32, value = tensor(i32, [2]) [1, 0]}\n%t = Transpose(%y, %p) {T = f32}\n%a = Const() {dtype = i32, value = tensor(i32, [3]) [1, 2, 3]}\n%x3 = Reshape(%x, %a) {T = f32}\n%b = BatchMatMul(%x3, %t) {T = f32}\n%c = BatchMatMulV2(%x3, %t) {T = f32, adj_x = false, adj_y = false}\n%d = BatchMatMulV3(%x3, %t) {Ta = f32, Tb = f32, Tout = f32}\n%e = Einsum(%x, %y) {T = f32, N = 2, equation = \"ij,kj->ik\"}\n%s = AddV2(%b, %c) {T = f32}\n%u = AddV2(%s, %d) {T = f32}\n%out = AddV2(%u, %e) {T = f32}"),
    case2("Pack", "%out = Pack(%x, %y) {T = f32, N = 2, axis = 1}"),
    case("Pad", "%p = Const() {dtype = i32, value = tensor(i32, [2, 2]) [1, 0, 0, 2]}\n%out = Pad(%x, %p) {T = f32}"),
    case("PadV2", "%p = Const() {dtype = i32, value = tensor(i32, [2, 2]) [0, 1, 2, 0]}\n%v = Const() {dtype = f32, value = tensor(f32, []) [7.0]}\n%out = PadV2(%x, %p, %v) {T = f32}"),
    case("ExpandDimsSqueeze", "%ax = Const() {dtype = i32, value = tensor(i32, []) [1]}\n%e = ExpandDims(%x, %ax) {T = f32}\n%t = Tanh(%e) {T = f32}\n%out = Squeeze(%t) {T = f32, squeeze_dims = [1]}"),
    case("OneHot", "%i = Const() {dtype = i32, value = tensor(i32, [3]) [0, 2, 5]}\n%d = Const() {dtype = i32, value = tensor(i32, []) [3]}\n%on = Const() {dtype = f32, value = tensor(f32, []) [1.5]}\n%off = Const() {dtype = f32, value = tensor(f32, []) [-1.0]}\n%o = OneHot(%i, %d, %on, %off) {T = f32, axis = 0}\n%out = MatMul(%x, %o) {T = f32}"),
];

/// Softmax, losses, bias, batch norm.
const NN: &[Case] = &[
    case("LogSoftmax", "%out = LogSoftmax(%x) {T = f32}"),
    Case { name: "SoftmaxCrossEntropyWithLogits", inputs: XY23, setup: "", body: "%p = Softmax(%y) {T = f32}\n%l = SoftmaxCrossEntropyWithLogits(%x, %p) {T = f32}", returns: "%l:0, %l:1" },
    Case { name: "SparseSoftmaxCrossEntropyWithLogits", inputs: X23, setup: "", body: "%i = Const() {dtype = i32, value = tensor(i32, [2]) [2, 0]}\n%l = SparseSoftmaxCrossEntropyWithLogits(%x, %i) {T = f32, Tlabels = i32}", returns: "%l:0, %l:1" },
    Case {
        name: "FusedBatchNormV3",
        inputs: IMG,
        setup: "",
        body: "%sc = Const() {dtype = f32, value = tensor(f32, [2]) [1.5, 0.5]}\n%of = Const() {dtype = f32, value = tensor(f32, [2]) [0.1, -0.2]}\n%e = Const() {dtype = f32, value = tensor(f32, [0]) []}\n%bn = FusedBatchNormV3(%x, %sc, %of, %e, %e) {T = f32, U = f32, epsilon = 0.001, is_training = true, data_format = \"NHWC\"}\n%g = FusedBatchNormGradV3(%x, %x, %sc, %bn:3, %bn:4, %bn:5) {T = f32, U = f32, epsilon = 0.001, is_training = true, data_format = \"NHWC\"}",
        returns: "%bn:0, %bn:1, %bn:2, %g:0, %g:1, %g:2",
    },
    Case {
        name: "FusedBatchNormV1V2",
        inputs: IMG,
        setup: "",
        body: "%sc = Const() {dtype = f32, value = tensor(f32, [2]) [1.5, 0.5]}\n%of = Const() {dtype = f32, value = tensor(f32, [2]) [0.1, -0.2]}\n%e = Const() {dtype = f32, value = tensor(f32, [0]) []}\n%a = FusedBatchNorm(%x, %sc, %of, %e, %e) {T = f32, epsilon = 0.001, is_training = true}\n%b = FusedBatchNormV2(%x, %sc, %of, %e, %e) {T = f32, U = f32, epsilon = 0.01, is_training = true}\n%g = FusedBatchNormGrad(%a:0, %x, %sc, %a:3, %a:4) {T = f32, epsilon = 0.001, is_training = true}\n%h = FusedBatchNormGradV2(%b:0, %x, %sc, %b:3, %b:4) {T = f32, U = f32, epsilon = 0.01, is_training = true}",
        returns: "%a:0, %a:2, %b:0, %g:0, %g:1, %h:0, %h:2",
    },
    nchw("FusedBatchNormV3NCHW", "%sc = Const() {dtype = f32, value = tensor(f32, [2]) [1.5, 0.5]}\n%of = Const() {dtype = f32, value = tensor(f32, [2]) [0.1, -0.2]}\n%e = Const() {dtype = f32, value = tensor(f32, [0]) []}\n%bn = FusedBatchNormV3(%x, %sc, %of, %e, %e) {T = f32, U = f32, epsilon = 0.001, is_training = true, data_format = \"NCHW\"}\n%t = Tanh(%x) {T = f32}\n%g = FusedBatchNormGradV3(%t, %x, %sc, %bn:3, %bn:4, %bn:5) {T = f32, U = f32, epsilon = 0.001, is_training = true, data_format = \"NCHW\"}\n%m = Const() {dtype = f32, value = tensor(f32, [2]) [0.3, -0.1]}\n%v = Const() {dtype = f32, value = tensor(f32, [2]) [2.0, 0.5]}\n%inf = FusedBatchNormV3(%x, %sc, %of, %m, %v) {T = f32, U = f32, epsilon = 0.001, is_training = false, data_format = \"NCHW\"}", "%bn:0, %bn:1, %bn:2, %g:0, %g:1, %g:2, %inf:0"),
    Case {
        name: "FusedBatchNormInference",
        inputs: IMG,
        setup: "",
        body: "%sc = Const() {dtype = f32, value = tensor(f32, [2]) [1.5, 0.5]}\n%of = Const() {dtype = f32, value = tensor(f32, [2]) [0.1, -0.2]}\n%m = Const() {dtype = f32, value = tensor(f32, [2]) [0.3, -0.1]}\n%v = Const() {dtype = f32, value = tensor(f32, [2]) [2.0, 0.5]}\n%bn = FusedBatchNormV3(%x, %sc, %of, %m, %v) {T = f32, U = f32, epsilon = 0.001, is_training = false, data_format = \"NHWC\"}",
        returns: "%bn:0",
    },
];

/// Gathers and scatters.
const GATHER: &[Case] = &[
    case("GatherV2", "%i = Const() {dtype = i32, value = tensor(i32, [2, 2]) [2, 0, 1, 1]}\n%ax = Const() {dtype = i32, value = tensor(i32, []) [1]}\n%out = GatherV2(%x, %i, %ax) {Tparams = f32, Tindices = i32, Taxis = i32, batch_dims = 0}"),
    Case { name: "GatherV2BatchDims", inputs: &[("x", "f32", &[2, 3, 4])], setup: "", body: "%i = Const() {dtype = i32, value = tensor(i32, [2, 2]) [2, 0, 1, 3]}\n%ax = Const() {dtype = i32, value = tensor(i32, []) [2]}\n%a = GatherV2(%x, %i, %ax) {Tparams = f32, Tindices = i32, Taxis = i32, batch_dims = 1}\n%j = Const() {dtype = i64, value = tensor(i64, [2, 3, 1]) [1, 0, 3, 2, 2, 0]}\n%b = GatherV2(%x, %j, %ax) {Tparams = f32, Tindices = i64, Taxis = i32, batch_dims = -1}\n%k = Const() {dtype = i32, value = tensor(i32, [2, 2]) [1, 0, 2, 2]}\n%one = Const() {dtype = i32, value = tensor(i32, []) [1]}\n%c = GatherV2(%x, %k, %one) {Tparams = f32, Tindices = i32, Taxis = i32, batch_dims = 1}", returns: "%a, %b, %c" },
    case("GatherNd", "%i = Const() {dtype = i32, value = tensor(i32, [3, 2]) [1, 2, 0, 0, 1, 0]}\n%out = GatherNd(%x, %i) {Tparams = f32, Tindices = i32}"),
    case("ScatterNd", "%i = Const() {dtype = i32, value = tensor(i32, [2, 1]) [3, 3]}\n%sh = Const() {dtype = i32, value = tensor(i32, [2]) [4, 3]}\n%out = ScatterNd(%i, %x, %sh) {T = f32, Tindices = i32}"),
    case("TensorScatterUpdate", "%i = Const() {dtype = i32, value = tensor(i32, [1, 2]) [1, 2]}\n%u = Const() {dtype = f32, value = tensor(f32, [1]) [9.0]}\n%out = TensorScatterUpdate(%x, %i, %u) {T = f32, Tindices = i32}"),
    case("TensorScatterAdd", "%i = Const() {dtype = i32, value = tensor(i32, [2, 1]) [1, 1]}\n%u = Const() {dtype = f32, value = tensor(f32, [2, 3]) [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}\n%out = TensorScatterAdd(%x, %i, %u) {T = f32, Tindices = i32}"),
    case("UnsortedSegmentSum", "%i = Const() {dtype = i32, value = tensor(i32, [2]) [2, 2]}\n%n = Const() {dtype = i32, value = tensor(i32, []) [3]}\n%out = UnsortedSegmentSum(%x, %i, %n) {T = f32, Tindices = i32, Tnumsegments = i32}"),
    // TensorFlow runs the sorted V2 segment ops only under XLA, so they have no op case with its CPU numbers.
    Case { name: "SegmentV2", inputs: X23, setup: "", body: "%i = Const() {dtype = i32, value = tensor(i32, [2]) [0, 2]}\n%n = Const() {dtype = i32, value = tensor(i32, []) [3]}\n%a = SegmentSumV2(%x, %i, %n) {T = f32, Tindices = i32, Tnumsegments = i32}\n%b = SegmentProdV2(%x, %i, %n) {T = f32, Tindices = i32, Tnumsegments = i32}\n%j = Const() {dtype = i64, value = tensor(i64, [2]) [0, 1]}\n%m = Const() {dtype = i64, value = tensor(i64, []) [2]}\n%c = SegmentMaxV2(%x, %j, %m) {T = f32, Tindices = i64, Tnumsegments = i64}\n%d = SegmentMinV2(%x, %j, %m) {T = f32, Tindices = i64, Tnumsegments = i64}", returns: "%a, %b, %c, %d" },
];

/// Convolutions and pools.
const CONV: &[Case] = &[
    img("Conv2DSame", "%w = Const() {dtype = f32, value = tensor(f32, [3, 3, 2, 3]) [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 0.15, 0.25, -0.35, 0.45, -0.55, 0.65, 0.75, 0.85, -0.95, 0.12, -0.22, 0.32, 0.42, -0.52, 0.62, 0.72, -0.82, 0.92, 0.13, 0.23, -0.33, 0.43, -0.53, 0.63, 0.73, 0.83, -0.93, 0.14, -0.24, 0.34, 0.44, -0.54, 0.64, 0.74, -0.84, 0.94, 0.16, 0.26, -0.36, 0.46, -0.56, 0.66, 0.76, 0.86, -0.96]}\n%y = Conv2D(%x, %w) {T = f32, strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\", dilations = [1, 1, 1, 1]}\n%sizes = Const() {dtype = i32, value = tensor(i32, [4]) [1, 5, 5, 2]}\n%dx = Conv2DBackpropInput(%sizes, %w, %y) {T = f32, strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\", dilations = [1, 1, 1, 1]}\n%fs = Const() {dtype = i32, value = tensor(i32, [4]) [3, 3, 2, 3]}\n%dw = Conv2DBackpropFilter(%x, %fs, %y) {T = f32, strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\", dilations = [1, 1, 1, 1]}\n%r = Reshape(%dw, %sizes2) {T = f32}\n%sizes2 = Const() {dtype = i32, value = tensor(i32, [1]) [-1]}\n%r2 = Reshape(%dx, %sizes2) {T = f32}\n%ax = Const() {dtype = i32, value = tensor(i32, []) [0]}\n%out = ConcatV2(%r, %r2, %ax) {T = f32, N = 2}"),
    img("Conv2DValidDilated", "%w = Const() {dtype = f32, value = tensor(f32, [2, 2, 2, 1]) [0.5, -1.0, 0.25, 2.0, -0.5, 1.5, 0.75, -0.25]}\n%y = Conv2D(%x, %w) {T = f32, strides = [1, 1, 1, 1], padding = \"VALID\", data_format = \"NHWC\", dilations = [1, 2, 2, 1]}\n%sizes = Const() {dtype = i32, value = tensor(i32, [4]) [1, 5, 5, 2]}\n%dx = Conv2DBackpropInput(%sizes, %w, %y) {T = f32, strides = [1, 1, 1, 1], padding = \"VALID\", data_format = \"NHWC\", dilations = [1, 2, 2, 1]}\n%fs = Const() {dtype = i32, value = tensor(i32, [4]) [2, 2, 2, 1]}\n%dw = Conv2DBackpropFilter(%x, %fs, %y) {T = f32, strides = [1, 1, 1, 1], padding = \"VALID\", data_format = \"NHWC\", dilations = [1, 2, 2, 1]}\n%m = Const() {dtype = i32, value = tensor(i32, [1]) [-1]}\n%a = Reshape(%dx, %m) {T = f32}\n%b = Reshape(%dw, %m) {T = f32}\n%ax = Const() {dtype = i32, value = tensor(i32, []) [0]}\n%out = ConcatV2(%a, %b, %ax) {T = f32, N = 2}"),
    img("Depthwise", "%w = Const() {dtype = f32, value = tensor(f32, [2, 2, 2, 2]) [0.5, -1.0, 0.25, 2.0, -0.5, 1.5, 0.75, -0.25, 0.1, 0.2, -0.3, 0.4, 0.6, -0.7, 0.8, 0.9]}\n%y = DepthwiseConv2dNative(%x, %w) {T = f32, strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\", dilations = [1, 1, 1, 1]}\n%sizes = Const() {dtype = i32, value = tensor(i32, [4]) [1, 5, 5, 2]}\n%dx = DepthwiseConv2dNativeBackpropInput(%sizes, %w, %y) {T = f32, strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\", dilations = [1, 1, 1, 1]}\n%fs = Const() {dtype = i32, value = tensor(i32, [4]) [2, 2, 2, 2]}\n%dw = DepthwiseConv2dNativeBackpropFilter(%x, %fs, %y) {T = f32, strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\", dilations = [1, 1, 1, 1]}\n%m = Const() {dtype = i32, value = tensor(i32, [1]) [-1]}\n%a = Reshape(%dx, %m) {T = f32}\n%b = Reshape(%dw, %m) {T = f32}\n%ax = Const() {dtype = i32, value = tensor(i32, []) [0]}\n%out = ConcatV2(%a, %b, %ax) {T = f32, N = 2}"),
    img("MaxPool", "%y = MaxPool(%x) {T = f32, ksize = [1, 3, 3, 1], strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\"}\n%out = MaxPoolGrad(%x, %y, %y) {T = f32, ksize = [1, 3, 3, 1], strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\"}"),
    img("MaxPoolValid", "%y = MaxPool(%x) {T = f32, ksize = [1, 2, 2, 1], strides = [1, 2, 2, 1], padding = \"VALID\", data_format = \"NHWC\"}\n%out = MaxPoolGrad(%x, %y, %y) {T = f32, ksize = [1, 2, 2, 1], strides = [1, 2, 2, 1], padding = \"VALID\", data_format = \"NHWC\"}"),
    img("AvgPool", "%y = AvgPool(%x) {T = f32, ksize = [1, 3, 3, 1], strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\"}\n%sizes = Const() {dtype = i32, value = tensor(i32, [4]) [1, 5, 5, 2]}\n%out = AvgPoolGrad(%sizes, %y) {T = f32, ksize = [1, 3, 3, 1], strides = [1, 2, 2, 1], padding = \"SAME\", data_format = \"NHWC\"}"),
    img("AvgPoolValid", "%y = AvgPool(%x) {T = f32, ksize = [1, 2, 2, 1], strides = [1, 2, 2, 1], padding = \"VALID\", data_format = \"NHWC\"}\n%sizes = Const() {dtype = i32, value = tensor(i32, [4]) [1, 5, 5, 2]}\n%out = AvgPoolGrad(%sizes, %y) {T = f32, ksize = [1, 2, 2, 1], strides = [1, 2, 2, 1], padding = \"VALID\", data_format = \"NHWC\"}"),
    nchw("Conv2DNCHW", "%w = Const() {dtype = f32, value = tensor(f32, [3, 2, 2, 3]) [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 0.15, 0.25, -0.35, 0.45, -0.55, 0.65, 0.75, 0.85, -0.95, 0.12, -0.22, 0.32, 0.42, -0.52, 0.62, 0.72, -0.82, 0.92, 0.13, 0.23, -0.33, 0.43, -0.53, 0.63, 0.73, 0.83, -0.93]}\n%y = Conv2D(%x, %w) {T = f32, strides = [1, 1, 2, 1], padding = \"SAME\", data_format = \"NCHW\", dilations = [1, 1, 1, 1]}\n%sizes = Const() {dtype = i32, value = tensor(i32, [4]) [2, 2, 5, 4]}\n%dx = Conv2DBackpropInput(%sizes, %w, %y) {T = f32, strides = [1, 1, 2, 1], padding = \"SAME\", data_format = \"NCHW\", dilations = [1, 1, 1, 1]}\n%fs = Const() {dtype = i32, value = tensor(i32, [4]) [3, 2, 2, 3]}\n%dw = Conv2DBackpropFilter(%x, %fs, %y) {T = f32, strides = [1, 1, 2, 1], padding = \"SAME\", data_format = \"NCHW\", dilations = [1, 1, 1, 1]}\n%v = Conv2D(%x, %w) {T = f32, strides = [1, 1, 1, 1], padding = \"VALID\", data_format = \"NCHW\", dilations = [1, 1, 1, 2]}", "%y, %dx, %dw, %v"),
    nchw("PoolsNCHW", "%m = MaxPool(%x) {T = f32, ksize = [1, 1, 3, 2], strides = [1, 1, 2, 2], padding = \"SAME\", data_format = \"NCHW\"}\n%mg = MaxPoolGrad(%x, %m, %m) {T = f32, ksize = [1, 1, 3, 2], strides = [1, 1, 2, 2], padding = \"SAME\", data_format = \"NCHW\"}\n%a = AvgPool(%x) {T = f32, ksize = [1, 1, 2, 2], strides = [1, 1, 2, 1], padding = \"VALID\", data_format = \"NCHW\"}\n%sizes = Const() {dtype = i32, value = tensor(i32, [4]) [2, 2, 5, 4]}\n%ag = AvgPoolGrad(%sizes, %a) {T = f32, ksize = [1, 1, 2, 2], strides = [1, 1, 2, 1], padding = \"VALID\", data_format = \"NCHW\"}", "%m, %mg, %a, %ag"),
];

const VAR_SETUP: &str = "%w = VarHandleOp() {dtype = f32, shape = shape[2, 3], shared_name = \"w\"}
  %w_init_value = Const() {dtype = f32, value = tensor(f32, [2, 3]) [0.5, -1.0, 1.5, 2.0, -0.5, 0.25]}
  %w_init = AssignVariableOp(%w, %w_init_value) {dtype = f32}
  %m = VarHandleOp() {dtype = f32, shape = shape[2, 3], shared_name = \"m\"}
  %m_init_value = Const() {dtype = f32, value = tensor(f32, [2, 3]) [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}
  %m_init = AssignVariableOp(%m, %m_init_value) {dtype = f32}
  %v = VarHandleOp() {dtype = f32, shape = shape[2, 3], shared_name = \"v\"}
  %v_init_value = Const() {dtype = f32, value = tensor(f32, [2, 3]) [0.2, 0.1, 0.3, 0.5, 0.4, 0.6]}
  %v_init = AssignVariableOp(%v, %v_init_value) {dtype = f32}";

const fn var(name: &'static str, body: &'static str) -> Case {
    Case { name, inputs: X23, setup: VAR_SETUP, body, returns: "%out" }
}

/// Optimizer updates and sparse variable ops (the emitter's `state` builders).
const STATE: &[Case] = &[
    var("ResourceApplyGradientDescent", "%lr = Const() {dtype = f32, value = tensor(f32, []) [0.1]}\n%a = ResourceApplyGradientDescent(%w, %lr, %x) {T = f32}\n%out = ReadVariableOp(%w, ^%a) {dtype = f32}"),
    var("ResourceApplyMomentum", "%lr = Const() {dtype = f32, value = tensor(f32, []) [0.1]}\n%mo = Const() {dtype = f32, value = tensor(f32, []) [0.9]}\n%a = ResourceApplyMomentum(%w, %m, %lr, %x, %mo) {T = f32, use_nesterov = true}\n%out = ReadVariableOp(%w, ^%a) {dtype = f32}"),
    var("ResourceApplyKerasMomentum", "%lr = Const() {dtype = f32, value = tensor(f32, []) [0.1]}\n%mo = Const() {dtype = f32, value = tensor(f32, []) [0.9]}\n%a = ResourceApplyKerasMomentum(%w, %m, %lr, %x, %mo) {T = f32}\n%out = ReadVariableOp(%w, ^%a) {dtype = f32}"),
    var("ResourceApplyAdagrad", "%lr = Const() {dtype = f32, value = tensor(f32, []) [0.1]}\n%a = ResourceApplyAdagrad(%w, %m, %lr, %x) {T = f32}\n%out = ReadVariableOp(%w, ^%a) {dtype = f32}"),
    var("ResourceApplyAdagradV2", "%lr = Const() {dtype = f32, value = tensor(f32, []) [0.1]}\n%e = Const() {dtype = f32, value = tensor(f32, []) [0.01]}\n%a = ResourceApplyAdagradV2(%w, %m, %lr, %e, %x) {T = f32}\n%out = ReadVariableOp(%w, ^%a) {dtype = f32}"),
    var("ResourceApplyAdam", "%b1p = Const() {dtype = f32, value = tensor(f32, []) [0.9]}\n%b2p = Const() {dtype = f32, value = tensor(f32, []) [0.999]}\n%lr = Const() {dtype = f32, value = tensor(f32, []) [0.01]}\n%b1 = Const() {dtype = f32, value = tensor(f32, []) [0.9]}\n%b2 = Const() {dtype = f32, value = tensor(f32, []) [0.999]}\n%e = Const() {dtype = f32, value = tensor(f32, []) [0.0000001]}\n%a = ResourceApplyAdam(%w, %m, %v, %b1p, %b2p, %lr, %b1, %b2, %e, %x) {T = f32}\n%out = ReadVariableOp(%w, ^%a) {dtype = f32}"),
    var("ResourceApplyFtrlV2", "%lr = Const() {dtype = f32, value = tensor(f32, []) [0.1]}\n%l1 = Const() {dtype = f32, value = tensor(f32, []) [0.01]}\n%l2 = Const() {dtype = f32, value = tensor(f32, []) [0.02]}\n%sh = Const() {dtype = f32, value = tensor(f32, []) [0.05]}\n%lp = Const() {dtype = f32, value = tensor(f32, []) [-0.5]}\n%a = ResourceApplyFtrlV2(%w, %m, %v, %x, %lr, %l1, %l2, %sh, %lp) {T = f32, multiply_linear_by_lr = false}\n%out = ReadVariableOp(%w, ^%a) {dtype = f32}"),
    var("ResourceApplyRMSProp", "%lr = Const() {dtype = f32, value = tensor(f32, []) [0.01]}\n%rho = Const() {dtype = f32, value = tensor(f32, []) [0.9]}\n%mo = Const() {dtype = f32, value = tensor(f32, []) [0.5]}\n%e = Const() {dtype = f32, value = tensor(f32, []) [0.001]}\n%a = ResourceApplyRMSProp(%w, %m, %v, %lr, %rho, %mo, %e, %x) {T = f32}\n%out = ReadVariableOp(%w, ^%a) {dtype = f32}"),
    var("ResourceGatherBatched", "%i = Const() {dtype = i32, value = tensor(i32, [2, 2]) [2, 0, 1, 1]}\n%out = ResourceGather(%w, %i) {dtype = f32, Tindices = i32, batch_dims = 1}"),
    var("ResourceGatherScatter", "%i = Const() {dtype = i32, value = tensor(i32, [3]) [1, 0, 1]}\n%g = ResourceGather(%w, %i) {dtype = f32, Tindices = i32}\n%j = Const() {dtype = i32, value = tensor(i32, [2]) [1, 1]}\n%a = ResourceScatterAdd(%m, %j, %x) {dtype = f32, Tindices = i32}\n%k = Const() {dtype = i32, value = tensor(i32, [1]) [0]}\n%u = Const() {dtype = f32, value = tensor(f32, [1, 3]) [7.0, 8.0, 9.0]}\n%b = ResourceScatterSub(%v, %k, %u) {dtype = f32, Tindices = i32}\n%c = ResourceScatterUpdate(%w, %k, %u, ^%g) {dtype = f32, Tindices = i32}\n%out = Identity(%g) {T = f32}"),
];

/// The text of a case under a `replicate` of `replicas`.
fn source(case: &Case, replicas: usize) -> String {
    let mut text = String::from("graph @main {\n");
    let mut bindings = Vec::new();
    for (name, dtype, shape) in case.inputs {
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        let mut names = Vec::new();
        for r in 0..replicas {
            text.push_str(&format!(
                "  %{name}{r} = Placeholder() {{dtype = {dtype}, shape = shape[{}]}}\n",
                dims.join(", ")
            ));
            names.push(format!("%{name}{r}"));
        }
        bindings.push(format!("%{name} = [{}]", names.join(", ")));
    }
    if !case.setup.is_empty() {
        text.push_str(&format!("  {}\n", case.setup));
    }
    text.push_str(&format!("  replicate (num_replicas = {replicas}) ({}) {{\n", bindings.join(", ")));
    for line in case.body.lines() {
        text.push_str(&format!("    {line}\n"));
    }
    text.push_str(&format!("    return {}\n  }}\n}}\n", case.returns));
    text
}

/// Why `got` (PJRT) differs from `want` (simulator), if it does.
fn differs(got: &Tensor, want: &Tensor) -> Option<String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Some(format!("{} {:?} vs {} {:?}", got.dtype(), got.shape(), want.dtype(), want.shape()));
    }
    let ((g, tol), (w, _)) = (support::values(got), support::values(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let same_special = (a.is_nan() && b.is_nan()) || (a.is_infinite() && a == b);
        if !same_special && (a - b).abs() > 1e-5 + tol * b.abs() {
            return Some(format!("[{i}]: pjrt {a} vs sim {b}"));
        }
    }
    None
}

/// Runs a case on both backends; `Err` says what differed.
fn run(case: &Case, replicas: usize) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join(format!("{}.opg", case.name));
    std::fs::write(&path, source(case, replicas)).map_err(|e| e.to_string())?;
    let path = path.to_str().ok_or("path")?.to_string();
    let (tagged, lowered) = prepare(&path, &format!("1x{replicas}"), 1);
    let graph = &tagged.graphs[0];
    let feeds = support::synthetic_feeds(graph);
    let fetches = default_fetches(&lowered.module);
    let sim = driver::run(&lowered.module, &feeds, &fetches, &driver::RunConfig::default(), &mut |_, _| {})
        .map_err(|e| format!("the simulator failed: {e}"))?;
    let config = support::one_step(&feeds, None);
    let pjrt = backend::run(graph, &lowered.assignment, &config).map_err(|e| format!("pjrt failed: {e:?}"))?.run;
    if sim.fetched.is_empty() || sim.fetched.len() != pjrt.fetched.len() {
        return Err(format!("{} simulator fetches, {} from pjrt", sim.fetched.len(), pjrt.fetched.len()));
    }
    for (name, want) in &sim.fetched {
        let got = pjrt.fetched.iter().find(|(n, _)| n == name).ok_or_else(|| format!("pjrt has no {name}"))?;
        if let Some(d) = differs(&got.1, want) {
            return Err(format!("{name}: {d}"));
        }
    }
    for (name, copies) in &sim.mirrors {
        let got = pjrt.mirrors.get(name).ok_or_else(|| format!("pjrt has no variable {name}"))?;
        for (r, (g, w)) in got.iter().zip(copies).enumerate() {
            if let Some(d) = differs(g, w) {
                return Err(format!("variable {name} replica {r}: {d}"));
            }
        }
    }
    Ok(())
}

/// Runs every case of a family and fails listing each case that differs.
fn family(cases: &[Case]) {
    let failures: Vec<String> =
        cases.iter().filter_map(|c| run(c, 2).err().map(|e| format!("{}: {e}", c.name))).collect();
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn elementwise_ops_match_the_simulator() {
    family(ELEMENTWISE);
}

#[test]
fn reductions_and_casts_match_the_simulator() {
    family(REDUCE);
}

#[test]
fn shape_ops_match_the_simulator() {
    family(SHAPE);
}

#[test]
fn nn_ops_match_the_simulator() {
    family(NN);
}

#[test]
fn gathers_and_scatters_match_the_simulator() {
    family(GATHER);
}

#[test]
fn convolutions_and_pools_match_the_simulator() {
    family(CONV);
}

#[test]
fn optimizer_and_sparse_variable_updates_match_the_simulator() {
    family(STATE);
}

#[test]
fn broadcast_by_collective_permute_matches_for_every_replica_count() {
    let case = Case { name: "Broadcast", inputs: X23, setup: "", body: "%out = Broadcast(%x)", returns: "%out" };
    for replicas in [2, 3, 4, 5, 8] {
        run(&case, replicas).unwrap_or_else(|e| panic!("{replicas} replicas: {e}"));
    }
    let text = tpu_rewrite_lowered_text(&case, 8);
    assert_eq!(text.matches("stablehlo.collective_permute").count(), 3, "log2(8) rounds");
    assert!(!text.contains("stablehlo.all_reduce"), "broadcast is no longer an all-reduce");
}

/// `lower --format stablehlo` text of a case.
fn tpu_rewrite_lowered_text(case: &Case, replicas: usize) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("case.opg");
    std::fs::write(&path, source(case, replicas)).expect("writes");
    let (tagged, lowered) = prepare(path.to_str().expect("utf-8"), &format!("1x{replicas}"), 1);
    tpu_rewrite::xla::stablehlo::emit_all(
        &tagged.graphs[0],
        &lowered.assignment,
        1,
        tpu_rewrite::xla::stablehlo::HostTransfer::default(),
        Some(&tagged),
    )
    .expect("emits")
}

/// Every op a case uses, from the body text.
fn ops_of(cases: &[&[Case]]) -> BTreeSet<String> {
    let mut ops = BTreeSet::new();
    for case in cases.iter().flat_map(|c| c.iter()) {
        for line in case.body.lines() {
            if let Some(op) = line.split(" = ").nth(1).and_then(|r| r.split('(').next()) {
                ops.insert(op.trim().to_string());
            }
        }
    }
    ops
}

/// The op types of the graphs the PJRT differential tests run besides
/// these cases: the examples and strategy graphs of `xla_backend`, its
/// TensorFlow fixtures, the replicated corpus graphs of `xla_corpus`, the
/// Keras corpus of `keras_corpus`, and the TensorList cases of `xla_tensor_list`.
fn ops_of_other_differential_graphs() -> BTreeSet<String> {
    use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};
    let mut ops = BTreeSet::new();
    let mut add = |module: tpu_rewrite::ir::Module| {
        for g in &module.graphs {
            for id in g.node_ids() {
                ops.insert(g.node(id).op.to_string());
            }
        }
    };
    for name in ["mlp_train", "model_parallel", "tf_tagged", "two_clusters", "second_order"] {
        let bytes = std::fs::read(format!("examples/{name}.opg")).expect("example");
        add(tpu_rewrite::ir::parse_module(&bytes).expect("parses").0);
    }
    for name in ["all_reduce", "broadcast", "crs4", "replica_id", "last_step"] {
        let bytes = std::fs::read(format!("tests/strategy/{name}.opg")).expect("strategy graph");
        add(tpu_rewrite::ir::parse_module(&bytes).expect("parses").0);
    }
    for name in ["mlp_r4.pb", "oc_grad_r2.pb"] {
        let bytes = std::fs::read(format!("tests/fixtures/tf-graphs/{name}")).expect("fixture");
        add(import_graphdef(&bytes, GraphDefFormat::Binary).expect("imports").0);
    }
    for name in
        ["replicated_step", "replicated_cnn", "replicated_mixed_precision", "replicated_optimizer", "replicated_while"]
    {
        let bytes = std::fs::read(format!("tests/tf/corpus/{name}.pbtxt")).expect("corpus graph");
        add(import_graphdef(&bytes, GraphDefFormat::Text).expect("imports").0);
    }
    // The Keras corpora, which `keras_corpus` and `keras_more` run on both backends against TensorFlow.
    let mut keras: Vec<_> = ["tests/tf/corpus/keras", "tests/tf/corpus/keras_more"]
        .into_iter()
        .flat_map(|dir| std::fs::read_dir(dir).expect("the Keras corpus"))
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pbtxt" || e == "pb"))
        .collect();
    keras.sort();
    for path in keras {
        let bytes = std::fs::read(&path).expect("a Keras corpus graph");
        let format =
            if path.extension().is_some_and(|e| e == "pb") { GraphDefFormat::Binary } else { GraphDefFormat::Text };
        add(import_graphdef(&bytes, format).expect("imports").0);
    }
    // The random ops of `random_ops`, compared there with TensorFlow's XLA outputs.
    let random: serde_json::Value =
        serde_json::from_str(include_str!("../tf/corpus/random/random_ops.json")).expect("the random corpus parses");
    for case in random["cases"].as_array().expect("cases") {
        if !case["xla"].is_null() {
            ops.insert(case["op"].as_str().expect("op").to_string());
        }
    }
    ops.extend(["StatelessRandomGetAlg", "StatelessRandomGetKeyCounter"].map(String::from));
    // The seeded ops of `random_ops` (PJRT draws checked for their distribution there) and
    // StatelessMultinomial (compared there with TensorFlow's XLA samples).
    let seeded: serde_json::Value =
        serde_json::from_str(include_str!("../tf/corpus/random/seeded_ops.json")).expect("the seeded corpus parses");
    for case in seeded["cases"].as_array().expect("cases") {
        ops.insert(case["op"].as_str().expect("op").to_string());
    }
    ops.insert("StatelessMultinomial".to_string());
    // The op families of `op_cases`, run on PJRT against TensorFlow's XLA (or CPU) values.
    let mut families: Vec<_> = std::fs::read_dir("tests/tf/corpus/ops")
        .expect("the op-case families")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    families.sort();
    for path in families {
        let text = std::fs::read_to_string(&path).expect("an op-case family");
        let family: serde_json::Value = serde_json::from_str(&text).expect("the family parses");
        for case in family["cases"].as_array().expect("cases") {
            ops.insert(case["op"].as_str().expect("op").to_string());
        }
        // A case of several ops (a TensorList chain) names its builder function, not an op:
        // every op of the family's graph runs on PJRT against TensorFlow's values.
        let graph = std::fs::read_to_string(path.with_extension("pbtxt")).expect("the family's graph");
        for line in graph.lines() {
            if let Some(op) = line.trim().strip_prefix("op: \"").and_then(|l| l.strip_suffix('"')) {
                ops.insert(op.to_string());
            }
        }
    }
    // The gradients of the `tensor_array` family, which the IR's own gradients pass builds and
    // PJRT runs against TensorFlow's, get their arrays from `TensorArrayGradV3`.
    ops.insert("TensorArrayGradV3".to_string());
    // The TensorList cases of `xla_tensor_list` (`%name = Op(...)` lines of its graphs), the
    // XlaSend/XlaRecv graph `op_cases::xla_ext_send_and_recv_pass_the_value_on` runs on PJRT, and
    // the four-replica collectives `xla_misc::` runs on both backends.
    let sources = [
        include_str!("xla_tensor_list.rs"),
        include_str!("../fixtures/xla_send_recv.opg"),
        include_str!("../strategy/xla_collectives.opg"),
    ];
    for line in sources.iter().flat_map(|s| s.lines()) {
        if let Some(op) =
            line.trim().strip_prefix('%').and_then(|l| l.split_once(" = ")).and_then(|(_, r)| r.split_once('('))
        {
            ops.insert(op.0.trim().to_string());
        }
    }
    ops
}

#[test]
fn every_builder_has_a_case() {
    let mut covered = ops_of(&[ELEMENTWISE, REDUCE, SHAPE, NN, GATHER, CONV, STATE]);
    covered.extend(ops_of_other_differential_graphs());
    use tpu_rewrite::xla::stablehlo::{lowered_ops, lowering_of};
    let variable_updates = tpu_rewrite::exec::kernels::DEVICE_OPS.iter().copied().filter(|op| {
        lowering_of(op) == Some("variable update") && !op.contains("Variable") && !op.starts_with("Update")
    });
    let missing: Vec<&str> = lowered_ops().chain(variable_updates).filter(|op| !covered.contains(*op)).collect();
    assert!(missing.is_empty(), "builders without a differential case: {missing:?}");
}
