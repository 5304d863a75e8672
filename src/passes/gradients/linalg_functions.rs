//! Gradient functions of the structural linear-algebra ops, as TensorFlow's
//! `array_grad.py` and `math_grad.py` register them: a band part passes the
//! gradient through the same band; building a matrix from diagonals and
//! reading diagonals out of one are each other's gradients (with zeros
//! elsewhere); setting diagonals splits the gradient between the input (the
//! band zeroed) and the diagonals (the band read out); `Cross(a, b)` gives
//! `Cross(b, g)` and `Cross(g, a)`.
//!
//! The `V2`/`V3` ops differentiate through `V3` ops with the forward op's
//! alignment (`LEFT_LEFT` for `V2`), so that every packed diagonal goes back
//! to the cell it came from. Every op is emitted with dynamic shapes; cost is
//! a constant number of ops per differentiated op.

use super::emitter::{Attr, Emitter, TAttr, Tensor};
use super::functions::Unsupported;
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
    let align = || -> Attr {
        let attrs = &e.graph.node(op).attrs;
        let given = super::op_attr(attrs, "align").cloned();
        let v2 = op_type.ends_with("V2");
        (
            "align",
            if v2 { AttrValue::Str("LEFT_LEFT".into()) } else { given.unwrap_or(AttrValue::Str("RIGHT_LEFT".into())) },
        )
    };
    let with = |ta: &TAttr, extra: Attr| ta.clone().into_iter().chain([extra]);
    Ok(match op_type {
        "MatrixBandPart" => {
            let tindex = super::op_attr(&e.graph.node(op).attrs, "Tindex").cloned().map(|v| ("Tindex", v));
            let attrs = ta.clone().into_iter().chain(tindex);
            vec![Some(e.emit("MatrixBandPart", "MatrixBandPart", &[g, x(1)?, x(2)?], attrs)), None, None]
        }
        "MatrixDiag" => vec![Some(e.emit("MatrixDiagPart", "MatrixDiagPart", &[g], ta))],
        "MatrixDiagV2" | "MatrixDiagV3" => {
            let a = align();
            let zero = zero(e, t);
            let d = e.emit("MatrixDiagPartV3", "MatrixDiagPartV3", &[g, x(1)?, zero], with(&ta, a));
            vec![Some(d), None, None, None, None]
        }
        "MatrixDiagPart" => {
            let zeros = e.emit("ZerosLike", "zeros_like", &[x(0)?], ta.clone());
            vec![Some(e.emit("MatrixSetDiag", "MatrixSetDiag", &[zeros, g], ta))]
        }
        "MatrixDiagPartV2" | "MatrixDiagPartV3" => {
            let a = align();
            let zeros = e.emit("ZerosLike", "zeros_like", &[x(0)?], ta.clone());
            let d = e.emit("MatrixSetDiagV3", "MatrixSetDiagV3", &[zeros, g, x(1)?], with(&ta, a));
            vec![Some(d), None, None]
        }
        "MatrixSetDiag" => {
            let zeros = e.emit("ZerosLike", "zeros_like", &[x(1)?], ta.clone());
            let gi = e.emit("MatrixSetDiag", "MatrixSetDiag", &[g, zeros], ta.clone());
            let gd = e.emit("MatrixDiagPart", "MatrixDiagPart", &[g], ta);
            vec![Some(gi), Some(gd)]
        }
        "MatrixSetDiagV2" | "MatrixSetDiagV3" => {
            let a = align();
            let k = x(2)?;
            let zeros = e.emit("ZerosLike", "zeros_like", &[x(1)?], ta.clone());
            let gi = e.emit("MatrixSetDiagV3", "MatrixSetDiagV3", &[g, zeros, k], with(&ta, a.clone()));
            let zero = zero(e, t);
            let gd = e.emit("MatrixDiagPartV3", "MatrixDiagPartV3", &[g, k, zero], with(&ta, a));
            vec![Some(gi), Some(gd), None]
        }
        "Diag" => vec![Some(e.emit("DiagPart", "DiagPart", &[g], ta))],
        "DiagPart" => vec![Some(e.emit("Diag", "Diag", &[g], ta))],
        "Cross" => {
            let (a, b) = (x(0)?, x(1)?);
            let ga = e.emit("Cross", "Cross", &[b, g], ta.clone());
            let gb = e.emit("Cross", "Cross_1", &[g, a], ta);
            vec![Some(ga), Some(gb)]
        }
        "Cholesky" => vec![Some(cholesky_grad(e, Tensor::of(op), g, &ta))],
        "MatrixTriangularSolve" => {
            let attrs = &e.graph.node(op).attrs;
            let flag =
                |key: &str, default: bool| super::op_attr(attrs, key).and_then(AttrValue::as_bool).unwrap_or(default);
            let (lower, adjoint) = (flag("lower", true), flag("adjoint", false));
            let (a, b) = (x(0)?, x(1)?);
            let c = Tensor::of(op);
            let solve = [("lower", AttrValue::Bool(lower)), ("adjoint", AttrValue::Bool(!adjoint))];
            let gb =
                e.emit("MatrixTriangularSolve", "MatrixTriangularSolve", &[a, g], solve.into_iter().chain(ta.clone()));
            let ga = if adjoint { bmm(e, c, gb, false, true, &ta) } else { bmm(e, gb, c, false, true, &ta) };
            let ga = e.emit("Neg", "Neg", &[ga], ta.clone());
            let (lo, hi) = if lower { (-1, 0) } else { (0, -1) };
            let ga = band_part(e, ga, lo, hi, &ta);
            // Leading axes that broadcast are summed back to each operand's shape.
            let (sa, sb) = (e.shape("Shape", ga), e.shape("Shape", gb));
            let ga = super::functions::reduce_to_shape_of(e, ga, a, sa, &ta);
            let gb = super::functions::reduce_to_shape_of(e, gb, b, sb, &ta);
            vec![Some(ga), Some(gb)]
        }
        "SparseMatMul" => {
            // As MatMul's, in f32, each gradient cast back to its operand's dtype.
            let attrs = &e.graph.node(op).attrs;
            let flag = |key: &str| super::op_attr(attrs, key).and_then(AttrValue::as_bool).unwrap_or(false);
            let (t_a, t_b) = (flag("transpose_a"), flag("transpose_b"));
            let dtype = |key: &str| super::op_attr(attrs, key).and_then(AttrValue::as_type).unwrap_or(DType::F32);
            let (da, db) = (dtype("Ta"), dtype("Tb"));
            let f32_t = e.t_attr(Some(DType::F32));
            let (a, b) = (cast(e, x(0)?, da, DType::F32), cast(e, x(1)?, db, DType::F32));
            let mm = |e: &mut Emitter<'_>, p: Tensor, q: Tensor, tp: bool, tq: bool| {
                let attrs = [("transpose_a", AttrValue::Bool(tp)), ("transpose_b", AttrValue::Bool(tq))];
                e.emit("MatMul", "MatMul", &[p, q], attrs.into_iter().chain(f32_t.clone()))
            };
            let (ga, gb) = match (t_a, t_b) {
                (false, false) => (mm(e, g, b, false, true), mm(e, a, g, true, false)),
                (false, true) => (mm(e, g, b, false, false), mm(e, g, a, true, false)),
                (true, false) => (mm(e, b, g, false, true), mm(e, a, g, false, false)),
                (true, true) => (mm(e, b, g, true, true), mm(e, g, a, true, true)),
            };
            vec![Some(cast(e, ga, DType::F32, da)), Some(cast(e, gb, DType::F32, db))]
        }
        "TridiagonalMatMul" => tridiagonal_matmul_grad(e, [x(0)?, x(1)?, x(2)?, x(3)?], g, &ta),
        _ => return Err(None),
    })
}

