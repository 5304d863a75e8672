//! The narrow dtypes: bf16, f16 (the `half` crate), i8 and u8.
//!
//! [`cast`] converts between every dtype with numbers (and bool). Other
//! kernels see narrow inputs widened: [`widen`] turns bf16/f16 into f32
//! and i8/u8 into i32, the kernel runs, and [`narrow`] rounds the outputs
//! back. TensorFlow's CPU kernels compute half types the same way (in f32,
//! rounded once per op), and wrapping i32 arithmetic cast back to 8 bits is
//! 8-bit wrapping arithmetic. Cost: one copy of each narrow input and output.

use ndarray::{ArcArray, IxDyn};

use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, DType};

/// A number type [`cast`] converts from and to.
trait Scalar: Copy {
    fn to_f64(self) -> f64;
    fn to_i64(self) -> Option<i64>;
    fn from_f64(v: f64) -> Self;
    fn from_i64(v: i64) -> Self;
}

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            fn to_f64(self) -> f64 { self as f64 }
            fn to_i64(self) -> Option<i64> { Some(self as i64) }
            // Out-of-range floats saturate, NaN gives 0 (Rust's `as`).
            fn from_f64(v: f64) -> Self { v as $t }
            // Integers wrap, as C's conversions do.
            fn from_i64(v: i64) -> Self { v as $t }
        }
    )*};
}
int_scalar!(i8, u8, i16, u16, i32, i64, u32);

impl Scalar for f32 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn from_i64(v: i64) -> Self {
        v as f32
    }
}

impl Scalar for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn from_f64(v: f64) -> Self {
        v
    }
    fn from_i64(v: i64) -> Self {
        v as f64
    }
}

