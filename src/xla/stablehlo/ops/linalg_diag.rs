//! Lowerings of the structural linear-algebra ops: `MatrixBandPart`,
//! `MatrixDiag{,Part,SetDiag}{,V2,V3}`, `Diag`, `DiagPart` and `Cross`.
//!
//! Diagonals are read with strided slices of the flattened matrices (cell
//! `(r, c)` of an `M x N` matrix is element `r * N + c`, so a diagonal is a
//! slice of stride `N + 1`) and written with `select` under an iota mask, so
//! every dtype moves unchanged and no arithmetic touches the values. The
//! band geometry (which diagonals, their lengths and alignment) is
//! [`Band`], the one the simulator's kernels use; `k`, `num_rows` and
//! `num_cols` must be compile-time constants, as tf2xla requires. Cost: one
//! slice or select per diagonal.

use super::{i64s, Call};
use crate::ir::shapes::rules::linalg::Band;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Cmp, Ctx, Ty, Val};

/// The band of a diag op from its constant `k` operand (`V2`/`V3`), or the main diagonal.
fn band(n: &Call, k: usize) -> Result<Band, String> {
    if n.op.ends_with("V2") || n.op.ends_with("V3") {
        Band::new(n.op, &n.ints(k, "k")?, n.attrs.get_str("align"))
    } else {
        Ok(Band::main())
    }
}

/// A constant integer scalar operand.
fn scalar(n: &Call, i: usize, what: &str) -> Result<i64, String> {
    match n.ints(i, what)?.as_slice() {
        [v] => Ok(*v),
        v => Err(format!("{}: {what} must be a scalar, got {} values", n.op, v.len())),
    }
}

/// Leading dims, rows and cols of a batch of matrices.
fn matrices(op: &str, v: &Val) -> Result<(Vec<usize>, i64, i64), String> {
    match v.ty.shape.as_slice() {
        [lead @ .., m, n] => Ok((lead.to_vec(), *m as i64, *n as i64)),
        s => Err(format!("{op}: input must have rank >= 2, got shape {s:?}")),
    }
}

/// Elements `start, start + stride, ...` (`len` of them) of the last axis of `v`.
fn strided(c: &mut Ctx, v: &Val, start: i64, len: i64, stride: i64) -> Val {
    let rank = v.ty.rank();
    let mut shape = v.ty.shape.clone();
    shape[rank - 1] = len as usize;
    let mut begin = vec![0i64; rank];
    let mut limit: Vec<i64> = v.ty.shape.iter().map(|&d| d as i64).collect();
    let mut strides = vec![1i64; rank];
    begin[rank - 1] = start;
    limit[rank - 1] = start + (len - 1).max(0) * stride + 1;
    strides[rank - 1] = stride;
    c.op(
        "stablehlo.slice",
        &[v],
        &format!("start_indices = {}, limit_indices = {}, strides = {}", i64s(&begin), i64s(&limit), i64s(&strides)),
        v.ty.with_shape(shape),
    )
}

/// `v` padded on its last axis with `low` and `high` copies of the scalar `pad`.
fn pad_last(c: &mut Ctx, v: &Val, pad: &Val, low: i64, high: i64) -> Val {
    if low == 0 && high == 0 {
        return v.clone();
    }
    let rank = v.ty.rank();
    let mut shape = v.ty.shape.clone();
    shape[rank - 1] = (shape[rank - 1] as i64 + low + high) as usize;
    let (mut lo, mut hi) = (vec![0i64; rank], vec![0i64; rank]);
    lo[rank - 1] = low;
    hi[rank - 1] = high;
    c.op(
        "stablehlo.pad",
        &[v, pad],
        &format!(
            "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
            i64s(&lo),
            i64s(&hi),
            i64s(&vec![0; rank])
        ),
        v.ty.with_shape(shape),
    )
}

/// An i32 iota of `shape` along `dim`.
fn iota(c: &mut Ctx, shape: &[usize], dim: usize) -> Val {
    c.op("stablehlo.iota", &[], &format!("iota_dimension = {dim} : i64"), Ty::new(DType::I32, shape.to_vec()))
}

/// The mask `col - row == d` over `shape` (matrices in the last two axes).
fn on_diagonal(c: &mut Ctx, shape: &[usize], d: i64) -> Val {
    let r = shape.len();
    let (rows, cols) = (iota(c, shape, r - 2), iota(c, shape, r - 1));
    let diff = c.elementwise("subtract", &[&cols, &rows]);
    let k = c.splat(&diff.ty, d as f64);
    c.compare(&diff, &k, Cmp::Eq)
}

