//! The host callback: outside-compilation ops run on the host, called from
//! inside the device program through `stablehlo.custom_call
//! @tpu_rewrite_host` (typed XLA FFI, registered through the PJRT FFI
//! extension).
//!
//! Meaning: a run registers its host programs ([`HostPrograms`], one per
//! `oc_program` index) in a process-wide registry under a fresh id
//! ([`next_id`]), which the emitted module carries as the `run` attribute;
//! several runs in one process (tests, threads) each have their own. XLA
//! calls [`handler`] once per custom call and replica, on its own threads:
//! the handler answers the metadata query (the FFI API version), ignores
//! the instantiate / prepare / initialize stages, and at the execute stage
//! reads the operands (replica id, then device values), runs the host
//! program with the simulator's kernels and writes the results into XLA's
//! result buffers.
//!
//! Invariants: no panic crosses the FFI boundary (`catch_unwind` turns one
//! into an FFI error); every failure becomes an `XLA_FFI_Error`, which XLA
//! reports as the execution's error. A registration lives until its
//! [`Registration`] is dropped. Cost: per call, one kernel call per host
//! op plus copies of the operands and results.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::error::XlaError;
use super::ffi;
use super::host::Host;
use super::stablehlo::{Staged, TARGET};
use super::xla_ffi::{self as x, data_type};
use crate::exec::{run_kernel, Tensor};
use crate::ir::{AttrMap, DType, Graph, NodeId};

/// Where a host op's operand comes from.
#[derive(Clone, Debug)]
enum Ref {
    /// Device value `i` of the call (operand `i + 1`: operand 0 is the replica id).
    Operand(usize),
    /// Output `o` of host op `i` of the same program.
    Op(usize, u32),
    /// A value fixed for the run: a folded constant or a host tensor.
    Fixed(Tensor),
}

/// One outside-compilation op.
#[derive(Clone, Debug)]
struct HostOp {
    name: String,
    op: String,
    attrs: AttrMap,
    inputs: Vec<Ref>,
}

/// One host program: its ops in dependency order and its results.
#[derive(Clone, Debug)]
struct Program {
    ops: Vec<HostOp>,
    results: Vec<Ref>,
}

/// The host programs of one cluster, by `oc_program` index.
#[derive(Clone, Debug, Default)]
pub struct HostPrograms {
    programs: HashMap<usize, Program>,
}

impl HostPrograms {
    /// The host programs of `staged`'s calls; host tensors they read
    /// (feeds, constants outside the cluster) are evaluated now.
    pub fn new(graph: &Graph, staged: &Staged, host: &mut Host) -> Result<HostPrograms, XlaError> {
        let mut programs = HashMap::new();
        for call in &staged.calls {
            let local: HashMap<NodeId, usize> = call.ops.iter().enumerate().map(|(i, &id)| (id, i)).collect();
            let operand: HashMap<(NodeId, u32), usize> =
                call.operands.iter().enumerate().map(|(i, &k)| (k, i)).collect();
            let mut ops = Vec::with_capacity(call.ops.len());
            for &id in &call.ops {
                let node = graph.node(id);
                let mut inputs = Vec::new();
                for input in graph.data_inputs(id) {
                    let key = (input.src, input.output.unwrap_or(0));
                    inputs.push(if let Some(&i) = local.get(&key.0) {
                        Ref::Op(i, key.1)
                    } else if let Some(&i) = operand.get(&key) {
                        Ref::Operand(i)
                    } else if let Some(t) = staged.folded.get(&key) {
                        Ref::Fixed(t.clone())
                    } else {
                        Ref::Fixed(host.value(key.0, key.1)?)
                    });
                }
                ops.push(HostOp {
                    name: node.name.to_string(),
                    op: node.op.to_string(),
                    attrs: node.attrs.clone(),
                    inputs,
                });
            }
            let mut results = Vec::with_capacity(call.results.len());
            for key in &call.results {
                let i = local.get(&key.0).ok_or_else(|| XlaError::UnsupportedGraph {
                    message: format!("host program {} returns `{}`, which it does not compute", call.index, {
                        graph.node(key.0).name.clone()
                    }),
                })?;
                results.push(Ref::Op(*i, key.1));
            }
            programs.insert(call.index, Program { ops, results });
        }
        Ok(HostPrograms { programs })
    }

