//! Attribute values and their types: dtypes, shapes, tensor literals.
//!
//! These mirror TensorFlow's `AttrValue`, `DataType`, `TensorShapeProto`
//! and `TensorProto` closely enough that a GraphDef imports and exports
//! without loss: strings are bytes, tensor literals keep whether they were
//! written as repeated values or as raw `tensor_content`.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A tensor element type. Numbers match TensorFlow's `DataType` enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DType {
    /// 32-bit float (`f32`, `DT_FLOAT`).
    F32,
    /// 64-bit float (`f64`, `DT_DOUBLE`).
    F64,
    /// 32-bit signed integer (`i32`, `DT_INT32`).
    I32,
    /// 8-bit unsigned integer (`u8`, `DT_UINT8`).
    U8,
    /// 16-bit signed integer (`i16`, `DT_INT16`).
    I16,
    /// 8-bit signed integer (`i8`, `DT_INT8`).
    I8,
    /// Byte string (`string`, `DT_STRING`).
    Str,
    /// Complex of two 32-bit floats (`c64`, `DT_COMPLEX64`).
    C64,
    /// 64-bit signed integer (`i64`, `DT_INT64`).
    I64,
    /// Boolean (`bool`, `DT_BOOL`).
    Bool,
    /// Brain float, 8 exponent and 7 mantissa bits (`bf16`, `DT_BFLOAT16`).
    BF16,
    /// 16-bit unsigned integer (`u16`, `DT_UINT16`).
    U16,
    /// Complex of two 64-bit floats (`c128`, `DT_COMPLEX128`).
    C128,
    /// IEEE half float (`f16`, `DT_HALF`).
    F16,
    /// A handle to a resource such as a variable (`resource`, `DT_RESOURCE`).
    Resource,
    /// An opaque value such as a tensor list (`variant`, `DT_VARIANT`).
    Variant,
    /// 32-bit unsigned integer (`u32`, `DT_UINT32`).
    U32,
    /// 64-bit unsigned integer (`u64`, `DT_UINT64`).
    U64,
    /// Quantized 8-bit signed integer (`qint8`, `DT_QINT8`); its values are `i8`.
    QInt8,
    /// Quantized 8-bit unsigned integer (`quint8`, `DT_QUINT8`); its values are `u8`.
    QUInt8,
    /// Quantized 32-bit signed integer (`qint32`, `DT_QINT32`); its values are `i32`.
    QInt32,
    /// Quantized 16-bit signed integer (`qint16`, `DT_QINT16`); its values are `i16`.
    QInt16,
    /// Quantized 16-bit unsigned integer (`quint16`, `DT_QUINT16`); its values are `u16`.
    QUInt16,
    /// Any other `DataType` number, kept as is (e.g. reference types, 101+).
    Other(i32),
}

const DTYPE_TABLE: &[(DType, i32, &str)] = &[
    (DType::F32, 1, "f32"),
    (DType::F64, 2, "f64"),
    (DType::I32, 3, "i32"),
    (DType::U8, 4, "u8"),
    (DType::I16, 5, "i16"),
    (DType::I8, 6, "i8"),
    (DType::Str, 7, "string"),
    (DType::C64, 8, "c64"),
    (DType::I64, 9, "i64"),
    (DType::Bool, 10, "bool"),
    (DType::QInt8, 11, "qint8"),
    (DType::QUInt8, 12, "quint8"),
    (DType::QInt32, 13, "qint32"),
    (DType::BF16, 14, "bf16"),
    (DType::QInt16, 15, "qint16"),
    (DType::QUInt16, 16, "quint16"),
    (DType::U16, 17, "u16"),
    (DType::C128, 18, "c128"),
    (DType::F16, 19, "f16"),
    (DType::Resource, 20, "resource"),
    (DType::Variant, 21, "variant"),
    (DType::U32, 22, "u32"),
    (DType::U64, 23, "u64"),
];

impl DType {
    /// The TensorFlow `DataType` number.
    pub fn number(self) -> i32 {
        match self {
            DType::Other(n) => n,
            known => DTYPE_TABLE.iter().find(|e| e.0 == known).map_or(0, |e| e.1),
        }
    }

