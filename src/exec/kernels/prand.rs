//! The `prand` family: `StochasticCastToInt` on TensorFlow's CPU Philox stream, and
//! `XlaDequantize`, which unpacks four bytes from each u32 into bf16.
//!
//! `StochasticCastToInt(input, key, counter, alg) {Tout}` rounds each float to one of the two
//! integers around it, up with probability equal to its fraction. TensorFlow's CPU kernel
//! builds its Philox generator with the key and counter operands' first words in each
//! other's places: the generator's key is `counter[0]` and its counter's high 64 bits are
//! `key[0]`. The kernel runs as one Eigen expression on one thread, so how many Philox blocks an
//! element uses depends on how Eigen vectorises it on an x86 CPU with AVX (TensorFlow's wheels):
//! - f32 to i32 and f64 to i32 run in chunks of 8 elements: each packet of 8 floats (of 4
//!   doubles) draws one block, and its element `j` uses uniform `j mod 4` (f64: `j mod 2`) of
//!   that block, drawn even for elements that need none; they round up when `x + (1 - u)`
//!   reaches the next integer;
//! - every other pair, and the elements after the last full chunk, run one at a time: NaN gives
//!   0, values beyond `Tout`'s range clamp, integers stay, and every other element draws one
//!   block of which it uses the first uniform, rounding `x + 1 - u` down (`x + u` for negative
//!   `x`).
//!
//! Arithmetic rounds to the input's dtype after each step, as Eigen's does. A float bound that
//! `Tout` cannot hold (f32's `2^31` for i32) converts as x86's truncating conversion does, to
//! `i32::MIN`.
//!
//! `XlaDequantize(input) {min_range, max_range, mode, transpose_output}` is XLA's
//! `Dequantize<uint8>`: each u32 holds four bytes, most significant first, which become
//! `byte * scale + min` in bf16 arithmetic with `scale = (max - min) / 255`, the range rounded to
//! bf16 first; the bytes of an element follow one another along the last axis
//! (`transpose_output`: the result's axes reversed). Only `MIN_COMBINED` exists.

use super::arg;
use super::random::{unit_bf16, unit_f16, unit_f32, unit_f64, Philox};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, AttrValue, DType};

/// The family's ops: they take 16-bit floats as they are (not widened to f32).
pub(super) const OPS: &[&str] = &["StochasticCastToInt", "XlaDequantize"];

/// Runs `op` if it is one of this family's; `None` otherwise.
pub(super) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    match op {
        "StochasticCastToInt" => Some(stochastic_cast(op, attrs, inputs).map(|t| vec![t])),
        "XlaDequantize" => Some(dequantize(op, attrs, inputs).map(|t| vec![t])),
        _ => None,
    }
}

/// The float dtypes a stochastic cast takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Float {
    F16,
    BF16,
    F32,
    F64,
}

impl Float {
    /// `v` rounded to this dtype.
    fn round(self, v: f64) -> f64 {
        match self {
            Float::F16 => half::f16::from_f64(v).to_f64(),
            Float::BF16 => half::bf16::from_f64(v).to_f64(),
            Float::F32 => f64::from(v as f32),
            Float::F64 => v,
        }
    }

    /// The uniforms in `[0, 1)` TensorFlow's CPU makes of one Philox block.
    fn uniforms(self, b: [u32; 4]) -> Vec<f64> {
        match self {
            Float::F16 => b.iter().map(|&x| unit_f16(x).to_f64()).collect(),
            Float::BF16 => b.iter().map(|&x| unit_bf16(x).to_f64()).collect(),
            Float::F32 => b.iter().map(|&x| f64::from(unit_f32(x))).collect(),
            Float::F64 => vec![unit_f64(b[0], b[1]), unit_f64(b[2], b[3])],
        }
    }
}

/// The u64 words of operand `i`, at least `len` of them.
fn words(op: &str, inputs: &[Tensor], i: usize, what: &str, len: usize) -> Result<Vec<u64>, KernelError> {
    let t = arg(op, inputs, i)?;
    let values = t.to_vec::<u64>().ok_or_else(|| KernelError::dtype(op, t.dtype(), format!("{what} must be u64")))?;
    if t.shape().len() != 1 || values.len() < len {
        return Err(KernelError::invalid(
            op,
            format!("{what} must be a vector of at least {len} elements, got shape {:?}", t.shape()),
        ));
    }
    Ok(values)
}

