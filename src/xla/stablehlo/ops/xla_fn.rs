//! The XLA ops whose attrs are functions, as the StableHLO ops TensorFlow's
//! bridge makes of them: `XlaReduce` and `XlaVariadicReduce(V2)` as
//! `stablehlo.reduce`, `XlaReduceWindow` as `stablehlo.reduce_window`,
//! `XlaSelectAndScatter` as `stablehlo.select_and_scatter`,
//! `XlaVariadicSort` as `stablehlo.sort`; and `XlaSort`/`XlaKeyValueSort`
//! as a `stablehlo.sort` with a less-than comparator (builders).
//!
//! Meaning: each function attr becomes a region over scalars that calls the
//! function, printed once per argument types as a private `func.func` (see
//! `calls.rs`); the region's block arguments are in the order XLA gives
//! them (a reducer: the accumulators, then the elements; a comparator: the
//! left and right value of each operand in turn). The window sizes,
//! strides, dilations, paddings and the sort dimension must be compile-time
//! constants, as XLA needs. Invariant: a function must return scalars of
//! the types the op needs, else the lowering is refused. Cost: one region
//! and one function definition per op.

use super::super::calls::{self, Finals, Library};
use super::super::text::{Ctx, Ty, Val};
use super::{i64s, is_float, Call};
use crate::exec::Tensor;
use crate::ir::{AttrMap, AttrValue, DType, Graph, NodeId};
use crate::xla::error::XlaError;

/// An op of kind `Apply` with what the emitter knows of its operands.
pub(in crate::xla::stablehlo) struct Apply<'a> {
    pub graph: &'a Graph,
    pub id: NodeId,
    pub lib: &'a Library<'a>,
    /// The operands' values.
    pub vals: &'a [Val],
    /// The operands' compile-time values, where they are constants.
    pub consts: Vec<Option<Tensor>>,
    /// The op's result types.
    pub out: &'a [Ty],
    pub replicas: usize,
}

impl Apply<'_> {
    pub(super) fn err(&self, message: impl Into<String>) -> XlaError {
        XlaError::lowering(self.graph.node(self.id), message)
    }

    pub(super) fn attrs(&self) -> &AttrMap {
        &self.graph.node(self.id).attrs
    }

    /// Function attr `key`.
    pub(super) fn func(&self, key: &str) -> Result<String, XlaError> {
        match self.attrs().get(key) {
            Some(AttrValue::Func(f)) => Ok(f.name.to_string()),
            _ => Err(self.err(format!("has no function attribute `{key}`"))),
        }
    }

    /// Constant operand `i` as integers.
    fn ints(&self, i: usize, what: &str) -> Result<Vec<i64>, XlaError> {
        let t = self
            .consts
            .get(i)
            .and_then(Option::as_ref)
            .ok_or_else(|| self.err(format!("operand {i} ({what}) must be a compile-time constant")))?;
        t.to_i64_vec("", what).map_err(|e| self.err(e.to_string()))
    }

    /// Constant operand `i`: `rank` values (a `[rank, 2]` padding gives `2 * rank`).
    fn per_dim(&self, i: usize, what: &str, want: usize) -> Result<Vec<i64>, XlaError> {
        let v = self.ints(i, what)?;
        if v.len() != want {
            return Err(self.err(format!("{what} has {} values, the operand's rank needs {want}", v.len())));
        }
        Ok(v)
    }

    /// A region calling function `name` on scalars of `dtypes`, checked to
    /// return scalars of `results`.
    pub(super) fn region(
        &self,
        ctx: &mut Ctx,
        name: &str,
        dtypes: &[DType],
        results: &[DType],
    ) -> Result<String, XlaError> {
        let args = dtypes.iter().map(|&d| zero(d).map_err(|m| self.err(m))).collect::<Result<Vec<_>, _>>()?;
        let (sym, tys) = calls::define(self.lib, name, &args, &vec![false; args.len()], Finals::Append, self.replicas)?;
        let want: Vec<Ty> = results.iter().map(|&d| Ty::scalar(d)).collect();
        if tys != want {
            let show = |t: &[Ty]| t.iter().map(Ty::mlir).collect::<Vec<_>>().join(", ");
            return Err(self.err(format!(
                "function `{name}` returns ({}); the op needs ({})",
                show(&tys),
                show(&want)
            )));
        }
        let mut r = ctx.scratch();
        let types: Vec<Ty> = dtypes.iter().map(|&d| Ty::scalar(d)).collect();
        let (head, params) = calls::block(&mut r, &types);
        r.line(&head);
        let outs = calls::call(&mut r, &sym, &params, &tys);
        calls::ret(&mut r, &outs);
        ctx.resume(&r);
        Ok(format!("{{\n{}}}", r.text))
    }
}

/// A scalar zero of `dtype` (false for bool): a stand-in argument for tracing a function.
fn zero(dtype: DType) -> Result<Tensor, String> {
    let mut attrs = AttrMap::default();
    attrs.insert("DstT", AttrValue::Type(dtype));
    let mut out = crate::exec::run_kernel("Cast", &attrs, &[Tensor::scalar(0f32)]).map_err(|e| e.to_string())?;
    Ok(out.remove(0))
}

/// `[[lo, hi], ...]` as the dense attribute of a window op.
fn padding_attr(pairs: &[i64]) -> String {
    let rows: Vec<String> = pairs.chunks(2).map(|p| format!("[{}, {}]", p[0], p[1])).collect();
    format!("dense<[{}]> : tensor<{}x2xi64>", rows.join(", "), pairs.len() / 2)
}

