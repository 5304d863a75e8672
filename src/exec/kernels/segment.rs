//! Segment reductions: `UnsortedSegmentMax`/`Min`/`Prod` and the sorted
//! `SegmentSumV2`/`MaxV2`/`MinV2`/`ProdV2` (`UnsortedSegmentSum` is in
//! `gather`).
//!
//! Each data row (the dimensions the ids cover) is combined into the
//! output row its id names. Negative ids are dropped and an id of
//! `num_segments` or more is an error, as on TensorFlow's CPU kernels.
//! An empty segment holds the reduction's identity: zero, one, or for a
//! maximum (minimum) the lowest (highest) value of the type. TensorFlow
//! runs the V2 ops only under XLA, whose identity for a float maximum is
//! −∞ (+∞ for a minimum): the V2 ops take that one. Cost: linear in the
//! data plus the output.
//!
//! Also the combining scatters: `TensorScatterSub`/`Max`/`Min` and the
//! resource scatters the mesh runs on a variable's value
//! ([`RESOURCE_SCATTERS`]).

use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::DType;

use super::math::Num;

/// How a segment's rows combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduce {
    Sum,
    Prod,
    Max,
    Min,
}

/// The value an empty segment holds, per element type.
pub(crate) trait Identity: Num {
    /// The lowest value, or −∞ when `infinite` (floats only).
    fn lowest(infinite: bool) -> Self;
    /// The highest value, or +∞ when `infinite` (floats only).
    fn highest(infinite: bool) -> Self;
}

macro_rules! float_identity {
    ($t:ty) => {
        impl Identity for $t {
            fn lowest(infinite: bool) -> Self {
                if infinite {
                    <$t>::NEG_INFINITY
                } else {
                    <$t>::MIN
                }
            }
            fn highest(infinite: bool) -> Self {
                if infinite {
                    <$t>::INFINITY
                } else {
                    <$t>::MAX
                }
            }
        }
    };
}

macro_rules! int_identity {
    ($t:ty) => {
        impl Identity for $t {
            fn lowest(_: bool) -> Self {
                <$t>::MIN
            }
            fn highest(_: bool) -> Self {
                <$t>::MAX
            }
        }
    };
}

float_identity!(f32);
float_identity!(f64);
int_identity!(i32);
int_identity!(i64);

impl Reduce {
    fn identity<T: Identity>(self, infinite: bool) -> T {
        match self {
            Reduce::Sum => T::zero(),
            Reduce::Prod => T::one(),
            Reduce::Max => T::lowest(infinite),
            Reduce::Min => T::highest(infinite),
        }
    }

    fn combine<T: Num>(self, a: T, b: T) -> T {
        match self {
            Reduce::Sum => a.add(b),
            Reduce::Prod => a.mul(b),
            // A NaN wins, as in Eigen's max and min.
            Reduce::Max => {
                if b > a || is_nan(&b) {
                    b
                } else {
                    a
                }
            }
            Reduce::Min => {
                if b < a || is_nan(&b) {
                    b
                } else {
                    a
                }
            }
        }
    }
}

/// True for a NaN (the one value not equal to itself); never for an integer.
#[allow(clippy::eq_op)]
fn is_nan<T: PartialEq>(x: &T) -> bool {
    x != x
}

/// `UnsortedSegment<how>(data, segment_ids, num_segments)`, or the sorted
/// V2 form when `xla_identity` (empty float segments hold ±∞ then).
pub(crate) fn segment_reduce(
    op: &str,
    how: Reduce,
    data: &Tensor,
    ids: &Tensor,
    num: &Tensor,
    xla_identity: bool,
) -> Result<Tensor, KernelError> {
    let super::gather::Segments { slice, segs, dims, .. } = super::gather::segments(op, data, ids, num)?;
    fn run<T: Identity>(
        data: &Tensor,
        segs: &[i64],
        how: Reduce,
        dims: &[usize],
        slice: usize,
        infinite: bool,
    ) -> Result<Tensor, KernelError> {
        let values = data.to_vec::<T>().expect("dispatched on this dtype");
        let mut out = vec![how.identity::<T>(infinite); dims.iter().product()];
        for (u, &s) in segs.iter().enumerate() {
            if let Ok(s) = usize::try_from(s) {
                for j in 0..slice {
                    out[s * slice + j] = how.combine(out[s * slice + j], values[u * slice + j]);
                }
            }
        }
        Tensor::from_vec(dims, out)
    }
    match data {
        Tensor::F32(_) => run::<f32>(data, &segs, how, &dims, slice, xla_identity),
        Tensor::F64(_) => run::<f64>(data, &segs, how, &dims, slice, xla_identity),
        Tensor::I32(_) => run::<i32>(data, &segs, how, &dims, slice, xla_identity),
        Tensor::I64(_) => run::<i64>(data, &segs, how, &dims, slice, xla_identity),
        other => Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    }
}

