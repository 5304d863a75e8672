//! Kernels: the pure ops, one function call each.
//!
//! [`run_kernel`] computes an op's outputs from its attributes and input
//! tensors. Ops with state or communication (variables, `_Send`/`_Recv`,
//! collectives, `ReplicaId`, fed `Placeholder`s) run in the mesh
//! ([`crate::exec::Mesh`]); called here they fail with
//! [`KernelError::NeedsDevice`]. [`has_kernel`] knows both sets, and
//! [`missing_kernels`] lists a module's op types that have neither.
//!
//! Elementwise ops broadcast as NumPy does. Integer arithmetic wraps;
//! integer division by zero is an error. Floating-point results depend
//! only on the inputs: every reduction runs in a fixed order. Kernels of
//! the training-step families (`families` dispatches them) live one file
//! per family; bf16/f16/i8/u8 inputs are widened for them (`dtypes`).
//! [`kernel_problems`] checks a whole module before a run: every node
//! needs a kernel that takes its dtypes.

pub(crate) mod control_flow;
/// The TensorList and Optional kernels (variant values), sorted.
pub use control_flow::VARIANT_OPS;
/// The TensorArray kernels (lists carried by the flow), sorted.
pub use tensor_array::OPS as TENSOR_ARRAY_OPS;
mod bitwise;
pub(crate) mod complex;
mod conv;
mod conv3d;
mod conv_gemm;
mod conv_grouped;
pub(crate) mod data_ops;
pub(crate) mod denormals;
pub(crate) mod dtypes;
mod dynamic_shape;
mod elementwise;
mod families;
mod fft;
pub(crate) mod gather;
mod host_ops;
mod igamma;
pub(crate) mod image;
mod index;
mod layout;
mod linalg;
mod linalg_diag;
mod linalg_factor;
mod linalg_solve;
mod list_concat;
mod math;
mod nchw;
mod nn;
mod norm;
mod num;
mod op_lists;
pub(crate) mod optimizers;
mod prand;
mod problems;
mod ptn;
mod quant;
pub mod random;
pub(crate) mod random_state;
mod reduce;
pub(crate) mod segment;
mod shape;
pub(crate) mod spatial;
mod special;
mod special_fns;
mod spmd;
pub(crate) mod stack;
pub(crate) mod stateful_random;
mod strided;
mod strings;
pub(crate) mod tensor_array;
mod uniform_quant;
mod xla_ext;
pub(crate) mod xla_fn;
mod xla_misc;
mod xla_ops;

use super::error::KernelError;
use super::tensor::Tensor;
use crate::ir::{AttrMap, DType};

pub(crate) use math::Num;
use op_lists::FLOAT_ONLY;
pub use op_lists::{DEVICE_OPS, PURE_OPS};
pub use problems::{check_kernels, kernel_problems, missing_kernels};
pub(crate) use shape::shape_of;
pub(crate) use uniform_quant::integer_range;

/// True when the executor can run op type `op` (as a pure kernel or in the mesh).
pub fn has_kernel(op: &str) -> bool {
    PURE_OPS.contains(&op) || DEVICE_OPS.contains(&op) || control_flow::has_kernel(op)
}

/// Runs the pure kernel of `op` on `inputs` (data inputs, in slot order).
///
/// Returns one tensor per output of the op. A panic inside a kernel (a bug)
/// is caught and returned as [`KernelError::Panic`]. Denormal floats
/// flush to zero while it runs, as in TensorFlow's CPU kernels.
pub fn run_kernel(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let _flush = denormals::FlushDenormals::new();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // TensorLists hold their elements as they are, narrow dtypes included; calls need the mesh.
        if control_flow::has_kernel(op) {
            return control_flow::dispatch(op, attrs, inputs)
                .unwrap_or_else(|| Err(KernelError::NeedsDevice { op: op.to_string() }));
        }
        // The complex ops and FFTs take f32/f64 parts only: no widening of 16-bit floats; the
        // quantized-integer ops read their 8-bit values' own dtype; a stochastic cast draws as its
        // input's dtype does, and so do the parameterized truncated normals.
        if complex::OPS.contains(&op)
            || fft::OPS.contains(&op)
            || uniform_quant::OPS.contains(&op)
            || prand::OPS.contains(&op)
            || ptn::OPS.contains(&op)
        {
            return dispatch(op, attrs, inputs);
        }
        match dtypes::widen(op, inputs)? {
            // bf16 / f16 / i8 / u8 inputs: computed in f32 / i32, rounded back.
            Some((wide, how)) => dtypes::narrow(op, attrs, &how, dispatch(op, attrs, &wide)?),
            None => dispatch(op, attrs, inputs),
        }
    }))
    .unwrap_or_else(|payload| Err(KernelError::Panic { op: op.to_string(), message: panic_message(payload.as_ref()) }))
}

