//! `tpu-rewrite ops --coverage`: how much of TensorFlow's XLA op set runs.
//!
//! The measure is TensorFlow's own list ([`crate::ir::tf_xla_ops`]): the op
//! types tf2xla compiles. An op of it is *covered* when it has a simulator
//! kernel ([`crate::exec::kernels::has_kernel`]), a StableHLO lowering
//! ([`crate::xla::stablehlo::lowering_of`]) and, where TensorFlow registers
//! a gradient function for it, a gradient here
//! ([`crate::passes::gradients::has_gradient_function`]). An op that cannot
//! matter on a TPU may instead carry a reason ([`NO_TPU_REASONS`]); every
//! other op is reported with what it lacks. Nothing here is a hand-kept
//! list of what runs: every column is asked of the tables that run it.

use crate::exec::kernels::has_kernel;
use crate::ir::tf_xla_ops::{tf_version, tf_xla_ops, TfGradient};
use crate::passes::gradients::has_gradient_function;
use crate::xla::stablehlo::{lowering_of, unlowered_reason};

/// Ops of TensorFlow's XLA op set that cannot matter on a TPU, each with why.
pub const NO_TPU_REASONS: &[(&str, &str)] = &[
    (
        "_ArrayToList",
        "an internal converter of TensorFlow's legacy function instantiation; exported graphs never carry it",
    ),
    ("_EagerConst", "made only by eager execution to place a Python value on a device; exported graphs carry Const"),
    ("_FusedBatchNormEx", "made at run time by Grappler's CPU/GPU remapper; a graph for a TPU never carries it"),
    ("_FusedConv2D", "made at run time by Grappler's CPU/GPU remapper; a graph for a TPU never carries it"),
    (
        "_ListToArray",
        "an internal converter of TensorFlow's legacy function instantiation; exported graphs never carry it",
    ),
    ("_UnaryOpsComposition", "made at run time by Grappler's CPU remapper; a graph for a TPU never carries it"),
    ("_XlaAotOnlyVarHandleOp", "exists only for tfcompile's ahead-of-time CPU compilation; never in a TPU graph"),
];

/// What is known of one op of TensorFlow's XLA op set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpCoverage {
    /// The op type.
    pub name: &'static str,
    /// The simulator has a kernel for it.
    pub kernel: bool,
    /// TensorFlow's gradient registration.
    pub tf_gradient: TfGradient,
    /// A gradient function exists here (asked only where TensorFlow registers one).
    pub gradient: bool,
    /// How `--backend pjrt` lowers it, if it does.
    pub lowering: Option<&'static str>,
    /// Why it needs none of the three, for ops that cannot matter on a TPU.
    pub reason: Option<&'static str>,
}

impl OpCoverage {
    /// True when it has a kernel, a lowering, and a gradient where TensorFlow has one.
    pub fn covered(&self) -> bool {
        self.kernel && self.lowering.is_some() && (self.gradient || self.tf_gradient != TfGradient::Function)
    }

    /// What it lacks, in the order kernel, gradient, lowering (empty when covered).
    pub fn missing(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if !self.kernel {
            out.push("kernel");
        }
        if self.tf_gradient == TfGradient::Function && !self.gradient {
            out.push("gradient");
        }
        if self.lowering.is_none() {
            out.push("lowering");
        }
        out
    }

    fn gradient_column(&self) -> &'static str {
        match (self.tf_gradient, self.gradient) {
            (TfGradient::Function, true) => "yes",
            (TfGradient::Function, false) => "-",
            (TfGradient::NotDifferentiable, _) => "not differentiable",
            (TfGradient::Unregistered, _) => "none in TensorFlow",
        }
    }

    fn status(&self) -> String {
        match (self.covered(), self.reason) {
            (true, _) => "covered".to_string(),
            (false, Some(why)) => format!("not needed: {why}"),
            (false, None) => {
                let mut s = format!("missing {}", self.missing().join(", "));
                if self.lowering.is_none() {
                    if let Some(why) = unlowered_reason(self.name) {
                        s.push_str(&format!(" (not lowered: {why})"));
                    }
                }
                s
            }
        }
    }
}

/// Every op of TensorFlow's XLA op set with its coverage, sorted by name.
pub fn coverage() -> Vec<OpCoverage> {
    tf_xla_ops()
        .iter()
        .map(|op| OpCoverage {
            name: op.name,
            kernel: has_kernel(op.name),
            tf_gradient: op.gradient,
            gradient: op.gradient == TfGradient::Function && has_gradient_function(op.name),
            lowering: lowering_of(op.name),
            reason: NO_TPU_REASONS.iter().find(|(n, _)| *n == op.name).map(|(_, why)| *why),
        })
        .collect()
}

/// The counts line: covered, with a reason, not yet covered, of the total.
pub fn summary(ops: &[OpCoverage]) -> String {
    let covered = ops.iter().filter(|o| o.covered()).count();
    let reasons = ops.iter().filter(|o| !o.covered() && o.reason.is_some()).count();
    let missing = ops.len() - covered - reasons;
    format!(
        "covered {covered}/{} ops of TensorFlow {}'s XLA op set; {reasons} need none (they cannot matter on a TPU); \
         {missing} not yet covered",
        ops.len(),
        tf_version()
    )
}

/// The coverage as aligned plain text, one op per line, then the counts.
pub fn plain_table() -> String {
    let ops = coverage();
    let width = ops.iter().map(|o| o.name.len()).max().unwrap_or(0);
    let mut out = format!("{:<width$}  {:<6}  {:<18}  {:<16}  status\n", "op", "kernel", "gradient", "lowering");
    for op in &ops {
        out.push_str(&format!(
            "{:<width$}  {:<6}  {:<18}  {:<16}  {}\n",
            op.name,
            if op.kernel { "yes" } else { "-" },
            op.gradient_column(),
            op.lowering.unwrap_or("-"),
            op.status()
        ));
    }
    out.push_str(&summary(&ops));
    out.push('\n');
    out
}

/// The coverage as a Markdown section of `docs/ops.md`.
pub fn markdown_section() -> String {
    let ops = coverage();
    let mut out = format!(
        "\n## TensorFlow's XLA op set\n\n\
         Generated by `tpu-rewrite ops --coverage` (plain text) and `--markdown`. The measure is the list of op \
         types TensorFlow {}'s XLA bridge compiles for `XLA_CPU_JIT`, generated from TensorFlow itself by \
         `tests/tf/xla_op_list.py`. An op is *covered* when it has a simulator kernel, a StableHLO lowering and, \
         where TensorFlow registers a gradient function, a gradient. *gradient*: `yes`, `-` (TensorFlow has one, \
         this project not yet), `not differentiable` or `none in TensorFlow` (nothing is needed). Ops that cannot \
         matter on a TPU say why they need none.\n\n**{}.**\n\n\
         | op | kernel | gradient | lowering | status |\n|---|---|---|---|---|\n",
        tf_version(),
        summary(&ops)
    );
    for op in &ops {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            op.name,
            if op.kernel { "yes" } else { "-" },
            op.gradient_column(),
            op.lowering.unwrap_or("-"),
            op.status()
        ));
    }
    out
}
