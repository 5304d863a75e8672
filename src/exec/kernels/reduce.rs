//! Reductions beyond `Sum`/`Mean`: `Max`, `Min`, `Prod`, `Any`, `All`,
//! `ArgMax`, `ArgMin`, `Cumsum`, `L2Loss`.
//!
//! Each reduced axis is folded in index order (a fixed order, so results
//! are reproducible); the cost is one pass over the input per reduced axis.

use ndarray::{ArcArray, ArrayD, Axis, IxDyn};

use super::elementwise::{with_float, Flt};
use super::math::Num;
use crate::exec::error::KernelError;
use crate::exec::tensor::{Element, Tensor};
use crate::ir::DType;

/// `InTopKV2(predictions, targets, k)`: per row, whether fewer than `k`
/// classes score strictly higher than the target class. A target out of
/// range or with a non-finite score is never in the top `k`.
pub(crate) fn in_top_k(op: &str, predictions: &Tensor, targets: &Tensor, k: &Tensor) -> Result<Tensor, KernelError> {
    let (rows, classes) = match predictions.shape() {
        &[r, c] => (r, c),
        s => return Err(KernelError::invalid(op, format!("predictions must be a matrix, got shape {s:?}"))),
    };
    let targets = targets.to_i64_vec(op, "targets")?;
    if targets.len() != rows {
        return Err(KernelError::invalid(op, format!("{} targets for {rows} rows", targets.len())));
    }
    let k = match k.to_i64_vec(op, "k")?.as_slice() {
        &[k] => k,
        _ => return Err(KernelError::invalid(op, "k must be a scalar")),
    };
    if !matches!(predictions.dtype(), DType::BF16 | DType::F16 | DType::F32 | DType::F64) {
        return Err(KernelError::dtype(op, predictions.dtype(), "predictions must be floating point"));
    }
    let scores = super::math::cast(op, predictions, DType::F64)?
        .to_vec::<f64>()
        .ok_or_else(|| KernelError::invalid(op, "predictions did not widen to f64"))?;
    let out: Vec<bool> = (0..rows)
        .map(|r| {
            let row = &scores[r * classes..(r + 1) * classes];
            match usize::try_from(targets[r]).ok().and_then(|t| row.get(t)) {
                Some(&target) if target.is_finite() => (row.iter().filter(|&&s| s > target).count() as i64) < k,
                _ => false,
            }
        })
        .collect();
    Ok(Tensor::vector(out))
}

