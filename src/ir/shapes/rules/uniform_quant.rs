//! Type rules of the quantized-integer ops: each output is shaped like the
//! op's first operand (a matrix product's or convolution's output shape for
//! `UniformQuantizedDot` and `UniformQuantizedConvolution`), of the dtype
//! its attributes name (the quantized dtype `Tout`, or the float `dtype` of
//! `Dequantize`); and the geometry of `UniformQuantizedConvolution`, shared
//! with the simulator's kernel and the StableHLO lowering.

use super::xla_ops::{conv_geometry_of, ConvGeometry, ConvWindow};
use super::{Args, OutType};
use crate::ir::xla_proto::{decode, ConvolutionDimensionNumbers};
use crate::ir::{AttrMap, AttrValue, DType};

/// `UniformQuantize`, `UniformDequantize`, `UniformRequantize`: operand 0's shape, of dtype `Tout`.
pub(super) fn to_tout(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let tout = a.type_attr("Tout", DType::Other(0));
    if tout == DType::Other(0) {
        return Err(format!("{}: missing type attribute `Tout`", a.op));
    }
    Ok(vec![OutType::new(tout, x.shape.to_vec())])
}

/// `Dequantize`: operand 0's shape, of dtype `dtype` (f32 by default).
pub(super) fn dequantize(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    Ok(vec![OutType::new(a.type_attr("dtype", DType::F32), x.shape.to_vec())])
}

/// `UniformQuantizedDot(lhs, rhs, ...)`: `[lhs rows, rhs columns]` of dtype `Tout`.
pub(super) fn dot(a: &Args) -> Result<Vec<OutType>, String> {
    let (l, r) = (a.x(0)?, a.x(1)?);
    match (l.shape, r.shape) {
        (&[rows, depth], &[depth2, cols]) if depth == depth2 => {
            Ok(vec![OutType::new(a.type_attr("Tout", DType::QInt32), vec![rows, cols])])
        }
        _ => Err(format!("{}: lhs {:?} and rhs {:?} must be matrices that multiply", a.op, l.shape, r.shape)),
    }
}

/// TensorFlow's `UniformQuantizedConvolutionDimensionNumbersAttr`, the
/// serialized message of `UniformQuantizedConvolution`'s `dimension_numbers`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct QuantizedConvDims {
    /// The input's batch dimension.
    #[prost(int64, tag = "1")]
    pub input_batch_dimension: i64,
    /// The input's feature dimension.
    #[prost(int64, tag = "2")]
    pub input_feature_dimension: i64,
    /// The input's spatial dimensions.
    #[prost(int64, repeated, tag = "3")]
    pub input_spatial_dimensions: Vec<i64>,
    /// The kernel's input-feature dimension.
    #[prost(int64, tag = "4")]
    pub kernel_input_feature_dimension: i64,
    /// The kernel's output-feature dimension.
    #[prost(int64, tag = "5")]
    pub kernel_output_feature_dimension: i64,
    /// The kernel's spatial dimensions.
    #[prost(int64, repeated, tag = "6")]
    pub kernel_spatial_dimensions: Vec<i64>,
    /// The output's batch dimension.
    #[prost(int64, tag = "7")]
    pub output_batch_dimension: i64,
    /// The output's feature dimension.
    #[prost(int64, tag = "8")]
    pub output_feature_dimension: i64,
    /// The output's spatial dimensions.
    #[prost(int64, repeated, tag = "9")]
    pub output_spatial_dimensions: Vec<i64>,
}

