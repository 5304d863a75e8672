//! Tensor data in and out: JSON nested arrays and NumPy `.npy` files.
//!
//! JSON: a tensor is a nested array of numbers (or bools, or strings), a
//! scalar a bare value. Non-finite floats are written as the strings
//! `"nan"`, `"inf"` and `"-inf"` (JSON has no such numbers) and read back.
//! Floats are printed with the shortest text that reads back to the same
//! value of their own precision (an f32 `0.1` prints as `0.1`).
//!
//! A complex element (c64, c128) is a `[real, imaginary]` pair, the
//! innermost level of the nesting.
//!
//! Every numeric dtype of a [`Tensor`] reads from JSON: floats (f32, f64,
//! bf16, f16) from numbers, rounded to the dtype; integers (i8, u8, i16,
//! u16, i32, i64, u32, u64) from integers in the dtype's range (anything else is an
//! error, never a silent wrap or truncation).
//!
//! `.npy`: read and written with the `npyz` crate for f32, f64, f16, i8, u8,
//! i16, u16, i32, i64, u32, u64, bool, complex64 and complex128, in either byte order;
//! Fortran-order files are transposed on reading. NumPy has no bfloat16:
//! `ml_dtypes` saves one as a 2-byte void dtype (`<V2`) holding the
//! little-endian bits, so a bf16 tensor is written that way, and a `V2`
//! file reads back as bf16 (`np.load(f).view(ml_dtypes.bfloat16)` in
//! Python).

use std::io::Cursor;
use std::path::Path;

use ndarray::{ArrayD, IxDyn};
use npyz::WriterBuilder;
use serde_json::{Number, Value};

use super::error::ExecError;
use super::tensor::{Element, Tensor};
use crate::ir::DType;

const JSON: &str = "JSON";
const NPY: &str = "npy";

/// A tensor as JSON: nested arrays of values, a bare value for a scalar.
pub fn tensor_to_json(tensor: &Tensor) -> Value {
    fn float(x: f64, text: String) -> Value {
        if x.is_nan() {
            Value::String("nan".into())
        } else if x.is_infinite() {
            Value::String(if x > 0.0 { "inf" } else { "-inf" }.into())
        } else {
            // Parse the shortest decimal text of the value's own precision.
            text.parse::<f64>().ok().and_then(Number::from_f64).map_or(Value::Null, Value::Number)
        }
    }
    fn nest<T: Clone>(shape: &[usize], values: &[T], leaf: &impl Fn(&T) -> Value) -> Value {
        match shape.split_first() {
            None => values.first().map_or(Value::Null, leaf),
            Some((&n, rest)) => {
                let step: usize = rest.iter().product();
                Value::Array((0..n).map(|i| nest(rest, &values[i * step..(i + 1) * step], leaf)).collect())
            }
        }
    }
    let shape = tensor.shape().to_vec();
    match tensor {
        Tensor::F32(a) => {
            nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &f32| float(*x as f64, x.to_string()))
        }
        Tensor::F64(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &f64| float(*x, x.to_string())),
        Tensor::I32(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &i32| Value::from(*x)),
        Tensor::I64(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &i64| Value::from(*x)),
        Tensor::Bool(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &bool| Value::Bool(*x)),
        Tensor::BF16(a) => {
            nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &half::bf16| float(x.to_f64(), x.to_string()))
        }
        Tensor::F16(a) => {
            nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &half::f16| float(x.to_f64(), x.to_string()))
        }
        Tensor::I8(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &i8| Value::from(*x)),
        Tensor::U8(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &u8| Value::from(*x)),
        Tensor::I16(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &i16| Value::from(*x)),
        Tensor::U16(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &u16| Value::from(*x)),
        Tensor::U32(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &u32| Value::from(*x)),
        Tensor::U64(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &u64| Value::from(*x)),
        Tensor::C64(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &num_complex::Complex32| {
            Value::Array(vec![float(x.re as f64, x.re.to_string()), float(x.im as f64, x.im.to_string())])
        }),
        Tensor::C128(a) => nest(&shape, &a.iter().copied().collect::<Vec<_>>(), &|x: &num_complex::Complex64| {
            Value::Array(vec![float(x.re, x.re.to_string()), float(x.im, x.im.to_string())])
        }),
        Tensor::Str(a) => nest(&shape, &a.iter().cloned().collect::<Vec<_>>(), &|x: &Vec<u8>| {
            Value::String(String::from_utf8_lossy(x).into_owned())
        }),
        Tensor::Resource(h) => Value::String(format!("<resource {} on {}>", h.name, h.device)),
        Tensor::Variant(_) => Value::String("<variant>".into()),
    }
}

