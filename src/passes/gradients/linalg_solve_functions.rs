//! Gradient functions of the factorizations and solves, as TensorFlow's
//! `linalg_grad.py` registers them.
//!
//! With `C = MatrixInverse(A)` (of `A^T` with `adjoint`), the gradient is
//! `-C^T G C^T` (`-C G^T C` with `adjoint`). With `C = MatrixSolve(A, B)`,
//! `dB = MatrixSolve(A, G)` with the opposite `adjoint`, and `dA = -dB C^T`
//! (`-C dB^T` with `adjoint`). `TridiagonalSolve` differentiates as the
//! `MatrixSolve` of the dense matrix its diagonals make (`MatrixDiagV3`),
//! its diagonals' gradient read back as that band of `dA`
//! (`MatrixDiagPartV3`). Every op is emitted with dynamic shapes;
//! cost is a constant number of ops per differentiated op.

use super::emitter::{Emitter, Tensor};
use super::functions::Unsupported;
use super::linalg_functions::bmm;
use crate::ir::{AttrValue, NodeId};

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
