//! Tensors as text, the way TensorFlow's `Tensor::SummarizeValue` writes
//! them: the `V2` form (`StringFormat`, hence `tf.print`) nests brackets as
//! NumPy does and elides the middle of each dimension longer than twice
//! `summarize`; the `V1` form (`Assert`'s message) prints the first
//! `summarize` elements and `...`.
//!
//! Numbers follow TensorFlow's `StrCat`: integers in decimal, bool as `1` /
//! `0`, f32 (and bf16 / f16, widened) with `%.6g` unless that does not read
//! back as the same value, then `%.9g`; f64 with `%.15g`, else `%.17g`.
//! Strings are C-escaped, and quoted in the V2 form. Cost: linear in the
//! number of elements printed.

use crate::exec::tensor::Tensor;

/// Which of TensorFlow's two layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `SummarizeValue(n, print_v2 = true)`: nested, NumPy-like.
    V2,
    /// `SummarizeValue(n)`: the first `n` elements, then `...`.
    V1,
}

/// `v` as C's `%.{precision}g` writes it.
fn format_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let p = precision.max(1);
    // The decimal exponent after rounding to `p` significant digits.
    let sci = format!("{v:.*e}", p - 1);
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` writes an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    if exp < -4 || exp >= p as i32 {
        let mantissa = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{v:.decimals$}")).to_string()
    }
}

/// `s` without trailing zeros after a decimal point (and without the point if nothing follows it).
fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// An f32 as TensorFlow's `StrCat` writes it.
pub(crate) fn format_f32(v: f32) -> String {
    let short = format_g(f64::from(v), 6);
    if short.parse::<f32>().ok() == Some(v) {
        short
    } else {
        format_g(f64::from(v), 9)
    }
}

/// An f64 as TensorFlow's `StrCat` writes it.
pub(crate) fn format_f64(v: f64) -> String {
    let short = format_g(v, 15);
    if short.parse::<f64>().ok() == Some(v) {
        short
    } else {
        format_g(v, 17)
    }
}

/// `bytes` with C escapes (`\n`, `\t`, `\\`, `\"`, `\'`, octal for other unprintables), as absl's `CEscape`.
pub(crate) fn c_escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            other => out.push_str(&format!("\\{other:03o}")),
        }
    }
    out
}

/// Every element of `t` as text, in row-major order; `None` for a resource
/// or a variant.
fn elements(t: &Tensor, layout: Layout) -> Option<Vec<String>> {
    let quote = |s: &Vec<u8>| match layout {
        Layout::V2 => format!("\"{}\"", c_escape(s)),
        Layout::V1 => c_escape(s),
    };
    Some(match t {
        Tensor::F32(a) => a.iter().map(|&v| format_f32(v)).collect(),
        Tensor::F64(a) => a.iter().map(|&v| format_f64(v)).collect(),
        Tensor::BF16(a) => a.iter().map(|v| format_f32(v.to_f32())).collect(),
        Tensor::F16(a) => a.iter().map(|v| format_f32(v.to_f32())).collect(),
        Tensor::I32(a) => a.iter().map(ToString::to_string).collect(),
        Tensor::I64(a) => a.iter().map(ToString::to_string).collect(),
        Tensor::I8(a) => a.iter().map(ToString::to_string).collect(),
        Tensor::U8(a) => a.iter().map(ToString::to_string).collect(),
        Tensor::I16(a) => a.iter().map(ToString::to_string).collect(),
        Tensor::U16(a) => a.iter().map(ToString::to_string).collect(),
        Tensor::U32(a) => a.iter().map(ToString::to_string).collect(),
        Tensor::U64(a) => a.iter().map(ToString::to_string).collect(),
        Tensor::C64(a) => a.iter().map(|v| format!("({},{})", format_f32(v.re), format_f32(v.im))).collect(),
        Tensor::C128(a) => a.iter().map(|v| format!("({},{})", format_f64(v.re), format_f64(v.im))).collect(),
        Tensor::Bool(a) => a.iter().map(|&b| if b { "1" } else { "0" }.to_string()).collect(),
        Tensor::Str(a) => a.iter().map(quote).collect(),
        Tensor::Resource(_) | Tensor::Variant(_) => return None,
    })
}