/// A tensor of `dtype` from JSON nested arrays (which must be rectangular).
pub fn tensor_from_json(value: &Value, dtype: DType) -> Result<Tensor, ExecError> {
    if matches!(dtype, DType::C64 | DType::C128) {
        return complex_from_json(value, dtype);
    }
    let mut shape = Vec::new();
    let mut probe = value;
    while let Value::Array(items) = probe {
        shape.push(items.len());
        match items.first() {
            Some(first) => probe = first,
            None => break,
        }
    }
    let mut leaves = Vec::new();
    collect_leaves(value, &shape, 0, &mut leaves)?;
    fn convert<T: Element>(
        shape: &[usize],
        leaves: &[&Value],
        f: impl Fn(&Value) -> Option<T>,
        what: &str,
    ) -> Result<Tensor, ExecError> {
        let values = leaves
            .iter()
            .map(|v| f(v).ok_or_else(|| ExecError::data(JSON, format!("{v} is not {what}"))))
            .collect::<Result<Vec<T>, _>>()?;
        Tensor::from_vec(shape, values).map_err(|e| ExecError::data(JSON, e.to_string()))
    }
    fn as_f64(v: &Value) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => match s.as_str() {
                "nan" | "NaN" => Some(f64::NAN),
                "inf" | "Infinity" => Some(f64::INFINITY),
                "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
                _ => None,
            },
            _ => None,
        }
    }
    match dtype {
        DType::F32 => convert(&shape, &leaves, |v| as_f64(v).map(|x| x as f32), "a number"),
        DType::F64 => convert(&shape, &leaves, as_f64, "a number"),
        DType::BF16 => convert(&shape, &leaves, |v| as_f64(v).map(half::bf16::from_f64), "a number"),
        DType::F16 => convert(&shape, &leaves, |v| as_f64(v).map(half::f16::from_f64), "a number"),
        DType::I8 => convert(&shape, &leaves, |v| v.as_i64().and_then(|x| i8::try_from(x).ok()), "an i8 integer"),
        DType::U8 => convert(&shape, &leaves, |v| v.as_u64().and_then(|x| u8::try_from(x).ok()), "a u8 integer"),
        DType::I16 => convert(&shape, &leaves, |v| v.as_i64().and_then(|x| i16::try_from(x).ok()), "an i16 integer"),
        DType::U16 => convert(&shape, &leaves, |v| v.as_u64().and_then(|x| u16::try_from(x).ok()), "a u16 integer"),
        DType::I32 => convert(&shape, &leaves, |v| v.as_i64().and_then(|x| i32::try_from(x).ok()), "an i32 integer"),
        DType::I64 => convert(&shape, &leaves, Value::as_i64, "an i64 integer"),
        DType::U32 => convert(&shape, &leaves, |v| v.as_u64().and_then(|x| u32::try_from(x).ok()), "a u32 integer"),
        DType::U64 => convert(&shape, &leaves, Value::as_u64, "a u64 integer"),
        DType::Bool => convert(&shape, &leaves, Value::as_bool, "a bool"),
        DType::Str => convert(&shape, &leaves, |v| v.as_str().map(|s| s.as_bytes().to_vec()), "a string"),
        other => Err(ExecError::data(JSON, format!("dtype {other} cannot be read from JSON"))),
    }
}

/// A complex tensor from nested arrays whose innermost level is `[real, imaginary]` pairs.
fn complex_from_json(value: &Value, dtype: DType) -> Result<Tensor, ExecError> {
    let parts = tensor_from_json(value, if dtype == DType::C64 { DType::F32 } else { DType::F64 })?;
    let Some((&2, shape)) = parts.shape().split_last() else {
        return Err(ExecError::data(
            JSON,
            format!("a {dtype} element is a [real, imaginary] pair; the innermost level has shape {:?}", parts.shape()),
        ));
    };
    let made = match &parts {
        Tensor::F32(a) => {
            let v: Vec<f32> = a.iter().copied().collect();
            Tensor::from_vec(shape, v.chunks_exact(2).map(|p| num_complex::Complex32::new(p[0], p[1])).collect())
        }
        Tensor::F64(a) => {
            let v: Vec<f64> = a.iter().copied().collect();
            Tensor::from_vec(shape, v.chunks_exact(2).map(|p| num_complex::Complex64::new(p[0], p[1])).collect())
        }
        other => return Err(ExecError::data(JSON, format!("complex parts read as {}", other.dtype()))),
    };
    made.map_err(|e| ExecError::data(JSON, e.to_string()))
}