/// `TensorScatterSub`/`Max`/`Min(tensor, indices, updates)`: `tensor`
/// with each update combined into the slice its index vector names.
pub(crate) fn tensor_scatter(
    op: &str,
    how: Scatter,
    tensor: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
) -> Result<Tensor, KernelError> {
    let dims = tensor.shape().to_vec();
    let (offsets, slice, lead) = super::gather::nd_offsets(op, indices, &dims)?;
    let k = indices.shape().last().copied().unwrap_or(0);
    super::gather::check_updates(op, updates, &lead, &dims[k..])?;
    if updates.dtype() != tensor.dtype() {
        return Err(KernelError::invalid(
            op,
            format!("updates are {} but the tensor is {}", updates.dtype(), tensor.dtype()),
        ));
    }
    fn run<T: Num>(
        tensor: &Tensor,
        updates: &Tensor,
        offsets: &[usize],
        slice: usize,
        how: Scatter,
    ) -> Result<Tensor, KernelError> {
        let mut out = tensor.to_vec::<T>().expect("dispatched on this dtype");
        let updates = updates.to_vec::<T>().expect("dtypes were checked equal");
        for (u, &o) in offsets.iter().enumerate() {
            for j in 0..slice {
                let (a, b) = (out[o + j], updates[u * slice + j]);
                out[o + j] = match how {
                    Scatter::Add => a.add(b),
                    Scatter::Sub => a.sub(b),
                    Scatter::Mul => a.mul(b),
                    Scatter::Div => a.div(b),
                    Scatter::Replace => b,
                    Scatter::Max => Reduce::Max.combine(a, b),
                    Scatter::Min => Reduce::Min.combine(a, b),
                };
            }
        }
        Tensor::from_vec(tensor.shape(), out)
    }
    match tensor {
        Tensor::F32(_) => run::<f32>(tensor, updates, &offsets, slice, how),
        Tensor::F64(_) => run::<f64>(tensor, updates, &offsets, slice, how),
        Tensor::I32(_) => run::<i32>(tensor, updates, &offsets, slice, how),
        Tensor::I64(_) => run::<i64>(tensor, updates, &offsets, slice, how),
        other => Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    }
}

/// How a scatter combines an update with the tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scatter {
    Add,
    Sub,
    Mul,
    Div,
    Replace,
    Max,
    Min,
}

/// The resource scatters this module runs: `ResourceScatterMul`/`Div`/
/// `Max`/`Min` (rows named by indices of any shape) and
/// `ResourceScatterNdAdd`/`Sub`/`Update` (index vectors).
pub(crate) const RESOURCE_SCATTERS: &[&str] = &[
    "ResourceScatterDiv",
    "ResourceScatterMax",
    "ResourceScatterMin",
    "ResourceScatterMul",
    "ResourceScatterNdAdd",
    "ResourceScatterNdSub",
    "ResourceScatterNdUpdate",
];

/// The combiner of a resource scatter, and whether it addresses rows (not index vectors).
pub(crate) fn resource_scatter_kind(op: &str) -> Option<(Scatter, bool)> {
    Some(match op {
        "ResourceScatterDiv" => (Scatter::Div, true),
        "ResourceScatterMax" => (Scatter::Max, true),
        "ResourceScatterMin" => (Scatter::Min, true),
        "ResourceScatterMul" => (Scatter::Mul, true),
        "ResourceScatterNdAdd" => (Scatter::Add, false),
        "ResourceScatterNdSub" => (Scatter::Sub, false),
        "ResourceScatterNdUpdate" => (Scatter::Replace, false),
        _ => return None,
    })
}

