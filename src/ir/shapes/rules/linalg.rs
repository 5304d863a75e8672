//! Type rules of the structural linear-algebra ops (band parts, diagonals,
//! cross products), and [`Band`]: the geometry of TensorFlow's
//! `MatrixDiag*`/`MatrixSetDiag*` ops, shared by the simulator's kernels and
//! the StableHLO lowering so that all three agree on it.
//!
//! Diagonal `d` of an `M x N` matrix holds the cells `(t + max(-d, 0), t +
//! max(d, 0))` for `t < len(d) = min(M + min(d, 0), N - max(d, 0))`. A band
//! `k = [lo, hi]` packs diagonals `hi, hi - 1, ..., lo` (one row each) into
//! rows of `max_len` (the longest of them); a shorter diagonal sits at the
//! left of its row or at the right, as `align` says for superdiagonals
//! (`d >= 0`) and subdiagonals (`d <= 0`). `V2` ops align both to the left,
//! `V3` ops read `align` (`RIGHT_LEFT` when absent).

use super::{Args, OutType};

/// The diagonals `lo..=hi` an op reads or writes, and their alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    /// The lowest diagonal (negative: below the main one).
    pub lo: i64,
    /// The highest diagonal.
    pub hi: i64,
    /// Superdiagonals sit at the left of their row.
    pub left_super: bool,
    /// Subdiagonals sit at the left of their row.
    pub left_sub: bool,
}

impl Band {
    /// The band of `k` (one integer, or `[lo, hi]`) with the alignment of `op`'s `align` attribute.
    pub fn new(op: &str, k: &[i64], align: Option<&str>) -> Result<Band, String> {
        let (lo, hi) = match *k {
            [d] => (d, d),
            [lo, hi] => (lo, hi),
            _ => return Err(format!("{op}: k must be a scalar or a pair, got {} values", k.len())),
        };
        if lo > hi {
            return Err(format!("{op}: k[0] = {lo} must not exceed k[1] = {hi}"));
        }
        let align = match (op.ends_with("V3"), align) {
            (true, Some(a)) => a,
            (true, None) => "RIGHT_LEFT",
            (false, _) => "LEFT_LEFT",
        };
        let (left_super, left_sub) = match align {
            "LEFT_LEFT" => (true, true),
            "LEFT_RIGHT" => (true, false),
            "RIGHT_LEFT" => (false, true),
            "RIGHT_RIGHT" => (false, false),
            other => {
                return Err(format!(
                    "{op}: align must be LEFT_LEFT, LEFT_RIGHT, RIGHT_LEFT or RIGHT_RIGHT, got {other:?}"
                ))
            }
        };
        Ok(Band { lo, hi, left_super, left_sub })
    }

    /// The main diagonal only.
    pub fn main() -> Band {
        Band { lo: 0, hi: 0, left_super: true, left_sub: true }
    }

    /// How many diagonals.
    pub fn count(&self) -> usize {
        (self.hi - self.lo + 1) as usize
    }

    /// True when the op packs one diagonal (no diagonal axis).
    pub fn single(&self) -> bool {
        self.lo == self.hi
    }

    /// The length of diagonal `d` of a `rows x cols` matrix (0 when outside).
    pub fn len(d: i64, rows: i64, cols: i64) -> i64 {
        (rows + d.min(0)).min(cols - d.max(0)).max(0)
    }

    /// The longest diagonal of the band in a `rows x cols` matrix.
    pub fn max_len(&self, rows: i64, cols: i64) -> i64 {
        (self.lo..=self.hi).map(|d| Band::len(d, rows, cols)).max().unwrap_or(0)
    }

    /// Where diagonal `d` starts in its packed row of `max_len` cells.
    pub fn offset(&self, d: i64, rows: i64, cols: i64, max_len: i64) -> i64 {
        let left = if d >= 0 { self.left_super } else { self.left_sub };
        if left || d == 0 {
            0
        } else {
            max_len - Band::len(d, rows, cols)
        }
    }

    /// The cell of element `t` of diagonal `d`.
    pub fn cell(d: i64, t: i64) -> (i64, i64) {
        (t + (-d).max(0), t + d.max(0))
    }

