//! Feeds for `run`: a JSON file (`--feeds`), `.npy` files (`--feed`), one
//! global batch split over the replicas (`--split-batch`) and one file per
//! input host (`--feed-per-host`). Every feed is checked against its
//! placeholder before anything runs; errors point into the feed file.

use std::sync::Arc;

use super::diagnostics::AnyDiagnostic;
use super::error::CliError;
use super::run::RunArgs;
use super::Loaded;
use crate::exec::{self, driver, Tensor};
use crate::ir::Module;
use crate::lower;

/// The dtype of a fed tensor: the host placeholder's `dtype`, else the
/// tagged graph node's `T` or `dtype` (a `TPUReplicatedInput`), else f32.
pub(super) fn feed_dtype(lowered: &Module, tagged: &Module, tensor: &str) -> crate::ir::DType {
    let name = tensor.split(':').next().unwrap_or(tensor);
    let attr = |g: &crate::ir::Graph, keys: &[&str]| {
        let node = g.node(g.find(name)?);
        keys.iter().find_map(|k| node.attrs.get(k).and_then(|v| v.as_type()))
    };
    lowered
        .graph(driver::HOST)
        .and_then(|g| attr(g, &["dtype"]))
        .or_else(|| tagged.graphs.first().and_then(|g| attr(g, &["T", "dtype"])))
        .unwrap_or(crate::ir::DType::F32)
}

/// Reads a JSON feed file: an object mapping tensor names to nested arrays
/// (optionally under a `"feeds"` key).
fn read_json_feeds(
    path: &std::path::Path,
    lowered: &Module,
    tagged: &Module,
    pruned: &[String],
) -> Result<Vec<(String, Tensor)>, CliError> {
    let text =
        std::fs::read(path).map_err(|e| CliError::Read { path: path.display().to_string(), reason: e.to_string() })?;
    let file = path.display().to_string();
    let named = |text: &[u8]| Arc::new(miette::NamedSource::new(&file, String::from_utf8_lossy(text).into_owned()));
    let value: serde_json::Value = serde_json::from_slice(&text).map_err(|e| CliError::FeedJson {
        file: file.clone(),
        message: e.to_string(),
        text: named(&text),
        at: json_error_offset(&text, &e).into(),
    })?;
    let object = value.get("feeds").unwrap_or(&value);
    let serde_json::Value::Object(map) = object else {
        return Err(CliError::feed(format!("{}: expected an object mapping tensor names to arrays", path.display())));
    };
    // Feeds of placeholders a plain graph's run does not need are dropped, as `Session.run` ignores them.
    map.iter()
        .filter(|(name, _)| !pruned.iter().any(|p| name.split(':').next() == Some(p.as_str())))
        .map(|(name, v)| {
            let tensor = exec::tensor_from_json(v, feed_dtype(lowered, tagged, name)).map_err(|e| {
                let node = name.split(':').next().unwrap_or(name);
                let span = tagged.graphs.first().and_then(|g| g.find(node).map(|id| g.node(id).span));
                let in_file = json_key_span(&text, name)
                    .map(|at| crate::cli::error::InFile {
                        file: file.clone(),
                        text: named(&text),
                        label: e.to_string(),
                        at: at.into(),
                    })
                    .into_iter()
                    .collect();
                CliError::FeedValue { file: file.clone(), tensor: name.clone(), message: e.to_string(), span, in_file }
            })?;
            Ok((name.clone(), tensor))
        })
        .collect()
}

/// The byte offset at which `serde_json` stopped (it reports 1-based lines
/// and columns).
fn json_error_offset(text: &[u8], error: &serde_json::Error) -> usize {
    let line_start: usize = text.split(|&b| b == b'\n').take(error.line().saturating_sub(1)).map(|l| l.len() + 1).sum();
    (line_start + error.column().saturating_sub(1)).min(text.len())
}

/// The span of object key `key` (a key followed by `:`) in JSON text; the
/// first such key wins.
fn json_key_span(text: &[u8], key: &str) -> Option<std::ops::Range<usize>> {
    let quoted = serde_json::to_string(key).ok()?;
    let quoted = quoted.as_bytes();
    let mut from = 0;
    while let Some(at) = text.get(from..)?.windows(quoted.len()).position(|w| w == quoted) {
        let start = from + at;
        let end = start + quoted.len();
        let rest = &text[end..];
        let colon = rest.iter().position(|b| !b.is_ascii_whitespace());
        if colon.is_some_and(|c| rest[c] == b':') {
            return Some(start..end);
        }
        from = end;
    }
    None
}