    /// Runs program `index` for one replica on `operands` (device values).
    fn run(&self, index: usize, operands: &[Tensor]) -> Result<Vec<Tensor>, String> {
        let program = self.programs.get(&index).ok_or_else(|| format!("no host program {index} in this run"))?;
        let mut values: Vec<Vec<Tensor>> = Vec::with_capacity(program.ops.len());
        let resolve = |values: &Vec<Vec<Tensor>>, r: &Ref| -> Result<Tensor, String> {
            match r {
                Ref::Operand(i) => operands.get(*i).cloned().ok_or_else(|| format!("missing operand {i}")),
                Ref::Op(i, o) => values
                    .get(*i)
                    .and_then(|v| v.get(*o as usize))
                    .cloned()
                    .ok_or_else(|| format!("host op {i} has no output {o}")),
                Ref::Fixed(t) => Ok(t.clone()),
            }
        };
        for op in &program.ops {
            let args = op.inputs.iter().map(|r| resolve(&values, r)).collect::<Result<Vec<_>, _>>()?;
            let out =
                run_kernel(&op.op, &op.attrs, &args).map_err(|e| format!("host op {} ({}): {e}", op.name, op.op))?;
            values.push(out);
        }
        program.results.iter().map(|r| resolve(&values, r)).collect()
    }
}

/// The registry of live runs.
fn runs() -> &'static Mutex<HashMap<u64, Arc<HostPrograms>>> {
    static RUNS: OnceLock<Mutex<HashMap<u64, Arc<HostPrograms>>>> = OnceLock::new();
    RUNS.get_or_init(Default::default)
}

/// A fresh registry id for a module's `run` attribute (never 0, which
/// `lower --format stablehlo` prints).
pub fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A run's host programs in the registry; dropping it removes them.
#[derive(Debug)]
pub struct Registration {
    id: u64,
}

