//! The XLA ops whose attrs are functions, on the simulator: `XlaReduce`,
//! `XlaVariadicReduce(V2)`, `XlaReduceWindow`, `XlaSelectAndScatter` and
//! `XlaVariadicSort` (call ops of kind [`CallKind::Apply`], run by
//! [`super::control_flow::call`] with the module's functions), and the
//! fixed-order sorts `XlaSort` and `XlaKeyValueSort` (pure kernels).
//!
//! Meaning, as XLA defines the HLO ops TensorFlow's bridge emits: a
//! reduction folds the reducer over the reduced elements in row-major
//! order, starting from the init values (a reduction over no dimension
//! gives its operands, as XLA simplifies it); a window reduction skips the
//! positions that fall in padding or in base-dilation holes (the init value
//! is folded in once, not per skipped position); select-and-scatter starts
//! from the init value everywhere, picks in each window the element the
//! `select` function keeps against every later one (padding is never
//! picked) and folds the source value into it with `scatter`; a sort orders
//! each 1-D slice along its dimension by the comparator's "less than",
//! stably (an unstable sort may give any order of equal keys; this one
//! gives the stable one). The functions take and return scalars: a result
//! of another dtype or shape is an error.
//!
//! Cost: one function call per folded element (a reduction: the input's
//! elements; a window reduction: outputs × window size; a sort: about
//! n log n comparisons per slice), each running the function body in the
//! interpreter. The operands are read an element at a time; the results
//! are gathered as scalar tensors (a few words each) before they are packed.
//!
//! [`CallKind::Apply`]: crate::ir::functions::CallKind::Apply

use std::cmp::Ordering;

use ndarray::{ArcArray, IxDyn};

use super::arg;
use crate::exec::error::KernelError;
use crate::exec::tensor::{with_element_type, Element, Tensor};
use crate::ir::{AttrMap, AttrValue};

/// Runs function `name` on scalar arguments (the module's interpreter).
pub(crate) type Run<'a> = &'a dyn Fn(&str, Vec<Tensor>) -> Result<Vec<Tensor>, KernelError>;

/// Runs a function-carrying op with `run` for its functions.
pub(crate) fn apply(op: &str, attrs: &AttrMap, inputs: &[Tensor], run: Run) -> Result<Vec<Tensor>, KernelError> {
    match op {
        "XlaReduce" | "XlaVariadicReduce" | "XlaVariadicReduceV2" => reduce(op, attrs, inputs, run),
        "XlaReduceWindow" => reduce_window(op, attrs, inputs, run),
        "XlaScatter" => super::xla_misc::scatter(op, attrs, inputs, run),
        "XlaSelectAndScatter" => select_and_scatter(op, attrs, inputs, run),
        "XlaVariadicSort" => variadic_sort(op, attrs, inputs, run),
        _ => Err(KernelError::NoKernel { op: op.to_string() }),
    }
}

/// Runs `XlaSort` or `XlaKeyValueSort`; `None` for other ops.
pub(crate) fn dispatch(op: &str, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    match op {
        "XlaSort" => Some(arg(op, inputs, 0).and_then(|x| fixed_sort(op, std::slice::from_ref(x)))),
        "XlaKeyValueSort" => Some(arg(op, inputs, 1).and_then(|_| fixed_sort(op, &inputs[..2]))),
        _ => None,
    }
}

// ---------------------------------------------------------------- helpers

/// The function attribute `key`.
pub(super) fn func<'a>(op: &str, attrs: &'a AttrMap, key: &str) -> Result<&'a str, KernelError> {
    match attrs.get(key) {
        Some(AttrValue::Func(f)) => Ok(&f.name),
        _ => Err(KernelError::invalid(op, format!("missing function attribute `{key}`"))),
    }
}

/// A tensor's elements in row-major order, read one at a time as scalar
/// tensors (the tensor is held once, in standard layout).
pub(super) struct Elements(Tensor);

impl Elements {
    pub(super) fn new(op: &str, t: &Tensor) -> Result<Elements, KernelError> {
        fn contiguous<T: Element>(t: &Tensor) -> Option<Tensor> {
            let a = T::unwrap(t)?;
            Some(if a.as_slice().is_some() {
                t.clone()
            } else {
                T::wrap(a.as_standard_layout().into_owned().into_shared())
            })
        }
        with_element_type!(t, T => contiguous::<T>(t), resource => None)
            .map(Elements)
            .ok_or_else(|| KernelError::dtype(op, t.dtype(), "the operands must be tensors of numbers or bools"))
    }

