//! Outside compilation on `--backend jax-distributed`: the host ops between
//! a cluster's device stages run in the `tpu-rewrite` that started the
//! launcher owning the replicas, with the simulator's kernels (as
//! `--backend pjrt` runs them between stages).
//!
//! Protocol, per launcher process, over its stdin and stdout: after it
//! executes stage k, a launcher whose job marks stage k as exchanging
//! writes the stage's carried results of its own replicas as
//! `x_<k>_<c>_<r>.npy` into the job directory and prints one line,
//! `host <k> <r>,<r>,…` (its replicas). [`serve`] reads those values, runs
//! host program k for exactly those replicas, writes the carried arguments
//! of stage k + 1 as `h_<k+1>_<a>_<r>.npy`, and answers `ok`, or `error
//! <message>` when a host op fails (the launcher then stops with that
//! message).
//!
//! Invariants: a process's host values hold only its own replicas (indexed
//! by their position in the request), so no process computes, prints or
//! holds another's; host op effects (`Print`) happen on the host that owns
//! the replica. Cost: per exchange, one `.npy` per carried value and
//! replica each way, plus the host ops' kernels.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, ChildStdout};

use crate::exec::Tensor;
use crate::ir::{Graph, NodeId};
use crate::xla::host::{Host, MissingFeed};
use crate::xla::stablehlo::{ArgSource, Staged};
use crate::xla::XlaError;

/// Whether a launcher must stop after stage `k` for the host: the stage
/// hands values to the host, host ops follow it, or the next stage reads
/// values the host computed.
pub(super) fn exchanges(staged: &Staged, k: usize) -> bool {
    let carried_next =
        staged.stages.get(k + 1).is_some_and(|next| next.args.iter().any(|a| matches!(a, ArgSource::Carried(..))));
    !staged.stages[k].carried.is_empty() || staged.host_ops.get(k).is_some_and(|ops| !ops.is_empty()) || carried_next
}

/// Answers one launcher's host requests until it closes its stdout.
/// Returns the first host-op failure (also sent to the launcher).
pub(super) fn serve(
    graph: &Graph,
    staged: &Staged,
    feeds: &[(String, Tensor)],
    dir: &Path,
    requests: ChildStdout,
    mut replies: ChildStdin,
) -> Result<(), XlaError> {
    let mut values: HashMap<(NodeId, u32), Vec<Tensor>> = HashMap::new();
    let mut host = Host::new(graph, feeds, MissingFeed::Error);
    let mut failure = None;
    for line in BufReader::new(requests).lines() {
        let Ok(line) = line else { break };
        let answer = match parse(&line) {
            Some((k, replicas)) if failure.is_none() => {
                match step(graph, staged, dir, k, &replicas, &mut values, &mut host) {
                    Ok(()) => "ok".to_string(),
                    Err(e) => {
                        let text = format!("error {}", e.to_string().replace('\n', " "));
                        failure = Some(e);
                        text
                    }
                }
            }
            Some(_) => "error an earlier host step failed".to_string(),
            None => format!("error not a host request: {line}"),
        };
        if writeln!(replies, "{answer}").and_then(|()| replies.flush()).is_err() {
            break;
        }
    }
    failure.map_or(Ok(()), Err)
}

/// `host <k> <r>,<r>,…` → (k, replicas).
fn parse(line: &str) -> Option<(usize, Vec<usize>)> {
    let mut words = line.split_whitespace();
    if words.next()? != "host" {
        return None;
    }
    let k = words.next()?.parse().ok()?;
    let replicas = words.next()?.split(',').map(|r| r.parse().ok()).collect::<Option<Vec<usize>>>()?;
    Some((k, replicas))
}

/// One host step: reads stage `k`'s carried values of `replicas`, runs
/// host program `k` for them and writes stage `k + 1`'s carried arguments.
fn step(
    graph: &Graph,
    staged: &Staged,
    dir: &Path,
    k: usize,
    replicas: &[usize],
    values: &mut HashMap<(NodeId, u32), Vec<Tensor>>,
    host: &mut Host,
) -> Result<(), XlaError> {
    let stage = staged.stages.get(k).ok_or_else(|| unsupported(format!("the launcher asked for stage {k}")))?;
    let io = |path: &Path, e: crate::exec::ExecError| unsupported(format!("{}: {e}", path.display()));
    for (c, &key) in stage.carried.iter().enumerate() {
        let mut row = Vec::with_capacity(replicas.len());
        for &r in replicas {
            let path = dir.join(format!("x_{k}_{c}_{r}.npy"));
            row.push(crate::exec::read_npy_file(&path).map_err(|e| io(&path, e))?);
        }
        values.insert(key, row);
    }
    crate::xla::backend::run_host_ops(graph, staged, k, replicas.len(), values, host)?;
    let Some(next) = staged.stages.get(k + 1) else { return Ok(()) };
    for (a, arg) in next.args.iter().enumerate() {
        let ArgSource::Carried(id, o) = *arg else { continue };
        let row = values.get(&(id, o)).ok_or_else(|| {
            unsupported(format!("stage {} reads `{}`, which no earlier stage computed", k + 1, graph.node(id).name))
        })?;
        for (t, &r) in row.iter().zip(replicas) {
            let path = dir.join(format!("h_{}_{a}_{r}.npy", k + 1));
            crate::exec::write_npy_file(&path, t).map_err(|e| io(&path, e))?;
        }
    }
    Ok(())
}

fn unsupported(message: String) -> XlaError {
    XlaError::UnsupportedGraph { message }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn requests_name_the_stage_and_the_replicas() {
        assert_eq!(parse("host 1 2,3"), Some((1, vec![2, 3])));
        assert_eq!(parse("host 0 0"), Some((0, vec![0])));
        assert_eq!(parse("host x 0"), None);
        assert_eq!(parse("print 0 0"), None);
        assert_eq!(parse("host 0 1,a"), None);
    }
}
