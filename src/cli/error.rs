//! Errors of the command line itself: files it cannot read or write,
//! options that do not fit the input, feeds it cannot decode.
//!
//! One enum, codes `tpu_rewrite::cli::*`. Most carry no span and name the
//! path or option the user gave; those about the input point into it.
//! Errors inside an input (syntax, verification, passes, lowering,
//! execution) keep their own layer's enum.

use miette::Diagnostic;
use thiserror::Error;

/// An error of the command line.
#[derive(Debug, Error, Diagnostic)]
pub enum CliError {
    /// An input file cannot be read.
    #[error("cannot read {path}: {reason}")]
    #[diagnostic(code(tpu_rewrite::cli::read))]
    Read { path: String, reason: String },

    /// An output (`-o`, `--write`, standard output, `--npy-dir`) cannot be written.
    #[error("cannot write {path}: {reason}")]
    #[diagnostic(code(tpu_rewrite::cli::write))]
    Write { path: String, reason: String },

    /// Standard output is closed (`>&-`): the result would be lost.
    #[error("standard output is closed; the result cannot be written")]
    #[diagnostic(code(tpu_rewrite::cli::stdout_closed), help("redirect it to a file, or use -o FILE"))]
    StdoutClosed,

    /// An option's value is not usable.
    #[error("{message}")]
    #[diagnostic(code(tpu_rewrite::cli::usage))]
    Usage { message: String },

    /// A feed (`--feeds`, `--feed`, `--feed-per-host`) cannot be read or decoded.
    #[error("{message}")]
    #[diagnostic(code(tpu_rewrite::cli::feed))]
    Feed { message: String },

    /// A feed's value cannot be decoded as its tensor. Labelled at the node
    /// it feeds; the related note points at the value in the feed file.
    #[error("{file}: feed `{tensor}`: {message}")]
    #[diagnostic(code(tpu_rewrite::cli::feed_value), help("a feed is a number, or nested arrays of one shape"))]
    FeedValue {
        file: String,
        tensor: String,
        message: String,
        #[label("fed here from {file}")]
        span: Option<crate::syntax::Span>,
        /// Where the value sits in the feed file.
        #[related]
        in_file: Vec<InFile>,
    },

    /// A JSON feed file is not JSON (labelled where the parser stopped).
    #[error("{file}: not JSON: {message}")]
    #[diagnostic(
        code(tpu_rewrite::cli::feed_json),
        help("a feed file is a JSON object mapping tensor names to nested arrays")
    )]
    FeedJson {
        file: String,
        message: String,
        #[source_code]
        text: std::sync::Arc<miette::NamedSource<String>>,
        #[label("{message}")]
        at: miette::SourceSpan,
    },

    /// A GraphDef (`--format pb` / `pbtxt`) holds one graph; the module has another number.
    #[error("GraphDef output holds one graph; this module has {graphs}")]
    #[diagnostic(
        code(tpu_rewrite::cli::graphdef_graphs),
        help("emit a module of several graphs (a lowered module) as text or JSON")
    )]
    GraphDefGraphs {
        graphs: usize,
        #[label("a second graph")]
        span: Option<crate::syntax::Span>,
    },

    /// The printed module is larger than the parser reads back.
    #[error(transparent)]
    #[diagnostic(transparent)]
    TooLarge(#[from] crate::emit::text::TooLarge),

    /// A `--fetch` names no node of the graph.
    #[error("--fetch `{name}`: the graph has no node `{node}`")]
    #[diagnostic(code(tpu_rewrite::cli::unknown_fetch), help("{help}"))]
    UnknownFetch {
        /// The fetch as given.
        name: String,
        /// The node it names.
        node: String,
        /// The closest node's tensor, or how to find the names.
        help: String,
    },

    /// The module has no graph to lower.
    #[error("the module has no graph; nothing to lower")]
    #[diagnostic(code(tpu_rewrite::cli::no_graph))]
    NoGraph,

    /// A fetched variable handle whose variable the run does not report.
    #[error("`{name}` is a variable handle, but the run reports no value for variable `{variable}`")]
    #[diagnostic(
        code(tpu_rewrite::cli::variable_fetch),
        help("the run reports these variables: {available}; fetch a tensor that reads the variable instead")
    )]
    VariableFetch { name: String, variable: String, available: String },
}

impl CliError {
    /// A usage error from any message.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::Usage { message: message.into() }
    }

    /// A feed error from any message.
    pub fn feed(message: impl Into<String>) -> CliError {
        CliError::Feed { message: message.into() }
    }
}

/// A place in a file other than the graph's (a feed file), for a related note.
#[derive(Debug, Error, Diagnostic)]
#[error("in {file}")]
pub struct InFile {
    /// The file's path as the user gave it.
    pub file: String,
    /// The file's text.
    #[source_code]
    pub text: std::sync::Arc<miette::NamedSource<String>>,
    /// What is at the place.
    pub label: String,
    /// The place.
    #[label("{label}")]
    pub at: miette::SourceSpan,
}