    /// Element `i` as a scalar tensor.
    pub(super) fn at(&self, i: usize) -> Result<Tensor, KernelError> {
        fn of<T: Element>(t: &Tensor, i: usize) -> Option<Tensor> {
            Some(Tensor::scalar(T::unwrap(t)?.as_slice()?.get(i)?.clone()))
        }
        with_element_type!(&self.0, T => of::<T>(&self.0, i), resource => None)
            .ok_or_else(|| KernelError::invalid("xla", format!("element {i} of a {:?} tensor", self.0.shape())))
    }
}

/// A tensor of `shape` from scalars of `like`'s dtype.
pub(super) fn assemble(op: &str, like: &Tensor, shape: &[usize], items: &[Tensor]) -> Result<Tensor, KernelError> {
    fn of<T: Element>(shape: &[usize], items: &[Tensor]) -> Option<Tensor> {
        let values = items.iter().map(|s| T::unwrap(s)?.iter().next().cloned()).collect::<Option<Vec<T>>>()?;
        Some(T::wrap(ArcArray::from_shape_vec(IxDyn(shape), values).ok()?))
    }
    with_element_type!(like, T => of::<T>(shape, items), resource => None)
        .ok_or_else(|| KernelError::invalid(op, format!("results of mixed dtypes for one output of {}", like.dtype())))
}

/// Calls `name` and checks that it returns `want` scalars of the dtypes of `like`.
pub(super) fn call(
    op: &str,
    run: Run,
    name: &str,
    args: Vec<Tensor>,
    like: &[&Tensor],
) -> Result<Vec<Tensor>, KernelError> {
    let out = run(name, args)?;
    if out.len() != like.len() {
        return Err(KernelError::invalid(
            op,
            format!("function `@{name}` returns {} value(s), the op needs {}", out.len(), like.len()),
        ));
    }
    for (k, (got, want)) in out.iter().zip(like).enumerate() {
        if got.dtype() != want.dtype() || !got.shape().is_empty() {
            return Err(KernelError::invalid(
                op,
                format!(
                    "function `@{name}` returns {}{:?} as result {k}; the op needs a {} scalar",
                    got.dtype(),
                    got.shape(),
                    want.dtype()
                ),
            ));
        }
    }
    Ok(out)
}

/// The truth of a bool scalar a predicate function returned.
fn truth(op: &str, name: &str, t: &Tensor) -> Result<bool, KernelError> {
    match t.to_vec::<bool>().as_deref() {
        Some([b]) => Ok(*b),
        _ => Err(KernelError::invalid(
            op,
            format!("function `@{name}` returns {}{:?}; the op needs a bool scalar", t.dtype(), t.shape()),
        )),
    }
}

/// Row-major strides of `shape`.
pub(super) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The multi-index of flat position `i` in `shape`.
pub(super) fn unravel(mut i: usize, shape: &[usize], out: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        out[d] = i % n;
        i /= n;
    }
}

/// Checks that every operand has the shape of the first, and every init
/// value is a scalar of its operand's dtype.
fn check_operands(op: &str, xs: &[Tensor], inits: &[Tensor]) -> Result<(), KernelError> {
    let shape = xs.first().ok_or_else(|| KernelError::invalid(op, "no operands"))?.shape();
    for (k, (x, init)) in xs.iter().zip(inits).enumerate() {
        if x.shape() != shape {
            return Err(KernelError::invalid(
                op,
                format!("operand {k} has shape {:?}, operand 0 {:?}: they must be equal", x.shape(), shape),
            ));
        }
        if init.dtype() != x.dtype() || !init.shape().is_empty() {
            return Err(KernelError::invalid(
                op,
                format!("init value {k} is {}{:?}; it must be a {} scalar", init.dtype(), init.shape(), x.dtype()),
            ));
        }
    }
    Ok(())
}