/// Runs kernel `op` for its values only: an op whose kernel writes
/// somewhere (`Print`, `PrintV2`) or stops the run (`Assert`) gives its
/// pass-through value, or nothing, and writes nothing. Compilation (the
/// StableHLO trace, `lower`) uses this, so that lowering has no side effects.
pub fn run_kernel_without_effects(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    match op {
        "Print" => host_ops::pass_through(op, inputs).map(|t| vec![t]),
        "PrintV2" | "Assert" => Ok(Vec::new()),
        _ => run_kernel(op, attrs, inputs),
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

fn one(t: Tensor) -> Result<Vec<Tensor>, KernelError> {
    Ok(vec![t])
}

fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    use math::{BinaryOp as B, Comparison as C, UnaryOp as U};
    match op {
        "Const" => one(constant(attrs)?),
        "Identity" | "StopGradient" | "Snapshot" | "PlaceholderWithDefault" => one(arg(op, inputs, 0)?.clone()),
        "IdentityN" => Ok(inputs.to_vec()),
        "NoOp" | "TPUReplicateMetadata" => Ok(Vec::new()),
        "TPUCompilationResult" => one(Tensor::scalar(Vec::<u8>::new())),
        // Outside a mesh there is one replica: pass operand 0 (the mesh picks the graph's replica).
        "TPUReplicatedInput" => one(arg(op, inputs, 0)?.clone()),
        "TPUReplicatedOutput" => {
            let n = attr_int(attrs, "num_replicas", 1);
            let n = usize::try_from(n).map_err(|_| KernelError::invalid(op, format!("num_replicas is {n}")))?;
            Ok(vec![arg(op, inputs, 0)?.clone(); n])
        }
        "CrossReplicaSum" | "AllGather" => cross_replica_sum(op, inputs),

        "Add" | "AddV2" => one(math::add(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "Sub" => one(math::binary(op, B::Sub, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "Mul" => one(math::binary(op, B::Mul, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "RealDiv" | "Div" => one(math::binary(op, B::Div, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "DivNoNan" => one(math::binary(op, B::DivNoNan, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "FloorDiv" => one(math::binary(op, B::FloorDiv, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "Maximum" => one(math::binary(op, B::Max, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "Minimum" => one(math::binary(op, B::Min, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "FloorMod" => one(math::binary(op, B::FloorMod, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "Pow" => one(math::binary(op, B::Pow, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "SquaredDifference" => one(math::binary(op, B::SquaredDifference, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        // Gradient ops: ReluGrad(dy, x); TanhGrad / SigmoidGrad / RsqrtGrad(y, dy).
        "ReluGrad" => one(math::binary(op, B::ReluGrad, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "TanhGrad" => one(math::binary(op, B::TanhGrad, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "SigmoidGrad" => one(math::binary(op, B::SigmoidGrad, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "RsqrtGrad" => one(math::binary(op, B::RsqrtGrad, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),

        "Less" => one(math::compare(op, C::Less, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "LessEqual" => one(math::compare(op, C::LessEqual, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "Greater" => one(math::compare(op, C::Greater, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "GreaterEqual" => one(math::compare(op, C::GreaterEqual, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "Equal" => one(math::compare(op, C::Equal, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "NotEqual" => one(math::compare(op, C::NotEqual, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),

        "Neg" => one(math::unary(op, U::Neg, arg(op, inputs, 0)?)?),
        "Abs" => one(math::unary(op, U::Abs, arg(op, inputs, 0)?)?),
        "Square" => one(math::unary(op, U::Square, arg(op, inputs, 0)?)?),
        "Relu" => one(math::unary(op, U::Relu, arg(op, inputs, 0)?)?),
        "Tanh" => one(math::unary(op, U::Tanh, arg(op, inputs, 0)?)?),
        "Sigmoid" => one(math::unary(op, U::Sigmoid, arg(op, inputs, 0)?)?),
        "Exp" => one(math::unary(op, U::Exp, arg(op, inputs, 0)?)?),
        "Log" => one(math::unary(op, U::Log, arg(op, inputs, 0)?)?),
        "Erfc" => one(math::unary(op, U::Erfc, arg(op, inputs, 0)?)?),
        "Rsqrt" => one(math::unary(op, U::Rsqrt, arg(op, inputs, 0)?)?),
        "Sqrt" => one(math::unary(op, U::Sqrt, arg(op, inputs, 0)?)?),
        "Reciprocal" => one(math::unary(op, U::Reciprocal, arg(op, inputs, 0)?)?),
        "Softmax" => one(math::softmax(op, arg(op, inputs, 0)?)?),

        "Sum" | "Mean" => {
            let keep_dims = attr_bool(attrs, "keep_dims", false);
            let kind = if op == "Sum" { math::Reduce::Sum } else { math::Reduce::Mean };
            one(math::reduce(op, kind, arg(op, inputs, 0)?, arg(op, inputs, 1)?, keep_dims)?)
        }
        "AddN" => one(math::add_n(op, inputs)?),
        "BiasAdd" => one(math::bias_add(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?, data_format(attrs))?),
        "BiasAddGrad" => one(math::bias_add_grad(op, arg(op, inputs, 0)?, data_format(attrs))?),
        "Cast" => {
            let to = attrs
                .get("DstT")
                .and_then(|v| v.as_type())
                .ok_or_else(|| KernelError::invalid(op, "missing dtype attribute `DstT`"))?;
            one(dtypes::cast(op, arg(op, inputs, 0)?, to)?)
        }

        "MatMul" => one(linalg::matmul(
            op,
            arg(op, inputs, 0)?,
            arg(op, inputs, 1)?,
            attr_bool(attrs, "transpose_a", false),
            attr_bool(attrs, "transpose_b", false),
        )?),
        "BatchMatMul" | "BatchMatMulV2" => one(linalg::batch_matmul(
            op,
            arg(op, inputs, 0)?,
            arg(op, inputs, 1)?,
            attr_bool(attrs, "adj_x", false),
            attr_bool(attrs, "adj_y", false),
        )?),
        "Einsum" => {
            let equation = attrs
                .get_str("equation")
                .ok_or_else(|| KernelError::invalid(op, "missing string attribute `equation`"))?;
            one(linalg::einsum(op, equation, inputs)?)
        }

        "Reshape" => one(shape::reshape(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "Transpose" => one(shape::transpose(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "InvertPermutation" => one(shape::invert_permutation(op, arg(op, inputs, 0)?)?),
        "Tile" => one(shape::tile(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "Fill" => one(shape::fill(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "FakeParam" => one(fake_param(op, attrs)?),
        "ReverseV2" => one(shape::reverse(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "InTopKV2" => one(reduce::in_top_k(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?, arg(op, inputs, 2)?)?),
        "Shape" => {
            let out = attrs.get("out_type").and_then(|v| v.as_type()).unwrap_or(DType::I32);
            one(shape::shape_of(op, arg(op, inputs, 0)?, out)?)
        }
        "Size" | "Rank" => {
            let out = attrs.get("out_type").and_then(|v| v.as_type()).unwrap_or(DType::I32);
            one(shape::size_or_rank(op, arg(op, inputs, 0)?, op == "Rank", out)?)
        }
        "Range" => one(shape::range(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?, arg(op, inputs, 2)?)?),
        "Pack" => one(shape::pack(op, inputs, attr_int(attrs, "axis", 0))?),
        "DynamicStitch" => one(shape::dynamic_stitch(op, inputs)?),
        "SelectV2" => one(shape::select(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?, arg(op, inputs, 2)?)?),
        "BroadcastTo" => one(shape::broadcast_to(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?)?),
        "BroadcastGradientArgs" => shape::broadcast_gradient_args(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?),
        "ZerosLike" => one(shape::filled_like(op, arg(op, inputs, 0)?, 0)?),
        "OnesLike" => one(shape::filled_like(op, arg(op, inputs, 0)?, 1)?),

        _ if DEVICE_OPS.contains(&op) => Err(KernelError::NeedsDevice { op: op.to_string() }),
        _ => families::dispatch(op, attrs, inputs)
            .or_else(|| linalg_diag::dispatch(op, attrs, inputs))
            .or_else(|| linalg_factor::dispatch(op, attrs, inputs))
            .or_else(|| linalg_solve::dispatch(op, attrs, inputs))
            .or_else(|| random::dispatch(op, attrs, inputs))
            .or_else(|| prand::dispatch(op, attrs, inputs))
            .or_else(|| ptn::dispatch(op, attrs, inputs))
            .or_else(|| quant::dispatch(op, attrs, inputs))
            .or_else(|| uniform_quant::dispatch(op, attrs, inputs))
            .or_else(|| data_ops::dispatch(op, attrs, inputs))
            .or_else(|| dynamic_shape::dispatch(op, attrs, inputs))
            .or_else(|| special::dispatch(op, attrs, inputs))
            .or_else(|| igamma::dispatch(op, inputs))
            .or_else(|| bitwise::dispatch(op, attrs, inputs))
            .or_else(|| host_ops::dispatch(op, attrs, inputs))
            .or_else(|| spatial::dispatch(op, attrs, inputs))
            .or_else(|| image::dispatch(op, attrs, inputs))
            .or_else(|| complex::dispatch(op, attrs, inputs))
            .or_else(|| fft::dispatch(op, attrs, inputs))
            .or_else(|| spmd::dispatch(op, attrs, inputs))
            .or_else(|| xla_ops::dispatch(op, attrs, inputs))
            .or_else(|| xla_fn::dispatch(op, inputs))
            .or_else(|| xla_ext::dispatch(op, attrs, inputs))
            .or_else(|| xla_misc::dispatch(op, attrs, inputs))
            .unwrap_or_else(|| Err(KernelError::NoKernel { op: op.to_string() })),
    }
}

/// Input `i`, or an error naming the op.
pub(crate) fn arg<'a>(op: &str, inputs: &'a [Tensor], i: usize) -> Result<&'a Tensor, KernelError> {
    inputs
        .get(i)
        .ok_or_else(|| KernelError::invalid(op, format!("expected at least {} inputs, got {}", i + 1, inputs.len())))
}

fn attr_bool(attrs: &AttrMap, key: &str, default: bool) -> bool {
    attrs.get_bool(key).unwrap_or(default)
}

fn attr_int(attrs: &AttrMap, key: &str, default: i64) -> i64 {
    attrs.get_int(key).unwrap_or(default)
}

fn data_format(attrs: &AttrMap) -> math::DataFormat {
    match attrs.get_str("data_format") {
        Some("NCHW") | Some("NCW") | Some("NCDHW") => math::DataFormat::ChannelsFirst,
        _ => math::DataFormat::ChannelsLast,
    }
}

fn constant(attrs: &AttrMap) -> Result<Tensor, KernelError> {
    let lit = attrs
        .get("value")
        .and_then(|v| v.as_tensor())
        .ok_or_else(|| KernelError::invalid("Const", "missing tensor attribute `value`"))?;
    if let Some(dtype) = attrs.get("dtype").and_then(|v| v.as_type()) {
        if dtype != lit.dtype {
            return Err(KernelError::invalid(
                "Const",
                format!("dtype attribute is {dtype} but the value is {}", lit.dtype),
            ));
        }
    }
    Tensor::from_literal(lit)
}

/// `FakeParam`: zeros of its `dtype` and `shape` (unknown dimensions as 0). TensorFlow's cond and
/// while gradients put it where a branch must output a value that only the other branch makes;
/// the gradient never reads it, and tf2xla gives zeros as well.
fn fake_param(op: &str, attrs: &AttrMap) -> Result<Tensor, KernelError> {
    let dtype =
        attrs.get("dtype").and_then(|v| v.as_type()).ok_or_else(|| KernelError::invalid(op, "missing `dtype`"))?;
    let dims = attrs
        .get("shape")
        .and_then(|v| v.as_shape())
        .and_then(|s| s.dims.clone())
        .ok_or_else(|| KernelError::invalid(op, "`shape` must have a known rank"))?;
    let dims: Vec<i32> = dims.iter().map(|&d| d.max(0) as i32).collect();
    let zero = match dtype {
        DType::F32 => Tensor::scalar(0f32),
        DType::F64 => Tensor::scalar(0f64),
        DType::I32 => Tensor::scalar(0i32),
        DType::I64 => Tensor::scalar(0i64),
        DType::Bool => Tensor::scalar(false),
        DType::BF16 => Tensor::scalar(half::bf16::ZERO),
        DType::F16 => Tensor::scalar(half::f16::ZERO),
        DType::C64 => Tensor::scalar(num_complex::Complex32::new(0.0, 0.0)),
        DType::C128 => Tensor::scalar(num_complex::Complex64::new(0.0, 0.0)),
        other => return Err(KernelError::dtype(op, other, "a numeric or bool dtype is required")),
    };
    shape::fill(op, &Tensor::vector(dims), &zero)
}

/// `CrossReplicaSum` or `AllGather` met outside a lowered program:
/// identity when every group of `group_assignment` has one member, else an
/// error (the lowering replaces it by a `CollectiveAllReduce` or
/// `CollectiveAllGather`).
fn cross_replica_sum(op: &str, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let x = arg(op, inputs, 0)?;
    let group_size = match inputs.get(1) {
        None => 1,
        Some(groups) => match groups.shape() {
            [_, size] => *size,
            [] | [_] => groups.len(),
            other => {
                return Err(KernelError::invalid(op, format!("group_assignment must be 2-D, got shape {other:?}")))
            }
        },
    };
    if group_size == 1 {
        Ok(vec![x.clone()])
    } else {
        Err(KernelError::invalid(
            op,
            format!("groups of {group_size} replicas need a lowered program (a collective); run the lowering first"),
        ))
    }
}

#[cfg(test)]
mod tests;
