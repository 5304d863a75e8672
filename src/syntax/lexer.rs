//! The logos lexer and the adapter that feeds lalrpop.
//!
//! The adapter yields `(start, Token, end)` triples. It also enforces the
//! nesting limit: every `(`, `[` and `{` deeper than [`MAX_NESTING`] is
//! reported as an error, so no later stage can recurse without bound.

use logos::Logos;

use super::error::SyntaxError;
use super::span::Span;

/// The deepest bracket nesting the parser accepts.
pub const MAX_NESTING: usize = 128;

/// A lexical token. Borrowed slices point into the source text.
#[derive(Logos, Clone, Copy, Debug, PartialEq)]
#[logos(skip r"[ \t\r\n\f]+")]
pub enum Token<'src> {
    /// `graph`, which opens a graph definition.
    #[token("graph")]
    KwGraph,
    /// `replicate`, which opens a replicate region.
    #[token("replicate")]
    KwReplicate,
    /// `outside_compilation`, which opens a host-side block inside a replicate region.
    #[token("outside_compilation")]
    KwOutsideCompilation,
    /// `gradients`, the gradients statement.
    #[token("gradients")]
    KwGradients,
    /// `return`, which names a replicate region's outputs.
    #[token("return")]
    KwReturn,
    /// `on`, which introduces a node's device.
    #[token("on")]
    KwOn,
    /// The boolean literal `true`.
    #[token("true")]
    KwTrue,
    /// The boolean literal `false`.
    #[token("false")]
    KwFalse,
    /// `shape`, which opens a shape literal.
    #[token("shape")]
    KwShape,
    /// `tensor`, which opens a tensor literal.
    #[token("tensor")]
    KwTensor,
    /// `bytes`, which gives a tensor literal as raw little-endian content.
    #[token("bytes")]
    KwBytes,
    /// `func`, which opens a function reference.
    #[token("func")]
    KwFunc,
    /// `placeholder`, which opens a reference to an enclosing function's attribute.
    #[token("placeholder")]
    KwPlaceholder,
    /// `dtype`, which opens a dtype given by its TensorFlow number.
    #[token("dtype")]
    KwDtype,
    /// `ys`, the gradients statement's values to differentiate.
    #[token("ys")]
    KwYs,
    /// `xs`, the gradients statement's values to differentiate with respect to.
    #[token("xs")]
    KwXs,
    /// `grad_ys`, the gradients statement's initial gradients.
    #[token("grad_ys")]
    KwGradYs,

    /// A node name: `%` followed by name characters, or `%"..."`.
    #[regex(r"%[A-Za-z0-9_.][A-Za-z0-9_.\-/>]*", |lex| &lex.slice()[1..])]
    #[token("%\"", quoted_name)]
    NodeName(&'src str),
    /// A graph name: `@` followed by name characters, or `@"..."`.
    #[regex(r"@[A-Za-z0-9_.][A-Za-z0-9_.\-/>]*", |lex| &lex.slice()[1..])]
    #[token("@\"", quoted_name)]
    GraphName(&'src str),
    /// An identifier: op types, attribute keys, dtypes, `inf`, `nan`.
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Ident(&'src str),
    /// An integer literal.
    #[regex(r"-?[0-9]+", priority = 3)]
    Int(&'src str),
    /// A float literal; always carries a `.` or an exponent.
    #[regex(r"-?[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?")]
    #[regex(r"-?[0-9]+[eE][+-]?[0-9]+")]
    #[token("-inf")]
    Float(&'src str),
    /// A string literal, quotes included; escapes are decoded by the parser.
    #[token("\"", string_literal)]
    Str(&'src str),
    /// A `//` comment; skipped by the adapter.
    #[token("//", line_comment)]
    Comment,

    /// `=`, after a node name or an attribute key.
    #[token("=")]
    Eq,
    /// `,`, between list items.
    #[token(",")]
    Comma,
    /// `:`, before an output index.
    #[token(":")]
    Colon,
    /// `^`, which marks a control input.
    #[token("^")]
    Caret,
    /// `?`, an unknown dimension.
    #[token("?")]
    Question,
    /// `*`, an unknown rank.
    #[token("*")]
    Star,
    /// `(`.
    #[token("(")]
    LParen,
    /// `)`.
    #[token(")")]
    RParen,
    /// `[`.
    #[token("[")]
    LBracket,
    /// `]`.
    #[token("]")]
    RBracket,
    /// `{`.
    #[token("{")]
    LBrace,
    /// `}`.
    #[token("}")]
    RBrace,
}

impl std::fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::NodeName(n) => write!(f, "node name `%{n}`"),
            Token::GraphName(n) => write!(f, "graph name `@{n}`"),
            Token::Ident(s) => write!(f, "identifier `{s}`"),
            Token::Int(s) => write!(f, "integer `{s}`"),
            Token::Float(s) => write!(f, "float `{s}`"),
            Token::Str(_) => write!(f, "string literal"),
            other => write!(f, "`{}`", token_text(other)),
        }
    }
}

/// The fixed text of a keyword or punctuation token.
pub fn token_text(token: &Token<'_>) -> &'static str {
    match token {
        Token::KwGraph => "graph",
        Token::KwReplicate => "replicate",
        Token::KwOutsideCompilation => "outside_compilation",
        Token::KwGradients => "gradients",
        Token::KwReturn => "return",
        Token::KwOn => "on",
        Token::KwTrue => "true",
        Token::KwFalse => "false",
        Token::KwShape => "shape",
        Token::KwTensor => "tensor",
        Token::KwBytes => "bytes",
        Token::KwFunc => "func",
        Token::KwPlaceholder => "placeholder",
        Token::KwDtype => "dtype",
        Token::KwYs => "ys",
        Token::KwXs => "xs",
        Token::KwGradYs => "grad_ys",
        Token::Eq => "=",
        Token::Comma => ",",
        Token::Colon => ":",
        Token::Caret => "^",
        Token::Question => "?",
        Token::Star => "*",
        Token::LParen => "(",
        Token::RParen => ")",
        Token::LBracket => "[",
        Token::RBracket => "]",
        Token::LBrace => "{",
        Token::RBrace => "}",
        Token::Comment => "//",
        Token::NodeName(_)
        | Token::GraphName(_)
        | Token::Ident(_)
        | Token::Int(_)
        | Token::Float(_)
        | Token::Str(_) => "",
    }
}

/// Scans the rest of a string literal after its opening quote.
///
/// A hand-written scan instead of a regex: logos' generated matcher for a
/// repeated alternation recurses per character in debug builds, which
/// overflows the stack on multi-megabyte literals.
fn scan_string(rest: &str) -> Option<usize> {
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some(i + 1),
            b'\\' if i + 1 < bytes.len() && bytes[i + 1] != b'\n' => i += 2,
            b'\n' | b'\\' => return None,
            _ => i += 1,
        }
    }
    None
}

fn string_literal<'src>(lex: &mut logos::Lexer<'src, Token<'src>>) -> Result<&'src str, ()> {
    let len = scan_string(lex.remainder());
    match len {
        Some(n) => {
            lex.bump(n);
            Ok(lex.slice())
        }
        None => {
            // Cover the unterminated literal up to the end of its line.
            let line = lex.remainder().find('\n').unwrap_or(lex.remainder().len());
            lex.bump(line);
            Err(())
        }
    }
}

fn quoted_name<'src>(lex: &mut logos::Lexer<'src, Token<'src>>) -> Result<&'src str, ()> {
    string_literal(lex).map(|s| &s[1..])
}

fn line_comment<'src>(lex: &mut logos::Lexer<'src, Token<'src>>) -> logos::Skip {
    let line = lex.remainder().find('\n').unwrap_or(lex.remainder().len());
    lex.bump(line);
    logos::Skip
}

