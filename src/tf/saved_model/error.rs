//! Errors of reading a SavedModel and of reading or writing its
//! tensor-bundle checkpoint.
//!
//! One enum for the layer, codes `tpu_rewrite::saved_model::*`. The files
//! are binary, so each error names its file and the byte offset or
//! checkpoint key where the problem is, instead of a span.

use miette::Diagnostic;
use thiserror::Error;

/// A problem with a SavedModel directory or a checkpoint.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum SavedModelError {
    /// A file of the SavedModel or checkpoint cannot be read.
    #[error("cannot read {file}: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::saved_model::read),
        help("a SavedModel directory holds `saved_model.pb` and `variables/variables.index` with its `variables.data-*-of-*` shards")
    )]
    Read {
        /// The file.
        file: String,
        /// The system's reason.
        reason: String,
    },

    /// `saved_model.pb` does not decode, or holds no usable MetaGraphDef.
    #[error("{file} is not a SavedModel: {reason}")]
    #[diagnostic(code(tpu_rewrite::saved_model::decode))]
    Decode {
        /// The file.
        file: String,
        /// What is wrong.
        reason: String,
    },

    /// `--function` names nothing the SavedModel has.
    #[error("the SavedModel has no function `{name}`")]
    #[diagnostic(code(tpu_rewrite::saved_model::no_function), help("choose one with --function: {available}"))]
    NoFunction {
        /// The name asked for.
        name: String,
        /// The signature keys and functions it has.
        available: String,
    },

    /// No `--function`, and no single serving signature to default to.
    #[error("the SavedModel has no `serving_default` signature; say which function to run")]
    #[diagnostic(code(tpu_rewrite::saved_model::choose_function), help("choose one with --function: {available}"))]
    ChooseFunction {
        /// The signature keys and functions it has.
        available: String,
    },

    /// The chosen function does not fit what the SavedModel says of it.
    #[error("function `{function}`: {reason}")]
    #[diagnostic(code(tpu_rewrite::saved_model::function))]
    Function {
        /// The function.
        function: String,
        /// What is wrong.
        reason: String,
    },

    /// The tensor-bundle index is damaged or truncated.
    #[error("{file}: the checkpoint index is damaged {detail}")]
    #[diagnostic(
        code(tpu_rewrite::saved_model::index),
        help("the index is a LevelDB-format table written by TensorFlow's tensor-bundle writer; copy it again from its source")
    )]
    Index {
        /// The index file.
        file: String,
        /// Where and what (`at byte N: ...`).
        detail: String,
    },

    /// A data shard is missing, or shorter than an entry says.
    #[error("{file}: checkpoint entry `{key}` needs bytes {start}..{end}, but the shard {reason}")]
    #[diagnostic(
        code(tpu_rewrite::saved_model::shard),
        help("each `variables.data-NNNNN-of-MMMMM` shard the index names must be present and complete")
    )]
    Shard {
        /// The shard file.
        file: String,
        /// The entry.
        key: String,
        /// First byte of the entry.
        start: u64,
        /// One past its last byte.
        end: u64,
        /// `is missing` or `has N bytes`.
        reason: String,
    },

    /// An entry's bytes do not match its CRC32C.
    #[error("{file}: checkpoint entry `{key}` (bytes {start}..{end}) fails its CRC32C check")]
    #[diagnostic(
        code(tpu_rewrite::saved_model::checksum),
        help("the shard is corrupt; copy it again from its source")
    )]
    Checksum {
        /// The shard file.
        file: String,
        /// The entry.
        key: String,
        /// First byte of the entry.
        start: u64,
        /// One past its last byte.
        end: u64,
    },

    /// An entry that does not decode, or that this reader does not support.
    #[error("{file}: checkpoint entry `{key}`: {reason}")]
    #[diagnostic(code(tpu_rewrite::saved_model::entry))]
    Entry {
        /// The index file.
        file: String,
        /// The entry.
        key: String,
        /// What is wrong.
        reason: String,
    },

    /// A checkpoint value disagrees with the variable the graph declares.
    #[error(
        "variable `{variable}`: the checkpoint holds {found} under `{key}`, but the SavedModel declares {declared}"
    )]
    #[diagnostic(
        code(tpu_rewrite::saved_model::mismatch),
        help("the checkpoint does not belong to this SavedModel, or it was edited")
    )]
    Mismatch {
        /// The variable's name.
        variable: String,
        /// Its checkpoint key.
        key: String,
        /// What the checkpoint holds (dtype and shape).
        found: String,
        /// What the object graph declares (dtype and shape).
        declared: String,
    },

    /// A variable the checkpoint has no value for.
    #[error("variable `{variable}` has no value in the checkpoint{key}")]
    #[diagnostic(code(tpu_rewrite::saved_model::missing_value))]
    MissingValue {
        /// The variable's name.
        variable: String,
        /// ` (key `...`)` when the object graph names one.
        key: String,
    },

    /// A checkpoint that cannot be written as asked.
    #[error("cannot write the checkpoint: {reason}")]
    #[diagnostic(code(tpu_rewrite::saved_model::write))]
    Write {
        /// What is wrong.
        reason: String,
    },
}
