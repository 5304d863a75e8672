//! The tensor-size limit: every tensor whose size comes from data (a
//! `Const` literal, the dims of `Fill`, the multiples of `Tile`, a
//! broadcast, a matrix product, a `.npy` header) is sized here first, with
//! checked arithmetic, before anything is allocated.
//!
//! The limit is process-wide (the CLI sets it from `--max-tensor-bytes`);
//! by default it is half of the memory available when first asked, read
//! from `/proc/meminfo`, or 8 GiB where that cannot be read. Breaking it is
//! a [`KernelError::TooLarge`], which the mesh reports at the op's span.

use std::sync::atomic::{AtomicU64, Ordering};

use super::error::KernelError;
use crate::ir::DType;

/// The limit in bytes; 0 until set or first read.
static MAX_TENSOR_BYTES: AtomicU64 = AtomicU64::new(0);

/// The default where the available memory cannot be read.
const FALLBACK_BYTES: u64 = 8 << 30;

/// Half of `MemAvailable` from `/proc/meminfo`, or `FALLBACK_BYTES`.
pub fn default_max_tensor_bytes() -> u64 {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    });
    available.map_or(FALLBACK_BYTES, |bytes| (bytes / 2).max(1 << 20))
}

/// The current limit in bytes.
pub fn max_tensor_bytes() -> u64 {
    match MAX_TENSOR_BYTES.load(Ordering::Relaxed) {
        0 => {
            let limit = default_max_tensor_bytes();
            // A limit set meanwhile wins over the default.
            let _ = MAX_TENSOR_BYTES.compare_exchange(0, limit, Ordering::Relaxed, Ordering::Relaxed);
            MAX_TENSOR_BYTES.load(Ordering::Relaxed)
        }
        limit => limit,
    }
}

/// Sets the limit (at least 1 byte).
pub fn set_max_tensor_bytes(bytes: u64) {
    MAX_TENSOR_BYTES.store(bytes.max(1), Ordering::Relaxed);
}

/// Bytes one element of `dtype` takes in memory: its width for the numeric
/// dtypes and bool, a byte string's header for strings (its bytes are
/// counted where they are made), and a pointer for handles and variants.
pub fn element_bytes(dtype: DType) -> u64 {
    match (dtype.size_bytes(), dtype) {
        (Some(width), _) => width as u64,
        (None, DType::Str) => std::mem::size_of::<Vec<u8>>() as u64,
        (None, _) => std::mem::size_of::<usize>() as u64,
    }
}

/// The number of elements of a tensor of `shape` and `dtype`, after
/// checking that its bytes fit the limit; the error names `op`.
pub fn checked_elements(op: &str, dtype: DType, shape: &[usize]) -> Result<usize, KernelError> {
    let limit = max_tensor_bytes();
    let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let bytes = elements.and_then(|n| (n as u64).checked_mul(element_bytes(dtype)));
    match (elements, bytes) {
        (Some(n), Some(b)) if b <= limit => super::memory::reserve(op, b).map(|()| n),
        _ => Err(KernelError::TooLarge {
            op: op.to_string(),
            shape: format!("{shape:?}"),
            dtype,
            bytes: bytes.map_or_else(|| "more than 2^64".to_string(), |b| b.to_string()),
            limit,
        }),
    }
}

/// [`checked_elements`] for signed dims: a negative one is an error.
pub fn checked_dims(op: &str, dtype: DType, dims: &[i64]) -> Result<Vec<usize>, KernelError> {
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| KernelError::invalid(op, format!("negative dimension {d}"))))
        .collect::<Result<Vec<_>, _>>()?;
    checked_elements(op, dtype, &shape)?;
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_and_the_limit_are_errors() {
        assert_eq!(checked_elements("Fill", DType::F32, &[2, 3]).unwrap(), 6);
        let huge = checked_elements("Fill", DType::F32, &[usize::MAX, 2]);
        assert!(matches!(huge, Err(KernelError::TooLarge { .. })), "{huge:?}");
        let over = checked_elements("Const", DType::F32, &[1_000_000_000_000]);
        assert!(matches!(over, Err(KernelError::TooLarge { .. })), "{over:?}");
        assert!(checked_dims("Const", DType::F32, &[-1]).is_err());
    }
}
