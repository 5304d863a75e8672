//! The StableHLO ops of [`xla_call_module`](super::xla_call_module) that
//! carry regions or call functions: the scalar computations of `reduce`,
//! `reduce_window`, `select_and_scatter`, `scatter` and `sort` (functions of
//! their scalars, taking copies of the constants they use), and `while`,
//! `case`, `if`, `func.call` and `composite`, whose regions or callees become
//! functions of the IR module with the values they capture as extra
//! arguments. One small function per op; the table is in
//! [`xla_call_module_ops`](super::xla_call_module_ops).

use super::xla_call_module::{captures, entry_block, Fb, Refusal};
use super::xla_call_module_ops::{
    flag, func, in_ty, input, inputs, int_or, ints_or, merged, out_ty, proto, t, types, unbatched_indices, V,
};
use crate::ir::xla_proto::ScatterDimensionNumbers;
use crate::ir::{AttrValue, DType};
use crate::syntax::mlir::{Attribute, DenseValues, Operation, Region, ValueId};

/// The values captured by `regions`, each with its type.
type Captured = Vec<(ValueId, DType, Vec<i64>)>;

/// Branch functions, the call's extra operands and their dtypes.
type Branches = (Vec<String>, Vec<V>, Vec<DType>);

/// The function of a scalar computation (`reduce`'s body, a comparator):
/// as XLA's computations, it takes only its scalars, so the constants it
/// uses from outside are copied into it; any other outside value is refused.
fn computation(b: &mut Fb<'_, '_>, op: &Operation, k: usize, what: &str) -> Result<String, Refusal> {
    let region = op.regions.get(k).ok_or_else(|| format!("it has no region {k}"))?;
    let mut block = entry_block(region)?.clone();
    let mut copied = Vec::new();
    for v in captures(region) {
        let c = b.consts.get(&v).ok_or_else(|| format!("its {what} uses {v}, a value from outside its region"))?;
        copied.push(c.clone());
    }
    copied.append(&mut block.operations);
    block.operations = copied;
    let function = b.function.clone();
    b.cx.region(what, &function, &block, &[])
}

/// The TensorFlow reduction and elementwise op of a one-operand `reduce`
/// whose body is a single `add`, `multiply`, `maximum`, `minimum`, `and`
/// or `or` of its two arguments, for the dtypes those reductions' kernels
/// take; `None` for any other body.
fn plain_reduction(op: &Operation, dtype: DType) -> Option<(&'static str, &'static str)> {
    let block = op.regions.first()?.blocks.first()?;
    let [body, ret] = block.operations.as_slice() else { return None };
    let args: Vec<_> = block.arguments.iter().map(|a| a.id).collect();
    let mut used = body.operands.clone();
    used.sort_unstable();
    let mut expected = args.clone();
    expected.sort_unstable();
    let result = body.results.first()?.id;
    if args.len() != 2 || used != expected || ret.operands != [result] || !body.regions.is_empty() {
        return None;
    }
    let numeric = matches!(dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64);
    match (body.name.as_str(), dtype) {
        ("stablehlo.and" | "stablehlo.minimum" | "stablehlo.multiply", DType::Bool) => Some(("All", "LogicalAnd")),
        ("stablehlo.or" | "stablehlo.maximum", DType::Bool) => Some(("Any", "LogicalOr")),
        ("stablehlo.add", _) if numeric => Some(("Sum", "AddV2")),
        ("stablehlo.multiply", _) if numeric => Some(("Prod", "Mul")),
        ("stablehlo.maximum", _) if numeric => Some(("Max", "Maximum")),
        ("stablehlo.minimum", _) if numeric => Some(("Min", "Minimum")),
        _ => None,
    }
}

