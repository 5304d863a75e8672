//! A small sorted attribute map, shared copy-on-write.
//!
//! Ops carry few attributes, so a sorted `Vec` beats a `BTreeMap` in memory
//! (a B-tree leaf alone holds room for eleven entries) and in speed.
//! Iteration is in key order, which keeps printing deterministic. Keys are
//! `Arc<str>` so that a builder can share one allocation per distinct key
//! across a million ops (see [`AttrMap::insert_shared`]).
//!
//! The entries sit behind an `Arc`: cloning a map is a reference-count
//! bump, and the first mutation of a shared map copies it. Lowering relies
//! on this to stamp out one program per replica by cloning graphs. An
//! empty map holds no allocation at all.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::types::AttrValue;

type Entry = (Arc<str>, AttrValue);

/// An attribute map sorted by key.
#[derive(Clone, Debug, Default)]
pub struct AttrMap {
    /// `None` when empty; never `Some` of an empty vector after a removal
    /// leaves it empty (see [`AttrMap::remove`]).
    entries: Option<Arc<Vec<Entry>>>,
}

impl PartialEq for AttrMap {
    fn eq(&self, other: &AttrMap) -> bool {
        self.slice() == other.slice()
    }
}

impl Serialize for AttrMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.slice().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for AttrMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<AttrMap, D::Error> {
        let entries = Vec::<Entry>::deserialize(deserializer)?;
        let mut map = AttrMap::new();
        for (k, v) in entries {
            map.insert_shared(k, v);
        }
        Ok(map)
    }
}

impl AttrMap {
    /// An empty map.
    pub fn new() -> AttrMap {
        AttrMap { entries: None }
    }

    /// A map of `entries` in any order; of entries with equal keys the last one wins, as if each
    /// entry were inserted in turn. One allocation for the map instead of a growing vector.
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
        AttrMap { entries: Some(Arc::new(entries)) }
    }

    fn slice(&self) -> &[Entry] {
        self.entries.as_deref().map_or(&[], Vec::as_slice)
    }

    /// The entries for writing; copies them first if the map is shared.
    fn entries_mut(&mut self) -> &mut Vec<Entry> {
        Arc::make_mut(self.entries.get_or_insert_with(|| Arc::new(Vec::with_capacity(2))))
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.slice().binary_search_by(|(k, _)| (**k).cmp(key))
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&AttrValue> {
        self.position(key).ok().map(|i| &self.slice()[i].1)
    }

    /// A mutable reference to the value for `key`.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut AttrValue> {
        let i = self.position(key).ok()?;
        Some(&mut self.entries_mut()[i].1)
    }

    /// True when `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Sets `key`, returning the previous value.
    pub fn insert(&mut self, key: impl AsRef<str>, value: AttrValue) -> Option<AttrValue> {
        let key = key.as_ref();
        match self.position(key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries_mut()[i].1, value)),
            Err(i) => {
                self.entries_mut().insert(i, (Arc::from(key), value));
                None
            }
        }
    }

    /// Sets `key` reusing a shared key allocation.
    pub fn insert_shared(&mut self, key: Arc<str>, value: AttrValue) -> Option<AttrValue> {
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries_mut()[i].1, value)),
            Err(i) => {
                self.entries_mut().insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<AttrValue> {
        let i = self.position(key).ok()?;
        let entries = self.entries_mut();
        let (_, value) = entries.remove(i);
        if entries.is_empty() {
            self.entries = None;
        }
        Some(value)
    }

    /// A copy without the `keys` that are present: cheaper than a clone
    /// followed by removals when the map is shared, and a plain clone
    /// (no copy at all) when none of the keys is present.
    pub fn without(&self, keys: &[&str]) -> AttrMap {
        if !keys.iter().any(|k| self.contains_key(k)) {
            return self.clone();
        }
        let kept: Vec<Entry> = self.slice().iter().filter(|(k, _)| !keys.contains(&&**k)).cloned().collect();
        AttrMap { entries: (!kept.is_empty()).then(|| Arc::new(kept)) }
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &AttrValue)> {
        self.slice().iter().map(|(k, v)| (&**k, v))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.slice().len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.slice().is_empty()
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

    /// Frees unused capacity (only of a map this one does not share).
    pub fn shrink_to_fit(&mut self) {
        if let Some(entries) = self.entries.as_mut().and_then(Arc::get_mut) {
            entries.shrink_to_fit();
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

impl<'a> IntoIterator for &'a AttrMap {
    type Item = (&'a str, &'a AttrValue);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Arc<str>, AttrValue)>,
        fn(&'a (Arc<str>, AttrValue)) -> (&'a str, &'a AttrValue),
    >;

    fn into_iter(self) -> Self::IntoIter {
        fn split(e: &(Arc<str>, AttrValue)) -> (&str, &AttrValue) {
            (&e.0, &e.1)
        }
        self.slice().iter().map(split)
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
}
