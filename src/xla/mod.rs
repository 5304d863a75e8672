//! XLA interop: StableHLO out, and a PJRT backend that runs it.
//!
//! - [`callback`]: the host callback (XLA FFI handler) that runs
//!   outside-compilation ops from inside the device program.
//! - [`device_check`]: run-time checks in device programs (gather
//!   indices, TensorList capacity, empty Optionals) that fail the run
//!   where XLA would clamp or read zeros.
//! - [`xla_ffi`]: the XLA FFI and PJRT FFI extension structs it uses.
//! - [`ffi`]: the subset of the PJRT C API tpu-rewrite calls, and the
//!   plugin loader (version, table size and function checks).
//! - [`plugin`]: where the plugin is found, and the fetch of the pinned
//!   CPU plugin into a cache outside git.
//! - [`client`]: a PJRT client (devices, compile, buffers, execute).
//! - [`cache`]: compiled executables kept on disk between runs.
//! - [`proto`]: the `xla.CompileOptionsProto` fields tpu-rewrite sets.
//! - [`stablehlo`]: a replicate cluster's device program as a StableHLO
//!   module (one small builder per op, in a table).
//! - [`host`]: host values a device program reads (feeds, defaults,
//!   variable initialisers), on the simulator's kernels.
//! - [`backend`]: `run --backend pjrt`: host ops on the simulator's
//!   kernels, the device program on XLA.
//! - [`distributed`]: `run --backend jax-distributed`: N JAX processes.
//! - [`stderr`]: keeps the plugin's info log lines off the terminal.
//!
//! [`OpSupport`] tells the passes what the StableHLO emitter lowers and
//! what the simulator's kernels run on the host.

pub mod backend;
pub mod cache;
pub mod callback;
pub mod client;
pub mod device_check;
pub mod distributed;
mod error;
pub mod ffi;
pub mod host;
pub mod plugin;
pub mod proto;
pub mod stablehlo;
pub mod stderr;
pub mod xla_ffi;

pub use error::XlaError;

/// What the StableHLO emitter lowers and the host (the simulator's kernels)
/// runs: the answer [`crate::passes::single_replica`] asks for.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpSupport;

impl crate::passes::single_replica::OpSupport for OpSupport {
    fn has_host_kernel(&self, op: &str) -> bool {
        crate::exec::kernels::has_kernel(op)
    }

    fn lowers(&self, op: &str) -> bool {
        stablehlo::lowering_of(op).is_some()
    }

    fn unlowered_reason(&self, op: &str) -> Option<&'static str> {
        stablehlo::unlowered_reason(op)
    }
}
