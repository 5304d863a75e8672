"""load, rewrite, lower, run and errors of the tpu_rewrite package, on .opg graphs."""

import json
import pathlib

import numpy as np
import pytest

import tpu_rewrite as tr

DOUBLE = """graph @main {
  %a = Placeholder() {dtype = f32, shape = shape[2]}
  %b = Placeholder() {dtype = f32, shape = shape[2]}
  replicate (num_replicas = 2) (%x = [%a, %b]) {
    %two = Const() {dtype = f32, value = tensor(f32, []) [2.0]}
    %y = Mul(%x, %two) {T = f32}
    return %y
  }
}
"""


def test_load_takes_text_bytes_and_paths(root, tmp_path):
    path = tmp_path / "double.opg"
    path.write_text(DOUBLE)
    for source in (DOUBLE, DOUBLE.encode(), path, str(path)):
        module = tr.load(source)
        assert not module.rewritten
        assert module.graphs == ["main"]
    assert tr.load(path).name == str(path)


def test_rewrite_forms_the_cluster_and_prints_it():
    module = tr.rewrite(tr.load(DOUBLE))
    assert module.rewritten
    [cluster] = module.clusters
    assert cluster["num_replicas"] == 2
    assert "y" in cluster["members"]
    text = module.to_opg()
    assert "TPUReplicateMetadata" in text
    # The printed module reads back to the same text.
    assert tr.load(text).to_opg() == text
    assert module.to_dot().startswith("digraph")
    assert module.diagnostics == []


def test_rewrite_takes_a_pass_list():
    only = tr.rewrite(tr.load(DOUBLE), passes="gradients")
    assert only.clusters == []
    with pytest.raises(tr.Error) as e:
        tr.rewrite(tr.load(DOUBLE), passes=["no-such-pass"])
    assert e.value.code.startswith("tpu_rewrite::passes")


def test_lower_gives_the_device_assignment():
    lowered = tr.lower(tr.rewrite(tr.load(DOUBLE)), topology="2x4")
    assert lowered.num_replicas == 2 and lowered.cores_per_replica == 1
    assignment = lowered.device_assignment
    assert assignment.shape == (2, 1) and assignment.dtype == np.int64
    assert sorted(assignment.ravel().tolist()) == sorted(set(assignment.ravel().tolist()))
    assert "graph @host" in lowered.to_opg()
    assert "stablehlo" in lowered.stablehlo()


def test_run_returns_per_replica_values_on_a_leading_axis():
    feeds = {"a:0": np.array([1.0, 2.0], np.float32), "b:0": np.array([3.0, 4.0], np.float32)}
    result = tr.run(tr.load(DOUBLE), feeds=feeds, topology="1x2")
    [name] = result.keys()
    assert name == "y:0"
    np.testing.assert_array_equal(result[name], [[2.0, 4.0], [6.0, 8.0]])
    assert [v.tolist() for v in result.per_replica[name]] == [[2.0, 4.0], [6.0, 8.0]]
    assert result.reduce_ops[name] is None


def test_run_fetches_by_name():
    feeds = {"a:0": np.array([1.0, 2.0], np.float32), "b:0": np.array([3.0, 4.0], np.float32)}
    lowered = tr.lower(tr.load(DOUBLE), topology="1x2")
    result = tr.run(lowered, feeds=feeds, fetches=["output_0_shard_1:0"])
    np.testing.assert_array_equal(result["output_0_shard_1:0"], [6.0, 8.0])


def test_training_updates_the_variables(root):
    module = tr.load(root / "examples" / "mlp_train.opg")
    one = tr.run(module, steps=1)
    three = tr.run(module, steps=3)
    assert set(one.variables) == {"w1", "b1", "w2"}
    assert one["loss:0"].shape == (8,)
    # SGD lowers the mean loss step after step.
    assert three["loss:0"].mean() < one["loss:0"].mean()
    assert not np.array_equal(one.variables["w1"], three.variables["w1"])


