//! The `tpu-rewrite` binary: the command-line interface in `cli` over the
//! `tpu_rewrite` library.

mod cli;

// The CLI names library items as `crate::<module>::...`: the library's
// modules, re-exported at the binary's root, give those paths.
use tpu_rewrite::{diagnostics, emit, exec, ir, lower, passes, progress, syntax, tf, xla};

/// The global allocator (feature `mimalloc`, on by default): graphs of
/// millions of small nodes spend a fifth of their time in malloc/free with
/// the system allocator. It is the binary's choice; the library sets none.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}

/// Runs before `main` and before Rust's runtime reopens a closed stdout
/// on `/dev/null`: records whether it was closed (`>&-`), so that writing
/// the result fails instead of vanishing.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static RECORD_STDOUT: extern "C" fn() = {
    extern "C" fn record() {
        cli::console::record_stdout_at_start();
    }
    record
};