fn collect_leaves<'v>(
    value: &'v Value,
    shape: &[usize],
    depth: usize,
    out: &mut Vec<&'v Value>,
) -> Result<(), ExecError> {
    match (value, shape.get(depth)) {
        (Value::Array(items), Some(&n)) => {
            if items.len() != n {
                return Err(ExecError::data(
                    JSON,
                    format!("ragged nested array: {} items at depth {depth}, expected {n}", items.len()),
                ));
            }
            items.iter().try_for_each(|item| collect_leaves(item, shape, depth + 1, out))
        }
        (Value::Array(_), None) => {
            Err(ExecError::data(JSON, format!("ragged nested array: too deep at depth {depth}")))
        }
        (leaf, None) => {
            out.push(leaf);
            Ok(())
        }
        (_, Some(_)) => {
            Err(ExecError::data(JSON, format!("ragged nested array: a value where a list belongs at depth {depth}")))
        }
    }
}

/// The longest `.npy` header accepted; NumPy's own reader refuses more than 10 000 bytes.
const MAX_NPY_HEADER: usize = 10_000;

/// The deepest bracket nesting a `.npy` header may have: the dict holds a
/// shape tuple, and a structured dtype (not supported) one more level.
const MAX_NPY_NESTING: usize = 3;

/// Checks the header of a `.npy` file before npyz parses it: its length,
/// and how deeply it nests brackets, on which npyz's parser is exponential.
fn check_npy_header(bytes: &[u8]) -> Result<(), ExecError> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    let rest = bytes.strip_prefix(MAGIC).ok_or_else(|| ExecError::data(NPY, "not a .npy file (no magic string)"))?;
    let (len, start) = match rest {
        [1, _, a, b, ..] => (usize::from(u16::from_le_bytes([*a, *b])), MAGIC.len() + 4),
        [2 | 3, _, a, b, c, d, ..] => (u32::from_le_bytes([*a, *b, *c, *d]) as usize, MAGIC.len() + 6),
        [major, ..] => return Err(ExecError::data(NPY, format!("unsupported .npy version {major}"))),
        [] => return Err(ExecError::data(NPY, "truncated .npy header")),
    };
    if len > MAX_NPY_HEADER {
        return Err(ExecError::data(NPY, format!("the header is {len} bytes; at most {MAX_NPY_HEADER} are accepted")));
    }
    let header = bytes.get(start..start + len).ok_or_else(|| ExecError::data(NPY, "truncated .npy header"))?;
    let (mut depth, mut quote) = (0usize, None);
    for &b in header {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b'{' | b'(' | b'[') => {
                depth += 1;
                if depth > MAX_NPY_NESTING {
                    return Err(ExecError::data(
                        NPY,
                        format!("the header nests brackets more than {MAX_NPY_NESTING} deep"),
                    ));
                }
            }
            (None, b'}' | b')' | b']') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The `.npy` element kinds read (the descr without its byte-order mark),
/// with the dtype each becomes. `V2` is `ml_dtypes`' bfloat16.
const NPY_KINDS: &[(&str, DType)] = &[
    ("f4", DType::F32),
    ("f8", DType::F64),
    ("f2", DType::F16),
    ("V2", DType::BF16),
    ("i1", DType::I8),
    ("u1", DType::U8),
    ("i2", DType::I16),
    ("u2", DType::U16),
    ("i4", DType::I32),
    ("i8", DType::I64),
    ("u4", DType::U32),
    ("u8", DType::U64),
    ("b1", DType::Bool),
    ("c8", DType::C64),
    ("c16", DType::C128),
];

