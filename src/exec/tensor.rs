//! Tensors: n-dimensional arrays of one dtype, on ndarray.
//!
//! A [`Tensor`] holds a reference-counted array (`ArcArray`): cloning one is
//! cheap and writing to a shared array copies it first, so a value fed to
//! many devices or read from a variable is never copied until it changes.
//! Supported dtypes: f32, f64, bf16, f16 (the `half` crate), i8, u8, i16,
//! u16, i32, i64, u32, u64, bool, string, complex64 and complex128 (`num_complex`), resource
//! handles (variables) and variant scalars (TensorLists and Optionals, see
//! [`super::variant`]). A complex literal or content holds interleaved
//! (real, imaginary) pairs, as TensorFlow's `scomplex_val`/`dcomplex_val`.

use std::sync::Arc;

use ndarray::{ArcArray, ArrayD, ArrayViewD, IxDyn};

use super::error::KernelError;
use crate::ir::{DType, TensorData, TensorLit};

/// A handle to a variable: the device whose store holds it, and its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceHandle {
    /// The device whose variable store holds the variable.
    pub device: Arc<str>,
    /// The variable's name in that store.
    pub name: Arc<str>,
    /// Further copies `(device, name)` that an assignment also writes: a
    /// mirrored variable seen from outside its cluster. Reads use the
    /// primary copy (`device`, `name`).
    pub mirrors: Vec<(Arc<str>, Arc<str>)>,
}

impl ResourceHandle {
    /// A handle to one variable with no further copies.
    pub fn new(device: Arc<str>, name: Arc<str>) -> ResourceHandle {
        ResourceHandle { device, name, mirrors: Vec::new() }
    }

    /// Every copy an assignment writes: the primary first.
    pub fn copies(&self) -> impl Iterator<Item = (&Arc<str>, &Arc<str>)> {
        std::iter::once((&self.device, &self.name)).chain(self.mirrors.iter().map(|(d, n)| (d, n)))
    }
}

/// A dense tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum Tensor {
    /// 32-bit floats.
    F32(ArcArray<f32, IxDyn>),
    /// 64-bit floats.
    F64(ArcArray<f64, IxDyn>),
    /// 32-bit signed integers.
    I32(ArcArray<i32, IxDyn>),
    /// 64-bit signed integers.
    I64(ArcArray<i64, IxDyn>),
    /// Booleans.
    Bool(ArcArray<bool, IxDyn>),
    /// Brain floats (bfloat16).
    BF16(ArcArray<half::bf16, IxDyn>),
    /// IEEE half floats.
    F16(ArcArray<half::f16, IxDyn>),
    /// 8-bit signed integers.
    I8(ArcArray<i8, IxDyn>),
    /// 8-bit unsigned integers.
    U8(ArcArray<u8, IxDyn>),
    /// 16-bit signed integers.
    I16(ArcArray<i16, IxDyn>),
    /// 16-bit unsigned integers.
    U16(ArcArray<u16, IxDyn>),
    /// 32-bit unsigned integers (XLA's random bits and packed quantized bytes).
    U32(ArcArray<u32, IxDyn>),
    /// 64-bit unsigned integers (the keys and counters of the stateless random ops).
    U64(ArcArray<u64, IxDyn>),
    /// Complex numbers of two 32-bit floats (TensorFlow's `complex64`).
    C64(ArcArray<num_complex::Complex32, IxDyn>),
    /// Complex numbers of two 64-bit floats (TensorFlow's `complex128`).
    C128(ArcArray<num_complex::Complex64, IxDyn>),
    /// Byte strings, as TensorFlow's `string` (not necessarily UTF-8).
    Str(ArcArray<Vec<u8>, IxDyn>),
    /// A scalar resource handle.
    Resource(ResourceHandle),
    /// A variant scalar: a TensorList or an Optional.
    Variant(Arc<super::variant::Variant>),
}

