//! Rules of the random ops: a draw has its `dtype` attribute (the seeded
//! `RandomUniformInt`: `Tout`) and the constant `shape` operand; the key and counter ops give
//! Philox's key (one `u64`), counter (two `u64`) and algorithm (`i32`).

use super::{dim, Args, OutType};
use crate::ir::DType;

/// A draw of `dtype` (default `default`) in the constant shape operand 0.
fn draw(a: &Args, default: DType) -> Result<Vec<OutType>, String> {
    let shape = a.ints(0, "shape")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(a.type_attr("dtype", default), shape)])
}

/// Float draws: uniform, normal and truncated normal (f32 unless `dtype`).
pub(super) fn float_draw(a: &Args) -> Result<Vec<OutType>, String> {
    draw(a, DType::F32)
}

/// Integer draws in `[minval, maxval)` (i32 unless `dtype`).
pub(super) fn int_draw(a: &Args) -> Result<Vec<OutType>, String> {
    draw(a, DType::I32)
}

/// The seeded `RandomUniformInt`: integers of `Tout` (i32 unless set).
pub(super) fn seeded_int_draw(a: &Args) -> Result<Vec<OutType>, String> {
    let shape = a.ints(0, "shape")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(a.type_attr("Tout", DType::I32), shape)])
}

/// `Multinomial`/`StatelessMultinomial(logits [rows, classes], num_samples)`: `[rows, num_samples]`
/// of `output_dtype` (i64 unless set).
pub(super) fn multinomial(a: &Args) -> Result<Vec<OutType>, String> {
    let logits = a.x(0)?;
    let &[rows, _] = logits.shape else { return Err(format!("logits must be a matrix, got {:?}", logits.shape)) };
    let samples = match a.ints(1, "num_samples")? {
        &[s] => dim(s, "num_samples")?,
        other => return Err(format!("num_samples must be a scalar, got {other:?}")),
    };
    Ok(vec![OutType::new(a.type_attr("output_dtype", DType::I64), vec![rows, samples])])
}

/// Draws over every integer of the type (u64 unless `dtype`).
pub(super) fn full_int_draw(a: &Args) -> Result<Vec<OutType>, String> {
    draw(a, DType::U64)
}

/// `StatelessRandomGetKeyCounter(seed)`: key and counter.
pub(super) fn key_counter(_: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(DType::U64, vec![1]), OutType::new(DType::U64, vec![2])])
}

/// `StatelessRandomGetKeyCounterAlg(seed)`: key, counter and algorithm.
pub(super) fn key_counter_alg(a: &Args) -> Result<Vec<OutType>, String> {
    let mut out = key_counter(a)?;
    out.push(OutType::new(DType::I32, Vec::new()));
    Ok(out)
}

/// `StatelessRandomGetAlg()`: the algorithm.
pub(super) fn alg(_: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(DType::I32, Vec::new())])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k, x};
    use crate::ir::{AttrValue, DType};

    #[test]
    fn draws_take_their_shape_operand_and_dtype() {
        let key = x(DType::U64, &[1]);
        let counter = x(DType::U64, &[2]);
        let alg = x(DType::I32, &[]);
        let v2 = [k(&[3, 4]), key.clone(), counter.clone(), alg.clone()];
        check("StatelessRandomUniformV2", &[], &v2, Ok(&[(DType::F32, &[3, 4])]));
        let bf16 = [("dtype", AttrValue::Type(DType::BF16))];
        check("StatelessRandomNormalV2", &bf16, &v2, Ok(&[(DType::BF16, &[3, 4])]));
        check("StatelessRandomUniformFullIntV2", &[], &v2, Ok(&[(DType::U64, &[3, 4])]));
        let seed = x(DType::I64, &[2]);
        check("StatelessTruncatedNormal", &[], &[k(&[5]), seed.clone()], Ok(&[(DType::F32, &[5])]));
        let i64s = [("dtype", AttrValue::Type(DType::I64))];
        let bounds = [k(&[2]), seed.clone(), x(DType::I64, &[]), x(DType::I64, &[])];
        check("StatelessRandomUniformInt", &i64s, &bounds, Ok(&[(DType::I64, &[2])]));
        check("StatelessRandomUniformV2", &[], &[x(DType::I32, &[2]), key, counter, alg], Err("constant"));
        check(
            "StatelessRandomGetKeyCounterAlg",
            &[],
            &[seed],
            Ok(&[(DType::U64, &[1]), (DType::U64, &[2]), (DType::I32, &[])]),
        );
        check("StatelessRandomGetAlg", &[], &[], Ok(&[(DType::I32, &[])]));
        check("RandomUniform", &[], &[k(&[2, 2])], Ok(&[(DType::F32, &[2, 2])]));
        let tout = [("Tout", AttrValue::Type(DType::I64))];
        let bounds = [k(&[3]), x(DType::I64, &[]), x(DType::I64, &[])];
        check("RandomUniformInt", &tout, &bounds, Ok(&[(DType::I64, &[3])]));
        let logits = x(DType::F32, &[2, 5]);
        check("Multinomial", &[], &[logits.clone(), k(&[7])], Ok(&[(DType::I64, &[2, 7])]));
        let i32s = [("output_dtype", AttrValue::Type(DType::I32))];
        let seeded = [logits.clone(), k(&[3]), x(DType::I64, &[2])];
        check("StatelessMultinomial", &i32s, &seeded, Ok(&[(DType::I32, &[2, 3])]));
        check("Multinomial", &[], &[x(DType::F32, &[5]), k(&[7])], Err("matrix"));
    }
}