/// A tensor from the bytes of a `.npy` file. The header is checked first
/// (length, nesting), and the shape against the tensor-size limit and the
/// bytes present, before anything is allocated for the data.
pub fn read_npy(bytes: &[u8]) -> Result<Tensor, ExecError> {
    check_npy_header(bytes)?;
    let file = npyz::NpyFile::new(Cursor::new(bytes)).map_err(|e| ExecError::data(NPY, e.to_string()))?;
    let shape: Vec<usize> = file
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| ExecError::data(NPY, format!("dimension {d} is too large"))))
        .collect::<Result<_, _>>()?;
    let descr = file.dtype().descr();
    let kind = descr.trim_matches(|c| c == '\'' || c == '<' || c == '>' || c == '|' || c == '=').to_string();
    let Some(&(_, dtype)) = NPY_KINDS.iter().find(|(k, _)| *k == kind) else {
        let known: Vec<&str> = NPY_KINDS.iter().map(|(k, _)| *k).collect();
        return Err(ExecError::data(NPY, format!("unsupported dtype {descr} ({} are)", known.join(", "))));
    };
    let elements =
        super::limits::checked_elements("npy", dtype, &shape).map_err(|e| ExecError::data(NPY, e.to_string()))?;
    let needed = elements as u64 * dtype.size_bytes().map_or(8, |b| b as u64);
    if needed > bytes.len() as u64 {
        return Err(ExecError::data(
            NPY,
            format!("shape {shape:?} needs {needed} bytes of data; the file has {}", bytes.len()),
        ));
    }
    let order = file.order();
    fn array<T: Clone + npyz::Deserialize>(
        file: npyz::NpyFile<Cursor<&[u8]>>,
        shape: &[usize],
        order: npyz::Order,
    ) -> Result<ArrayD<T>, ExecError> {
        let values: Vec<T> = file.into_vec().map_err(|e| ExecError::data(NPY, e.to_string()))?;
        match order {
            npyz::Order::C => ArrayD::from_shape_vec(IxDyn(shape), values),
            npyz::Order::Fortran => {
                let reversed: Vec<usize> = shape.iter().rev().copied().collect();
                ArrayD::from_shape_vec(IxDyn(&reversed), values)
                    .map(|a| a.reversed_axes().as_standard_layout().into_owned())
            }
        }
        .map_err(|e| ExecError::data(NPY, e.to_string()))
    }
    fn build<T: Element + npyz::Deserialize>(
        file: npyz::NpyFile<Cursor<&[u8]>>,
        shape: &[usize],
        order: npyz::Order,
    ) -> Result<Tensor, ExecError> {
        array::<T>(file, shape, order).map(Tensor::from_array)
    }
    match dtype {
        DType::F32 => build::<f32>(file, &shape, order),
        DType::F64 => build::<f64>(file, &shape, order),
        DType::F16 => build::<half::f16>(file, &shape, order),
        DType::BF16 => {
            let bits = array::<npyz::FixedSizeBytes<2>>(file, &shape, order)?;
            Ok(Tensor::from_array(bits.mapv(|b| half::bf16::from_bits(u16::from_le_bytes(b.0)))))
        }
        DType::I8 => build::<i8>(file, &shape, order),
        DType::U8 => build::<u8>(file, &shape, order),
        DType::I16 => build::<i16>(file, &shape, order),
        DType::U16 => build::<u16>(file, &shape, order),
        DType::I32 => build::<i32>(file, &shape, order),
        DType::I64 => build::<i64>(file, &shape, order),
        DType::U32 => build::<u32>(file, &shape, order),
        DType::U64 => build::<u64>(file, &shape, order),
        DType::Bool => build::<bool>(file, &shape, order),
        DType::C64 => build::<num_complex::Complex32>(file, &shape, order),
        DType::C128 => build::<num_complex::Complex64>(file, &shape, order),
        other => Err(ExecError::data(NPY, format!("dtype {other} has no .npy reader"))),
    }
}

