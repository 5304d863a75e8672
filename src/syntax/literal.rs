//! Decoding of literal tokens: strings with escapes, quoted names, integers.
//!
//! String literals may hold any bytes: printable UTF-8 stands as itself,
//! everything else is written `\xNN`. The printer in `emit::text` writes the
//! inverse of [`decode_bytes`], so `decode(escape(b)) == b` for all bytes.

use std::borrow::Cow;

use lalrpop_util::ParseError;

use super::error::SyntaxError;
use super::span::Span;

type Result<T, Tok> = std::result::Result<T, ParseError<usize, Tok, SyntaxError>>;

fn invalid<Tok>(reason: impl Into<String>, span: Span) -> ParseError<usize, Tok, SyntaxError> {
    ParseError::User { error: SyntaxError::InvalidLiteral { reason: reason.into(), span } }
}

/// Decodes a string token (quotes included) into its bytes.
pub fn decode_bytes<'s, Tok>(raw: &'s str, span: Span) -> Result<Cow<'s, [u8]>, Tok> {
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains('\\') {
        return Ok(Cow::Borrowed(inner.as_bytes()));
    }
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let esc_start = span.start as usize + 1 + i;
        let Some(&next) = bytes.get(i + 1) else {
            return Err(invalid("dangling `\\` at the end of the string", span));
        };
        match next {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'0' => out.push(0),
            b'\\' => out.push(b'\\'),
            b'"' => out.push(b'"'),
            b'\'' => out.push(b'\''),
            b'x' => {
                let hex = bytes.get(i + 2..i + 4).and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => out.push(v),
                    None => {
                        return Err(invalid(
                            "`\\x` takes two hex digits",
                            Span::new(esc_start, (esc_start + 4).min(span.end as usize)),
                        ))
                    }
                }
                i += 4;
                continue;
            }
            _ => {
                let width = inner[i + 1..].chars().next().map_or(1, char::len_utf8);
                return Err(invalid(
                    "unknown escape; use \\n \\t \\r \\0 \\\\ \\\" or \\xNN",
                    Span::new(esc_start, esc_start + 1 + width),
                ));
            }
        }
        i += 2;
    }
    Ok(Cow::Owned(out))
}

/// Decodes a node or graph name token (without its sigil): plain or quoted.
pub fn decode_name<'s, Tok>(raw: &'s str, span: Span) -> Result<Cow<'s, str>, Tok> {
    if raw.starts_with('"') {
        let inner_span = Span::new(span.start as usize + 1, span.end as usize);
        let bytes = decode_bytes(raw, inner_span)?;
        if bytes.is_empty() {
            return Err(invalid("a name cannot be empty", span));
        }
        match bytes {
            Cow::Borrowed(b) => Ok(Cow::Borrowed(std::str::from_utf8(b).expect("slice of a str"))),
            Cow::Owned(b) => {
                String::from_utf8(b).map(Cow::Owned).map_err(|_| invalid("a name must be valid UTF-8", span))
            }
        }
    } else {
        Ok(Cow::Borrowed(raw))
    }
}

/// Parses an integer literal into an `i64`.
pub fn parse_int<Tok>(raw: &str, span: Span) -> Result<i64, Tok> {
    raw.parse::<i64>().map_err(|_| invalid("integer does not fit in 64 bits", span))
}

/// Turns decoded bytes into text, replacing invalid UTF-8.
pub fn bytes_to_str(bytes: Cow<'_, [u8]>) -> Cow<'_, str> {
    match bytes {
        Cow::Borrowed(b) => String::from_utf8_lossy(b),
        Cow::Owned(b) => match String::from_utf8(b) {
            Ok(s) => Cow::Owned(s),
            Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
        },
    }
}

/// Bytes allowed in a plain name after its first byte (a lookup table:
/// the printer asks this of every name it writes).
const PLAIN_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'/' | b'>');
        b += 1;
    }
    table
};

/// True when `name` can be written without quotes after `%` or `@`.
pub fn is_plain_name(name: &str) -> bool {
    match name.as_bytes() {
        [first, rest @ ..] => {
            (first.is_ascii_alphanumeric() || matches!(first, b'_' | b'.'))
                && rest.iter().all(|&b| PLAIN_BYTE[usize::from(b)])
        }
        [] => false,
    }
}

/// Writes `bytes` as a string literal body (without quotes), escaping as needed.
pub fn escape_into(out: &mut String, bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                escape_str_into(out, s);
                return;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                escape_str_into(out, std::str::from_utf8(good).expect("valid prefix"));
                let bad_len = e.error_len().unwrap_or(bad.len());
                for b in &bad[..bad_len] {
                    push_hex(out, *b);
                }
                rest = &bad[bad_len..];
            }
        }
    }
}

fn escape_str_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => push_hex(out, c as u8),
            c => out.push(c),
        }
    }
}

fn push_hex(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\x");
    out.push(HEX[(b >> 4) as usize] as char);
    out.push(HEX[(b & 15) as usize] as char);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trips_all_bytes() {
        let bytes: Vec<u8> = (0..=255u8).chain("héllo\"\\".bytes()).collect();
        let mut body = String::from("\"");
        escape_into(&mut body, &bytes);
        body.push('"');
        let decoded = decode_bytes::<()>(&body, Span::new(0, body.len())).unwrap();
        assert_eq!(decoded.as_ref(), bytes.as_slice());
    }

    #[test]
    fn bad_escape_is_an_error() {
        assert!(decode_bytes::<()>("\"\\q\"", Span::new(0, 4)).is_err());
        assert!(decode_bytes::<()>("\"\\x4\"", Span::new(0, 5)).is_err());
    }
}
