//! The first-version indexing ops, as their successors run them:
//! `Concat(concat_dim, values...)` is `ConcatV2` with the axis first,
//! `Gather(params, indices)` is `GatherV2` along axis 0, and
//! `Reverse(tensor, dims)` is `ReverseV2` over the axes whose flag in the
//! boolean `dims` (one per dimension) is set. Cost: that of the successor.

use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;

/// `Concat(concat_dim, values...)`.
pub(crate) fn concat_v1(op: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let Some((axis, values)) = inputs.split_first() else {
        return Err(KernelError::invalid(op, "needs concat_dim and values"));
    };
    let mut rotated = values.to_vec();
    rotated.push(axis.clone());
    super::layout::concat(op, &rotated)
}

/// `Gather(params, indices)`.
pub(crate) fn gather_v1(op: &str, params: &Tensor, indices: &Tensor) -> Result<Tensor, KernelError> {
    super::gather::gather(op, params, indices, &Tensor::scalar(0i32), 0)
}

/// The axes `Reverse`'s boolean `dims` flags, checked against `rank`.
pub(crate) fn flagged_axes(op: &str, dims: &Tensor, rank: usize) -> Result<Vec<i64>, KernelError> {
    let flags = dims.to_vec::<bool>().ok_or_else(|| KernelError::dtype(op, dims.dtype(), "dims must be bool"))?;
    if dims.shape().len() != 1 || flags.len() != rank {
        return Err(KernelError::invalid(
            op,
            format!("dims must hold one flag per dimension ({rank}), got shape {:?}", dims.shape()),
        ));
    }
    Ok(flags.iter().enumerate().filter(|(_, &f)| f).map(|(a, _)| a as i64).collect())
}

/// `Reverse(tensor, dims)`.
pub(crate) fn reverse_v1(op: &str, x: &Tensor, dims: &Tensor) -> Result<Tensor, KernelError> {
    let axes = flagged_axes(op, dims, x.shape().len())?;
    super::shape::reverse(op, x, &Tensor::vector(axes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_versions_run_as_their_successors() {
        let a = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let b = Tensor::from_vec(&[2, 1], vec![5.0f32, 6.0]).unwrap();
        let c = concat_v1("Concat", &[Tensor::scalar(1i32), a.clone(), b]).unwrap();
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
        let g = gather_v1("Gather", &a, &Tensor::vector(vec![1i64, 1, 0])).unwrap();
        assert_eq!(g.to_vec::<f32>().unwrap(), vec![3.0, 4.0, 3.0, 4.0, 1.0, 2.0]);
        let r = reverse_v1("Reverse", &a, &Tensor::vector(vec![false, true])).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![2.0, 1.0, 4.0, 3.0]);
        assert!(reverse_v1("Reverse", &a, &Tensor::vector(vec![true])).is_err());
    }
}