/// Wraps the logos lexer into the `(start, token, end)` stream lalrpop wants.
pub struct Lexer<'src> {
    inner: logos::Lexer<'src, Token<'src>>,
    depth: usize,
    failed: bool,
}

impl<'src> Lexer<'src> {
    /// Starts lexing `source`.
    pub fn new(source: &'src str) -> Self {
        Lexer { inner: Token::lexer(source), depth: 0, failed: false }
    }
}

/// One item of the token stream.
pub type Spanned<'src> = Result<(usize, Token<'src>, usize), SyntaxError>;

impl<'src> Iterator for Lexer<'src> {
    type Item = Spanned<'src>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let token = self.inner.next()?;
        let range = self.inner.span();
        let span = Span::new(range.start, range.end);
        match token {
            Ok(token) => {
                match token {
                    Token::LParen | Token::LBracket | Token::LBrace => {
                        self.depth += 1;
                        if self.depth > MAX_NESTING {
                            self.failed = true;
                            return Some(Err(SyntaxError::TooDeep { span, limit: MAX_NESTING }));
                        }
                    }
                    Token::RParen | Token::RBracket | Token::RBrace => {
                        self.depth = self.depth.saturating_sub(1);
                    }
                    _ => {}
                }
                Some(Ok((range.start, token, range.end)))
            }
            Err(()) => {
                self.failed = true;
                let text = self.inner.slice();
                Some(Err(SyntaxError::invalid_token(text, span)))
            }
        }
    }
}