/// `MatrixDiagPart{,V2,V3}(input, k, padding_value)`.
pub(super) fn diag_part(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let b = band(n, 1)?;
    let (lead, m, cols) = matrices(n.op, x)?;
    b.check(n.op, m, cols)?;
    let pad = if n.op == "MatrixDiagPart" { c.splat(&Ty::scalar(x.ty.dtype), 0.0) } else { n.input(2)?.clone() };
    let len = b.max_len(m, cols);
    let out = n.out(0)?.clone();
    if len == 0 || lead.contains(&0) {
        return Ok(vec![c.broadcast_to(&pad, &out.shape)]);
    }
    let mut flat_shape = lead.clone();
    flat_shape.push((m * cols) as usize);
    let flat = c.reshape(x, flat_shape);
    let mut rows = Vec::new();
    for d in (b.lo..=b.hi).rev() {
        let (r0, c0) = Band::cell(d, 0);
        let dl = Band::len(d, m, cols);
        let diag = strided(c, &flat, r0 * cols + c0, dl, cols + 1);
        let off = b.offset(d, m, cols, len);
        let row = pad_last(c, &diag, &pad, off, len - dl - off);
        let mut shape = lead.clone();
        shape.extend([1, len as usize]);
        rows.push(c.reshape(&row, shape));
    }
    let refs: Vec<&Val> = rows.iter().collect();
    let mut shape = lead.clone();
    shape.extend([b.count(), len as usize]);
    let all = if refs.len() == 1 {
        rows[0].clone()
    } else {
        c.op("stablehlo.concatenate", &refs, &format!("dimension = {} : i64", lead.len()), x.ty.with_shape(shape))
    };
    Ok(vec![c.reshape(&all, out.shape)])
}

/// Writes the band's diagonals (rows of `diagonal`) over `base` (`[lead..., m, n]`).
fn write_band(c: &mut Ctx, base: Val, diagonal: &Val, b: Band, len: i64) -> Result<Val, String> {
    let shape = base.ty.shape.clone();
    let r = shape.len();
    let (m, cols) = (shape[r - 2] as i64, shape[r - 1] as i64);
    let lead = r - 2;
    // The diagonals as `[lead..., count, len]`.
    let mut packed_shape = shape[..lead].to_vec();
    packed_shape.extend([b.count(), len as usize]);
    let packed = c.reshape(diagonal, packed_shape.clone());
    let zero = c.splat(&Ty::scalar(base.ty.dtype), 0.0);
    let mut out = base;
    for (i, d) in (b.lo..=b.hi).rev().enumerate() {
        let dl = Band::len(d, m, cols);
        if dl == 0 {
            continue;
        }
        let off = b.offset(d, m, cols, len);
        if off + dl > len {
            return Err(format!("diagonal {d} has {dl} cells, more than the {len} given"));
        }
        // Row i of the packed diagonals, cells off..off + dl.
        let mut begin = vec![0i64; lead + 2];
        let mut limit: Vec<i64> = packed_shape.iter().map(|&s| s as i64).collect();
        begin[lead] = i as i64;
        limit[lead] = i as i64 + 1;
        begin[lead + 1] = off;
        limit[lead + 1] = off + dl;
        let mut piece_shape = shape[..lead].to_vec();
        piece_shape.extend([1, dl as usize]);
        let piece = c.op(
            "stablehlo.slice",
            &[&packed],
            &format!(
                "start_indices = {}, limit_indices = {}, strides = {}",
                i64s(&begin),
                i64s(&limit),
                i64s(&vec![1; lead + 2])
            ),
            packed.ty.with_shape(piece_shape),
        );
        let mut vec_shape = shape[..lead].to_vec();
        vec_shape.push(dl as usize);
        let piece = c.reshape(&piece, vec_shape);
        // Element t sits in row t (superdiagonals) or column t (subdiagonals).
        let (span, axis) = if d >= 0 { (m, lead) } else { (cols, lead + 1) };
        let full = pad_last(c, &piece, &zero, 0, span - dl);
        let dims: Vec<usize> = (0..lead).chain([axis]).collect();
        let spread = c.op(
            "stablehlo.broadcast_in_dim",
            &[&full],
            &format!("broadcast_dimensions = {}", i64s(&dims)),
            out.ty.clone(),
        );
        let mask = on_diagonal(c, &shape, d);
        out = c.select(&mask, &spread, &out);
    }
    Ok(out)
}

/// `MatrixDiag{,V2,V3}(diagonal, k, num_rows, num_cols, padding_value)`.
pub(super) fn matrix_diag(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let diagonal = n.input(0)?;
    let b = band(n, 1)?;
    let out = n.out(0)?.clone();
    let (m, cols) = match out.shape.as_slice() {
        [.., m, c] => (*m as i64, *c as i64),
        s => return Err(format!("{}: result shape {s:?} is not a batch of matrices", n.op)),
    };
    let len = diagonal.ty.shape.last().copied().unwrap_or(0) as i64;
    let (num_rows, num_cols) =
        if n.op == "MatrixDiag" { (-1, -1) } else { (scalar(n, 2, "num_rows")?, scalar(n, 3, "num_cols")?) };
    if b.matrix_dims(n.op, len, num_rows, num_cols)? != (m, cols) {
        return Err(format!("{}: the result type does not match the diagonals", n.op));
    }
    let pad = if n.op == "MatrixDiag" { c.splat(&Ty::scalar(out.dtype), 0.0) } else { n.input(4)?.clone() };
    let base = c.broadcast_to(&pad, &out.shape);
    if out.shape.contains(&0) {
        return Ok(vec![base]);
    }
    Ok(vec![write_band(c, base, diagonal, b, len)?])
}

