//! Bitwise ops on integers, as TensorFlow's CPU kernels compute them:
//! `BitwiseAnd`/`Or`/`Xor` and the shifts broadcast NumPy style; `Invert`
//! and `PopulationCount` (a `uint8` count of set bits) are elementwise;
//! `Bitcast` reinterprets the bytes of a tensor as another dtype.
//!
//! The shifts clamp the shift amount to `[0, bits - 1]` as TensorFlow's
//! CPU kernels do; `RightShift` is arithmetic on signed types. These ops
//! see 8-bit integers natively (they are in `dtypes::NATIVE`), so counts
//! and shifts use each type's own width.

use ndarray::{ArcArray, IxDyn};

use super::arg;
use super::math::broadcast_zip;
use crate::exec::error::KernelError;
use crate::exec::tensor::{Element, Tensor};
use crate::ir::{AttrMap, DType};

/// An integer type of the executor, with its width in bits.
trait Int: Element + Copy + Default {
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn not(self) -> Self;
    fn ones(self) -> u8;
    /// The shift amount clamped to `[0, BITS - 1]`.
    fn amount(self) -> u32;
    fn shl(self, n: u32) -> Self;
    fn shr(self, n: u32) -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            fn and(self, o: Self) -> Self { self & o }
            fn or(self, o: Self) -> Self { self | o }
            fn xor(self, o: Self) -> Self { self ^ o }
            fn not(self) -> Self { !self }
            fn ones(self) -> u8 { self.count_ones() as u8 }
            #[allow(unused_comparisons)]
            fn amount(self) -> u32 {
                if self < 0 as $t { 0 } else if (self as u64) >= u64::from(<$t>::BITS) { <$t>::BITS - 1 } else { self as u32 }
            }
            fn shl(self, n: u32) -> Self { self.wrapping_shl(n) }
            fn shr(self, n: u32) -> Self { self.wrapping_shr(n) }
        }
    )*};
}
int!(i8, u8, i16, u16, i32, i64, u32, u64);

/// Runs `$body` with `$a` the array of an integer tensor `$x` and `$T` its element type.
macro_rules! with_int {
    ($op:expr, $x:expr, $a:ident, $T:ident => $body:expr) => {
        match $x {
            Tensor::I8($a) => {
                type $T = i8;
                $body
            }
            Tensor::U8($a) => {
                type $T = u8;
                $body
            }
            Tensor::I16($a) => {
                type $T = i16;
                $body
            }
            Tensor::U16($a) => {
                type $T = u16;
                $body
            }
            Tensor::I32($a) => {
                type $T = i32;
                $body
            }
            Tensor::I64($a) => {
                type $T = i64;
                $body
            }
            Tensor::U32($a) => {
                type $T = u32;
                $body
            }
            Tensor::U64($a) => {
                type $T = u64;
                $body
            }
            other => Err(KernelError::dtype($op, other.dtype(), "an integer input is required")),
        }
    };
}

#[derive(Clone, Copy)]
enum Bin {
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

fn one(t: Tensor) -> Result<Vec<Tensor>, KernelError> {
    Ok(vec![t])
}

/// Runs `op` if it is a bitwise op; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let bin = |b: Bin| -> Result<Vec<Tensor>, KernelError> { one(binary(op, b, x(0)?, x(1)?)?) };
    Some(match op {
        "BitwiseAnd" => bin(Bin::And),
        "BitwiseOr" => bin(Bin::Or),
        "BitwiseXor" => bin(Bin::Xor),
        "LeftShift" => bin(Bin::Shl),
        "RightShift" => bin(Bin::Shr),
        "Invert" => x(0).and_then(|t| with_int!(op, t, a, T => one(Tensor::from_array(a.mapv(|v: T| v.not()))))),
        "PopulationCount" => {
            x(0).and_then(|t| with_int!(op, t, a, T => one(Tensor::from_array(a.mapv(|v: T| v.ones())))))
        }
        "Bitcast" => (|| {
            let to = attrs
                .get("type")
                .and_then(|v| v.as_type())
                .ok_or_else(|| KernelError::invalid(op, "missing dtype attribute `type`"))?;
            one(bitcast(op, x(0)?, to)?)
        })(),
        _ => return None,
    })
}

