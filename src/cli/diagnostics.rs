//! Rendering of diagnostics: the only place that attaches source text.
//!
//! The library returns concrete error types; here they become
//! `miette::Report`s with a [`WindowedSource`], rendered in colour on a
//! terminal and as plain text at a fixed width for snapshots.

use std::sync::Arc;

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme, Report, Severity};

use super::source::WindowedSource;

/// How to render.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Unicode, colours when the terminal supports them.
    Terminal,
    /// Unicode without colour at a fixed width: stable for snapshots.
    Plain { width: usize },
}

/// A diagnostic with its source attached, ready to print.
pub struct Rendered {
    pub text: String,
    pub is_error: bool,
}

/// A diagnostic of any layer, boxed.
pub type AnyDiagnostic = Box<dyn Diagnostic + Send + Sync + 'static>;

/// Renders one diagnostic against its source.
pub fn render(diagnostic: AnyDiagnostic, source: &Arc<WindowedSource>, style: Style) -> Rendered {
    let is_error = diagnostic.severity().unwrap_or(Severity::Error) == Severity::Error;
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
