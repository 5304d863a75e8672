//! Which op types exist: the IR registry ([`super::ops`]), TensorFlow
//! 2.21's registered op types (`tf_op_names.txt`, made by
//! `tests/tf/op_names.py`), the functions of the module (a node may call a
//! function by name) and whatever the caller adds (the CLI adds the
//! executor's kernels). An op type in none of them is almost always a typo:
//! [`unknown_op_types`] reports each with a "did you mean" from
//! [`super::suggest`].

use std::sync::LazyLock;

use rustc_hash::FxHashSet;

use super::error::IrError;
use super::graph::{Module, NodeKind};

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
/// distinct misspelling is reported at every node that has it.
pub fn unknown_op_types(module: &Module, also_known: &dyn Fn(&str) -> bool, strict: bool) -> Vec<IrError> {
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
            let (op, span) = (op.to_string(), node.span);
            errors.push(if strict {
                IrError::UnknownOpStrict { op, help, span }
            } else {
                IrError::UnknownOp { op, help, span }
            });
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

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
