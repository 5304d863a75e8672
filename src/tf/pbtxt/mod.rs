//! A parser for GraphDefs in protobuf text format, as `str(graph_def)` and
//! `tf.io.write_graph(..., as_text=True)` write them.
//!
//! Hand-written recursive descent over bytes, in one pass and without an
//! intermediate tree: each message type knows its fields (`TextMessage`, in
//! `messages`),
//! so values are decoded straight into the `prost` structs of
//! [`super::proto`]. The grammar covers what protobuf text printers emit:
//! `field: value`, `field { ... }` (also `field: { ... }` and `< ... >`),
//! scalar lists `field: [a, b]`, optional `,`/`;` separators, `#` comments,
//! adjacent string literals (concatenated), C escapes (`\n`, `\ooo`, `\xNN`,
//! `\uNNNN`, ...), enum values by name or number, floats such as `1e-05`,
//! `inf`, `-inf`, `nan` and `1.5f`, and integers in decimal or hex.
//!
//! The function library and the graph debug info are read by prost-reflect's
//! text format parser, with the descriptor of our schema
//! ([`super::proto::descriptor_pool`]), into the typed messages: a first
//! pass of our lexer finds where the field ends (and bounds its nesting),
//! prost-reflect parses that slice, and its errors are moved to spans in the
//! whole input ([`ImportError::TextFormat`]).
//!
//! Why the nodes are not read by prost-reflect too: on the 87 818-node
//! transformer (`gen --model transformer`, 28.6 MB of text) prost-reflect
//! (parse into a `DynamicMessage`, then transcode to the typed GraphDef)
//! took 4616 ms against 870 ms here, 5.3x slower; its printer took 2439 ms
//! against 194 ms for `pbtxt_print`, 12.5x (best of 3, wall time;
//! `cargo bench --bench import -- --test`, 2 cores at load average 9-12
//! from other builds, so the ratios matter more than the times). It also
//! keeps no node or input spans, which located import diagnostics need,
//! and prints maps in hash order. The rule was: keep ours past 2x.
//!
//! Nesting is limited to [`MAX_DEPTH`] levels so that no input can exhaust
//! the stack; every error carries the span of the offending text.

mod messages;

use std::borrow::Cow;

use super::error::ImportError;
use super::proto::{data_type_number, descriptor_pool, GraphDef, NodeDef};
use crate::syntax::Span;

/// The deepest message nesting the parser accepts.
pub const MAX_DEPTH: usize = 100;

type Result<T> = std::result::Result<T, ImportError>;

/// Where a node and each of its inputs stand in the text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSpans {
    /// From the `node` keyword to the closing brace.
    pub node: Span,
    /// One span per `input` string.
    pub inputs: Vec<Span>,
}

/// A GraphDef parsed from text, with its source spans.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TextGraphDef {
    /// The decoded GraphDef, function library included.
    pub graph: GraphDef,
    /// One entry per `graph.node`, in order.
    pub spans: Vec<NodeSpans>,
}

/// Parses a GraphDef from protobuf text.
pub fn parse_graphdef_text(src: &[u8]) -> Result<TextGraphDef> {
    if u32::try_from(src.len()).is_err() {
        return Err(ImportError::TooLarge { size: src.len() });
    }
    let mut p = Parser {
        lex: Lexer { src, pos: 0, peeked: None },
        depth: 0,
        spans: Vec::new(),
        inputs: Vec::new(),
        last_end: 0,
    };
    let mut out = TextGraphDef::default();
    while let Some((name, span)) = p.field_name(None)? {
        match name {
            b"node" => {
                p.inputs.clear();
                let node: NodeDef = p.message()?;
                let end = p.last_end;
                p.spans.push(NodeSpans {
                    node: Span::new(span.start as usize, end),
                    inputs: std::mem::take(&mut p.inputs),
                });
                out.graph.node.push(node);
            }
            b"versions" => out.graph.versions = Some(p.message()?),
            b"version" => out.graph.version = p.scalar(Parser::int)?,
            b"library" => out.graph.library = p.reflected_field(span)?.library,
            b"debug_info" => out.graph.debug_info = p.reflected_field(span)?.debug_info,
            _ => return Err(unknown_field("GraphDef", "node, versions, version, library, debug_info", name, span)),
        }
    }
    out.spans = p.spans;
    Ok(out)
}

