//! Elementwise arithmetic, activations and their gradients, reductions,
//! softmax, bias addition, `AddN` and `Cast`.

use ndarray::{ArcArray, ArrayD, Axis, IxDyn, Zip};

use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::DType;

pub(crate) use super::num::{Num, Real};

/// NumPy broadcasting of two shapes.
pub(crate) fn broadcast_shape(op: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>, KernelError> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| if i + s.len() < rank { 1 } else { s[i + s.len() - rank] };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(KernelError::invalid(op, format!("shapes {a:?} and {b:?} do not broadcast"))),
        })
        .collect()
}

/// Applies `f` elementwise to `x` and `y` broadcast together.
pub(crate) fn broadcast_zip<A: Copy, B: Copy, C>(
    op: &str,
    x: &ArcArray<A, IxDyn>,
    y: &ArcArray<B, IxDyn>,
    f: impl Fn(A, B) -> C,
) -> Result<ArrayD<C>, KernelError> {
    if x.shape() == y.shape() {
        if let Some(out) = super::strided::zip_broadcast(x, y, x.shape(), &f) {
            return Ok(out);
        }
        return Ok(Zip::from(x).and(y).map_collect(|&a, &b| f(a, b)));
    }
    let joined = broadcast_shape(op, x.shape(), y.shape())?;
    // The result's element type is unknown here; 8 bytes bounds every numeric one.
    crate::exec::limits::checked_elements(op, DType::F64, &joined)?;
    // Standard-layout operands (nearly all): contiguous runs, no per-element index arithmetic.
    if let Some(out) = super::strided::zip_broadcast(x, y, &joined, &f) {
        return Ok(out);
    }
    let shape = IxDyn(&joined);
    let bad = || KernelError::invalid(op, format!("shapes {:?} and {:?} do not broadcast", x.shape(), y.shape()));
    let xv = x.broadcast(shape.clone()).ok_or_else(bad)?;
    let yv = y.broadcast(shape).ok_or_else(bad)?;
    Ok(Zip::from(&xv).and(&yv).map_collect(|&a, &b| f(a, b)))
}

/// Elementwise binary ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `DivNoNan(x, y) = x / y`, and 0 where `y` is 0 (even where `x` is not finite).
    DivNoNan,
    FloorDiv,
    /// `FloorMod(x, y) = x - floor(x / y) * y`: the remainder with the sign of `y`.
    FloorMod,
    Max,
    Min,
    Pow,
    SquaredDifference,
    /// `ReluGrad(dy, x) = dy * (x > 0)`.
    ReluGrad,
    /// `TanhGrad(y, dy) = dy * (1 - y²)`.
    TanhGrad,
    /// `SigmoidGrad(y, dy) = dy * y * (1 - y)`.
    SigmoidGrad,
    /// `RsqrtGrad(y, dy) = dy * -0.5 * y³`.
    RsqrtGrad,
}

/// An elementwise binary op on two tensors of one numeric dtype.
pub(crate) fn binary(op: &str, b: BinaryOp, x: &Tensor, y: &Tensor) -> Result<Tensor, KernelError> {
    if let Some(out) = super::complex::binary(op, b, x, y) {
        return out;
    }
    match (x, y) {
        (Tensor::F32(x), Tensor::F32(y)) => real_binary(op, b, x, y),
        (Tensor::F64(x), Tensor::F64(y)) => real_binary(op, b, x, y),
        (Tensor::I32(x), Tensor::I32(y)) => int_binary(op, b, x, y),
        (Tensor::I64(x), Tensor::I64(y)) => int_binary(op, b, x, y),
        (x, y) if x.dtype() != y.dtype() => {
            Err(KernelError::invalid(op, format!("inputs have different dtypes {} and {}", x.dtype(), y.dtype())))
        }
        (x, _) => Err(KernelError::dtype(op, x.dtype(), "numeric inputs expected")),
    }
}

