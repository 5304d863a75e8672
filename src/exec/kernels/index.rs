//! Index arithmetic kernels: Range, Size, FloorMod, DynamicStitch.
//!
//! The gradient of a reduction builds its output shape from these (as
//! TensorFlow's `reduced_shape` does), so they work on i32 and i64 index
//! tensors; FloorMod also takes floats.

use ndarray::IxDyn;

use super::math::broadcast_zip;
use crate::exec::{KernelError, Tensor};
use crate::ir::DType;

/// `Range(start, limit, delta)`: a 1-D tensor of the start's dtype.
pub(crate) fn range(op: &str, start: &Tensor, limit: &Tensor, delta: &Tensor) -> Result<Tensor, KernelError> {
    let scalar = |t: &Tensor, what: &str| -> Result<f64, KernelError> {
        match t {
            Tensor::I32(a) if a.len() == 1 => Ok(f64::from(a.iter().next().copied().unwrap_or(0))),
            Tensor::I64(a) if a.len() == 1 => Ok(a.iter().next().copied().unwrap_or(0) as f64),
            Tensor::F32(a) if a.len() == 1 => Ok(f64::from(a.iter().next().copied().unwrap_or(0.0))),
            Tensor::F64(a) if a.len() == 1 => Ok(a.iter().next().copied().unwrap_or(0.0)),
            other => Err(KernelError::invalid(op, format!("{what} must be a numeric scalar, got {:?}", other.shape()))),
        }
    };
    let (s, l, d) = (scalar(start, "start")?, scalar(limit, "limit")?, scalar(delta, "delta")?);
    if d == 0.0 {
        return Err(KernelError::invalid(op, "delta must not be 0"));
    }
    let n = ((l - s) / d).ceil().max(0.0);
    if n > 1e9 {
        return Err(KernelError::invalid(op, format!("range of {n} elements is too large")));
    }
    let values = (0..n as usize).map(|i| s + d * i as f64);
    Ok(match start.dtype() {
        DType::I32 => Tensor::vector(values.map(|v| v as i32).collect()),
        DType::I64 => Tensor::vector(values.map(|v| v as i64).collect()),
        DType::F64 => Tensor::vector(values.collect()),
        _ => Tensor::vector(values.map(|v| v as f32).collect()),
    })
}

/// `Size(x)`: the number of elements, as `out_type` (i32 by default).
pub(crate) fn size(x: &Tensor, out: DType) -> Tensor {
    let n = x.len();
    match out {
        DType::I64 => Tensor::scalar(n as i64),
        _ => Tensor::scalar(n as i32),
    }
}

/// `FloorMod(x, y)`: the remainder with the sign of `y`, with broadcasting.
pub(crate) fn floor_mod(op: &str, x: &Tensor, y: &Tensor) -> Result<Tensor, KernelError> {
    fn int_mod<T: Copy + PartialOrd + Default + std::ops::Rem<Output = T> + std::ops::Add<Output = T>>(
        a: T,
        b: T,
    ) -> T {
        let r = a % b;
        let zero = T::default();
        if (r < zero && b > zero) || (r > zero && b < zero) {
            r + b
        } else {
            r
        }
    }
    let zero_div = || KernelError::invalid(op, "integer modulo by zero");
    Ok(match (x, y) {
        (Tensor::I32(a), Tensor::I32(b)) => {
            if b.iter().any(|&v| v == 0) {
                return Err(zero_div());
            }
            Tensor::from_array(broadcast_zip(op, a, b, int_mod)?)
        }
        (Tensor::I64(a), Tensor::I64(b)) => {
            if b.iter().any(|&v| v == 0) {
                return Err(zero_div());
            }
            Tensor::from_array(broadcast_zip(op, a, b, int_mod)?)
        }
        (Tensor::F32(a), Tensor::F32(b)) => {
            Tensor::from_array(broadcast_zip(op, a, b, |p: f32, q: f32| p - q * (p / q).floor())?)
        }
        (Tensor::F64(a), Tensor::F64(b)) => {
            Tensor::from_array(broadcast_zip(op, a, b, |p: f64, q: f64| p - q * (p / q).floor())?)
        }
        (a, b) => {
            return Err(KernelError::invalid(
                op,
                format!("operands must share a numeric dtype, got {} and {}", a.dtype(), b.dtype()),
            ))
        }
    })
}