def test_a_bad_graph_raises_error_with_its_diagnostics():
    source = "graph @main {\n  %y = Relu(%x) {T = f32}\n}\n"
    with pytest.raises(tr.Error) as caught:
        tr.load(source, name="bad.opg")
    e = caught.value
    assert isinstance(e, ValueError)
    assert e.code == "tpu_rewrite::ir::unknown_input"
    [d] = e.diagnostics
    assert d["message"] == "unknown input `%x`"
    assert (d["file"], d["line"], d["column"]) == ("bad.opg", 2, 13)
    assert d["labels"][0]["offset"] == source.index("%x")
    assert d["help"] and d["severity"] == "error"
    # The report the CLI prints: message, location, the line, the label.
    report = str(e)
    assert "unknown input `%x`" in report and "bad.opg:2:13" in report
    assert "%y = Relu(%x)" in report


def test_bad_options_and_feeds_raise_error():
    module = tr.load(DOUBLE)
    with pytest.raises(tr.Error) as e:
        tr.lower(module, topology="banana")
    assert e.value.code.startswith("tpu_rewrite::lower")
    with pytest.raises(tr.Error) as e:
        tr.run(module, feeds={"a:0": np.zeros(2, np.float64), "b:0": np.zeros(2, np.float32)}, topology="1x2")
    assert "a" in str(e.value)
    with pytest.raises(tr.Error) as e:
        tr.run(module, feeds={"a:0": np.zeros(2, "datetime64[s]")}, topology="1x2")
    assert e.value.code == "tpu_rewrite::py::feed"
    # A uint16 array crosses the boundary; a float placeholder then refuses it.
    with pytest.raises(tr.Error) as e:
        tr.run(module, feeds={"a:0": np.zeros(2, np.uint16)}, topology="1x2")
    assert e.value.code == "tpu_rewrite::exec::feed_mismatch"
    # A complex array crosses the boundary; a float placeholder then refuses it.
    with pytest.raises(tr.Error) as e:
        tr.run(module, feeds={"a:0": np.zeros(2, np.complex64)}, topology="1x2")
    assert e.value.code == "tpu_rewrite::exec::feed_mismatch"
    with pytest.raises(tr.Error) as e:
        tr.load(pathlib.Path("/no/such/file.opg"))
    assert e.value.code == "tpu_rewrite::py::read"


PLAIN = """graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %w = VarHandleOp() {dtype = f32, shape = shape[2], shared_name = "w"}
  %w_value = Const() {dtype = f32, value = tensor(f32, [2]) [3.0, -1.0]}
  %w_init = AssignVariableOp(%w, %w_value) {dtype = f32}
  %w_read = ReadVariableOp(%w) {dtype = f32}
  %loss = Mul(%x, %w_read) {T = f32}
}
"""


def test_a_plain_graph_lowers_and_runs_as_one_replica():
    # As `tpu-rewrite run` makes it: one single-replica cluster, the
    # initialiser run first, the result named as the CLI names it.
    lowered = tr.lower(tr.load(PLAIN))
    assert lowered.num_replicas == 1
    assert "single-replica cluster" in lowered.plain and "variable(s) w set" in lowered.plain
    x = np.array([1.5, 2.0], np.float32)
    w = np.array([3.0, -1.0], np.float32)
    result = tr.run(lowered, feeds={"x:0": x})
    assert list(result) == ["loss:0"]
    np.testing.assert_array_equal(result["loss:0"], [x * w])
    np.testing.assert_array_equal(result.variables["w"], w)
    fetched = tr.run(lowered, feeds={"x:0": x}, fetches=["loss:0"])
    assert list(fetched) == ["loss:0"]
    np.testing.assert_array_equal(fetched["loss:0"], x * w)
    # A replicated graph is not a plain one.
    assert tr.lower(tr.load(DOUBLE), topology="1x2").plain is None


