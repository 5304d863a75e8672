//! A small sorted attribute map, shared copy-on-write.
//!
//! Ops carry few attributes, so a sorted `Vec` beats a `BTreeMap` in memory
//! (a B-tree leaf alone holds room for eleven entries) and in speed.
//! Iteration is in key order, which keeps printing deterministic. Keys are
//! `Arc<str>` so that a builder can share one allocation per distinct key
//! across a million ops (see [`AttrMap::insert_shared`]).
//!
//! The entries sit behind an `Arc<[_]>`: cloning a map is a reference-count
//! bump, and the first mutation of a shared map copies it. Lowering relies
//! on this to stamp out one program per replica by cloning graphs. A map
//! is one allocation of exactly its entries (no spare capacity, no separate
//! vector header), since most nodes of a large graph that hold a map of
//! their own (a `Const`'s value, a variable's name) never change it; adding
//! or removing an entry makes a new allocation. An empty map holds no
//! allocation at all.
//!
//! [`AttrMap::without`] shares too: the copy hides the dropped entries
//! behind a bit mask instead of copying the others, so stripping the TPU
//! tags from a million ops allocates nothing. The first mutation of such a
//! map copies its visible entries.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::types::AttrValue;

type Entry = (Arc<str>, AttrValue);

/// An attribute map sorted by key.
#[derive(Clone, Debug, Default)]
pub struct AttrMap {
    /// `None` when empty; never `Some` of an empty slice after a removal
    /// leaves it empty (see [`AttrMap::remove`]).
    entries: Option<Arc<[Entry]>>,
    /// Entries of `entries` this map leaves out: bit `i` hides entry `i`
    /// (see [`AttrMap::without`]). Zero for a map that was never narrowed.
    hidden: u32,
}

/// The widest map [`AttrMap::without`] narrows by hiding; a wider one is copied.
const MASK_BITS: usize = u32::BITS as usize;

impl PartialEq for AttrMap {
    fn eq(&self, other: &AttrMap) -> bool {
        self.len() == other.len() && self.entries().zip(other.entries()).all(|(a, b)| a == b)
    }
}

impl Serialize for AttrMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.entries())
    }
}

impl<'de> Deserialize<'de> for AttrMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<AttrMap, D::Error> {
        Ok(AttrMap::from_entries(Vec::<Entry>::deserialize(deserializer)?))
    }
}

impl AttrMap {
    /// An empty map.
    pub fn new() -> AttrMap {
        AttrMap { entries: None, hidden: 0 }
    }

