//! Device checks: run-time checks inside a device program for what XLA
//! would otherwise accept in silence, where the simulator and
//! TensorFlow's CPU kernels report an error. XLA clamps an out-of-range
//! gather index, drops a scatter update at an out-of-range index, gives
//! -1 (or the dividend) for an integer division by zero, writes a push
//! onto a full TensorList over its last element, pops an empty list at
//! row -1 (clamped) and reads an empty Optional as zeros.
//!
//! Meaning: while a [`Scope`] lives on a thread, the StableHLO builders
//! of those ops (`GatherV2`, `GatherNd`, `ResourceGather`, `ScatterNd`,
//! `TensorScatterUpdate`/`Add`, `ResourceScatter{Add,Sub,Update}`,
//! `UnsortedSegmentSum` (ids past the segment count; negative ids are
//! dropped, as TensorFlow drops them), integer `Div`/`FloorDiv`/`FloorMod`,
//! `TensorListGather`, `TensorListPushBack`, `TensorListPopBack`,
//! `OptionalGetValue`) emit, beside the op, a flag that is 1 when the
//! op's operands are out of bounds, and a `stablehlo.custom_call
//! @tpu_rewrite_check` (typed XLA FFI, side effecting) on the replica id
//! and the flag. Its `check` attribute names a check in a process-wide
//! table ([`register`]): the node, its op and the bound. The [`handler`]
//! returns an FFI error carrying the message and the replica when the
//! flag is set, which XLA reports as the execution's error; it also keeps
//! the failure, so that [`classify`] turns the plugin's error into
//! [`XlaError::DeviceCheck`] (`tpu_rewrite::xla::device_check`), naming
//! the program, the replica, the node and the op.
//!
//! `run --backend pjrt` opens a scope on a CPU plugin unless
//! `--no-device-checks` is given (the handler needs the plugin's FFI
//! extension; other plugins run unchecked, as TensorFlow's XLA bridge
//! does). `lower` never opens one: its modules are for other runtimes.
//! Cost: a compare and a reduction per checked op, and one host call per
//! execution of it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::callback;
use super::error::XlaError;
use super::ffi;
use super::xla_ffi as x;

/// The custom-call target of a device check.
pub const TARGET: &str = "tpu_rewrite_check";

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(false) };
    static NODE: RefCell<(String, String)> = const { RefCell::new((String::new(), String::new())) };
}

/// The node whose op is being emitted on this thread while the value
/// lives; checks emitted meanwhile name it.
#[derive(Debug)]
pub struct Node {
    saved: (String, String),
}

impl Node {
    /// Names node `name` (of op type `op`) as the one being emitted.
    pub fn enter(name: &str, op: &str) -> Node {
        Node { saved: NODE.with(|n| n.replace((name.to_string(), op.to_string()))) }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        NODE.with(|n| *n.borrow_mut() = std::mem::take(&mut self.saved));
    }
}

/// Device checks are emitted on this thread while the value lives.
#[derive(Debug)]
pub struct Scope {
    saved: bool,
}

impl Scope {
    /// Turns device checks on (`on = true`) or off for this thread's
    /// emissions until the value is dropped.
    pub fn new(on: bool) -> Scope {
        Scope { saved: ENABLED.with(|e| e.replace(on)) }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        ENABLED.with(|e| e.set(self.saved));
    }
}

/// True while a [`Scope`] with checks on lives on this thread.
pub fn enabled() -> bool {
    ENABLED.with(Cell::get)
}

/// One emitted check: the node and op it guards and what it tests.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Check {
    node: String,
    op: String,
    message: String,
}

/// The checks emitted so far, with an index for each distinct one (a
/// check is kept once, however often it is emitted), and the failures
/// the handler reported that no error has claimed yet.
#[derive(Default)]
struct Table {
    list: Vec<Check>,
    index: HashMap<Check, usize>,
    failures: Vec<Failure>,
}

/// A failed check as the handler reported it.
struct Failure {
    check: usize,
    replica: i64,
    /// The text the handler gave XLA, which the plugin's error contains.
    text: String,
}