def test_a_saved_model_function_runs_with_its_checkpoint_values(root, tmp_path):
    # The Keras MLP of tests/tf/corpus_tf2 (corpus_tf2.py): TensorFlow's
    # losses of its train_step, from the SavedModel's checkpoint values.
    corpus = root / "tests" / "tf" / "corpus_tf2" / "mlp"
    want = json.loads((corpus / "expected.json").read_text())
    feeds = {f"{k}:0": np.asarray(v, np.float32) for k, v in json.loads((corpus / "feeds.json").read_text()).items()}
    lowered = tr.lower(tr.load(corpus / "saved_model", function="train_step"))
    assert lowered.num_replicas == 1 and "single-replica cluster" in lowered.plain
    for steps in (1, 3):
        result = tr.run(lowered, feeds=feeds, fetches=["identity:0"], steps=steps)
        np.testing.assert_allclose(result["identity:0"], want["losses"][steps - 1], rtol=1e-5)
    # Its saved_model.pb names the same SavedModel.
    assert tr.load(corpus / "saved_model" / "saved_model.pb", function="train_step").graphs
    # A directory is read as a SavedModel: one without saved_model.pb says so.
    with pytest.raises(tr.Error) as e:
        tr.load(corpus)
    assert e.value.code == "tpu_rewrite::saved_model::read"
    with pytest.raises(tr.Error) as e:
        tr.load(tmp_path / "x.opg", function="train_step")
    assert e.value.code == "tpu_rewrite::py::argument"




def test_skip_initializers_starts_the_variables_at_zero():
    # As `tpu-rewrite run --no-initializers`: w is not set from its constant.
    x = np.array([1.5, 2.0], np.float32)
    lowered = tr.lower(tr.load(PLAIN), skip_initializers=True)
    result = tr.run(lowered, feeds={"x:0": x})
    np.testing.assert_array_equal(result["loss:0"], [np.zeros(2, np.float32)])
    np.testing.assert_array_equal(result.variables["w"], np.zeros(2, np.float32))


# Replica 0 gathers index 2 of [10, 11, 12, 13]; replica 1 index 4, one past the end.
GATHER = """graph @main {
  %x0 = Const() {dtype = f32, value = tensor(f32, [4]) [10.0, 11.0, 12.0, 13.0]}
  %i0 = Const() {dtype = i32, value = tensor(i32, []) [2]}
  %i1 = Const() {dtype = i32, value = tensor(i32, []) [4]}
  replicate (num_replicas = 2) (%x = [%x0, %x0], %i = [%i0, %i1]) {
    %a = Const() {dtype = i32, value = tensor(i32, []) [0]}
    %g = GatherV2(%x, %i, %a) {Taxis = i32, Tindices = i32, Tparams = f32, batch_dims = 0}
    return %g
  }
}
"""


def test_pjrt_keeps_compiled_programs_and_checks_indices_on_the_device(tmp_path):
    lowered = tr.lower(tr.load(GATHER), topology="1x2")
    cache = tmp_path / "compile"
    entries = lambda: sorted(p.name for p in cache.rglob("*") if p.is_file())  # noqa: E731
    # The device check stops replica 1's out-of-range index, as the simulator does.
    for _ in range(2):
        with pytest.raises(tr.Error) as e:
            tr.run(lowered, backend="pjrt", compile_cache=cache)
        assert "replica 1" in str(e.value)
    kept = entries()
    assert kept, "the compiled program is kept in the cache directory"
    # Without the checks XLA clamps the index (docs/robustness.md): 13.0, not an error.
    result = tr.run(lowered, backend="pjrt", compile_cache=cache, device_checks=False)
    np.testing.assert_array_equal(np.ravel(result["g:0"]), [12.0, 13.0])
    assert len(entries()) > len(kept), "the unchecked program is another entry"
    # compile_cache=False compiles without the cache, and touches no directory.
    result = tr.run(lowered, backend="pjrt", compile_cache=False, device_checks=False)
    np.testing.assert_array_equal(np.ravel(result["g:0"]), [12.0, 13.0])
    with pytest.raises(ValueError):
        tr.run(lowered, backend="sim", compile_cache=cache)