/// A per-dimension operand of a window op: `rank` non-negative integers
/// (`positive`: at least 1).
fn per_dim(op: &str, t: &Tensor, what: &str, rank: usize, positive: bool) -> Result<Vec<usize>, KernelError> {
    let v = t.to_i64_vec(op, what)?;
    if v.len() != rank {
        return Err(KernelError::invalid(op, format!("{what} has {} values for an operand of rank {rank}", v.len())));
    }
    v.iter()
        .map(|&d| {
            usize::try_from(d).ok().filter(|&d| !positive || d > 0).ok_or_else(|| {
                let need = if positive { "positive" } else { "non-negative" };
                KernelError::invalid(op, format!("{what} holds {d}; each must be {need}"))
            })
        })
        .collect()
}

/// The `[rank, 2]` padding operand as (low, high) pairs.
fn padding(op: &str, t: &Tensor, rank: usize) -> Result<Vec<(usize, usize)>, KernelError> {
    if t.shape() != [rank, 2] {
        return Err(KernelError::invalid(op, format!("padding has shape {:?}; it must be [{rank}, 2]", t.shape())));
    }
    let flat = per_dim(op, t, "padding", 2 * rank, false)?;
    Ok(flat.chunks(2).map(|p| (p[0], p[1])).collect())
}

/// The geometry of a window over an operand: per dimension the operand
/// size, the window size, stride, base and window dilations and padding.
struct Window {
    dims: Vec<usize>,
    size: Vec<usize>,
    stride: Vec<usize>,
    base: Vec<usize>,
    dilation: Vec<usize>,
    pad: Vec<(usize, usize)>,
}

impl Window {
    /// The output shape: windows that fit the padded, dilated operand.
    fn out_shape(&self) -> Vec<usize> {
        (0..self.dims.len())
            .map(|d| {
                let dilated = if self.dims[d] == 0 { 0 } else { (self.dims[d] - 1) * self.base[d] + 1 };
                let padded = dilated + self.pad[d].0 + self.pad[d].1;
                let span = (self.size[d] - 1) * self.dilation[d] + 1;
                if padded >= span {
                    (padded - span) / self.stride[d] + 1
                } else {
                    0
                }
            })
            .collect()
    }

    /// The flat operand positions of window `o`, in row-major window
    /// order, skipping padding and base-dilation holes.
    fn positions(&self, o: &[usize], out: &mut Vec<usize>) {
        out.clear();
        let rank = self.dims.len();
        let st = strides(&self.dims);
        let count: usize = self.size.iter().product();
        let mut k = vec![0; rank];
        'window: for w in 0..count {
            unravel(w, &self.size, &mut k);
            let mut flat = 0;
            for d in 0..rank {
                let p = (o[d] * self.stride[d] + k[d] * self.dilation[d]) as i64 - self.pad[d].0 as i64;
                if p < 0 || !(p as usize).is_multiple_of(self.base[d]) || p as usize / self.base[d] >= self.dims[d] {
                    continue 'window;
                }
                flat += p as usize / self.base[d] * st[d];
            }
            out.push(flat);
        }
    }
}

// ---------------------------------------------------------------- reductions

/// `XlaReduce(input, init_value)` and the variadic forms (`N` inputs, then
/// `N` init values): the reducer folded over `dimensions_to_reduce`.
fn reduce(op: &str, attrs: &AttrMap, inputs: &[Tensor], run: Run) -> Result<Vec<Tensor>, KernelError> {
    if inputs.is_empty() || !inputs.len().is_multiple_of(2) {
        return Err(KernelError::invalid(
            op,
            format!("{} operands: it takes N inputs and N init values", inputs.len()),
        ));
    }
    let n = inputs.len() / 2;
    let (xs, inits) = inputs.split_at(n);
    check_operands(op, xs, inits)?;
    let reducer = func(op, attrs, "reducer")?;
    let shape = xs[0].shape().to_vec();
    let dims = attrs.get("dimensions_to_reduce").and_then(AttrValue::as_int_list).unwrap_or_default();
    let mut reduced = vec![false; shape.len()];
    for &d in &dims {
        match usize::try_from(d).ok().filter(|&d| d < shape.len()) {
            Some(d) if !reduced[d] => reduced[d] = true,
            Some(_) => return Err(KernelError::invalid(op, format!("dimension {d} is reduced twice"))),
            None => {
                return Err(KernelError::invalid(op, format!("dimension {d} is out of range for rank {}", shape.len())))
            }
        }
    }
    if dims.is_empty() {
        // XLA folds a reduction over no dimension to its operands (the init
        // values, meant as the reducer's identities, are not applied), and so
        // does TensorFlow's bridge.
        return Ok(xs.to_vec());
    }
    let out_shape: Vec<usize> = shape.iter().zip(&reduced).filter(|(_, &r)| !r).map(|(&d, _)| d).collect();
    let out_strides = strides(&out_shape);
    let values = xs.iter().map(|x| Elements::new(op, x)).collect::<Result<Vec<_>, _>>()?;
    let like: Vec<&Tensor> = inits.iter().collect();
    let mut accs: Vec<Vec<Tensor>> = vec![inits.to_vec(); out_shape.iter().product()];
    let mut index = vec![0; shape.len()];
    for i in 0..xs[0].len() {
        unravel(i, &shape, &mut index);
        let o: usize =
            index.iter().zip(&reduced).filter(|(_, &r)| !r).zip(&out_strides).map(|((&k, _), &s)| k * s).sum();
        let mut args = std::mem::take(&mut accs[o]);
        for v in &values {
            args.push(v.at(i)?);
        }
        accs[o] = call(op, run, reducer, args, &like)?;
    }
    (0..n)
        .map(|k| {
            let items: Vec<Tensor> = accs.iter().map(|a| a[k].clone()).collect();
            assemble(op, &inits[k], &out_shape, &items)
        })
        .collect()
}

