//! `lower --format stablehlo`: the module's form (attributes, aliasing,
//! collectives, the device loop, stages) and its diagnostics.

use std::process::Command;

fn lower(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
        .arg("lower")
        .arg("--format")
        .arg("stablehlo")
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mlp_train_has_replicas_aliased_variables_and_grouped_all_reduces() {
    let (ok, text, err) = lower(&["examples/mlp_train.opg"]);
    assert!(ok, "{err}");
    assert!(text.contains("mhlo.num_replicas = 8 : i32"), "{text}");
    assert!(text.contains("mhlo.num_partitions = 1 : i32"));
    // Three variables, each aliased to its result after the one output,
    // and every argument and result named after its graph value.
    for (arg, result, name) in [(2, 1, "w1"), (3, 2, "b1"), (4, 3, "w2")] {
        assert!(text.contains(&format!("%arg{arg}: ")), "{text}");
        let attrs = format!("{{tf.aliasing_output = {result} : i32, tpu_rewrite.name = \"{name}\"}}");
        assert!(text.contains(&attrs), "{text}");
    }
    assert!(text.contains("%arg0: tensor<4x3xf32> {tpu_rewrite.name = \"input0\"}"), "{text}");
    // The output is named by the tensor the step returns.
    assert!(text.contains("-> (tensor<f32> {tpu_rewrite.name = \"loss:0\"}, "), "{text}");
    // The three gradient sums over the replica group [0..8), packed into
    // one all-reduce; one each with `--all-reduce-fusion off`.
    assert_eq!(text.matches("\"stablehlo.all_reduce\"").count(), 1, "{text}");
    assert!(text.contains("replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>"));
    assert!(!text.contains("stablehlo.while"), "one step per run needs no loop");
    let (ok, unpacked, err) = lower(&["examples/mlp_train.opg", "--all-reduce-fusion", "off"]);
    assert!(ok, "{err}");
    assert_eq!(unpacked.matches("\"stablehlo.all_reduce\"").count(), 3, "{unpacked}");
}

/// A sum over groups of one replica each is its operand: no all-reduce.
/// The pairs' sums keep their grouping, fused into one all-reduce or one
/// each with `--all-reduce-fusion off`, and so does the sum over all four.
#[test]
fn sums_keep_their_groups_and_groups_of_one_emit_no_all_reduce() {
    for (extra, count) in [(&[][..], 2), (&["--all-reduce-fusion", "off"][..], 3)] {
        let args = [&["--topology", "1x4", "tests/strategy/crs_groups.opg"][..], extra].concat();
        let (ok, text, err) = lower(&args);
        assert!(ok, "{err}");
        assert_eq!(text.matches("\"stablehlo.all_reduce\"").count(), count, "{extra:?}: {text}");
        let pairs = "replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>";
        assert_eq!(text.matches(pairs).count(), count - 1, "{extra:?}: {text}");
        assert_eq!(text.matches("replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>").count(), 1, "{text}");
        assert!(!text.contains("tensor<4x1xi64>"), "{extra:?}: {text}");
    }
}

/// A Keras step's two filter gradients are summed as `[in, kh, kw, out]`,
/// the layout XLA:CPU's convolution writes them in, and turned back to
/// HWIO after the one packed all-reduce (the step's numbers against
/// TensorFlow's: `keras_corpus::conv_batchnorm`).
#[test]
fn filter_gradients_are_summed_in_the_convolutions_layout() {
    let (ok, text, err) = lower(&["--topology", "1x2", "tests/tf/corpus/keras/conv_batchnorm.pbtxt"]);
    assert!(ok, "{err}");
    let filters = std::fs::read_to_string("tests/tf/corpus/keras/conv_batchnorm.pbtxt")
        .unwrap()
        .matches("op: \"Conv2DBackpropFilter\"")
        .count();
    assert_eq!(filters, 2);
    assert_eq!(text.matches("\"stablehlo.all_reduce\"").count(), 1, "{text}");
    let at = text.find("\"stablehlo.all_reduce\"").unwrap();
    let (before, after) = text.split_at(at);
    assert_eq!(before.matches("permutation = array<i64: 2, 0, 1, 3>").count(), filters, "{text}");
    assert_eq!(after.matches("permutation = array<i64: 1, 2, 0, 3>").count(), filters, "{text}");
}

#[test]
fn steps_per_run_becomes_a_device_loop_carrying_the_variables() {
    let (ok, text, err) = lower(&["--steps-per-run", "5", "examples/mlp_train.opg"]);
    assert!(ok, "{err}");
    assert!(text.contains("\"stablehlo.while\""), "{text}");
    // The loop bound: the i64 constant 5.
    assert!(text.contains("dense<5> : tensor<i64>"), "{text}");
}

#[test]
fn replica_id_and_broadcast_lower_to_their_collectives() {
    let (ok, text, err) = lower(&["--topology", "1x2", "tests/strategy/replica_id.opg"]);
    assert!(ok, "{err}");
    assert!(text.contains("\"stablehlo.replica_id\"() : () -> tensor<ui32>"), "{text}");
    let (ok, text, err) = lower(&["--topology", "1x4", "tests/strategy/broadcast.opg"]);
    assert!(ok, "{err}");
    // Three replicas: a doubling tree of two collective permutes, no all-reduce.
    assert_eq!(text.matches("\"stablehlo.collective_permute\"").count(), 2, "{text}");
    assert!(text.contains("source_target_pairs = dense<[[0, 1]]>"), "{text}");
    assert!(text.contains("source_target_pairs = dense<[[0, 2]]>"), "{text}");
    assert!(!text.contains("stablehlo.all_reduce") && text.contains("stablehlo.replica_id"), "{text}");
}

#[test]
fn outside_compilation_splits_the_program_into_stages() {
    let (ok, text, err) = lower(&["--host-transfer", "stages", "examples/second_order.opg"]);
    assert!(ok, "{err}");
    let modules: Vec<&str> = text.split("// -----\n").collect();
    assert!(modules.len() >= 2, "{text}");
    assert!(modules[0].contains("stage 1 of"), "{text}");
}

#[test]
fn lowering_a_host_print_prints_nothing() {
    // The types come from the type rules: nothing runs, so the host's
    // `Print` writes nothing while the module is made.
    let (ok, text, err) = lower(&["examples/outside_compilation.opg"]);
    assert!(ok, "{err}");
    assert!(text.contains("stablehlo.custom_call") || text.contains("// -----"), "{text}");
    assert!(!err.contains("h = "), "lower printed the host's Print: {err}");
    assert!(!text.contains("// Note:"), "every op is typed by a rule: {text}");
}

#[test]
fn a_data_dependent_host_op_is_typed_by_running_its_subgraph_and_named() {
    // `Where`'s shape depends on values: it has no type rule, so it runs on
    // the host with the ops it depends on (unfed placeholders are ones) and
    // the module says so.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("where.opg");
    std::fs::write(
        &path,
        r#"graph @main {
  %x0 = Placeholder() {dtype = f32, shape = shape[4]}
  %x1 = Placeholder() {dtype = f32, shape = shape[4]}
  replicate (num_replicas = 2) (%x = [%x0, %x1]) {
    %h = Relu(%x) {T = f32}
    outside_compilation {
      %where = Where(%h) {T = f32}
    }
    %idx = Cast(%where) {SrcT = i64, DstT = f32}
    %axes = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}
    %out = Sum(%idx, %axes) {T = f32, Tidx = i32, keep_dims = false}
    return %out
  }
}
"#,
    )
    .expect("writes");
    let (ok, text, err) = lower(&[path.to_str().expect("a UTF-8 path")]);
    assert!(ok, "{err}");
    assert!(text.contains("// Note: `where` (Where) was typed by running it"), "{text}");
    assert!(text.contains("tensor<4x1xf32>"), "the cast of Where's [4, 1] result: {text}");
}

