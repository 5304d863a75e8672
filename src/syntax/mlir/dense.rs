//! Scalars and dense element data of the bytecode's attribute entries:
//! integers of a known width extended by their signedness, floats of every
//! width from their bits, blobs, and the dense data of a tensor type (bit
//! packed `i1`, splats). Invariants: data is checked against its type's
//! element count and width before it is decoded, and a splat costs one
//! element whatever the shape.

use super::bytecode::Cursor;
use super::error::MlirError;
use super::{DenseValues, Dim, ElementType, TensorType};

pub(super) fn read_blob<'a>(r: &mut Cursor<'a>) -> Result<&'a [u8], MlirError> {
    let n = r.varint("a blob size")?;
    Ok(r.take(n, "a blob")?.rest())
}

/// An integer of known width: one byte up to 8 bits, else a zigzag varint;
/// extended to `i128` by the type's signedness.
pub(super) fn read_integer(r: &mut Cursor<'_>, element: &ElementType, at: usize) -> Result<i128, MlirError> {
    let (width, unsigned) = match element {
        ElementType::I1 => (1, true),
        ElementType::Signless(w) | ElementType::Signed(w) => (*w, false),
        ElementType::Unsigned(w) => (*w, true),
        ElementType::Index => (64, false),
        other => return Err(MlirError::malformed(at, format!("an integer attribute of type {other:?}"))),
    };
    let raw = if width <= 8 { u64::from(r.byte("an integer")?) } else { r.svarint("an integer")? as u64 };
    Ok(extend(raw, width, unsigned))
}

fn extend(raw: u64, width: u32, unsigned: bool) -> i128 {
    if width >= 64 {
        return if unsigned { i128::from(raw) } else { i128::from(raw as i64) };
    }
    let masked = raw & ((1u64 << width) - 1);
    if unsigned || masked >> (width - 1) == 0 {
        i128::from(masked)
    } else {
        i128::from(masked) - (1i128 << width)
    }
}

/// A float of known semantics, stored as its bits in an integer.
pub(super) fn read_float(r: &mut Cursor<'_>, element: &ElementType, at: usize) -> Result<f64, MlirError> {
    let width = float_width(element, at)?;
    let raw = if width <= 8 { u64::from(r.byte("a float")?) } else { r.svarint("a float")? as u64 };
    float_from_bits(raw, element, at)
}

fn float_width(element: &ElementType, at: usize) -> Result<u32, MlirError> {
    match element {
        ElementType::F16 | ElementType::BF16 => Ok(16),
        ElementType::F32 => Ok(32),
        ElementType::F64 => Ok(64),
        other => Err(MlirError::unsupported(
            at,
            format!("float values of type {other:?}"),
            "f16, bf16, f32 and f64 values are decoded",
        )),
    }
}

fn float_from_bits(raw: u64, element: &ElementType, at: usize) -> Result<f64, MlirError> {
    Ok(match element {
        ElementType::F16 => f64::from(half::f16::from_bits(raw as u16)),
        ElementType::BF16 => f64::from(half::bf16::from_bits(raw as u16)),
        ElementType::F32 => f64::from(f32::from_bits(raw as u32)),
        ElementType::F64 => f64::from_bits(raw),
        other => {
            return Err(MlirError::unsupported(
                at,
                format!("float values of type {other:?}"),
                "f16, bf16, f32 and f64 values are decoded",
            ))
        }
    })
}

/// Bytes per stored element (MLIR rounds integer widths up to whole bytes).
fn storage_bytes(element: &ElementType, at: usize) -> Result<usize, MlirError> {
    Ok(match element {
        ElementType::I1 => 1,
        ElementType::Signless(w) | ElementType::Signed(w) | ElementType::Unsigned(w) => (*w as usize).div_ceil(8),
        ElementType::Index => 8,
        ElementType::Complex(inner) => 2 * storage_bytes(inner, at)?,
        other => float_width(other, at)? as usize / 8,
    })
}