/// The geometry of `UniformQuantizedConvolution` on operands of these
/// shapes, from its attributes as TensorFlow's kernel reads them: empty
/// `dimension_numbers` mean `[batch, feature, spatial...]` operands and
/// an `[output feature, input feature, spatial...]` kernel; empty strides
/// and dilations mean 1; `padding` is `VALID`, `SAME` (the output size is
/// the dilated input's divided by the stride, rounded up, the padding split
/// with the extra at the end) or `EXPLICIT` (`explicit_padding`, low and
/// high per spatial dimension).
pub fn quantized_conv_geometry(attrs: &AttrMap, lhs: &[usize], rhs: &[usize]) -> Result<ConvGeometry, String> {
    let rank = lhs.len();
    if rank < 2 || rhs.len() != rank {
        return Err(format!("the input (rank {rank}) and the kernel (rank {}) need one rank of at least 2", rhs.len()));
    }
    let n = rank - 2;
    let given: QuantizedConvDims = decode(attrs, "dimension_numbers")?;
    let spatial: Vec<i64> = (2..rank as i64).collect();
    let q = if given == QuantizedConvDims::default() {
        QuantizedConvDims {
            input_batch_dimension: 0,
            input_feature_dimension: 1,
            input_spatial_dimensions: spatial.clone(),
            kernel_input_feature_dimension: 1,
            kernel_output_feature_dimension: 0,
            kernel_spatial_dimensions: spatial.clone(),
            output_batch_dimension: 0,
            output_feature_dimension: 1,
            output_spatial_dimensions: spatial,
        }
    } else {
        given
    };
    let d = ConvolutionDimensionNumbers {
        input_batch_dimension: q.input_batch_dimension,
        input_feature_dimension: q.input_feature_dimension,
        input_spatial_dimensions: q.input_spatial_dimensions.clone(),
        kernel_input_feature_dimension: q.kernel_input_feature_dimension,
        kernel_output_feature_dimension: q.kernel_output_feature_dimension,
        kernel_spatial_dimensions: q.kernel_spatial_dimensions.clone(),
        output_batch_dimension: q.output_batch_dimension,
        output_feature_dimension: q.output_feature_dimension,
        output_spatial_dimensions: q.output_spatial_dimensions.clone(),
    };
    let list = |key: &str| {
        let v = attrs.get(key).and_then(AttrValue::as_int_list).unwrap_or_default();
        if v.is_empty() {
            vec![1; n]
        } else {
            v
        }
    };
    let (strides, lhs_dilation, rhs_dilation) = (list("window_strides"), list("lhs_dilation"), list("rhs_dilation"));
    let padding = match attrs.get_str("padding").unwrap_or("") {
        "VALID" => vec![0; 2 * n],
        "EXPLICIT" => attrs.get("explicit_padding").and_then(AttrValue::as_int_list).unwrap_or_default(),
        "SAME" => {
            if q.input_spatial_dimensions.len() != n || q.kernel_spatial_dimensions.len() != n || strides.len() != n {
                return Err(format!("SAME padding needs {n} spatial dimensions and strides"));
            }
            let mut pads = Vec::with_capacity(2 * n);
            for s in 0..n {
                let size = |shape: &[usize], dim: i64| usize::try_from(dim).ok().and_then(|d| shape.get(d).copied());
                let (Some(input), Some(window)) =
                    (size(lhs, q.input_spatial_dimensions[s]), size(rhs, q.kernel_spatial_dimensions[s]))
                else {
                    return Err("a spatial dimension number is out of range".to_string());
                };
                let dilated = |len: usize, by: i64| (len.max(1) as i64 - 1) * by + 1;
                let (input, window) = (dilated(input, lhs_dilation[s]), dilated(window, rhs_dilation[s]));
                let stride = strides[s].max(1);
                let out = (input + stride - 1) / stride;
                let total = ((out - 1) * stride + window - input).max(0);
                pads.extend([total / 2, total - total / 2]);
            }
            pads
        }
        other => return Err(format!("padding {other:?} must be VALID, SAME or EXPLICIT")),
    };
    let window = ConvWindow {
        strides: &strides,
        padding: &padding,
        lhs_dilation: &lhs_dilation,
        rhs_dilation: &rhs_dilation,
        feature_groups: a_int(attrs, "feature_group_count"),
        batch_groups: a_int(attrs, "batch_group_count"),
    };
    conv_geometry_of(&d, lhs, rhs, &window)
}

/// An integer attribute, 1 when absent.
fn a_int(attrs: &AttrMap, key: &str) -> i64 {
    attrs.get_int(key).unwrap_or(1)
}

/// `UniformQuantizedConvolution(lhs, rhs, ...)`: the convolution's output shape, of dtype `Tout`.
pub(super) fn conv(a: &Args) -> Result<Vec<OutType>, String> {
    let g = quantized_conv_geometry(a.attrs, a.x(0)?.shape, a.x(1)?.shape)?;
    Ok(vec![OutType::new(a.type_attr("Tout", DType::QInt32), g.out_shape)])
}