    /// Checks that the band lies inside a `rows x cols` matrix, as TensorFlow requires.
    pub fn check(&self, op: &str, rows: i64, cols: i64) -> Result<(), String> {
        if (rows > 0 && self.lo <= -rows) || (cols > 0 && self.hi >= cols) {
            return Err(format!(
                "{op}: diagonals {}..={} do not fit a {rows} x {cols} matrix (k must lie in ({}, {}))",
                self.lo, self.hi, -rows, cols
            ));
        }
        Ok(())
    }

    /// The matrix size `MatrixDiag` builds from rows of `len` cells, given
    /// the requested `num_rows`/`num_cols` (-1: the smallest that fits).
    pub fn matrix_dims(&self, op: &str, len: i64, num_rows: i64, num_cols: i64) -> Result<(i64, i64), String> {
        let min_rows = len - self.hi.min(0);
        let min_cols = len + self.lo.max(0);
        let (rows, cols) = match (num_rows, num_cols) {
            (-1, -1) => (min_rows.max(min_cols), min_rows.max(min_cols)),
            (-1, c) => (min_rows, c),
            (r, -1) => (r, min_cols),
            (r, c) => (r, c),
        };
        if rows < min_rows || cols < min_cols || (rows != min_rows && cols != min_cols) {
            return Err(format!(
                "{op}: a {rows} x {cols} matrix does not match diagonals {}..={} of length {len} \
                 (one of num_rows = {min_rows}, num_cols = {min_cols} must hold, the other at least)",
                self.lo, self.hi
            ));
        }
        Ok((rows, cols))
    }
}

/// The band of a diag op from its `k` operand (`i`), or the main diagonal for the V1 ops.
fn band(a: &Args, k_operand: usize) -> Result<Band, String> {
    if !(a.op.ends_with("V2") || a.op.ends_with("V3")) {
        return Ok(Band::main());
    }
    Band::new(a.op, a.ints(k_operand, "k")?, a.attrs.get_str("align"))
}

/// The innermost matrix of operand `i`: its leading dims, rows and cols.
pub(super) fn matrix(a: &Args, i: usize) -> Result<(Vec<usize>, usize, usize), String> {
    let s = a.x(i)?.shape;
    match s.len() {
        r if r >= 2 => Ok((s[..r - 2].to_vec(), s[r - 2], s[r - 1])),
        _ => Err(format!("{}: input must have rank >= 2, got shape {s:?}", a.op)),
    }
}

/// `MatrixDiagPart{,V2,V3}(input, k, padding_value)`.
pub(super) fn diag_part(a: &Args) -> Result<Vec<OutType>, String> {
    let b = band(a, 1)?;
    let (mut shape, m, n) = matrix(a, 0)?;
    b.check(a.op, m as i64, n as i64)?;
    if !b.single() {
        shape.push(b.count());
    }
    shape.push(b.max_len(m as i64, n as i64) as usize);
    Ok(vec![OutType::new(a.x(0)?.dtype, shape)])
}

/// `MatrixDiag{,V2,V3}(diagonal, k, num_rows, num_cols, padding_value)`.
pub(super) fn diag(a: &Args) -> Result<Vec<OutType>, String> {
    let b = band(a, 1)?;
    let x = a.x(0)?;
    let keep = if b.single() { 1 } else { 2 };
    if x.shape.len() < keep {
        return Err(format!("{}: diagonal must have rank >= {keep}, got shape {:?}", a.op, x.shape));
    }
    let len = x.shape[x.shape.len() - 1] as i64;
    let (num_rows, num_cols) =
        if a.op == "MatrixDiag" { (-1, -1) } else { (scalar(a, 2, "num_rows")?, scalar(a, 3, "num_cols")?) };
    let (rows, cols) = b.matrix_dims(a.op, len, num_rows, num_cols)?;
    let mut shape = x.shape[..x.shape.len() - keep].to_vec();
    shape.extend([rows as usize, cols as usize]);
    Ok(vec![OutType::new(x.dtype, shape)])
}

fn scalar(a: &Args, i: usize, what: &str) -> Result<i64, String> {
    match a.ints(i, what)? {
        [v] => Ok(*v),
        v => Err(format!("{}: {what} must be a scalar, got {} values", a.op, v.len())),
    }
}

/// `MatrixSetDiag{,V2,V3}(input, diagonal, k)`: the input's type.
pub(super) fn set_diag(a: &Args) -> Result<Vec<OutType>, String> {
    let b = band(a, 2)?;
    let (_, m, n) = matrix(a, 0)?;
    b.check(a.op, m as i64, n as i64)?;
    Ok(vec![a.same(0)?])
}

