//! Matrix products: `MatMul`, `BatchMatMul(V2)` and two-operand `Einsum`.
//!
//! Float products use ndarray's `dot` (the `matrixmultiply` crate), which
//! is single-threaded and deterministic for a given shape.

use ndarray::{ArcArray, Array3, ArrayD, IxDyn};

use super::math::{broadcast_shape, normalize_axes, sum_axes, Num};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;

/// `MatMul(a, b)` of 2-D tensors, optionally transposing either.
pub(crate) fn matmul(op: &str, a: &Tensor, b: &Tensor, ta: bool, tb: bool) -> Result<Tensor, KernelError> {
    if a.shape().len() != 2 || b.shape().len() != 2 {
        return Err(KernelError::invalid(
            op,
            format!("inputs must be 2-D, got shapes {:?} and {:?}", a.shape(), b.shape()),
        ));
    }
    batch_matmul(op, a, b, ta, tb)
}

/// `BatchMatMul(V2)(x, y)`: matrix products over the last two axes, with
/// the leading (batch) axes broadcast; `adj_x` / `adj_y` transpose them.
pub(crate) fn batch_matmul(op: &str, x: &Tensor, y: &Tensor, adj_x: bool, adj_y: bool) -> Result<Tensor, KernelError> {
    match (x, y) {
        (Tensor::F32(a), Tensor::F32(b)) => Ok(Tensor::from_array(bmm(op, a, b, adj_x, adj_y)?)),
        (Tensor::F64(a), Tensor::F64(b)) => Ok(Tensor::from_array(bmm(op, a, b, adj_x, adj_y)?)),
        (Tensor::I32(a), Tensor::I32(b)) => Ok(Tensor::from_array(bmm(op, a, b, adj_x, adj_y)?)),
        (Tensor::I64(a), Tensor::I64(b)) => Ok(Tensor::from_array(bmm(op, a, b, adj_x, adj_y)?)),
        (x, y) if x.dtype() != y.dtype() => {
            Err(KernelError::invalid(op, format!("inputs have different dtypes {} and {}", x.dtype(), y.dtype())))
        }
        (x, _) => Err(KernelError::dtype(op, x.dtype(), "numeric inputs expected")),
    }
}

fn bmm<T: Num>(
    op: &str,
    a: &ArcArray<T, IxDyn>,
    b: &ArcArray<T, IxDyn>,
    adj_a: bool,
    adj_b: bool,
) -> Result<ArrayD<T>, KernelError> {
    let (ra, rb) = (a.ndim(), b.ndim());
    if ra < 2 || rb < 2 {
        return Err(KernelError::invalid(
            op,
            format!("inputs must have rank >= 2, got shapes {:?} and {:?}", a.shape(), b.shape()),
        ));
    }
    let mut av = a.view();
    let mut bv = b.view();
    if adj_a {
        av.swap_axes(ra - 2, ra - 1);
    }
    if adj_b {
        bv.swap_axes(rb - 2, rb - 1);
    }
    let (m, k) = (av.shape()[ra - 2], av.shape()[ra - 1]);
    let (k2, n) = (bv.shape()[rb - 2], bv.shape()[rb - 1]);
    if k != k2 {
        return Err(KernelError::invalid(
            op,
            format!(
                "inner dimensions differ: {:?} x {:?} (after transposes) multiplies {k} columns by {k2} rows",
                av.shape(),
                bv.shape()
            ),
        ));
    }
    let batch = broadcast_shape(op, &av.shape()[..ra - 2], &bv.shape()[..rb - 2])?;
    // The broadcast operands and the product, sized before any is built.
    for inner in [[m, k], [k, n], [m, n]] {
        crate::exec::limits::checked_elements(op, T::DTYPE, &[batch.as_slice(), &inner].concat())?;
    }
    let count: usize = batch.iter().product();
    let full = |inner: [usize; 2]| IxDyn(&[batch.as_slice(), &inner].concat());
    let bad = || KernelError::invalid(op, "batch dimensions do not broadcast");
    let a3 = av.broadcast(full([m, k])).ok_or_else(bad)?;
    let b3 = bv.broadcast(full([k, n])).ok_or_else(bad)?;
    // Each product reads its operands through their (possibly transposed or
    // broadcast) strides and writes its slice of the result: no copies.
    fn matrix<'a, T>(
        op: &str,
        v: &ndarray::ArrayViewD<'a, T>,
        index: &[usize],
    ) -> Result<ndarray::ArrayView2<'a, T>, KernelError> {
        let mut v = v.clone();
        for &i in index {
            v = v.index_axis_move(ndarray::Axis(0), i);
        }
        v.into_dimensionality::<ndarray::Ix2>().map_err(|e| KernelError::invalid(op, e.to_string()))
    }
    let mut out = Array3::<T>::from_elem((count, m, n), T::zero());
    let indices: Vec<IxDyn> = ndarray::indices(IxDyn(&batch)).into_iter().collect();
    let pairs = indices
        .iter()
        .map(|index| {
            let index = ndarray::Dimension::slice(index);
            Ok((matrix(op, &a3, index)?, matrix(op, &b3, index)?))
        })
        .collect::<Result<Vec<_>, KernelError>>()?;
    let data = out.as_slice_mut().expect("a new array is in standard layout");
    products(&pairs, data, (m, n, k));
    out.into_shape_with_order(full([m, n])).map_err(|e| KernelError::invalid(op, e.to_string()))
}