/// Whether the constant `init` of dtype `dtype` is the identity of
/// `reduction`, so that the reduction alone gives what `reduce` gives.
fn is_identity(b: &Fb<'_, '_>, init: ValueId, dtype: DType, reduction: &str) -> bool {
    let Some(Attribute::DenseElements { values, .. }) = b.consts.get(&init).and_then(|c| c.attribute("value")) else {
        return false;
    };
    let (least, greatest) = match dtype {
        DType::I32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    };
    match (reduction, values) {
        ("Sum" | "Any", DenseValues::Bool(v)) => v == &[false],
        ("Prod" | "All", DenseValues::Bool(v)) => v == &[true],
        ("Sum", DenseValues::Int(v)) => v == &[0],
        ("Prod", DenseValues::Int(v)) => v == &[1],
        ("Max", DenseValues::Int(v)) => v == &[least],
        ("Min", DenseValues::Int(v)) => v == &[greatest],
        ("Sum", DenseValues::Float(v)) => v == &[0.0],
        ("Prod", DenseValues::Float(v)) => v == &[1.0],
        ("Max", DenseValues::Float(v)) => v == &[f64::NEG_INFINITY],
        ("Min", DenseValues::Float(v)) => v == &[f64::INFINITY],
        _ => false,
    }
}

pub(super) fn reduce(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let n = op.operands.len() / 2;
    let dims = ints_or(op, "", "dimensions", Vec::new())?;
    if n == 1 {
        let (dtype, _) = in_ty(b, op, 0)?;
        if let Some((reduction, combine)) = plain_reduction(op, dtype) {
            let (x, init) = (input(b, op, 0)?, input(b, op, 1)?);
            let axes = b.ints(&dims);
            let mut attrs = vec![("Tidx", AttrValue::Type(DType::I64)), ("keep_dims", AttrValue::Bool(false))];
            if dtype != DType::Bool {
                attrs.push(t(dtype));
            }
            let r = (b.node(reduction, &[x, axes], attrs), 0);
            if is_identity(b, op.operands[1], dtype, reduction) {
                return Ok(vec![r]);
            }
            let attrs = if dtype == DType::Bool { Vec::new() } else { vec![t(dtype)] };
            return Ok(vec![(b.node(combine, &[r, init], attrs), 0)]);
        }
    }
    let reducer = computation(b, op, 0, "reducer")?;
    let ins = inputs(b, op)?;
    let dtypes = (0..n).map(|i| in_ty(b, op, i).map(|t| t.0)).collect::<Result<Vec<_>, _>>()?;
    let attrs = vec![
        ("T", types(&dtypes)),
        ("dimensions_to_reduce", AttrValue::List(dims.iter().map(|&d| AttrValue::Int(d)).collect())),
        ("reducer", func(reducer)),
    ];
    let id = b.node("XlaVariadicReduceV2", &ins, attrs);
    Ok((0..n as u32).map(|k| (id, k)).collect())
}

pub(super) fn reduce_window(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, dims) = in_ty(b, op, 0)?;
    let r = dims.len();
    let window = ints_or(op, "", "window_dimensions", Vec::new())?;
    let strides = ints_or(op, "", "window_strides", vec![1; r])?;
    let base = ints_or(op, "", "base_dilations", vec![1; r])?;
    let dilations = ints_or(op, "", "window_dilations", vec![1; r])?;
    let padding = ints_or(op, "", "padding", vec![0; 2 * r])?;
    let computation = computation(b, op, 0, "computation")?;
    if op.operands.len() != 2 {
        let geometry = Window { dims, window, strides, base, dilations, padding };
        return variadic_reduce_window(b, op, &geometry, computation);
    }
    let (x, init) = (input(b, op, 0)?, input(b, op, 1)?);
    let (w, s, bd, wd) = (b.ints(&window), b.ints(&strides), b.ints(&base), b.ints(&dilations));
    let p = b.ints_shaped(&padding, vec![r as i64, 2]);
    let attrs = vec![t(dtype), ("Tindices", AttrValue::Type(DType::I64)), ("computation", func(computation))];
    Ok(vec![(b.node("XlaReduceWindow", &[x, init, w, s, bd, wd, p], attrs), 0)])
}

/// The shape of a window reduction: operand dimensions and the window's
/// sizes, strides, base and window dilations and padding (low, high pairs).
struct Window {
    dims: Vec<i64>,
    window: Vec<i64>,
    strides: Vec<i64>,
    base: Vec<i64>,
    dilations: Vec<i64>,
    padding: Vec<i64>,
}

/// The largest window a reduction of several operands is unrolled for.
const MAX_UNROLLED_WINDOW: i64 = 1024;