/// `XlaReduceWindow(input, init_value, window_dimensions, window_strides,
/// base_dilations, window_dilations, padding)` with `computation`.
fn reduce_window(op: &str, attrs: &AttrMap, inputs: &[Tensor], run: Run) -> Result<Vec<Tensor>, KernelError> {
    let (x, init) = (arg(op, inputs, 0)?, arg(op, inputs, 1)?);
    check_operands(op, std::slice::from_ref(x), std::slice::from_ref(init))?;
    let rank = x.shape().len();
    let window = Window {
        dims: x.shape().to_vec(),
        size: per_dim(op, arg(op, inputs, 2)?, "window_dimensions", rank, true)?,
        stride: per_dim(op, arg(op, inputs, 3)?, "window_strides", rank, true)?,
        base: per_dim(op, arg(op, inputs, 4)?, "base_dilations", rank, true)?,
        dilation: per_dim(op, arg(op, inputs, 5)?, "window_dilations", rank, true)?,
        pad: padding(op, arg(op, inputs, 6)?, rank)?,
    };
    let f = func(op, attrs, "computation")?;
    let out_shape = window.out_shape();
    crate::exec::limits::checked_dims(op, x.dtype(), &out_shape.iter().map(|&d| d as i64).collect::<Vec<_>>())?;
    let values = Elements::new(op, x)?;
    let count: usize = out_shape.iter().product();
    let (mut o, mut at) = (vec![0; rank], Vec::new());
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        unravel(i, &out_shape, &mut o);
        window.positions(&o, &mut at);
        let mut acc = init.clone();
        for &p in &at {
            acc = call(op, run, f, vec![acc, values.at(p)?], &[init])?.remove(0);
        }
        out.push(acc);
    }
    Ok(vec![assemble(op, init, &out_shape, &out)?])
}

/// `XlaSelectAndScatter(operand, window_dimensions, window_strides,
/// padding, source, init_value)` with `select` and `scatter`.
fn select_and_scatter(op: &str, attrs: &AttrMap, inputs: &[Tensor], run: Run) -> Result<Vec<Tensor>, KernelError> {
    let x = arg(op, inputs, 0)?;
    let (source, init) = (arg(op, inputs, 4)?, arg(op, inputs, 5)?);
    check_operands(op, std::slice::from_ref(x), std::slice::from_ref(init))?;
    check_operands(op, std::slice::from_ref(source), std::slice::from_ref(init))?;
    let rank = x.shape().len();
    let window = Window {
        dims: x.shape().to_vec(),
        size: per_dim(op, arg(op, inputs, 1)?, "window_dimensions", rank, true)?,
        stride: per_dim(op, arg(op, inputs, 2)?, "window_strides", rank, true)?,
        base: vec![1; rank],
        dilation: vec![1; rank],
        pad: padding(op, arg(op, inputs, 3)?, rank)?,
    };
    let (select, scatter) = (func(op, attrs, "select")?, func(op, attrs, "scatter")?);
    let windows = window.out_shape();
    if source.shape() != windows.as_slice() {
        return Err(KernelError::invalid(
            op,
            format!("source has shape {:?}; the windows over the operand are {windows:?}", source.shape()),
        ));
    }
    let values = Elements::new(op, x)?;
    let sources = Elements::new(op, source)?;
    let mut out = vec![init.clone(); x.len()];
    let (mut o, mut at) = (vec![0; rank], Vec::new());
    let bool_like = Tensor::scalar(false);
    for i in 0..source.len() {
        unravel(i, &windows, &mut o);
        window.positions(&o, &mut at);
        let Some((&first, rest)) = at.split_first() else { continue };
        let mut chosen = first;
        for &p in rest {
            let keep = call(op, run, select, vec![values.at(chosen)?, values.at(p)?], &[&bool_like])?;
            if !truth(op, select, &keep[0])? {
                chosen = p;
            }
        }
        let prev = std::mem::replace(&mut out[chosen], bool_like.clone());
        out[chosen] = call(op, run, scatter, vec![prev, sources.at(i)?], &[init])?.remove(0);
    }
    Ok(vec![assemble(op, init, x.shape(), &out)?])
}