fn real_binary<T: Real>(
    op: &str,
    b: BinaryOp,
    x: &ArcArray<T, IxDyn>,
    y: &ArcArray<T, IxDyn>,
) -> Result<Tensor, KernelError> {
    let two = T::one() + T::one();
    let half = T::one() / two;
    let out = match b {
        BinaryOp::Add => broadcast_zip(op, x, y, |a, b| a + b)?,
        BinaryOp::Sub => broadcast_zip(op, x, y, |a, b| a - b)?,
        BinaryOp::Mul => broadcast_zip(op, x, y, |a, b| a * b)?,
        BinaryOp::Div => broadcast_zip(op, x, y, |a, b| a / b)?,
        BinaryOp::DivNoNan => broadcast_zip(op, x, y, |a, b| if b == T::zero() { T::zero() } else { a / b })?,
        BinaryOp::FloorDiv => broadcast_zip(op, x, y, |a, b| (a / b).floor())?,
        // The truncated remainder (exact, unlike x - floor(x / y) * y), moved
        // to the divisor's sign as TensorFlow does: FloorMod(-1, inf) = inf.
        BinaryOp::FloorMod => broadcast_zip(op, x, y, |a, b| {
            let r = a % b;
            if r != T::zero() && ((b < T::zero()) != (r < T::zero())) {
                r + b
            } else {
                r
            }
        })?,
        // NaN propagates, as in TensorFlow.
        BinaryOp::Max => broadcast_zip(op, x, y, |a, b| if a.is_nan() || a > b { a } else { b })?,
        BinaryOp::Min => broadcast_zip(op, x, y, |a, b| if a.is_nan() || a < b { a } else { b })?,
        BinaryOp::Pow => broadcast_zip(op, x, y, |a, b| a.powf(b))?,
        BinaryOp::SquaredDifference => broadcast_zip(op, x, y, |a, b| (a - b) * (a - b))?,
        BinaryOp::ReluGrad => broadcast_zip(op, x, y, |dy, f| if f > T::zero() { dy } else { T::zero() })?,
        BinaryOp::TanhGrad => broadcast_zip(op, x, y, |y, dy| dy * (T::one() - y * y))?,
        BinaryOp::SigmoidGrad => broadcast_zip(op, x, y, |y, dy| dy * (y * (T::one() - y)))?,
        BinaryOp::RsqrtGrad => broadcast_zip(op, x, y, |y, dy| (y * y * y) * (-half) * dy)?,
    };
    Ok(Tensor::from_array(out))
}

fn int_binary<T: Num>(
    op: &str,
    b: BinaryOp,
    x: &ArcArray<T, IxDyn>,
    y: &ArcArray<T, IxDyn>,
) -> Result<Tensor, KernelError> {
    // An empty operand makes an empty result (a scalar's reduction indices, say): nothing divides.
    let empty = x.is_empty() || y.is_empty();
    if matches!(b, BinaryOp::Div | BinaryOp::FloorDiv | BinaryOp::FloorMod) && !empty && y.iter().any(|v| v.is_zero()) {
        return Err(KernelError::invalid(op, "integer division by zero"));
    }
    if b == BinaryOp::Pow && y.iter().any(|&v| v < T::zero()) {
        return Err(KernelError::invalid(op, "integers to negative integer powers are not allowed"));
    }
    let out = match b {
        BinaryOp::Add => broadcast_zip(op, x, y, T::add)?,
        BinaryOp::Sub => broadcast_zip(op, x, y, T::sub)?,
        BinaryOp::Mul => broadcast_zip(op, x, y, T::mul)?,
        BinaryOp::Div => broadcast_zip(op, x, y, T::div)?,
        BinaryOp::FloorDiv => broadcast_zip(op, x, y, T::floor_div)?,
        BinaryOp::FloorMod => broadcast_zip(op, x, y, |a, b| a.sub(a.floor_div(b).mul(b)))?,
        BinaryOp::Max => broadcast_zip(op, x, y, |a, b| if a > b { a } else { b })?,
        BinaryOp::Min => broadcast_zip(op, x, y, |a, b| if a < b { a } else { b })?,
        BinaryOp::Pow => broadcast_zip(op, x, y, |a, b| a.pow(b).unwrap_or_else(T::zero))?,
        BinaryOp::SquaredDifference => broadcast_zip(op, x, y, |a, b| a.sub(b).mul(a.sub(b)))?,
        BinaryOp::ReluGrad => broadcast_zip(op, x, y, |dy, f| if f > T::zero() { dy } else { T::zero() })?,
        BinaryOp::DivNoNan | BinaryOp::TanhGrad | BinaryOp::SigmoidGrad | BinaryOp::RsqrtGrad => {
            return Err(KernelError::dtype(op, T::DTYPE, "a floating-point dtype is required"))
        }
    };
    Ok(Tensor::from_array(out))
}

/// `Add`/`AddV2`, where TensorFlow's accumulators also add TensorArray
/// flows (lists here): two lists add as in [`add_n`], and a list plus a
/// float zero (an accumulator's start) is the list.
pub(crate) fn add(op: &str, a: &Tensor, b: &Tensor) -> Result<Tensor, KernelError> {
    use crate::ir::DType;
    let zero = |t: &Tensor| match t.dtype() {
        DType::F32 => t.to_vec::<f32>().is_some_and(|v| v.iter().all(|&x| x == 0.0)),
        DType::F64 => t.to_vec::<f64>().is_some_and(|v| v.iter().all(|&x| x == 0.0)),
        _ => false,
    };
    match (a.dtype() == DType::Variant, b.dtype() == DType::Variant) {
        (false, false) => binary(op, BinaryOp::Add, a, b),
        (true, true) => add_lists(op, a, b),
        (true, false) if zero(b) => Ok(a.clone()),
        (false, true) if zero(a) => Ok(b.clone()),
        _ => Err(KernelError::invalid(op, "a TensorList adds only to a TensorList or to a float zero")),
    }
}