/// A window reduction of several operands, which no TensorFlow op takes:
/// the strided slice of each operand at every offset of the window is
/// stacked along a new last dimension, and one `XlaVariadicReduceV2` with the same computation
/// reduces that dimension, combining each window with the initial values
/// once, as `reduce_window` does.
fn variadic_reduce_window(b: &mut Fb<'_, '_>, op: &Operation, w: &Window, reducer: String) -> Result<Vec<V>, Refusal> {
    let n = op.operands.len() / 2;
    let r = w.dims.len();
    let sizes = [&w.window, &w.strides, &w.base, &w.dilations];
    if sizes.iter().any(|v| v.len() != r || v.iter().any(|&x| x < 1)) || w.padding.len() != 2 * r {
        return Err("window attributes that do not match the operand's rank".into());
    }
    // XLA leaves padding and base-dilation holes out of a window, which
    // equals padding with the initial values only where those are the
    // computation's identity; that cannot be told here, so both are refused.
    if w.padding.iter().any(|&p| p != 0) || w.base.iter().any(|&x| x != 1) {
        return Err("a window reduction of several operands with padding or base dilation".into());
    }
    let count = w.window.iter().try_fold(1i64, |acc, &k| acc.checked_mul(k)).filter(|&c| c <= MAX_UNROLLED_WINDOW);
    let count = count.ok_or("a window reduction of several operands over more than 1024 elements a window")?;
    let out: Vec<i64> = (0..r)
        .map(|d| (w.dims[d] - ((w.window[d] - 1) * w.dilations[d] + 1)).div_euclid(w.strides[d]) + 1)
        .map(|o| o.max(0))
        .collect();
    let mut stacked = Vec::new();
    let mut dtypes = Vec::new();
    for k in 0..n {
        let (dtype, _) = in_ty(b, op, k)?;
        let x = input(b, op, k)?;
        let mut slices = Vec::new();
        for offset in 0..count {
            let mut rest = offset;
            let mut begin = vec![0; r];
            for d in (0..r).rev() {
                begin[d] = (rest % w.window[d]) * w.dilations[d];
                rest /= w.window[d];
            }
            let end: Vec<i64> =
                (0..r).map(|d| begin[d] + if out[d] > 0 { (out[d] - 1) * w.strides[d] + 1 } else { 0 }).collect();
            let (bg, en, st) = (b.ints(&begin), b.ints(&end), b.ints(&w.strides));
            let mut attrs = vec![t(dtype), ("Index", AttrValue::Type(DType::I64))];
            for mask in ["begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"] {
                attrs.push((mask, AttrValue::Int(0)));
            }
            slices.push((b.node("StridedSlice", &[x, bg, en, st], attrs), 0));
        }
        let attrs = vec![("N", AttrValue::Int(count)), t(dtype), ("axis", AttrValue::Int(r as i64))];
        stacked.push((b.node("Pack", &slices, attrs), 0));
        dtypes.push(dtype);
    }
    let inits = (n..2 * n).map(|k| input(b, op, k)).collect::<Result<Vec<_>, _>>()?;
    stacked.extend(inits);
    let attrs = vec![
        ("T", types(&dtypes)),
        ("dimensions_to_reduce", AttrValue::List(vec![AttrValue::Int(r as i64)])),
        ("reducer", func(reducer)),
    ];
    let id = b.node("XlaVariadicReduceV2", &stacked, attrs);
    Ok((0..n as u32).map(|k| (id, k)).collect())
}

pub(super) fn select_and_scatter(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (dtype, dims) = in_ty(b, op, 0)?;
    let r = dims.len();
    let window = ints_or(op, "", "window_dimensions", vec![1; r])?;
    let strides = ints_or(op, "", "window_strides", vec![1; r])?;
    let padding = ints_or(op, "", "padding", vec![0; 2 * r])?;
    let select = computation(b, op, 0, "select")?;
    let scatter = computation(b, op, 1, "scatter")?;
    let (x, source, init) = (input(b, op, 0)?, input(b, op, 1)?, input(b, op, 2)?);
    let (w, s) = (b.ints(&window), b.ints(&strides));
    let p = b.ints_shaped(&padding, vec![r as i64, 2]);
    let attrs =
        vec![t(dtype), ("Tindices", AttrValue::Type(DType::I64)), ("select", func(select)), ("scatter", func(scatter))];
    Ok(vec![(b.node("XlaSelectAndScatter", &[x, w, s, p, source, init], attrs), 0)])
}

