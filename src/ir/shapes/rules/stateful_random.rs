//! Rules of the draws from `tf.random.Generator`'s state (`Stateful*(resource, algorithm,
//! shape[, minval, maxval])`): the constant `shape` operand 2, of the `dtype` attribute (f32
//! for the float draws, i64 for `StatefulUniformInt`, u64 for `StatefulUniformFullInt`, as in
//! TensorFlow's op definitions).

use super::{dim, Args, OutType};
use crate::ir::DType;

/// A draw of `dtype` (default by op) in the constant shape operand 2.
pub(super) fn draw(a: &Args) -> Result<Vec<OutType>, String> {
    let default = match a.op {
        "StatefulUniformInt" => DType::I64,
        "StatefulUniformFullInt" => DType::U64,
        _ => DType::F32,
    };
    let shape = a.ints(2, "shape")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(a.type_attr("dtype", default), shape)])
}

/// `XlaRngBitGenerator(algorithm, initial_state, shape)`: the new state (u64, the initial
/// state's shape) and bits of `dtype` (u64 unless set) in the constant shape operand 2.
pub(super) fn rng_bit_generator(a: &Args) -> Result<Vec<OutType>, String> {
    let state = a.x(1)?.shape.to_vec();
    let shape = a.ints(2, "shape")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(DType::U64, state), OutType::new(a.type_attr("dtype", DType::U64), shape)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k, x};
    use crate::ir::{AttrValue, DType};

    #[test]
    fn draws_take_their_shape_operand_and_dtype() {
        let (var, alg) = (x(DType::Resource, &[]), x(DType::I64, &[]));
        check("StatefulUniform", &[], &[var.clone(), alg.clone(), k(&[2, 3])], Ok(&[(DType::F32, &[2, 3])]));
        let f64s = [("dtype", AttrValue::Type(DType::F64))];
        check("StatefulTruncatedNormal", &f64s, &[var.clone(), alg.clone(), k(&[4])], Ok(&[(DType::F64, &[4])]));
        check("StatefulUniformFullInt", &[], &[var.clone(), alg.clone(), k(&[3])], Ok(&[(DType::U64, &[3])]));
        let bounds = [var.clone(), alg.clone(), k(&[5]), x(DType::I64, &[]), x(DType::I64, &[])];
        check("StatefulUniformInt", &[], &bounds, Ok(&[(DType::I64, &[5])]));
        check("StatefulStandardNormalV2", &[], &[var, alg, x(DType::I64, &[2])], Err("constant"));
        let u8s = [("dtype", AttrValue::Type(DType::U8))];
        let bits = [x(DType::I32, &[]), x(DType::U64, &[3]), k(&[2, 2])];
        check("XlaRngBitGenerator", &u8s, &bits, Ok(&[(DType::U64, &[3]), (DType::U8, &[2, 2])]));
    }
}