/// Lowers an op of kind `Apply`, returning its results.
pub(in crate::xla::stablehlo) fn apply(ctx: &mut Ctx, a: &Apply) -> Result<Vec<Val>, XlaError> {
    let op = &*a.graph.node(a.id).op;
    let refs: Vec<&Val> = a.vals.iter().collect();
    let dtypes: Vec<DType> = a.vals.iter().map(|v| v.ty.dtype).collect();
    let rank = a.vals.first().map_or(0, |v| v.ty.rank());
    match op {
        "XlaReduce" | "XlaVariadicReduce" | "XlaVariadicReduceV2" => {
            if a.vals.is_empty() || !a.vals.len().is_multiple_of(2) {
                return Err(a.err("it takes N inputs and N init values"));
            }
            let n = a.vals.len() / 2;
            let region = a.region(ctx, &a.func("reducer")?, &dtypes, &dtypes[..n])?;
            let mut dims = a.attrs().get("dimensions_to_reduce").and_then(AttrValue::as_int_list).unwrap_or_default();
            dims.sort_unstable();
            Ok(ctx.op_regions("stablehlo.reduce", &refs, &[region], &format!("dimensions = {}", i64s(&dims)), a.out))
        }
        "XlaReduceWindow" => {
            if rank == 0 {
                return Err(a.err("a window over a scalar is not lowered"));
            }
            let region = a.region(ctx, &a.func("computation")?, &[dtypes[0]; 2], &dtypes[..1])?;
            let attrs = format!(
                "window_dimensions = {}, window_strides = {}, base_dilations = {}, window_dilations = {}, padding = {}",
                i64s(&a.per_dim(2, "window_dimensions", rank)?),
                i64s(&a.per_dim(3, "window_strides", rank)?),
                i64s(&a.per_dim(4, "base_dilations", rank)?),
                i64s(&a.per_dim(5, "window_dilations", rank)?),
                padding_attr(&a.per_dim(6, "padding", 2 * rank)?)
            );
            Ok(ctx.op_regions("stablehlo.reduce_window", &refs[..2], &[region], &attrs, a.out))
        }
        "XlaScatter" => super::xla_misc::scatter(ctx, a),
        "XlaSelectAndScatter" => {
            if rank == 0 || a.vals.len() < 6 {
                return Err(a.err("it takes an operand of rank 1 or more and six operands"));
            }
            let dtype = dtypes[0];
            let select = a.region(ctx, &a.func("select")?, &[dtype; 2], &[DType::Bool])?;
            let scatter = a.region(ctx, &a.func("scatter")?, &[dtype; 2], &[dtype])?;
            let attrs = format!(
                "window_dimensions = {}, window_strides = {}, padding = {}",
                i64s(&a.per_dim(1, "window_dimensions", rank)?),
                i64s(&a.per_dim(2, "window_strides", rank)?),
                padding_attr(&a.per_dim(3, "padding", 2 * rank)?)
            );
            let operands = [refs[0], refs[4], refs[5]];
            Ok(ctx.op_regions("stablehlo.select_and_scatter", &operands, &[select, scatter], &attrs, a.out))
        }
        "XlaVariadicSort" => {
            let k = a.vals.len().checked_sub(1).filter(|&k| k > 0).ok_or_else(|| a.err("no inputs to sort"))?;
            let d = *a.ints(k, "dimension")?.first().ok_or_else(|| a.err("the dimension is empty"))?;
            let axis = if d < 0 { d + rank as i64 } else { d };
            if !(0..rank as i64).contains(&axis) {
                return Err(a.err(format!("dimension {d} is out of range for rank {rank}")));
            }
            let pairs: Vec<DType> = dtypes[..k].iter().flat_map(|&t| [t, t]).collect();
            let region = a.region(ctx, &a.func("comparator")?, &pairs, &[DType::Bool])?;
            let stable = a.attrs().get_bool("is_stable").unwrap_or(false);
            let attrs = format!("dimension = {axis} : i64, is_stable = {stable}");
            Ok(ctx.op_regions("stablehlo.sort", &refs[..k], &[region], &attrs, a.out))
        }
        _ => Err(a.err("is not an op that applies functions")),
    }
}

/// `XlaSort(input)` and `XlaKeyValueSort(keys, values)`: `stablehlo.sort`
/// along the last dimension, ascending by the first operand.
pub(super) fn sort(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let keys = n.input(0)?;
    let last =
        keys.ty.rank().checked_sub(1).ok_or_else(|| format!("{}: the operand must have rank 1 or more", n.op))?;
    let operands: Vec<&Val> = n.inputs.iter().take(if n.op == "XlaKeyValueSort" { 2 } else { 1 }).collect();
    let kind = match keys.ty.dtype {
        d if is_float(d) => "FLOAT",
        DType::U8 | DType::U64 => "UNSIGNED",
        _ => "SIGNED",
    };
    let t = Ty::scalar(keys.ty.dtype).mlir();
    let mut params: Vec<String> = Vec::new();
    let (a, b) = (c.fresh(), c.fresh());
    params.push(format!("{a}: {t}"));
    params.push(format!("{b}: {t}"));
    for v in &operands[1..] {
        let u = Ty::scalar(v.ty.dtype).mlir();
        params.push(format!("{}: {u}", c.fresh()));
        params.push(format!("{}: {u}", c.fresh()));
    }
    let p = c.fresh();
    let region = format!(
        "({{\n^bb0({}):\n  {p} = \"stablehlo.compare\"({a}, {b}) \
         {{comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type {kind}>}} \
         : ({t}, {t}) -> tensor<i1>\n  \"stablehlo.return\"({p}) : (tensor<i1>) -> ()\n}})",
        params.join(", ")
    );
    let results: Vec<Ty> = operands.iter().map(|v| v.ty.clone()).collect();
    Ok(c.op_regions(
        "stablehlo.sort",
        &operands,
        &[region],
        &format!("dimension = {last} : i64, is_stable = true"),
        &results,
    ))
}