impl Registration {
    /// Registers `programs` under `id` (from [`next_id`]).
    pub fn new(id: u64, programs: HostPrograms) -> Registration {
        runs().lock().unwrap_or_else(|e| e.into_inner()).insert(id, Arc::new(programs));
        Registration { id }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        runs().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

/// The platform name XLA:CPU looks handlers up under.
pub const CPU_PLATFORM: &str = "Host";

/// Registers [`handler`] as `tpu_rewrite_host` on `platform` through the
/// plugin's PJRT FFI extension. Registering again is harmless (XLA keeps
/// one entry per target and platform).
pub fn install(plugin: &ffi::Plugin, platform: &str) -> Result<(), XlaError> {
    install_handler(plugin, platform, TARGET, handler)
}

/// Registers `handler` as the typed FFI handler of custom-call `target` on
/// `platform` through the plugin's PJRT FFI extension.
pub(super) fn install_handler(
    plugin: &ffi::Plugin,
    platform: &str,
    target: &str,
    handler: unsafe extern "C" fn(*mut x::CallFrame) -> *mut x::Opaque,
) -> Result<(), XlaError> {
    let refuse = |reason: String| XlaError::Pjrt {
        call: "PJRT_FFI_Register_Handler".into(),
        program: format!("custom-call handler `{target}`"),
        message: reason,
    };
    let mut ext = plugin.api().extension_start.cast::<x::ExtensionBase>();
    // SAFETY: the plugin's extension chain is a list of live, static
    // structs, each starting with `PJRT_Extension_Base`.
    let found = unsafe {
        loop {
            if ext.is_null() {
                break None;
            }
            if (*ext).kind == x::PJRT_EXTENSION_TYPE_FFI {
                break Some(ext.cast::<x::PjrtFfiExtension>());
            }
            ext = (*ext).next;
        }
    };
    let ext = found.ok_or_else(|| refuse("the plugin has no PJRT FFI extension".into()))?;
    // SAFETY: `ext` is the FFI extension; its size is checked before the entry is read.
    let register = unsafe {
        if (*ext).base.struct_size < x::PjrtFfiExtension::STRUCT_SIZE {
            return Err(refuse(format!("its FFI extension is {} bytes", (*ext).base.struct_size)));
        }
        (*ext).register_handler
    };
    let register = register.ok_or_else(|| refuse("its FFI extension has no register_handler".into()))?;
    let mut args = x::RegisterHandlerArgs {
        struct_size: x::RegisterHandlerArgs::STRUCT_SIZE,
        target_name: target.as_ptr(),
        target_name_size: target.len(),
        handler: Some(handler),
        platform_name: platform.as_ptr(),
        platform_name_size: platform.len(),
        traits: 0,
    };
    // SAFETY: the args struct and the strings it points to are valid for
    // the call; the plugin copies the names.
    let err = unsafe { register(&mut args) };
    ffi::check(plugin, err).map_err(refuse)
}

/// The typed FFI handler XLA calls for `tpu_rewrite_host`.
///
/// # Safety
/// `frame` must be a call frame XLA built for this handler.
pub unsafe extern "C" fn handler(frame: *mut x::CallFrame) -> *mut x::Opaque {
    // SAFETY: the caller's contract.
    let outcome = std::panic::catch_unwind(|| unsafe { dispatch(frame) });
    let (code, message) = match outcome {
        Ok(Ok(())) => return std::ptr::null_mut(),
        Ok(Err(m)) => (x::XLA_FFI_ERROR_INVALID_ARGUMENT, m),
        Err(_) => (x::XLA_FFI_ERROR_INTERNAL, "the host callback panicked".to_string()),
    };
    // SAFETY: as above; the api table is read only when present.
    unsafe { error(frame, code, &format!("{TARGET}: {message}")) }
}

/// An `XLA_FFI_Error` made through the frame's API table (null if it has none).
///
/// # Safety
/// `frame` is null or a live call frame.
pub(super) unsafe fn error(frame: *mut x::CallFrame, code: i32, message: &str) -> *mut x::Opaque {
    // SAFETY: the caller's contract.
    let api = if frame.is_null() { std::ptr::null() } else { unsafe { (*frame).api } };
    // SAFETY: a non-null api is XLA's table, whose head we declare.
    let Some(create) = (unsafe { api.as_ref() }).and_then(|a| a.error_create) else {
        return std::ptr::null_mut();
    };
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    let mut args = x::ErrorCreateArgs {
        struct_size: x::ErrorCreateArgs::STRUCT_SIZE,
        extension_start: std::ptr::null_mut(),
        message: text.as_ptr().cast(),
        errc: code,
    };
    // SAFETY: XLA copies the message into the error it returns.
    unsafe { create(&mut args) }
}

/// The handler's work: metadata, the stages before execution, execution.
///
/// # Safety
/// As [`handler`].
unsafe fn dispatch(frame: *mut x::CallFrame) -> Result<(), String> {
    // SAFETY: the caller's contract.
    let frame = unsafe { frame.as_mut() }.ok_or("no call frame")?;
    // SAFETY: as above.
    if unsafe { answer_metadata(frame) }? || frame.stage != x::XLA_FFI_STAGE_EXECUTE {
        return Ok(());
    }
    let (index, run) = attributes(&frame.attrs)?;
    let programs = runs()
        .lock()
        .map_err(|_| "the registry is poisoned")?
        .get(&run)
        .cloned()
        .ok_or_else(|| format!("no run {run} is registered (a module from `lower` needs its own host handler)"))?;
    // SAFETY: the caller's contract.
    let operands = unsafe { arguments(frame) }?;
    let replica = operands.first().and_then(|t| t.to_i64_vec("", "").ok()).and_then(|v| v.first().copied());
    let replica = replica.ok_or("operand 0 must be the replica id")?;
    let results =
        programs.run(index, &operands[1..]).map_err(|m| format!("host program {index}, replica {replica}: {m}"))?;
    if results.len() != frame.rets.size.max(0) as usize {
        return Err(format!("host program {index} made {} results for {} buffers", results.len(), frame.rets.size));
    }
    for (j, t) in results.iter().enumerate() {
        // SAFETY: `size` entries of result buffers.
        let buffer = unsafe {
            if *frame.rets.types.add(j) != x::XLA_FFI_BUFFER {
                return Err(format!("result {j} is not a buffer"));
            }
            &*(*frame.rets.rets.add(j)).cast::<x::Buffer>()
        };
        // SAFETY: a live XLA result buffer.
        unsafe { write(buffer, t) }.map_err(|m| format!("host program {index}, result {j}: {m}"))?;
    }
    Ok(())
}

/// Host copies of the call's buffer arguments.
///
/// # Safety
/// `frame` is a live call frame at the execute stage.
pub(super) unsafe fn arguments(frame: &x::CallFrame) -> Result<Vec<Tensor>, String> {
    let mut operands = Vec::with_capacity(frame.args.size as usize);
    for i in 0..frame.args.size.max(0) as usize {
        // SAFETY: `size` entries of buffer arguments.
        let buffer = unsafe {
            if *frame.args.types.add(i) != x::XLA_FFI_BUFFER {
                return Err(format!("argument {i} is not a buffer"));
            }
            &*(*frame.args.args.add(i)).cast::<x::Buffer>()
        };
        // SAFETY: a live XLA buffer.
        operands.push(unsafe { read(buffer) }.map_err(|m| format!("argument {i}: {m}"))?);
    }
    Ok(operands)
}

/// True when `frame` is XLA's metadata query, which this answers (the FFI
/// API version, no traits).
///
/// # Safety
/// `frame` is a live call frame.
pub(super) unsafe fn answer_metadata(frame: &mut x::CallFrame) -> Result<bool, String> {
    let mut ext = frame.extension_start;
    while !ext.is_null() {
        // SAFETY: XLA's extension chain of live structs.
        let base = unsafe { *ext };
        if base.kind == x::XLA_FFI_EXTENSION_METADATA {
            // SAFETY: a metadata extension; its metadata's size is checked before writing.
            unsafe {
                let meta = (*ext.cast::<x::MetadataExtension>()).metadata;
                if meta.is_null() || (*meta).struct_size < x::Metadata::STRUCT_SIZE {
                    return Err("the metadata struct is too small".into());
                }
                (*meta).api_version.major_version = x::FFI_API_VERSION.0;
                (*meta).api_version.minor_version = x::FFI_API_VERSION.1;
                (*meta).traits = 0;
            }
            return Ok(true);
        }
        ext = base.next;
    }
    Ok(false)
}

/// `oc_program` and `run` from the call's attributes.
fn attributes(attrs: &x::Attrs) -> Result<(usize, u64), String> {
    let index = scalar_attr(attrs, b"oc_program").and_then(|v| usize::try_from(v).ok());
    let run = scalar_attr(attrs, b"run").and_then(|v| u64::try_from(v).ok());
    Ok((index.ok_or("no `oc_program` attribute")?, run.ok_or("no `run` attribute")?))
}

/// The integer scalar attribute `wanted` of a call, if it has one.
pub(super) fn scalar_attr(attrs: &x::Attrs, wanted: &[u8]) -> Option<i64> {
    for i in 0..attrs.size.max(0) as usize {
        // SAFETY: `size` entries of names, types and attribute pointers.
        let (name, kind, value) = unsafe {
            let span = &**attrs.names.add(i);
            (std::slice::from_raw_parts(span.ptr, span.len), *attrs.types.add(i), *attrs.attrs.add(i))
        };
        if kind != x::XLA_FFI_ATTR_SCALAR || name != wanted {
            continue;
        }
        // SAFETY: a scalar attribute points at an `XLA_FFI_Scalar`.
        let scalar = unsafe { &*value.cast::<x::Scalar>() };
        // SAFETY: the scalar's value has its dtype.
        return unsafe {
            match scalar.dtype {
                data_type::S64 => Some(*scalar.value.cast::<i64>()),
                data_type::S32 => Some(i64::from(*scalar.value.cast::<i32>())),
                _ => None,
            }
        };
    }
    None
}

/// The dtype and element width of an XLA element type.
fn dtype(code: i32) -> Option<(DType, usize)> {
    match code {
        data_type::F32 => Some((DType::F32, 4)),
        data_type::F64 => Some((DType::F64, 8)),
        data_type::S32 => Some((DType::I32, 4)),
        data_type::S64 => Some((DType::I64, 8)),
        data_type::PRED => Some((DType::Bool, 1)),
        _ => None,
    }
}

/// The dtype, shape and byte length of an XLA buffer (checked non-null
/// when it has bytes).
///
/// # Safety
/// `b` is a live buffer: `rank` dims and `data` of the size they give.
unsafe fn layout(b: &x::Buffer) -> Result<(DType, Vec<usize>, usize), String> {
    let (dt, width) = dtype(b.dtype).ok_or_else(|| format!("element type {} is not supported", b.dtype))?;
    let shape: Vec<usize> = if b.rank <= 0 || b.dims.is_null() {
        Vec::new()
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(b.dims, b.rank as usize) }.iter().map(|&d| d.max(0) as usize).collect()
    };
    let len = shape.iter().product::<usize>() * width;
    if b.data.is_null() && len > 0 {
        return Err("null data".into());
    }
    Ok((dt, shape, len))
}

/// A host copy of an argument buffer.
///
/// # Safety
/// As [`layout`].
pub(super) unsafe fn read(b: &x::Buffer) -> Result<Tensor, String> {
    // SAFETY: the caller's contract.
    let (dt, shape, len) = unsafe { layout(b) }?;
    let bytes: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: `len` readable bytes at `data` (the caller's contract).
        unsafe { std::slice::from_raw_parts(b.data.cast::<u8>(), len) }
    };
    let t = match dt {
        DType::F32 => Tensor::from_vec(
            &shape,
            bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        ),
        DType::F64 => Tensor::from_vec(
            &shape,
            bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
        ),
        DType::I32 => Tensor::from_vec(
            &shape,
            bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        ),
        DType::I64 => Tensor::from_vec(
            &shape,
            bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
        ),
        _ => Tensor::from_vec(&shape, bytes.iter().map(|&v| v != 0).collect()),
    };
    t.map_err(|e| e.to_string())
}

/// Copies `t` into a result buffer of the same type and shape.
///
/// # Safety
/// As [`layout`]; the buffer is writable.
unsafe fn write(b: &x::Buffer, t: &Tensor) -> Result<(), String> {
    // SAFETY: the caller's contract.
    let (dt, shape, len) = unsafe { layout(b) }?;
    if dt != t.dtype() || shape != t.shape() {
        return Err(format!("the host made {} {:?}, the device expects {dt} {shape:?}", t.dtype(), t.shape()));
    }
    let (_, data) = super::client::host_bytes(t, "host result").map_err(|e| e.to_string())?;
    if data.len() != len {
        return Err(format!("{} bytes for a {len}-byte buffer", data.len()));
    }
    if len > 0 {
        // SAFETY: `len` writable bytes at `data` (the caller's contract), not aliased by `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b.data.cast::<u8>(), len) };
    }
    Ok(())
}
