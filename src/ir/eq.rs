//! Structural equality of modules, as the round-trip property needs it.
//!
//! Two graphs are equal when they have the same name and attributes, the
//! same nodes in the same text order (name, kind, op type, device,
//! attributes, operands by name, enclosing region), and the same regions in
//! the same order. Spans, node indices and seq numbers are ignored.

use super::graph::{Graph, Module, NodeKind, RegionId, RegionKind};
use super::types::AttrValue;
use super::AttrMap;

impl PartialEq for Module {
    fn eq(&self, other: &Module) -> bool {
        self.header == other.header
            && self.graphs.len() == other.graphs.len()
            && self.graphs.iter().zip(&other.graphs).all(|(a, b)| a == b)
    }
}

impl PartialEq for Graph {
    fn eq(&self, other: &Graph) -> bool {
        first_difference(self, other).is_none()
    }
}

fn attrs_eq(a: &AttrMap, b: &AttrMap) -> bool {
    a.len() == b.len() && a.iter().zip(b.iter()).all(|((ka, va), (kb, vb))| ka == kb && value_eq(va, vb))
}

/// Like `==` but NaN equals NaN bit-for-bit, so round trips of NaN hold.
fn value_eq(a: &AttrValue, b: &AttrValue) -> bool {
    match (a, b) {
        (AttrValue::Float(x), AttrValue::Float(y)) => x.to_bits() == y.to_bits() || x == y,
        (AttrValue::List(x), AttrValue::List(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| value_eq(a, b)),
        (AttrValue::Tensor(x), AttrValue::Tensor(y)) => {
            use super::types::TensorData as D;
            x.dtype == y.dtype
                && x.shape == y.shape
                && match (&x.data, &y.data) {
                    (D::Float(p), D::Float(q)) => {
                        p.len() == q.len() && p.iter().zip(q).all(|(a, b)| a.to_bits() == b.to_bits())
                    }
                    (D::Double(p), D::Double(q)) => {
                        p.len() == q.len() && p.iter().zip(q).all(|(a, b)| a.to_bits() == b.to_bits())
                    }
                    (p, q) => p == q,
                }
        }
        (AttrValue::Func(x), AttrValue::Func(y)) => x.name == y.name && attrs_eq(&x.attrs, &y.attrs),
        (a, b) => a == b,
    }
}

/// Describes the first difference between two graphs, or `None` if equal.
pub fn first_difference(a: &Graph, b: &Graph) -> Option<String> {
    if a.name != b.name {
        return Some(format!("graph names differ: @{} vs @{}", a.name, b.name));
    }
    if !attrs_eq(&a.attrs, &b.attrs) {
        return Some(format!("graph @{} attributes differ", a.name));
    }
    if a.node_count() != b.node_count() {
        return Some(format!("node counts differ: {} vs {}", a.node_count(), b.node_count()));
    }
    let region_order = |g: &Graph| {
        let mut ids: Vec<RegionId> = (0..g.regions.len() as u32).map(RegionId).collect();
        ids.sort_by_key(|r| g.region(*r).seq);
        ids
    };
    let (ra, rb) = (region_order(a), region_order(b));
    if ra.len() != rb.len() {
        return Some(format!("region counts differ: {} vs {}", ra.len(), rb.len()));
    }
    let rank = |order: &[RegionId], r: Option<RegionId>| r.map(|r| order.iter().position(|x| *x == r));
    for (x, y) in ra.iter().zip(&rb) {
        let (p, q) = (a.region(*x), b.region(*y));
        if !attrs_eq(&p.attrs, &q.attrs) || rank(&ra, p.parent) != rank(&rb, q.parent) {
            return Some(format!("region {x} differs"));
        }
        match (&p.kind, &q.kind) {
            (RegionKind::OutsideCompilation, RegionKind::OutsideCompilation) => {}
            (RegionKind::Replicate { inputs: ia, outputs: oa }, RegionKind::Replicate { inputs: ib, outputs: ob }) => {
                let names_a: Vec<_> = ia.iter().map(|n| a.node(*n).name.clone()).collect();
                let names_b: Vec<_> = ib.iter().map(|n| b.node(*n).name.clone()).collect();
                let outs_a: Vec<_> = oa.iter().map(|v| a.value_name(v)).collect();
                let outs_b: Vec<_> = ob.iter().map(|v| b.value_name(v)).collect();
                if names_a != names_b || outs_a != outs_b {
                    return Some(format!("replicate region {x} inputs or outputs differ"));
                }
            }
            _ => return Some(format!("region {x} kinds differ")),
        }
    }
    for (x, y) in a.nodes_in_order().into_iter().zip(b.nodes_in_order()) {
        let (p, q) = (a.node(x), b.node(y));
        let kind_eq = match (&p.kind, &q.kind) {
            (NodeKind::RegionInput { region: r1, index: i1 }, NodeKind::RegionInput { region: r2, index: i2 }) => {
                i1 == i2 && rank(&ra, Some(*r1)) == rank(&rb, Some(*r2))
            }
            (k1, k2) => k1 == k2,
        };
        if p.name != q.name
            || !kind_eq
            || p.op != q.op
            || p.device != q.device
            || !attrs_eq(&p.attrs, &q.attrs)
            || rank(&ra, p.region) != rank(&rb, q.region)
        {
            return Some(format!("node %{} differs from %{}", p.name, q.name));
        }
        let ins_a: Vec<_> = a.inputs(x).iter().map(|i| (a.node(i.src).name.clone(), i.output)).collect();
        let ins_b: Vec<_> = b.inputs(y).iter().map(|i| (b.node(i.src).name.clone(), i.output)).collect();
        if ins_a != ins_b {
            return Some(format!("operands of %{} differ", p.name));
        }
    }
    None
}
