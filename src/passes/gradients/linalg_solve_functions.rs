//! Gradient functions of the factorizations and solves, as TensorFlow's
//! `linalg_grad.py` registers them.
//!
//! With `C = MatrixInverse(A)` (of `A^T` with `adjoint`), the gradient is
//! `-C^T G C^T` (`-C G^T C` with `adjoint`). With `C = MatrixSolve(A, B)`,
//! `dB = MatrixSolve(A, G)` with the opposite `adjoint`, and `dA = -dB C^T`
//! (`-C dB^T` with `adjoint`). `TridiagonalSolve` differentiates as the
//! `MatrixSolve` of the dense matrix its diagonals make (`MatrixDiagV3`),
//! its diagonals' gradient read back as that band of `dA`
//! (`MatrixDiagPartV3`).
//!
//! The factorizations read the gradients of all their outputs (zeros for an
//! output that received none): [`multi_output`] answers for them. `Qr`
//! follows `_QrGrad`: a square or deep matrix (`P = N` columns) by its
//! formula with `R^-T` from a triangular solve against the identity; a wide
//! one splits `A = [X, Y]` at column `P` and differentiates `X`'s QR with
//! `dQ + Y dV^T`, `dY = Q dV`. `SelfAdjointEigV2` follows
//! `_SelfAdjointEigV2Grad`: with `F[i, j] = 1 / (e_j - e_i)` off the
//! diagonal (a safe reciprocal) and `M = diag(de) + F * (V^T dV)`, the
//! gradient is the lower triangle of `V (M + M^T) V^T` with its diagonal
//! halved (the op reads the lower triangle only); without `compute_v` the
//! eigenvectors are recomputed. `Svd` follows `_SvdGrad` (see
//! [`svd_grad`]). Every op is emitted with dynamic shapes;
//! cost is a constant number of ops per differentiated op.

use super::emitter::{Emitter, TAttr, Tensor};
use super::functions::Unsupported;
use super::index_functions::last_of_shape;
use super::linalg_functions::{band_part, bmm};
use crate::ir::{AttrValue, DType, NodeId};

/// The gradients of `op`'s data inputs given `g`; `Err(None)` when `op_type` is not of this family.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let t = e.dtype_of(g);
    let ta = e.t_attr(t);
    let adjoint = super::op_attr(&e.graph.node(op).attrs, "adjoint").and_then(AttrValue::as_bool).unwrap_or(false);
    Ok(match op_type {
        "MatrixInverse" => {
            let c = Tensor::of(op);
            let inner = if adjoint { bmm(e, g, c, true, false, &ta) } else { bmm(e, g, c, false, true, &ta) };
            let outer = bmm(e, c, inner, !adjoint, false, &ta);
            vec![Some(e.emit("Neg", "Neg", &[outer], ta))]
        }
        "MatrixSolve" => {
            let (a, c) = (x(0)?, Tensor::of(op));
            let attrs = [("adjoint", AttrValue::Bool(!adjoint))].into_iter().chain(ta.clone());
            let gb = e.emit("MatrixSolve", "MatrixSolve", &[a, g], attrs);
            let ga = if adjoint { bmm(e, c, gb, false, true, &ta) } else { bmm(e, gb, c, false, true, &ta) };
            vec![Some(e.emit("Neg", "Neg", &[ga], ta)), Some(gb)]
        }
        "TridiagonalSolve" => {
            // The diagonals `[..., 3, M]` are the band `k = [-1, 1]` of the dense matrix (`LEFT_RIGHT`).
            let (d, c) = (x(0)?, Tensor::of(op));
            let name = e.fresh_name("tridiagonal");
            let k = e.int_const_named(format!("{name}/k"), &[-1, 1], false);
            let minus_one = e.int_const_named(format!("{name}/num_rows"), &[-1], true);
            let zero = e.scalar_const_named(&format!("{name}/padding"), t, 0.0);
            let align = ("align", AttrValue::Str("LEFT_RIGHT".into()));
            let with_align = ta.clone().into_iter().chain([align.clone()]);
            let dense = e.emit("MatrixDiagV3", "MatrixDiagV3", &[d, k, minus_one, minus_one, zero], with_align);
            let attrs = [("adjoint", AttrValue::Bool(true))].into_iter().chain(ta.clone());
            let gb = e.emit("MatrixSolve", "MatrixSolve", &[dense, g], attrs);
            let outer = bmm(e, gb, c, false, true, &ta);
            let band = e.emit(
                "MatrixDiagPartV3",
                "MatrixDiagPartV3",
                &[outer, k, zero],
                ta.clone().into_iter().chain([align]),
            );
            vec![Some(e.emit("Neg", "Neg", &[band], ta)), Some(gb)]
        }
        _ => return Err(None),
    })
}

