//! Device checks: run-time checks inside a device program for what XLA
//! would otherwise accept in silence, where the simulator reports an
//! error. XLA clamps an out-of-range gather index, writes a push onto a
//! full TensorList over its last element, pops an empty list at row -1
//! (clamped) and reads an empty Optional as zeros.
//!
//! Meaning: while a [`Scope`] lives on a thread, the StableHLO builders
//! of those ops (`GatherV2`, `GatherNd`, `TensorListGather`,
//! `TensorListPushBack`, `TensorListPopBack`, `OptionalGetValue`) emit,
//! beside the op, a flag that is 1 when the op's operands are out of
//! bounds, and a `stablehlo.custom_call @tpu_rewrite_check` (typed XLA FFI,
//! side effecting) on the replica id and the flag. Its `check` attribute
//! names a message in a process-wide table ([`register`]). The
//! [`handler`] returns an FFI error carrying the message and the replica
//! when the flag is set, which XLA reports as the execution's error, so
//! the run stops with the op and the bound that was passed.
//!
//! `run --backend pjrt` opens a scope on a CPU plugin unless
//! `--no-device-checks` is given (the handler needs the plugin's FFI
//! extension; other plugins run unchecked, as TensorFlow's XLA bridge
//! does). `lower` never opens one: its modules are for other runtimes.
//! Cost: a compare and a reduction per checked op, and one host call per
//! execution of it.

use std::cell::Cell;
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

/// The messages of the checks emitted so far, with an index for each
/// distinct one (a message is kept once, however often it is emitted).
#[derive(Default)]
struct Messages {
    list: Vec<String>,
    index: HashMap<String, usize>,
}

fn messages() -> &'static Mutex<Messages> {
    static MESSAGES: OnceLock<Mutex<Messages>> = OnceLock::new();
    MESSAGES.get_or_init(Default::default)
}

/// The id under which the handler finds `message`.
pub fn register(message: String) -> usize {
    let mut m = messages().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&i) = m.index.get(&message) {
        return i;
    }
    let i = m.list.len();
    m.list.push(message.clone());
    m.index.insert(message, i);
    i
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
    let m = messages().lock().unwrap_or_else(|e| e.into_inner());
    let message = id.and_then(|i| m.list.get(i)).map_or("a device check failed", String::as_str);
    Err(format!("replica {replica}: {message} (a device check; `--no-device-checks` gives XLA's unchecked result)"))
}
