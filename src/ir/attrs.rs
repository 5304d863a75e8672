//! A small sorted attribute map.
//!
//! Ops carry few attributes, so a sorted `Vec` beats a `BTreeMap` in memory
//! (a B-tree leaf alone holds room for eleven entries) and in speed.
//! Iteration is in key order, which keeps printing deterministic. Keys are
//! `Arc<str>` so that a builder can share one allocation per distinct key
//! across a million ops (see [`AttrMap::insert_shared`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::types::AttrValue;

/// An attribute map sorted by key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AttrMap {
    entries: Vec<(Arc<str>, AttrValue)>,
}

impl AttrMap {
    /// An empty map.
    pub fn new() -> AttrMap {
        AttrMap { entries: Vec::new() }
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| (**k).cmp(key))
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&AttrValue> {
        self.position(key).ok().map(|i| &self.entries[i].1)
    }

    /// A mutable reference to the value for `key`.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut AttrValue> {
        self.position(key).ok().map(move |i| &mut self.entries[i].1)
    }

    /// True when `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Sets `key`, returning the previous value.
    pub fn insert(&mut self, key: impl AsRef<str>, value: AttrValue) -> Option<AttrValue> {
        let key = key.as_ref();
        match self.position(key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (Arc::from(key), value));
                None
            }
        }
    }

    /// Sets `key` reusing a shared key allocation.
    pub fn insert_shared(&mut self, key: Arc<str>, value: AttrValue) -> Option<AttrValue> {
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<AttrValue> {
        self.position(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &AttrValue)> {
        self.entries.iter().map(|(k, v)| (&**k, v))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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

    /// Frees unused capacity.
    pub fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
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
        self.entries.iter().map(split)
    }
}