/// An element type a [`Tensor`] can hold.
pub trait Element: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// The dtype of tensors of this element.
    const DTYPE: DType;
    /// Wraps an array into a tensor.
    fn wrap(array: ArcArray<Self, IxDyn>) -> Tensor;
    /// The array of `tensor`, if it holds this element type.
    fn unwrap(tensor: &Tensor) -> Option<&ArcArray<Self, IxDyn>>;
}

macro_rules! element {
    ($t:ty, $variant:ident, $dtype:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dtype;
            fn wrap(array: ArcArray<Self, IxDyn>) -> Tensor {
                Tensor::$variant(array)
            }
            fn unwrap(tensor: &Tensor) -> Option<&ArcArray<Self, IxDyn>> {
                match tensor {
                    Tensor::$variant(a) => Some(a),
                    _ => None,
                }
            }
        }
    };
}

element!(f32, F32, DType::F32);
element!(f64, F64, DType::F64);
element!(i32, I32, DType::I32);
element!(i64, I64, DType::I64);
element!(bool, Bool, DType::Bool);
element!(Vec<u8>, Str, DType::Str);
element!(half::bf16, BF16, DType::BF16);
element!(half::f16, F16, DType::F16);
element!(i8, I8, DType::I8);
element!(u8, U8, DType::U8);
element!(i16, I16, DType::I16);
element!(u16, U16, DType::U16);
element!(u32, U32, DType::U32);
element!(u64, U64, DType::U64);
element!(num_complex::Complex32, C64, DType::C64);
element!(num_complex::Complex64, C128, DType::C128);

/// Applies `$body` to the array of a tensor of any array dtype, binding it
/// as `$a`; `$other` handles resources.
macro_rules! with_array {
    ($t:expr, $a:ident => $body:expr, $res:pat => $other:expr) => {
        match $t {
            Tensor::F32($a) => $body,
            Tensor::F64($a) => $body,
            Tensor::I32($a) => $body,
            Tensor::I64($a) => $body,
            Tensor::Bool($a) => $body,
            Tensor::BF16($a) => $body,
            Tensor::F16($a) => $body,
            Tensor::I8($a) => $body,
            Tensor::U8($a) => $body,
            Tensor::I16($a) => $body,
            Tensor::U16($a) => $body,
            Tensor::U32($a) => $body,
            Tensor::U64($a) => $body,
            Tensor::C64($a) => $body,
            Tensor::C128($a) => $body,
            Tensor::Str($a) => $body,
            $res => $other,
        }
    };
}

/// Runs `$body` with `$T` a type alias for the element type of tensor
/// `$t` (any dtype with elements); `$res` is the value for a resource.
macro_rules! with_element_type {
    ($t:expr, $T:ident => $body:expr, resource => $res:expr) => {
        match $t {
            Tensor::F32(_) => {
                type $T = f32;
                $body
            }
            Tensor::F64(_) => {
                type $T = f64;
                $body
            }
            Tensor::I32(_) => {
                type $T = i32;
                $body
            }
            Tensor::I64(_) => {
                type $T = i64;
                $body
            }
            Tensor::Bool(_) => {
                type $T = bool;
                $body
            }
            Tensor::BF16(_) => {
                type $T = half::bf16;
                $body
            }
            Tensor::F16(_) => {
                type $T = half::f16;
                $body
            }
            Tensor::I8(_) => {
                type $T = i8;
                $body
            }
            Tensor::U8(_) => {
                type $T = u8;
                $body
            }
            Tensor::I16(_) => {
                type $T = i16;
                $body
            }
            Tensor::U16(_) => {
                type $T = u16;
                $body
            }
            Tensor::U32(_) => {
                type $T = u32;
                $body
            }
            Tensor::U64(_) => {
                type $T = u64;
                $body
            }
            Tensor::C64(_) => {
                type $T = num_complex::Complex32;
                $body
            }
            Tensor::C128(_) => {
                type $T = num_complex::Complex64;
                $body
            }
            Tensor::Str(_) => {
                type $T = Vec<u8>;
                $body
            }
            Tensor::Resource(_) | Tensor::Variant(_) => $res,
        }
    };
}
pub(crate) use with_element_type;

