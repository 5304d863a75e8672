//! The `tpu-rewrite` binary: see `tpu_rewrite::cli`.

/// The global allocator (feature `mimalloc`, on by default): graphs of
/// millions of small nodes spend a fifth of their time in malloc/free with
/// the system allocator. It is the binary's choice; the library sets none.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tpu_rewrite::cli::main()
}

/// Runs before `main` and before Rust's runtime reopens a closed stdout
/// on `/dev/null`: records whether it was closed (`>&-`), so that writing
/// the result fails instead of vanishing.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static RECORD_STDOUT: extern "C" fn() = {
    extern "C" fn record() {
        tpu_rewrite::cli::console::record_stdout_at_start();
    }
    record
};