/// One of [`RESOURCE_SCATTERS`] on the variable's value `var`: its new
/// value. Row scatters take `indices` of any shape and updates shaped
/// `indices.shape + var.shape[1..]`; an integer division by zero is an
/// error, as on TensorFlow's CPU kernel.
pub(crate) fn resource_scatter(
    op: &str,
    var: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
) -> Result<Tensor, KernelError> {
    let (how, rows) = resource_scatter_kind(op).ok_or_else(|| KernelError::invalid(op, "not a resource scatter"))?;
    if how == Scatter::Div && !matches!(updates, Tensor::F32(_) | Tensor::F64(_)) {
        let divisors = super::math::cast(op, updates, DType::I64)?.to_vec::<i64>().unwrap_or_default();
        if divisors.contains(&0) {
            return Err(KernelError::invalid(op, "integer division by zero"));
        }
    }
    if !rows {
        return tensor_scatter(op, how, var, indices, updates);
    }
    let ids = Tensor::from_vec(&[indices.len(), 1], indices.to_i64_vec(op, "indices")?)?;
    let mut shape = vec![indices.len()];
    shape.extend_from_slice(var.shape().get(1..).unwrap_or_default());
    let updates = super::shape::reshape(op, updates, &Tensor::vector(shape.iter().map(|&d| d as i64).collect()))?;
    tensor_scatter(op, how, var, &ids, &updates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Tensor {
        Tensor::from_vec(&[4, 2], vec![1.0f32, -2.0, 3.0, 0.5, -1.0, 4.0, 2.0, 2.0]).unwrap()
    }

    #[test]
    fn reduces_segments_with_identities_for_empty_ones() {
        let ids = Tensor::vector(vec![0i32, 0, -1, 2]);
        let num = Tensor::scalar(3i32);
        let max = segment_reduce("M", Reduce::Max, &data(), &ids, &num, false).unwrap();
        assert_eq!(max.to_vec::<f32>().unwrap(), vec![3.0, 0.5, f32::MIN, f32::MIN, 2.0, 2.0]);
        let min = segment_reduce("M", Reduce::Min, &data(), &ids, &num, true).unwrap();
        assert_eq!(min.to_vec::<f32>().unwrap(), vec![1.0, -2.0, f32::INFINITY, f32::INFINITY, 2.0, 2.0]);
        let prod = segment_reduce("P", Reduce::Prod, &data(), &ids, &num, false).unwrap();
        assert_eq!(prod.to_vec::<f32>().unwrap(), vec![3.0, -1.0, 1.0, 1.0, 2.0, 2.0]);
        let past = segment_reduce("P", Reduce::Sum, &data(), &Tensor::vector(vec![0i32, 3, 0, 0]), &num, false);
        assert!(past.unwrap_err().to_string().contains("segment_ids[1] = 3 is outside [0, 3)"));
    }

    #[test]
    fn scatters_combine_with_the_tensor() {
        let idx = Tensor::from_vec(&[3, 1], vec![1i32, 3, 1]).unwrap();
        let upd = Tensor::from_vec(&[3, 2], vec![5.0f32, 0.0, 1.0, 1.0, 4.0, 9.0]).unwrap();
        let max = tensor_scatter("M", Scatter::Max, &data(), &idx, &upd).unwrap();
        assert_eq!(max.to_vec::<f32>().unwrap(), vec![1.0, -2.0, 5.0, 9.0, -1.0, 4.0, 2.0, 2.0]);
        let sub = tensor_scatter("S", Scatter::Sub, &data(), &idx, &upd).unwrap();
        assert_eq!(sub.to_vec::<f32>().unwrap(), vec![1.0, -2.0, -6.0, -8.5, -1.0, 4.0, 1.0, 1.0]);
        let bad = Tensor::from_vec(&[1, 1], vec![4i32]).unwrap();
        assert!(tensor_scatter(
            "S",
            Scatter::Min,
            &data(),
            &bad,
            &Tensor::from_vec(&[1, 2], vec![0.0f32, 0.0]).unwrap()
        )
        .is_err());
    }
}
