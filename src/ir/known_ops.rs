//! Which op types exist: the IR registry ([`super::ops`]), TensorFlow
//! 2.21's registered op types (`tf_op_names.txt`, made by
//! `tests/tf/op_names.py`), the functions of the module (a node may call a
//! function by name) and whatever the caller adds (the CLI adds the
//! executor's kernels). An op type in none of them is almost always a typo:
//! [`unknown_op_types`] reports each with a "did you mean" from
//! [`super::suggest`], labelled at the op-type token when the source
//! text has it (`Tahn` in `%y = Tahn(%x)`, the value of `op: "Tahn"`).

use std::sync::LazyLock;

use rustc_hash::FxHashSet;

use super::error::IrError;
use super::graph::{Module, NodeKind};
use crate::syntax::Span;

/// TensorFlow's registered op types, one a line after a `#` header.
const TF_OP_NAMES: &str = include_str!("tf_op_names.txt");

/// TensorFlow 2.21's registered op types, in the file's (sorted) order.
pub fn tensorflow_op_names() -> impl Iterator<Item = &'static str> {
    TF_OP_NAMES.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// True when TensorFlow registers `op`.
pub fn is_tensorflow_op(op: &str) -> bool {
    static SET: LazyLock<FxHashSet<&'static str>> = LazyLock::new(|| tensorflow_op_names().collect());
    SET.contains(op)
}

/// True when the IR registry or TensorFlow knows `op`.
pub fn is_known(op: &str) -> bool {
    super::ops::lookup(op).is_some() || is_tensorflow_op(op)
}

/// One diagnostic per node whose op type nobody knows: neither
/// [`is_known`], nor a function of `module`, nor `also_known` (the
/// caller's own tables). A warning, or an error when `strict`. Each
/// distinct misspelling is reported at every node that has it. `source`
/// is the text the spans point into (empty for a binary input): the label
/// covers the op-type token there, else the whole node.
pub fn unknown_op_types(
    module: &Module,
    also_known: &dyn Fn(&str) -> bool,
    strict: bool,
    source: &str,
) -> Vec<IrError> {
    let functions: FxHashSet<&str> = module.graphs.iter().map(|g| g.name.as_str()).collect();
    let mut errors = Vec::new();
    for graph in &module.graphs {
        for id in graph.node_ids() {
            let node = graph.node(id);
            let op = &*node.op;
            if node.kind != NodeKind::Op || is_known(op) || functions.contains(op) || also_known(op) {
                continue;
            }
            let candidates = super::ops::all().iter().map(|d| d.name).chain(tensorflow_op_names());
            let help = match super::suggest::closest(op, candidates) {
                Some(near) => format!("did you mean `{near}`?"),
                None => "no op of TensorFlow 2.21 or of tpu-rewrite has this name (`tpu-rewrite ops` lists what runs)"
                    .to_string(),
            };
            let span = op_token(source, node.span, op).unwrap_or(node.span);
            let op = op.to_string();
            errors.push(if strict {
                IrError::UnknownOpStrict { op, help, span }
            } else {
                IrError::UnknownOp { op, help, span }
            });
        }
    }
    errors
}

/// The span of the op type `op` inside the node at `node` in `source`:
/// in `.opg` the first token after the `=` (`%y = Tahn(...)`), in a
/// GraphDef's text the quoted value of its `op:` field.
fn op_token(source: &str, node: Span, op: &str) -> Option<Span> {
    let start = node.start as usize;
    let text = source.get(start..node.end as usize)?;
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '>';
    // A GraphDef's text: `op: "Tahn"`.
    let mut from = 0;
    while let Some(at) = text[from..].find("op") {
        let key = from + at;
        from = key + 2;
        if text[..key].chars().next_back().is_some_and(ident) {
            continue;
        }
        let rest = text[from..].trim_start();
        let Some(rest) = rest.strip_prefix(':') else { continue };
        let rest = rest.trim_start();
        if let Some(value) = rest.strip_prefix('"').and_then(|r| r.strip_prefix(op)) {
            if value.starts_with('"') {
                let offset = start + (text.len() - rest.len()) + 1;
                return Some(Span::new(offset, offset + op.len()));
            }
        }
    }
    // `.opg`: `%y = Tahn(%x) {...}`.
    let eq = text.find('=')?;
    let after = &text[eq + 1..];
    let rest = after.trim_start();
    let tail = rest.strip_prefix(op)?;
    if tail.chars().next().is_some_and(ident) {
        return None;
    }
    let offset = start + eq + 1 + (after.len() - rest.len());
    Some(Span::new(offset, offset + op.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_label_covers_the_op_type_token() {
        let opg = "  %Tahn = Tahn(%x) {T = f32}\n";
        let span = op_token(opg, Span::new(2, opg.len() - 1), "Tahn").expect("found");
        assert_eq!((span.start, span.end), (10, 14));
        assert_eq!(&opg[10..14], "Tahn");
        let pbtxt = "node {\n  name: \"op\"\n  op: \"Tahn\"\n  input: \"x\"\n}\n";
        let span = op_token(pbtxt, Span::new(0, pbtxt.len()), "Tahn").expect("found");
        assert_eq!(&pbtxt[span.start as usize..span.end as usize], "Tahn");
        assert!(pbtxt[..span.start as usize].ends_with("op: \""));
        // No source text (a binary GraphDef): no narrower span.
        assert!(op_token("", Span::new(0, 10), "Tahn").is_none());
    }

    #[test]
    fn tensorflow_list_is_sorted_and_has_the_common_ops() {
        let names: Vec<&str> = tensorflow_op_names().collect();
        assert!(names.len() > 1500, "{} names", names.len());
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        for op in ["MatMul", "Tanh", "TPUReplicatedInput", "VarHandleOp", "StatelessRandomUniformV2"] {
            assert!(is_tensorflow_op(op), "{op}");
        }
        assert!(!is_known("Tahn") && !is_known("MatMull"));
    }
}
