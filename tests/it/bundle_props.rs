//! Property tests of the tensor-bundle index reader and the SavedModel
//! reader on damaged bytes: the corpus SavedModels' `variables.index`
//! files and written bundles, mutated (bytes flipped, cut, inserted,
//! removed), must give an error or entries, never a panic; an index that
//! still reads must agree with its shard's checksums or say which entry
//! does not. Mutated `saved_model.pb` files load or give a coded
//! diagnostic, never a panic. The `bundle` and `saved_model` cargo-fuzz
//! targets (`fuzz/`) run the same harnesses under libFuzzer.

use std::path::{Path, PathBuf};

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

/// The corpus SavedModels' directories.
fn saved_models() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus_tf2");
    ["mlp", "cnn"].iter().map(|m| root.join(m).join("saved_model")).collect()
}

/// The `bundle` fuzz target's harness: a 4-byte little-endian index
/// length, the index, then shard 0; other shards are missing.
fn decode_fuzz_input(data: &[u8]) -> Result<usize, tpu_rewrite::tf::saved_model::SavedModelError> {
    let Some((len, rest)) = data.split_first_chunk::<4>() else { return Ok(0) };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (index, shard) = rest.split_at(len);
    let entries = bundle::decode_bundle(index, "variables.index", |i, _| {
        let name = format!("variables.data-{i:05}");
        if i == 0 {
            (name, Ok(shard.to_vec()))
        } else {
            (name, Err("no such shard".into()))
        }
    })?;
    Ok(entries.len())
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

/// Cases per property: `default`, or `$TPU_REWRITE_PROP_CASES` for a
/// longer run (docs/robustness.md).
fn cases(default: u32) -> u32 {
    std::env::var("TPU_REWRITE_PROP_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(512), ..ProptestConfig::default() })]

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
    fn a_damaged_fuzz_input_never_panics(seed in 0usize..2, edits in proptest::collection::vec(edit(), 1..4)) {
        let (index, data) = seeds().swap_remove(seed);
        let mut input = (index.len() as u32).to_le_bytes().to_vec();
        input.extend(&index);
        input.extend(&data);
        for e in &edits {
            apply(&mut input, e);
        }
        let _ = decode_fuzz_input(&input);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = table::read_table(&bytes);
    }
}

proptest! {
    // Each case writes a file and loads a whole model: fewer cases.
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_saved_model_loads_or_gives_a_coded_diagnostic(
        seed in 0usize..2,
        edits in proptest::collection::vec(edit(), 1..4),
    ) {
        let model = saved_models().swap_remove(seed);
        let mut bytes = std::fs::read(model.join("saved_model.pb")).expect("corpus saved_model.pb");
        for e in &edits {
            apply(&mut bytes, e);
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("saved_model.pb"), &bytes).expect("writes");
        std::os::unix::fs::symlink(model.join("variables"), dir.path().join("variables")).expect("links");
        if let Err(e) = tpu_rewrite::tf::saved_model::load(dir.path(), None) {
            let code = miette::Diagnostic::code(&e).map(|c| c.to_string()).unwrap_or_default();
            prop_assert!(code.starts_with("tpu_rewrite::saved_model::"), "uncoded: {e:?}");
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

#[test]
fn the_fuzz_harnesses_read_the_corpus() {
    for (index, data) in seeds() {
        let mut input = (index.len() as u32).to_le_bytes().to_vec();
        input.extend(&index);
        input.extend(&data);
        let entries = decode_fuzz_input(&input).expect("the bundle target's seed reads");
        assert!(entries > 1, "{entries} entries");
    }
    for model in saved_models() {
        let loaded = tpu_rewrite::tf::saved_model::load(&model, None).expect("the corpus SavedModel loads");
        assert!(!loaded.module.graphs.is_empty());
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
