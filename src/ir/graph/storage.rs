//! A graph's storage helpers: the operand-slot cache, the copy-on-write
//! node overrides, the merged node view and the name table.
//!
//! Invariant: each helper is shared with a graph's clones (behind `Arc`
//! or copied cheaply) and never changes what a node reads as, only how it
//! is stored or found.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use rustc_hash::FxBuildHasher;

use super::{Edge, Node, NodeId};

/// The next free `[data, control]` operand slot of each node, by node
/// index; [`OperandSlots::UNKNOWN`] (or a missing entry) means "count the
/// node's incoming edges", which removing a node's producers requires.
#[derive(Clone, Debug, Default)]
pub(super) struct OperandSlots(Arc<Vec<[u32; 2]>>);

impl OperandSlots {
    pub(super) const UNKNOWN: [u32; 2] = [u32::MAX, u32::MAX];

    pub(super) fn get(&self, id: NodeIndex<u32>) -> Option<[u32; 2]> {
        self.0.get(id.index()).copied().filter(|s| *s != Self::UNKNOWN)
    }

    pub(super) fn set(&mut self, id: NodeIndex<u32>, slots: [u32; 2]) {
        let table = Arc::make_mut(&mut self.0);
        if table.len() <= id.index() {
            table.resize(id.index() + 1, Self::UNKNOWN);
        }
        table[id.index()] = slots;
    }

    /// Makes room for `additional` more nodes' slots, so that a graph built
    /// node by node does not regrow (and leave half of) the table.
    pub(super) fn reserve(&mut self, additional: usize) {
        Arc::make_mut(&mut self.0).reserve(additional);
    }

    pub(super) fn forget(&mut self, id: NodeIndex<u32>) {
        if self.0.get(id.index()).is_some_and(|s| *s != Self::UNKNOWN) {
            Arc::make_mut(&mut self.0)[id.index()] = Self::UNKNOWN;
        }
    }
}

/// The nodes a graph changed while its storage was shared with a clone.
///
/// A clone of a graph shares its node and edge storage, so cloning a
/// million-node graph costs a copy of its name table only. Changing a node
/// of a shared graph (a rename, an attribute) puts a copy of that node
/// here; changing the structure (adding or removing nodes or edges) copies
/// the storage and folds these nodes back into it. Reads look here first.
#[derive(Clone, Debug, Default)]
pub(super) struct Overrides {
    /// `slot[i]` is the position in `nodes` of node `i`'s copy, or
    /// `u32::MAX`; empty while there are no copies.
    slot: Vec<u32>,
    pub(super) nodes: Vec<(NodeIndex<u32>, Node)>,
}

impl Overrides {
    pub(super) fn get(&self, id: NodeIndex<u32>) -> Option<&Node> {
        let &s = self.slot.get(id.index())?;
        self.nodes.get(s as usize).map(|(_, node)| node)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The copy of node `id`, made from `base` if there is none yet.
    pub(super) fn get_or_copy(&mut self, base: &StableDiGraph<Node, Edge, u32>, id: NodeIndex<u32>) -> &mut Node {
        if self.slot.is_empty() {
            self.slot = vec![u32::MAX; petgraph::visit::NodeIndexable::node_bound(base)];
        }
        let s = match self.slot[id.index()] {
            u32::MAX => {
                self.slot[id.index()] = self.nodes.len() as u32;
                self.nodes.push((id, base[id].clone()));
                self.nodes.len() - 1
            }
            s => s as usize,
        };
        &mut self.nodes[s].1
    }

    /// Moves every copy into `storage`, which then holds the graph's nodes.
    pub(super) fn fold_into(&mut self, storage: &mut StableDiGraph<Node, Edge, u32>) {
        for (id, node) in self.nodes.drain(..) {
            storage[id] = node;
        }
        self.slot = Vec::new();
    }
}

/// A graph's nodes as it sees them: its storage under its overrides.
#[derive(Clone, Copy)]
pub(super) struct Nodes<'a> {
    pub(super) base: &'a StableDiGraph<Node, Edge, u32>,
    pub(super) overrides: &'a Overrides,
}

impl<'a> Nodes<'a> {
    pub(super) fn get(self, id: NodeIndex<u32>) -> &'a Node {
        match self.overrides.get(id) {
            Some(node) => node,
            None => &self.base[id],
        }
    }

    pub(super) fn name(self, id: NodeId) -> &'a str {
        &self.get(id.0).name
    }
}

/// The name → node index of a graph.
///
/// It stores node ids with 32 bits of their name's hash (8 bytes a slot),
/// not the names, which the nodes hold: a name is stored once per graph.
/// Growing the table rehashes from the stored bits without touching a
/// node, and a lookup compares names only when those bits match.
#[derive(Clone, Debug, Default)]
pub(super) struct NameTable {
    pub(super) table: HashTable<NameSlot>,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct NameSlot {
    pub(super) id: NodeId,
    pub(super) hash: u32,
}

/// 32 bits of a name's hash: what [`NameTable`] stores.
pub(super) fn hash_name(name: &str) -> u32 {
    let h = FxBuildHasher.hash_one(name);
    (h ^ (h >> 32)) as u32
}

/// The table's 64-bit hash of a stored 32-bit one: the multiplication
/// spreads it over the high bits (the control byte) and the low bits (the
/// bucket).
pub(super) fn spread(hash: u32) -> u64 {
    u64::from(hash).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(hash)
}

impl NameTable {
    pub(super) fn get(&self, nodes: Nodes<'_>, name: &str) -> Option<NodeId> {
        self.get_hashed(nodes, hash_name(name), name)
    }

    pub(super) fn insert(&mut self, nodes: Nodes<'_>, id: NodeId) {
        self.insert_hashed(hash_name(nodes.name(id)), id);
    }

    /// [`NameTable::get`] with the hash of `name` already computed.
    pub(super) fn get_hashed(&self, nodes: Nodes<'_>, hash: u32, name: &str) -> Option<NodeId> {
        self.table.find(spread(hash), |s| s.hash == hash && nodes.name(s.id) == name).map(|s| s.id)
    }

    /// [`NameTable::insert`] with the hash of the node's name already computed.
    pub(super) fn insert_hashed(&mut self, hash: u32, id: NodeId) {
        self.table.insert_unique(spread(hash), NameSlot { id, hash }, |s| spread(s.hash));
    }

    pub(super) fn remove(&mut self, nodes: Nodes<'_>, name: &str) {
        let hash = hash_name(name);
        if let Ok(entry) = self.table.find_entry(spread(hash), |s| s.hash == hash && nodes.name(s.id) == name) {
            entry.remove();
        }
    }

    pub(super) fn reserve(&mut self, additional: usize) {
        self.table.reserve(additional, |s| spread(s.hash));
    }

    pub(super) fn shrink_to_fit(&mut self) {
        self.table.shrink_to_fit(|s| spread(s.hash));
    }
}