    /// The dtype for a TensorFlow `DataType` number.
    pub fn from_number(n: i32) -> DType {
        DTYPE_TABLE.iter().find(|e| e.1 == n).map_or(DType::Other(n), |e| e.0)
    }

    /// The dtype for its `.opg` name (`f32`, `i64`, `string`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        DTYPE_TABLE.iter().find(|e| e.2 == name).map(|e| e.0)
    }

    /// All names the text format accepts, for help messages.
    pub fn names() -> impl Iterator<Item = &'static str> {
        DTYPE_TABLE.iter().map(|e| e.2)
    }

    /// The plain integer dtype whose values a quantized dtype holds
    /// (`qint8` → `i8`, `quint8` → `u8`, `qint32` → `i32`, `qint16` → `i16`,
    /// `quint16` → `u16`); every other dtype is its own. A graph keeps the
    /// quantized dtype (it round-trips to TensorFlow); tensors, kernels and
    /// lowerings work on the plain one, as TensorFlow's CPU kernels and its
    /// XLA bridge do.
    pub fn plain(self) -> DType {
        match self {
            DType::QInt8 => DType::I8,
            DType::QUInt8 => DType::U8,
            DType::QInt32 => DType::I32,
            DType::QInt16 => DType::I16,
            DType::QUInt16 => DType::U16,
            other => other,
        }
    }

    /// True for TensorFlow's quantized dtypes (`qint8`, `quint8`, `qint32`, `qint16`, `quint16`).
    pub fn is_quantized(self) -> bool {
        self.plain() != self
    }

    /// The storage class of this dtype's values in a tensor literal.
    pub fn storage(self) -> Storage {
        match self.plain() {
            DType::F32 => Storage::Float,
            DType::F64 => Storage::Double,
            DType::F16 | DType::BF16 => Storage::Half,
            DType::I32 | DType::I16 | DType::I8 | DType::U8 | DType::U16 => Storage::Int,
            DType::I64 => Storage::Int64,
            DType::U32 => Storage::Uint32,
            DType::U64 => Storage::Uint64,
            DType::Bool => Storage::Bool,
            DType::Str => Storage::Str,
            _ => Storage::Opaque,
        }
    }

    /// Bytes per element of the fixed-width numeric dtypes and bool; `None` for the others.
    pub fn size_bytes(self) -> Option<usize> {
        Some(match self.plain() {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 | DType::C64 => 8,
            DType::C128 => 16,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match DTYPE_TABLE.iter().find(|e| e.0 == *self) {
            Some(e) => f.write_str(e.2),
            None => write!(f, "dtype({})", self.number()),
        }
    }
}

/// Which repeated field of a `TensorProto` holds a dtype's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// `float_val`.
    Float,
    /// `double_val`.
    Double,
    /// `half_val`: f16 and bf16 bit patterns widened to `int32`.
    Half,
    /// `int_val`: the integer types of 32 bits and fewer.
    Int,
    /// `int64_val`.
    Int64,
    /// `uint32_val`.
    Uint32,
    /// `uint64_val`.
    Uint64,
    /// `bool_val`.
    Bool,
    /// `string_val`.
    Str,
    /// No value list in the text format (complex, resource, variant); only `bytes`.
    Opaque,
}

/// A tensor shape; `dims == None` is an unknown rank, a dim of -1 is unknown.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Shape {
    /// The size of each dimension, outermost first; `None` when the rank is unknown.
    pub dims: Option<Vec<i64>>,
}

impl Shape {
    /// A shape of known rank.
    pub fn known(dims: Vec<i64>) -> Shape {
        Shape { dims: Some(dims) }
    }

    /// A shape of unknown rank.
    pub fn unknown() -> Shape {
        Shape { dims: None }
    }

    /// True when the rank and all dims are known.
    pub fn is_fully_defined(&self) -> bool {
        self.dims.as_ref().is_some_and(|d| d.iter().all(|&x| x >= 0))
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.dims {
            None => f.write_str("shape[*]"),
            Some(dims) => {
                f.write_str("shape[")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    if *d < 0 {
                        f.write_str("?")?;
                    } else {
                        write!(f, "{d}")?;
                    }
                }
                f.write_str("]")
            }
        }
    }
}