    /// A map of `entries` in any order; of entries with equal keys the last one wins, as if each
    /// entry were inserted in turn. One allocation of exactly the entries for the map.
    pub fn from_entries(mut entries: Vec<(Arc<str>, AttrValue)>) -> AttrMap {
        if entries.is_empty() {
            return AttrMap::new();
        }
        // A stable sort keeps equal keys in insertion order; the dedup then keeps the last value.
        entries.sort_by(|a, b| compare_keys(&a.0, &b.0));
        entries.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(&mut later.1, &mut earlier.1);
            }
            same
        });
        AttrMap { entries: Some(Arc::from(entries)), hidden: 0 }
    }

    /// All stored entries, the hidden ones included.
    fn slice(&self) -> &[Entry] {
        self.entries.as_deref().unwrap_or(&[])
    }

    /// The visible entries, in key order.
    fn entries(&self) -> Iter<'_> {
        Iter { entries: self.slice().iter().enumerate(), hidden: self.hidden, len: self.len() }
    }

    fn is_hidden(&self, i: usize) -> bool {
        i < MASK_BITS && self.hidden & (1 << i) != 0
    }

    /// Drops the hidden entries for good, copying the visible ones.
    fn unhide(&mut self) {
        if self.hidden != 0 {
            let kept: Vec<Entry> = self.entries().cloned().collect();
            *self = AttrMap { entries: (!kept.is_empty()).then(|| Arc::from(kept)), hidden: 0 };
        }
    }

    /// The entries for changing values in place; copies them first if the map is shared.
    fn values_mut(&mut self) -> &mut [Entry] {
        self.unhide();
        match &mut self.entries {
            Some(entries) => Arc::make_mut(entries),
            None => &mut [],
        }
    }

    /// Replaces the entries by a copy that `edit` changed in length: one new
    /// allocation of exactly the entries it leaves (none when it leaves none).
    fn rebuild<R>(&mut self, edit: impl FnOnce(&mut Vec<Entry>) -> R) -> R {
        self.unhide();
        let mut entries: Vec<Entry> = Vec::with_capacity(self.slice().len() + 1);
        entries.extend(self.slice().iter().cloned());
        let result = edit(&mut entries);
        self.entries = (!entries.is_empty()).then(|| Arc::from(entries));
        result
    }

    /// Where `key` is among the stored entries (a hidden one counts as
    /// absent). Only an unhidden map may be written at an `Err` position.
    fn position(&self, key: &str) -> Result<usize, usize> {
        match self.slice().binary_search_by(|(k, _)| compare_keys(k, key)) {
            Ok(i) if self.is_hidden(i) => Err(i),
            found => found,
        }
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&AttrValue> {
        self.position(key).ok().map(|i| &self.slice()[i].1)
    }

    /// A mutable reference to the value for `key`.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut AttrValue> {
        self.unhide();
        let i = self.position(key).ok()?;
        Some(&mut self.values_mut()[i].1)
    }

    /// True when `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Sets `key`, returning the previous value.
    pub fn insert(&mut self, key: impl AsRef<str>, value: AttrValue) -> Option<AttrValue> {
        let key = key.as_ref();
        self.unhide();
        match self.position(key) {
            Ok(i) => Some(std::mem::replace(&mut self.values_mut()[i].1, value)),
            Err(i) => {
                self.rebuild(|entries| entries.insert(i, (Arc::from(key), value)));
                None
            }
        }
    }

    /// Sets `key` reusing a shared key allocation.
    pub fn insert_shared(&mut self, key: Arc<str>, value: AttrValue) -> Option<AttrValue> {
        self.unhide();
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.values_mut()[i].1, value)),
            Err(i) => {
                self.rebuild(|entries| entries.insert(i, (key, value)));
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<AttrValue> {
        self.unhide();
        let i = self.position(key).ok()?;
        Some(self.rebuild(|entries| entries.remove(i).1))
    }

    /// A copy without the `keys` that are present. It shares the entries
    /// and hides the dropped ones, so it costs a reference-count bump;
    /// only a map wider than 32 entries is copied.
    pub fn without(&self, keys: &[&str]) -> AttrMap {
        let mut hidden = self.hidden;
        for key in keys {
            if let Ok(i) = self.position(key) {
                if i >= MASK_BITS {
                    let kept: Vec<Entry> = self.entries().filter(|(k, _)| !keys.contains(&&**k)).cloned().collect();
                    return AttrMap { entries: (!kept.is_empty()).then(|| Arc::from(kept)), hidden: 0 };
                }
                hidden |= 1 << i;
            }
        }
        if hidden.count_ones() as usize == self.slice().len() {
            return AttrMap::new();
        }
        AttrMap { entries: self.entries.clone(), hidden }
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &AttrValue)> {
        self.into_iter()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.slice().len() - self.hidden.count_ones() as usize
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The string value of `key`, if it is a UTF-8 string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(AttrValue::as_str)
    }

    /// The int value of `key`.
    pub fn get_int(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(AttrValue::as_int)
    }

    /// The bool value of `key`.
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(AttrValue::as_bool)
    }

    /// True when both maps show the same entries from one shared allocation
    /// (a clone, or maps a builder shares between nodes of equal attributes).
    pub fn shares_storage(&self, other: &AttrMap) -> bool {
        match (&self.entries, &other.entries) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) && self.hidden == other.hidden,
            _ => false,
        }
    }
}

/// `a.cmp(b)`, deciding on the first bytes without a call to `memcmp` when they differ (they
/// usually do: `T` against `_class`).
fn compare_keys(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}