impl Tensor {
    /// A tensor from an owned array.
    pub fn from_array<T: Element>(array: ArrayD<T>) -> Tensor {
        T::wrap(array.into_shared())
    }

    /// A tensor of `shape` from row-major `values`.
    pub fn from_vec<T: Element>(shape: &[usize], values: Vec<T>) -> Result<Tensor, KernelError> {
        let n = values.len();
        ArrayD::from_shape_vec(IxDyn(shape), values)
            .map(Tensor::from_array)
            .map_err(|_| KernelError::invalid("Tensor", format!("{n} values do not fill shape {shape:?}")))
    }

    /// A scalar.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor::from_array(ArrayD::from_elem(IxDyn(&[]), value))
    }

    /// A 1-D tensor.
    pub fn vector<T: Element>(values: Vec<T>) -> Tensor {
        let n = values.len();
        Tensor::from_array(ArrayD::from_shape_vec(IxDyn(&[n]), values).expect("a vector fits its length"))
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::F32,
            Tensor::F64(_) => DType::F64,
            Tensor::I32(_) => DType::I32,
            Tensor::I64(_) => DType::I64,
            Tensor::Bool(_) => DType::Bool,
            Tensor::BF16(_) => DType::BF16,
            Tensor::F16(_) => DType::F16,
            Tensor::I8(_) => DType::I8,
            Tensor::U8(_) => DType::U8,
            Tensor::I16(_) => DType::I16,
            Tensor::U16(_) => DType::U16,
            Tensor::U32(_) => DType::U32,
            Tensor::U64(_) => DType::U64,
            Tensor::C64(_) => DType::C64,
            Tensor::C128(_) => DType::C128,
            Tensor::Str(_) => DType::Str,
            Tensor::Resource(_) => DType::Resource,
            Tensor::Variant(_) => DType::Variant,
        }
    }

    /// The shape (empty for scalars and resources).
    pub fn shape(&self) -> &[usize] {
        with_array!(self, a => a.shape(), Tensor::Resource(_) | Tensor::Variant(_) => &[])
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_array!(self, a => a.len(), Tensor::Resource(_) | Tensor::Variant(_) => 1)
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The array, if the tensor holds elements of type `T`.
    pub fn array<T: Element>(&self) -> Option<&ArcArray<T, IxDyn>> {
        T::unwrap(self)
    }

    /// A view of the array, if the tensor holds elements of type `T`.
    pub fn view<T: Element>(&self) -> Option<ArrayViewD<'_, T>> {
        T::unwrap(self).map(|a| a.view())
    }

    /// The elements in row-major order, if the tensor holds type `T`.
    pub fn to_vec<T: Element>(&self) -> Option<Vec<T>> {
        // A standard-layout array (nearly all) is one slice: copied whole, not element by element.
        T::unwrap(self).map(|a| a.as_slice().map_or_else(|| a.iter().cloned().collect(), <[T]>::to_vec))
    }

    /// The first `n` elements in row-major order as a vector, or the
    /// tensor itself when it has no more than `n`: a summary of a large
    /// tensor, costing `n` elements, never the whole.
    pub fn head(&self, n: usize) -> Tensor {
        fn head_of<T: Element>(t: &Tensor, n: usize) -> Option<Tensor> {
            let a = T::unwrap(t)?;
            let values: Vec<T> = a.iter().take(n).cloned().collect();
            Some(T::wrap(ArcArray::from_shape_vec(IxDyn(&[values.len()]), values).ok()?))
        }
        if self.len() <= n {
            return self.clone();
        }
        with_element_type!(self, T => head_of::<T>(self, n).unwrap_or_else(|| self.clone()), resource => self.clone())
    }

    /// The resource handle, if this is one.
    pub fn as_resource(&self) -> Option<&ResourceHandle> {
        match self {
            Tensor::Resource(h) => Some(h),
            _ => None,
        }
    }

    /// The variant value, if this is one.
    pub fn as_variant(&self) -> Option<&super::variant::Variant> {
        match self {
            Tensor::Variant(v) => Some(v),
            _ => None,
        }
    }

    /// The values of an integer tensor (i32 or i64) as i64, for shapes and axes.
    pub fn to_i64_vec(&self, op: &str, what: &str) -> Result<Vec<i64>, KernelError> {
        match self {
            Tensor::I32(a) => Ok(a.iter().map(|&x| i64::from(x)).collect()),
            Tensor::I64(a) => Ok(a.iter().copied().collect()),
            other => Err(KernelError::dtype(op, other.dtype(), format!("{what} must be i32 or i64"))),
        }
    }

    /// True when both tensors have the same dtype, shape and bit patterns
    /// (NaNs with equal bits compare equal, `0.0` and `-0.0` differ).
    pub fn bit_eq(&self, other: &Tensor) -> bool {
        match (self, other) {
            (Tensor::F32(a), Tensor::F32(b)) => {
                a.shape() == b.shape() && a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Tensor::F64(a), Tensor::F64(b)) => {
                a.shape() == b.shape() && a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Tensor::C64(a), Tensor::C64(b)) => {
                a.shape() == b.shape()
                    && a.iter()
                        .zip(b.iter())
                        .all(|(x, y)| x.re.to_bits() == y.re.to_bits() && x.im.to_bits() == y.im.to_bits())
            }
            (Tensor::C128(a), Tensor::C128(b)) => {
                a.shape() == b.shape()
                    && a.iter()
                        .zip(b.iter())
                        .all(|(x, y)| x.re.to_bits() == y.re.to_bits() && x.im.to_bits() == y.im.to_bits())
            }
            _ => self == other,
        }
    }

    /// A tensor from a literal of the IR (a `Const`'s `value`).
    pub fn from_literal(lit: &TensorLit) -> Result<Tensor, KernelError> {
        let op = "Const";
        let shape = super::limits::checked_dims(op, lit.dtype, &lit.shape)?;
        let n: usize = shape.iter().product();
        fn fill<T: Clone>(values: Vec<T>, n: usize, zero: T) -> Vec<T> {
            // TensorFlow repeats the last value to fill the shape; no values means zeros.
            match values.last().cloned() {
                None => vec![zero; n],
                Some(last) => {
                    let mut v = values;
                    v.resize(n, last);
                    v
                }
            }
        }
        let bad = |what: &str| KernelError::dtype(op, lit.dtype, format!("literal stored as {what}"));
        match (&lit.data, lit.dtype.plain()) {
            (TensorData::Float(v), DType::F32) => Tensor::from_vec(&shape, fill(v.clone(), n, 0.0)),
            (TensorData::Double(v), DType::F64) => Tensor::from_vec(&shape, fill(v.clone(), n, 0.0)),
            (TensorData::Int(v), DType::I32) => Tensor::from_vec(&shape, fill(v.clone(), n, 0)),
            (TensorData::Int64(v), DType::I64) => Tensor::from_vec(&shape, fill(v.clone(), n, 0)),
            (TensorData::Bool(v), DType::Bool) => Tensor::from_vec(&shape, fill(v.clone(), n, false)),
            // `half_val` holds the 16-bit patterns, one per int.
            (TensorData::Half(v), DType::BF16) => {
                let values = v.iter().map(|&b| half::bf16::from_bits(b as u16)).collect();
                Tensor::from_vec(&shape, fill(values, n, half::bf16::ZERO))
            }
            (TensorData::Half(v), DType::F16) => {
                let values = v.iter().map(|&b| half::f16::from_bits(b as u16)).collect();
                Tensor::from_vec(&shape, fill(values, n, half::f16::ZERO))
            }
            (TensorData::Int(v), DType::I8) => {
                Tensor::from_vec(&shape, fill(v.iter().map(|&x| x as i8).collect(), n, 0))
            }
            (TensorData::Int(v), DType::U8) => {
                Tensor::from_vec(&shape, fill(v.iter().map(|&x| x as u8).collect(), n, 0))
            }
            (TensorData::Int(v), DType::I16) => {
                Tensor::from_vec(&shape, fill(v.iter().map(|&x| x as i16).collect(), n, 0))
            }
            (TensorData::Int(v), DType::U16) => {
                Tensor::from_vec(&shape, fill(v.iter().map(|&x| x as u16).collect(), n, 0))
            }
            (TensorData::Uint64(v), DType::U64) => Tensor::from_vec(&shape, fill(v.clone(), n, 0)),
            // `scomplex_val` / `dcomplex_val`: (real, imaginary) pairs.
            (TensorData::Float(v), DType::C64) => {
                let values = complex_pairs(op, lit.dtype, v, num_complex::Complex32::new)?;
                Tensor::from_vec(&shape, fill(values, n, num_complex::Complex32::new(0.0, 0.0)))
            }
            (TensorData::Double(v), DType::C128) => {
                let values = complex_pairs(op, lit.dtype, v, num_complex::Complex64::new)?;
                Tensor::from_vec(&shape, fill(values, n, num_complex::Complex64::new(0.0, 0.0)))
            }
            (TensorData::Str(v), DType::Str) => Tensor::from_vec(&shape, fill(v.clone(), n, Vec::new())),
            (TensorData::Content(bytes), dtype) => decode_content(op, dtype, &shape, bytes),
            (TensorData::Float(_), _) => Err(bad("float_val")),
            (TensorData::Double(_), _) => Err(bad("double_val")),
            (TensorData::Int(_), _) => Err(bad("int_val")),
            (TensorData::Int64(_), _) => Err(bad("int64_val")),
            (TensorData::Bool(_), _) => Err(bad("bool_val")),
            (TensorData::Str(_), _) => Err(bad("string_val")),
            (TensorData::Half(_), _) => Err(bad("half_val")),
            (TensorData::Uint32(v), DType::U32) => Tensor::from_vec(&shape, fill(v.clone(), n, 0)),
            (TensorData::Uint32(_), _) => Err(bad("uint32_val")),
            (TensorData::Uint64(_), _) => Err(bad("uint64_val")),
        }
    }
}