/// Decodes dense element data of `ty`: `(values, splat)`. One stored
/// element means a splat. `i1` data may be bit-packed (eight elements a
/// byte) or a splat byte `0xFF`, as VHLO writes it.
pub(super) fn dense_values(ty: &TensorType, blob: &[u8], at: usize) -> Result<(DenseValues, bool), MlirError> {
    let dims = ty.dims.as_ref().ok_or_else(|| MlirError::malformed(at, "dense data of an unranked tensor"))?;
    let mut n: usize = 1;
    for d in dims {
        match d {
            Dim::Static(s) => {
                n = usize::try_from(*s)
                    .ok()
                    .and_then(|s| n.checked_mul(s))
                    .ok_or_else(|| MlirError::malformed(at, "a dense tensor with more elements than fit in memory"))?
            }
            Dim::Dynamic => return Err(MlirError::malformed(at, "dense data of a dynamically shaped tensor")),
        }
    }
    let element = &ty.element;
    if *element == ElementType::I1 {
        let bools: Vec<bool> = if n > 1 && blob.len() == 1 && (blob[0] == 0xff || blob[0] <= 1) {
            vec![blob[0] != 0]
        } else if blob.len() == n.div_ceil(8) && blob.len() != n {
            (0..n).map(|i| blob[i / 8] >> (i % 8) & 1 == 1).collect()
        } else if blob.len() == n {
            blob.iter().map(|b| *b != 0).collect()
        } else {
            return Err(MlirError::malformed(at, format!("{} bytes of i1 data for {n} elements", blob.len())));
        };
        let splat = bools.len() == 1 && n >= 1;
        return Ok((DenseValues::Bool(bools), splat));
    }
    let size = storage_bytes(element, at)?;
    let count = if n >= 1 && blob.len() == size {
        1
    } else if Some(blob.len()) == n.checked_mul(size) {
        n
    } else {
        return Err(MlirError::malformed(at, format!("{} bytes of data for {n} elements of {size} bytes", blob.len())));
    };
    let chunks = blob.chunks_exact(size.max(1));
    let le = |c: &[u8]| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(b)
    };
    let values = match element {
        ElementType::Signless(w) | ElementType::Signed(w) => {
            DenseValues::Int(chunks.map(|c| extend(le(c), *w, false) as i64).collect())
        }
        ElementType::Index => DenseValues::Int(chunks.map(|c| le(c) as i64).collect()),
        ElementType::Unsigned(w) => DenseValues::UInt(chunks.map(|c| extend(le(c), *w, true) as u64).collect()),
        ElementType::Complex(inner) => {
            let mut v = Vec::with_capacity(count * 2);
            for c in blob.chunks_exact(size / 2) {
                v.push(float_from_bits(le(c), inner, at)?);
            }
            DenseValues::Complex(v)
        }
        other => {
            let mut v = Vec::with_capacity(count);
            for c in chunks {
                v.push(float_from_bits(le(c), other, at)?);
            }
            DenseValues::Float(v)
        }
    };
    Ok((values, count == 1 && n >= 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor_of(dims: &[i64], element: ElementType) -> TensorType {
        TensorType { dims: Some(dims.iter().map(|d| Dim::Static(*d)).collect()), element, bounds: Vec::new() }
    }

    #[test]
    fn i1_data_is_unpacked_from_bits_and_splats() {
        let ty = tensor_of(&[10], ElementType::I1);
        let (values, splat) = dense_values(&ty, &[0b0000_0101, 0b10], 0).unwrap();
        let want = [true, false, true, false, false, false, false, false, false, true];
        assert_eq!(values, DenseValues::Bool(want.to_vec()));
        assert!(!splat);
        assert_eq!(dense_values(&ty, &[0xff], 0).unwrap(), (DenseValues::Bool(vec![true]), true));
        assert!(dense_values(&ty, &[1, 2, 3], 0).is_err());
    }

    #[test]
    fn integers_are_extended_by_signedness_and_floats_by_width() {
        let ty = tensor_of(&[2], ElementType::Signless(8));
        assert_eq!(dense_values(&ty, &[0xff, 0x7f], 0).unwrap().0, DenseValues::Int(vec![-1, 127]));
        let ty = tensor_of(&[2], ElementType::Unsigned(8));
        assert_eq!(dense_values(&ty, &[0xff, 0x7f], 0).unwrap().0, DenseValues::UInt(vec![255, 127]));
        let ty = tensor_of(&[1], ElementType::BF16);
        assert_eq!(dense_values(&ty, &0x3fc0u16.to_le_bytes(), 0).unwrap().0, DenseValues::Float(vec![1.5]));
        let ty = tensor_of(&[3], ElementType::F32);
        assert!(dense_values(&ty, &[0; 8], 0).is_err(), "8 bytes are neither one f32 nor three");
    }

    #[test]
    fn a_huge_splat_costs_one_element() {
        let ty = tensor_of(&[1 << 20, 1 << 20], ElementType::F32);
        let (values, splat) = dense_values(&ty, &1.0f32.to_le_bytes(), 0).unwrap();
        assert!(splat);
        assert_eq!(values.len(), 1);
    }
}
