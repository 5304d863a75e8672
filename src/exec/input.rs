//! Input distribution: splitting a global batch into per-replica slices,
//! and per-host input pipelines.
//!
//! As TPUStrategy's `split_batch_by = num_replicas_in_sync`, a global batch
//! is cut along dimension 0 into `num_replicas` equal, contiguous slices in
//! replica order: replica `r` gets rows `r * b .. (r + 1) * b` with
//! `b = global_batch_size / num_replicas`. A batch that does not divide is
//! an error with TensorFlow's wording. Slices share nothing with the global
//! tensor once made (each is an owned, standard-layout copy).
//!
//! Per-host input ([`split_per_host`]), as TensorFlow's input workers: each
//! host (task) runs its own input pipeline and feeds only the replicas
//! whose logical core 0 it hosts. Host `h` gives one batch per computation
//! input; it is cut along dimension 0 among that host's replicas, in
//! replica order, exactly as [`split_batch`] cuts a global batch.

use ndarray::{ArcArray, Axis, IxDyn, Slice};

use super::error::ExecError;
use super::tensor::{Element, Tensor};

/// Splits `global` along dimension 0 into `num_replicas` slices, in replica order.
pub fn split_batch(global: &Tensor, num_replicas: usize) -> Result<Vec<Tensor>, ExecError> {
    let Some(&global_batch_size) = global.shape().first() else {
        return Err(ExecError::Unbatchable {
            reason: match global {
                Tensor::Resource(_) => "a resource handle has no batch dimension".into(),
                Tensor::Variant(_) => "a variant (TensorList or Optional) has no batch dimension".into(),
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
        Tensor::BF16(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::F16(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::I8(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::U8(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::I16(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::U16(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::U32(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::U64(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::C64(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::C128(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::Str(a) => slices.map(|s| slice(a, s)).collect(),
        Tensor::Resource(_) | Tensor::Variant(_) => {
            return Err(ExecError::Internal { message: "a handle reported a batch dimension".into() })
        }
    })
}

/// Splits per-host batches among each host's replicas.
///
/// `host_feeds[h]` maps each computation input to host `h`'s batch;
/// `host_replicas[h]` lists the replicas host `h` feeds, in replica order
/// (see `lower::input_workers`). Returns, for each input in order of first
/// appearance, one slice per replica, indexed by replica. Errors: a feed
/// count that differs from the host count, an input some host lacks, a
/// host batch that does not divide among the host's replicas.
pub fn split_per_host(
    host_feeds: &[Vec<(String, Tensor)>],
    host_replicas: &[Vec<u32>],
) -> Result<Vec<(String, Vec<Tensor>)>, ExecError> {
    if host_feeds.len() != host_replicas.len() {
        return Err(ExecError::HostFeedCount { given: host_feeds.len(), hosts: host_replicas.len() });
    }
    let num_replicas = host_replicas.iter().map(Vec::len).sum::<usize>();
    let mut covered = vec![false; num_replicas];
    for &r in host_replicas.iter().flatten() {
        match covered.get_mut(r as usize) {
            Some(seen) if !*seen => *seen = true,
            _ => {
                return Err(ExecError::Internal {
                    message: format!("replica {r} is fed by no host or by two among {num_replicas} replicas"),
                })
            }
        }
    }
    let mut inputs: Vec<(&str, usize)> = Vec::new();
    for (h, feeds) in host_feeds.iter().enumerate() {
        for (name, _) in feeds {
            if !inputs.iter().any(|(n, _)| n == name) {
                inputs.push((name, h));
            }
        }
    }
    let mut out = Vec::with_capacity(inputs.len());
    for (input, first_host) in inputs {
        let mut slices: Vec<Option<Tensor>> = vec![None; num_replicas];
        for (h, (feeds, replicas)) in host_feeds.iter().zip(host_replicas).enumerate() {
            let Some((_, batch)) = feeds.iter().find(|(n, _)| n == input) else {
                return Err(ExecError::HostFeedMissing { host: h, input: input.to_string(), other: first_host });
            };
            let parts = split_batch(batch, replicas.len()).map_err(|e| match e {
                ExecError::IndivisibleBatch { global_batch_size, num_replicas_in_sync } => {
                    ExecError::IndivisibleHostBatch {
                        host: h,
                        input: input.to_string(),
                        host_batch_size: global_batch_size,
                        replicas: num_replicas_in_sync,
                    }
                }
                other => other,
            })?;
            for (&r, part) in replicas.iter().zip(parts) {
                slices[r as usize] = Some(part);
            }
        }
        let slices: Option<Vec<Tensor>> = slices.into_iter().collect();
        let slices = slices.ok_or_else(|| ExecError::Internal { message: "a replica got no slice".into() })?;
        out.push((input.to_string(), slices));
    }
    Ok(out)
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
        let strings = Tensor::vector(vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(split_batch(&strings, 2).unwrap()[1], Tensor::vector(vec![b"b".to_vec()]));
    }

    #[test]
    fn indivisible_batch_uses_tensorflow_wording() {
        let global = Tensor::vector(vec![1i32; 7]);
        let e = split_batch(&global, 2).unwrap_err();
        assert_eq!(e.to_string(), "The `global_batch_size` 7 is not divisible by `num_replicas_in_sync` 2");
        assert!(split_batch(&Tensor::scalar(1.0f32), 1).is_err());
        assert!(split_batch(&global, 0).is_err());
    }

    fn rows(values: &[i32]) -> Tensor {
        Tensor::vector(values.to_vec())
    }

    #[test]
    fn per_host_batches_go_to_each_host_replicas() {
        // Host 0 feeds replicas 0 and 2, host 1 feeds 1 and 3 (an interleaved assignment).
        let hosts = vec![vec![0, 2], vec![1, 3]];
        let feeds = vec![
            vec![("input0:0".to_string(), rows(&[1, 2, 3, 4]))],
            vec![("input0:0".to_string(), rows(&[5, 6, 7, 8]))],
        ];
        let out = split_per_host(&feeds, &hosts).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, "input0:0");
        assert_eq!(out[0].1, vec![rows(&[1, 2]), rows(&[5, 6]), rows(&[3, 4]), rows(&[7, 8])]);
    }

    #[test]
    fn per_host_errors_name_the_numbers() {
        let hosts = vec![vec![0, 1], vec![2, 3]];
        let one = vec![vec![("input0:0".to_string(), rows(&[1, 2]))]];
        assert_eq!(
            split_per_host(&one, &hosts).unwrap_err().to_string(),
            "1 per-host feed(s) were given, but the device assignment has 2 input host(s)"
        );
        let missing =
            vec![vec![("input0:0".to_string(), rows(&[1, 2]))], vec![("input1:0".to_string(), rows(&[1, 2]))]];
        assert_eq!(
            split_per_host(&missing, &hosts).unwrap_err().to_string(),
            "the feed of host 1 has no `input0:0`, which host 0 feeds"
        );
        let odd = vec![vec![("input0:0".to_string(), rows(&[1, 2]))], vec![("input0:0".to_string(), rows(&[1, 2, 3]))]];
        assert_eq!(
            split_per_host(&odd, &hosts).unwrap_err().to_string(),
            "the batch of host 1 for `input0:0` has 3 rows, not divisible by its 2 replica(s)"
        );
    }
}
