//! Rules of the XLA ops whose attrs are functions (`XlaReduce`,
//! `XlaVariadicReduce(V2)`, `XlaReduceWindow`, `XlaSelectAndScatter`,
//! `XlaVariadicSort`) and of the sorts `XlaSort` and `XlaKeyValueSort`:
//! the result types follow from the operands and the constant windows, not
//! from the functions (XLA requires the functions to return scalars of the
//! operands' dtypes).

use super::{dim, Args, OutType};

/// Each operand's type unchanged, for the first `n` operands.
fn each_same(a: &Args, n: usize) -> Result<Vec<OutType>, String> {
    (0..n).map(|i| a.same(i)).collect()
}

/// `XlaSort(x)`: `x`'s type.
pub(super) fn sort(a: &Args) -> Result<Vec<OutType>, String> {
    each_same(a, 1)
}

/// `XlaKeyValueSort(keys, values)`: both types unchanged.
pub(super) fn key_value_sort(a: &Args) -> Result<Vec<OutType>, String> {
    each_same(a, 2)
}

/// `XlaVariadicSort(inputs..., dimension)`: each input's type.
pub(super) fn variadic_sort(a: &Args) -> Result<Vec<OutType>, String> {
    each_same(a, a.operands.len().saturating_sub(1))
}

/// `XlaSelectAndScatter(operand, ...)`: the operand's type.
pub(super) fn select_and_scatter(a: &Args) -> Result<Vec<OutType>, String> {
    each_same(a, 1)
}

/// The reductions: `N` inputs then `N` init values; each result is its
/// input without `dimensions_to_reduce`.
pub(super) fn reduce(a: &Args) -> Result<Vec<OutType>, String> {
    let n = a.operands.len() / 2;
    if n == 0 || !a.operands.len().is_multiple_of(2) {
        return Err(format!("{} operands: it takes N inputs and N init values", a.operands.len()));
    }
    let dims = a.int_list("dimensions_to_reduce");
    (0..n)
        .map(|i| {
            let x = a.x(i)?;
            for &d in &dims {
                if !(0..x.shape.len() as i64).contains(&d) {
                    return Err(format!("dimension {d} is out of range for rank {}", x.shape.len()));
                }
            }
            let shape = (0..x.shape.len()).filter(|&d| !dims.contains(&(d as i64))).map(|d| x.shape[d]).collect();
            Ok(OutType::new(x.dtype, shape))
        })
        .collect()
}

/// `XlaReduceWindow(input, init, window_dimensions, window_strides,
/// base_dilations, window_dilations, padding)`: the windows that fit the
/// dilated, padded input.
pub(super) fn reduce_window(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let rank = x.shape.len();
    let vector = |i: usize, what: &str, len: usize| -> Result<Vec<usize>, String> {
        let v = a.ints(i, what)?;
        if v.len() != len {
            return Err(format!("{what} has {} values, the input's rank needs {len}", v.len()));
        }
        v.iter().map(|&d| dim(d, what)).collect()
    };
    let size = vector(2, "window_dimensions", rank)?;
    let stride = vector(3, "window_strides", rank)?;
    let base = vector(4, "base_dilations", rank)?;
    let dilation = vector(5, "window_dilations", rank)?;
    let pad = vector(6, "padding", 2 * rank)?;
    let mut shape = Vec::with_capacity(rank);
    for d in 0..rank {
        if size[d] == 0 || stride[d] == 0 || base[d] == 0 || dilation[d] == 0 {
            return Err("window sizes, strides and dilations must be positive".into());
        }
        let dilated = if x.shape[d] == 0 { 0 } else { (x.shape[d] - 1) * base[d] + 1 };
        let padded = dilated + pad[2 * d] + pad[2 * d + 1];
        let span = (size[d] - 1) * dilation[d] + 1;
        shape.push(if padded >= span { (padded - span) / stride[d] + 1 } else { 0 });
    }
    Ok(vec![OutType::new(x.dtype, shape)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k, k0, x};
    use crate::ir::{AttrValue, DType::*};

    #[test]
    fn xla_function_op_rules() {
        let dims =
            |d: &[i64]| ("dimensions_to_reduce", AttrValue::List(d.iter().map(|&v| AttrValue::Int(v)).collect()));
        check("XlaReduce", &[dims(&[1])], &[x(F32, &[3, 4]), x(F32, &[])], Ok(&[(F32, &[3])]));
        check(
            "XlaVariadicReduceV2",
            &[dims(&[0, 2])],
            &[x(F32, &[2, 3, 4]), x(I32, &[2, 3, 4]), x(F32, &[]), x(I32, &[])],
            Ok(&[(F32, &[3]), (I32, &[3])]),
        );
        check("XlaReduce", &[dims(&[2])], &[x(F32, &[3, 4]), x(F32, &[])], Err("out of range"));
        // 5x4 input, base dilation 2 on the columns (7), one column of padding (8), dilated rows (span 3).
        let window = [k(&[2, 2]), k(&[2, 1]), k(&[1, 2]), k(&[2, 1]), k(&[1, 0, 0, 1])];
        let mut operands = vec![x(F64, &[5, 4]), x(F64, &[])];
        operands.extend(window);
        check("XlaReduceWindow", &[], &operands, Ok(&[(F64, &[2, 7])]));
        check(
            "XlaVariadicSort",
            &[],
            &[x(F32, &[4, 3]), x(I32, &[4, 3]), k0(0)],
            Ok(&[(F32, &[4, 3]), (I32, &[4, 3])]),
        );
        check("XlaKeyValueSort", &[], &[x(F32, &[2, 5]), x(I32, &[2, 5])], Ok(&[(F32, &[2, 5]), (I32, &[2, 5])]));
    }
}