/// The gradient of `TridiagonalMatMul`: the three diagonals, packed
/// `[super, main, sub]` with `LEFT_RIGHT` alignment, are the band `k = [-1,
/// 1]` of the dense matrix `T` they form. Then `d rhs = T^T g`, and the
/// diagonals' gradients are that band of `g rhs^T` (zero where a diagonal
/// has no cell), split back into three `[..., 1, M]` rows.
fn tridiagonal_matmul_grad(e: &mut Emitter<'_>, x: [Tensor; 4], g: Tensor, ta: &TAttr) -> Vec<Option<Tensor>> {
    let [sup, main, sub, rhs] = x;
    let t = e.dtype_of(g);
    let name = e.fresh_name("tridiagonal");
    let axis = e.int_const_named(format!("{name}/axis"), &[-2], true);
    let k = e.int_const_named(format!("{name}/k"), &[-1, 1], false);
    let minus_one = e.int_const_named(format!("{name}/num_rows"), &[-1], true);
    let zero = zero(e, t);
    let align = || ("align", AttrValue::Str("LEFT_RIGHT".into()));
    let concat = [("N", AttrValue::Int(3)), ("Tidx", AttrValue::Type(DType::I32))];
    let packed = e.emit("ConcatV2", "concat", &[sup, main, sub, axis], concat.into_iter().chain(ta.clone()));
    let dense = e.emit(
        "MatrixDiagV3",
        "MatrixDiagV3",
        &[packed, k, minus_one, minus_one, zero],
        ta.clone().into_iter().chain([align()]),
    );
    let g_rhs = bmm(e, dense, g, true, false, ta);
    let outer = bmm(e, g, rhs, false, true, ta);
    let band =
        e.emit("MatrixDiagPartV3", "MatrixDiagPartV3", &[outer, k, zero], ta.clone().into_iter().chain([align()]));
    let split =
        e.emit("Split", "split", &[axis, band], [("num_split", AttrValue::Int(3))].into_iter().chain(ta.clone()));
    let part = |i: u32| Tensor { node: split.node, output: i };
    vec![Some(part(0)), Some(part(1)), Some(part(2)), Some(g_rhs)]
}

