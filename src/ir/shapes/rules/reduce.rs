//! Reduction rules: `Sum`, `Mean`, `Max`, `Min`, `Prod`, `All`, `Any`,
//! `EuclideanNorm` over constant axes, and `ArgMax`/`ArgMin`.

use super::{axis, Args, OutType};
use crate::ir::DType;

/// A reduction over the constant axes of operand 1 (`keep_dims` keeps them as 1s).
pub(super) fn reduce(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let axes: Vec<usize> = a.ints(1, "axes")?.iter().map(|&d| axis(d, x.shape.len())).collect::<Result<_, _>>()?;
    let keep = a.bool_attr("keep_dims", false);
    let mut shape = Vec::with_capacity(x.shape.len());
    for (i, &d) in x.shape.iter().enumerate() {
        if !axes.contains(&i) {
            shape.push(d);
        } else if keep {
            shape.push(1);
        }
    }
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `ArgMax`/`ArgMin(x, axis)`: the axis removed, in `output_type`.
pub(super) fn arg_extreme(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let at = axis(*a.ints(1, "axis")?.first().ok_or("the axis is empty")?, x.shape.len())?;
    let mut shape = x.shape.to_vec();
    shape.remove(at);
    Ok(vec![OutType::new(a.type_attr("output_type", DType::I64), shape)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k, k0, x};
    use crate::ir::{AttrValue, DType::*};

    #[test]
    fn reduction_rules() {
        check("Sum", &[], &[x(F32, &[2, 3, 4]), k(&[0, -1])], Ok(&[(F32, &[3])]));
        check("Mean", &[("keep_dims", AttrValue::Bool(true))], &[x(F32, &[2, 3]), k0(1)], Ok(&[(F32, &[2, 1])]));
        check("Max", &[], &[x(I32, &[2, 3]), k(&[])], Ok(&[(I32, &[2, 3])]));
        check("All", &[], &[x(Bool, &[2, 3]), k(&[0, 1])], Ok(&[(Bool, &[])]));
        check("Sum", &[], &[x(F32, &[2]), k0(2)], Err("out of range"));
        check("ArgMax", &[], &[x(F32, &[2, 5]), k0(1)], Ok(&[(I64, &[2])]));
        check("ArgMin", &[("output_type", AttrValue::Type(I32))], &[x(F32, &[2, 5]), k0(0)], Ok(&[(I32, &[5])]));
    }
}
