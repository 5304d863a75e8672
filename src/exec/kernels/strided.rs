//! Loops over standard-layout buffers seen through strides: the fast paths
//! of broadcasting binary ops, transposes, tiles and axis sums.
//!
//! A view is a flat slice, a shape and one stride per axis (in elements,
//! 0 for a broadcast axis). [`coalesce`] merges neighbouring axes that
//! every view walks as one, so the innermost loop is as long as it can be
//! and runs over a contiguous run (stride 1) or one repeated element
//! (stride 0) without index arithmetic; the outer axes advance like an
//! odometer. Every element is computed by the same expression as the
//! element-by-element loop it replaces, and every sum adds in index order,
//! so results are bit-identical to it. Cost: one pass over the output plus
//! O(rank) per innermost run.

use ndarray::{ArcArray, ArrayD, IxDyn};

/// The strides (in elements) of a standard-layout array of `shape`, aligned
/// to the trailing axes of `out` (rank ≥ `shape`'s): 0 on axes `shape`
/// lacks or has as 1 where `out` is longer (broadcast).
pub(crate) fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<isize> {
    let pad = out.len() - shape.len();
    let mut strides = vec![0isize; out.len()];
    let mut step = 1isize;
    for i in (0..shape.len()).rev() {
        strides[pad + i] = if shape[i] == 1 && out[pad + i] != 1 { 0 } else { step };
        step *= shape[i] as isize;
    }
    strides
}

/// Merges neighbouring axes of `shape` that each of the `strides` lists
/// walks as one (outer stride = inner stride × inner length), and drops
/// axes of length 1. Returns the merged shape and strides (at least one
/// axis, so the innermost loop always exists).
pub(crate) fn coalesce<const N: usize>(shape: &[usize], strides: [&[isize]; N]) -> (Vec<usize>, [Vec<isize>; N]) {
    let mut dims: Vec<usize> = Vec::with_capacity(shape.len());
    let mut out: [Vec<isize>; N] = std::array::from_fn(|_| Vec::with_capacity(shape.len()));
    for (axis, &d) in shape.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let mergeable = dims.last().is_some_and(|_| {
            (0..N).all(|k| {
                let last = *out[k].last().expect("one stride per kept axis");
                last == strides[k][axis] * d as isize
            })
        });
        if mergeable {
            let n = dims.len() - 1;
            dims[n] *= d;
            for k in 0..N {
                let s = strides[k][axis];
                *out[k].last_mut().expect("one stride per kept axis") = s;
            }
        } else {
            dims.push(d);
            for k in 0..N {
                out[k].push(strides[k][axis]);
            }
        }
    }
    if dims.is_empty() {
        dims.push(1);
        for o in &mut out {
            o.push(0);
        }
    }
    (dims, out)
}

/// Calls `run(offsets, n)` for every innermost run of the coalesced `dims`
/// in index order, with the starting offset of each view.
fn for_each_run<const N: usize>(dims: &[usize], strides: [&[isize]; N], mut run: impl FnMut([isize; N], usize)) {
    let rank = dims.len();
    let inner = dims[rank - 1];
    if dims.contains(&0) {
        return;
    }
    let mut index = vec![0usize; rank - 1];
    let mut offsets = [0isize; N];
    loop {
        run(offsets, inner);
        // Advance the odometer over the outer axes.
        let mut axis = rank - 1;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            index[axis] += 1;
            for k in 0..N {
                offsets[k] += strides[k][axis];
            }
            if index[axis] < dims[axis] {
                break;
            }
            for k in 0..N {
                offsets[k] -= strides[k][axis] * dims[axis] as isize;
            }
            index[axis] = 0;
        }
    }
}

/// `f` applied elementwise to two standard-layout slices of shapes `xs` and
/// `ys` broadcast to `out`; `None` if either array is not in standard layout.
pub(crate) fn zip_broadcast<A: Copy, B: Copy, C>(
    x: &ArcArray<A, IxDyn>,
    y: &ArcArray<B, IxDyn>,
    out: &[usize],
    f: impl Fn(A, B) -> C,
) -> Option<ArrayD<C>> {
    let (xd, yd) = (x.as_slice()?, y.as_slice()?);
    let total: usize = out.iter().product();
    let mut result: Vec<C> = Vec::with_capacity(total);
    if x.shape() == out && y.shape() == out {
        result.extend(xd.iter().zip(yd).map(|(&a, &b)| f(a, b)));
    } else if x.shape() == out && yd.len() == 1 {
        let b = yd[0];
        result.extend(xd.iter().map(|&a| f(a, b)));
    } else if y.shape() == out && xd.len() == 1 {
        let a = xd[0];
        result.extend(yd.iter().map(|&b| f(a, b)));
    } else {
        let (sx, sy) = (broadcast_strides(x.shape(), out), broadcast_strides(y.shape(), out));
        let (dims, [sx, sy]) = coalesce(out, [&sx, &sy]);
        let (ix, iy) = (sx[dims.len() - 1], sy[dims.len() - 1]);
        for_each_run(&dims, [&sx, &sy], |[ox, oy], n| {
            let (ox, oy) = (ox as usize, oy as usize);
            match (ix, iy) {
                (1, 1) => result.extend(xd[ox..ox + n].iter().zip(&yd[oy..oy + n]).map(|(&a, &b)| f(a, b))),
                (1, 0) => {
                    let b = yd[oy];
                    result.extend(xd[ox..ox + n].iter().map(|&a| f(a, b)));
                }
                (0, 1) => {
                    let a = xd[ox];
                    result.extend(yd[oy..oy + n].iter().map(|&b| f(a, b)));
                }
                _ => {
                    let (a, b) = (xd[ox], yd[oy]);
                    result.extend((0..n).map(|_| f(a, b)));
                }
            }
        });
    }
    ArrayD::from_shape_vec(IxDyn(out), result).ok()
}