/// The bytes of a `.npy` file holding `tensor` (C order, little endian).
pub fn write_npy(tensor: &Tensor) -> Result<Vec<u8>, ExecError> {
    fn write<T: Element + npyz::AutoSerialize + Copy>(a: &ndarray::ArcArray<T, IxDyn>) -> Result<Vec<u8>, ExecError> {
        let shape: Vec<u64> = a.shape().iter().map(|&d| d as u64).collect();
        let mut out = Vec::new();
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&shape)
            .writer(&mut out)
            .begin_nd()
            .map_err(|e| ExecError::data(NPY, e.to_string()))?;
        writer.extend(a.iter().copied()).map_err(|e| ExecError::data(NPY, e.to_string()))?;
        writer.finish().map_err(|e| ExecError::data(NPY, e.to_string()))?;
        Ok(out)
    }
    // bfloat16 as `ml_dtypes` saves it: a 2-byte void dtype of little-endian bits.
    fn write_bf16(a: &ndarray::ArcArray<half::bf16, IxDyn>) -> Result<Vec<u8>, ExecError> {
        let shape: Vec<u64> = a.shape().iter().map(|&d| d as u64).collect();
        let void: npyz::TypeStr =
            "|V2".parse().map_err(|e: npyz::ParseTypeStrError| ExecError::data(NPY, e.to_string()))?;
        let mut out = Vec::new();
        let mut writer = npyz::WriteOptions::new()
            .dtype(npyz::DType::Plain(void))
            .shape(&shape)
            .writer(&mut out)
            .begin_nd()
            .map_err(|e| ExecError::data(NPY, e.to_string()))?;
        writer
            .extend(a.iter().map(|v| npyz::FixedSizeBytes(v.to_bits().to_le_bytes())))
            .map_err(|e| ExecError::data(NPY, e.to_string()))?;
        writer.finish().map_err(|e| ExecError::data(NPY, e.to_string()))?;
        Ok(out)
    }
    match tensor {
        Tensor::F32(a) => write(a),
        Tensor::F64(a) => write(a),
        Tensor::I32(a) => write(a),
        Tensor::I64(a) => write(a),
        Tensor::Bool(a) => write(a),
        Tensor::F16(a) => write(a),
        Tensor::BF16(a) => write_bf16(a),
        Tensor::I8(a) => write(a),
        Tensor::U8(a) => write(a),
        Tensor::I16(a) => write(a),
        Tensor::U16(a) => write(a),
        Tensor::U32(a) => write(a),
        Tensor::U64(a) => write(a),
        Tensor::C64(a) => write(a),
        Tensor::C128(a) => write(a),
        other => Err(ExecError::data(NPY, format!("dtype {} cannot be written to .npy", other.dtype()))),
    }
}

/// Reads a `.npy` file.
pub fn read_npy_file(path: &Path) -> Result<Tensor, ExecError> {
    let bytes = std::fs::read(path).map_err(|e| ExecError::data(NPY, format!("{}: {e}", path.display())))?;
    read_npy(&bytes)
}

