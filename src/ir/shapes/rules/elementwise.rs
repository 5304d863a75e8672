//! Elementwise rules: ops that keep their operand's type, NumPy-style
//! broadcasting binaries, comparisons (boolean results), casts and
//! selects.

use super::{Args, OutType};
use crate::ir::DType;

/// Operand 0's type (unary math, activations and their gradients, `AddN`).
pub(super) fn same(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![a.same(0)?])
}

/// Each operand's type, in order (`IdentityN`).
pub(super) fn identity_n(a: &Args) -> Result<Vec<OutType>, String> {
    (0..a.operands.len()).map(|i| a.same(i)).collect()
}

/// A boolean of operand 0's shape (`IsNan`, `IsInf`, `IsFinite`).
pub(super) fn predicate(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(DType::Bool, a.x(0)?.shape.to_vec())])
}

/// The broadcast shape of two operands, in operand 0's dtype.
pub(super) fn broadcast(a: &Args) -> Result<Vec<OutType>, String> {
    let shape = broadcast_shapes(a.x(0)?.shape, a.x(1)?.shape)?;
    Ok(vec![OutType::new(a.x(0)?.dtype, shape)])
}

/// The broadcast shape of two operands, boolean.
pub(super) fn compare(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(DType::Bool, broadcast_shapes(a.x(0)?.shape, a.x(1)?.shape)?)])
}

/// Operand 0's shape in `DstT`.
pub(super) fn cast(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    Ok(vec![OutType::new(a.type_attr("DstT", x.dtype), x.shape.to_vec())])
}

/// `Select(cond, t, e)`: `t`'s type (a vector condition picks rows);
/// `SelectV2` broadcasts all three.
pub(super) fn select(a: &Args) -> Result<Vec<OutType>, String> {
    let (c, t, e) = (a.x(0)?, a.x(1)?, a.x(2)?);
    let shape = if a.op == "SelectV2" {
        broadcast_shapes(&broadcast_shapes(c.shape, t.shape)?, e.shape)?
    } else {
        t.shape.to_vec()
    };
    Ok(vec![OutType::new(t.dtype, shape)])
}

/// A `uint8` count per element of operand 0 (`PopulationCount`).
pub(super) fn population_count(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(DType::U8, a.x(0)?.shape.to_vec())])
}

/// `Betainc(a, b, x)`: the shape of whichever operand is not a scalar (all are of one shape).
pub(super) fn betainc(a: &Args) -> Result<Vec<OutType>, String> {
    let shape = (0..3).filter_map(|i| a.x(i).ok()).map(|x| x.shape).find(|s| !s.is_empty()).unwrap_or(&[]);
    for i in 0..3 {
        let s = a.x(i)?.shape;
        if !s.is_empty() && s != shape {
            return Err(format!("a, b and x must be scalars or of one shape: {s:?} against {shape:?}"));
        }
    }
    Ok(vec![OutType::new(a.x(0)?.dtype, shape.to_vec())])
}

/// A boolean scalar (`ToBool`).
pub(super) fn to_bool(_: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(DType::Bool, Vec::new())])
}

/// `Bitcast(x) {type}`: a wider input gains a last dimension of `in / out`
/// elements; a narrower one loses its last dimension, which must be `out / in`.
pub(super) fn bitcast(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let to = a.attrs.get("type").and_then(crate::ir::AttrValue::as_type).ok_or("missing dtype attribute `type`")?;
    let (win, wout) = match (x.dtype.size_bytes(), to.size_bytes()) {
        (Some(i), Some(o)) if i > 0 && o > 0 => (i, o),
        _ => return Err(format!("cannot bitcast {} to {to}", x.dtype)),
    };
    let mut shape = x.shape.to_vec();
    if win > wout {
        shape.push(win / wout);
    } else if win < wout {
        if shape.last().copied() != Some(wout / win) {
            return Err(format!(
                "cannot bitcast {} of shape {:?} to {to}: the last dimension must be {}",
                x.dtype,
                x.shape,
                wout / win
            ));
        }
        shape.pop();
    }
    Ok(vec![OutType::new(to, shape)])
}

/// NumPy broadcasting of two static shapes.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let at = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            (x, y) => Err(format!("shapes {a:?} and {b:?} do not broadcast (dimension {i}: {x} against {y})")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, x};
    use crate::ir::{AttrValue, DType::*};

    #[test]
    fn elementwise_rules() {
        check("Relu", &[], &[x(F32, &[2, 3])], Ok(&[(F32, &[2, 3])]));
        check("ReluGrad", &[], &[x(F32, &[2, 3]), x(F32, &[2, 3])], Ok(&[(F32, &[2, 3])]));
        check("AddV2", &[], &[x(F32, &[4, 1, 3]), x(F32, &[5, 1])], Ok(&[(F32, &[4, 5, 3])]));
        check("Mul", &[], &[x(F32, &[]), x(F32, &[7])], Ok(&[(F32, &[7])]));
        check("Sub", &[], &[x(F32, &[2, 3]), x(F32, &[4])], Err("do not broadcast"));
        check("Less", &[], &[x(I32, &[3]), x(I32, &[])], Ok(&[(Bool, &[3])]));
        check("IsNan", &[], &[x(F16, &[2])], Ok(&[(Bool, &[2])]));
        check("Cast", &[("DstT", AttrValue::Type(BF16))], &[x(F32, &[2, 2])], Ok(&[(BF16, &[2, 2])]));
        check("Select", &[], &[x(Bool, &[2]), x(F32, &[2, 5]), x(F32, &[2, 5])], Ok(&[(F32, &[2, 5])]));
        check("SelectV2", &[], &[x(Bool, &[2, 1]), x(I64, &[5]), x(I64, &[])], Ok(&[(I64, &[2, 5])]));
        check("IdentityN", &[], &[x(F32, &[1]), x(I32, &[2, 2])], Ok(&[(F32, &[1]), (I32, &[2, 2])]));
        check("Sqrt", &[], &[], Err("at least 1 operands"));
    }
}