/// The gradients of a factorization's inputs from the gradients of all its
/// outputs; `None` when `op_type` is not one.
pub fn multi_output(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Option<Result<Vec<Option<Tensor>>, Unsupported>> {
    match op_type {
        "Qr" => Some(qr_grad(e, op, inputs, out_grads)),
        "SelfAdjointEigV2" => Some(eigh_grad(e, op, inputs, out_grads)),
        "Svd" => Some(svd_grad(e, op, inputs, out_grads)),
        _ => None,
    }
}

/// `x[..., :, :p]` (`head`) or `x[..., :, p:]`, with `p` a scalar i32 tensor.
fn columns(e: &mut Emitter<'_>, x: Tensor, p: Tensor, head: bool, ta: &TAttr) -> Tensor {
    let i32_t = e.t_attr(Some(DType::I32));
    let name = e.fresh_name("strided_slice");
    let zero = e.int_const_named(format!("{name}/zero"), &[0], true);
    let pack = [("N", AttrValue::Int(3)), ("axis", AttrValue::Int(0))].into_iter().chain(i32_t);
    let with_p = e.emit("Pack", "stack", &[zero, zero, p], pack);
    let (begin, end) = if head {
        let begin = e.int_const_named(format!("{name}/begin"), &[0, 0, 0], false);
        (begin, with_p)
    } else {
        let end = e.int_const_named(format!("{name}/end"), &[0, 0, 0], false);
        (with_p, end)
    };
    let strides = e.int_const_named(format!("{name}/strides"), &[1, 1, 1], false);
    // Spec `[..., :, bound]`: the ellipsis, a whole axis, then the cut one.
    let (begin_mask, end_mask) = if head { (0b110, 0b010) } else { (0b010, 0b110) };
    let masks = [
        ("begin_mask", AttrValue::Int(begin_mask)),
        ("end_mask", AttrValue::Int(end_mask)),
        ("ellipsis_mask", AttrValue::Int(1)),
        ("new_axis_mask", AttrValue::Int(0)),
        ("shrink_axis_mask", AttrValue::Int(0)),
        ("Index", AttrValue::Type(DType::I32)),
    ];
    e.emit_named(name, "StridedSlice", &[x, begin, end, strides], masks.into_iter().chain(ta.clone()))
}

/// The size of `x`'s last axis as a scalar i32 tensor.
fn last_dim(e: &mut Emitter<'_>, x: Tensor) -> Tensor {
    let shape = e.shape("Shape", x);
    last_of_shape(e, shape)
}

/// `_QrGrad` (see the module's doc).
fn qr_grad(
    e: &mut Emitter<'_>,
    op: NodeId,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let a = *inputs.first().ok_or_else(|| Some("expected the input".to_string()))?;
    let (q, r) = (Tensor { node: op, output: 0 }, Tensor { node: op, output: 1 });
    let (dq, dr) = (e.grad_or_zeros(op, 0, out_grads), e.grad_or_zeros(op, 1, out_grads));
    let t = e.dtype_of(dq);
    let ta = e.t_attr(t);
    let p = last_dim(e, q);
    let u = columns(e, r, p, true, &ta);
    let du = columns(e, dr, p, true, &ta);
    let dv = columns(e, dr, p, false, &ta);
    let y = columns(e, a, p, false, &ta);
    let dy = bmm(e, q, dv, false, false, &ta);
    let ydv = bmm(e, y, dv, false, true, &ta);
    let dq = e.emit("AddV2", "add", &[dq, ydv], ta.clone());
    let dx = qr_grad_square(e, q, u, dq, du, &ta);
    let name = e.fresh_name("concat");
    let axis = e.int_const_named(format!("{name}/axis"), &[-1], true);
    let attrs = [("N", AttrValue::Int(2)), ("Tidx", AttrValue::Type(DType::I32))].into_iter().chain(ta.clone());
    Ok(vec![Some(e.emit_named(name, "ConcatV2", &[dx, dy, axis], attrs))])
}

/// `_QrGradSquareAndDeepMatrices`: `Q (dR + tril(Q^T dQ - dQ^T Q + R dR^T - dR R^T) R^-T)
/// + (dQ - Q Q^T dQ) R^-T`.
fn qr_grad_square(e: &mut Emitter<'_>, q: Tensor, r: Tensor, dq: Tensor, dr: Tensor, ta: &TAttr) -> Tensor {
    let qdq = bmm(e, q, dq, true, false, ta);
    let qdq_t = bmm(e, dq, q, true, false, ta);
    let qdq_skew = e.emit("Sub", "sub", &[qdq, qdq_t], ta.clone());
    let rdr = bmm(e, r, dr, false, true, ta);
    let rdr_t = bmm(e, dr, r, false, true, ta);
    let rdr_skew = e.emit("Sub", "sub", &[rdr, rdr_t], ta.clone());
    let sum = e.emit("AddV2", "add", &[qdq_skew, rdr_skew], ta.clone());
    let tril = band_part(e, sum, -1, 0, ta);
    // R^-T: R^T Z = I.
    let diag = e.emit("MatrixDiagPart", "MatrixDiagPart", &[r], ta.clone());
    let ones = e.emit("OnesLike", "ones_like", &[diag], ta.clone());
    let eye = e.emit("MatrixDiag", "eye", &[ones], ta.clone());
    let solve = [("lower", AttrValue::Bool(false)), ("adjoint", AttrValue::Bool(true))];
    let r_inv_t =
        e.emit("MatrixTriangularSolve", "MatrixTriangularSolve", &[r, eye], solve.into_iter().chain(ta.clone()));
    let left = bmm(e, tril, r_inv_t, false, false, ta);
    let left = e.emit("AddV2", "add", &[dr, left], ta.clone());
    let grad_a = bmm(e, q, left, false, false, ta);
    let qqdq = bmm(e, q, qdq, false, false, ta);
    let right = e.emit("Sub", "sub", &[dq, qqdq], ta.clone());
    let grad_b = bmm(e, right, r_inv_t, false, false, ta);
    e.emit("AddV2", "add", &[grad_a, grad_b], ta.clone())
}

/// `_SelfAdjointEigV2Grad` (see the module's doc).
fn eigh_grad(
    e: &mut Emitter<'_>,
    op: NodeId,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let a = *inputs.first().ok_or_else(|| Some("expected the input".to_string()))?;
    let compute_v = super::op_attr(&e.graph.node(op).attrs, "compute_v").and_then(AttrValue::as_bool).unwrap_or(true);
    let w = Tensor { node: op, output: 0 };
    let de = e.grad_or_zeros(op, 0, out_grads);
    let t = e.dtype_of(de);
    let ta = e.t_attr(t);
    let diag_de = e.emit("MatrixDiag", "MatrixDiag", &[de], ta.clone());
    let two = {
        let name = e.fresh_name("two");
        e.scalar_const_named(&name, t, 2.0)
    };
    let twice = e.emit("Mul", "mul", &[two, diag_de], ta.clone());
    let (v, sym) = if compute_v {
        let v = Tensor { node: op, output: 1 };
        let dv = e.grad_or_zeros(op, 1, out_grads);
        let f = pairwise_reciprocal(e, w, t, &ta);
        // M + M^T = 2 diag(de) + F * (V^T dV - dV^T V), F being antisymmetric.
        let vdv = bmm(e, v, dv, true, false, &ta);
        let dvv = bmm(e, dv, v, true, false, &ta);
        let skew = e.emit("Sub", "sub", &[vdv, dvv], ta.clone());
        let fs = e.emit("Mul", "mul", &[f, skew], ta.clone());
        (v, e.emit("AddV2", "add", &[twice, fs], ta.clone()))
    } else {
        let attrs = [("compute_v", AttrValue::Bool(true))].into_iter().chain(ta.clone());
        let eig = e.emit("SelfAdjointEigV2", "SelfAdjointEigV2", &[a], attrs);
        (Tensor { node: eig.node, output: 1 }, twice)
    };
    let inner = bmm(e, sym, v, false, true, &ta);
    let full = bmm(e, v, inner, false, false, &ta);
    let lower = band_part(e, full, -1, 0, &ta);
    let diag = e.emit("MatrixDiagPart", "MatrixDiagPart", &[lower], ta.clone());
    let half = {
        let name = e.fresh_name("half");
        e.scalar_const_named(&name, t, 0.5)
    };
    let halved = e.emit("Mul", "mul", &[half, diag], ta.clone());
    Ok(vec![Some(e.emit("MatrixSetDiag", "MatrixSetDiag", &[lower, halved], ta))])
}

/// `x / (x^2 + 1e-20)`: `1 / x`, and 0 for 0 (TensorFlow's `_SafeReciprocal`).
fn safe_reciprocal(e: &mut Emitter<'_>, x: Tensor, t: Option<DType>, ta: &TAttr) -> Tensor {
    let sq = e.emit("Mul", "mul", &[x, x], ta.clone());
    let tiny = {
        let name = e.fresh_name("epsilon");
        e.scalar_const_named(&name, t, 1e-20)
    };
    let den = e.emit("AddV2", "add", &[sq, tiny], ta.clone());
    let recip = e.emit("Reciprocal", "Reciprocal", &[den], ta.clone());
    e.emit("Mul", "mul", &[x, recip], ta.clone())
}

/// `F[i, j] = 1 / (x_j - x_i)` off the diagonal (safely), 0 on it, for `x` `[..., n]`.
fn pairwise_reciprocal(e: &mut Emitter<'_>, x: Tensor, t: Option<DType>, ta: &TAttr) -> Tensor {
    let expand = |e: &mut Emitter<'_>, axis: i32| {
        let name = e.fresh_name("ExpandDims");
        let dim = e.int_const_named(format!("{name}/dim"), &[axis], true);
        let attrs = ta.clone().into_iter().chain([("Tdim", AttrValue::Type(DType::I32))]);
        e.emit_named(name, "ExpandDims", &[x, dim], attrs)
    };
    let (row, col) = (expand(e, -2), expand(e, -1));
    let diff = e.emit("Sub", "sub", &[row, col], ta.clone());
    let f = safe_reciprocal(e, diff, t, ta);
    let zeros = e.emit("ZerosLike", "zeros_like", &[x], ta.clone());
    e.emit("MatrixSetDiag", "MatrixSetDiag", &[f, zeros], ta.clone())
}

