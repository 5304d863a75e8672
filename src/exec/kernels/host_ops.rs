//! Host ops: `StringFormat`, `PrintV2`, TF1's `Print`, `Assert`,
//! `ScalarSummary`, and the two ops TensorFlow's `Prod` gradient writes
//! (`Cumprod`, `ListDiff`).
//!
//! `Print(input, data...)` passes `input` through and writes `message`
//! then each data tensor as `[values]` (TensorFlow's `SummarizeValue`
//! layout, `summarize` elements) and a newline to stderr, as TensorFlow's
//! kernel does. Kernels here keep no state, so `first_n` > 0 prints on
//! every run rather than on the first n only; `first_n` = 0 never prints.
//!
//! The first four run on the host only (in a cluster they need outside
//! compilation) and are the only kernels that touch string tensors besides
//! the layout ops. `PrintV2` writes where TensorFlow writes: `output_stream`
//! `stderr` (the default, and TensorFlow's `log(...)` streams), `stdout`, or
//! `file://PATH` (appended); each print is one write, so lines of replicas
//! printing at once never interleave. A failing `Assert` is
//! [`KernelError::AssertionFailed`], with TensorFlow's message. Cost: linear
//! in the elements formatted or scanned.

use std::io::Write;

use prost::Message;

use super::strings::{summarize, Layout};
use super::{arg, attr_bool, attr_int};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::AttrMap;

/// Runs `op` if it is one of these ops; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    Some(match op {
        "StringFormat" => string_format(op, attrs, inputs).map(|t| vec![t]),
        "PrintV2" => print_v2(op, attrs, inputs).map(|()| Vec::new()),
        "Print" => print_v1(op, attrs, inputs).map(|t| vec![t]),
        "Assert" => assert(op, attrs, inputs).map(|()| Vec::new()),
        "ScalarSummary" => scalar_summary(op, inputs).map(|t| vec![t]),
        "Cumprod" => (|| {
            let (exclusive, reverse) = (attr_bool(attrs, "exclusive", false), attr_bool(attrs, "reverse", false));
            cumprod(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?, exclusive, reverse)
        })()
        .map(|t| vec![t]),
        "ListDiff" => (|| list_diff(op, arg(op, inputs, 0)?, arg(op, inputs, 1)?, attrs))(),
        _ => return None,
    })
}

/// The one string of a scalar string tensor.
fn scalar_string<'t>(op: &str, t: &'t Tensor, what: &str) -> Result<&'t [u8], KernelError> {
    let wrong = || {
        KernelError::invalid(op, format!("{what} must be a scalar string, got {} of shape {:?}", t.dtype(), t.shape()))
    };
    match t {
        Tensor::Str(a) if a.ndim() == 0 => a.iter().next().map(Vec::as_slice).ok_or_else(wrong),
        _ => Err(wrong()),
    }
}

/// `StringFormat(inputs...) {template, placeholder, summarize}`: the template
/// with each placeholder replaced by the next input in the V2 layout.
fn string_format(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let template = attrs.get_str("template").unwrap_or("%s");
    let placeholder = attrs.get_str("placeholder").unwrap_or("%s");
    let n = attr_int(attrs, "summarize", 3);
    if placeholder.is_empty() {
        return Err(KernelError::invalid(op, "the placeholder is empty"));
    }
    let parts: Vec<&str> = template.split(placeholder).collect();
    if parts.len() != inputs.len() + 1 {
        return Err(KernelError::invalid(
            op,
            format!(
                "the template {template:?} has {} placeholder(s) {placeholder:?} but the op has {} input(s)",
                parts.len() - 1,
                inputs.len()
            ),
        ));
    }
    let mut out = String::from(parts[0]);
    for (t, part) in inputs.iter().zip(&parts[1..]) {
        out.push_str(&summarize(t, n, Layout::V2));
        out.push_str(part);
    }
    Ok(Tensor::scalar(out.into_bytes()))
}

