//! Rendering of diagnostics: the only place that attaches source text.
//!
//! The library returns concrete error types, each a `miette::Diagnostic`
//! with spans into the input. Here they become `miette::Report`s with a
//! [`WindowedSource`], rendered in colour on a terminal and as plain text at
//! a fixed width for snapshots, exactly as the `tpu-rewrite` binary prints
//! them. Messages, help and labels are cut to [`MAX_MESSAGE_CHARS`] and
//! [`MAX_LABEL_CHARS`], so rendering costs time linear in the snippet shown,
//! not in the input.
//!
//! ```
//! use tpu_rewrite::diagnostics::{render_plain, AnyDiagnostic};
//!
//! let source = b"graph @main { %y = Relu(%x) {T = f32} }";
//! let (_, errors) = tpu_rewrite::parse_module(source)?;
//! let diagnostics: Vec<AnyDiagnostic> = errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect();
//! let text = render_plain(diagnostics, "main.opg", source, 100);
//! assert!(text.contains("unknown input `%x`") && text.contains("main.opg:1:"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme, Report, Severity};

pub mod source;

pub use source::WindowedSource;

/// How to render.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Unicode, colours when the terminal supports them.
    Terminal,
    /// Unicode without colour at a fixed width: stable for snapshots.
    Plain {
        /// The line width in columns.
        width: usize,
    },
}

/// A diagnostic with its source attached, ready to print.
pub struct Rendered {
    /// The rendered report.
    pub text: String,
    /// Whether the diagnostic is an error (not a warning or advice).
    pub is_error: bool,
}

/// A diagnostic of any layer, boxed.
pub type AnyDiagnostic = Box<dyn Diagnostic + Send + Sync + 'static>;

/// The most characters a label keeps; a longer one (a 20 MiB token quoted
/// in it) is cut with `…`, since the renderer wraps labels character by
/// character and would need gigabytes.
pub const MAX_LABEL_CHARS: usize = 120;

/// The most characters a message or help keeps.
pub const MAX_MESSAGE_CHARS: usize = 1_000;

/// `text` cut to `max` characters with `…` when longer.
pub fn shorten(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some((end, _)) => std::borrow::Cow::Owned(format!("{}…", &text[..end])),
    }
}

/// A diagnostic whose message, help and labels are shortened (see
/// [`shorten`]); everything else is the wrapped one's.
struct Shortened {
    inner: AnyDiagnostic,
    message: String,
}

impl std::fmt::Debug for Shortened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::fmt::Display for Shortened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Shortened {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source()
    }
}

impl Diagnostic for Shortened {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.inner.code()
    }
    fn severity(&self) -> Option<Severity> {
        self.inner.severity()
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        let help = self.inner.help()?.to_string();
        Some(Box::new(shorten(&help, MAX_MESSAGE_CHARS).into_owned()))
    }
    fn url<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.inner.url()
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.inner.source_code()
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        let labels = self.inner.labels()?;
        Some(Box::new(labels.map(|l| {
            let text = l.label().map(|t| shorten(t, MAX_LABEL_CHARS).into_owned());
            if l.primary() {
                miette::LabeledSpan::new_primary_with_span(text, *l.inner())
            } else {
                miette::LabeledSpan::new_with_span(text, *l.inner())
            }
        })))
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        self.inner.related()
    }
    fn diagnostic_source(&self) -> Option<&dyn Diagnostic> {
        self.inner.diagnostic_source()
    }
}

/// Renders one diagnostic against its source.
pub fn render(diagnostic: AnyDiagnostic, source: &Arc<WindowedSource>, style: Style) -> Rendered {
    let is_error = diagnostic.severity().unwrap_or(Severity::Error) == Severity::Error;
    let message = shorten(&diagnostic.to_string(), MAX_MESSAGE_CHARS).into_owned();
    let diagnostic: AnyDiagnostic = Box::new(Shortened { inner: diagnostic, message });
    let report = Report::new_boxed(diagnostic).with_source_code(SharedSource(source.clone()));
    let handler = match style {
        Style::Terminal => {
            let theme =
                if std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none() {
                    GraphicalTheme::unicode()
                } else {
                    GraphicalTheme::unicode_nocolor()
                };
            GraphicalReportHandler::new_themed(theme)
        }
        Style::Plain { width } => {
            GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(width)
        }
    };
    let mut text = String::new();
    if handler.render_report(&mut text, report.as_ref()).is_err() {
        text = format!("{report}\n");
    }
    Rendered { text, is_error }
}

/// Renders a list of diagnostics as plain text at a fixed width.
pub fn render_plain(diagnostics: Vec<AnyDiagnostic>, name: &str, source: &[u8], width: usize) -> String {
    let source = Arc::new(WindowedSource::new(name, source));
    diagnostics.into_iter().map(|d| render(d, &source, Style::Plain { width }).text).collect::<Vec<_>>().join("\n")
}

#[derive(Debug)]
struct SharedSource(Arc<WindowedSource>);

impl miette::SourceCode for SharedSource {
    fn read_span<'a>(
        &'a self,
        span: &miette::SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        self.0.read_span(span, before, after)
    }
}
