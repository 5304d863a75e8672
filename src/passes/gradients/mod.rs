//! Expansion of `gradients(ys, xs, grad_ys)` calls into backward graphs.
//!
//! (Being written; see the gradients issue.)

use super::error::PassError;
use crate::ir::Graph;

/// How gradient ops colocated with an outside-compilation op are clustered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GradientClusterPolicy {
    /// The seed's rule: `C.uid`, and `C.uid.uid2` for a gradient of a gradient.
    #[default]
    Nested,
    /// TensorFlow 2.x: the root of `C` plus `.uid`.
    Flat,
}

/// Settings of the gradients pass.
#[derive(Clone, Debug, Default)]
pub struct GradientsConfig {
    pub policy: GradientClusterPolicy,
}

/// Expands every gradients call of `graph`.
pub fn expand_gradients(graph: &mut Graph, config: &GradientsConfig) -> Vec<PassError> {
    let _ = (graph, config);
    Vec::new()
}