/// `StochasticCastToInt(input, key, counter, alg) {Tout}`.
fn stochastic_cast(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let x = arg(op, inputs, 0)?;
    let key = words(op, inputs, 1, "key", 1)?;
    let counter = words(op, inputs, 2, "counter", 2)?;
    let alg = arg(op, inputs, 3)?;
    match alg.to_i64_vec(op, "alg")?.as_slice() {
        // 3 is auto-select, which TensorFlow's CPU resolves to Philox.
        [1] | [3] if alg.shape().is_empty() => {}
        other => {
            return Err(KernelError::invalid(
                op,
                format!("alg must be a scalar Philox (1) or auto-select (3) id, got {other:?}"),
            ))
        }
    }
    let tout = attrs.get("Tout").and_then(|v| v.as_type()).unwrap_or(DType::I32);
    let (lo, hi) = match tout {
        DType::I8 => (f64::from(i8::MIN), f64::from(i8::MAX)),
        DType::I16 => (f64::from(i16::MIN), f64::from(i16::MAX)),
        DType::I32 => (f64::from(i32::MIN), f64::from(i32::MAX)),
        other => return Err(KernelError::dtype(op, other, "Tout must be i8, i16 or i32")),
    };
    let (float, values): (Float, Vec<f64>) = match x {
        Tensor::F16(a) => (Float::F16, a.iter().map(|v| v.to_f64()).collect()),
        Tensor::BF16(a) => (Float::BF16, a.iter().map(|v| v.to_f64()).collect()),
        Tensor::F32(a) => (Float::F32, a.iter().map(|&v| f64::from(v)).collect()),
        Tensor::F64(a) => (Float::F64, a.iter().copied().collect()),
        other => return Err(KernelError::dtype(op, other.dtype(), "input must be f16, bf16, f32 or f64")),
    };
    // TensorFlow's kernel: the generator's key is the counter operand, and the key operand is the
    // high half of its counter.
    let mut gen = Philox::new(counter[0], [0, key[0]]);
    let r = |v: f64| float.round(v);
    let (max, min) = (r(hi), r(lo));
    // (elements per chunk, elements per block) of the vectorised pairs.
    let vector = match (float, tout) {
        (Float::F32, DType::I32) => Some((8, 8)),
        (Float::F64, DType::I32) => Some((8, 4)),
        _ => None,
    };
    let n = values.len();
    let full = vector.map_or(0, |(chunk, _)| n - n % chunk);
    let mut out = Vec::with_capacity(n);
    let mut uniforms = Vec::new();
    for (i, &s) in values.iter().enumerate() {
        let rounded = if i < full {
            let per_block = vector.map_or(1, |(_, b)| b);
            if i % per_block == 0 {
                uniforms = float.uniforms(gen.next_block());
            }
            let u = uniforms[i % per_block % uniforms.len()];
            let moved = if s.floor() == s {
                s
            } else if s < 0.0 {
                r(s + u).floor()
            } else {
                r(s + r(1.0 - u)).floor()
            };
            let clamped = if max <= s { max } else { moved };
            let clamped = if s <= min { min } else { clamped };
            if s.is_nan() {
                0.0
            } else {
                clamped
            }
        } else if s.is_nan() {
            0.0
        } else if s >= max {
            max
        } else if s <= min {
            min
        } else if s.floor() == s {
            s
        } else {
            let u = float.uniforms(gen.next_block())[0];
            if s < 0.0 {
                r(s + u).floor()
            } else {
                r(r(s + 1.0) - u).floor()
            }
        };
        out.push(rounded);
    }
    // In range a value converts exactly; beyond it (only f32's and bf16's 2^31, and infinities,
    // for i32) x86's truncating conversion gives the "integer indefinite" value.
    let int = |v: f64| if (lo..=hi).contains(&v) { v as i64 } else { i64::from(i32::MIN) };
    match tout {
        DType::I8 => Tensor::from_vec(x.shape(), out.into_iter().map(|v| int(v) as i8).collect()),
        DType::I16 => Tensor::from_vec(x.shape(), out.into_iter().map(|v| int(v) as i16).collect()),
        _ => Tensor::from_vec(x.shape(), out.into_iter().map(|v| int(v) as i32).collect()),
    }
}

