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