/// `t` as TensorFlow's `SummarizeValue(summarize, layout == V2)` writes it; a
/// negative `summarize` prints every element.
pub(crate) fn summarize(t: &Tensor, summarize: i64, layout: Layout) -> String {
    let Some(items) = elements(t, layout) else {
        return match t.as_resource() {
            Some(h) => format!("<resource {}>", h.name),
            None => String::new(),
        };
    };
    let total = items.len();
    let max_entries = usize::try_from(summarize).unwrap_or(total);
    let limit = max_entries.min(total);
    let shape = t.shape();
    let mut out = String::new();
    if shape.is_empty() {
        out.push_str(&items[..limit].join(" "));
        if max_entries < total {
            out.push_str("...");
        }
        return out;
    }
    match layout {
        Layout::V2 => dim_v2(&items, shape, limit, 0, 0, &mut out),
        Layout::V1 => {
            let mut next = 0;
            dim_v1(&items, shape, limit, 0, &mut next, &mut out);
            if max_entries < total {
                out.push_str("...");
            }
        }
    }
    out
}

/// The separator between two items of dimension `dim`: a space in the last
/// dimension, else one newline per inner dimension and `dim + 1` spaces.
fn spacing(dim: usize, rank: usize, out: &mut String) {
    if dim + 1 == rank {
        out.push(' ');
        return;
    }
    out.extend(std::iter::repeat_n('\n', rank - dim - 1));
    out.extend(std::iter::repeat_n(' ', dim + 1));
}

/// The V2 layout of dimension `dim` starting at element `start`: `ends` items at each end.
fn dim_v2(items: &[String], shape: &[usize], ends: usize, dim: usize, start: usize, out: &mut String) {
    if dim == shape.len() {
        out.push_str(&items[start]);
        return;
    }
    out.push('[');
    let count = shape[dim];
    let stride: usize = shape[dim + 1..].iter().product();
    for i in 0..ends.min(count) {
        if i > 0 {
            spacing(dim, shape.len(), out);
        }
        dim_v2(items, shape, ends, dim + 1, start + stride * i, out);
    }
    if count > 2 * ends {
        spacing(dim, shape.len(), out);
        out.push_str("...");
    }
    for i in ends.max(count.saturating_sub(ends))..count {
        spacing(dim, shape.len(), out);
        dim_v2(items, shape, ends, dim + 1, start + stride * i, out);
    }
    out.push(']');
}

/// The V1 layout of dimension `dim`: elements in order until `limit` are printed.
fn dim_v1(items: &[String], shape: &[usize], limit: usize, dim: usize, next: &mut usize, out: &mut String) {
    if *next >= limit {
        return;
    }
    let count = shape[dim];
    if dim + 1 == shape.len() {
        for i in 0..count {
            if *next >= limit {
                if dim != 0 {
                    out.push_str("...");
                }
                return;
            }
            if i > 0 {
                out.push(' ');
            }
            out.push_str(&items[*next]);
            *next += 1;
        }
        return;
    }
    for _ in 0..count {
        let opened = *next < limit;
        if opened {
            out.push('[');
        }
        dim_v1(items, shape, limit, dim + 1, next, out);
        if *next < limit || opened {
            out.push(']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_back_as_tensorflow_writes_them() {
        assert_eq!(format_f32(0.5), "0.5");
        assert_eq!(format_f32(1e10), "1e+10");
        assert_eq!(format_f32(-2.5e-7), "-2.5e-07");
        assert_eq!(format_f32(123_456.79), "123456.789");
        assert_eq!(format_f32(0.001), "0.001");
        assert_eq!(format_f64(1.0 / 3.0), "0.33333333333333331");
        assert_eq!(format_f32(f32::NEG_INFINITY), "-inf");
    }

    #[test]
    fn layouts_elide_as_tensorflow_does() {
        let t = Tensor::from_vec(&[2, 3], vec![0.5f32, -1.25, 0.0, 2.0, 0.001, 7.0]).unwrap();
        assert_eq!(summarize(&t, 1, Layout::V2), "[[0.5 ... 0]\n [2 ... 7]]");
        assert_eq!(summarize(&t, 2, Layout::V1), "[0.5 -1.25...]...");
        let empty = Tensor::from_vec(&[2, 0], Vec::<f32>::new()).unwrap();
        assert_eq!(summarize(&empty, 3, Layout::V2), "[\n ...]");
        let s = Tensor::vector(vec![b"a".to_vec(), b"b\\c\n".to_vec()]);
        assert_eq!(summarize(&s, 3, Layout::V2), r#"["a" "b\\c\n"]"#);
    }
}
