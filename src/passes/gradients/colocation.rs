//! The gradient colocation stack of the seed (`EnterGradientColocation` / `ExitGradientColocation`).
//!
//! While the gradients pass emits the gradient of a forward op X it "colocates" with X: it enters a
//! colocation for X, emits ops, and exits it. Entering a colocation with an op that carries
//! `_xla_outside_compilation = C`, when no outside-compilation cluster is open, opens the cluster
//! the gradient ops go into, named by [`gradient_cluster`] from `C` and the call's uid. Colocations
//! nest (aggregation of several gradients colocates with the first summand's producer inside the
//! colocation of the op being differentiated); an inner colocation never changes an open cluster.
//!
//! Invariants: every enter is matched by an exit of the same op, innermost first; the cluster
//! opened by a colocation is closed by the exit of that same colocation.
//!
//! The two user-facing errors cannot arise from the gradients pass on valid input, and this is why:
//! - the pass always passes the call's uid (every call gets `<scope>/uid`), so "No gradient_uid
//!   calling gradient within outside_compilation" needs a caller without a uid;
//! - a cluster opened by a colocation stays open until that colocation exits, and an inner
//!   colocation with an open cluster does nothing, so "Cannot nest gradient colocation operations
//!   outside compilation" needs a caller that closes the cluster (with
//!   [`ColocationContext::exit_outside_compilation`]) inside an open gradient colocation.
//!
//! Both stay real code paths of this API, which other passes may call, and are tested through it.

use crate::ir::{AttrValue, Graph, NodeId};
use crate::passes::error::PassError;

use super::GradientClusterPolicy;

/// The attribute naming a node's outside-compilation cluster.
pub const OUTSIDE_COMPILATION_ATTR: &str = "_xla_outside_compilation";

/// The cluster for gradient ops colocated with an op in outside-compilation cluster `cluster`,
/// emitted by the gradients call with uid `uid`.
///
/// `Nested` (the seed): keep `cluster` if it already ends in `.uid`, else append `.uid`.
/// `Flat` (TensorFlow 2.x): the root of `cluster` (before its first `.`) plus `.uid`.
pub fn gradient_cluster(policy: GradientClusterPolicy, cluster: &str, uid: &str) -> String {
    match policy {
        GradientClusterPolicy::Nested => {
            let suffix_len = uid.len() + 1;
            let keeps = cluster.len() > suffix_len
                && cluster.ends_with(uid)
                && cluster.as_bytes()[cluster.len() - suffix_len] == b'.';
            if keeps {
                cluster.to_string()
            } else {
                format!("{cluster}.{uid}")
            }
        }
        GradientClusterPolicy::Flat => {
            let root = cluster.split('.').next().unwrap_or(cluster);
            format!("{root}.{uid}")
        }
    }
}

/// The colocation state of one gradients call (the seed's fields of `TPUReplicateContext`).
#[derive(Clone, Debug)]
pub struct ColocationContext {
    policy: GradientClusterPolicy,
    /// The open outside-compilation cluster new ops go into.
    cluster: Option<String>,
    /// The colocation that opened `cluster`, if a colocation did.
    in_gradient_colocation: Option<NodeId>,
    /// The open colocations, innermost last.
    stack: Vec<NodeId>,
}

impl ColocationContext {
    /// A context with no open cluster or colocation.
    pub fn new(policy: GradientClusterPolicy) -> ColocationContext {
        ColocationContext { policy, cluster: None, in_gradient_colocation: None, stack: Vec::new() }
    }

    /// The open outside-compilation cluster, if any.
    pub fn cluster(&self) -> Option<&str> {
        self.cluster.as_deref()
    }

    /// The innermost open colocation.
    pub fn colocated_with(&self) -> Option<NodeId> {
        self.stack.last().copied()
    }

    /// Number of open colocations.
    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// Opens outside-compilation cluster `cluster` (a gradients call inside an
    /// outside_compilation block). Returns false, changing nothing, if one is open already.
    pub fn enter_outside_compilation(&mut self, cluster: impl Into<String>) -> bool {
        if self.cluster.is_some() {
            return false;
        }
        self.cluster = Some(cluster.into());
        true
    }

    /// Closes the open outside-compilation cluster. Returns false if none was open.
    pub fn exit_outside_compilation(&mut self) -> bool {
        self.cluster.take().is_some()
    }

    /// Enters the gradient colocation with `op` for the gradients call with uid `uid`.
    ///
    /// The colocation is pushed even when an error is returned, so the matching exit stays valid.
    pub fn enter_gradient_colocation(&mut self, graph: &Graph, op: NodeId, uid: Option<&str>) -> Result<(), PassError> {
        self.stack.push(op);
        if self.cluster.is_some() {
            return Ok(());
        }
        let node = graph.node(op);
        let Some(outside) = super::op_attr(&node.attrs, OUTSIDE_COMPILATION_ATTR).and_then(AttrValue::as_str) else {
            return Ok(());
        };
        if let Some(outer) = self.in_gradient_colocation {
            return Err(PassError::NestedGradientColocation {
                op: node.name.to_string(),
                outer: graph.node(outer).name.to_string(),
                span: node.span,
            });
        }
        let Some(uid) = uid else {
            return Err(PassError::MissingGradientUid {
                op: node.name.to_string(),
                cluster: outside.to_string(),
                span: node.span,
            });
        };
        self.in_gradient_colocation = Some(op);
        self.cluster = Some(gradient_cluster(self.policy, outside, uid));
        Ok(())
    }

    /// Leaves the gradient colocation with `op`, which must be the innermost one.
    pub fn exit_gradient_colocation(&mut self, graph: &Graph, op: NodeId) -> Result<(), PassError> {
        let node = graph.node(op);
        let Some(last) = self.stack.pop() else {
            return Err(PassError::BadlyNestedColocation {
                message: format!("empty stack when popping `%{}`", node.name),
                span: node.span,
            });
        };
        if last != op {
            let expected = if graph.contains(last) { graph.node(last).name.to_string() } else { last.to_string() };
            return Err(PassError::BadlyNestedColocation {
                message: format!("expected `%{expected}`, got `%{}`", node.name),
                span: node.span,
            });
        }
        if self.in_gradient_colocation == Some(op) {
            self.in_gradient_colocation = None;
            self.cluster = None;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_follow_the_policies() {
        use GradientClusterPolicy::*;
        assert_eq!(gradient_cluster(Nested, "0", "gradients/uid"), "0.gradients/uid");
        assert_eq!(gradient_cluster(Nested, "0.gradients/uid", "gradients/uid"), "0.gradients/uid");
        assert_eq!(gradient_cluster(Nested, "0.gradients/uid", "gradients_1/uid"), "0.gradients/uid.gradients_1/uid");
        assert_eq!(gradient_cluster(Flat, "0", "gradients/uid"), "0.gradients/uid");
        assert_eq!(gradient_cluster(Flat, "0.gradients/uid", "gradients_1/uid"), "0.gradients_1/uid");
        assert_eq!(gradient_cluster(Flat, "0.gradients/uid.gradients_1/uid", "gradients_2/uid"), "0.gradients_2/uid");
        // A cluster that merely ends in the uid text, without the dot, is not that call's cluster.
        assert_eq!(gradient_cluster(Nested, "xgradients/uid", "gradients/uid"), "xgradients/uid.gradients/uid");
    }
}