pub(super) fn read_feeds(
    args: &RunArgs,
    lowered: &Module,
    tagged: &Module,
    pruned: &[String],
) -> Result<Vec<(String, Tensor)>, CliError> {
    let mut feeds = Vec::new();
    if let Some(path) = &args.feeds {
        feeds = read_json_feeds(path, lowered, tagged, pruned)?;
    }
    for item in &args.feed {
        let (name, file) =
            item.split_once('=').ok_or_else(|| CliError::usage(format!("--feed takes NAME=FILE.npy, got `{item}`")))?;
        if pruned.iter().any(|p| name.split(':').next() == Some(p.as_str())) {
            continue;
        }
        let tensor = exec::read_npy_file(std::path::Path::new(file))
            .map_err(|e| CliError::feed(format!("--feed {name}={file}: {e}")))?;
        feeds.push((name.to_string(), tensor));
    }
    Ok(feeds)
}

/// The operands (one per replica, in replica order) of the
/// `TPUReplicatedInput` that `tensor` names, as tensor names.
pub(super) fn replica_operands(tagged: &Module, tensor: &str) -> Option<Vec<String>> {
    let graph = tagged.graphs.first()?;
    let id = graph.find(tensor.split(':').next().unwrap_or(tensor))?;
    if &*graph.node(id).op != "TPUReplicatedInput" {
        return None;
    }
    let operands = graph.data_inputs(id);
    Some(operands.iter().map(|o| format!("{}:{}", graph.node(o.src).name, o.output.unwrap_or(0))).collect())
}

/// Splits feeds named after a `TPUReplicatedInput` into one slice per
/// operand (replica), in replica order; other feeds pass through.
pub(super) fn split_global_feeds(
    tagged: &Module,
    feeds: Vec<(String, Tensor)>,
) -> Result<Vec<(String, Tensor)>, Box<exec::ExecError>> {
    let mut out = Vec::new();
    for (name, value) in feeds {
        match replica_operands(tagged, &name) {
            Some(operands) => {
                let slices = exec::input::split_batch(&value, operands.len()).map_err(Box::new)?;
                out.extend(operands.into_iter().zip(slices));
            }
            None => out.push((name, value)),
        }
    }
    Ok(out)
}

/// The token of a `--feed-per-host` pattern that stands for the host index.
pub(super) const HOST_TOKEN: &str = "{process_id}";

/// The feed file of each of `hosts` input hosts: the `--feed-per-host`
/// files as given, or one pattern with [`HOST_TOKEN`] expanded per host.
fn host_files(args: &RunArgs, hosts: usize) -> Vec<std::path::PathBuf> {
    match args.feed_per_host.as_slice() {
        [one] if one.to_string_lossy().contains(HOST_TOKEN) => {
            (0..hosts).map(|h| one.to_string_lossy().replace(HOST_TOKEN, &h.to_string()).into()).collect()
        }
        files => files.to_vec(),
    }
}

/// Reads one feed file per input host and splits each host's batches among
/// that host's replicas; returns the per-replica feeds. With `only_host`
/// (one host of a multi-host run), only that host's file is read: its
/// replicas get their slices, and every other replica its first slice
/// (a shared reference to the same buffer, not a copy), which only gives
/// the lowering the shapes; those values are never sent anywhere (that
/// host's own process feeds its replicas).
pub(super) fn per_host_feeds(
    args: &RunArgs,
    loaded: &Loaded,
    lowered: &lower::Lowered,
    only_host: Option<usize>,
) -> Result<Vec<(String, Tensor)>, AnyDiagnostic> {
    let message = |text: String| -> AnyDiagnostic { Box::new(CliError::feed(text)) };
    let workers = lower::input_workers(&lowered.assignment);
    let mut host_replicas: Vec<Vec<u32>> = workers.into_iter().map(|w| w.replicas).collect();
    let mut files = host_files(args, host_replicas.len());
    if let Some(host) = only_host {
        if files.len() != host_replicas.len() {
            return Err(message(format!(
                "--feed-per-host gives {} file(s) for {} input host(s): give one per host, or one pattern with {HOST_TOKEN}",
                files.len(),
                host_replicas.len()
            )));
        }
        let (Some(file), Some(replicas)) = (files.get(host).cloned(), host_replicas.get(host).cloned()) else {
            return Err(message(format!(
                "process {host} has no input host: the topology has {} host(s) (--topology HOSTSxCORES)",
                host_replicas.len()
            )));
        };
        files = vec![file];
        host_replicas = vec![replicas];
    }
    let mut host_feeds = Vec::with_capacity(files.len());
    for path in &files {
        let feeds =
            read_json_feeds(path, &lowered.module, &loaded.module, &[]).map_err(|e| Box::new(e) as AnyDiagnostic)?;
        if let Some((input, _)) = feeds.iter().find(|(name, _)| replica_operands(&loaded.module, name).is_none()) {
            return Err(message(format!(
                "{}: per-host feeds name replicated inputs (`input0:0`); `{input}` is not a `TPUReplicatedInput`",
                path.display()
            )));
        }
        host_feeds.push(feeds);
    }
    // One host alone: its replicas are numbered 0.. for the split, then mapped back.
    let own = host_replicas.first().cloned().unwrap_or_default();
    let split_replicas: Vec<Vec<u32>> = match only_host {
        Some(_) => vec![(0..own.len() as u32).collect()],
        None => host_replicas,
    };
    let per_input = exec::split_per_host(&host_feeds, &split_replicas).map_err(|e| Box::new(e) as AnyDiagnostic)?;
    let mut out = Vec::new();
    for (input, slices) in per_input {
        let operands = replica_operands(&loaded.module, &input)
            .ok_or_else(|| message(format!("`{input}` is not a `TPUReplicatedInput`")))?;
        let slices = match only_host {
            Some(_) => {
                let Some(first) = slices.first() else { continue };
                (0..operands.len())
                    .map(|r| own.iter().position(|&o| o as usize == r).map_or(first, |k| &slices[k]).clone())
                    .collect()
            }
            None => slices,
        };
        if operands.len() != slices.len() {
            return Err(message(format!(
                "`{input}` has {} replicas, but the input hosts feed {} replicas",
                operands.len(),
                slices.len()
            )));
        }
        out.extend(operands.into_iter().zip(slices));
    }
    Ok(out)
}