#[test]
fn an_op_without_a_kernel_is_a_diagnostic() {
    // A host op with no kernel: the trace cannot run it.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("frobnicate.opg");
    let text = std::fs::read_to_string("examples/outside_compilation.opg")
        .expect("the example")
        .replace("Print(%h, %h)", "FrobnicateOp(%h, %h)");
    std::fs::write(&path, text).expect("writes");
    let (ok, _, err) = lower(&[path.to_str().expect("a UTF-8 path")]);
    assert!(!ok);
    assert!(err.contains("tpu_rewrite::xla::") && err.contains("FrobnicateOp"), "{err}");
}

#[test]
fn stablehlo_is_refused_where_there_is_no_device_program() {
    let out = Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
        .args(["emit", "--format", "stablehlo", "examples/mlp_train.opg"])
        .output()
        .expect("runs");
    // `emit` does not list stablehlo among its formats: a usage error.
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value 'stablehlo'"));
    let dir = tempfile::tempdir().expect("a directory");
    let out = Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
        .args(["emit", "examples/mlp_train.opg", "-o"])
        .arg(dir.path().join("step.mlir"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`lower --format stablehlo` writes the device program"));
}

#[test]
fn model_parallelism_places_each_op_on_its_core_by_maximal_sharding() {
    let (ok, text, err) = lower(&["examples/model_parallel.opg"]);
    assert!(ok, "{err}");
    assert!(text.contains("mhlo.num_partitions = 2 : i32"), "{text}");
    assert!(text.contains("mhlo.sharding = \"{maximal device=0}\""), "{text}");
    assert!(text.contains("mhlo.sharding = \"{maximal device=1}\""), "{text}");
}

#[test]
fn outside_compilation_calls_the_host_from_one_module() {
    let (ok, text, err) = lower(&["--steps-per-run", "2", "examples/second_order.opg"]);
    assert!(ok, "{err}");
    assert!(!text.contains("// -----"), "one module: {text}");
    assert!(text.contains("stablehlo.while"), "steps_per_run loops on the device around the calls: {text}");
    let calls: Vec<&str> = text.lines().filter(|l| l.contains("\"stablehlo.custom_call\"")).collect();
    // The forward Square and its two gradient clusters: three host programs.
    assert_eq!(calls.len(), 3, "{text}");
    for (k, call) in calls.iter().enumerate() {
        assert!(call.contains("call_target_name = \"tpu_rewrite_host\""), "{call}");
        assert!(call.contains("api_version = 4 : i32") && call.contains("has_side_effect = true"), "{call}");
        assert!(call.contains(&format!("backend_config = {{oc_program = {k} : i64, run = 0 : i64}}")), "{call}");
        // Operand 0: the replica id, converted to i32 just before.
        assert!(call.contains(": (tensor<i32>, tensor<3xf32>"), "{call}");
    }
}

#[test]
fn send_recv_form_has_host_transfers_with_distinct_channels() {
    let (ok, text, err) = lower(&["--host-transfer", "send-recv", "examples/second_order.opg"]);
    assert!(ok, "{err}");
    assert!(!text.contains("custom_call"), "{text}");
    let transfers: Vec<&str> =
        text.lines().filter(|l| l.contains("\"stablehlo.send\"") || l.contains("\"stablehlo.recv\"")).collect();
    assert!(transfers.len() >= 4, "{text}");
    let mut handles = std::collections::BTreeSet::new();
    for t in &transfers {
        assert!(t.contains("is_host_transfer = true"), "{t}");
        assert!(t.contains("_xla_host_transfer_handler_name = \"tf_rendezvous\""), "{t}");
        assert!(t.contains("_xla_host_transfer_rendezvous = \"cluster_oc"), "{t}");
        // Device-to-host sends are channel type 2, host-to-device receives type 3.
        let kind = if t.contains("\"stablehlo.send\"") { "type = 2>" } else { "type = 3>" };
        assert!(t.contains(kind), "{t}");
        let handle = t.split("<handle = ").nth(1).and_then(|s| s.split(',').next()).expect("a handle");
        assert!(handles.insert(handle.to_string()), "channel {handle} used twice");
    }
    // Every send and receive is threaded on a token that starts at after_all.
    assert_eq!(text.matches("\"stablehlo.after_all\"").count(), 3, "{text}");
}

/// Ops whose output shapes depend on their operands' values with no bound:
/// typing runs them, with the ops they depend on, on the host, and says so
/// in a note (the bounded ones, `Unique`, ..., have rules that give their bounds).
const DATA_DEPENDENT: &[&str] = &["ListDiff", "Where"];

/// Corpus graphs whose programs hold call ops (`While`, `If`, the XLA ops
/// that apply functions), TensorLists or Optionals: their types are still found by running the whole program.
const TRACED_WHOLE: &[&str] = &[
    "cond.pbtxt",
    "keras/app_convnext_tiny.pb",
    "keras/app_regnet_x002.pb",
    "keras/gru_classifier.pbtxt",
    "keras/losses.pbtxt",
    "keras/lstm_classifier.pbtxt",
    "keras/rnn_masked.pbtxt",
    "keras/tf1_while_cond.pbtxt",
    "keras_more/mixed_bfloat16.pbtxt",
    "keras_more/opt_schedule_piecewise.pbtxt",
    "ops/lists.pbtxt",
    "ops/stack.pbtxt",
    "ops/tensor_array.pbtxt",
    "ops/xla_call_module.pbtxt",
    "ops/xla_ext.pbtxt",
    "ops/xla_fn.pbtxt",
    "ops/xla_misc.pbtxt",
    "replicated_cond_grad.pbtxt",
    "replicated_while.pbtxt",
    "stateful_control_flow.pbtxt",
    "tf1/cond.pbtxt",
    "tf1/nested_while.pbtxt",
    "tf1/replicated_while.pbtxt",
    "tf1/while_loop.pbtxt",
    "tf1_tensor_array/rnn_plain.pbtxt",
    "tf1_tensor_array/rnn_replicated.pbtxt",
    "while_loop.pbtxt",
];

/// Corpus graphs `lower --format stablehlo` refuses, with the diagnostic code.
const REFUSED: &[(&str, &str)] = &[
    // StochasticCastToInt of f16 inputs: the lowering refuses them (docs/xla.md says why).
    ("ops/prand_cpu.pbtxt", "tpu_rewrite::xla::lowering"),
    // The seeded and stateless f16 parameterized truncated normals: f32 and f64 only, as the bridge.
    ("ops/ptn_cpu.pbtxt", "tpu_rewrite::xla::lowering"),
    ("tensor_array.pbtxt", "tpu_rewrite::xla::lowering"),
    ("tf1/replicated_while_outside_compilation.pbtxt", "tpu_rewrite::passes::outside_compilation_in_control_flow"),
];

/// The graph files under `dir`, as paths relative to it, sorted.
fn graph_files(dir: &std::path::Path, under: &str, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir.join(under)).expect("the corpus").flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = if under.is_empty() { name.clone() } else { format!("{under}/{name}") };
        if e.path().is_dir() {
            // A SavedModel's files are no graphs of their own (tf2_saved_model:: lowers them).
            if name != "saved_model" {
                graph_files(dir, &rel, out);
            }
        } else if name.ends_with(".pbtxt") || name.ends_with(".pb") {
            out.push(rel);
        }
    }
}