/// The sum of two TensorLists of one length (gradients of a loop's
/// accumulators): element by element, an element set in only one list
/// taken as it is.
fn add_lists(op: &str, a: &Tensor, b: &Tensor) -> Result<Tensor, KernelError> {
    use crate::exec::variant::Variant;
    let (Some(Variant::List(x)), Some(Variant::List(y))) = (a.as_variant(), b.as_variant()) else {
        return Err(KernelError::invalid(op, "only TensorList variants add"));
    };
    if x.items.len() != y.items.len() || x.element_dtype != y.element_dtype {
        return Err(KernelError::invalid(
            op,
            format!(
                "lists of {} {} and {} {} elements do not add",
                x.items.len(),
                x.element_dtype,
                y.items.len(),
                y.element_dtype
            ),
        ));
    }
    let mut sum = x.clone();
    for (item, other) in sum.items.iter_mut().zip(&y.items) {
        *item = match (item.take(), other) {
            (Some(p), Some(q)) => Some(binary(op, BinaryOp::Add, &p, q)?),
            (p, q) => p.or_else(|| q.clone()),
        };
    }
    Ok(Tensor::Variant(std::sync::Arc::new(Variant::List(sum))))
}

/// Elementwise comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Comparison {
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    Equal,
    NotEqual,
}

/// An elementwise comparison of two tensors of one dtype, broadcast; a bool tensor.
pub(crate) fn compare(op: &str, c: Comparison, x: &Tensor, y: &Tensor) -> Result<Tensor, KernelError> {
    if let Some(out) = super::complex::compare(op, c, x, y) {
        return out;
    }
    fn run<T: PartialOrd + Copy>(
        op: &str,
        c: Comparison,
        x: &ArcArray<T, IxDyn>,
        y: &ArcArray<T, IxDyn>,
    ) -> Result<Tensor, KernelError> {
        let out = match c {
            Comparison::Less => broadcast_zip(op, x, y, |a, b| a < b)?,
            Comparison::LessEqual => broadcast_zip(op, x, y, |a, b| a <= b)?,
            Comparison::Greater => broadcast_zip(op, x, y, |a, b| a > b)?,
            Comparison::GreaterEqual => broadcast_zip(op, x, y, |a, b| a >= b)?,
            Comparison::Equal => broadcast_zip(op, x, y, |a, b| a == b)?,
            Comparison::NotEqual => broadcast_zip(op, x, y, |a, b| a != b)?,
        };
        Ok(Tensor::from_array(out))
    }
    match (x, y) {
        (Tensor::F32(x), Tensor::F32(y)) => run(op, c, x, y),
        (Tensor::F64(x), Tensor::F64(y)) => run(op, c, x, y),
        (Tensor::I32(x), Tensor::I32(y)) => run(op, c, x, y),
        (Tensor::I64(x), Tensor::I64(y)) => run(op, c, x, y),
        (Tensor::Bool(x), Tensor::Bool(y)) if matches!(c, Comparison::Equal | Comparison::NotEqual) => run(op, c, x, y),
        (x, y) if x.dtype() != y.dtype() => {
            Err(KernelError::invalid(op, format!("inputs have different dtypes {} and {}", x.dtype(), y.dtype())))
        }
        (x, _) => Err(KernelError::dtype(op, x.dtype(), "numeric inputs expected")),
    }
}

/// Elementwise unary ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnaryOp {
    Neg,
    Abs,
    Square,
    Relu,
    Tanh,
    Sigmoid,
    Exp,
    Log,
    Erfc,
    Rsqrt,
    Sqrt,
    Reciprocal,
}

/// An elementwise unary op.
pub(crate) fn unary(op: &str, u: UnaryOp, x: &Tensor) -> Result<Tensor, KernelError> {
    if let Some(out) = super::complex::unary(op, u, x) {
        return out;
    }
    match x {
        Tensor::F32(a) => Ok(Tensor::from_array(real_unary(u, a))),
        Tensor::F64(a) => Ok(Tensor::from_array(real_unary(u, a))),
        Tensor::I32(a) => int_unary(op, u, a),
        Tensor::I64(a) => int_unary(op, u, a),
        other => Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    }
}

fn real_unary<T: Real>(u: UnaryOp, a: &ArcArray<T, IxDyn>) -> ArrayD<T> {
    match u {
        UnaryOp::Neg => a.mapv(|v| -v),
        UnaryOp::Abs => a.mapv(|v| v.abs()),
        UnaryOp::Square => a.mapv(|v| v * v),
        // NaN stays NaN, as in TensorFlow.
        UnaryOp::Relu => a.mapv(|v| if v < T::zero() { T::zero() } else { v }),
        UnaryOp::Tanh => a.mapv(|v| v.tanh()),
        UnaryOp::Sigmoid => a.mapv(|v| T::one() / (T::one() + (-v).exp())),
        UnaryOp::Exp => a.mapv(|v| v.exp()),
        UnaryOp::Log => a.mapv(|v| v.ln()),
        UnaryOp::Erfc => a.mapv(|v| v.erfc()),
        UnaryOp::Rsqrt => a.mapv(|v| T::one() / v.sqrt()),
        UnaryOp::Sqrt => a.mapv(|v| v.sqrt()),
        UnaryOp::Reciprocal => a.mapv(|v| T::one() / v),
    }
}