/// `MatrixSetDiag{,V2,V3}(input, diagonal, k)`.
pub(super) fn set_diag(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (x, diagonal) = (n.input(0)?, n.input(1)?);
    let b = band(n, 2)?;
    let (lead, m, cols) = matrices(n.op, x)?;
    b.check(n.op, m, cols)?;
    let len = b.max_len(m, cols);
    let mut expected = lead;
    if !b.single() {
        expected.push(b.count());
    }
    expected.push(len as usize);
    if x.ty.shape.contains(&0) || diagonal.ty.shape != expected {
        return Err(format!("{}: diagonal of shape {:?} does not fit {:?}", n.op, diagonal.ty.shape, x.ty.shape));
    }
    Ok(vec![write_band(c, x.clone(), diagonal, b, len)?])
}

/// `MatrixBandPart(input, num_lower, num_upper)`: zeros outside the band; a
/// negative count keeps that whole triangle. The counts may be run-time values.
pub(super) fn band_part(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let shape = x.ty.shape.clone();
    matrices(n.op, x)?;
    let (lower, upper) = (n.input(1)?, n.input(2)?);
    let r = shape.len();
    let int = lower.ty.dtype;
    let mat = vec![shape[r - 2], shape[r - 1]];
    let rows = c.op("stablehlo.iota", &[], "iota_dimension = 0 : i64", Ty::new(int, mat.clone()));
    let cols = c.op("stablehlo.iota", &[], "iota_dimension = 1 : i64", Ty::new(int, mat.clone()));
    let within = |c: &mut Ctx, count: &Val, a: &Val, b: &Val| {
        let count = c.convert(count, int);
        let count = c.broadcast_to(&count, &mat);
        let below = c.elementwise("subtract", &[a, b]);
        let near = c.compare(&below, &count, Cmp::Le);
        let zero = c.splat(&count.ty, 0.0);
        let all = c.compare(&count, &zero, Cmp::Lt);
        c.elementwise("or", &[&all, &near])
    };
    let keep_lower = within(c, lower, &rows, &cols);
    let keep_upper = within(c, upper, &cols, &rows);
    let keep = c.elementwise("and", &[&keep_lower, &keep_upper]);
    let keep = c.op(
        "stablehlo.broadcast_in_dim",
        &[&keep],
        &format!("broadcast_dimensions = {}", i64s(&[r - 2, r - 1])),
        Ty::new(DType::Bool, shape.clone()),
    );
    let zeros = c.splat(&x.ty, 0.0);
    Ok(vec![c.select(&keep, x, &zeros)])
}

/// `Diag(x)`: shape `s ++ s` with `x` on the diagonal.
pub(super) fn diag(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let k = x.ty.count();
    let flat = c.reshape(x, vec![k]);
    let square = vec![k, k];
    let spread = c.op(
        "stablehlo.broadcast_in_dim",
        &[&flat],
        "broadcast_dimensions = array<i64: 0>",
        x.ty.with_shape(square.clone()),
    );
    let mask = on_diagonal(c, &square, 0);
    let zeros = c.splat(&spread.ty, 0.0);
    let out = c.select(&mask, &spread, &zeros);
    Ok(vec![c.reshape(&out, n.out(0)?.shape.clone())])
}

/// `DiagPart(x)` of a shape `s ++ s`: a slice of stride `K + 1` of the flattened input.
pub(super) fn diag_part_full(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let out = n.out(0)?.clone();
    let k = out.count() as i64;
    if k == 0 {
        return Ok(vec![c.splat(&out, 0.0)]);
    }
    let flat = c.reshape(x, vec![(k * k) as usize]);
    let d = strided(c, &flat, 0, k, k + 1);
    Ok(vec![c.reshape(&d, out.shape)])
}

/// `Cross(a, b)`: slices of the last axis, multiplied and subtracted, concatenated back.
pub(super) fn cross(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (a, b) = (n.input(0)?, n.input(1)?);
    if a.ty.shape != b.ty.shape || a.ty.shape.last() != Some(&3) {
        return Err(format!("Cross: a {:?} and b {:?} must have one shape ending in 3", a.ty.shape, b.ty.shape));
    }
    let part = |c: &mut Ctx, v: &Val, i: i64| strided(c, v, i, 1, 1);
    let (a0, a1, a2) = (part(c, a, 0), part(c, a, 1), part(c, a, 2));
    let (b0, b1, b2) = (part(c, b, 0), part(c, b, 1), part(c, b, 2));
    let term = |c: &mut Ctx, p: &Val, q: &Val, r: &Val, s: &Val| {
        let pq = c.elementwise("multiply", &[p, q]);
        let rs = c.elementwise("multiply", &[r, s]);
        c.elementwise("subtract", &[&pq, &rs])
    };
    let x = term(c, &a1, &b2, &a2, &b1);
    let y = term(c, &a2, &b0, &a0, &b2);
    let z = term(c, &a0, &b1, &a1, &b0);
    let last = a.ty.rank() - 1;
    Ok(vec![c.op("stablehlo.concatenate", &[&x, &y, &z], &format!("dimension = {last} : i64"), a.ty.clone())])
}
