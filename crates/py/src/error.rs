//! Errors of the Python layer, and how any diagnostic of the library
//! becomes a `tpu_rewrite.Error`.
//!
//! Work runs without the GIL and returns a [`Failure`]: the library's
//! diagnostics with the source they point into, or a Python exception that
//! is pending (Ctrl-C). With the GIL back, [`Failure::into_py`] renders each
//! diagnostic as the CLI prints it and raises `tpu_rewrite.Error` carrying
//! `.code` and `.diagnostics` (one dict each: message, code, severity, help,
//! file, line, column, labels). Diagnostics that are the same (code,
//! message, spans) are kept once, as the CLI keeps them.

use std::sync::Arc;

use miette::{Diagnostic, SourceCode};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use thiserror::Error;
use tpu_rewrite::diagnostics::{render, AnyDiagnostic, Style, WindowedSource};

/// The width reports are rendered at (the CLI's on an 100-column terminal).
const REPORT_WIDTH: usize = 100;

/// An error of the Python layer itself: its arguments, files it reads.
#[derive(Debug, Error, Diagnostic)]
pub enum PyLayerError {
    /// A file or directory cannot be read.
    #[error("cannot read {path}: {reason}")]
    #[diagnostic(code(tpu_rewrite::py::read))]
    Read { path: String, reason: String },

    /// An argument's value is not one the function takes.
    #[error("{message}")]
    #[diagnostic(code(tpu_rewrite::py::argument))]
    Argument { message: String },

    /// A feed cannot become a tensor.
    #[error("feed `{name}`: {message}")]
    #[diagnostic(
        code(tpu_rewrite::py::feed),
        help("feeds are NumPy arrays of bool, int8, uint8, int32, int64, float16, bfloat16, float32 or float64")
    )]
    Feed { name: String, message: String },

    /// The module has no graph.
    #[error("the module has no graph")]
    #[diagnostic(code(tpu_rewrite::py::no_graph))]
    NoGraph,

    /// A Rust panic: a bug, reported instead of aborting the interpreter.
    #[error("internal error (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::py::panic), help("please report it with the input that caused it"))]
    Panic { message: String },
}

/// Why a call failed.
pub enum Failure {
    /// Diagnostics of the library (at least one an error), and their source.
    Diagnostics(Vec<AnyDiagnostic>, Arc<WindowedSource>),
    /// A Python exception to raise as it is (KeyboardInterrupt).
    Python(PyErr),
}

impl Failure {
    /// One diagnostic without a source of its own.
    pub fn of(error: impl Diagnostic + Send + Sync + 'static) -> Failure {
        Failure::Diagnostics(vec![Box::new(error)], Arc::new(WindowedSource::new("", b"")))
    }

    /// Diagnostics against `source`.
    pub fn at(errors: Vec<AnyDiagnostic>, source: &Arc<WindowedSource>) -> Failure {
        Failure::Diagnostics(errors, source.clone())
    }

    /// The exception to raise.
    pub fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Python(e) => e,
            Failure::Diagnostics(diagnostics, source) => match raise(py, diagnostics, &source) {
                Ok(e) | Err(e) => e,
            },
        }
    }
}

/// Boxes a list of concrete diagnostics.
pub fn boxed<E: Diagnostic + Send + Sync + 'static>(errors: Vec<E>) -> Vec<AnyDiagnostic> {
    errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect()
}

/// Whether a diagnostic is an error (not a warning or advice).
pub fn is_error(d: &AnyDiagnostic) -> bool {
    d.severity().unwrap_or(miette::Severity::Error) == miette::Severity::Error
}

/// A located place of a label: line and column, 1-based.
struct Place {
    line: usize,
    column: usize,
}

fn place(source: &WindowedSource, span: &miette::SourceSpan) -> Option<Place> {
    let contents = source.read_span(span, 0, 0).ok()?;
    Some(Place { line: contents.line() + 1, column: contents.column() + 1 })
}

