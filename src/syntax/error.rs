//! Errors of the syntax layer: lexing, parsing and literal decoding.
//!
//! Every variant carries the [`Span`] it is about, a label, a stable error
//! code (`tpu_rewrite::syntax::*`) and, where there is one, a hint.

use miette::Diagnostic;
use thiserror::Error;

use super::span::Span;

/// An error found while turning text into an AST.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum SyntaxError {
    /// The input is not valid UTF-8.
    #[error("the input is not valid UTF-8")]
    #[diagnostic(
        code(tpu_rewrite::syntax::invalid_utf8),
        help("`.opg` files are UTF-8 text; write arbitrary bytes in strings as `\\xNN` escapes")
    )]
    InvalidUtf8 {
        /// The first byte sequence that is not UTF-8.
        #[label("invalid byte sequence here")]
        span: Span,
    },

    /// The input has no graph at all.
    #[error("the input is empty")]
    #[diagnostic(
        code(tpu_rewrite::syntax::empty),
        help("a module holds at least one graph, e.g. `graph @main {{ %x = Placeholder() {{dtype = f32}} }}`")
    )]
    Empty {
        /// The end of the input.
        #[label("expected a graph here")]
        span: Span,
    },

    /// A NUL byte, which `.opg` text never contains.
    #[error("NUL byte in the input")]
    #[diagnostic(
        code(tpu_rewrite::syntax::nul_byte),
        help("this looks like a binary file; a GraphDef `.pb` is read with `--input-format pb`")
    )]
    NulByte {
        /// The first NUL byte.
        #[label("NUL byte")]
        span: Span,
    },

    /// A character sequence that is no token.
    #[error("unexpected character {text:?}")]
    #[diagnostic(code(tpu_rewrite::syntax::invalid_token), help("{help}"))]
    InvalidToken {
        /// The characters that start no token.
        text: String,
        /// A hint suited to the characters, such as the token the user may have meant.
        help: String,
        /// The characters.
        #[label("not a token")]
        span: Span,
    },

    /// A string literal without its closing quote on the same line.
    #[error("unterminated string literal")]
    #[diagnostic(
        code(tpu_rewrite::syntax::unterminated_string),
        help("a string literal ends with `\"` on the same line; write a newline as `\\n`")
    )]
    UnterminatedString {
        /// The string, from its opening quote to the end of the line.
        #[label("this string is not closed")]
        span: Span,
    },

    /// A token the grammar does not allow at this point.
    #[error("unexpected {found}")]
    #[diagnostic(code(tpu_rewrite::syntax::unexpected_token), help("expected one of: {expected}"))]
    UnexpectedToken {
        /// The token found, as users know it.
        found: String,
        /// The tokens the grammar allows here, comma-separated.
        expected: String,
        /// The token found.
        #[label("unexpected here")]
        span: Span,
    },

    /// The input ends before the construct that was open is closed.
    #[error("unexpected end of input")]
    #[diagnostic(code(tpu_rewrite::syntax::unexpected_eof), help("expected one of: {expected}"))]
    UnexpectedEof {
        /// The tokens the grammar allows here, comma-separated.
        expected: String,
        /// The last character of the input.
        #[label("input ends here")]
        span: Span,
    },

    /// Brackets nested deeper than the parser allows.
    #[error("nesting deeper than {limit} levels")]
    #[diagnostic(
        code(tpu_rewrite::syntax::too_deep),
        help("flatten the nested lists or regions; the limit guards against stack exhaustion")
    )]
    TooDeep {
        /// The deepest nesting allowed ([`MAX_NESTING`](super::lexer::MAX_NESTING)).
        limit: usize,
        /// The first bracket past the limit.
        #[label("this bracket is too deep")]
        span: Span,
    },

    /// A literal that does not decode (bad escape, out-of-range number).
    #[error("invalid literal: {reason}")]
    #[diagnostic(code(tpu_rewrite::syntax::invalid_literal))]
    InvalidLiteral {
        /// Why the literal does not decode.
        reason: String,
        /// The literal.
        #[label("{reason}")]
        span: Span,
    },

    /// The input is larger than a span can address.
    #[error("the input is larger than 4 GiB")]
    #[diagnostic(code(tpu_rewrite::syntax::too_large), help("split the module into several files"))]
    TooLarge {
        /// The last addressable byte.
        #[label("the limit is reached here")]
        span: Span,
    },
}

impl SyntaxError {
    /// Builds the error for text the lexer does not recognise.
    pub fn invalid_token(text: &str, span: Span) -> SyntaxError {
        if text.contains('\0') {
            return SyntaxError::NulByte { span };
        }
        if text.starts_with('"') || text.starts_with("%\"") {
            return SyntaxError::UnterminatedString { span };
        }
        let help = if text.starts_with('%') || text.starts_with('@') {
            "names are `%name`, `%\"quoted name\"`, `@graph` or `@\"quoted graph\"`".to_string()
        } else {
            "see the language reference in README.md".to_string()
        };
        let mut text: String = text.chars().take(40).collect();
        if text.is_empty() {
            text.push('?');
        }
        SyntaxError::InvalidToken { text, help, span }
    }

    /// The span the error points at.
    pub fn span(&self) -> Span {
        match self {
            SyntaxError::InvalidUtf8 { span }
            | SyntaxError::Empty { span }
            | SyntaxError::NulByte { span }
            | SyntaxError::InvalidToken { span, .. }
            | SyntaxError::UnterminatedString { span }
            | SyntaxError::UnexpectedToken { span, .. }
            | SyntaxError::UnexpectedEof { span, .. }
            | SyntaxError::TooDeep { span, .. }
            | SyntaxError::InvalidLiteral { span, .. }
            | SyntaxError::TooLarge { span } => *span,
        }
    }
}