/// A float attribute that must be present.
fn float_attr(op: &str, attrs: &AttrMap, key: &str) -> Result<f32, KernelError> {
    match attrs.get(key) {
        Some(AttrValue::Float(f)) => Ok(*f),
        _ => Err(KernelError::invalid(op, format!("missing float attribute `{key}`"))),
    }
}

/// `XlaDequantize(input) {min_range, max_range, mode, transpose_output}`.
fn dequantize(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    use half::bf16;
    let x = arg(op, inputs, 0)?;
    let Some(words) = x.to_vec::<u32>() else {
        return Err(KernelError::dtype(op, x.dtype(), "input must be u32 (four packed bytes)"));
    };
    let Some((&last, outer)) = x.shape().split_last() else {
        return Err(KernelError::invalid(op, "input must have rank 1 or more, got a scalar"));
    };
    match attrs.get_str("mode") {
        Some("MIN_COMBINED") => {}
        other => return Err(KernelError::invalid(op, format!("mode must be MIN_COMBINED, got {other:?}"))),
    }
    let (min, max) =
        (bf16::from_f32(float_attr(op, attrs, "min_range")?), bf16::from_f32(float_attr(op, attrs, "max_range")?));
    // bf16 arithmetic: each step in f32, rounded to bf16.
    let scale = bf16::from_f32(bf16::from_f32(max.to_f32() - min.to_f32()).to_f32() / 255.0);
    let values: Vec<bf16> = words
        .iter()
        .flat_map(|&w| (0..4).rev().map(move |p| (w >> (8 * p)) & 0xFF))
        .map(|byte| bf16::from_f32(bf16::from_f32(byte as f32 * scale.to_f32()).to_f32() + min.to_f32()))
        .collect();
    let mut shape = outer.to_vec();
    shape.push(last * 4);
    let out = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), values)
        .map_err(|e| KernelError::invalid(op, e.to_string()))?;
    if attrs.get_bool("transpose_output").unwrap_or(false) {
        let reversed = out.reversed_axes();
        let dims = reversed.shape().to_vec();
        return Tensor::from_vec(&dims, reversed.iter().copied().collect());
    }
    Ok(Tensor::from_array(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, AttrValue)]) -> AttrMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn dequantize_unpacks_the_most_significant_byte_first() {
        let a = attrs(&[
            ("min_range", AttrValue::Float(0.0)),
            ("max_range", AttrValue::Float(255.0)),
            ("mode", AttrValue::Str("MIN_COMBINED".into())),
        ]);
        let x = Tensor::from_vec(&[1, 2], vec![0x0102_0304u32, 0xFF00_0010]).unwrap();
        let out = dequantize("XlaDequantize", &a, std::slice::from_ref(&x)).unwrap();
        assert_eq!(out.shape(), &[1, 8]);
        let got: Vec<f32> = out.to_vec::<half::bf16>().unwrap().into_iter().map(f32::from).collect();
        assert_eq!(got, vec![1.0, 2.0, 3.0, 4.0, 255.0, 0.0, 0.0, 16.0]);
        let mut t = a.clone();
        t.insert("transpose_output", AttrValue::Bool(true));
        assert_eq!(dequantize("XlaDequantize", &t, std::slice::from_ref(&x)).unwrap().shape(), &[8, 1]);
        let mut bad = a.clone();
        bad.insert("mode", AttrValue::Str("SCALED".into()));
        assert!(dequantize("XlaDequantize", &bad, &[x]).is_err());
        assert!(dequantize("XlaDequantize", &a, &[Tensor::scalar(1u32)]).is_err());
    }

    #[test]
    fn stochastic_casts_keep_integers_and_clamp() {
        let a = attrs(&[("Tout", AttrValue::Type(DType::I8))]);
        let x = Tensor::from_vec(&[4], vec![3.0f32, -300.0, 300.0, f32::NAN]).unwrap();
        let ins = [x, Tensor::vector(vec![5u64]), Tensor::vector(vec![1u64, 2]), Tensor::scalar(1i32)];
        let out = stochastic_cast("StochasticCastToInt", &a, &ins).unwrap();
        assert_eq!(out.to_vec::<i8>().unwrap(), vec![3, -128, 127, 0]);
        let mut bad = ins.clone();
        bad[3] = Tensor::scalar(2i32);
        assert!(stochastic_cast("StochasticCastToInt", &a, &bad).is_err());
    }
}
