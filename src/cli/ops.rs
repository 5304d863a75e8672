//! `tpu-rewrite ops`: the supported ops, their dtypes and backends.
//!
//! Nothing here is a hand-kept list. The ops are the executor's kernel
//! tables ([`crate::exec::kernels::PURE_OPS`],
//! [`crate::exec::kernels::DEVICE_OPS`] and the TensorList/Optional
//! kernels) joined with the IR op registry
//! ([`crate::ir::ops`]) for TPU placement. The dtypes of a pure kernel are
//! found by running it: on small vectors and matrices of each dtype (every input of the
//! dtype, or the first of the dtype and the others `i32`, as shape, axis
//! and index operands are), with the dtype attributes (`T`, `dtype`,
//! `DstT`) set to it. A dtype is listed when some probe succeeds. Ops that
//! need particular operands or attributes to run at all show `—` (the mesh
//! runs the device ops itself and they are not probed). The *pjrt*
//! column is the StableHLO lowering table's own answer
//! ([`crate::xla::stablehlo::lowering_of`]): a builder, a variable
//! update the emitter threads through the step, a value that must fold to
//! a constant, or a structural op (arguments, results, metadata).
//! Cost: a few hundred kernel calls on two-element tensors.

use crate::exec::kernels::{run_kernel, DEVICE_OPS, PURE_OPS, TENSOR_ARRAY_OPS, VARIANT_OPS};
use crate::exec::Tensor;
use crate::ir::ops::{lookup, Placement};
use crate::ir::{AttrMap, AttrValue, DType};
use crate::xla::stablehlo::{lowering_of, unlowered_reason};

/// What `tpu-rewrite ops` says of one op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpSupport {
    /// The op type.
    pub name: &'static str,
    /// The dtypes a probe ran it with (empty: not probed).
    pub dtypes: Vec<DType>,
    /// Where it runs: `interpreter` (a pure kernel) or `mesh` (state,
    /// communication and feeds, run by the device mesh).
    pub backend: &'static str,
    /// Its TPU placement from the IR registry: `tpu`, `host-only`,
    /// `tpu-system`, or `-` when the registry does not list it.
    pub placement: &'static str,
    /// How `--backend pjrt` runs it (`builder`, `variable update`,
    /// `constant`, `structural`), or `None` when it does not.
    pub pjrt: Option<&'static str>,
}

impl OpSupport {
    /// The backends that run the op: `sim` always, `pjrt` when it lowers.
    pub fn backends(&self) -> &'static str {
        if self.pjrt.is_some() {
            "sim, pjrt"
        } else {
            "sim"
        }
    }

    /// The `pjrt` column: how the emitter lowers the op, or `-` with the reason it does not.
    pub fn pjrt_column(&self) -> String {
        match (self.pjrt, unlowered_reason(self.name)) {
            (Some(how), _) => how.to_string(),
            (None, Some(why)) => format!("- ({why})"),
            (None, None) => "-".to_string(),
        }
    }
}

/// The dtypes probed, in this order.
const PROBED: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::Bool,
    DType::C64,
    DType::C128,
    DType::Str,
];

/// Every supported op, sorted by name.
pub fn supported_ops() -> Vec<OpSupport> {
    let mut ops: Vec<OpSupport> = PURE_OPS
        .iter()
        .map(|&name| OpSupport {
            name,
            dtypes: probe(name),
            backend: "interpreter",
            placement: placement(name),
            pjrt: lowering_of(name),
        })
        .chain(DEVICE_OPS.iter().filter(|name| !PURE_OPS.contains(name)).map(|&name| OpSupport {
            name,
            dtypes: Vec::new(),
            backend: "mesh",
            placement: placement(name),
            pjrt: lowering_of(name),
        }))
        // TensorList, TensorArray and Optional kernels take variant operands: not probed.
        .chain(VARIANT_OPS.iter().chain(TENSOR_ARRAY_OPS).map(|&name| OpSupport {
            name,
            dtypes: Vec::new(),
            backend: "interpreter",
            placement: placement(name),
            pjrt: lowering_of(name),
        }))
        .collect();
    ops.sort_by(|a, b| a.name.cmp(b.name));
    ops
}