/// Writes a `.npy` file.
pub fn write_npy_file(path: &Path, tensor: &Tensor) -> Result<(), ExecError> {
    let bytes = write_npy(tensor)?;
    std::fs::write(path, bytes).map_err(|e| ExecError::data(NPY, format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trip_keeps_shape_and_values() {
        let t = Tensor::from_vec(&[2, 3], vec![0.1f32, 2.0, -3.5, f32::NAN, f32::INFINITY, 0.0]).unwrap();
        let j = tensor_to_json(&t);
        assert_eq!(j, json!([[0.1, 2.0, -3.5], ["nan", "inf", 0.0]]));
        let back = tensor_from_json(&j, DType::F32).unwrap();
        assert!(back.bit_eq(&t));
    }

    #[test]
    fn json_complex_elements_are_pairs() {
        let t = Tensor::from_vec(
            &[2],
            vec![num_complex::Complex32::new(0.5, -1.0), num_complex::Complex32::new(f32::NAN, 2.0)],
        )
        .unwrap();
        let j = tensor_to_json(&t);
        assert_eq!(j, json!([[0.5, -1.0], ["nan", 2.0]]));
        assert!(tensor_from_json(&j, DType::C64).unwrap().bit_eq(&t));
        assert!(tensor_from_json(&json!([1.0, 2.0, 3.0]), DType::C128).is_err(), "not pairs");
    }

    #[test]
    fn json_scalar_and_ints() {
        assert_eq!(tensor_to_json(&Tensor::scalar(7i32)), json!(7));
        let t = tensor_from_json(&json!([[1, 2], [3, 4]]), DType::I64).unwrap();
        assert_eq!(t.shape(), &[2, 2]);
        assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn json_rejects_ragged_and_wrong_type() {
        assert!(tensor_from_json(&json!([[1, 2], [3]]), DType::F32).is_err());
        assert!(tensor_from_json(&json!([1.5]), DType::I32).is_err());
        assert!(tensor_from_json(&json!(["x"]), DType::F32).is_err());
    }

    #[test]
    fn json_f64_values_read_back_bit_for_bit() {
        // A sweep of bit patterns across the exponent range, each written in
        // its shortest round-trip form: reading must give the same bits.
        let values: Vec<f64> = (1..20_000u64)
            .map(|i| f64::from_bits(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1))
            .filter(|v| v.is_finite())
            .collect();
        let text = serde_json::to_string(&values).unwrap();
        let t = tensor_from_json(&serde_json::from_str(&text).unwrap(), DType::F64).unwrap();
        for (got, want) in t.to_vec::<f64>().unwrap().iter().zip(&values) {
            assert_eq!(got.to_bits(), want.to_bits(), "{want:e} read as {got:e}");
        }
    }

    #[test]
    fn json_empty_array() {
        let t = tensor_from_json(&json!([]), DType::F32).unwrap();
        assert_eq!(t.shape(), &[0]);
    }

    #[test]
    fn npy_round_trip_each_dtype() {
        let tensors = [
            Tensor::from_vec(&[2, 2], vec![1.5f32, -2.0, 3.25, 4.0]).unwrap(),
            Tensor::from_vec(&[3], vec![1.0f64, 2.0, 3.0]).unwrap(),
            Tensor::from_vec(&[1, 2], vec![7i32, -8]).unwrap(),
            Tensor::scalar(9i64),
            Tensor::from_vec(&[2], vec![true, false]).unwrap(),
            Tensor::from_vec(&[2], vec![num_complex::Complex32::new(1.5, -2.0), num_complex::Complex32::new(0.0, 3.0)])
                .unwrap(),
            Tensor::scalar(num_complex::Complex64::new(-1e-300, 2.5)),
            Tensor::from_vec(&[2], vec![half::f16::from_f32(0.5), half::f16::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![half::bf16::from_f32(1.5), half::bf16::from_f32(-3.0)]).unwrap(),
            Tensor::from_vec(&[2], vec![i8::MIN, i8::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![0u8, u8::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![i16::MIN, i16::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![0u16, u16::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![0u32, u32::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![0u64, u64::MAX]).unwrap(),
        ];
        for t in tensors {
            let bytes = write_npy(&t).unwrap();
            assert_eq!(&bytes[..6], b"\x93NUMPY");
            assert!(read_npy(&bytes).unwrap().bit_eq(&t));
        }
    }

    /// A version 1.0 `.npy` file of `header` (padded as NumPy pads it) and `payload`.
    fn npy_file(header: &str, payload: &[u8]) -> Vec<u8> {
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let mut h = header.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        bytes.extend((h.len() as u16).to_le_bytes());
        bytes.extend(h.as_bytes());
        bytes.extend(payload);
        bytes
    }

    #[test]
    fn npy_reads_fortran_order() {
        // A 2x3 f32 array [[1,2,3],[4,5,6]] stored column-major, as NumPy writes it.
        let payload: Vec<u8> = [1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let bytes = npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", &payload);
        let t = read_npy(&bytes).unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn json_reads_every_numeric_dtype_and_refuses_what_does_not_fit() {
        let tensors = [
            Tensor::from_vec(&[2], vec![half::bf16::from_f32(1.5), half::bf16::from_f32(-3.0)]).unwrap(),
            Tensor::from_vec(&[2], vec![half::f16::from_f32(0.5), half::f16::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![i8::MIN, i8::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![0u8, u8::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![i16::MIN, i16::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![0u16, u16::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![0u32, u32::MAX]).unwrap(),
            Tensor::from_vec(&[2], vec![0u64, u64::MAX]).unwrap(),
        ];
        for t in tensors {
            let back = tensor_from_json(&tensor_to_json(&t), t.dtype()).unwrap();
            assert!(back.bit_eq(&t), "{}: {back:?}", t.dtype());
        }
        for (value, dtype) in [(json!([-1]), DType::U32), (json!([70000]), DType::I16), (json!([1.5]), DType::U64)] {
            assert!(tensor_from_json(&value, dtype).is_err(), "{value} as {dtype}");
        }
    }

    #[test]
    fn npy_reads_bf16_as_ml_dtypes_saves_it() {
        // `np.save(f, np.array([1.5, 2], ml_dtypes.bfloat16))`: a 2-byte void dtype of little-endian bits.
        let bytes = npy_file("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", &[0xC0, 0x3F, 0x00, 0x40]);
        let t = read_npy(&bytes).unwrap();
        assert_eq!(t.to_vec::<half::bf16>().unwrap(), vec![half::bf16::from_f32(1.5), half::bf16::from_f32(2.0)]);
    }
}