#[test]
fn every_corpus_graph_is_typed_by_the_rules() {
    // Each op's types come from its type rule; only data-dependent ops run
    // (a per-op note), and only the listed programs with calls or lists
    // are traced whole.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus");
    let mut files = Vec::new();
    graph_files(&dir, "", &mut files);
    assert!(files.len() >= 50, "the corpus has {} graphs", files.len());
    let mut whole = Vec::new();
    let mut refused = Vec::new();
    for file in &files {
        let (ok, text, err) = lower(&[dir.join(file).to_str().expect("a UTF-8 path")]);
        if !ok {
            let code = REFUSED.iter().find(|(f, _)| f == file).map(|(_, c)| *c);
            assert!(code.is_some_and(|c| err.contains(c)), "{file} was refused:\n{err}");
            refused.push(file.as_str());
            continue;
        }
        for note in text.lines().filter(|l| l.starts_with("// Note:")) {
            if note.contains("the whole program was run on the host for its types") {
                whole.push(file.as_str());
            } else if let Some((_, rest)) = note.split_once("` (") {
                let op = rest.split(')').next().unwrap_or_default();
                assert!(note.contains("was typed by running it"), "{file}: {note}");
                assert!(DATA_DEPENDENT.contains(&op), "{file}: {op} has no type rule: {note}");
            } else {
                panic!("{file}: an unexpected note: {note}");
            }
        }
    }
    assert_eq!(whole, TRACED_WHOLE, "the programs traced whole");
    assert_eq!(refused, REFUSED.iter().map(|(f, _)| *f).collect::<Vec<_>>(), "the refused graphs");
}
