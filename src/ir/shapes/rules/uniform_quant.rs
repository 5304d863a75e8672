//! Type rules of the quantized-integer ops: each output is shaped like the
//! op's first operand, of the dtype its attributes name (the quantized
//! dtype `Tout`, or the float `dtype` of `Dequantize`).

use super::{Args, OutType};
use crate::ir::DType;

/// `UniformQuantize`, `UniformDequantize`, `UniformRequantize`: operand 0's shape, of dtype `Tout`.
pub(super) fn to_tout(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let tout = a.type_attr("Tout", DType::Other(0));
    if tout == DType::Other(0) {
        return Err(format!("{}: missing type attribute `Tout`", a.op));
    }
    Ok(vec![OutType::new(tout, x.shape.to_vec())])
}

/// `Dequantize`: operand 0's shape, of dtype `dtype` (f32 by default).
pub(super) fn dequantize(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    Ok(vec![OutType::new(a.type_attr("dtype", DType::F32), x.shape.to_vec())])
}

/// `UniformQuantizedDot(lhs, rhs, ...)`: `[lhs rows, rhs columns]` of dtype `Tout`.
pub(super) fn dot(a: &Args) -> Result<Vec<OutType>, String> {
    let (l, r) = (a.x(0)?, a.x(1)?);
    match (l.shape, r.shape) {
        (&[rows, depth], &[depth2, cols]) if depth == depth2 => {
            Ok(vec![OutType::new(a.type_attr("Tout", DType::QInt32), vec![rows, cols])])
        }
        _ => Err(format!("{}: lhs {:?} and rhs {:?} must be matrices that multiply", a.op, l.shape, r.shape)),
    }
}
