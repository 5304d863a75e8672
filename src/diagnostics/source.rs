//! Source text for miette reports, windowed so that huge inputs render fast.
//!
//! miette's own `SourceCode` for strings scans from the start of the file
//! and prints whole lines. [`WindowedSource`] cuts out only the lines around
//! a span, and for a line longer than [`MAX_LINE`] bytes only a window of it,
//! so a diagnostic in a 10 MB line prints a short, readable snippet with the
//! correct `file:line:col`.

use miette::{MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};

/// Lines longer than this are shown as a window around the span.
pub const MAX_LINE: usize = 240;
const WINDOW: usize = 60;

/// A named source whose snippets are cut to a window around each span.
#[derive(Debug)]
pub struct WindowedSource {
    name: String,
    text: String,
}

impl WindowedSource {
    /// Wraps `bytes` (decoded lossily if they are not UTF-8).
    pub fn new(name: impl Into<String>, bytes: &[u8]) -> WindowedSource {
        WindowedSource::from_vec(name, bytes.to_vec())
    }

    /// Wraps `bytes` without copying them when they are clean UTF-8 text.
    pub fn from_vec(name: impl Into<String>, bytes: Vec<u8>) -> WindowedSource {
        let text = match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => {
                let bytes = e.into_bytes();
                // Keep byte offsets stable: replace each invalid byte by '?'.
                let mut out = String::with_capacity(bytes.len());
                let mut rest = bytes.as_slice();
                while !rest.is_empty() {
                    match std::str::from_utf8(rest) {
                        Ok(s) => {
                            out.push_str(s);
                            break;
                        }
                        Err(e) => {
                            let (good, bad) = rest.split_at(e.valid_up_to());
                            out.push_str(std::str::from_utf8(good).unwrap_or_default());
                            let n = e.error_len().unwrap_or(bad.len());
                            out.extend(std::iter::repeat_n('?', n));
                            rest = &bad[n..];
                        }
                    }
                }
                out
            }
        };
        // NUL bytes confuse terminals; show them as a character of the same width.
        let text = if text.contains('\0') { text.replace('\0', " ") } else { text };
        WindowedSource { name: name.into(), text }
    }

    /// The whole text (invalid UTF-8 bytes shown as `?`, offsets kept).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The source name shown in reports.
    pub fn name(&self) -> &str {
        &self.name
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

impl SourceCode for WindowedSource {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let text = self.text.as_str();
        let start = floor_boundary(text, span.offset());
        if start > text.len() {
            return Err(MietteError::OutOfBounds);
        }
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line_number = text.as_bytes()[..line_start].iter().filter(|&&b| b == b'\n').count();
        if line_end - line_start > MAX_LINE {
            // Show a window of this line only, without context lines.
            let from = floor_boundary(text, start.saturating_sub(WINDOW).max(line_start));
            let to = ceil_boundary(text, (start + WINDOW).min(line_end));
            let column = text[line_start..start].chars().count();
            let data = &text.as_bytes()[from..to];
            return Ok(Box::new(MietteSpanContents::new_named(
                self.name.clone(),
                data,
                SourceSpan::new(from.into(), to - from),
                line_number,
                column,
                1,
            )));
        }
        // Take the context lines around the span and let miette lay them out.
        let mut from = line_start;
        for _ in 0..context_lines_before {
            if from == 0 {
                break;
            }
            from = text[..from - 1].rfind('\n').map_or(0, |i| i + 1);
        }
        let end = ceil_boundary(text, (span.offset() + span.len()).min(text.len()));
        let mut to = text[end..].find('\n').map_or(text.len(), |i| end + i);
        for _ in 0..context_lines_after {
            if to >= text.len() {
                break;
            }
            to = text[to + 1..].find('\n').map_or(text.len(), |i| to + 1 + i);
        }
        let window = &text[from..to];
        if window.lines().any(|l| l.len() > MAX_LINE) {
            // A long context line: show the span's own line only.
            let to = line_end;
            let column = text[line_start..start].chars().count();
            return Ok(Box::new(MietteSpanContents::new_named(
                self.name.clone(),
                &text.as_bytes()[line_start..to],
                SourceSpan::new(line_start.into(), to - line_start),
                line_number,
                column,
                1,
            )));
        }
        let local = SourceSpan::new((start - from).into(), end.saturating_sub(start));
        let contents = window.read_span(&local, context_lines_before, context_lines_after)?;
        let base_line = text.as_bytes()[..from].iter().filter(|&&b| b == b'\n').count();
        let data_offset = contents.span().offset() + from;
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            contents.data(),
            SourceSpan::new(data_offset.into(), contents.span().len()),
            contents.line() + base_line,
            contents.column(),
            contents.line_count(),
        )))
    }
}
