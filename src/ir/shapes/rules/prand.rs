//! Rules of the `prand` family: `StochasticCastToInt(input, key, counter, alg)` keeps the
//! input's shape in `Tout`; `XlaDequantize(input)` unpacks each u32 of its input into four
//! bf16 values along the last axis (`transpose_output`: along the first axis of the reversed
//! shape).

use super::{Args, OutType};
use crate::ir::DType;

/// `StochasticCastToInt`: the input's shape, of `Tout` (i32 unless set).
pub(super) fn stochastic_cast(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    Ok(vec![OutType::new(a.type_attr("Tout", DType::I32), x.shape.to_vec())])
}

/// `XlaDequantize(input [d0, .., dn])`: bf16 `[d0, .., 4 dn]`, or `[4 dn, .., d0]` with
/// `transpose_output`.
pub(super) fn dequantize(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    if x.dtype != DType::U32 {
        return Err(format!("input must be u32 (four packed bytes), got {}", x.dtype));
    }
    let Some((&last, _)) = x.shape.split_last() else {
        return Err("input must have rank 1 or more, got a scalar".to_string());
    };
    let mut shape = x.shape.to_vec();
    *shape.last_mut().expect("rank 1 or more") = last * 4;
    if a.bool_attr("transpose_output", false) {
        shape.reverse();
    }
    Ok(vec![OutType::new(DType::BF16, shape)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, x};
    use crate::ir::{AttrValue, DType};

    #[test]
    fn stochastic_casts_keep_the_shape_in_tout() {
        let (key, counter, alg) = (x(DType::U64, &[1]), x(DType::U64, &[2]), x(DType::I32, &[]));
        let i8s = [("Tout", AttrValue::Type(DType::I8))];
        check("StochasticCastToInt", &i8s, &[x(DType::F32, &[2, 3]), key, counter, alg], Ok(&[(DType::I8, &[2, 3])]));
    }

    #[test]
    fn dequantize_unpacks_four_values_per_word() {
        check("XlaDequantize", &[], &[x(DType::U32, &[2, 3])], Ok(&[(DType::BF16, &[2, 12])]));
        let t = [("transpose_output", AttrValue::Bool(true))];
        check("XlaDequantize", &t, &[x(DType::U32, &[2, 3])], Ok(&[(DType::BF16, &[12, 2])]));
        check("XlaDequantize", &[], &[x(DType::U32, &[])], Err("rank 1 or more"));
        check("XlaDequantize", &[], &[x(DType::I32, &[2])], Err("must be u32"));
    }
}