/// Multiply-adds below which a product (or a batch) is not split between
/// threads. A split costs the calling worker a hand-over to rayon and back
/// (futex wake-ups and context switches), which on the 2-core machine
/// outweighed the shared work up to products of 2^21 multiply-adds: the
/// 4-layer `tf_step` bench ran 4.8 ms per step with its products split and
/// 3.5 ms with them serial (`docs/performance.md`).
const PARALLEL_WORK: usize = 1 << 22;

/// Writes the products `a · b` of `pairs` ([m, k] · [k, n]) one after the
/// other into `out`. Large batches run their products on rayon's threads;
/// one large product is split by rows. Each element is computed by the
/// same GEMM arithmetic (the same sum over k) whichever thread runs it, so
/// the result does not depend on the split. Rayon's threads flush denormals
/// while they run a part, as the calling kernel does, so a split product
/// flushes subnormals exactly as a serial one.
pub(super) fn products<T: Num>(
    pairs: &[(ndarray::ArrayView2<'_, T>, ndarray::ArrayView2<'_, T>)],
    out: &mut [T],
    (m, n, k): (usize, usize, usize),
) {
    use rayon::prelude::*;
    let work = m * n * k;
    let threads = rayon::current_num_threads();
    fn view<T>(chunk: &mut [T], rows: usize, n: usize) -> ndarray::ArrayViewMut2<'_, T> {
        ndarray::ArrayViewMut2::from_shape((rows, n), chunk).expect("the chunk holds rows × n elements")
    }
    if m * n == 0 {
        return;
    }
    if threads < 2 || work * pairs.len() < PARALLEL_WORK {
        for ((a, b), o) in pairs.iter().zip(out.chunks_exact_mut(m * n)) {
            T::matmul_into(a.view(), b.view(), view(o, m, n));
        }
    } else if pairs.len() > 1 {
        out.par_chunks_exact_mut(m * n).zip(pairs).for_each(|(o, (a, b))| {
            let _flush = super::denormals::FlushDenormals::new();
            T::matmul_into(a.view(), b.view(), view(o, m, n));
        });
    } else {
        // One product: a block of rows per thread.
        let (a, b) = &pairs[0];
        let rows = m.div_ceil(threads.min(work / (PARALLEL_WORK / 2)).max(1));
        out.par_chunks_mut(rows * n).enumerate().for_each(|(i, o)| {
            let _flush = super::denormals::FlushDenormals::new();
            let r0 = i * rows;
            let r1 = (r0 + rows).min(m);
            T::matmul_into(a.slice(ndarray::s![r0..r1, ..]), b.view(), view(o, r1 - r0, n));
        });
    }
}

