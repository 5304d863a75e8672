//! Property tests of the tensor-bundle index reader on damaged bytes: the
//! corpus SavedModels' `variables.index` files and written bundles,
//! mutated (bytes flipped, cut, inserted, removed), must give an error or
//! entries, never a panic; an index that still reads must agree with its
//! shard's checksums or say which entry does not.

use std::path::Path;

use proptest::prelude::*;
use tpu_rewrite::tf::bundle::{self, table};

/// The corpus indexes with their data shards.
fn seeds() -> Vec<(Vec<u8>, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus_tf2");
    let mut out = Vec::new();
    for model in ["mlp", "cnn"] {
        let prefix = root.join(model).join("saved_model/variables/variables");
        let index = std::fs::read(bundle::index_path(&prefix)).expect("corpus index (run tests/tf/corpus_tf2.py)");
        let data = std::fs::read(bundle::shard_path(&prefix, 0, 1)).expect("corpus shard");
        out.push((index, data));
    }
    out
}

#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Cut(usize),
    Insert(usize, u8),
    Remove(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, b)| Edit::Flip(i, b)),
        any::<usize>().prop_map(Edit::Cut),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Remove),
    ]
}

fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    if bytes.is_empty() {
        return;
    }
    match *edit {
        Edit::Flip(i, b) => {
            let n = bytes.len();
            bytes[i % n] ^= b;
        }
        Edit::Cut(i) => bytes.truncate(i % bytes.len()),
        Edit::Insert(i, b) => {
            let n = bytes.len();
            bytes.insert(i % n, b);
        }
        Edit::Remove(i) => {
            let n = bytes.len();
            bytes.remove(i % n);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_index_never_panics(seed in 0usize..2, edits in proptest::collection::vec(edit(), 1..4)) {
        let (mut index, data) = seeds().swap_remove(seed);
        for e in &edits {
            apply(&mut index, e);
        }
        let _ = table::read_table(&index);
        let _ = bundle::decode_bundle(&index, "variables.index", |_, _| ("variables.data".into(), Ok(data.clone())));
    }

    #[test]
    fn a_damaged_shard_fails_its_checksum(seed in 0usize..2, at in any::<usize>(), flip in 1u8..=255) {
        let (index, mut data) = seeds().swap_remove(seed);
        let n = data.len();
        data[at % n] ^= flip;
        let read = bundle::decode_bundle(&index, "variables.index", |_, _| ("variables.data".into(), Ok(data.clone())));
        // Every byte of the shard belongs to some entry, whose checksum now fails.
        prop_assert!(read.is_err(), "a flipped byte at {} went unnoticed", at % n);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = table::read_table(&bytes);
    }
}

#[test]
fn the_corpus_indexes_read_and_round_trip() {
    for (index, data) in seeds() {
        let entries =
            bundle::decode_bundle(&index, "variables.index", |_, _| ("variables.data".into(), Ok(data.clone())))
                .expect("TensorFlow's index reads");
        assert!(entries.contains_key("_CHECKPOINTABLE_OBJECT_GRAPH"));
        let (index2, data2) = bundle::encode_bundle(&entries).expect("encodes");
        let again = bundle::decode_bundle(&index2, "ckpt.index", |_, _| ("ckpt.data".into(), Ok(data2.clone())))
            .expect("our index reads");
        assert_eq!(again, entries);
    }
}