/// Complex values from interleaved (real, imaginary) pairs.
fn complex_pairs<F: Copy, C>(op: &str, dtype: DType, v: &[F], make: impl Fn(F, F) -> C) -> Result<Vec<C>, KernelError> {
    if !v.len().is_multiple_of(2) {
        return Err(KernelError::dtype(op, dtype, format!("{} values do not make (real, imaginary) pairs", v.len())));
    }
    Ok(v.chunks_exact(2).map(|p| make(p[0], p[1])).collect())
}

fn decode_content(op: &str, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor, KernelError> {
    macro_rules! le_vec {
        ($t:ty, $n:expr) => {{
            if bytes.len() % $n != 0 {
                return Err(KernelError::invalid(
                    op,
                    format!("{} content bytes is not a multiple of {}", bytes.len(), $n),
                ));
            }
            bytes.chunks_exact($n).map(|c| <$t>::from_le_bytes(c.try_into().expect("exact chunk"))).collect::<Vec<$t>>()
        }};
    }
    macro_rules! le {
        ($t:ty, $n:expr) => {{
            let values: Vec<$t> = le_vec!($t, $n);
            Tensor::from_vec(shape, values)
        }};
    }
    match dtype.plain() {
        DType::F32 => le!(f32, 4),
        DType::F64 => le!(f64, 8),
        DType::I32 => le!(i32, 4),
        DType::I64 => le!(i64, 8),
        DType::Bool => Tensor::from_vec(shape, bytes.iter().map(|&b| b != 0).collect()),
        DType::BF16 => {
            let values: Vec<u16> = le_u16(op, bytes)?;
            Tensor::from_vec(shape, values.into_iter().map(half::bf16::from_bits).collect())
        }
        DType::F16 => {
            let values: Vec<u16> = le_u16(op, bytes)?;
            Tensor::from_vec(shape, values.into_iter().map(half::f16::from_bits).collect())
        }
        DType::I8 => Tensor::from_vec(shape, bytes.iter().map(|&b| b as i8).collect()),
        DType::U8 => Tensor::from_vec(shape, bytes.to_vec()),
        DType::I16 => le!(i16, 2),
        DType::U16 => le!(u16, 2),
        DType::U32 => le!(u32, 4),
        DType::U64 => le!(u64, 8),
        DType::C64 => {
            let parts = le_vec!(f32, 4);
            Tensor::from_vec(shape, complex_pairs(op, dtype, &parts, num_complex::Complex32::new)?)
        }
        DType::C128 => {
            let parts = le_vec!(f64, 8);
            Tensor::from_vec(shape, complex_pairs(op, dtype, &parts, num_complex::Complex64::new)?)
        }
        other => Err(KernelError::dtype(op, other, "tensor_content of this dtype")),
    }
}

/// Little-endian 16-bit words.
fn le_u16(op: &str, bytes: &[u8]) -> Result<Vec<u16>, KernelError> {
    if !bytes.len().is_multiple_of(2) {
        return Err(KernelError::invalid(op, format!("{} content bytes is not a multiple of 2", bytes.len())));
    }
    Ok(bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect())
}

impl Tensor {
    /// The tensor as a `Const` literal of the IR; `None` for dtypes a
    /// literal does not hold here (strings, variants, resources).
    pub fn to_literal(&self) -> Option<TensorLit> {
        let data = match self.dtype() {
            DType::F32 => TensorData::Float(self.to_vec::<f32>()?),
            DType::F64 => TensorData::Double(self.to_vec::<f64>()?),
            DType::I32 => TensorData::Int(self.to_vec::<i32>()?),
            DType::I64 => TensorData::Int64(self.to_vec::<i64>()?),
            DType::I8 => TensorData::Int(self.to_vec::<i8>()?.into_iter().map(i32::from).collect()),
            DType::U8 => TensorData::Int(self.to_vec::<u8>()?.into_iter().map(i32::from).collect()),
            DType::I16 => TensorData::Int(self.to_vec::<i16>()?.into_iter().map(i32::from).collect()),
            DType::U16 => TensorData::Int(self.to_vec::<u16>()?.into_iter().map(i32::from).collect()),
            DType::U32 => TensorData::Uint32(self.to_vec::<u32>()?),
            DType::U64 => TensorData::Uint64(self.to_vec::<u64>()?),
            DType::Bool => TensorData::Bool(self.to_vec::<bool>()?),
            DType::C64 => TensorData::Float(
                self.to_vec::<num_complex::Complex32>()?.into_iter().flat_map(|c| [c.re, c.im]).collect(),
            ),
            DType::C128 => TensorData::Double(
                self.to_vec::<num_complex::Complex64>()?.into_iter().flat_map(|c| [c.re, c.im]).collect(),
            ),
            DType::BF16 => {
                TensorData::Half(self.to_vec::<half::bf16>()?.into_iter().map(|v| i32::from(v.to_bits())).collect())
            }
            DType::F16 => {
                TensorData::Half(self.to_vec::<half::f16>()?.into_iter().map(|v| i32::from(v.to_bits())).collect())
            }
            _ => return None,
        };
        Some(TensorLit { dtype: self.dtype(), shape: self.shape().iter().map(|&d| d as i64).collect(), data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_literals_decode_their_bit_patterns() {
        let one = half::bf16::from_f32(1.5);
        let lit = TensorLit { dtype: DType::BF16, shape: vec![2], data: TensorData::Half(vec![one.to_bits() as i32]) };
        assert_eq!(Tensor::from_literal(&lit).unwrap().to_vec::<half::bf16>().unwrap(), vec![one, one]);
        let h = half::f16::from_f32(-2.25);
        let bytes = h.to_bits().to_le_bytes().to_vec();
        let lit = TensorLit { dtype: DType::F16, shape: vec![1], data: TensorData::Content(bytes) };
        assert_eq!(Tensor::from_literal(&lit).unwrap().to_vec::<half::f16>().unwrap(), vec![h]);
        let lit = TensorLit { dtype: DType::U8, shape: vec![2], data: TensorData::Int(vec![200, 7]) };
        assert_eq!(Tensor::from_literal(&lit).unwrap().to_vec::<u8>().unwrap(), vec![200, 7]);
    }

    #[test]
    fn literal_splat_fills_shape() {
        let lit = TensorLit { dtype: DType::F32, shape: vec![2, 2], data: TensorData::Float(vec![1.0, 2.0]) };
        let t = Tensor::from_literal(&lit).unwrap();
        assert_eq!(t.shape(), &[2, 2]);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 2.0, 2.0]);
    }

    #[test]
    fn literal_content_decodes_little_endian() {
        let bytes: Vec<u8> = [3i32, -4].iter().flat_map(|v| v.to_le_bytes()).collect();
        let lit = TensorLit { dtype: DType::I32, shape: vec![2], data: TensorData::Content(bytes) };
        assert_eq!(Tensor::from_literal(&lit).unwrap().to_vec::<i32>().unwrap(), vec![3, -4]);
    }

    #[test]
    fn complex_literals_are_pairs() {
        let bytes: Vec<u8> = [1.0f32, -2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let lit = TensorLit { dtype: DType::C64, shape: vec![2], data: TensorData::Content(bytes) };
        let want = vec![num_complex::Complex32::new(1.0, -2.0), num_complex::Complex32::new(3.0, 4.0)];
        assert_eq!(Tensor::from_literal(&lit).unwrap().to_vec::<num_complex::Complex32>().unwrap(), want);
        let odd = TensorLit { dtype: DType::C128, shape: vec![1], data: TensorData::Double(vec![1.0, 2.0, 3.0]) };
        assert!(Tensor::from_literal(&odd).is_err(), "three parts are not pairs");
    }

    #[test]
    fn from_vec_rejects_wrong_count() {
        assert!(Tensor::from_vec(&[2, 3], vec![1.0f32; 5]).is_err());
    }

    #[test]
    fn bit_eq_distinguishes_signed_zero() {
        assert!(!Tensor::scalar(0.0f32).bit_eq(&Tensor::scalar(-0.0f32)));
        assert!(Tensor::scalar(f32::NAN).bit_eq(&Tensor::scalar(f32::NAN)));
    }

    #[test]
    fn a_tensor_survives_the_literal_round_trip() {
        let values = [
            Tensor::from_vec(&[2, 2], vec![1.5f32, -2.0, 0.0, 7.25]),
            Tensor::from_vec(&[3], vec![1.0f64, -1e-300, 3.5]),
            Tensor::from_vec(&[2], vec![i32::MIN, 5]),
            Tensor::from_vec(&[2], vec![i64::MAX, -3]),
            Tensor::from_vec(&[2], vec![-128i8, 127]),
            Tensor::from_vec(&[2], vec![0u8, 255]),
            Tensor::from_vec(&[3], vec![true, false, true]),
            Tensor::from_vec(&[2], vec![half::bf16::from_f32(1.5), half::bf16::from_f32(-3.0e38)]),
            Tensor::from_vec(&[2], vec![half::f16::from_f32(0.1), half::f16::from_f32(-65504.0)]),
            Tensor::from_vec(
                &[2],
                vec![num_complex::Complex32::new(1.5, -0.0), num_complex::Complex32::new(-3.0, 7.0)],
            ),
            Tensor::from_vec(&[1], vec![num_complex::Complex64::new(1e-300, -2.5)]),
        ];
        for t in values {
            let t = t.expect("a tensor");
            let literal = t.to_literal().unwrap_or_else(|| panic!("{:?} has a literal", t.dtype()));
            let back = Tensor::from_literal(&literal).expect("reads back");
            assert!(back.bit_eq(&t), "{t:?} came back as {back:?}");
        }
        let strings = Tensor::from_vec(&[1], vec![b"s".to_vec()]).expect("a tensor");
        assert!(strings.to_literal().is_none(), "strings are not literals here");
    }
}
