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
        _ => return Err(None),
    })
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
