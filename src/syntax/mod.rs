//! Text to AST: the logos lexer, the lalrpop parser and its error mapping.
//!
//! [`parse`] never panics: every failure of the lexer or grammar becomes a
//! [`SyntaxError`] with a span into the source.

pub mod ast;
pub mod error;
pub mod lexer;
pub mod literal;
pub mod mlir;
pub mod sink;
pub mod span;

#[allow(clippy::all, clippy::pedantic, unused_parens, unused_qualifications)]
mod grammar {
    include!(concat!(env!("OUT_DIR"), "/opg.rs"));
}

use lalrpop_util::ParseError;

pub use error::SyntaxError;
pub use span::Span;

/// Parses `.opg` source bytes. Checks UTF-8 and size first.
pub fn parse_bytes(bytes: &[u8]) -> Result<ast::Module<'_>, SyntaxError> {
    parse(check_text(bytes)?)
}

/// Parses `.opg` source text into an AST.
pub fn parse(source: &str) -> Result<ast::Module<'_>, SyntaxError> {
    let tree = sink::TreeSink::default();
    let header = parse_into(source, &tree)?;
    Ok(ast::Module { header, graphs: tree.finish() })
}

/// Parses `.opg` source text, streaming statements into `sink`.
///
/// Returns the module's header comment lines. On error the sink may have
/// seen part of the input; callers discard what it built.
pub fn parse_into<'s>(source: &'s str, sink: &dyn sink::Sink<'s>) -> Result<Vec<&'s str>, SyntaxError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(SyntaxError::TooLarge { span: Span::new(u32::MAX as usize - 1, u32::MAX as usize) });
    }
    if let Some(pos) = memchr_nul(source) {
        return Err(SyntaxError::NulByte { span: Span::new(pos, pos + 1) });
    }
    let lexer = lexer::Lexer::new(source);
    let graphs = grammar::ModuleParser::new().parse(sink, lexer).map_err(|e| convert_error(e, source))?;
    if graphs == 0 {
        let span = eof_span(source, source.len());
        return Err(SyntaxError::Empty { span });
    }
    Ok(header_comments(source))
}

fn memchr_nul(source: &str) -> Option<usize> {
    source.as_bytes().iter().position(|&b| b == 0)
}

/// The largest source the parser reads: spans hold 32-bit offsets.
pub const MAX_SOURCE_BYTES: usize = u32::MAX as usize - 1;

/// Checks size and UTF-8 of source bytes.
pub fn check_text(bytes: &[u8]) -> Result<&str, SyntaxError> {
    if bytes.len() > MAX_SOURCE_BYTES {
        return Err(SyntaxError::TooLarge { span: Span::new(u32::MAX as usize - 1, u32::MAX as usize) });
    }
    std::str::from_utf8(bytes).map_err(|e| {
        let start = e.valid_up_to();
        let len = e.error_len().unwrap_or(bytes.len() - start).max(1);
        SyntaxError::InvalidUtf8 { span: Span::new(start, start + len) }
    })
}

/// The `//` comment lines before the first token, without the `//`.
fn header_comments(source: &str) -> Vec<&str> {
    let mut header = Vec::new();
    for line in source.lines() {
        let trimmed = line.trim();
        if let Some(comment) = trimmed.strip_prefix("//") {
            header.push(comment.strip_prefix(' ').unwrap_or(comment).trim_end());
        } else if !trimmed.is_empty() {
            break;
        }
    }
    header
}

/// A span for an end-of-input position that miette can always render.
fn eof_span(source: &str, location: usize) -> Span {
    if source.is_empty() {
        return Span::new(0, 0);
    }
    let location = location.min(source.len());
    // Point at the last character before the end, so the label is visible.
    let start = source[..location].char_indices().next_back().map_or(0, |(i, _)| i);
    Span::new(start, location.max(start + 1).min(source.len()))
}

/// A grammar terminal as users know it.
fn describe_terminal(terminal: &str) -> String {
    match terminal {
        "NODE" => "a node name `%name`".into(),
        "GRAPH" => "a graph name `@name`".into(),
        "IDENT" => "an identifier".into(),
        "INT" => "an integer".into(),
        "FLOAT" => "a float".into(),
        "STR" => "a string".into(),
        quoted => format!("`{}`", quoted.trim_matches('"').replace("\\\"", "\"")),
    }
}

fn format_expected(expected: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut items: Vec<String> = expected.iter().map(|s| describe_terminal(s)).collect();
    items.sort_unstable();
    items.dedup();
    let mut text = items.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > SHOWN {
        text.push_str(&format!(", … ({} more)", items.len() - SHOWN));
    }
    if text.is_empty() {
        text.push_str("nothing more");
    }
    text
}

fn convert_error(error: ParseError<usize, lexer::Token<'_>, SyntaxError>, source: &str) -> SyntaxError {
    match error {
        ParseError::InvalidToken { location } => {
            let end = source[location..].chars().next().map_or(location, |c| location + c.len_utf8());
            SyntaxError::invalid_token(&source[location..end], Span::new(location, end))
        }
        ParseError::UnrecognizedEof { location, expected } => {
            if source.trim().is_empty() {
                return SyntaxError::Empty { span: eof_span(source, location) };
            }
            SyntaxError::UnexpectedEof { expected: format_expected(&expected), span: eof_span(source, location) }
        }
        ParseError::UnrecognizedToken { token: (l, token, r), expected } => SyntaxError::UnexpectedToken {
            found: token.to_string(),
            expected: format_expected(&expected),
            span: Span::new(l, r),
        },
        ParseError::ExtraToken { token: (l, token, r) } => SyntaxError::UnexpectedToken {
            found: token.to_string(),
            expected: "end of input".into(),
            span: Span::new(l, r),
        },
        ParseError::User { error } => error,
    }
}
