//! The `tpu-rewrite` binary: see `tpu_rewrite::cli`.

fn main() -> std::process::ExitCode {
    tpu_rewrite::cli::main()
}