fn int_unary<T: Num>(op: &str, u: UnaryOp, a: &ArcArray<T, IxDyn>) -> Result<Tensor, KernelError> {
    let out = match u {
        UnaryOp::Neg => a.mapv(T::neg),
        UnaryOp::Abs => a.mapv(T::abs),
        UnaryOp::Square => a.mapv(|v| v.mul(v)),
        UnaryOp::Relu => a.mapv(|v| if v > T::zero() { v } else { T::zero() }),
        _ => return Err(KernelError::dtype(op, T::DTYPE, "a floating-point dtype is required")),
    };
    Ok(Tensor::from_array(out))
}

/// Softmax over the last axis, with the maximum subtracted for stability.
pub(crate) fn softmax(op: &str, x: &Tensor) -> Result<Tensor, KernelError> {
    fn run<T: Real>(op: &str, a: &ArcArray<T, IxDyn>) -> Result<Tensor, KernelError> {
        if a.ndim() == 0 {
            return Err(KernelError::invalid(op, "logits must have rank >= 1"));
        }
        let mut out = a.to_owned();
        let last = Axis(a.ndim() - 1);
        for mut lane in out.lanes_mut(last) {
            let max = lane.iter().fold(T::neg_infinity(), |m, &v| if v > m { v } else { m });
            lane.mapv_inplace(|v| (v - max).exp());
            let sum = lane.iter().fold(T::zero(), |s, &v| s + v);
            lane.mapv_inplace(|v| v / sum);
        }
        Ok(Tensor::from_array(out))
    }
    match x {
        Tensor::F32(a) => run(op, a),
        Tensor::F64(a) => run(op, a),
        other => Err(KernelError::dtype(op, other.dtype(), "a floating-point dtype is required")),
    }
}

/// Sum or mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduce {
    Sum,
    Mean,
}

/// Normalises axes (negative counts from the end), checks them, removes duplicates.
pub(crate) fn normalize_axes(op: &str, axes: &[i64], rank: usize) -> Result<Vec<usize>, KernelError> {
    let mut out: Vec<usize> = axes
        .iter()
        .map(|&a| {
            let r = rank as i64;
            let n = if a < 0 { a + r } else { a };
            if (0..r).contains(&n) {
                Ok(n as usize)
            } else {
                Err(KernelError::invalid(op, format!("axis {a} is out of range for rank {rank}")))
            }
        })
        .collect::<Result<_, _>>()?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Sums `a` over `axes` (sorted, unique), in index order along each axis.
pub(crate) fn sum_axes<T: Num>(a: &ArcArray<T, IxDyn>, axes: &[usize], keep_dims: bool) -> ArrayD<T> {
    let source = a.as_standard_layout();
    let mut shape = a.shape().to_vec();
    let mut sums: Option<Vec<T>> = None;
    for &axis in axes.iter().rev() {
        // The last axis is reduced first; each pass sees a standard-layout [outer, n, inner].
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..].iter().product();
        let data = match &sums {
            Some(v) => v.as_slice(),
            None => source.as_slice().expect("standard layout"),
        };
        sums = Some(super::strided::sum_middle(data, (outer, shape[axis], inner), T::zero(), T::add));
        shape.remove(axis);
    }
    let mut out = match sums {
        Some(v) => ArrayD::from_shape_vec(IxDyn(&shape), v).expect("the shape holds the sums"),
        None => a.to_owned(),
    };
    if keep_dims {
        for &axis in axes {
            out.insert_axis_inplace(Axis(axis));
        }
    }
    out
}

/// `Sum` / `Mean` over the axes in `axes` (a scalar or vector, negative allowed).
pub(crate) fn reduce(
    op: &str,
    kind: Reduce,
    x: &Tensor,
    axes: &Tensor,
    keep_dims: bool,
) -> Result<Tensor, KernelError> {
    let axes = normalize_axes(op, &axes.to_i64_vec(op, "reduction axes")?, x.shape().len())?;
    if let Some(out) = super::complex::reduce(x, kind, &axes, keep_dims) {
        return Ok(out);
    }
    fn run<T: Num>(
        op: &str,
        kind: Reduce,
        a: &ArcArray<T, IxDyn>,
        axes: &[usize],
        keep: bool,
    ) -> Result<Tensor, KernelError> {
        let mut out = sum_axes(a, axes, keep);
        if kind == Reduce::Mean {
            let count: usize = axes.iter().map(|&i| a.shape()[i]).product();
            if count == 0 && !T::IS_FLOAT {
                return Err(KernelError::invalid(op, "integer mean over zero elements"));
            }
            let n = T::from_usize(count);
            out.mapv_inplace(|v| v.div(n));
        }
        Ok(Tensor::from_array(out))
    }
    match x {
        Tensor::F32(a) => run(op, kind, a, &axes, keep_dims),
        Tensor::F64(a) => run(op, kind, a, &axes, keep_dims),
        Tensor::I32(a) => run(op, kind, a, &axes, keep_dims),
        Tensor::I64(a) => run(op, kind, a, &axes, keep_dims),
        other => Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    }
}