/// The values of a tensor literal, in the field TensorFlow would use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TensorData {
    /// Raw little-endian `tensor_content` bytes.
    Content(Vec<u8>),
    /// `float_val`.
    Float(Vec<f32>),
    /// `double_val`.
    Double(Vec<f64>),
    /// `half_val`: f16 / bf16 bit patterns.
    Half(Vec<i32>),
    /// `int_val`: the integer types of 32 bits and fewer.
    Int(Vec<i32>),
    /// `int64_val`.
    Int64(Vec<i64>),
    /// `uint32_val`.
    Uint32(Vec<u32>),
    /// `uint64_val`.
    Uint64(Vec<u64>),
    /// `bool_val`.
    Bool(Vec<bool>),
    /// `string_val`: one byte string per element.
    Str(Vec<Vec<u8>>),
}

impl TensorData {
    /// Number of values written (a single value fills the whole shape).
    pub fn len(&self) -> usize {
        match self {
            TensorData::Content(b) => b.len(),
            TensorData::Float(v) => v.len(),
            TensorData::Double(v) => v.len(),
            TensorData::Half(v) => v.len(),
            TensorData::Int(v) => v.len(),
            TensorData::Int64(v) => v.len(),
            TensorData::Uint32(v) => v.len(),
            TensorData::Uint64(v) => v.len(),
            TensorData::Bool(v) => v.len(),
            TensorData::Str(v) => v.len(),
        }
    }

    /// True when no value is written (the tensor is all zeros).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A dense tensor literal: dtype, fully known shape and values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorLit {
    /// The element type.
    pub dtype: DType,
    /// The size of each dimension, outermost first; all known.
    pub shape: Vec<i64>,
    /// The values; a single value fills the whole shape, and none means zeros.
    pub data: TensorData,
}

impl TensorLit {
    /// Number of elements the shape holds.
    pub fn num_elements(&self) -> usize {
        self.shape.iter().map(|&d| d.max(0) as usize).product()
    }

    /// The values as f64, expanding a splat; `None` for strings and opaque bytes.
    pub fn to_f64_vec(&self) -> Option<Vec<f64>> {
        let n = self.num_elements();
        let values: Vec<f64> = match &self.data {
            TensorData::Float(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Double(v) => v.clone(),
            TensorData::Int(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Int64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Uint32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Uint64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
            TensorData::Content(bytes) => return decode_content(self.dtype, bytes),
            TensorData::Half(_) | TensorData::Str(_) => return None,
        };
        Some(expand(values, n))
    }
}

fn expand(values: Vec<f64>, n: usize) -> Vec<f64> {
    if values.len() == n {
        values
    } else if values.is_empty() {
        vec![0.0; n]
    } else {
        // TensorFlow repeats the last value to fill the shape.
        let last = *values.last().expect("non-empty");
        let mut v = values;
        v.resize(n, last);
        v.truncate(n);
        v
    }
}

fn decode_content(dtype: DType, bytes: &[u8]) -> Option<Vec<f64>> {
    macro_rules! chunks {
        ($t:ty, $n:expr) => {
            bytes.chunks_exact($n).map(|c| <$t>::from_le_bytes(c.try_into().expect("exact chunk")) as f64).collect()
        };
    }
    Some(match dtype.plain() {
        DType::F32 => chunks!(f32, 4),
        DType::F64 => chunks!(f64, 8),
        DType::I32 => chunks!(i32, 4),
        DType::I64 => chunks!(i64, 8),
        DType::I16 => chunks!(i16, 2),
        DType::U16 => chunks!(u16, 2),
        DType::U32 => chunks!(u32, 4),
        DType::U64 => chunks!(u64, 8),
        DType::I8 => bytes.iter().map(|&b| b as i8 as f64).collect(),
        DType::U8 => bytes.iter().map(|&b| b as f64).collect(),
        DType::Bool => bytes.iter().map(|&b| f64::from(u8::from(b != 0))).collect(),
        _ => return None,
    })
}

/// A function reference: `func "name" {attrs}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FuncRef {
    /// The name of the function in the module's library.
    pub name: String,
    /// The attributes the function is instantiated with.
    pub attrs: super::attrs::AttrMap,
}

/// A typed attribute value, as in TensorFlow's `AttrValue`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AttrValue {
    /// A byte string that is valid UTF-8 (shared: a cloned attribute map
    /// copies no string).
    Str(Arc<str>),
    /// A byte string that is not valid UTF-8.
    Bytes(Vec<u8>),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f32),
    /// A boolean.
    Bool(bool),
    /// A dtype (`T = f32`).
    Type(DType),
    /// A shape, possibly partly unknown.
    Shape(Shape),
    /// A tensor literal (shared: cloning a `Const` copies no data).
    Tensor(Arc<TensorLit>),
    /// A list of values (`[1, 2]`).
    List(Vec<AttrValue>),
    /// A function reference, as `While` and `If` bodies are given.
    Func(Box<FuncRef>),
    /// A reference to an attribute of the enclosing function, to be substituted when it is instantiated (TensorFlow's `placeholder`).
    Placeholder(String),
}