/// `Cast(x)` from `from` to `to`, or `x` when they are equal.
fn cast(e: &mut Emitter<'_>, x: Tensor, from: DType, to: DType) -> Tensor {
    if from == to {
        return x;
    }
    e.emit("Cast", "Cast", &[x], [("SrcT", AttrValue::Type(from)), ("DstT", AttrValue::Type(to))])
}

/// `BatchMatMulV2(p, q)` with the given adjoints.
pub(super) fn bmm(e: &mut Emitter<'_>, p: Tensor, q: Tensor, adj_p: bool, adj_q: bool, ta: &TAttr) -> Tensor {
    let attrs = [("adj_x", AttrValue::Bool(adj_p)), ("adj_y", AttrValue::Bool(adj_q))];
    e.emit("BatchMatMulV2", "MatMul", &[p, q], attrs.into_iter().chain(ta.clone()))
}

/// `MatrixBandPart(x, lower, upper)` with i32 constant counts.
pub(super) fn band_part(e: &mut Emitter<'_>, x: Tensor, lower: i32, upper: i32, ta: &TAttr) -> Tensor {
    let name = e.fresh_name("MatrixBandPart");
    let lo = e.int_const_named(format!("{name}/num_lower"), &[lower], true);
    let hi = e.int_const_named(format!("{name}/num_upper"), &[upper], true);
    let attrs = ta.clone().into_iter().chain([("Tindex", AttrValue::Type(DType::I32))]);
    e.emit_named(name, "MatrixBandPart", &[x, lo, hi], attrs)
}

/// The gradient of `L = Cholesky(A)` (TensorFlow's `_CholeskyGrad`): with
/// `P = L^-1` and `M` the lower triangle of `L^T G` with its diagonal halved,
/// `X = P^T M P` and the gradient is the symmetric part `(X + X^T) / 2`.
fn cholesky_grad(e: &mut Emitter<'_>, l: Tensor, g: Tensor, ta: &TAttr) -> Tensor {
    let t = e.dtype_of(g);
    // P = L^-1 by a triangular solve against the identity.
    let diag = e.emit("MatrixDiagPart", "MatrixDiagPart", &[l], ta.clone());
    let ones = e.emit("OnesLike", "ones_like", &[diag], ta.clone());
    let eye = e.emit("MatrixDiag", "eye", &[ones], ta.clone());
    let solve = [("lower", AttrValue::Bool(true)), ("adjoint", AttrValue::Bool(false))];
    let p = e.emit("MatrixTriangularSolve", "MatrixTriangularSolve", &[l, eye], solve.into_iter().chain(ta.clone()));
    let middle = bmm(e, l, g, true, false, ta);
    let mid_diag = e.emit("MatrixDiagPart", "MatrixDiagPart_1", &[middle], ta.clone());
    let mul = e.fresh_name("mul");
    let half = e.scalar_const_named(&format!("{mul}/x"), t, 0.5);
    let halved = e.emit_named(mul, "Mul", &[half, mid_diag], ta.clone());
    let middle = e.emit("MatrixSetDiag", "MatrixSetDiag", &[middle, halved], ta.clone());
    let middle = band_part(e, middle, -1, 0, ta);
    let pm = bmm(e, p, middle, true, false, ta);
    let x = bmm(e, pm, p, false, false, ta);
    // X^T = P^T M^T P.
    let mp = bmm(e, middle, p, true, false, ta);
    let xt = bmm(e, p, mp, true, false, ta);
    let sum = e.emit("AddV2", "add", &[x, xt], ta.clone());
    let mul = e.fresh_name("mul");
    let half = e.scalar_const_named(&format!("{mul}/y"), t, 0.5);
    e.emit_named(mul, "Mul", &[sum, half], ta.clone())
}

/// A scalar zero of `dtype` (the padding of the diagonals read back).
fn zero(e: &mut Emitter<'_>, dtype: Option<DType>) -> Tensor {
    let name = e.fresh_name("zeros");
    let c = e.scalar_const_named(&name, dtype, 0.0);
    match dtype {
        // The constant is f32 for the half types: cast it.
        Some(d @ (DType::BF16 | DType::F16)) => {
            let attrs = [("SrcT", AttrValue::Type(DType::F32)), ("DstT", AttrValue::Type(d))];
            e.emit("Cast", "Cast", &[c], attrs)
        }
        _ => c,
    }
}