impl Scalar for bool {
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
    fn to_i64(self) -> Option<i64> {
        Some(i64::from(self))
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
}

impl Scalar for half::bf16 {
    fn to_f64(self) -> f64 {
        half::bf16::to_f64(self)
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn from_f64(v: f64) -> Self {
        half::bf16::from_f64(v)
    }
    fn from_i64(v: i64) -> Self {
        half::bf16::from_f32(v as f32)
    }
}

impl Scalar for half::f16 {
    fn to_f64(self) -> f64 {
        half::f16::to_f64(self)
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn from_f64(v: f64) -> Self {
        half::f16::from_f64(v)
    }
    fn from_i64(v: i64) -> Self {
        half::f16::from_f32(v as f32)
    }
}

fn convert<S: Scalar, D: Scalar + crate::exec::tensor::Element>(a: &ArcArray<S, IxDyn>) -> Tensor {
    // Integers convert exactly through i64; floats through f64 (exact for every source here,
    // so each value is rounded once, to the destination).
    Tensor::from_array(a.mapv(|v| match v.to_i64() {
        Some(i) => D::from_i64(i),
        None => D::from_f64(v.to_f64()),
    }))
}

/// `Cast(x) {DstT}` between f16, bf16, f32, f64, i8, u8, i16, u16, i32, i64, u32 and bool.
pub(crate) fn cast(op: &str, x: &Tensor, to: DType) -> Result<Tensor, KernelError> {
    if x.dtype() == to {
        return Ok(x.clone());
    }
    if let Some(out) = super::complex::cast(op, x, to) {
        return out;
    }
    let classic = |d: DType| matches!(d, DType::F32 | DType::F64 | DType::I32 | DType::I64 | DType::Bool);
    if classic(x.dtype()) && classic(to) {
        return super::math::cast(op, x, to);
    }
    fn from<S: Scalar>(op: &str, a: &ArcArray<S, IxDyn>, to: DType) -> Result<Tensor, KernelError> {
        Ok(match to {
            DType::F32 => convert::<S, f32>(a),
            DType::F64 => convert::<S, f64>(a),
            DType::BF16 => convert::<S, half::bf16>(a),
            DType::F16 => convert::<S, half::f16>(a),
            DType::I8 => convert::<S, i8>(a),
            DType::U8 => convert::<S, u8>(a),
            DType::I16 => convert::<S, i16>(a),
            DType::U16 => convert::<S, u16>(a),
            DType::I32 => convert::<S, i32>(a),
            DType::U32 => convert::<S, u32>(a),
            DType::I64 => convert::<S, i64>(a),
            DType::Bool => convert::<S, bool>(a),
            other => return Err(KernelError::dtype(op, other, "cannot cast to this dtype")),
        })
    }
    match x {
        Tensor::F32(a) => from(op, a, to),
        Tensor::F64(a) => from(op, a, to),
        Tensor::BF16(a) => from(op, a, to),
        Tensor::F16(a) => from(op, a, to),
        Tensor::I8(a) => from(op, a, to),
        Tensor::U8(a) => from(op, a, to),
        Tensor::I16(a) => from(op, a, to),
        Tensor::U16(a) => from(op, a, to),
        Tensor::I32(a) => from(op, a, to),
        Tensor::U32(a) => from(op, a, to),
        Tensor::I64(a) => from(op, a, to),
        Tensor::Bool(a) => from(op, a, to),
        other => Err(KernelError::dtype(op, other.dtype(), "cannot cast from this dtype")),
    }
}

/// The dtype a narrow dtype is computed in, or `None` for dtypes kernels take as they are.
pub(crate) fn wide(d: DType) -> Option<DType> {
    match d {
        DType::BF16 | DType::F16 => Some(DType::F32),
        DType::I8 | DType::U8 => Some(DType::I32),
        _ => None,
    }
}

/// Ops that take every dtype as it is (they move elements, or convert them).
const NATIVE: &[&str] = &[
    "Bitcast",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Cast",
    "ConcatV2",
    "Const",
    "EnsureShape",
    "ExpandDims",
    "GatherNd",
    "GatherV2",
    "Identity",
    "IdentityN",
    "Invert",
    "LeftShift",
    "Pack",
    "Pad",
    "PadV2",
    "PlaceholderWithDefault",
    "PopulationCount",
    "PreventGradient",
    "Rank",
    "Reshape",
    "ResizeBilinear",
    "RightShift",
    "Select",
    "SelectV2",
    "Shape",
    "ShapeN",
    "Size",
    "Slice",
    "Snapshot",
    "SparseMatMul",
    "Split",
    "SplitV",
    "Squeeze",
    "StopGradient",
    "StridedSlice",
    "TPUReplicatedInput",
    "TPUReplicatedOutput",
    "Tile",
    "ToBool",
    "Transpose",
    "Unpack",
    "XlaBroadcastHelper",
    "XlaConcatND",
    "XlaConvV2",
    "XlaCustomCall",
    "XlaCustomCallV2",
    "XlaDotV2",
    "XlaDynamicSlice",
    "XlaDynamicUpdateSlice",
    "XlaGather",
    "XlaOptimizationBarrier",
    "XlaPad",
    "XlaRecv",
    "XlaRemoveDynamicDimensionSize",
    "XlaSend",
    "XlaSetDynamicDimensionSize",
    "XlaSharding",
    "XlaSplitND",
    "XlaSpmdFullToShardShape",
    "XlaSpmdShardToFullShape",
];

/// The narrow dtype inputs were widened from, to narrow the outputs back to.
pub(crate) struct Widened {
    narrow: DType,
    wide: DType,
}

/// Widens the narrow inputs of `op`, if it has any and is not [`NATIVE`].
pub(crate) fn widen(op: &str, inputs: &[Tensor]) -> Result<Option<(Vec<Tensor>, Widened)>, KernelError> {
    if NATIVE.contains(&op) {
        return Ok(None);
    }
    let Some((narrow, wide_dtype)) = inputs.iter().find_map(|t| wide(t.dtype()).map(|w| (t.dtype(), w))) else {
        return Ok(None);
    };
    let widened = inputs
        .iter()
        .map(|t| match wide(t.dtype()) {
            Some(w) => cast(op, t, w),
            None => Ok(t.clone()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some((widened, Widened { narrow, wide: wide_dtype })))
}

/// Rounds the outputs of a widened op back to the narrow dtype; outputs of another dtype
/// (bool, indices) and ops that name their output dtype stay as they are.
pub(crate) fn narrow(op: &str, attrs: &AttrMap, w: &Widened, outputs: Vec<Tensor>) -> Result<Vec<Tensor>, KernelError> {
    let named = ["out_type", "output_type", "Tout", "DstT", "dtype"]
        .iter()
        .any(|k| attrs.get(k).and_then(|v| v.as_type()).is_some_and(|d| d != w.narrow));
    if named {
        return Ok(outputs);
    }
    let truncate = w.narrow == DType::BF16 && TRUNCATING_BF16.contains(&op);
    // A batch norm backprop gives its per-channel outputs (all after x_backprop) in `U`.
    let statistics =
        op.starts_with("FusedBatchNormGrad") && attrs.get("U").and_then(|v| v.as_type()).is_some_and(|u| u == w.wide);
    outputs
        .into_iter()
        .enumerate()
        .map(|(i, t)| match (&t, truncate) {
            _ if statistics && i > 0 => Ok(t),
            (Tensor::F32(a), true) => Ok(Tensor::from_array(a.mapv(truncate_bf16))),
            _ if t.dtype() == w.wide => cast(op, &t, w.narrow),
            _ => Ok(t),
        })
        .collect()
}

/// Ops whose bf16 results TensorFlow's CPU kernels (in graph mode) truncate to bf16 after
/// accumulating in f32, instead of rounding to nearest.
const TRUNCATING_BF16: &[&str] = &["BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "MatMul"];

/// `v` with the low 16 bits of its f32 pattern cleared (NaN stays NaN).
fn truncate_bf16(v: f32) -> half::bf16 {
    if v.is_nan() {
        half::bf16::NAN
    } else {
        half::bf16::from_bits((v.to_bits() >> 16) as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn casts_round_wrap_and_saturate() {
        let x = Tensor::vector(vec![1.0f32 / 3.0, 300.5, -1.5]);
        let b = cast("Cast", &x, DType::BF16).unwrap();
        assert_eq!(
            b.to_vec::<bf16>().unwrap(),
            vec![bf16::from_f32(1.0 / 3.0), bf16::from_f32(300.5), bf16::from_f32(-1.5)]
        );
        let h = cast("Cast", &b, DType::F16).unwrap();
        assert_eq!(h.to_vec::<f16>().unwrap()[2], f16::from_f32(-1.5));
        assert_eq!(cast("Cast", &x, DType::U8).unwrap().to_vec::<u8>().unwrap(), vec![0, 255, 0]);
        let i = Tensor::vector(vec![300i32, -129]);
        assert_eq!(cast("Cast", &i, DType::I8).unwrap().to_vec::<i8>().unwrap(), vec![44, 127]);
        let big = Tensor::scalar((1i64 << 53) + 1);
        assert_eq!(cast("Cast", &big, DType::F64).unwrap(), Tensor::scalar(((1i64 << 53) + 1) as f64));
        assert_eq!(
            cast("Cast", &Tensor::vector(vec![0u8, 9]), DType::Bool).unwrap(),
            Tensor::vector(vec![false, true])
        );
    }

    #[test]
    fn widened_ops_round_back() {
        let a = Tensor::vector(vec![bf16::from_f32(1.0), bf16::from_f32(2.5)]);
        let (inputs, w) = widen("AddV2", &[a.clone(), a.clone()]).unwrap().expect("bf16 widens");
        assert_eq!(inputs[0].dtype(), DType::F32);
        let out = narrow("AddV2", &AttrMap::new(), &w, vec![inputs[0].clone(), Tensor::scalar(true)]).unwrap();
        assert_eq!(out[0], a);
        assert_eq!(out[1], Tensor::scalar(true));
        assert!(widen("Reshape", &[a]).unwrap().is_none());
        // MatMul truncates: 1 + 2^-8 + 2^-9 rounds up to 1 + 2^-7 but truncates to 1.
        let v = Tensor::scalar(1.0f32 + 2f32.powi(-8) + 2f32.powi(-9));
        let mm = narrow("MatMul", &AttrMap::new(), &w, vec![v.clone()]).unwrap();
        assert_eq!(mm[0], Tensor::scalar(bf16::ONE));
        let add = narrow("AddV2", &AttrMap::new(), &w, vec![v]).unwrap();
        assert_eq!(add[0], Tensor::scalar(bf16::from_f32(1.0 + 2f32.powi(-7))));
    }

    #[test]
    fn casts_to_and_from_16_and_32_bit_integers() {
        let x = Tensor::from_vec(&[2], vec![i16::MIN, 7]).unwrap();
        assert_eq!(cast("Cast", &x, DType::F32).unwrap().to_vec::<f32>().unwrap(), vec![-32768.0, 7.0]);
        let y = Tensor::from_vec(&[2], vec![3.0f32, 65535.0]).unwrap();
        assert_eq!(cast("Cast", &y, DType::U16).unwrap().to_vec::<u16>().unwrap(), vec![3, 65535]);
        let z = Tensor::from_vec(&[2], vec![0u32, u32::MAX]).unwrap();
        assert_eq!(cast("Cast", &z, DType::I64).unwrap().to_vec::<i64>().unwrap(), vec![0, 4294967295]);
    }
}
