//! The dispatch table of the op families added for TensorFlow training
//! steps (elementwise, reductions, losses, layout, embeddings, conv and
//! pooling, batch norm): one line per op, reading its attributes and
//! calling its kernel. `PURE_OPS` in the parent module lists every one.

use super::conv::{ConvKind, PoolKind};
use super::elementwise::{self as ew, FloatGrad as G, FloatTest, FloatUnary as U, Logical};
use super::layout::SliceMasks;
use super::reduce::Reduction as R;
use super::{arg, attr_bool, attr_int};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, AttrValue, DType};

fn one(t: Tensor) -> Result<Vec<Tensor>, KernelError> {
    Ok(vec![t])
}

fn attr_float(attrs: &AttrMap, key: &str, default: f64) -> f64 {
    match attrs.get(key) {
        Some(AttrValue::Float(f)) => f64::from(*f),
        Some(AttrValue::Int(i)) => *i as f64,
        _ => default,
    }
}

fn out_type(attrs: &AttrMap, key: &str, default: DType) -> DType {
    attrs.get(key).and_then(|v| v.as_type()).unwrap_or(default)
}

fn masks(attrs: &AttrMap) -> SliceMasks {
    SliceMasks {
        begin: attr_int(attrs, "begin_mask", 0),
        end: attr_int(attrs, "end_mask", 0),
        ellipsis: attr_int(attrs, "ellipsis_mask", 0),
        new_axis: attr_int(attrs, "new_axis_mask", 0),
        shrink_axis: attr_int(attrs, "shrink_axis_mask", 0),
    }
}

fn bn_config(attrs: &AttrMap) -> super::norm::BatchNormConfig {
    super::norm::BatchNormConfig {
        epsilon: attr_float(attrs, "epsilon", 1e-4),
        exponential_avg_factor: attr_float(attrs, "exponential_avg_factor", 1.0),
        is_training: attr_bool(attrs, "is_training", true),
    }
}