/// The variable handles (`VarHandleOp`) of `graph`, by name.
pub(super) fn variable_handles(graph: &crate::ir::Graph) -> std::collections::BTreeMap<String, crate::ir::NodeId> {
    graph
        .node_ids()
        .filter(|&id| &*graph.node(id).op == "VarHandleOp")
        .map(|id| (graph.node(id).name.to_string(), id))
        .collect()
}

/// The feeds (`--feeds` JSON, `--feed NAME=FILE.npy`) that give a
/// variable's value: their name (`name` or `name:0`) is a variable handle
/// of `graph`. Each must agree with the handle's dtype and known shape.
pub(super) fn variable_feeds(
    graph: &crate::ir::Graph,
    feeds_file: Option<&std::path::Path>,
    feed: &[String],
) -> Result<Vec<(String, Tensor)>, CliError> {
    let handles = variable_handles(graph);
    let handle_of = |name: &str| handles.get(name.strip_suffix(":0").unwrap_or(name)).copied();
    let mut out: Vec<(String, Tensor)> = Vec::new();
    if let Some(path) = feeds_file {
        let text = std::fs::read(path)
            .map_err(|e| CliError::Read { path: path.display().to_string(), reason: e.to_string() })?;
        // A file that does not parse is reported by the ordinary feed reader.
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&text) {
            if let Some(map) = value.get("feeds").unwrap_or(&value).as_object() {
                for (name, v) in map {
                    let Some(id) = handle_of(name) else { continue };
                    let dtype =
                        graph.node(id).attrs.get("dtype").and_then(|d| d.as_type()).unwrap_or(crate::ir::DType::F32);
                    let tensor = exec::tensor_from_json(v, dtype)
                        .map_err(|e| CliError::feed(format!("{}: variable `{name}`: {e}", path.display())))?;
                    out.push((graph.node(id).name.to_string(), tensor));
                }
            }
        }
    }
    for item in feed {
        let Some((name, file)) = item.split_once('=') else { continue };
        let Some(id) = handle_of(name) else { continue };
        let tensor = exec::read_npy_file(std::path::Path::new(file))
            .map_err(|e| CliError::feed(format!("--feed {name}={file}: {e}")))?;
        out.retain(|(n, _)| *n != *graph.node(id).name);
        out.push((graph.node(id).name.to_string(), tensor));
    }
    for (name, tensor) in &out {
        let Some(id) = handle_of(name) else { continue };
        let attrs = &graph.node(id).attrs;
        let dtype = attrs.get("dtype").and_then(|d| d.as_type());
        let dims = attrs.get("shape").and_then(|s| s.as_shape()).and_then(|s| s.dims.clone());
        let shape: Vec<i64> = tensor.shape().iter().map(|&d| d as i64).collect();
        let dtype_differs = dtype.is_some_and(|d| d != tensor.dtype());
        let shape_differs = dims
            .as_ref()
            .is_some_and(|dims| dims.len() != shape.len() || dims.iter().zip(&shape).any(|(a, b)| *a >= 0 && a != b));
        if dtype_differs || shape_differs {
            let declared =
                crate::tf::bundle::describe(dtype.unwrap_or(tensor.dtype()), dims.as_deref().unwrap_or(&shape));
            return Err(CliError::feed(format!(
                "the feed of variable `{name}` is {}, but the variable is {declared}",
                crate::tf::bundle::describe(tensor.dtype(), &shape)
            )));
        }
    }
    Ok(out)
}