/// `Einsum` with one or two operands and an explicit or implicit output.
///
/// Labels are letters; a label may not repeat within one operand
/// (no diagonals) and ellipses are not supported. Labels of one operand
/// absent from the other and from the output are summed out first; the
/// rest becomes one batched matrix product.
pub(crate) fn einsum(op: &str, equation: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    if eq.contains("...") {
        return Err(KernelError::invalid(op, format!("ellipsis in `{equation}` is not supported")));
    }
    let (lhs, out) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let specs: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    if specs.len() != inputs.len() || !(1..=2).contains(&specs.len()) {
        return Err(KernelError::invalid(
            op,
            format!(
                "`{equation}` has {} operands but {} inputs were given (1 or 2 supported)",
                specs.len(),
                inputs.len()
            ),
        ));
    }
    for (spec, t) in specs.iter().zip(inputs) {
        if spec.iter().any(|c| !c.is_ascii_alphabetic()) {
            return Err(KernelError::invalid(op, format!("`{equation}`: labels must be letters")));
        }
        if spec.len() != t.shape().len() {
            return Err(KernelError::invalid(
                op,
                format!("`{equation}`: operand `{}` has rank {}", spec.iter().collect::<String>(), t.shape().len()),
            ));
        }
        let mut sorted = spec.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(KernelError::invalid(
                op,
                format!("`{equation}`: repeated labels (diagonals) are not supported"),
            ));
        }
    }
    let out: Vec<char> = match out {
        Some(o) => o.chars().collect(),
        None => {
            // Implicit output: labels that appear once, in alphabetical order.
            let all: Vec<char> = specs.concat();
            let mut once: Vec<char> =
                all.iter().copied().filter(|c| all.iter().filter(|d| *d == c).count() == 1).collect();
            once.sort_unstable();
            once
        }
    };
    if let Some(c) = out.iter().find(|c| !specs.iter().any(|s| s.contains(c))) {
        return Err(KernelError::invalid(op, format!("`{equation}`: output label `{c}` is in no operand")));
    }
    // Dimension sizes must agree between operands.
    let mut size = std::collections::BTreeMap::new();
    for (spec, t) in specs.iter().zip(inputs) {
        for (c, &d) in spec.iter().zip(t.shape()) {
            if let Some(&prev) = size.get(c) {
                if prev != d {
                    return Err(KernelError::invalid(
                        op,
                        format!("`{equation}`: label `{c}` has sizes {prev} and {d}"),
                    ));
                }
            }
            size.insert(*c, d);
        }
    }
    match inputs {
        [a] => {
            let (a, spec) = sum_out(op, a, &specs[0], &[], &out)?;
            permute(op, &a, &spec, &out)
        }
        [a, b] => {
            let (a, sa) = sum_out(op, a, &specs[0], &specs[1], &out)?;
            let (b, sb) = sum_out(op, b, &specs[1], &sa, &out)?;
            let batch: Vec<char> = out.iter().copied().filter(|c| sa.contains(c) && sb.contains(c)).collect();
            let contract: Vec<char> = sa.iter().copied().filter(|c| sb.contains(c) && !out.contains(c)).collect();
            let free_a: Vec<char> = sa.iter().copied().filter(|c| !sb.contains(c)).collect();
            let free_b: Vec<char> = sb.iter().copied().filter(|c| !sa.contains(c)).collect();
            let dims = |labels: &[char]| labels.iter().map(|c| size[c]).collect::<Vec<usize>>();
            let prod = |labels: &[char]| dims(labels).iter().product::<usize>() as i64;
            let a = permute(op, &a, &sa, &[batch.as_slice(), &free_a, &contract].concat())?;
            let b = permute(op, &b, &sb, &[batch.as_slice(), &contract, &free_b].concat())?;
            let a = super::shape::reshape(op, &a, &Tensor::vector(vec![prod(&batch), prod(&free_a), prod(&contract)]))?;
            let b = super::shape::reshape(op, &b, &Tensor::vector(vec![prod(&batch), prod(&contract), prod(&free_b)]))?;
            let c = batch_matmul(op, &a, &b, false, false)?;
            let labels = [batch.as_slice(), &free_a, &free_b].concat();
            let shape: Vec<i64> = dims(&labels).iter().map(|&d| d as i64).collect();
            let c = super::shape::reshape(op, &c, &Tensor::vector(shape))?;
            permute(op, &c, &labels, &out)
        }
        _ => Err(KernelError::invalid(op, "1 or 2 operands are supported")),
    }
}