/// Normalised, sorted, distinct axes of `axes` for a tensor of `rank`.
pub(crate) fn norm_axes(op: &str, axes: &Tensor, rank: usize) -> Result<Vec<usize>, KernelError> {
    let mut out = Vec::new();
    for a in axes.to_i64_vec(op, "axis")? {
        // A scalar has nothing to reduce; TensorFlow accepts axis 0 or -1 for it.
        let r = (rank as i64).max(1);
        if a < -r || a >= r {
            return Err(KernelError::invalid(op, format!("axis {a} is out of range for rank {rank}")));
        }
        let a = if a < 0 { a + r } else { a } as usize;
        if rank > 0 && !out.contains(&a) {
            out.push(a);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Folds `a` over `axes` with `f` from `init`, keeping the axes as size 1 when `keep`.
fn fold<T: Clone>(a: &ArcArray<T, IxDyn>, axes: &[usize], keep: bool, init: T, f: impl Fn(&T, &T) -> T) -> ArrayD<T> {
    let mut out = a.to_owned();
    for &ax in axes.iter().rev() {
        out = out.fold_axis(Axis(ax), init.clone(), |acc, x| f(acc, x));
        if keep {
            out.insert_axis_inplace(Axis(ax));
        }
    }
    out
}

/// Which reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    Max,
    Min,
    Prod,
    Any,
    All,
}

/// `Max`, `Min`, `Prod` (numeric) and `Any`, `All` (bool) over `axes`.
pub(crate) fn reduce(op: &str, r: Reduction, x: &Tensor, axes: &Tensor, keep: bool) -> Result<Tensor, KernelError> {
    let axes = norm_axes(op, axes, x.shape().len())?;
    fn float<T: Flt>(r: Reduction, a: &ArcArray<T, IxDyn>, axes: &[usize], keep: bool) -> Tensor {
        // NaN propagates through Max and Min, as in TensorFlow.
        Tensor::from_array(match r {
            Reduction::Max => fold(a, axes, keep, T::neg_infinity(), |&m, &v| if m.is_nan() || m >= v { m } else { v }),
            Reduction::Min => fold(a, axes, keep, T::infinity(), |&m, &v| if m.is_nan() || m <= v { m } else { v }),
            _ => fold(a, axes, keep, T::one(), |&p, &v| p * v),
        })
    }
    fn int<T: Num + Ord + Bounded>(r: Reduction, a: &ArcArray<T, IxDyn>, axes: &[usize], keep: bool) -> Tensor {
        Tensor::from_array(match r {
            Reduction::Max => fold(a, axes, keep, T::MIN, |&m, &v| m.max(v)),
            Reduction::Min => fold(a, axes, keep, T::MAX, |&m, &v| m.min(v)),
            _ => fold(a, axes, keep, T::one(), |&p, &v| p.mul(v)),
        })
    }
    match (r, x) {
        (Reduction::Any | Reduction::All, Tensor::Bool(a)) => Ok(Tensor::from_array(if r == Reduction::Any {
            fold(a, &axes, keep, false, |&p, &v| p || v)
        } else {
            fold(a, &axes, keep, true, |&p, &v| p && v)
        })),
        (Reduction::Any | Reduction::All, other) => {
            Err(KernelError::dtype(op, other.dtype(), "a bool input is required"))
        }
        (_, Tensor::I32(a)) => Ok(int(r, a, &axes, keep)),
        (_, Tensor::I64(a)) => Ok(int(r, a, &axes, keep)),
        (_, other) => with_float!(op, other, a, T => Ok(float::<T>(r, a, &axes, keep))),
    }
}

/// Integer types with a least and a greatest value.
pub(crate) trait Bounded {
    const MIN: Self;
    const MAX: Self;
}

impl Bounded for i32 {
    const MIN: i32 = i32::MIN;
    const MAX: i32 = i32::MAX;
}

impl Bounded for i64 {
    const MIN: i64 = i64::MIN;
    const MAX: i64 = i64::MAX;
}

/// `ArgMax` / `ArgMin(x, dimension) {output_type}`: the first index of the extreme value.
pub(crate) fn arg_extreme(op: &str, max: bool, x: &Tensor, axis: &Tensor, out: DType) -> Result<Tensor, KernelError> {
    let rank = x.shape().len();
    let axes = norm_axes(op, axis, rank)?;
    let &[ax] = axes.as_slice() else {
        return Err(KernelError::invalid(op, "dimension must be one axis"));
    };
    if x.shape()[ax] == 0 {
        return Err(KernelError::invalid(op, "reduction over an empty axis"));
    }
    fn run<T: Element + PartialOrd + Copy>(
        a: &ArcArray<T, IxDyn>,
        ax: usize,
        max: bool,
        nan: impl Fn(T) -> bool,
    ) -> ArrayD<i64> {
        a.map_axis(Axis(ax), |lane| {
            let mut best = 0usize;
            for (i, &v) in lane.iter().enumerate().skip(1) {
                let b = lane[best];
                if nan(b) {
                    break;
                }
                if nan(v) || (max && v > b) || (!max && v < b) {
                    best = i;
                }
            }
            best as i64
        })
    }
    let idx = match x {
        Tensor::F32(a) => run(a, ax, max, f32::is_nan),
        Tensor::F64(a) => run(a, ax, max, f64::is_nan),
        Tensor::I32(a) => run(a, ax, max, |_| false),
        Tensor::I64(a) => run(a, ax, max, |_| false),
        other => return Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    };
    match out {
        DType::I64 => Ok(Tensor::from_array(idx)),
        DType::I32 => Ok(Tensor::from_array(idx.mapv(|v| v as i32))),
        other => Err(KernelError::dtype(op, other, "output_type must be i32 or i64")),
    }
}

/// The combining step of a running scan along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// `Cumsum`: running sums, starting from 0.
    Sum,
    /// `Cumprod`: running products, starting from 1.
    Product,
}

/// `Cumsum(x, axis) {exclusive, reverse}`.
pub(crate) fn cumsum(
    op: &str,
    x: &Tensor,
    axis: &Tensor,
    exclusive: bool,
    reverse: bool,
) -> Result<Tensor, KernelError> {
    scan(op, x, axis, Scan::Sum, exclusive, reverse)
}

/// A running sum or product of `x` along the scalar `axis`; `exclusive`
/// leaves each element out of its own result, `reverse` scans from the end.
pub(crate) fn scan(
    op: &str,
    x: &Tensor,
    axis: &Tensor,
    how: Scan,
    exclusive: bool,
    reverse: bool,
) -> Result<Tensor, KernelError> {
    let rank = x.shape().len();
    let axes = norm_axes(op, axis, rank)?;
    let &[ax] = axes.as_slice() else {
        return Err(KernelError::invalid(op, "axis must be a scalar within the rank"));
    };
    fn run<T: Num>(a: &ArcArray<T, IxDyn>, ax: usize, how: Scan, exclusive: bool, reverse: bool) -> Tensor {
        let mut out = a.to_owned();
        for mut lane in out.lanes_mut(Axis(ax)) {
            let n = lane.len();
            let mut acc = match how {
                Scan::Sum => T::zero(),
                Scan::Product => T::one(),
            };
            for k in 0..n {
                let i = if reverse { n - 1 - k } else { k };
                let v = lane[i];
                let next = match how {
                    Scan::Sum => acc.add(v),
                    Scan::Product => acc.mul(v),
                };
                lane[i] = if exclusive { acc } else { next };
                acc = next;
            }
        }
        Tensor::from_array(out)
    }
    match x {
        Tensor::F32(a) => Ok(run(a, ax, how, exclusive, reverse)),
        Tensor::F64(a) => Ok(run(a, ax, how, exclusive, reverse)),
        Tensor::I32(a) => Ok(run(a, ax, how, exclusive, reverse)),
        Tensor::I64(a) => Ok(run(a, ax, how, exclusive, reverse)),
        other => Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    }
}

/// `L2Loss(t) = sum(t²) / 2`.
pub(crate) fn l2_loss(op: &str, x: &Tensor) -> Result<Tensor, KernelError> {
    with_float!(op, x, a, T => {
        let s = a.iter().fold(T::c(0.0), |acc: T, &v| acc + v * v);
        Ok(Tensor::scalar(s / T::c(2.0)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Tensor {
        Tensor::from_vec(&[2, 3], vec![1.0f32, 5.0, -2.0, 4.0, 0.5, 3.0]).unwrap()
    }

    #[test]
    fn max_min_prod_over_axes() {
        let got = reduce("Max", Reduction::Max, &m(), &Tensor::scalar(1i32), false).unwrap();
        assert_eq!(got.to_vec::<f32>().unwrap(), vec![5.0, 4.0]);
        let got = reduce("Min", Reduction::Min, &m(), &Tensor::scalar(0i32), true).unwrap();
        assert_eq!(got.shape(), &[1, 3]);
        assert_eq!(got.to_vec::<f32>().unwrap(), vec![1.0, 0.5, -2.0]);
        let all = Tensor::vector(vec![0i32, 1]);
        let got = reduce("Prod", Reduction::Prod, &m(), &all, false).unwrap();
        assert_eq!(got.to_vec::<f32>().unwrap(), vec![1.0 * 5.0 * -2.0 * 4.0 * 0.5 * 3.0]);
        let b = Tensor::from_vec(&[2, 2], vec![true, false, true, true]).unwrap();
        let any = reduce("Any", Reduction::Any, &b, &Tensor::scalar(1i32), false).unwrap();
        let all = reduce("All", Reduction::All, &b, &Tensor::scalar(1i32), false).unwrap();
        assert_eq!(any.to_vec::<bool>().unwrap(), vec![true, true]);
        assert_eq!(all.to_vec::<bool>().unwrap(), vec![false, true]);
        assert!(reduce("Max", Reduction::Max, &m(), &Tensor::scalar(2i32), false).is_err());
    }

    #[test]
    fn argmax_cumsum_l2() {
        let got = arg_extreme("ArgMax", true, &m(), &Tensor::scalar(1i32), DType::I64).unwrap();
        assert_eq!(got.to_vec::<i64>().unwrap(), vec![1, 0]);
        let got = arg_extreme("ArgMin", false, &m(), &Tensor::scalar(0i32), DType::I32).unwrap();
        assert_eq!(got.to_vec::<i32>().unwrap(), vec![0, 1, 0]);
        let x = Tensor::vector(vec![1i32, 2, 3]);
        let axis = Tensor::scalar(0i32);
        assert_eq!(cumsum("Cumsum", &x, &axis, false, false).unwrap().to_vec::<i32>().unwrap(), vec![1, 3, 6]);
        assert_eq!(cumsum("Cumsum", &x, &axis, true, true).unwrap().to_vec::<i32>().unwrap(), vec![5, 3, 0]);
        assert_eq!(l2_loss("L2Loss", &Tensor::vector(vec![3.0f32, 4.0])).unwrap(), Tensor::scalar(12.5f32));
    }
}