impl FromIterator<(String, AttrValue)> for AttrMap {
    fn from_iter<I: IntoIterator<Item = (String, AttrValue)>>(iter: I) -> Self {
        let mut map = AttrMap::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

/// The visible entries of a map, in key order.
#[derive(Clone, Debug)]
struct Iter<'a> {
    entries: std::iter::Enumerate<std::slice::Iter<'a, Entry>>,
    hidden: u32,
    /// Visible entries not yet returned.
    len: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Entry;

    fn next(&mut self) -> Option<&'a Entry> {
        let hidden = self.hidden;
        let (_, entry) = self.entries.find(|&(i, _)| i >= MASK_BITS || hidden & (1 << i) == 0)?;
        self.len -= 1;
        Some(entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len, Some(self.len))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// The visible entries of a map as `(key, value)`, in key order.
#[derive(Clone, Debug)]
pub struct AttrIter<'a>(Iter<'a>);

impl<'a> Iterator for AttrIter<'a> {
    type Item = (&'a str, &'a AttrValue);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (&**k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for AttrIter<'_> {}

impl<'a> IntoIterator for &'a AttrMap {
    type Item = (&'a str, &'a AttrValue);
    type IntoIter = AttrIter<'a>;

    fn into_iter(self) -> AttrIter<'a> {
        AttrIter(self.entries())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_entries_matches_inserting_each_entry() {
        let entries: Vec<(Arc<str>, AttrValue)> = vec![
            ("value".into(), AttrValue::Int(1)),
            ("_class".into(), AttrValue::str("loc:@a")),
            ("T".into(), AttrValue::Int(2)),
            ("_tpu_replicate".into(), AttrValue::str("cluster")),
            ("T".into(), AttrValue::Int(3)),
            ("N".into(), AttrValue::Int(4)),
        ];
        let mut inserted = AttrMap::new();
        for (k, v) in entries.clone() {
            inserted.insert_shared(k, v);
        }
        let built = AttrMap::from_entries(entries);
        assert_eq!(built, inserted);
        let keys: Vec<&str> = built.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["N", "T", "_class", "_tpu_replicate", "value"]);
        assert_eq!(built.get_int("T"), Some(3));
        assert!(AttrMap::from_entries(Vec::new()).is_empty());
    }

    fn tagged() -> AttrMap {
        AttrMap::from_entries(vec![
            ("T".into(), AttrValue::Int(1)),
            ("_tpu_replicate".into(), AttrValue::str("cluster")),
            ("_xla_outside_compilation".into(), AttrValue::str("oc")),
            ("value".into(), AttrValue::Int(2)),
        ])
    }

    #[test]
    fn without_hides_the_keys_and_shares_the_rest() {
        let map = tagged();
        let narrowed = map.without(&["_tpu_replicate", "_xla_outside_compilation", "absent"]);
        let keys: Vec<&str> = narrowed.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["T", "value"]);
        assert_eq!(narrowed.len(), 2);
        assert_eq!(narrowed.iter().len(), 2);
        assert_eq!(narrowed.get("_tpu_replicate"), None);
        assert!(!narrowed.contains_key("_xla_outside_compilation"));
        assert_eq!(narrowed.get_int("value"), Some(2));
        assert!(Arc::ptr_eq(narrowed.entries.as_ref().unwrap(), map.entries.as_ref().unwrap()));
        // Equal to the same map built without the keys, and it serializes alike.
        let plain = AttrMap::from_entries(vec![("value".into(), AttrValue::Int(2)), ("T".into(), AttrValue::Int(1))]);
        assert_eq!(narrowed, plain);
        assert_ne!(narrowed, map);
        assert_eq!(serde_json::to_string(&narrowed).unwrap(), serde_json::to_string(&plain).unwrap());
        // The original is untouched.
        assert_eq!(map.get_str("_tpu_replicate"), Some("cluster"));
        assert_eq!(map.len(), 4);
    }

    #[test]
    fn writing_a_narrowed_map_keeps_the_keys_hidden() {
        let map = tagged();
        let mut narrowed = map.without(&["_tpu_replicate"]);
        assert_eq!(narrowed.insert("_tpu_replicate", AttrValue::Int(7)), None);
        assert_eq!(narrowed.get_int("_tpu_replicate"), Some(7));
        let mut removed = map.without(&["T"]);
        assert_eq!(removed.remove("T"), None);
        assert_eq!(removed.remove("value"), Some(AttrValue::Int(2)));
        let keys: Vec<&str> = removed.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["_tpu_replicate", "_xla_outside_compilation"]);
        let mut changed = map.without(&["value"]);
        assert_eq!(changed.get_mut("value"), None);
        *changed.get_mut("T").unwrap() = AttrValue::Int(9);
        assert_eq!(changed.get_int("T"), Some(9));
        assert_eq!(changed.len(), 3);
        assert_eq!(map.get_int("T"), Some(1));
        assert!(map.without(&["T", "_tpu_replicate", "_xla_outside_compilation", "value"]).is_empty());
        assert_eq!(map.without(&["T"]).without(&["value"]).len(), 2);
    }

    #[test]
    fn a_wide_map_is_copied_by_without() {
        let entries: Vec<(Arc<str>, AttrValue)> =
            (0..40).map(|i| (Arc::from(format!("k{i:02}")), AttrValue::Int(i))).collect();
        let map = AttrMap::from_entries(entries);
        let narrowed = map.without(&["k39", "k00"]);
        assert_eq!(narrowed.len(), 38);
        assert_eq!(narrowed.get("k39"), None);
        assert_eq!(narrowed.get("k00"), None);
        assert_eq!(narrowed.get_int("k38"), Some(38));
    }
}