/// What a diagnostic says, as a plain struct (made without the GIL).
pub struct DiagnosticInfo {
    message: String,
    code: Option<String>,
    severity: &'static str,
    help: Option<String>,
    file: String,
    place: Option<Place>,
    /// Label text, byte offset, length, place.
    labels: Vec<(Option<String>, usize, usize, Option<Place>)>,
}

impl DiagnosticInfo {
    /// Reads `d` against `source`.
    pub fn of(d: &dyn Diagnostic, source: &WindowedSource) -> DiagnosticInfo {
        let labels: Vec<_> = d
            .labels()
            .map(|labels| {
                labels.map(|l| (l.label().map(str::to_string), l.offset(), l.len(), place(source, l.inner()))).collect()
            })
            .unwrap_or_default();
        let place = labels.iter().find_map(|l| l.3.as_ref().map(|p| Place { line: p.line, column: p.column }));
        DiagnosticInfo {
            message: d.to_string(),
            code: d.code().map(|c| c.to_string()),
            severity: match d.severity().unwrap_or(miette::Severity::Error) {
                miette::Severity::Error => "error",
                miette::Severity::Warning => "warning",
                miette::Severity::Advice => "advice",
            },
            help: d.help().map(|h| h.to_string()),
            file: source.name().to_string(),
            place,
            labels,
        }
    }

    /// The dict `tpu_rewrite.Error.diagnostics` holds.
    pub fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("message", &self.message)?;
        dict.set_item("code", &self.code)?;
        dict.set_item("severity", self.severity)?;
        dict.set_item("help", &self.help)?;
        dict.set_item("file", &self.file)?;
        dict.set_item("line", self.place.as_ref().map(|p| p.line))?;
        dict.set_item("column", self.place.as_ref().map(|p| p.column))?;
        let labels = PyList::empty(py);
        for (text, offset, len, at) in &self.labels {
            let label = PyDict::new(py);
            label.set_item("text", text)?;
            label.set_item("offset", offset)?;
            label.set_item("length", len)?;
            label.set_item("line", at.as_ref().map(|p| p.line))?;
            label.set_item("column", at.as_ref().map(|p| p.column))?;
            labels.append(label)?;
        }
        dict.set_item("labels", labels)?;
        Ok(dict)
    }
}

/// What makes two diagnostics the same: code, message and labelled spans.
fn identity(d: &AnyDiagnostic) -> (String, String, Vec<(usize, usize)>) {
    let code = d.code().map(|c| c.to_string()).unwrap_or_default();
    let spans = d.labels().map(|l| l.map(|l| (l.offset(), l.len())).collect()).unwrap_or_default();
    (code, d.to_string(), spans)
}

/// Each distinct diagnostic once, in order.
pub fn distinct(diagnostics: Vec<AnyDiagnostic>) -> Vec<AnyDiagnostic> {
    let mut seen = std::collections::HashSet::new();
    diagnostics.into_iter().filter(|d| seen.insert(identity(d))).collect()
}

/// Builds `tpu_rewrite.Error(report, code, diagnostics)`.
fn raise(py: Python<'_>, diagnostics: Vec<AnyDiagnostic>, source: &Arc<WindowedSource>) -> PyResult<PyErr> {
    let diagnostics = distinct(diagnostics);
    let infos: Vec<DiagnosticInfo> = diagnostics.iter().map(|d| DiagnosticInfo::of(d.as_ref(), source)).collect();
    let code =
        diagnostics.iter().find(|d| is_error(d)).or(diagnostics.first()).and_then(|d| d.code()).map(|c| c.to_string());
    let report: Vec<String> =
        diagnostics.into_iter().map(|d| render(d, source, Style::Plain { width: REPORT_WIDTH }).text).collect();
    let list = PyList::empty(py);
    for info in &infos {
        list.append(info.to_dict(py)?)?;
    }
    let class = py.import("tpu_rewrite")?.getattr("Error")?;
    let value = class.call1((report.join("\n"), code, list))?;
    Ok(PyErr::from_value(value))
}

/// The message of a caught panic.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}