/// The elements of the view (`data`, `shape`, `strides`) copied out in
/// index order: a transpose, a broadcast or a tile made dense.
pub(crate) fn gather<T: Clone>(data: &[T], shape: &[usize], strides: &[isize]) -> Vec<T> {
    let total: usize = shape.iter().product();
    let mut out: Vec<T> = Vec::with_capacity(total);
    let (dims, [s]) = coalesce(shape, [strides]);
    let inner = s[dims.len() - 1];
    for_each_run(&dims, [&s], |[o], n| {
        let o = o as usize;
        match inner {
            1 => out.extend_from_slice(&data[o..o + n]),
            0 => out.extend(std::iter::repeat_n(data[o].clone(), n)),
            step => out.extend((0..n).map(|i| data[(o as isize + step * i as isize) as usize].clone())),
        }
    });
    out
}

/// Sums a standard-layout array seen as `[outer, n, inner]` over its middle
/// axis: `out[o, i] = ((zero + x[o, 0, i]) + x[o, 1, i]) + …`, in index order.
pub(crate) fn sum_middle<T: Copy>(
    data: &[T],
    (outer, n, inner): (usize, usize, usize),
    zero: T,
    add: impl Fn(T, T) -> T,
) -> Vec<T> {
    let mut out = vec![zero; outer * inner];
    if inner == 1 {
        for (o, acc) in out.iter_mut().enumerate() {
            *acc = data[o * n..(o + 1) * n].iter().fold(zero, |s, &v| add(s, v));
        }
        return out;
    }
    for (o, acc) in out.chunks_exact_mut(inner).enumerate() {
        for row in data[o * n * inner..(o + 1) * n * inner].chunks_exact(inner) {
            for (a, &v) in acc.iter_mut().zip(row) {
                *a = add(*a, v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_contiguous_and_broadcast_axes() {
        // [4, 32, 64] against [4, 32, 1]: the first two axes merge for both.
        let out = [4, 32, 64];
        let (sx, sy) = (broadcast_strides(&out, &out), broadcast_strides(&[4, 32, 1], &out));
        assert_eq!(sy, vec![32, 1, 0]);
        let (dims, [sx, sy]) = coalesce(&out, [&sx, &sy]);
        assert_eq!(dims, vec![128, 64]);
        assert_eq!((sx, sy), (vec![64, 1], vec![1, 0]));
        let (dims, _) = coalesce(&[1, 1], [&[0, 0][..]]);
        assert_eq!(dims, vec![1]);
    }

    #[test]
    fn zip_broadcast_matches_ndarray() {
        let x = ArcArray::from_shape_vec(IxDyn(&[2, 3, 4]), (0..24).map(|v| v as f32).collect()).unwrap();
        for shape in [vec![2, 3, 4], vec![4], vec![2, 1, 4], vec![1, 3, 1], vec![2, 3, 1], vec![], vec![1]] {
            let n: usize = shape.iter().product();
            let y = ArcArray::from_shape_vec(IxDyn(&shape), (0..n).map(|v| v as f32 * 0.5 + 1.0).collect()).unwrap();
            let fast = zip_broadcast(&x, &y, &[2, 3, 4], |a, b| a * 10.0 - b).unwrap();
            let yb = y.broadcast(IxDyn(&[2, 3, 4])).unwrap();
            let slow = ndarray::Zip::from(&x).and(&yb).map_collect(|&a, &b| a * 10.0 - b);
            assert_eq!(fast, slow, "y of shape {shape:?}");
            // And with the operands swapped.
            let fast = zip_broadcast(&y, &x, &[2, 3, 4], |b, a| a - b).unwrap();
            let slow = ndarray::Zip::from(&yb).and(&x).map_collect(|&b, &a| a - b);
            assert_eq!(fast, slow, "x of shape {shape:?}");
        }
    }

    #[test]
    fn gather_transposes_and_tiles() {
        let x = ArcArray::from_shape_vec(IxDyn(&[2, 3, 4]), (0..24).collect::<Vec<i32>>()).unwrap();
        let view = x.view().permuted_axes(IxDyn(&[2, 0, 1]));
        let strides: Vec<isize> = view.strides().to_vec();
        let fast = gather(x.as_slice().unwrap(), view.shape(), &strides);
        assert_eq!(fast, view.iter().copied().collect::<Vec<_>>());
        let empty = gather(x.as_slice().unwrap(), &[2, 0, 4], &[12, 4, 1]);
        assert!(empty.is_empty());
    }

    #[test]
    fn sum_middle_adds_in_index_order() {
        let data: Vec<f32> = (0..24).map(|v| v as f32 * 0.1).collect();
        let x = ArrayD::from_shape_vec(IxDyn(&[2, 3, 4]), data.clone()).unwrap();
        for (axis, dims) in [(0, (1, 2, 12)), (1, (2, 3, 4)), (2, (6, 4, 1))] {
            let want = x.fold_axis(ndarray::Axis(axis), 0.0f32, |&a, &b| a + b);
            let got = sum_middle(&data, dims, 0.0f32, |a, b| a + b);
            assert_eq!(got, want.iter().copied().collect::<Vec<_>>(), "axis {axis}");
        }
    }
}
