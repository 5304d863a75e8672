//! Input distribution: splitting a global batch into per-replica slices.
//!
//! As TPUStrategy's `split_batch_by = num_replicas_in_sync`, a global batch
//! is cut along dimension 0 into `num_replicas` equal, contiguous slices in
//! replica order: replica `r` gets rows `r * b .. (r + 1) * b` with
//! `b = global_batch_size / num_replicas`. A batch that does not divide is
//! an error with TensorFlow's wording. Slices share nothing with the global
//! tensor once made (each is an owned, standard-layout copy).

use ndarray::{ArcArray, Axis, IxDyn, Slice};

use super::error::ExecError;
use super::tensor::{Element, Tensor};

/// Splits `global` along dimension 0 into `num_replicas` slices, in replica order.
pub fn split_batch(global: &Tensor, num_replicas: usize) -> Result<Vec<Tensor>, ExecError> {
    let Some(&global_batch_size) = global.shape().first() else {
        return Err(ExecError::Unbatchable {
            reason: match global {
                Tensor::Resource(_) => "a resource handle has no batch dimension".into(),
                _ => "a scalar has no batch dimension".into(),
            },
        });
    };
    if num_replicas == 0 || !global_batch_size.is_multiple_of(num_replicas) {
        return Err(ExecError::IndivisibleBatch { global_batch_size, num_replicas_in_sync: num_replicas });
    }
    let per_replica = global_batch_size / num_replicas;
    let slices = (0..num_replicas).map(|r| r * per_replica..(r + 1) * per_replica);
    Ok(match global {
        Tensor::F32(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::F64(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::I32(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::I64(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::Bool(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::Str(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::Resource(_) => {
            return Err(ExecError::Internal { message: "a resource handle reported a batch dimension".into() })
        }
    })
}

/// Rows `rows` of `array` along dimension 0, as an owned tensor.
fn slice<T: Element>(array: &ArcArray<T, IxDyn>, rows: std::ops::Range<usize>) -> Tensor {
    Tensor::from_array(array.slice_axis(Axis(0), Slice::from(rows)).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_equals_slicing_by_hand() {
        let global = Tensor::from_vec(&[6, 2], (0..12).map(|i| i as f32).collect()).unwrap();
        let parts = split_batch(&global, 3).unwrap();
        // Rows 0-1, 2-3 and 4-5 of the row-major 6x2 matrix.
        assert_eq!(parts[0], Tensor::from_vec(&[2, 2], vec![0.0f32, 1.0, 2.0, 3.0]).unwrap());
        assert_eq!(parts[1], Tensor::from_vec(&[2, 2], vec![4.0f32, 5.0, 6.0, 7.0]).unwrap());
        assert_eq!(parts[2], Tensor::from_vec(&[2, 2], vec![8.0f32, 9.0, 10.0, 11.0]).unwrap());
        let strings = Tensor::vector(vec!["a".to_string(), "b".to_string()]);
        assert_eq!(split_batch(&strings, 2).unwrap()[1], Tensor::vector(vec!["b".to_string()]));
    }

    #[test]
    fn indivisible_batch_uses_tensorflow_wording() {
        let global = Tensor::vector(vec![1i32; 7]);
        let e = split_batch(&global, 2).unwrap_err();
        assert_eq!(e.to_string(), "The `global_batch_size` 7 is not divisible by `num_replicas_in_sync` 2");
        assert!(split_batch(&Tensor::scalar(1.0f32), 1).is_err());
        assert!(split_batch(&global, 0).is_err());
    }
}