/// `MatrixBandPart(input, num_lower, num_upper)` and `Cross(a, b)`: the input's type.
pub(super) fn same_matrix(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    if a.op == "Cross" && x.shape.last() != Some(&3) {
        return Err(format!("Cross: the last dimension must be 3, got shape {:?}", x.shape));
    }
    if a.op == "MatrixBandPart" {
        matrix(a, 0)?;
    }
    Ok(vec![a.same(0)?])
}

/// `Diag(x)`: shape `s ++ s`.
pub(super) fn diag_full(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let shape = x.shape.iter().chain(x.shape).copied().collect();
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `DiagPart(x)`: the first half of a shape `s ++ s`.
pub(super) fn diag_part_full(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let half = x.shape.len() / 2;
    if !x.shape.len().is_multiple_of(2) || x.shape[..half] != x.shape[half..] {
        return Err(format!("DiagPart: the shape must be s ++ s, got {:?}", x.shape));
    }
    Ok(vec![OutType::new(x.dtype, x.shape[..half].to_vec())])
}

/// `Cholesky(input)`: the input's type (square matrices).
pub(super) fn cholesky(a: &Args) -> Result<Vec<OutType>, String> {
    let (_, m, n) = matrix(a, 0)?;
    if m != n {
        return Err(format!("Cholesky: input must be square, got shape {:?}", a.x(0)?.shape));
    }
    Ok(vec![a.same(0)?])
}

/// `MatrixTriangularSolve(matrix, rhs)`: the leading dims broadcast, then `rhs`'s matrix shape.
pub(super) fn triangular_solve(a: &Args) -> Result<Vec<OutType>, String> {
    let (alead, m, m2) = matrix(a, 0)?;
    let (blead, bm, k) = matrix(a, 1)?;
    if m != m2 || bm != m {
        return Err(format!(
            "MatrixTriangularSolve: matrix {:?} must be square with as many rows as rhs {:?}",
            a.x(0)?.shape,
            a.x(1)?.shape
        ));
    }
    let r = alead.len().max(blead.len());
    let at = |s: &[usize], i: usize| if i + s.len() >= r { s[i + s.len() - r] } else { 1 };
    let mut shape = Vec::with_capacity(r + 2);
    for i in 0..r {
        shape.push(match (at(&alead, i), at(&blead, i)) {
            (x, y) if x == y || y == 1 => x,
            (1, y) => y,
            (x, y) => return Err(format!("MatrixTriangularSolve: batch dims {x} and {y} do not broadcast")),
        });
    }
    shape.extend([m, k]);
    Ok(vec![OutType::new(a.x(1)?.dtype, shape)])
}

/// `SparseMatMul(a, b)`: an f32 `m x n` product (transposes applied first).
pub(super) fn sparse_matmul(a: &Args) -> Result<Vec<OutType>, String> {
    let (x, y) = (a.x(0)?.shape, a.x(1)?.shape);
    let (ta, tb) = (a.bool_attr("transpose_a", false), a.bool_attr("transpose_b", false));
    match (x, y) {
        ([r0, r1], [s0, s1]) => {
            let (m, k) = if ta { (*r1, *r0) } else { (*r0, *r1) };
            let (k2, n) = if tb { (*s1, *s0) } else { (*s0, *s1) };
            if k != k2 {
                return Err(format!("SparseMatMul: inner dimensions {k} and {k2} differ"));
            }
            Ok(vec![OutType::new(crate::ir::DType::F32, vec![m, n])])
        }
        _ => Err(format!("SparseMatMul: operands must be matrices, got {x:?} and {y:?}")),
    }
}

/// `TridiagonalMatMul(superdiag, maindiag, subdiag, rhs)`: the type of `rhs`.
pub(super) fn tridiagonal_matmul(a: &Args) -> Result<Vec<OutType>, String> {
    let (lead, m, _) = matrix(a, 3)?;
    for i in 0..3 {
        let s = a.x(i)?.shape;
        if s.len() != lead.len() + 2 || s[..lead.len()] != lead[..] || s[lead.len()..] != [1, m] {
            return Err(format!("TridiagonalMatMul: diagonal {i} of shape {s:?} must be [..., 1, {m}]"));
        }
    }
    Ok(vec![a.same(3)?])
}