/// `PrintV2(input) {output_stream, end}`: writes the string and `end`.
fn print_v2(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<(), KernelError> {
    let mut text = scalar_string(op, arg(op, inputs, 0)?, "the input")?.to_vec();
    text.extend_from_slice(attrs.get_str("end").unwrap_or("\n").as_bytes());
    let stream = attrs.get_str("output_stream").unwrap_or("stderr");
    let failed = |e: std::io::Error| KernelError::invalid(op, format!("cannot write to {stream:?}: {e}"));
    match stream {
        "stdout" => {
            let mut out = std::io::stdout().lock();
            out.write_all(&text).and_then(|()| out.flush()).map_err(failed)
        }
        "stderr" | "log(info)" | "log(warning)" | "log(error)" => {
            std::io::stderr().lock().write_all(&text).map_err(failed)
        }
        other => match other.strip_prefix("file://") {
            Some(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(&text))
                .map_err(failed),
            None => Err(KernelError::invalid(
                op,
                format!(
                    "unknown output_stream {other:?}: expected stderr, stdout, log(info), log(warning), log(error) or file://PATH"
                ),
            )),
        },
    }
}

/// What `Print` returns, without printing: its first operand.
pub(crate) fn pass_through(op: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    arg(op, inputs, 0).cloned()
}

/// `Print(input, data...) {message, first_n, summarize}`: `input`, after
/// writing the message and the data to stderr.
fn print_v1(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let input = arg(op, inputs, 0)?.clone();
    if attr_int(attrs, "first_n", -1) == 0 {
        return Ok(input);
    }
    let n = attr_int(attrs, "summarize", 3);
    let mut text = attrs.get_str("message").unwrap_or("").to_string();
    for t in &inputs[1..] {
        text.push('[');
        text.push_str(&summarize(t, n, Layout::V1));
        text.push(']');
    }
    text.push('\n');
    std::io::stderr()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| KernelError::invalid(op, format!("cannot write to stderr: {e}")))?;
    Ok(input)
}