/// `AddN`: the sum of same-shaped tensors, added in input order.
pub(crate) fn add_n(op: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let first = inputs.first().ok_or_else(|| KernelError::invalid(op, "needs at least one input"))?;
    if first.dtype() == crate::ir::DType::Variant {
        return inputs[1..].iter().try_fold(first.clone(), |acc, t| add_lists(op, &acc, t));
    }
    let mut acc = first.clone();
    for t in &inputs[1..] {
        if t.shape() != first.shape() {
            return Err(KernelError::invalid(
                op,
                format!("inputs must have one shape, got {:?} and {:?}", first.shape(), t.shape()),
            ));
        }
        acc = binary(op, BinaryOp::Add, &acc, t)?;
    }
    if inputs.len() == 1 {
        // Still check the dtype is numeric.
        binary(op, BinaryOp::Add, &acc, &shape_zero(op, &acc)?)?;
    }
    Ok(acc)
}

fn shape_zero(op: &str, t: &Tensor) -> Result<Tensor, KernelError> {
    match t {
        Tensor::F32(_) => Ok(Tensor::scalar(0.0f32)),
        Tensor::F64(_) => Ok(Tensor::scalar(0.0f64)),
        Tensor::I32(_) => Ok(Tensor::scalar(0i32)),
        Tensor::I64(_) => Ok(Tensor::scalar(0i64)),
        Tensor::C64(_) => Ok(Tensor::scalar(num_complex::Complex32::new(0.0, 0.0))),
        Tensor::C128(_) => Ok(Tensor::scalar(num_complex::Complex64::new(0.0, 0.0))),
        other => Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    }
}

/// Where the channel axis of `BiasAdd` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataFormat {
    /// `NHWC`: channels last.
    ChannelsLast,
    /// `NCHW`: channels at axis 1.
    ChannelsFirst,
}

fn channel_axis(op: &str, rank: usize, format: DataFormat) -> Result<usize, KernelError> {
    if rank < 2 {
        return Err(KernelError::invalid(op, format!("input must have rank >= 2, got {rank}")));
    }
    Ok(match format {
        DataFormat::ChannelsLast => rank - 1,
        DataFormat::ChannelsFirst => 1,
    })
}

/// `BiasAdd(value, bias)`: adds the 1-D bias along the channel axis.
pub(crate) fn bias_add(op: &str, value: &Tensor, bias: &Tensor, format: DataFormat) -> Result<Tensor, KernelError> {
    let rank = value.shape().len();
    let axis = channel_axis(op, rank, format)?;
    let channels = value.shape()[axis];
    if bias.shape() != [channels] {
        return Err(KernelError::invalid(
            op,
            format!("bias must have shape [{channels}] to match the channel axis, got {:?}", bias.shape()),
        ));
    }
    let mut target = vec![1i64; rank - axis];
    target[0] = channels as i64;
    let shaped = super::shape::reshape(op, bias, &Tensor::vector(target))?;
    binary(op, BinaryOp::Add, value, &shaped)
}

/// `BiasAddGrad(dy)`: sums `dy` over every axis but the channel axis.
pub(crate) fn bias_add_grad(op: &str, dy: &Tensor, format: DataFormat) -> Result<Tensor, KernelError> {
    let rank = dy.shape().len();
    let axis = channel_axis(op, rank, format)?;
    let axes: Vec<i64> = (0..rank as i64).filter(|&a| a != axis as i64).collect();
    reduce(op, Reduce::Sum, dy, &Tensor::vector(axes), false)
}

