//! TensorFlow's XLA op set: the op types TensorFlow 2.21's XLA bridge
//! (tf2xla) compiles, the measure of this project's op coverage.
//!
//! The list is data, generated from TensorFlow itself by
//! `tests/tf/xla_op_list.py` into `tf_xla_ops.txt` (one op per line, with
//! TensorFlow's gradient registration for it). Invariant: the names are
//! sorted and unique (a test checks it), and each line has a known
//! gradient kind.

use std::sync::LazyLock;

/// How TensorFlow's Python gradient registry treats an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TfGradient {
    /// A gradient function is registered (`@ops.RegisterGradient`).
    Function,
    /// The op is registered as not differentiable (`ops.NotDifferentiable`).
    NotDifferentiable,
    /// Nothing is registered: `tf.gradients` cannot pass through the op.
    Unregistered,
}

/// One op of TensorFlow's XLA op set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TfXlaOp {
    /// The op type.
    pub name: &'static str,
    /// TensorFlow's gradient registration for it.
    pub gradient: TfGradient,
}

const DATA: &str = include_str!("tf_xla_ops.txt");

/// The ops of the list, sorted by name (comment lines skipped).
///
/// A line that does not parse would be a bug in the generated file; it is
/// kept with [`TfGradient::Unregistered`] so that no op is dropped silently,
/// and the unit tests below refuse such a file.
pub fn tf_xla_ops() -> &'static [TfXlaOp] {
    static OPS: LazyLock<Vec<TfXlaOp>> = LazyLock::new(|| DATA.lines().filter_map(parse_line).collect());
    &OPS
}

/// The op and gradient kind of one data line; `None` for comments and blank lines.
fn parse_line(line: &'static str) -> Option<TfXlaOp> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let mut parts = line.split_whitespace();
    let name = parts.next()?;
    let gradient = match parts.next() {
        Some("grad") => TfGradient::Function,
        Some("none") => TfGradient::NotDifferentiable,
        _ => TfGradient::Unregistered,
    };
    Some(TfXlaOp { name, gradient })
}

/// The TensorFlow version the list was generated from, as its header says.
pub fn tf_version() -> &'static str {
    DATA.lines()
        .next()
        .and_then(|l| l.split("TensorFlow ").nth(1))
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_sorted_unique_and_well_formed() {
        let ops = tf_xla_ops();
        assert!(ops.len() > 400, "{} ops", ops.len());
        assert!(ops.windows(2).all(|w| w[0].name < w[1].name), "sorted, each op once");
        for line in DATA.lines().filter(|l| !l.starts_with('#')) {
            let kind = line.split_whitespace().nth(1);
            assert!(matches!(kind, Some("grad" | "none" | "-")), "malformed line {line:?}");
        }
        let header_count: usize = DATA.lines().next().and_then(|l| l.split_whitespace().nth(2)?.parse().ok()).unwrap();
        assert_eq!(header_count, ops.len(), "the header's count is the number of ops");
        assert_eq!(tf_version(), "2.21.0");
        let matmul = ops.iter().find(|o| o.name == "MatMul").unwrap();
        assert_eq!(matmul.gradient, TfGradient::Function);
    }
}
