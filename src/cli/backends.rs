//! The `run` settings of the XLA backends that are not the run itself:
//! the multi-host flags of `--backend jax-distributed` (with Slurm's
//! environment filling what is absent), what each of its processes holds,
//! and the notes `--backend pjrt` prints about its compile cache.

use super::run::{Backend, RunArgs};

/// The multi-host settings of `run`: `None` unless `--coordinator`,
/// `--num-processes` or `--process-id` is given; then the process count
/// (the flag, else `$SLURM_NTASKS`) and this host's part. An absent
/// process id is `$SLURM_PROCID`, else left to JAX, as is an absent
/// coordinator.
pub(super) fn multi_host(args: &RunArgs) -> Result<Option<(u32, crate::xla::distributed::MultiHost)>, String> {
    if args.coordinator.is_none() && args.num_processes.is_none() && args.process_id.is_none() {
        return Ok(None);
    }
    if args.backend != Backend::JaxDistributed {
        return Err("--coordinator, --num-processes and --process-id apply to --backend jax-distributed only".into());
    }
    let env = |name: &str| -> Result<Option<u32>, String> {
        match std::env::var(name) {
            Ok(v) => v.trim().parse().map(Some).map_err(|_| format!("${name} is `{v}`, not a number")),
            Err(_) => Ok(None),
        }
    };
    let n = match args.num_processes {
        Some(n) => n,
        None => env("SLURM_NTASKS")?
            .ok_or("a multi-host run needs --num-processes N (or $SLURM_NTASKS): every process must know N")?,
    };
    let id = match args.process_id {
        Some(i) => Some(i),
        None => env("SLURM_PROCID")?,
    };
    if let Some(i) = id.filter(|&i| i >= n) {
        return Err(format!("--process-id {i} is not below --num-processes {n}"));
    }
    // A platform chosen in the environment (TPU, GPU) keeps its own devices.
    let platform_devices = std::env::var("JAX_PLATFORMS").is_ok_and(|p| !p.is_empty() && p != "cpu");
    let m = crate::xla::distributed::MultiHost {
        coordinator: args.coordinator.clone(),
        process_id: id.map(|i| i as usize),
        platform_devices,
    };
    Ok(Some((n, m)))
}

/// Notes on stderr about the compile cache: an entry that could not be
/// used or stored always; with `-v`, each program's hit or miss and the
/// compile (or load) time.
pub(super) fn report_cache_use(timings: &crate::xla::backend::Timings) {
    use crate::xla::cache::CacheUse;
    let verbose = crate::xla::stderr::verbose();
    for (program, used) in &timings.cache {
        match used {
            CacheUse::Hit { key } if verbose => {
                errln!("compile cache: hit for {program} (entry {}…)", &key[..12.min(key.len())])
            }
            CacheUse::Miss { key, recovered, not_stored } => {
                if let Some(why) = recovered {
                    errln!("note: compile cache: {why}; {program} was compiled afresh");
                }
                if let Some(why) = not_stored {
                    errln!("note: compile cache: {program} was not stored: {why}");
                }
                if verbose {
                    errln!(
                        "compile cache: miss for {program}, compiled and stored (entry {}…)",
                        &key[..12.min(key.len())]
                    );
                }
            }
            _ => {}
        }
    }
    if verbose && !timings.cache.is_empty() {
        errln!(
            "compile: {:.3} s for {} program(s), {} compiled by XLA",
            timings.compile.as_secs_f64(),
            timings.cache.len(),
            timings.compiles
        );
    }
}

/// With `-v`, what each `jax-distributed` process started here loaded of
/// the feeds and host values (only its own replicas'), on stderr.
pub(super) fn report_held(held: &[crate::xla::distributed::Held]) {
    if !crate::xla::stderr::verbose() {
        return;
    }
    for h in held {
        let replicas: Vec<String> = h.replicas.iter().map(usize::to_string).collect();
        errln!("process {} holds the feeds of replicas {}: {} bytes", h.process, replicas.join(","), h.bytes);
    }
}