/// `_SvdGrad` for thin factors, in a form that needs no static shapes: with
/// `F[i, j] = 1 / (s_j^2 - s_i^2)`, `dA = U (diag(dS) + (F * (U^T dU - dU^T U)) S
/// + S (F * (V^T dV - dV^T V))) V^T + (dU - U U^T dU) S^-1 V^T + U S^-1 (dV - V V^T dV)^T`.
/// TensorFlow keeps the second term for a deep matrix and the third for a
/// wide one; the other is zero (its `U U^T` or `V V^T` is the identity).
/// With `full_matrices`, `U = [U1, U2]` and `V = [V1, V2]` split at `P`: the
/// thin formula runs on `U1`, `V1`, and `U2 (dU2^T U1)`, `V2 (dV2^T V1)` are
/// taken from the two projected gradients (TensorFlow's complement term).
/// Without `compute_uv` the factors are recomputed and `dA = U diag(dS) V^T`.
fn svd_grad(
    e: &mut Emitter<'_>,
    op: NodeId,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let a = *inputs.first().ok_or_else(|| Some("expected the input".to_string()))?;
    let flag = |e: &Emitter<'_>, key: &str, default: bool| {
        super::op_attr(&e.graph.node(op).attrs, key).and_then(AttrValue::as_bool).unwrap_or(default)
    };
    let (compute_uv, full) = (flag(e, "compute_uv", true), flag(e, "full_matrices", false));
    let s = Tensor { node: op, output: 0 };
    let ds = e.grad_or_zeros(op, 0, out_grads);
    let t = e.dtype_of(ds);
    let ta = e.t_attr(t);
    let ds_mat = e.emit("MatrixDiag", "MatrixDiag", &[ds], ta.clone());
    if !compute_uv {
        let attrs = [("compute_uv", AttrValue::Bool(true)), ("full_matrices", AttrValue::Bool(false))];
        let svd = e.emit("Svd", "Svd", &[a], attrs.into_iter().chain(ta.clone()));
        let (u, v) = (Tensor { node: svd.node, output: 1 }, Tensor { node: svd.node, output: 2 });
        let inner = bmm(e, ds_mat, v, false, true, &ta);
        return Ok(vec![Some(bmm(e, u, inner, false, false, &ta))]);
    }
    let (u, v) = (Tensor { node: op, output: 1 }, Tensor { node: op, output: 2 });
    let (du, dv) = (e.grad_or_zeros(op, 1, out_grads), e.grad_or_zeros(op, 2, out_grads));
    // With full_matrices, the first P columns are the thin factors and the rest their complements.
    let (u, v, du, dv, rest) = if full {
        let p = last_dim(e, s);
        let mut cut = |x: Tensor| (columns(e, x, p, true, &ta), columns(e, x, p, false, &ta));
        let ((u1, u2), (v1, v2), (du1, du2), (dv1, dv2)) = (cut(u), cut(v), cut(du), cut(dv));
        (u1, v1, du1, dv1, Some((u2, v2, du2, dv2)))
    } else {
        (u, v, du, dv, None)
    };
    let s2 = e.emit("Mul", "mul", &[s, s], ta.clone());
    let f = pairwise_reciprocal(e, s2, t, &ta);
    let s_mat = e.emit("MatrixDiag", "MatrixDiag", &[s], ta.clone());
    let s_recip = safe_reciprocal(e, s, t, &ta);
    let s_inv = e.emit("MatrixDiag", "MatrixDiag", &[s_recip], ta.clone());
    let skew = |e: &mut Emitter<'_>, x: Tensor, dx: Tensor| {
        let xdx = bmm(e, x, dx, true, false, &ta);
        let dxx = bmm(e, dx, x, true, false, &ta);
        let diff = e.emit("Sub", "sub", &[xdx, dxx], ta.clone());
        (xdx, e.emit("Mul", "mul", &[f, diff], ta.clone()))
    };
    let (utdu, fu) = skew(e, u, du);
    let (vtdv, fv) = skew(e, v, dv);
    let fu_s = bmm(e, fu, s_mat, false, false, &ta);
    let s_fv = bmm(e, s_mat, fv, false, false, &ta);
    let inner = e.emit("AddV2", "add", &[ds_mat, fu_s], ta.clone());
    let inner = e.emit("AddV2", "add", &[inner, s_fv], ta.clone());
    let inner_vt = bmm(e, inner, v, false, true, &ta);
    let term1 = bmm(e, u, inner_vt, false, false, &ta);
    // (dU - U U^T dU) S^-1 V^T
    let u_utdu = bmm(e, u, utdu, false, false, &ta);
    let mut du_perp = e.emit("Sub", "sub", &[du, u_utdu], ta.clone());
    let complement = |e: &mut Emitter<'_>, perp: Tensor, x1: Tensor, x2: Tensor, dx2: Tensor| {
        // perp - X2 (dX2^T X1)
        let dx2t_x1 = bmm(e, dx2, x1, true, false, &ta);
        let x2_term = bmm(e, x2, dx2t_x1, false, false, &ta);
        e.emit("Sub", "sub", &[perp, x2_term], ta.clone())
    };
    if let Some((u2, _, du2, _)) = rest {
        du_perp = complement(e, du_perp, u, u2, du2);
    }
    let du_s = bmm(e, du_perp, s_inv, false, false, &ta);
    let term_u = bmm(e, du_s, v, false, true, &ta);
    // U S^-1 (dV - V V^T dV)^T
    let v_vtdv = bmm(e, v, vtdv, false, false, &ta);
    let mut dv_perp = e.emit("Sub", "sub", &[dv, v_vtdv], ta.clone());
    if let Some((_, v2, _, dv2)) = rest {
        dv_perp = complement(e, dv_perp, v, v2, dv2);
    }
    let u_s = bmm(e, u, s_inv, false, false, &ta);
    let term_v = bmm(e, u_s, dv_perp, false, true, &ta);
    let sum = e.emit("AddV2", "add", &[term1, term_u], ta.clone());
    Ok(vec![Some(e.emit("AddV2", "add", &[sum, term_v], ta))])
}