/// The kind of an attribute value, for type checks and messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// A string or byte string.
    Str,
    /// An integer.
    Int,
    /// A float.
    Float,
    /// A boolean.
    Bool,
    /// A dtype.
    Type,
    /// A shape.
    Shape,
    /// A tensor literal.
    Tensor,
    /// A list of values.
    List,
    /// A function reference.
    Func,
    /// A reference to an enclosing function's attribute.
    Placeholder,
}

/// Displays with an article: "a string", "an int".
impl fmt::Display for AttrKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AttrKind::Str => "a string",
            AttrKind::Int => "an int",
            AttrKind::Float => "a float",
            AttrKind::Bool => "a bool",
            AttrKind::Type => "a dtype",
            AttrKind::Shape => "a shape",
            AttrKind::Tensor => "a tensor",
            AttrKind::List => "a list",
            AttrKind::Func => "a func",
            AttrKind::Placeholder => "a placeholder",
        })
    }
}

impl AttrValue {
    /// A string value from bytes, choosing `Str` when they are UTF-8.
    pub fn from_bytes(bytes: Vec<u8>) -> AttrValue {
        match String::from_utf8(bytes) {
            Ok(s) => AttrValue::Str(s.into()),
            Err(e) => AttrValue::Bytes(e.into_bytes()),
        }
    }

    /// A string value.
    pub fn str(s: impl Into<Arc<str>>) -> AttrValue {
        AttrValue::Str(s.into())
    }

    /// The value's kind.
    pub fn kind(&self) -> AttrKind {
        match self {
            AttrValue::Str(_) | AttrValue::Bytes(_) => AttrKind::Str,
            AttrValue::Int(_) => AttrKind::Int,
            AttrValue::Float(_) => AttrKind::Float,
            AttrValue::Bool(_) => AttrKind::Bool,
            AttrValue::Type(_) => AttrKind::Type,
            AttrValue::Shape(_) => AttrKind::Shape,
            AttrValue::Tensor(_) => AttrKind::Tensor,
            AttrValue::List(_) => AttrKind::List,
            AttrValue::Func(_) => AttrKind::Func,
            AttrValue::Placeholder(_) => AttrKind::Placeholder,
        }
    }

    /// The string, if this is a UTF-8 string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is an int value.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            AttrValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The bool, if this is a bool value.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            AttrValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The dtype, if this is a type value.
    pub fn as_type(&self) -> Option<DType> {
        match self {
            AttrValue::Type(t) => Some(*t),
            _ => None,
        }
    }

    /// The items, if this is a list value.
    pub fn as_list(&self) -> Option<&[AttrValue]> {
        match self {
            AttrValue::List(l) => Some(l),
            _ => None,
        }
    }

    /// The tensor, if this is a tensor value.
    pub fn as_tensor(&self) -> Option<&TensorLit> {
        match self {
            AttrValue::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The shape, if this is a shape value.
    pub fn as_shape(&self) -> Option<&Shape> {
        match self {
            AttrValue::Shape(s) => Some(s),
            _ => None,
        }
    }

    /// The integers of a list of ints.
    pub fn as_int_list(&self) -> Option<Vec<i64>> {
        self.as_list()?.iter().map(AttrValue::as_int).collect()
    }
}