pub(super) fn scatter(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    if op.operands.len() != 3 {
        return Err("a scatter of several operands".into());
    }
    let w = "scatter_dimension_numbers";
    let mut dims = ScatterDimensionNumbers {
        update_window_dims: ints_or(op, w, "update_window_dims", Vec::new())?,
        inserted_window_dims: ints_or(op, w, "inserted_window_dims", Vec::new())?,
        scatter_dims_to_operand_dims: ints_or(op, w, "scatter_dims_to_operand_dims", Vec::new())?,
        index_vector_dim: int_or(op, w, "index_vector_dim", 0)?,
        input_batching_dims: ints_or(op, w, "input_batching_dims", Vec::new())?,
        scatter_indices_batching_dims: ints_or(op, w, "scatter_indices_batching_dims", Vec::new())?,
    };
    let update = computation(b, op, 0, "update_computation")?;
    let ((dtype, _), (it, idims)) = (in_ty(b, op, 0)?, in_ty(b, op, 1)?);
    let mut ins = inputs(b, op)?;
    if !dims.input_batching_dims.is_empty() || !dims.scatter_indices_batching_dims.is_empty() {
        if dims.input_batching_dims.len() != dims.scatter_indices_batching_dims.len() {
            return Err("batching dimensions of the operand and the indices that do not pair".into());
        }
        let batching = std::mem::take(&mut dims.scatter_indices_batching_dims);
        (ins[1], dims.index_vector_dim) = unbatched_indices(b, ins[1], (it, idims), dims.index_vector_dim, &batching)?;
        let operand = std::mem::take(&mut dims.input_batching_dims);
        dims.inserted_window_dims = merged(&dims.inserted_window_dims, &operand);
        dims.scatter_dims_to_operand_dims.extend(operand);
    }
    let attrs = vec![
        t(dtype),
        ("Tindices", AttrValue::Type(it)),
        ("update_computation", func(update)),
        ("dimension_numbers", proto(&dims)),
        ("indices_are_sorted", AttrValue::Bool(flag(op, "indices_are_sorted"))),
    ];
    Ok(vec![(b.node("XlaScatter", &ins, attrs), 0)])
}

pub(super) fn sort(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let dimension = int_or(op, "", "dimension", -1)?;
    let (_, dims) = in_ty(b, op, 0)?;
    let dimension = if dimension < 0 { dimension + dims.len() as i64 } else { dimension };
    let comparator = computation(b, op, 0, "comparator")?;
    let mut ins = inputs(b, op)?;
    let dtypes = (0..ins.len()).map(|i| in_ty(b, op, i).map(|t| t.0)).collect::<Result<Vec<_>, _>>()?;
    ins.push(b.scalar(DType::I32, dimension as f64));
    let attrs = vec![
        ("T", types(&dtypes)),
        ("comparator", func(comparator)),
        ("is_stable", AttrValue::Bool(flag(op, "is_stable"))),
    ];
    let id = b.node("XlaVariadicSort", &ins, attrs);
    Ok((0..dtypes.len() as u32).map(|k| (id, k)).collect())
}

// ---------------------------------------------------------------- control flow

/// The captured values of `regions` (in first-use order, each once), with their types.
fn captured_of(b: &Fb<'_, '_>, regions: &[Region]) -> Result<Captured, Refusal> {
    let mut out: Captured = Vec::new();
    for r in regions {
        for v in captures(r) {
            if !out.iter().any(|(w, _, _)| *w == v) {
                let (dtype, dims) = b.ty(v)?;
                out.push((v, dtype, dims));
            }
        }
    }
    Ok(out)
}

pub(super) fn while_op(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let [cond, body] = op.regions.as_slice() else { return Err("a `while` needs two regions".into()) };
    let captured = captured_of(b, &op.regions)?;
    let function = b.function.clone();
    let cond_name = b.cx.region("cond", &function, entry_block(cond)?, &captured)?;
    // The body returns the loop values; the captured ones pass through unchanged.
    let body_block = entry_block(body)?;
    let mut passing = body_block.clone();
    if let Some(last) = passing.operations.last_mut() {
        last.operands.extend(captured.iter().map(|(v, _, _)| *v));
    }
    let body_name = b.cx.region("body", &function, &passing, &captured)?;
    let mut ins = inputs(b, op)?;
    let mut dtypes = (0..ins.len()).map(|i| in_ty(b, op, i).map(|t| t.0)).collect::<Result<Vec<_>, _>>()?;
    for (v, dtype, _) in &captured {
        ins.push(b.at(*v)?);
        dtypes.push(*dtype);
    }
    let attrs = vec![
        ("T", types(&dtypes)),
        ("cond", func(cond_name)),
        ("body", func(body_name)),
        ("parallel_iterations", AttrValue::Int(10)),
    ];
    let id = b.node("StatelessWhile", &ins, attrs);
    Ok((0..op.operands.len() as u32).map(|k| (id, k)).collect())
}