/// `Assert(condition, data...) {summarize}`: nothing when the scalar
/// condition holds, else TensorFlow's message `assertion failed: [d0] [d1]...`.
fn assert(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<(), KernelError> {
    let holds = match arg(op, inputs, 0)? {
        Tensor::Bool(a) if a.ndim() == 0 => a.iter().all(|&b| b),
        other => {
            return Err(KernelError::invalid(
                op,
                format!("the condition must be a scalar bool, got {} of shape {:?}", other.dtype(), other.shape()),
            ))
        }
    };
    if holds {
        return Ok(());
    }
    let n = attr_int(attrs, "summarize", 3);
    let data: Vec<String> = inputs[1..].iter().map(|t| format!("[{}]", summarize(t, n, Layout::V1))).collect();
    Err(KernelError::AssertionFailed { op: op.to_string(), message: format!("assertion failed: {}", data.join(" ")) })
}

/// TensorFlow's `Summary` protocol buffer, the fields a scalar summary writes.
#[derive(Clone, PartialEq, Message)]
struct Summary {
    #[prost(message, repeated, tag = "1")]
    value: Vec<SummaryValue>,
}

/// `Summary.Value`: a tag and (in the `value` oneof) a simple value.
#[derive(Clone, PartialEq, Message)]
struct SummaryValue {
    #[prost(bytes = "vec", tag = "1")]
    tag: Vec<u8>,
    #[prost(oneof = "SummaryKind", tags = "2")]
    value: Option<SummaryKind>,
}

/// The `value` oneof of `Summary.Value` (a oneof field is written even when zero).
#[derive(Clone, PartialEq, prost::Oneof)]
enum SummaryKind {
    #[prost(float, tag = "2")]
    SimpleValue(f32),
}

/// `ScalarSummary(tags, values)`: a serialized `Summary` with one simple value per tag.
fn scalar_summary(op: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let (tags, values) = (arg(op, inputs, 0)?, arg(op, inputs, 1)?);
    if tags.shape() != values.shape() {
        return Err(KernelError::invalid(
            op,
            format!("tags and values must have the same shape, got {:?} and {:?}", tags.shape(), values.shape()),
        ));
    }
    let Tensor::Str(tags) = tags else {
        return Err(KernelError::dtype(op, tags.dtype(), "tags must be strings"));
    };
    let values: Vec<f32> = match values {
        Tensor::F32(a) => a.iter().copied().collect(),
        Tensor::F64(a) => a.iter().map(|&v| v as f32).collect(),
        Tensor::I32(a) => a.iter().map(|&v| v as f32).collect(),
        Tensor::I64(a) => a.iter().map(|&v| v as f32).collect(),
        other => return Err(KernelError::dtype(op, other.dtype(), "values must be real numbers")),
    };
    let summary = Summary {
        value: tags
            .iter()
            .zip(values)
            .map(|(tag, v)| SummaryValue { tag: tag.clone(), value: Some(SummaryKind::SimpleValue(v)) })
            .collect(),
    };
    Ok(Tensor::scalar(summary.encode_to_vec()))
}

/// `Cumprod(x, axis) {exclusive, reverse}`: running products along one axis.
pub(crate) fn cumprod(
    op: &str,
    x: &Tensor,
    axis: &Tensor,
    exclusive: bool,
    reverse: bool,
) -> Result<Tensor, KernelError> {
    super::reduce::scan(op, x, axis, super::reduce::Scan::Product, exclusive, reverse)
}

/// `ListDiff(x, y) {out_idx}`: the elements of 1-D `x` not in `y`, in order, and their indices.
fn list_diff(op: &str, x: &Tensor, y: &Tensor, attrs: &AttrMap) -> Result<Vec<Tensor>, KernelError> {
    if x.shape().len() != 1 || y.shape().len() != 1 {
        return Err(KernelError::invalid(op, format!("x and y must be 1-D, got {:?} and {:?}", x.shape(), y.shape())));
    }
    let (xs, ys) = (x.to_i64_vec(op, "x")?, y.to_i64_vec(op, "y")?);
    let drop: std::collections::HashSet<i64> = ys.into_iter().collect();
    let kept: Vec<(usize, i64)> = xs.into_iter().enumerate().filter(|(_, v)| !drop.contains(v)).collect();
    let out = match x {
        Tensor::I32(_) => Tensor::vector(kept.iter().map(|&(_, v)| v as i32).collect()),
        _ => Tensor::vector(kept.iter().map(|&(_, v)| v).collect()),
    };
    let idx = match attrs.get("out_idx").and_then(|v| v.as_type()) {
        Some(crate::ir::DType::I64) => Tensor::vector(kept.iter().map(|&(i, _)| i as i64).collect()),
        _ => Tensor::vector(kept.iter().map(|&(i, _)| i as i32).collect()),
    };
    Ok(vec![out, idx])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrValue;

    #[test]
    fn string_format_fills_the_template() {
        let mut attrs = AttrMap::new();
        attrs.insert("template", AttrValue::str("n: {} and {}"));
        attrs.insert("placeholder", AttrValue::str("{}"));
        let out =
            string_format("StringFormat", &attrs, &[Tensor::vector(vec![1i32, 2]), Tensor::scalar(7i64)]).unwrap();
        assert_eq!(out, Tensor::scalar(b"n: [1 2] and 7".to_vec()));
        assert!(string_format("StringFormat", &attrs, &[Tensor::scalar(1i32)]).is_err());
    }

    #[test]
    fn failing_assert_carries_tensorflows_message() {
        let data = Tensor::vector(vec![1i32, 2, 3, 4]);
        let err =
            assert("Assert", &AttrMap::new(), &[Tensor::scalar(false), Tensor::scalar(b"n".to_vec()), data.clone()]);
        assert_eq!(
            err,
            Err(KernelError::AssertionFailed {
                op: "Assert".into(),
                message: "assertion failed: [n] [1 2 3...]".into()
            })
        );
        assert_eq!(assert("Assert", &AttrMap::new(), &[Tensor::scalar(true), data]), Ok(()));
    }

    #[test]
    fn scalar_summary_writes_the_oneof_even_for_zero() {
        let out = scalar_summary("ScalarSummary", &[Tensor::scalar(b"l".to_vec()), Tensor::scalar(0.0f32)]).unwrap();
        assert_eq!(out, Tensor::scalar(vec![10, 8, 10, 1, b'l', 21, 0, 0, 0, 0]));
    }

    #[test]
    fn cumprod_and_list_diff() {
        let x = Tensor::vector(vec![2.0f32, 3.0, 4.0]);
        let axis = Tensor::scalar(0i32);
        assert_eq!(cumprod("Cumprod", &x, &axis, true, true).unwrap(), Tensor::vector(vec![12.0f32, 4.0, 1.0]));
        let out = list_diff(
            "ListDiff",
            &Tensor::vector(vec![0i32, 1, 2, 3]),
            &Tensor::vector(vec![2i32, 0]),
            &AttrMap::new(),
        )
        .unwrap();
        assert_eq!(out, vec![Tensor::vector(vec![1i32, 3]), Tensor::vector(vec![1i32, 3])]);
    }
}