/// Failures kept for [`classify`]; older ones are dropped first (a run
/// stops at its first failure, so few are ever waiting).
const MAX_FAILURES: usize = 64;

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// The id under which the handler finds the check `message`, made for
/// the node being emitted on this thread ([`Node`]).
pub fn register(message: String) -> usize {
    let (node, op) = NODE.with(|n| n.borrow().clone());
    let check = Check { node, op, message };
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&i) = t.index.get(&check) {
        return i;
    }
    let i = t.list.len();
    t.list.push(check.clone());
    t.index.insert(check, i);
    i
}

/// The error for a failed PJRT `call` on `program` with the plugin's
/// `message`: [`XlaError::DeviceCheck`] when the message carries a failure
/// the handler reported (which is then claimed), else [`XlaError::Pjrt`].
pub fn classify(call: &str, program: &str, message: String) -> XlaError {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(k) = t.failures.iter().position(|f| message.contains(&f.text)) {
        let f = t.failures.remove(k);
        if let Some(check) = t.list.get(f.check) {
            return XlaError::DeviceCheck {
                program: program.to_string(),
                replica: f.replica,
                node: check.node.clone(),
                op: check.op.clone(),
                message: check.message.clone(),
            };
        }
    }
    XlaError::Pjrt { call: call.to_string(), program: program.to_string(), message }
}

/// Registers [`handler`] as `tpu_rewrite_check` on `platform`.
pub fn install(plugin: &ffi::Plugin, platform: &str) -> Result<(), XlaError> {
    callback::install_handler(plugin, platform, TARGET, handler)
}

/// The typed FFI handler XLA calls for `tpu_rewrite_check`.
///
/// # Safety
/// `frame` must be a call frame XLA built for this handler.
pub unsafe extern "C" fn handler(frame: *mut x::CallFrame) -> *mut x::Opaque {
    // SAFETY: the caller's contract.
    let outcome = std::panic::catch_unwind(|| unsafe { dispatch(frame) });
    let (code, message) = match outcome {
        Ok(Ok(())) => return std::ptr::null_mut(),
        Ok(Err(m)) => (x::XLA_FFI_ERROR_INVALID_ARGUMENT, m),
        Err(_) => (x::XLA_FFI_ERROR_INTERNAL, "the device check panicked".to_string()),
    };
    // SAFETY: as above.
    unsafe { callback::error(frame, code, &message) }
}

/// The check: `Err` with the message when the flag (operand 1) is set.
///
/// # Safety
/// As [`handler`].
unsafe fn dispatch(frame: *mut x::CallFrame) -> Result<(), String> {
    // SAFETY: the caller's contract.
    let frame = unsafe { frame.as_mut() }.ok_or("no call frame")?;
    // SAFETY: as above.
    if unsafe { callback::answer_metadata(frame) }? || frame.stage != x::XLA_FFI_STAGE_EXECUTE {
        return Ok(());
    }
    // SAFETY: as above, at the execute stage.
    let operands = unsafe { callback::arguments(frame) }?;
    let scalar = |i: usize| operands.get(i).and_then(|t| t.to_i64_vec("", "").ok()).and_then(|v| v.first().copied());
    let (Some(replica), Some(flag)) = (scalar(0), scalar(1)) else {
        return Err(format!("{TARGET}: expected the replica id and a flag"));
    };
    if flag == 0 {
        return Ok(());
    }
    let id = callback::scalar_attr(&frame.attrs, b"check").and_then(|v| usize::try_from(v).ok());
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    let Some((id, check)) = id.and_then(|i| Some((i, t.list.get(i)?.clone()))) else {
        return Err(format!("replica {replica}: a device check failed"));
    };
    let text = format!(
        "replica {replica}: `{}` ({}): {} (a device check; `--no-device-checks` gives XLA's unchecked result)",
        check.node, check.op, check.message
    );
    if t.failures.len() >= MAX_FAILURES {
        t.failures.remove(0);
    }
    t.failures.push(Failure { check: id, replica, text: text.clone() });
    Err(text)
}