/// `Cast` to `to`: C-style conversion; bool is `x != 0`, true is 1.
pub(crate) fn cast(op: &str, x: &Tensor, to: DType) -> Result<Tensor, KernelError> {
    if x.dtype() == to {
        return Ok(x.clone());
    }
    fn from_num<S: Num>(op: &str, a: &ArcArray<S, IxDyn>, to: DType) -> Result<Tensor, KernelError> {
        Ok(match to {
            DType::F32 => Tensor::from_array(a.mapv(S::as_f32)),
            DType::F64 => Tensor::from_array(a.mapv(S::as_f64)),
            DType::I32 => Tensor::from_array(a.mapv(S::as_i32)),
            DType::I64 => Tensor::from_array(a.mapv(S::as_i64)),
            DType::Bool => Tensor::from_array(a.mapv(|v| !v.is_zero())),
            other => return Err(KernelError::dtype(op, other, "cannot cast to this dtype")),
        })
    }
    match x {
        Tensor::F32(a) => from_num(op, a, to),
        Tensor::F64(a) => from_num(op, a, to),
        Tensor::I32(a) => from_num(op, a, to),
        Tensor::I64(a) => from_num(op, a, to),
        Tensor::Bool(a) => from_num(op, &a.mapv(i32::from).into_shared(), to),
        other => Err(KernelError::dtype(op, other.dtype(), "cannot cast from this dtype")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_vec(shape, v.to_vec()).unwrap()
    }

    fn vals(t: &Tensor) -> Vec<f32> {
        t.to_vec::<f32>().unwrap()
    }

    #[test]
    fn add_broadcasts_row_and_column() {
        let col = f32s(&[2, 1], &[1.0, 2.0]);
        let row = f32s(&[3], &[10.0, 20.0, 30.0]);
        let out = binary("Add", BinaryOp::Add, &col, &row).unwrap();
        assert_eq!(out.shape(), &[2, 3]);
        assert_eq!(vals(&out), vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
    }

    #[test]
    fn incompatible_shapes_are_an_error() {
        let err = binary("Mul", BinaryOp::Mul, &f32s(&[2], &[1.0, 2.0]), &f32s(&[3], &[1.0; 3])).unwrap_err();
        assert!(err.to_string().contains("Mul"));
    }

    #[test]
    fn mixed_dtypes_are_an_error() {
        assert!(binary("Add", BinaryOp::Add, &Tensor::scalar(1.0f32), &Tensor::scalar(1i32)).is_err());
    }

    #[test]
    fn integer_floor_div_and_division_by_zero() {
        let x = Tensor::vector(vec![7i32, -7, 7, -7]);
        let y = Tensor::vector(vec![2i32, 2, -2, -2]);
        let out = binary("FloorDiv", BinaryOp::FloorDiv, &x, &y).unwrap();
        assert_eq!(out.to_vec::<i32>().unwrap(), vec![3, -4, -4, 3]);
        let zero = Tensor::vector(vec![1i32, 0, 1, 1]);
        assert!(binary("FloorDiv", BinaryOp::FloorDiv, &x, &zero).is_err());
    }

    #[test]
    fn integer_min_by_minus_one_wraps() {
        // TensorFlow wraps `MIN / -1` to MIN, and the remainder is 0.
        for b in [BinaryOp::Div, BinaryOp::FloorDiv, BinaryOp::FloorMod] {
            let x32 = Tensor::vector(vec![i32::MIN, i32::MIN]);
            let out = binary("op", b, &x32, &Tensor::scalar(-1i32)).unwrap();
            let want = if b == BinaryOp::FloorMod { 0 } else { i32::MIN };
            assert_eq!(out.to_vec::<i32>().unwrap(), vec![want, want], "{b:?}");
            let x64 = Tensor::vector(vec![i64::MIN]);
            let out = binary("op", b, &x64, &Tensor::scalar(-1i64)).unwrap();
            let want = if b == BinaryOp::FloorMod { 0 } else { i64::MIN };
            assert_eq!(out.to_vec::<i64>().unwrap(), vec![want], "{b:?}");
        }
    }

    #[test]
    fn floor_mod_takes_the_sign_of_the_divisor() {
        let x = Tensor::vector(vec![7i32, -7, 7, -7]);
        let y = Tensor::vector(vec![3i32, 3, -3, -3]);
        let out = binary("FloorMod", BinaryOp::FloorMod, &x, &y).unwrap();
        assert_eq!(out.to_vec::<i32>().unwrap(), vec![1, 2, -2, -1]);
        let f = binary("FloorMod", BinaryOp::FloorMod, &f32s(&[2], &[-1.0, 5.5]), &Tensor::scalar(2.0f32)).unwrap();
        assert_eq!(vals(&f), vec![1.0, 1.5]);
        let f = binary(
            "FloorMod",
            BinaryOp::FloorMod,
            &f32s(&[3], &[-1.0, 1.0, 1e30]),
            &f32s(&[3], &[f32::INFINITY, f32::INFINITY, 3.0]),
        )
        .unwrap();
        assert_eq!(vals(&f), vec![f32::INFINITY, 1.0, 1e30f32 % 3.0], "as TensorFlow: fmod, then the divisor's sign");
        assert!(binary("FloorMod", BinaryOp::FloorMod, &x, &Tensor::scalar(0i32)).is_err());
    }

    #[test]
    fn comparisons_broadcast_to_bool() {
        let x = f32s(&[3], &[1.0, 2.0, 3.0]);
        let two = Tensor::scalar(2.0f32);
        let go = |c| compare("cmp", c, &x, &two).unwrap().to_vec::<bool>().unwrap();
        assert_eq!(go(Comparison::Less), vec![true, false, false]);
        assert_eq!(go(Comparison::LessEqual), vec![true, true, false]);
        assert_eq!(go(Comparison::Greater), vec![false, false, true]);
        assert_eq!(go(Comparison::GreaterEqual), vec![false, true, true]);
        assert_eq!(go(Comparison::Equal), vec![false, true, false]);
        assert_eq!(go(Comparison::NotEqual), vec![true, false, true]);
        assert!(compare("Less", Comparison::Less, &x, &Tensor::scalar(2i32)).is_err());
        let b = Tensor::vector(vec![true, false]);
        assert!(compare("Less", Comparison::Less, &b, &b).is_err());
    }

    #[test]
    fn float_floor_div() {
        let out = binary("FloorDiv", BinaryOp::FloorDiv, &f32s(&[2], &[7.0, -7.0]), &Tensor::scalar(2.0f32)).unwrap();
        assert_eq!(vals(&out), vec![3.0, -4.0]);
    }

    #[test]
    fn arithmetic_values() {
        let x = f32s(&[3], &[1.0, -2.0, 3.0]);
        let y = f32s(&[3], &[4.0, 5.0, -6.0]);
        let go = |b| vals(&binary("op", b, &x, &y).unwrap());
        assert_eq!(go(BinaryOp::Sub), vec![-3.0, -7.0, 9.0]);
        assert_eq!(go(BinaryOp::Mul), vec![4.0, -10.0, -18.0]);
        assert_eq!(go(BinaryOp::Div), vec![0.25, -0.4, -0.5]);
        assert_eq!(go(BinaryOp::Max), vec![4.0, 5.0, 3.0]);
        assert_eq!(go(BinaryOp::Min), vec![1.0, -2.0, -6.0]);
        assert_eq!(go(BinaryOp::SquaredDifference), vec![9.0, 49.0, 81.0]);
        let p = binary("Pow", BinaryOp::Pow, &f32s(&[2], &[2.0, 9.0]), &f32s(&[2], &[3.0, 0.5])).unwrap();
        assert_eq!(vals(&p), vec![8.0, 3.0]);
    }

    #[test]
    fn gradient_ops() {
        // ReluGrad(dy, x): dy where x > 0.
        let g = binary("ReluGrad", BinaryOp::ReluGrad, &f32s(&[3], &[5.0, 6.0, 7.0]), &f32s(&[3], &[1.0, 0.0, -1.0]));
        assert_eq!(vals(&g.unwrap()), vec![5.0, 0.0, 0.0]);
        // TanhGrad(y, dy) = dy (1 - y^2): y = 0.5, dy = 2 -> 1.5.
        let t = binary("TanhGrad", BinaryOp::TanhGrad, &Tensor::scalar(0.5f32), &Tensor::scalar(2.0f32)).unwrap();
        assert_eq!(vals(&t), vec![1.5]);
        // SigmoidGrad(y, dy) = dy y (1 - y): y = 0.25, dy = 4 -> 0.75.
        let s =
            binary("SigmoidGrad", BinaryOp::SigmoidGrad, &Tensor::scalar(0.25f32), &Tensor::scalar(4.0f32)).unwrap();
        assert_eq!(vals(&s), vec![0.75]);
        // RsqrtGrad(y, dy) = -0.5 dy y^3: y = 2, dy = 3 -> -12.
        let r = binary("RsqrtGrad", BinaryOp::RsqrtGrad, &Tensor::scalar(2.0f32), &Tensor::scalar(3.0f32)).unwrap();
        assert_eq!(vals(&r), vec![-12.0]);
        assert!(binary("TanhGrad", BinaryOp::TanhGrad, &Tensor::scalar(1i32), &Tensor::scalar(1i32)).is_err());
    }

    #[test]
    fn unary_values() {
        let x = f32s(&[3], &[-1.0, 0.0, 4.0]);
        let go = |u| vals(&unary("op", u, &x).unwrap());
        assert_eq!(go(UnaryOp::Neg), vec![1.0, -0.0, -4.0]);
        assert_eq!(go(UnaryOp::Square), vec![1.0, 0.0, 16.0]);
        assert_eq!(go(UnaryOp::Relu), vec![0.0, 0.0, 4.0]);
        let nan = unary("Relu", UnaryOp::Relu, &f32s(&[1], &[f32::NAN])).unwrap();
        assert!(vals(&nan)[0].is_nan(), "Relu(NaN) is NaN, as in TensorFlow");
        assert_eq!(go(UnaryOp::Abs), vec![1.0, 0.0, 4.0]);
        let y = f32s(&[2], &[4.0, 0.25]);
        assert_eq!(vals(&unary("Sqrt", UnaryOp::Sqrt, &y).unwrap()), vec![2.0, 0.5]);
        assert_eq!(vals(&unary("Rsqrt", UnaryOp::Rsqrt, &y).unwrap()), vec![0.5, 2.0]);
        assert_eq!(vals(&unary("Reciprocal", UnaryOp::Reciprocal, &y).unwrap()), vec![0.25, 4.0]);
        let e = f64::from(vals(&unary("Exp", UnaryOp::Exp, &Tensor::scalar(1.0f32)).unwrap())[0]);
        assert!((e - std::f64::consts::E).abs() < 1e-6);
        let l = vals(&unary("Log", UnaryOp::Log, &Tensor::scalar(std::f32::consts::E)).unwrap())[0];
        assert!((l - 1.0).abs() < 1e-6);
        let t = vals(&unary("Tanh", UnaryOp::Tanh, &f32s(&[2], &[0.0, 0.5])).unwrap());
        assert_eq!(t[0], 0.0);
        assert!((t[1] - 0.462_117_16).abs() < 1e-6);
        let s = vals(&unary("Sigmoid", UnaryOp::Sigmoid, &f32s(&[2], &[0.0, 2.0])).unwrap());
        assert_eq!(s[0], 0.5);
        assert!((s[1] - 0.880_797_1).abs() < 1e-6);
        // erfc(0) = 1, erfc(1) = 0.157299207...
        let c = vals(&unary("Erfc", UnaryOp::Erfc, &f32s(&[2], &[0.0, 1.0])).unwrap());
        assert_eq!(c[0], 1.0);
        assert!((c[1] - 0.157_299_2).abs() < 1e-6);
        assert!(unary("Tanh", UnaryOp::Tanh, &Tensor::scalar(1i32)).is_err());
        assert_eq!(unary("Neg", UnaryOp::Neg, &Tensor::scalar(3i64)).unwrap(), Tensor::scalar(-3i64));
    }

    #[test]
    fn softmax_rows_sum_to_one() {
        let x = f32s(&[2, 2], &[0.0, 0.0, 0.0, 1000.0]);
        let out = vals(&softmax("Softmax", &x).unwrap());
        assert_eq!(out, vec![0.5, 0.5, 0.0, 1.0]);
        let y = vals(&softmax("Softmax", &f32s(&[2], &[1.0, 2.0])).unwrap());
        // e / (e + e^2) = 1 / (1 + e)
        assert!((y[0] - 1.0 / (1.0 + std::f32::consts::E)).abs() < 1e-6);
    }

    #[test]
    fn sum_and_mean_with_axes() {
        let x = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let s = reduce("Sum", Reduce::Sum, &x, &Tensor::scalar(0i32), false).unwrap();
        assert_eq!(s.shape(), &[3]);
        assert_eq!(vals(&s), vec![5.0, 7.0, 9.0]);
        let m = reduce("Mean", Reduce::Mean, &x, &Tensor::vector(vec![-1i64]), true).unwrap();
        assert_eq!(m.shape(), &[2, 1]);
        assert_eq!(vals(&m), vec![2.0, 5.0]);
        let all = reduce("Sum", Reduce::Sum, &x, &Tensor::vector(vec![0i32, 1]), false).unwrap();
        assert_eq!(all.shape(), &[] as &[usize]);
        assert_eq!(vals(&all), vec![21.0]);
        let none = reduce("Sum", Reduce::Sum, &x, &Tensor::vector(Vec::<i32>::new()), false).unwrap();
        assert_eq!(none, x);
        assert!(reduce("Sum", Reduce::Sum, &x, &Tensor::scalar(2i32), false).is_err());
        let im = reduce("Mean", Reduce::Mean, &Tensor::vector(vec![1i32, 2, 4]), &Tensor::scalar(0i32), false).unwrap();
        assert_eq!(im, Tensor::scalar(2i32));
    }

    #[test]
    fn add_n_adds_in_order() {
        let a = f32s(&[2], &[1.0, 2.0]);
        let b = f32s(&[2], &[10.0, 20.0]);
        let out = add_n("AddN", &[a.clone(), b.clone(), a.clone()]).unwrap();
        assert_eq!(vals(&out), vec![12.0, 24.0]);
        assert!(add_n("AddN", &[a, f32s(&[1], &[1.0])]).is_err());
    }

    #[test]
    fn bias_add_and_grad() {
        let x = f32s(&[2, 3], &[0.0; 6]);
        let b = f32s(&[3], &[1.0, 2.0, 3.0]);
        let out = bias_add("BiasAdd", &x, &b, DataFormat::ChannelsLast).unwrap();
        assert_eq!(vals(&out), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let nchw = f32s(&[1, 2, 2], &[0.0; 4]);
        let out = bias_add("BiasAdd", &nchw, &f32s(&[2], &[1.0, 2.0]), DataFormat::ChannelsFirst).unwrap();
        assert_eq!(vals(&out), vec![1.0, 1.0, 2.0, 2.0]);
        let dy = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(vals(&bias_add_grad("BiasAddGrad", &dy, DataFormat::ChannelsLast).unwrap()), vec![5.0, 7.0, 9.0]);
        // NCHW: [1, 2, 2] has channels at axis 1: [1 + 2, 3 + 4].
        let dy3 = f32s(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(vals(&bias_add_grad("BiasAddGrad", &dy3, DataFormat::ChannelsFirst).unwrap()), vec![3.0, 7.0]);
        assert!(bias_add("BiasAdd", &x, &f32s(&[2], &[1.0, 2.0]), DataFormat::ChannelsLast).is_err());
    }

    #[test]
    fn cast_between_dtypes() {
        let x = f32s(&[3], &[1.7, -1.7, 0.0]);
        assert_eq!(cast("Cast", &x, DType::I32).unwrap().to_vec::<i32>().unwrap(), vec![1, -1, 0]);
        assert_eq!(cast("Cast", &x, DType::Bool).unwrap().to_vec::<bool>().unwrap(), vec![true, true, false]);
        let b = Tensor::vector(vec![true, false]);
        assert_eq!(cast("Cast", &b, DType::F64).unwrap().to_vec::<f64>().unwrap(), vec![1.0, 0.0]);
        assert_eq!(cast("Cast", &Tensor::scalar(5i64), DType::F32).unwrap(), Tensor::scalar(5.0f32));
    }
}