/// The help of a misspelt enum value name: the closest name, else the names.
fn enum_help(name: &str, names: impl Iterator<Item = &'static str>) -> String {
    let names: Vec<&str> = names.collect();
    match crate::ir::suggest::closest(name, names.iter().copied()) {
        Some(near) => format!("did you mean `{near}`?"),
        None => format!("the names are {}; a number is accepted too", names.join(", ")),
    }
}

fn unknown_field(message: &'static str, known: &'static str, name: &[u8], span: Span) -> ImportError {
    ImportError::UnknownField { message, field: String::from_utf8_lossy(name).into_owned(), known, span }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Ident,
    Number,
    Str,
    Punct(u8),
    Eof,
}

#[derive(Clone, Copy, Debug)]
struct Token {
    kind: Tok,
    start: usize,
    end: usize,
}

impl Token {
    fn span(&self) -> Span {
        Span::new(self.start, self.end)
    }
}

struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    peeked: Option<Token>,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl<'a> Lexer<'a> {
    fn skip_trivia(&mut self) {
        while let Some(&b) = self.src.get(self.pos) {
            match b {
                b' ' | b'\n' | b'\t' | b'\r' | b'\x0c' | b'\x0b' => self.pos += 1,
                b'#' => {
                    while self.src.get(self.pos).is_some_and(|&c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn lex(&mut self) -> Result<Token> {
        self.skip_trivia();
        let start = self.pos;
        let Some(&b) = self.src.get(start) else {
            return Ok(Token { kind: Tok::Eof, start, end: start });
        };
        let kind = match b {
            b'{' | b'}' | b'<' | b'>' | b'[' | b']' | b':' | b',' | b';' => {
                self.pos += 1;
                Tok::Punct(b)
            }
            b'"' | b'\'' => {
                self.pos += 1;
                loop {
                    match self.src.get(self.pos) {
                        None | Some(b'\n') => {
                            return Err(ImportError::UnterminatedString { span: Span::new(start, self.pos) })
                        }
                        Some(b'\\') => self.pos += 2,
                        Some(&c) if c == b => {
                            self.pos += 1;
                            break;
                        }
                        Some(_) => self.pos += 1,
                    }
                }
                Tok::Str
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' => {
                self.pos += 1;
                while let Some(&c) = self.src.get(self.pos) {
                    let exponent_sign = (c == b'-' || c == b'+')
                        && matches!(self.src[self.pos - 1], b'e' | b'E')
                        && !self.src[start..self.pos].starts_with(b"0x");
                    if is_ident_char(c) || c == b'.' || exponent_sign {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                Tok::Number
            }
            _ if is_ident_start(b) => {
                while self.src.get(self.pos).is_some_and(|&c| is_ident_char(c)) {
                    self.pos += 1;
                }
                Tok::Ident
            }
            _ => {
                let width = std::str::from_utf8(&self.src[start..(start + 4).min(self.src.len())])
                    .ok()
                    .and_then(|s| s.chars().next())
                    .map_or(1, char::len_utf8);
                return Err(ImportError::InvalidCharacter { span: Span::new(start, start + width) });
            }
        };
        Ok(Token { kind, start, end: self.pos })
    }

    fn peek(&mut self) -> Result<Token> {
        if let Some(t) = self.peeked {
            return Ok(t);
        }
        let t = self.lex()?;
        self.peeked = Some(t);
        Ok(t)
    }

    fn next(&mut self) -> Result<Token> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lex(),
        }
    }

    fn text(&self, t: Token) -> &'a [u8] {
        &self.src[t.start..t.end]
    }

    fn describe(&self, t: Token) -> String {
        match t.kind {
            Tok::Eof => "the end of the input".to_string(),
            Tok::Str => "a string".to_string(),
            _ => format!("`{}`", String::from_utf8_lossy(self.text(t))),
        }
    }
}

/// A message the text parser can fill field by field.
trait TextMessage: Default {
    /// Parses the value of field `name` (its name already consumed) into `self`.
    fn field(&mut self, p: &mut Parser<'_>, name: &[u8], span: Span) -> Result<()>;
}

struct Parser<'a> {
    lex: Lexer<'a>,
    depth: usize,
    spans: Vec<NodeSpans>,
    /// Input spans of the node being parsed.
    inputs: Vec<Span>,
    /// The end of the last string literal or closing brace consumed.
    last_end: usize,
}

impl<'a> Parser<'a> {
    fn unexpected(&self, expected: &str, t: Token) -> ImportError {
        ImportError::UnexpectedToken { expected: expected.to_string(), found: self.lex.describe(t), span: t.span() }
    }

    fn expect_punct(&mut self, c: u8, expected: &str) -> Result<Token> {
        let t = self.lex.next()?;
        if t.kind == Tok::Punct(c) {
            Ok(t)
        } else {
            Err(self.unexpected(expected, t))
        }
    }

    fn eat_punct(&mut self, c: u8) -> Result<bool> {
        if self.lex.peek()?.kind == Tok::Punct(c) {
            self.lex.next()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// The next field name, or `None` at the closing delimiter `close`
    /// (consumed) or, at top level (`close == None`), at the end of input.
    fn field_name(&mut self, close: Option<u8>) -> Result<Option<(&'a [u8], Span)>> {
        loop {
            let t = self.lex.next()?;
            match (t.kind, close) {
                (Tok::Punct(b',' | b';'), _) => continue,
                (Tok::Ident, _) => return Ok(Some((self.lex.text(t), t.span()))),
                (Tok::Eof, None) => return Ok(None),
                (Tok::Punct(c), Some(close)) if c == close => {
                    self.last_end = t.end;
                    return Ok(None);
                }
                (_, Some(close)) => {
                    return Err(self.unexpected(&format!("a field name or `{}`", close as char), t));
                }
                (_, None) => return Err(self.unexpected("a field name", t)),
            }
        }
    }

    /// Opens a message value: an optional `:`, then `{` or `<`. Returns the
    /// closing delimiter.
    fn open_message(&mut self) -> Result<u8> {
        self.eat_punct(b':')?;
        let t = self.lex.next()?;
        let close = match t.kind {
            Tok::Punct(b'{') => b'}',
            Tok::Punct(b'<') => b'>',
            _ => return Err(self.unexpected("`{`", t)),
        };
        if self.depth >= MAX_DEPTH {
            return Err(ImportError::NestingTooDeep { limit: MAX_DEPTH, span: t.span() });
        }
        Ok(close)
    }

    /// Parses a message value `{ fields }`.
    fn message<M: TextMessage>(&mut self) -> Result<M> {
        let close = self.open_message()?;
        self.depth += 1;
        let mut m = M::default();
        while let Some((name, span)) = self.field_name(Some(close))? {
            m.field(self, name, span)?;
        }
        self.depth -= 1;
        Ok(m)
    }

    /// Parses `: value` for a singular scalar field.
    fn scalar<T>(&mut self, mut value: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        self.expect_punct(b':', "`:`")?;
        value(self)
    }

    /// Parses `: value` or `: [v, ...]` for a repeated scalar field.
    fn repeated<T>(&mut self, out: &mut Vec<T>, mut value: impl FnMut(&mut Self) -> Result<T>) -> Result<()> {
        self.expect_punct(b':', "`:`")?;
        if !self.eat_punct(b'[')? {
            out.push(value(self)?);
            return Ok(());
        }
        if self.eat_punct(b']')? {
            return Ok(());
        }
        loop {
            out.push(value(self)?);
            let t = self.lex.next()?;
            match t.kind {
                Tok::Punct(b',') => {}
                Tok::Punct(b']') => return Ok(()),
                _ => return Err(self.unexpected("`,` or `]`", t)),
            }
        }
    }

    fn bytes(&mut self) -> Result<Vec<u8>> {
        let t = self.lex.next()?;
        if t.kind != Tok::Str {
            return Err(self.unexpected("a string", t));
        }
        let mut out = unescape(self.lex.text(t), t.start)?.into_owned();
        self.last_end = t.end;
        while self.lex.peek()?.kind == Tok::Str {
            let t = self.lex.next()?;
            out.extend_from_slice(&unescape(self.lex.text(t), t.start)?);
            self.last_end = t.end;
        }
        Ok(out)
    }

    fn string(&mut self, field: &'static str) -> Result<String> {
        let start = self.lex.peek()?.start;
        let bytes = self.bytes()?;
        String::from_utf8(bytes).map_err(|_| ImportError::InvalidUtf8 { field, span: Span::new(start, self.last_end) })
    }

    fn number_token(&mut self, kind: &'static str) -> Result<(Token, &'a str)> {
        let t = self.lex.next()?;
        if !matches!(t.kind, Tok::Number | Tok::Ident) {
            return Err(self.unexpected(&format!("a {kind}"), t));
        }
        // Number and identifier tokens are ASCII by construction.
        let text = std::str::from_utf8(self.lex.text(t)).unwrap_or("");
        Ok((t, text))
    }

    fn integer(&mut self, kind: &'static str) -> Result<(i128, Token, &'a str)> {
        let (t, text) = self.number_token(kind)?;
        let invalid = || ImportError::InvalidNumber { kind, text: text.to_string(), span: t.span() };
        let (negative, digits) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let magnitude = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
            u128::from_str_radix(hex, 16)
        } else if digits.len() > 1 && digits.starts_with('0') {
            u128::from_str_radix(&digits[1..], 8)
        } else {
            digits.parse::<u128>()
        }
        .map_err(|_| invalid())?;
        let value = i128::try_from(magnitude).map_err(|_| invalid())?;
        Ok((if negative { -value } else { value }, t, text))
    }

    fn int<T: TryFrom<i128>>(&mut self) -> Result<T> {
        let kind = std::any::type_name::<T>();
        let (v, t, text) = self.integer(kind)?;
        T::try_from(v).map_err(|_| ImportError::InvalidNumber { kind, text: text.to_string(), span: t.span() })
    }

    fn float_text(&mut self, kind: &'static str) -> Result<(Token, String)> {
        let (t, text) = self.number_token(kind)?;
        let lower = text.to_ascii_lowercase();
        let (sign, body) = match lower.as_bytes().first() {
            Some(b'-') => ("-", &lower[1..]),
            Some(b'+') => ("", &lower[1..]),
            _ => ("", &lower[..]),
        };
        let body = match body {
            "inf" | "infinity" | "inff" | "infinityf" => "inf",
            "nan" | "nanf" => "NaN",
            b if b.ends_with('f') && !b.starts_with("0x") => &b[..b.len() - 1],
            b => b,
        };
        Ok((t, format!("{sign}{body}")))
    }

    fn f32(&mut self) -> Result<f32> {
        let (t, text) = self.float_text("float")?;
        text.parse::<f32>().map_err(|_| ImportError::InvalidNumber {
            kind: "float",
            text: self.lossy(t),
            span: t.span(),
        })
    }

    fn f64(&mut self) -> Result<f64> {
        let (t, text) = self.float_text("double")?;
        text.parse::<f64>().map_err(|_| ImportError::InvalidNumber {
            kind: "double",
            text: self.lossy(t),
            span: t.span(),
        })
    }

    fn lossy(&self, t: Token) -> String {
        String::from_utf8_lossy(self.lex.text(t)).into_owned()
    }

    fn bool(&mut self) -> Result<bool> {
        let t = self.lex.next()?;
        match self.lex.text(t) {
            b"true" | b"True" | b"t" | b"1" => Ok(true),
            b"false" | b"False" | b"f" | b"0" => Ok(false),
            _ => Err(self.unexpected("`true` or `false`", t)),
        }
    }

    /// An enum value, by name or number. `name_of` gives the names, for a
    /// "did you mean" when a name is misspelt.
    fn enum_value(
        &mut self,
        enum_name: &'static str,
        by_name: impl Fn(&str) -> Option<i32>,
        name_of: impl Fn(i32) -> Option<&'static str>,
    ) -> Result<i32> {
        let t = self.lex.peek()?;
        if t.kind == Tok::Ident {
            self.lex.next()?;
            let name = std::str::from_utf8(self.lex.text(t)).unwrap_or("");
            return by_name(name).ok_or_else(|| ImportError::UnknownEnumValue {
                enum_name,
                value: name.to_string(),
                help: enum_help(name, (0..1024).filter_map(&name_of)),
                span: t.span(),
            });
        }
        self.int::<i32>()
    }

    fn data_type(&mut self) -> Result<i32> {
        self.enum_value("DataType", data_type_number, super::proto::data_type_name)
    }

    /// Parses the GraphDef field whose name spans `name` (already consumed)
    /// with prost-reflect's text format, as a GraphDef that holds only that
    /// field. A first pass with our lexer finds the field's end and checks
    /// its nesting depth, so prost-reflect never sees unbounded nesting.
    fn reflected_field(&mut self, name: Span) -> Result<GraphDef> {
        self.skip_message()?;
        let (start, end) = (name.start as usize, self.last_end);
        let text = std::str::from_utf8(&self.lex.src[start..end]).map_err(|e| ImportError::InvalidUtf8 {
            field: "library",
            span: Span::new(start + e.valid_up_to(), start + e.valid_up_to() + 1),
        })?;
        let pool = descriptor_pool();
        let Some(desc) = pool.get_message_by_name("tensorflow.GraphDef") else {
            return Err(ImportError::Internal { message: "the schema has no GraphDef".into(), span: name });
        };
        let message = prost_reflect::DynamicMessage::parse_text_format(desc, text)
            .map_err(|e| ImportError::from_text_format(&e, start))?;
        message
            .transcode_to::<GraphDef>()
            .map_err(|e| ImportError::Internal { message: format!("transcoding {e}"), span: name })
    }

    /// Skips the fields of a message up to its closing delimiter `close`.
    fn skip_body(&mut self, close: u8) -> Result<()> {
        while self.field_name(Some(close))?.is_some() {
            let colon = self.eat_punct(b':')?;
            let t = self.lex.peek()?;
            match t.kind {
                Tok::Punct(b'{' | b'<') => self.skip_message()?,
                // A list; of messages the `:` may be left out.
                Tok::Punct(b'[') => {
                    self.lex.next()?;
                    let mut first = true;
                    while !self.eat_punct(b']')? {
                        if !first {
                            self.expect_punct(b',', "`,` or `]`")?;
                        }
                        first = false;
                        let item = self.lex.peek()?;
                        match item.kind {
                            Tok::Punct(b'{' | b'<') => self.skip_message()?,
                            _ if !colon => return Err(self.unexpected("`{`", item)),
                            _ => self.skip_scalar()?,
                        }
                    }
                }
                _ if !colon => return Err(self.unexpected("`:` or `{`", t)),
                _ => self.skip_scalar()?,
            }
        }
        Ok(())
    }

    fn skip_message(&mut self) -> Result<()> {
        let close = self.open_message()?;
        self.depth += 1;
        self.skip_body(close)?;
        self.depth -= 1;
        Ok(())
    }

    fn skip_scalar(&mut self) -> Result<()> {
        let t = self.lex.next()?;
        match t.kind {
            Tok::Ident | Tok::Number => {}
            Tok::Str => {
                unescape(self.lex.text(t), t.start)?;
                while self.lex.peek()?.kind == Tok::Str {
                    let t = self.lex.next()?;
                    unescape(self.lex.text(t), t.start)?;
                }
            }
            _ => return Err(self.unexpected("a value", t)),
        }
        Ok(())
    }
}

/// Decodes a string literal token (quotes included) that starts at `offset`.
fn unescape(raw: &[u8], offset: usize) -> Result<Cow<'_, [u8]>> {
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains(&b'\\') {
        return Ok(Cow::Borrowed(inner));
    }
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let b = inner[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let esc_start = offset + 1 + i;
        let bad = |len: usize| ImportError::InvalidEscape { span: Span::new(esc_start, esc_start + len) };
        let Some(&c) = inner.get(i + 1) else { return Err(bad(1)) };
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'v' => out.push(0x0b),
            b'\\' | b'\'' | b'"' | b'?' => out.push(c),
            b'0'..=b'7' => {
                let mut v: u32 = u32::from(c - b'0');
                let mut n = 1;
                while n < 3 && inner.get(i).is_some_and(|d| (b'0'..=b'7').contains(d)) {
                    v = v * 8 + u32::from(inner[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push(u8::try_from(v).map_err(|_| bad(n + 1))?);
            }
            b'x' | b'X' => {
                let mut v: u32 = 0;
                let mut n = 0;
                while n < 2 && inner.get(i).is_some_and(u8::is_ascii_hexdigit) {
                    v = v * 16 + char::from(inner[i]).to_digit(16).unwrap_or(0);
                    i += 1;
                    n += 1;
                }
                if n == 0 {
                    return Err(bad(2));
                }
                out.push(v as u8);
            }
            b'u' | b'U' => {
                let len = if c == b'u' { 4 } else { 8 };
                let hex = inner.get(i..i + len).and_then(|h| std::str::from_utf8(h).ok());
                let ch = hex.and_then(|h| u32::from_str_radix(h, 16).ok()).and_then(char::from_u32);
                let Some(ch) = ch else { return Err(bad(2 + len)) };
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                i += len;
            }
            _ => return Err(bad(2)),
        }
    }
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tf::proto::Value;

    #[test]
    fn escapes_decode_to_bytes() {
        let src = br#"node { name: "a\101\x42\n\'\"\\" op: 'X' 'Y' }"#;
        let g = parse_graphdef_text(src).expect("parses");
        assert_eq!(g.graph.node[0].name, "aAB\n'\"\\");
        assert_eq!(g.graph.node[0].op, "XY");
    }

    #[test]
    fn floats_and_enums_parse() {
        let src = b"node { name: \"c\" attr { key: \"v\" value { list { f: [1e-05, inf, -inf, nan, 2.5f] type: DT_FLOAT type: 9 } } } }";
        let g = parse_graphdef_text(src).expect("parses");
        let Some(Value::List(list)) = &g.graph.node[0].attr["v"].value else { panic!("expected a list") };
        assert_eq!(list.f[0], 1e-5);
        assert_eq!(list.f[1], f32::INFINITY);
        assert_eq!(list.f[2], f32::NEG_INFINITY);
        assert!(list.f[3].is_nan());
        assert_eq!(list.f[4], 2.5);
        assert_eq!(list.r#type, vec![1, 9]);
    }

    #[test]
    fn errors_carry_spans() {
        let src = b"node { name: \"a\" bogus: 1 }";
        let err = parse_graphdef_text(src).expect_err("unknown field");
        assert!(matches!(err, ImportError::UnknownField { span, .. } if span == Span::new(17, 22)));
        let err = parse_graphdef_text(b"node { name: \"a }").expect_err("unterminated");
        assert!(matches!(err, ImportError::UnterminatedString { .. }));
        let err = parse_graphdef_text(b"node { name: \"\\q\" }").expect_err("bad escape");
        assert!(matches!(err, ImportError::InvalidEscape { span } if span == Span::new(14, 16)));
        let deep = format!("node {{ {}", "attr { key: \"k\" value { func { ".repeat(40));
        let err = parse_graphdef_text(deep.as_bytes()).expect_err("too deep");
        assert!(matches!(err, ImportError::NestingTooDeep { .. }));
    }

    #[test]
    fn library_decodes_fully() {
        let src = b"library { function { signature { name: \"f\" output_arg { name: \"a\" type: DT_FLOAT } } \
                    node_def { name: \"c\" op: \"Const\" } ret { key: \"a\" value: \"c:output:0\" } } }";
        let g = parse_graphdef_text(src).expect("parses");
        let library = g.graph.library.expect("a library");
        let f = &library.function[0];
        let signature = f.signature.as_ref().expect("a signature");
        assert_eq!(signature.name, "f");
        assert_eq!(signature.output_arg[0].r#type, 1);
        assert_eq!(f.node_def[0].op, "Const");
        assert_eq!(f.ret["a"], "c:output:0");
    }

    #[test]
    fn library_errors_point_into_the_whole_text() {
        let src = b"node { name: \"a\" op: \"X\" }\nlibrary { function { bogus: 1 } }";
        let err = parse_graphdef_text(src).expect_err("unknown field");
        let ImportError::TextFormat { span, .. } = err else { panic!("expected a text format error, got {err:?}") };
        assert_eq!(&src[span.start as usize..span.end as usize], b"bogus");
    }
}