fn placement(name: &str) -> &'static str {
    match lookup(name).map(|d| d.placement) {
        Some(Placement::Tpu) => "tpu",
        Some(Placement::HostOnly) => "host-only",
        Some(Placement::TpuSystem) => "tpu-system",
        None => "-",
    }
}

/// A tensor of `shape` holding 1, 2, ... of `dtype`, made with the `Cast` kernel.
fn sample(dtype: DType, shape: &[usize]) -> Option<Tensor> {
    let n = shape.iter().product::<usize>();
    let f = Tensor::from_vec(shape, (1..=n).map(|v| v as f32).collect()).ok()?;
    if dtype == DType::F32 {
        return Some(f);
    }
    let mut attrs = AttrMap::new();
    attrs.insert("DstT", AttrValue::Type(dtype));
    run_kernel("Cast", &attrs, &[f]).ok()?.into_iter().next().filter(|t| t.dtype() == dtype)
}

/// The dtypes `op`'s kernel accepts, by running it.
fn probe(op: &str) -> Vec<DType> {
    let index = Tensor::from_vec(&[1], vec![0i32]).ok();
    PROBED
        .iter()
        .copied()
        .filter(|&dtype| {
            let mut attrs = AttrMap::new();
            for key in ["T", "dtype", "DstT", "SrcT", "Tidx", "out_type"] {
                attrs.insert(key, AttrValue::Type(dtype));
            }
            [&[2][..], &[2, 2][..]].into_iter().filter_map(|shape| sample(dtype, shape)).any(|x| {
                (1..=3).any(|arity| {
                    let same = vec![x.clone(); arity];
                    let mixed: Vec<Tensor> =
                        std::iter::once(x.clone()).chain((1..arity).filter_map(|_| index.clone())).collect();
                    let runs = |inputs: &[Tensor]| run_kernel(op, &attrs, inputs).is_ok();
                    runs(&same) || (arity > 1 && runs(&mixed))
                })
            })
        })
        .collect()
}

fn dtype_list(dtypes: &[DType]) -> String {
    if dtypes.is_empty() {
        return "—".to_string();
    }
    dtypes.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
}

/// The ops as aligned plain text, one per line.
pub fn plain_table() -> String {
    let ops = supported_ops();
    let width = ops.iter().map(|o| o.name.len()).max().unwrap_or(0);
    let mut out = format!(
        "{:<width$}  {:<11}  {:<10}  {:<9}  {:<15}  dtypes\n",
        "op", "backend", "placement", "backends", "pjrt"
    );
    for op in &ops {
        out.push_str(&format!(
            "{:<width$}  {:<11}  {:<10}  {:<9}  {:<15}  {}\n",
            op.name,
            op.backend,
            op.placement,
            op.backends(),
            op.pjrt_column(),
            dtype_list(&op.dtypes)
        ));
    }
    out
}

/// The ops as the Markdown document `docs/ops.md`.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "# Supported ops\n\n\
         Generated by `tpu-rewrite ops --markdown`; a test checks that this file is current. \
         The op families, dtype arithmetic and gradients of TensorFlow training steps are \
         described in [training-ops.md](training-ops.md).\n\n\
         *backend*: `interpreter` ops have a pure kernel; `mesh` ops (variables, collectives, \
         transfers, feeds) are run by the simulated device mesh. *placement*: where the rewrite \
         may place the op (`host-only` ops inside a TPU cluster need `outside_compilation`). \
         *dtypes*: the dtypes the kernel ran with when probed on small tensors; `—` means the op \
         needs particular operands and was not probed. *backends*: `sim` is the simulator \
         (`--backend sim`), `pjrt` is XLA through a PJRT plugin (`--backend pjrt`). *pjrt*: how the \
         StableHLO emitter handles the op (see [xla.md](xla.md)): `builder` (an entry of the \
         lowering table), `variable update` (threaded through the step by the emitter), `constant` \
         (must fold to a compile-time constant), `structural` (an argument, a result or metadata), \
         `-` (not lowered).\n\n\
         | op | backend | placement | backends | pjrt | dtypes |\n|---|---|---|---|---|---|\n",
    );
    for op in supported_ops() {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            op.name,
            op.backend,
            op.placement,
            op.backends(),
            op.pjrt_column(),
            dtype_list(&op.dtypes)
        ));
    }
    out
}