/// The branches of a `case` or `if`, as functions of the values they capture, and the call's operands.
fn branches(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Branches, Refusal> {
    let captured = captured_of(b, &op.regions)?;
    let function = b.function.clone();
    let mut names = Vec::new();
    for (k, region) in op.regions.iter().enumerate() {
        let block = entry_block(region)?;
        if !block.arguments.is_empty() {
            return Err("a branch with arguments".into());
        }
        names.push(b.cx.region(&format!("branch_{k}"), &function, block, &captured)?);
    }
    let ins = captured.iter().map(|(v, _, _)| b.at(*v)).collect::<Result<Vec<_>, _>>()?;
    Ok((names, ins, captured.iter().map(|c| c.1).collect()))
}

pub(super) fn case(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (names, captured, tin) = branches(b, op)?;
    let tout = (0..op.results.len()).map(|i| out_ty(op, i).map(|t| t.0)).collect::<Result<Vec<_>, _>>()?;
    let mut ins = vec![input(b, op, 0)?];
    ins.extend(captured);
    let attrs = vec![
        ("Tin", types(&tin)),
        ("Tout", types(&tout)),
        ("branches", AttrValue::List(names.into_iter().map(func).collect())),
    ];
    let id = b.node("StatelessCase", &ins, attrs);
    Ok((0..tout.len() as u32).map(|k| (id, k)).collect())
}

pub(super) fn if_op(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let (names, captured, tin) = branches(b, op)?;
    let [then, els] = names.as_slice() else { return Err("an `if` needs two regions".into()) };
    let tout = (0..op.results.len()).map(|i| out_ty(op, i).map(|t| t.0)).collect::<Result<Vec<_>, _>>()?;
    let mut ins = vec![input(b, op, 0)?];
    ins.extend(captured);
    let attrs = vec![
        ("Tcond", AttrValue::Type(DType::Bool)),
        ("Tin", types(&tin)),
        ("Tout", types(&tout)),
        ("then_branch", func(then.clone())),
        ("else_branch", func(els.clone())),
    ];
    let id = b.node("StatelessIf", &ins, attrs);
    Ok((0..tout.len() as u32).map(|k| (id, k)).collect())
}

/// A call of module function `callee` with `op`'s operands.
fn call_of(b: &mut Fb<'_, '_>, op: &Operation, callee: &str) -> Result<Vec<V>, Refusal> {
    let name = b.cx.callee(callee)?;
    let ins = inputs(b, op)?;
    let tin = (0..ins.len()).map(|i| in_ty(b, op, i).map(|t| t.0)).collect::<Result<Vec<_>, _>>()?;
    let tout = (0..op.results.len()).map(|i| out_ty(op, i).map(|t| t.0)).collect::<Result<Vec<_>, _>>()?;
    let attrs = vec![("Tin", types(&tin)), ("Tout", types(&tout)), ("f", func(name))];
    let id = b.node("PartitionedCall", &ins, attrs);
    Ok((0..tout.len() as u32).map(|k| (id, k)).collect())
}

/// The symbol an attribute names.
fn symbol(a: Option<&Attribute>) -> Result<String, Refusal> {
    match a {
        Some(Attribute::SymbolRef(s)) => Ok(s.trim_start_matches('@').to_string()),
        Some(Attribute::String(s)) => Ok(String::from_utf8_lossy(s).trim_start_matches('@').to_string()),
        other => Err(Refusal::Other(format!("expected a symbol, found {other:?}"))),
    }
}

pub(super) fn call(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let callee = symbol(op.attribute("callee"))?;
    call_of(b, op, &callee)
}

pub(super) fn composite(b: &mut Fb<'_, '_>, op: &Operation) -> Result<Vec<V>, Refusal> {
    let callee = symbol(op.attribute("decomposition"))?;
    call_of(b, op, &callee)
}