// ---------------------------------------------------------------- sorts

/// The flat positions of every 1-D slice of `shape` along `axis`.
fn slices(shape: &[usize], axis: usize) -> impl Iterator<Item = Vec<usize>> {
    let step = strides(shape)[axis];
    let len = shape[axis];
    let total: usize = shape.iter().product();
    (0..total)
        .filter(move |i| (i / step).is_multiple_of(len.max(1)))
        .map(move |start| (0..len).map(|k| start + k * step).collect())
}

/// The operands permuted: along each slice, element `k` of the result is
/// element `order[k]` of the slice.
fn permute(op: &str, xs: &[Tensor], orders: &[(Vec<usize>, Vec<usize>)]) -> Result<Vec<Tensor>, KernelError> {
    xs.iter()
        .map(|x| {
            let values = Elements::new(op, x)?;
            let mut out = (0..x.len()).map(|i| values.at(i)).collect::<Result<Vec<_>, _>>()?;
            for (slice, order) in orders {
                for (k, &from) in order.iter().enumerate() {
                    out[slice[k]] = values.at(slice[from])?;
                }
            }
            assemble(op, x, x.shape(), &out)
        })
        .collect()
}

/// `XlaVariadicSort(inputs, dimension)`: every input permuted as the
/// comparator orders the slices along `dimension`.
fn variadic_sort(op: &str, attrs: &AttrMap, inputs: &[Tensor], run: Run) -> Result<Vec<Tensor>, KernelError> {
    let (dimension, xs) = inputs.split_last().ok_or_else(|| KernelError::invalid(op, "no operands"))?;
    let first = xs.first().ok_or_else(|| KernelError::invalid(op, "no inputs to sort"))?;
    for (k, x) in xs.iter().enumerate() {
        if x.shape() != first.shape() {
            return Err(KernelError::invalid(
                op,
                format!("input {k} has shape {:?}, input 0 {:?}: they must be equal", x.shape(), first.shape()),
            ));
        }
    }
    let rank = first.shape().len() as i64;
    let d = dimension.to_i64_vec(op, "dimension")?.first().copied().unwrap_or(0);
    let axis = usize::try_from(if d < 0 { d + rank } else { d })
        .ok()
        .filter(|&a| (a as i64) < rank)
        .ok_or_else(|| KernelError::invalid(op, format!("dimension {d} is out of range for rank {rank}")))?;
    let comparator = func(op, attrs, "comparator")?;
    let values = xs.iter().map(|x| Elements::new(op, x)).collect::<Result<Vec<_>, _>>()?;
    let bool_like = Tensor::scalar(false);
    let less = |a: usize, b: usize| -> Result<bool, KernelError> {
        let mut args = Vec::with_capacity(2 * values.len());
        for v in &values {
            args.push(v.at(a)?);
            args.push(v.at(b)?);
        }
        truth(op, comparator, &call(op, run, comparator, args, &[&bool_like])?[0])
    };
    let mut orders = Vec::new();
    for slice in slices(first.shape(), axis) {
        let mut failed = None;
        let mut order: Vec<usize> = (0..slice.len()).collect();
        order.sort_by(|&i, &j| {
            if failed.is_some() {
                return Ordering::Equal;
            }
            let cmp = less(slice[i], slice[j]).and_then(|lt| {
                Ok(if lt {
                    Ordering::Less
                } else if less(slice[j], slice[i])? {
                    Ordering::Greater
                } else {
                    Ordering::Equal
                })
            });
            cmp.unwrap_or_else(|e| {
                failed = Some(e);
                Ordering::Equal
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        orders.push((slice, order));
    }
    permute(op, xs, &orders)
}

/// `XlaSort(input)` and `XlaKeyValueSort(keys, values)`: ascending along
/// the last dimension by the first operand (NaN after every number).
fn fixed_sort(op: &str, xs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let keys = &xs[0];
    for x in &xs[1..] {
        if x.shape() != keys.shape() {
            return Err(KernelError::invalid(
                op,
                format!("values have shape {:?}, keys {:?}: they must be equal", x.shape(), keys.shape()),
            ));
        }
    }
    if keys.shape().is_empty() {
        return Err(KernelError::invalid(op, "the operand must have at least one dimension"));
    }
    let axis = keys.shape().len() - 1;
    let key: Vec<f64> = match keys {
        Tensor::F32(_) | Tensor::F64(_) | Tensor::BF16(_) | Tensor::F16(_) => {
            let wide = crate::exec::run_kernel("Cast", &cast_to_f64(), std::slice::from_ref(keys))?.remove(0);
            wide.to_vec::<f64>().unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let ints: Vec<i64> = if key.is_empty() && !keys.is_empty() { keys.to_i64_vec(op, "keys")? } else { Vec::new() };
    let orders: Vec<(Vec<usize>, Vec<usize>)> = slices(keys.shape(), axis)
        .map(|slice| {
            let mut order: Vec<usize> = (0..slice.len()).collect();
            if key.is_empty() {
                order.sort_by_key(|&i| ints[slice[i]]);
            } else {
                order.sort_by(|&i, &j| {
                    let (a, b) = (key[slice[i]], key[slice[j]]);
                    a.partial_cmp(&b).unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
                });
            }
            (slice, order)
        })
        .collect();
    permute(op, xs, &orders)
}

fn cast_to_f64() -> AttrMap {
    let mut attrs = AttrMap::new();
    attrs.insert("DstT", AttrValue::Type(crate::ir::DType::F64));
    attrs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::run_kernel;
    use crate::ir::types::FuncRef;

    fn attrs(pairs: &[(&str, AttrValue)]) -> AttrMap {
        let mut a = AttrMap::new();
        for (k, v) in pairs {
            a.insert(*k, v.clone());
        }
        a
    }

    fn f(name: &str) -> AttrValue {
        AttrValue::Func(Box::new(FuncRef { name: name.into(), attrs: AttrMap::new() }))
    }

    fn ints(v: &[i64]) -> AttrValue {
        AttrValue::List(v.iter().map(|&i| AttrValue::Int(i)).collect())
    }

    /// The functions of these tests, by name, as kernels: `add`, `ge`, `lt`, and `wrong` (returns an i32).
    fn run(name: &str, args: Vec<Tensor>) -> Result<Vec<Tensor>, KernelError> {
        let none = AttrMap::new();
        match name {
            "add" => run_kernel("AddV2", &none, &args),
            "ge" => run_kernel("GreaterEqual", &none, &args),
            "lt" => run_kernel("Less", &none, &args[..2]),
            _ => Ok(vec![Tensor::scalar(1i32)]),
        }
    }

    fn m(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_vec(shape, v.to_vec()).unwrap()
    }

    #[test]
    fn a_reduction_folds_its_function_over_the_reduced_dimensions() {
        let a = attrs(&[("reducer", f("add")), ("dimensions_to_reduce", ints(&[1]))]);
        let x = m(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let out = apply("XlaReduce", &a, &[x.clone(), Tensor::scalar(0.5f32)], &run).unwrap();
        assert_eq!(out, vec![Tensor::vector(vec![6.5f32, 15.5])]);
        // A reducer returning another dtype, and a dimension out of range, are errors.
        let wrong = attrs(&[("reducer", f("wrong")), ("dimensions_to_reduce", ints(&[1]))]);
        let err = apply("XlaReduce", &wrong, &[x.clone(), Tensor::scalar(0f32)], &run).unwrap_err();
        assert!(err.to_string().contains("f32 scalar"), "{err}");
        let far = attrs(&[("reducer", f("add")), ("dimensions_to_reduce", ints(&[2]))]);
        let err = apply("XlaReduce", &far, &[x, Tensor::scalar(0f32)], &run).unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
    }

    #[test]
    fn a_window_reduction_skips_padding_and_dilation_holes() {
        // [1, 2, 3] dilated by 2 is [1, _, 2, _, 3], padded by one on each side: windows of 3, stride 2.
        let a = attrs(&[("computation", f("add"))]);
        let v = |d: &[i32]| Tensor::vector(d.to_vec());
        let inputs = [
            Tensor::vector(vec![1.0f32, 2.0, 3.0]),
            Tensor::scalar(10f32),
            v(&[3]),
            v(&[2]),
            v(&[2]),
            v(&[1]),
            Tensor::from_vec(&[1, 2], vec![1i32, 1]).unwrap(),
        ];
        let out = apply("XlaReduceWindow", &a, &inputs, &run).unwrap();
        // Windows: [_, 1, _], [_, 2, _], [_, 3, _]: the init value once per window.
        assert_eq!(out, vec![Tensor::vector(vec![11.0f32, 12.0, 13.0])]);
    }

    #[test]
    fn select_and_scatter_adds_each_source_to_its_windows_pick() {
        let a = attrs(&[("select", f("ge")), ("scatter", f("add"))]);
        let x = m(&[2, 4], &[1.0, 5.0, 2.0, 2.0, 3.0, 0.0, 2.0, 1.0]);
        let v = |d: &[i32]| Tensor::vector(d.to_vec());
        let pad = Tensor::from_vec(&[2, 2], vec![0i32; 4]).unwrap();
        let source = m(&[1, 2], &[10.0, 20.0]);
        let out =
            apply("XlaSelectAndScatter", &a, &[x, v(&[2, 2]), v(&[2, 2]), pad, source, Tensor::scalar(0f32)], &run)
                .unwrap();
        // The maximum of the first window is 5; of the second, the first of the tied 2s.
        assert_eq!(out, vec![m(&[2, 4], &[0.0, 10.0, 20.0, 0.0, 0.0, 0.0, 0.0, 0.0])]);
    }

    #[test]
    fn a_variadic_sort_is_stable_and_permutes_every_operand() {
        let a = attrs(&[("comparator", f("lt")), ("is_stable", AttrValue::Bool(true))]);
        let keys = Tensor::vector(vec![2.0f32, 1.0, 2.0, 0.0]);
        let values = Tensor::vector(vec![0i32, 1, 2, 3]);
        let out = apply("XlaVariadicSort", &a, &[keys, values, Tensor::scalar(0i32)], &run).unwrap();
        assert_eq!(out, vec![Tensor::vector(vec![0.0f32, 1.0, 2.0, 2.0]), Tensor::vector(vec![3i32, 1, 0, 2])]);
        let err = apply("XlaVariadicSort", &a, &[Tensor::vector(vec![1.0f32]), Tensor::scalar(1i32)], &run);
        assert!(err.unwrap_err().to_string().contains("out of range"));
    }

    #[test]
    fn the_fixed_sorts_order_the_last_dimension_with_nan_last() {
        let x = m(&[2, 3], &[3.0, f32::NAN, -1.0, 0.5, 0.25, 2.0]);
        let out = run_kernel("XlaSort", &AttrMap::new(), std::slice::from_ref(&x)).unwrap().remove(0);
        let got = out.to_vec::<f32>().unwrap();
        assert_eq!(&got[..2], &[-1.0, 3.0]);
        assert!(got[2].is_nan());
        assert_eq!(&got[3..], &[0.25, 0.5, 2.0]);
        let values = Tensor::from_vec(&[2, 3], vec![0i32, 1, 2, 3, 4, 5]).unwrap();
        let kv = run_kernel("XlaKeyValueSort", &AttrMap::new(), &[x, values]).unwrap();
        assert_eq!(kv[1], Tensor::from_vec(&[2, 3], vec![2i32, 0, 1, 4, 3, 5]).unwrap());
        assert!(run_kernel("XlaSort", &AttrMap::new(), &[Tensor::scalar(1f32)]).is_err());
    }
}
