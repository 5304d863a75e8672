//! A SavedModel's `saved_model.pb`, beside the variables of a corpus
//! model: loading its serving function gives a module or diagnostics,
//! never a panic. The bytes go to a file in a fresh temporary directory
//! (the reader takes a directory, as `tpu-rewrite` does).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tpu_rewrite::tf::saved_model;

/// The `variables/` directory of a corpus model, copied beside every input.
fn variables() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tf/corpus_tf2/mlp/saved_model/variables");
        let dir = tempfile::tempdir().expect("a temporary directory");
        for name in ["variables.index", "variables.data-00000-of-00001"] {
            std::fs::copy(root.join(name), dir.path().join(name)).expect("the corpus variables (tests/tf/corpus_tf2.py)");
        }
        dir
    })
    .path()
}

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    let vars = dir.path().join("variables");
    if std::os::unix::fs::symlink(variables(), &vars).is_err() {
        return;
    }
    if std::fs::write(dir.path().join("saved_model.pb"), data).is_err() {
        return;
    }
    let _ = saved_model::load(dir.path(), None);
});