fn binary(op: &str, b: Bin, x: &Tensor, y: &Tensor) -> Result<Tensor, KernelError> {
    fn run<T: Int>(op: &str, b: Bin, a: &ArcArray<T, IxDyn>, y: &Tensor) -> Result<Tensor, KernelError> {
        let c = y.array::<T>().ok_or_else(|| {
            KernelError::invalid(op, format!("inputs have different dtypes {} and {}", T::DTYPE, y.dtype()))
        })?;
        let out = match b {
            Bin::And => broadcast_zip(op, a, c, T::and)?,
            Bin::Or => broadcast_zip(op, a, c, T::or)?,
            Bin::Xor => broadcast_zip(op, a, c, T::xor)?,
            Bin::Shl => broadcast_zip(op, a, c, |v, n| v.shl(n.amount()))?,
            Bin::Shr => broadcast_zip(op, a, c, |v, n| v.shr(n.amount()))?,
        };
        Ok(Tensor::from_array(out))
    }
    with_int!(op, x, a, T => run::<T>(op, b, a, y))
}

/// The little-endian bytes of every element of `t`, in order.
fn bytes_of(op: &str, t: &Tensor) -> Result<Vec<u8>, KernelError> {
    macro_rules! flat {
        ($a:expr) => {
            $a.iter().flat_map(|v| v.to_le_bytes()).collect()
        };
    }
    Ok(match t {
        Tensor::F32(a) => flat!(a),
        Tensor::F64(a) => flat!(a),
        Tensor::I32(a) => flat!(a),
        Tensor::I64(a) => flat!(a),
        Tensor::I8(a) => flat!(a),
        Tensor::U8(a) => flat!(a),
        Tensor::I16(a) => flat!(a),
        Tensor::U16(a) => flat!(a),
        Tensor::U32(a) => flat!(a),
        Tensor::U64(a) => flat!(a),
        Tensor::BF16(a) => flat!(a),
        Tensor::F16(a) => flat!(a),
        other => return Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    })
}

/// A tensor of `dtype` and `shape` from little-endian `bytes`.
fn from_bytes(op: &str, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor, KernelError> {
    macro_rules! build {
        ($t:ty, $n:expr) => {
            Tensor::from_vec(
                shape,
                bytes.chunks_exact($n).map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or([0; $n]))).collect(),
            )
        };
    }
    match dtype {
        DType::F32 => build!(f32, 4),
        DType::F64 => build!(f64, 8),
        DType::I32 => build!(i32, 4),
        DType::I64 => build!(i64, 8),
        DType::I8 => build!(i8, 1),
        DType::U8 => build!(u8, 1),
        DType::I16 => build!(i16, 2),
        DType::U16 => build!(u16, 2),
        DType::U32 => build!(u32, 4),
        DType::U64 => build!(u64, 8),
        DType::BF16 => build!(half::bf16, 2),
        DType::F16 => build!(half::f16, 2),
        other => Err(KernelError::dtype(op, other, "the executor holds no tensor of this dtype to bitcast to")),
    }
}

/// `Bitcast(x) {type}`: the same bytes as `type`. A wider input gains a last dimension of
/// `in / out` elements; a narrower one must end in a dimension of `out / in`, which goes.
fn bitcast(op: &str, x: &Tensor, to: DType) -> Result<Tensor, KernelError> {
    let (Some(win), Some(wout)) = (x.dtype().size_bytes(), to.size_bytes()) else {
        return Err(KernelError::invalid(op, format!("cannot bitcast {} to {to}", x.dtype())));
    };
    if to == DType::Bool || x.dtype() == DType::Bool {
        return Err(KernelError::invalid(op, "bool is not a bitcast type"));
    }
    let mut shape = x.shape().to_vec();
    if win > wout {
        shape.push(win / wout);
    } else if win < wout {
        match shape.last() {
            Some(&last) if last * win == wout => {
                shape.pop();
            }
            _ => {
                return Err(KernelError::invalid(
                    op,
                    format!(
                        "cannot bitcast {} of shape {:?} to {to}: the last dimension must be {}",
                        x.dtype(),
                        x.shape(),
                        wout / win
                    ),
                ))
            }
        }
    }
    from_bytes(op, to, &shape, &bytes_of(op, x)?)
}