/// Runs `op` if it belongs to one of these families; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let un = |u: U| -> Result<Vec<Tensor>, KernelError> { one(ew::float_unary(op, u, x(0)?)?) };
    let grad = |g: G| -> Result<Vec<Tensor>, KernelError> { one(ew::float_grad(op, g, x(0)?, x(1)?)?) };
    let red = |r: R| -> Result<Vec<Tensor>, KernelError> {
        one(super::reduce::reduce(op, r, x(0)?, x(1)?, attr_bool(attrs, "keep_dims", false))?)
    };
    let conv = |k: ConvKind, depthwise: bool| one(super::nchw::conv(op, k, depthwise, attrs, inputs)?);
    let pool = |k: PoolKind| one(super::nchw::pool(op, k, attrs, inputs)?);
    Some(match op {
        "Round" | "Rint" => un(U::Round),
        "Sin" => un(U::Sin),
        "Cos" => un(U::Cos),
        "Tan" => un(U::Tan),
        "Asin" => un(U::Asin),
        "Acos" => un(U::Acos),
        "Atan" => un(U::Atan),
        "Sinh" => un(U::Sinh),
        "Cosh" => un(U::Cosh),
        "Asinh" => un(U::Asinh),
        "Acosh" => un(U::Acosh),
        "Atanh" => un(U::Atanh),
        "Floor" => un(U::Floor),
        "Ceil" => un(U::Ceil),
        "Erf" => un(U::Erf),
        "Log1p" => un(U::Log1p),
        "Expm1" => un(U::Expm1),
        "Relu6" => un(U::Relu6),
        "Elu" => un(U::Elu),
        "Selu" => un(U::Selu),
        "Softplus" => un(U::Softplus),
        "Softsign" => un(U::Softsign),
        "Sign" => x(0).and_then(|t| one(ew::sign(op, t)?)),
        "LeakyRelu" => x(0).and_then(|t| one(ew::leaky_relu(op, t, attr_float(attrs, "alpha", 0.2))?)),
        "IsFinite" => x(0).and_then(|t| one(ew::float_test(op, FloatTest::Finite, t)?)),
        "IsNan" => x(0).and_then(|t| one(ew::float_test(op, FloatTest::Nan, t)?)),
        "IsInf" => x(0).and_then(|t| one(ew::float_test(op, FloatTest::Inf, t)?)),
        "LogicalAnd" => (|| one(ew::logical(op, Logical::And, x(0)?, x(1)?)?))(),
        "LogicalOr" => (|| one(ew::logical(op, Logical::Or, x(0)?, x(1)?)?))(),
        "LogicalNot" => x(0).and_then(|t| one(ew::logical_not(op, t)?)),
        "SqrtGrad" => grad(G::Sqrt),
        "Relu6Grad" => grad(G::Relu6),
        "EluGrad" => grad(G::Elu),
        "SeluGrad" => grad(G::Selu),
        "SoftplusGrad" => grad(G::Softplus),
        "SoftsignGrad" => grad(G::Softsign),
        "LeakyReluGrad" => (|| one(ew::leaky_relu_grad(op, x(0)?, x(1)?, attr_float(attrs, "alpha", 0.2))?))(),

        "Max" => red(R::Max),
        "Min" => red(R::Min),
        "Prod" => red(R::Prod),
        "Any" => red(R::Any),
        "All" => red(R::All),
        "ArgMax" | "ArgMin" => (|| {
            let out = out_type(attrs, "output_type", DType::I64);
            one(super::reduce::arg_extreme(op, op == "ArgMax", x(0)?, x(1)?, out)?)
        })(),
        "Cumsum" => (|| {
            let (exclusive, reverse) = (attr_bool(attrs, "exclusive", false), attr_bool(attrs, "reverse", false));
            one(super::reduce::cumsum(op, x(0)?, x(1)?, exclusive, reverse)?)
        })(),
        "L2Loss" => x(0).and_then(|t| one(super::reduce::l2_loss(op, t)?)),
        // V3 adds an output dtype (Tout); the product is the same.
        "BatchMatMulV3" => (|| {
            one(super::linalg::batch_matmul(
                op,
                x(0)?,
                x(1)?,
                attr_bool(attrs, "adj_x", false),
                attr_bool(attrs, "adj_y", false),
            )?)
        })(),

        "LogSoftmax" => x(0).and_then(|t| one(super::nn::log_softmax(op, t)?)),
        "SoftmaxCrossEntropyWithLogits" => (|| super::nn::softmax_xent(op, x(0)?, x(1)?))(),
        "SparseSoftmaxCrossEntropyWithLogits" => (|| super::nn::sparse_softmax_xent(op, x(0)?, x(1)?))(),
        "OneHot" => super::nn::one_hot(op, inputs, attr_int(attrs, "axis", -1)).map(|t| vec![t]),

        "ExpandDims" => (|| one(super::layout::expand_dims(op, x(0)?, x(1)?)?))(),
        "Squeeze" => (|| {
            let dims: Vec<i64> = attrs
                .get("squeeze_dims")
                .and_then(|v| v.as_list())
                .unwrap_or_default()
                .iter()
                .filter_map(|v| v.as_int())
                .collect();
            one(super::layout::squeeze(op, x(0)?, &dims)?)
        })(),
        "ConcatV2" => super::layout::concat(op, inputs).map(|t| vec![t]),
        "ConcatOffset" => super::layout::concat_offset(op, inputs),
        "Unpack" => x(0).and_then(|t| super::layout::unpack(op, t, attr_int(attrs, "axis", 0))),
        "Split" => (|| super::layout::split(op, x(0)?, x(1)?, attr_int(attrs, "num_split", 1)))(),
        "SplitV" => (|| super::layout::split_v(op, x(0)?, x(1)?, x(2)?))(),
        "Slice" => (|| one(super::layout::slice(op, x(0)?, x(1)?, x(2)?)?))(),
        "StridedSlice" => super::layout::strided_slice(op, inputs, masks(attrs)).map(|t| vec![t]),
        "StridedSliceGrad" => super::layout::strided_slice_grad(op, inputs, masks(attrs)).map(|t| vec![t]),
        "ShapeN" => Ok(super::layout::shape_n(inputs, out_type(attrs, "out_type", DType::I32))),
        "Select" => (|| one(super::layout::select_v1(op, x(0)?, x(1)?, x(2)?)?))(),
        "Where" => x(0).and_then(|t| one(super::layout::where_true(op, t)?)),
        "Pad" => (|| one(super::layout::pad(op, x(0)?, x(1)?, None)?))(),
        "PadV2" => (|| one(super::layout::pad(op, x(0)?, x(1)?, Some(x(2)?))?))(),
        "BroadcastArgs" => (|| one(super::layout::broadcast_args(op, x(0)?, x(1)?)?))(),

        "GatherV2" => (|| one(super::gather::gather(op, x(0)?, x(1)?, x(2)?, attr_int(attrs, "batch_dims", 0))?))(),
        "GatherNd" => (|| one(super::gather::gather_nd(op, x(0)?, x(1)?)?))(),
        "Gather" => (|| one(super::index::gather_v1(op, x(0)?, x(1)?)?))(),
        "Concat" => super::index::concat_v1(op, inputs).map(|t| vec![t]),
        "Reverse" => (|| one(super::index::reverse_v1(op, x(0)?, x(1)?)?))(),
        "TopKV2" => (|| super::index::top_k(op, x(0)?, x(1)?, out_type(attrs, "index_type", DType::I32)))(),
        "ReverseSequence" => (|| {
            let (seq, batch) = (attr_int(attrs, "seq_dim", 0), attr_int(attrs, "batch_dim", 0));
            one(super::index::reverse_sequence(op, x(0)?, x(1)?, seq, batch)?)
        })(),
        "Roll" => (|| one(super::index::roll(op, x(0)?, x(1)?, x(2)?)?))(),
        "LinSpace" => (|| one(super::index::lin_space(op, x(0)?, x(1)?, x(2)?)?))(),
        "Empty" => (|| one(super::index::empty(op, x(0)?, out_type(attrs, "dtype", DType::F32))?))(),
        "Bucketize" => (|| {
            let boundaries: Vec<f32> = attrs
                .get("boundaries")
                .and_then(AttrValue::as_list)
                .unwrap_or_default()
                .iter()
                .filter_map(|v| match v {
                    AttrValue::Float(f) => Some(*f),
                    AttrValue::Int(i) => Some(*i as f32),
                    _ => None,
                })
                .collect();
            one(super::index::bucketize(op, x(0)?, &boundaries)?)
        })(),
        "LowerBound" | "UpperBound" => (|| {
            let out = out_type(attrs, "out_type", DType::I32);
            one(super::index::search_sorted(op, x(0)?, x(1)?, op == "UpperBound", out)?)
        })(),
        "ScatterNd" => (|| one(super::gather::scatter_nd(op, x(0)?, x(1)?, x(2)?)?))(),
        "TensorScatterUpdate" | "TensorScatterAdd" => (|| {
            let how =
                if op == "TensorScatterAdd" { super::gather::Combine::Add } else { super::gather::Combine::Replace };
            one(super::gather::tensor_scatter(op, how, x(0)?, x(1)?, x(2)?)?)
        })(),
        "UnsortedSegmentSum" => (|| one(super::gather::unsorted_segment_sum(op, x(0)?, x(1)?, x(2)?)?))(),
        "UnsortedSegmentMax"
        | "UnsortedSegmentMin"
        | "UnsortedSegmentProd"
        | "SegmentSumV2"
        | "SegmentMaxV2"
        | "SegmentMinV2"
        | "SegmentProdV2" => (|| {
            use super::segment::Reduce;
            let how = match op {
                "UnsortedSegmentMax" | "SegmentMaxV2" => Reduce::Max,
                "UnsortedSegmentMin" | "SegmentMinV2" => Reduce::Min,
                "UnsortedSegmentProd" | "SegmentProdV2" => Reduce::Prod,
                _ => Reduce::Sum,
            };
            one(super::segment::segment_reduce(op, how, x(0)?, x(1)?, x(2)?, op.starts_with("Segment"))?)
        })(),
        "TensorScatterSub" | "TensorScatterMax" | "TensorScatterMin" => (|| {
            use super::segment::Scatter;
            let how = match op {
                "TensorScatterSub" => Scatter::Sub,
                "TensorScatterMax" => Scatter::Max,
                _ => Scatter::Min,
            };
            one(super::segment::tensor_scatter(op, how, x(0)?, x(1)?, x(2)?)?)
        })(),

        "Conv2D" => conv(ConvKind::Forward, false),
        "Conv2DBackpropInput" => conv(ConvKind::BackpropInput, false),
        "Conv2DBackpropFilter" => conv(ConvKind::BackpropFilter, false),
        "DepthwiseConv2dNative" => conv(ConvKind::Forward, true),
        "DepthwiseConv2dNativeBackpropInput" => conv(ConvKind::BackpropInput, true),
        "DepthwiseConv2dNativeBackpropFilter" => conv(ConvKind::BackpropFilter, true),
        "MaxPool" => pool(PoolKind::Max),
        "MaxPoolGrad" => pool(PoolKind::MaxGrad),
        "AvgPool" => pool(PoolKind::Avg),
        "AvgPoolGrad" => pool(PoolKind::AvgGrad),
        "Conv3D" => super::conv3d::conv(op, ConvKind::Forward, attrs, inputs).map(|t| vec![t]),
        "Conv3DBackpropInputV2" => super::conv3d::conv(op, ConvKind::BackpropInput, attrs, inputs).map(|t| vec![t]),
        "Conv3DBackpropFilterV2" => super::conv3d::conv(op, ConvKind::BackpropFilter, attrs, inputs).map(|t| vec![t]),
        "MaxPool3D" => super::conv3d::pool(op, PoolKind::Max, attrs, inputs).map(|t| vec![t]),
        "MaxPool3DGrad" => super::conv3d::pool(op, PoolKind::MaxGrad, attrs, inputs).map(|t| vec![t]),
        "MaxPool3DGradGrad" => super::conv3d::pool(op, PoolKind::MaxGradGrad, attrs, inputs).map(|t| vec![t]),
        "AvgPool3D" => super::conv3d::pool(op, PoolKind::Avg, attrs, inputs).map(|t| vec![t]),
        "AvgPool3DGrad" => super::conv3d::pool(op, PoolKind::AvgGrad, attrs, inputs).map(|t| vec![t]),

        "FusedBatchNorm" | "FusedBatchNormV2" | "FusedBatchNormV3" => {
            super::nchw::batch_norm(op, attrs, inputs, 1, |inputs| {
                super::norm::fused_batch_norm(op, inputs, bn_config(attrs))
            })
            .map(|mut v| {
                if op != "FusedBatchNormV3" {
                    v.truncate(5);
                }
                v
            })
        }
        "FusedBatchNormGrad" | "FusedBatchNormGradV2" | "FusedBatchNormGradV3" => {
            super::nchw::batch_norm(op, attrs, inputs, 2, |inputs| {
                super::norm::fused_batch_norm_grad(op, inputs, bn_config(attrs))
            })
        }
        _ => return None,
    })
}