/// Sums out the labels of `spec` that are neither in `other` nor in `out`.
fn sum_out(
    op: &str,
    t: &Tensor,
    spec: &[char],
    other: &[char],
    out: &[char],
) -> Result<(Tensor, Vec<char>), KernelError> {
    let gone: Vec<i64> =
        (0..spec.len()).filter(|&i| !other.contains(&spec[i]) && !out.contains(&spec[i])).map(|i| i as i64).collect();
    if gone.is_empty() {
        return Ok((t.clone(), spec.to_vec()));
    }
    let axes = normalize_axes(op, &gone, spec.len())?;
    let summed = match t {
        Tensor::F32(a) => Tensor::from_array(sum_axes(a, &axes, false)),
        Tensor::F64(a) => Tensor::from_array(sum_axes(a, &axes, false)),
        Tensor::I32(a) => Tensor::from_array(sum_axes(a, &axes, false)),
        Tensor::I64(a) => Tensor::from_array(sum_axes(a, &axes, false)),
        other => return Err(KernelError::dtype(op, other.dtype(), "numeric inputs expected")),
    };
    let kept = spec.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, c)| *c).collect();
    Ok((summed, kept))
}

/// Transposes `t` from label order `from` to label order `to` (same labels).
fn permute(op: &str, t: &Tensor, from: &[char], to: &[char]) -> Result<Tensor, KernelError> {
    if from == to {
        return Ok(t.clone());
    }
    let perm: Vec<i64> = to
        .iter()
        .map(|c| from.iter().position(|d| d == c).map(|p| p as i64))
        .collect::<Option<_>>()
        .ok_or_else(|| KernelError::invalid(op, "internal label mismatch"))?;
    super::shape::transpose(op, t, &Tensor::vector(perm))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Axis, Ix2};

    /// Runs `products` from a thread outside a 2-thread pool, so every part
    /// runs on a pool thread that starts with IEEE modes.
    fn split_on_pool(
        pairs: &[(ndarray::ArrayView2<'_, f32>, ndarray::ArrayView2<'_, f32>)],
        dims: (usize, usize, usize),
    ) -> Vec<f32> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a pool");
        let mut out = vec![1.0f32; pairs.len() * dims.0 * dims.1];
        pool.install(|| products(pairs, &mut out, dims));
        out
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn split_products_flush_subnormals_on_rayon_threads() {
        // Subnormal operands read as zero under DAZ; unflushed, each sum
        // would be 256 · 1e-40 = 2.56e-38, a normal float.
        let (m, k, n) = (256, 256, 64);
        let a = ndarray::Array2::from_elem((m, k), 1e-40f32);
        let b = ndarray::Array2::from_elem((k, n), 1.0f32);
        assert!(m * n * k >= PARALLEL_WORK, "one product large enough to be split by rows");
        let out = split_on_pool(&[(a.view(), b.view())], (m, n, k));
        assert!(out.iter().all(|&v| v.to_bits() == 0), "row split: {:?}", out.iter().find(|v| **v != 0.0));
        // A batch of products split one product per thread.
        let (m, k, n) = (128, 128, 64);
        let a = ndarray::Array2::from_elem((m, k), 1e-40f32);
        let b = ndarray::Array2::from_elem((k, n), 1.0f32);
        let pairs = vec![(a.view(), b.view()); 4];
        assert!(m * n * k * pairs.len() >= PARALLEL_WORK, "a batch large enough to be split");
        let out = split_on_pool(&pairs, (m, n, k));
        assert!(out.iter().all(|&v| v.to_bits() == 0), "batch split: {:?}", out.iter().find(|v| **v != 0.0));
        // Outside a kernel, this thread keeps IEEE modes.
        assert!(std::hint::black_box(1e-40f32) * 1.0 != 0.0, "the test thread is not flushed");
    }

    #[test]
    fn split_products_equal_one_product_bitwise() {
        // Awkward sizes and values, so any change in summation order would show.
        let (m, k, n) = (611, 96, 72);
        let value = |i: usize| ((i * 7919) % 1000) as f32 / 37.0 - 13.0;
        let a = ndarray::Array2::from_shape_fn((m, k), |(i, j)| value(i * k + j));
        let b = ndarray::Array2::from_shape_fn((k, n), |(i, j)| value(i * n + j + 5));
        let mut whole = ndarray::Array2::<f32>::zeros((m, n));
        ndarray::linalg::general_mat_mul(1.0, &a, &b, 0.0, &mut whole);
        let mut split = vec![0.0f32; m * n];
        assert!(m * n * k >= PARALLEL_WORK, "the product is large enough to be split");
        products(&[(a.view(), b.view())], &mut split, (m, n, k));
        assert!(whole.iter().zip(&split).all(|(x, y)| x.to_bits() == y.to_bits()));
        // A batch of three, run on the pool.
        let mut batch = vec![0.0f32; 3 * m * n];
        products(&[(a.view(), b.view()); 3], &mut batch, (m, n, k));
        assert!(batch.chunks(m * n).all(|c| whole.iter().zip(c).all(|(x, y)| x.to_bits() == y.to_bits())));
    }

    fn as2(t: &Tensor) -> ndarray::Array2<f32> {
        t.array::<f32>().unwrap().view().into_dimensionality::<Ix2>().unwrap().to_owned()
    }

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_vec(shape, v.to_vec()).unwrap()
    }

    #[test]
    fn matmul_and_transposes() {
        let a = t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = t(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
        // [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]] = [[58,64],[139,154]]
        let c = matmul("MatMul", &a, &b, false, false).unwrap();
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![58.0, 64.0, 139.0, 154.0]);
        // a^T (3x2) x a (2x3) = [[17,22,27],[22,29,36],[27,36,45]]
        let d = matmul("MatMul", &a, &a, true, false).unwrap();
        assert_eq!(d.to_vec::<f32>().unwrap(), vec![17.0, 22.0, 27.0, 22.0, 29.0, 36.0, 27.0, 36.0, 45.0]);
        // a x a^T = [[14,32],[32,77]]
        let e = matmul("MatMul", &a, &a, false, true).unwrap();
        assert_eq!(as2(&e), ndarray::arr2(&[[14.0, 32.0], [32.0, 77.0]]));
        assert!(matmul("MatMul", &a, &a, false, false).is_err());
        let i = matmul(
            "MatMul",
            &Tensor::from_vec(&[1, 2], vec![2i32, 3]).unwrap(),
            &Tensor::from_vec(&[2, 1], vec![4i32, 5]).unwrap(),
            false,
            false,
        );
        assert_eq!(i.unwrap().to_vec::<i32>().unwrap(), vec![23]);
    }

    #[test]
    fn batch_matmul_broadcasts_batch() {
        // Two 1x2 matrices times one shared 2x1 matrix.
        let x = t(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
        let y = t(&[2, 1], &[10.0, 100.0]);
        let out = batch_matmul("BatchMatMulV2", &x, &y, false, false).unwrap();
        assert_eq!(out.shape(), &[2, 1, 1]);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![210.0, 430.0]);
        // adj_x: x^T per batch is 2x1, times 1x1 [[2]].
        let z = t(&[1, 1], &[2.0]);
        let out = batch_matmul("BatchMatMulV2", &x, &z, true, false).unwrap();
        assert_eq!(out.shape(), &[2, 2, 1]);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0, 8.0]);
        // adj_y on a batch.
        let w = t(&[2, 1, 2], &[1.0, 1.0, 2.0, 2.0]);
        let out = batch_matmul("BatchMatMul", &x, &w, false, true).unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![3.0, 14.0]);
    }

    #[test]
    fn einsum_equations() {
        let a = t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = t(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
        let mm = einsum("Einsum", "ij,jk->ik", &[a.clone(), b.clone()]).unwrap();
        assert_eq!(mm.to_vec::<f32>().unwrap(), vec![58.0, 64.0, 139.0, 154.0]);
        // Output transposed: (ab)^T.
        let mt = einsum("Einsum", "ij,jk->ki", &[a.clone(), b.clone()]).unwrap();
        assert_eq!(mt.to_vec::<f32>().unwrap(), vec![58.0, 139.0, 64.0, 154.0]);
        // Dot product.
        let v = t(&[3], &[1.0, 2.0, 3.0]);
        let dot = einsum("Einsum", "i,i->", &[v.clone(), v.clone()]).unwrap();
        assert_eq!(dot, Tensor::scalar(14.0f32));
        // Outer product.
        let outer = einsum("Einsum", "i,j->ij", &[v.clone(), t(&[2], &[1.0, -1.0])]).unwrap();
        assert_eq!(outer.to_vec::<f32>().unwrap(), vec![1.0, -1.0, 2.0, -2.0, 3.0, -3.0]);
        // Batched: bij,bjk->bik with b = 2, each a 1x2 by 2x1.
        let x = t(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
        let y = t(&[2, 2, 1], &[1.0, 1.0, 2.0, 0.0]);
        let bm = einsum("Einsum", "bij,bjk->bik", &[x.clone(), y]).unwrap();
        assert_eq!(bm.shape(), &[2, 1, 1]);
        assert_eq!(bm.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
        // bik,kj->bij: a shared right matrix.
        let r = t(&[2, 2], &[1.0, 0.0, 0.0, 2.0]);
        let sh = einsum("Einsum", "bik,kj->bij", &[x.clone(), r]).unwrap();
        assert_eq!(sh.to_vec::<f32>().unwrap(), vec![1.0, 4.0, 3.0, 8.0]);
        // A label summed out of one operand only: ij,j->j sums over i first.
        let so = einsum("Einsum", "ij,j->j", &[a.clone(), t(&[3], &[1.0, 10.0, 100.0])]).unwrap();
        assert_eq!(so.to_vec::<f32>().unwrap(), vec![5.0, 70.0, 900.0]);
        // One operand: transpose and reduction; implicit output.
        let tr = einsum("Einsum", "ij->ji", std::slice::from_ref(&a)).unwrap();
        assert_eq!(tr.shape(), &[3, 2]);
        let rs = einsum("Einsum", "ij->i", std::slice::from_ref(&a)).unwrap();
        assert_eq!(rs.to_vec::<f32>().unwrap(), vec![6.0, 15.0]);
        let implicit = einsum("Einsum", "ij,jk", &[a.clone(), b]).unwrap();
        assert_eq!(implicit, mm);
        assert!(einsum("Einsum", "ii->i", std::slice::from_ref(&r_square())).is_err());
        assert!(einsum("Einsum", "ij,jk->ik", &[a.clone(), a]).is_err());
    }

    fn r_square() -> Tensor {
        t(&[2, 2], &[1.0, 2.0, 3.0, 4.0])
    }

    #[test]
    fn einsum_reduces_over_axis_helper() {
        // Keep `Axis` in use: sum a column through ndarray directly, compare with Einsum.
        let a = r_square();
        let col: f32 = a.array::<f32>().unwrap().sum_axis(Axis(0)).sum();
        assert_eq!(einsum("Einsum", "ij->", &[a]).unwrap(), Tensor::scalar(col));
    }
}
