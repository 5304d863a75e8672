//! `run --save-checkpoint DIR`: the variables after the last step as a
//! TensorFlow checkpoint, `DIR/ckpt.index` and `DIR/ckpt.data-00000-of-00001`
//! (a tensor bundle, [`crate::tf::bundle`]), with `DIR/checkpoint` naming it
//! for `tf.train.latest_checkpoint`.
//!
//! For a SavedModel the bundle has the keys of the SavedModel's own
//! checkpoint, its object graph included, so `tf.train.Checkpoint(...)
//! .restore` matches the user's objects; each captured variable's entry
//! holds the run's value and every other entry is copied as it was. For a
//! graph the keys are the variables' names. Every file is written
//! atomically, the index last.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::CliError;
use crate::exec::Tensor;
use crate::tf::bundle::{self, Entry};
use crate::tf::saved_model::Captured;

/// The checkpoint prefix inside the directory.
pub const PREFIX: &str = "ckpt";

/// The bundle entries of a run's variables.
fn entries(
    captured: Option<&Captured>,
    variables: &BTreeMap<String, Tensor>,
) -> Result<BTreeMap<String, Entry>, CliError> {
    let entry = |name: &str, t: &Tensor| {
        t.to_literal().as_ref().and_then(Entry::from_literal).ok_or_else(|| {
            CliError::usage(format!(
                "--save-checkpoint: variable `{name}` is {}, which a checkpoint here cannot hold",
                t.dtype()
            ))
        })
    };
    let Some(captured) = captured else {
        return variables.iter().map(|(name, t)| Ok((name.clone(), entry(name, t)?))).collect();
    };
    let mut out = captured.checkpoint.clone();
    for v in &captured.variables {
        let Some(t) = variables.get(&v.name) else {
            return Err(CliError::usage(format!("--save-checkpoint: the run gave no value for variable `{}`", v.name)));
        };
        out.insert(v.checkpoint_key.clone().unwrap_or_else(|| v.name.clone()), entry(&v.name, t)?);
    }
    Ok(out)
}

/// Writes the checkpoint into `dir` (made if missing); gives its prefix.
pub(super) fn save(
    dir: &Path,
    captured: Option<&Captured>,
    variables: &BTreeMap<String, Tensor>,
) -> Result<std::path::PathBuf, CliError> {
    let entries = entries(captured, variables)?;
    let (index, data) = bundle::encode_bundle(&entries).map_err(|e| CliError::usage(e.to_string()))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::Write { path: dir.display().to_string(), reason: e.to_string() })?;
    let prefix = dir.join(PREFIX);
    super::io::write_file(&bundle::shard_path(&prefix, 0, 1), &data)?;
    super::io::write_file(&bundle::index_path(&prefix), &index)?;
    let state = format!("model_checkpoint_path: \"{PREFIX}\"\nall_model_checkpoint_paths: \"{PREFIX}\"\n");
    super::io::write_file(&dir.join("checkpoint"), state.as_bytes())?;
    Ok(prefix)
}