/// `DynamicStitch(indices..., data...)`: `out[indices[m][i]] = data[m][i]`,
/// later pieces overwriting earlier ones.
pub(crate) fn dynamic_stitch(op: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    if inputs.is_empty() || !inputs.len().is_multiple_of(2) {
        return Err(KernelError::invalid(op, "takes N index tensors and N data tensors"));
    }
    let n = inputs.len() / 2;
    let (indices, data) = inputs.split_at(n);
    let index_lists: Vec<Vec<i64>> = indices.iter().map(|t| t.to_i64_vec(op, "indices")).collect::<Result<_, _>>()?;
    let size = index_lists.iter().flatten().copied().max().map_or(0, |m| m + 1);
    if index_lists.iter().flatten().any(|&i| i < 0) {
        return Err(KernelError::invalid(op, "indices must be non-negative"));
    }
    // Every data[m] has shape indices[m].shape + slice shape.
    let slice_shape: Vec<usize> = data[0].shape()[indices[0].shape().len()..].to_vec();
    let slice: usize = slice_shape.iter().product();
    let mut shape = vec![size as usize];
    shape.extend(&slice_shape);
    macro_rules! stitch {
        ($variant:ident, $t:ty) => {{
            let mut out: Vec<$t> = vec![<$t>::default(); size as usize * slice];
            for (idx, d) in index_lists.iter().zip(data) {
                let Tensor::$variant(values) = d else {
                    return Err(KernelError::invalid(op, "data tensors must share one dtype"));
                };
                let values: Vec<$t> = values.iter().cloned().collect();
                if values.len() != idx.len() * slice {
                    return Err(KernelError::invalid(op, "data shape does not match its indices"));
                }
                for (k, &i) in idx.iter().enumerate() {
                    let i = i as usize;
                    out[i * slice..(i + 1) * slice].clone_from_slice(&values[k * slice..(k + 1) * slice]);
                }
            }
            Tensor::from_array(
                ndarray::ArrayD::from_shape_vec(IxDyn(&shape), out)
                    .map_err(|e| KernelError::invalid(op, e.to_string()))?,
            )
        }};
    }
    Ok(match &data[0] {
        Tensor::I32(_) => stitch!(I32, i32),
        Tensor::I64(_) => stitch!(I64, i64),
        Tensor::F32(_) => stitch!(F32, f32),
        Tensor::F64(_) => stitch!(F64, f64),
        other => return Err(KernelError::invalid(op, format!("unsupported dtype {}", other.dtype()))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_kernels_match_hand_computed_values() {
        let r = range("Range", &Tensor::scalar(1i32), &Tensor::scalar(7i32), &Tensor::scalar(2i32)).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![1, 3, 5]);
        let m = floor_mod("FloorMod", &Tensor::vector(vec![-1i32, 5, 7]), &Tensor::scalar(3i32)).unwrap();
        assert_eq!(m.to_vec::<i32>().unwrap(), vec![2, 2, 1]);
        assert_eq!(size(&Tensor::vector(vec![1.0f32, 2.0, 3.0]), DType::I32).to_vec::<i32>().unwrap(), vec![3]);
        // Mean's reduced shape for x of shape [4, 3] reduced over axis 1: [4, 1].
        let stitched = dynamic_stitch(
            "DynamicStitch",
            &[
                Tensor::vector(vec![0i32, 1]),
                Tensor::vector(vec![1i32]),
                Tensor::vector(vec![4i32, 3]),
                Tensor::vector(vec![1i32]),
            ],
        )
        .unwrap();
        assert_eq!(stitched.to_vec::<i32>().unwrap(), vec![4, 1]);
        assert!(floor_mod("FloorMod", &Tensor::scalar(1i32), &Tensor::scalar(0i32)).is_err());
    }
}
