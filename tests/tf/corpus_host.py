"""Writes tests/tf/corpus/host/: the host-op, NCHW (convolution, pooling, batch norm), batched-gather
and Prod/Einsum-gradient cases.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/corpus_host.py [CASE ...]

The file formats are make_corpus.py's (this script imports its helpers), with three additions:
  * a tensor of dtype "string" has "values" = the bytes of each element as a list of ints;
  * NAME.json may hold "printed": {stream: [text of replica 0, text of replica 1, ...]}, what
    TensorFlow's PrintV2 wrote to that stream while the step ran once per replica;
  * NAME.json may hold "assert_error": the message of the InvalidArgumentError TensorFlow raised
    when the case's "failing" run (a feed that makes the Assert false) ran.
Replicated cases also record "host_fetches": {tensor: [T of replica 0, ...]}, values that stay on
the host (string tensors made in outside compilation), fetched from the per-replica plain run.

oneDNN stays on here (TensorFlow 2.21's default on x86): TensorFlow's CPU kernels for NCHW
convolution and pooling exist only in its oneDNN build; its default Eigen kernels refuse NCHW.
"""

import json
import os
import sys
import tempfile

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import make_corpus as mc  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.tpu import tpu  # noqa: E402

tf1 = mc.tf1
mc.OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "host")


def enc(value):
    """make_corpus.enc, with string tensors as lists of byte values."""
    a = np.asarray(value)
    if a.dtype.kind in ("S", "O", "U"):
        flat = [v if isinstance(v, bytes) else str(v).encode() for v in a.reshape(-1)]
        return {"dtype": "string", "shape": list(a.shape), "values": [list(v) for v in flat]}
    return mc.enc(a)


class CaptureFd:
    """Captures what the process writes to a file descriptor (TF's C++ PrintV2 writes to fd 2)."""

    def __init__(self, fd):
        self.fd = fd
        self.text = ""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.file = tempfile.TemporaryFile()
        self.saved = os.dup(self.fd)
        os.dup2(self.file.fileno(), self.fd)
        return self

    def __exit__(self, *exc):
        os.dup2(self.saved, self.fd)
        os.close(self.saved)
        self.file.seek(0)
        self.text = self.file.read().decode()
        self.file.close()


def tags_of(g):
    tags = {}
    for node in g.as_graph_def().node:
        entry = {"op": node.op}
        if "_tpu_replicate" in node.attr:
            entry["R"] = node.attr["_tpu_replicate"].s.decode()
        if "_xla_outside_compilation" in node.attr:
            entry["OC"] = node.attr["_xla_outside_compilation"].s.decode()
        tags[node.name] = entry
    return tags


# ---------------------------------------------------------------- host ops in outside compilation


def host_print_step():
    """tf.print, StringFormat, ScalarSummary and Assert under outside_compilation in a replicated
    step, 2 replicas. The summary stays on the host: "host_fetches" holds it."""
    num_replicas = 2
    host_values = []

    def host(loss, h):
        first = tf.print("loss:", loss, "h:", h, summarize=2)
        line = tf.strings.format("step {} of {}", (tf.constant(1), tf.constant(2)))
        second = tf.print(line, output_stream=sys.stdout)
        summary = tf1.summary.scalar("loss", loss)
        check = tf.raw_ops.Assert(condition=loss > 0.0, data=[tf.constant("loss is"), loss], summarize=3)
        host_values.append((summary, check))
        with tf.control_dependencies([first, second, check]):
            return tf.identity(loss)

    def step(x, w):
        h = tf.matmul(x, w)
        loss = tf.reduce_sum(h * h)
        checked = tf1.tpu.outside_compilation(host, loss, h)
        return [loss * 2.0, checked + 1.0]

    xs = [mc.f32(200 + r, 3, 2) for r in range(num_replicas)]
    w0 = mc.f32(210, 2, 4)
    g = tf.Graph()
    with g.as_default():
        ph = [
            [tf1.placeholder(tf.float32, [3, 2], name=f"in0_{r}"), tf1.placeholder(tf.float32, [2, 4], name=f"in1_{r}")]
            for r in range(num_replicas)
        ]
        tpu.replicate(step, ph)
    fetches, host_fetches, printed = {}, {"loss:0": []}, {"stderr": [], "stdout": []}
    for r in range(num_replicas):
        pg = tf.Graph()
        host_values.clear()
        with pg.as_default():
            outs = step(tf.constant(xs[r]), tf.constant(w0))
            summary = host_values[0][0]
            with tf1.Session(graph=pg) as sess:
                with CaptureFd(2) as err, CaptureFd(1) as out:
                    got, s = sess.run([outs, summary])
        printed["stderr"].append(err.text)
        printed["stdout"].append(out.text)
        for i, v in enumerate(got):
            fetches[f"output_{i}_shard_{r}:0"] = enc(v)
        host_fetches["loss:0"].append(enc(s))
    meta = {
        "kind": "replicated",
        "num_replicas": num_replicas,
        "feeds": {f"in{k}_{r}:0": enc(v) for r in range(num_replicas) for k, v in enumerate([xs[r], w0])},
        "runs": [{"targets": [], "fetches": fetches}],
        "host_fetches": host_fetches,
        "printed": printed,
        "rtol": 1e-4,
    }
    mc.write("host_print_step", g, meta, tags_of(g))


def host_string_format():
    """StringFormat of every dtype and rank TF formats (summarize elides the middle), a passing and
    a failing Assert, PrintV2 to stderr: plain graph."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, None], name="x")
        n = tf1.placeholder(tf.int32, [None], name="n")
        named = {
            "floats": tf.strings.format("x = {}", x, summarize=2, name="floats"),
            "all": tf.strings.format("{}", x, summarize=-1, name="all"),
            "ints": tf.strings.format("n: {} and {}", (n, tf.constant(7, tf.int64)), name="ints"),
            "bools": tf.strings.format("{}", tf.constant([[True, False], [False, True]]), name="bools"),
            "strings": tf.strings.format("<{}> <{}>", (tf.constant(["a", "b\\c\n"]), tf.constant("one")), name="strings"),
            "half": tf.strings.format("{} {}", (tf.constant([1.5, 1e-3], tf.bfloat16), tf.constant([0.1, -3.0], tf.float16)),
                                      name="half"),
            "empty": tf.strings.format("{} {}", (tf.zeros([0]), tf.zeros([2, 0])), name="empty"),
            "scalars": tf.strings.format(
                "{} {} {} {} {}",
                (tf.constant(1e10), tf.constant(-2.5e-7), tf.constant(3.0), tf.constant(1.0 / 3.0, tf.float64),
                 tf.constant(np.float32(123456.789))),
                name="scalars",
            ),
            "custom": tf.strings.format("%s|%s", (n, x), placeholder="%s", summarize=1, name="custom"),
            "cube": tf.strings.format("{}", tf.reshape(tf.range(24), [2, 3, 4]), summarize=2, name="cube"),
        }
        ok = tf.raw_ops.Assert(condition=tf.reduce_all(n > 0), data=[tf.constant("n positive"), n], name="ok")
        bad = tf.raw_ops.Assert(
            condition=tf.reduce_all(x < 1.0), data=[tf.constant("x below one:"), x, n], summarize=2, name="bad"
        )
        printed_op = tf.print(named["floats"], named["ints"], name="print")
        feeds = {x: np.array([[0.5, -1.25, 0.0], [2.0, 1e-3, 7.0]], np.float32), n: np.array([1, 2, 3, 4], np.int32)}
        with tf1.Session(graph=g) as sess:
            keys = list(named)
            with CaptureFd(2) as err:
                values = sess.run([printed_op, ok] + [named[k] for k in keys], feed_dict=feeds)[2:]
            try:
                sess.run(bad, feed_dict=feeds)
                raise SystemExit("the failing Assert passed")
            except tf.errors.InvalidArgumentError as e:
                assert_error = [line for line in e.message.splitlines() if "assertion failed" in line][0]
    meta = {
        "kind": "plain",
        "num_replicas": 1,
        "feeds": {p.name: enc(v) for p, v in feeds.items()},
        "runs": [{"targets": ["print", "ok"], "fetches": {named[k].name: enc(v) for k, v in zip(keys, values)}}],
        "failing": {"targets": ["bad"]},
        "assert_error": assert_error,
        "printed": {"stderr": [err.text]},
        "rtol": 1e-4,
    }
    mc.write("host_string_format", g, meta)


# ---------------------------------------------------------------- NCHW, batched gather


def host_nchw():
    """NCHW Conv2D, DepthwiseConv2dNative, MaxPool, AvgPool, BiasAdd and their gradients (TF builds
    the backprop ops in NCHW too)."""

    def build():
        x = tf.constant(mc.f32(220, 2, 3, 5, 6), name="x")
        k = tf.constant(mc.f32(221, 3, 3, 3, 4), name="k")
        dk = tf.constant(mc.f32(222, 2, 2, 3, 2), name="dk")
        b = tf.constant(mc.f32(223, 4), name="b")
        conv = tf.nn.conv2d(x, k, strides=[1, 1, 2, 1], padding="SAME", data_format="NCHW", name="conv")
        conv = tf.nn.bias_add(conv, b, data_format="NCHW", name="bias")
        dw = tf.nn.depthwise_conv2d(x, dk, [1, 1, 1, 1], "VALID", data_format="NCHW", name="depthwise")
        mp = tf.nn.max_pool2d(conv, [1, 1, 2, 2], [1, 1, 2, 1], "SAME", data_format="NCHW", name="maxpool")
        ap = tf.nn.avg_pool2d(dw, [1, 1, 2, 2], [1, 1, 2, 2], "VALID", data_format="NCHW", name="avgpool")
        loss = tf.reduce_sum(mp * mp) + tf.reduce_sum(ap * 3.0)
        gx, gk, gdk, gb = tf.gradients(loss, [x, k, dk, b])
        named = {"conv": conv, "dw": dw, "mp": mp, "ap": ap, "loss": loss, "gx": gx, "gk": gk, "gdk": gdk, "gb": gb}
        return {}, named

    mc.plain_case("host_nchw", build, [([], ["conv", "dw", "mp", "ap", "loss", "gx", "gk", "gdk", "gb"])])


def host_gather_batch_dims():
    """GatherV2 with batch_dims 1 and 2, on axis = batch_dims and beyond, and its gradient."""

    def build():
        p = tf.constant(mc.f32(230, 2, 3, 4, 2), name="params")
        i1 = tf.constant(np.array([[2, 0, 1, 1], [3, 3, 0, 2]], np.int32), name="i1")
        i2 = tf.constant(np.array([[[1], [0], [2]], [[0], [0], [1]]], np.int64), name="i2")
        a = tf.gather(p, i1, axis=2, batch_dims=1, name="axis2_b1")
        b = tf.gather(p, tf.constant(np.array([[1, 0], [2, 2]], np.int32)), axis=1, batch_dims=1, name="axis1_b1")
        c = tf.gather(p, i2, axis=2, batch_dims=2, name="axis2_b2")
        d = tf.gather(p, tf.constant(np.array([[1, 1, 0], [0, 1, 0]], np.int32)), axis=-1, batch_dims=-1,
                      name="neg_b")
        loss = tf.reduce_sum(a * a) + tf.reduce_sum(b) + tf.reduce_sum(c * 2.0) + tf.reduce_sum(d * d * d)
        (gp,) = tf.gradients(loss, [p])
        named = {"a": a, "b": b, "c": c, "d": d, "gp": tf.convert_to_tensor(gp)}
        return {}, named

    mc.plain_case("host_gather_batch_dims", build, [([], ["a", "b", "c", "d", "gp"])])


def host_nchw_batchnorm():
    """NCHW FusedBatchNormV3 in training (with its FusedBatchNormGradV3) and in inference."""

    def build():
        x = tf.constant(mc.f32(260, 2, 3, 4, 5), name="x")
        scale = tf.constant(mc.f32(261, 3) + 1.0, name="scale")
        offset = tf.constant(mc.f32(262, 3), name="offset")
        mean = tf.constant(mc.f32(263, 3), name="mean")
        var = tf.constant(np.abs(mc.f32(264, 3)) + 0.5, name="var")
        y, m, v = tf1.nn.fused_batch_norm(x, scale, offset, epsilon=0.001, data_format="NCHW", is_training=True,
                                          name="bn")
        yi, _, _ = tf1.nn.fused_batch_norm(x, scale, offset, mean, var, epsilon=0.001, data_format="NCHW",
                                           is_training=False, name="bn_inference")
        loss = tf.reduce_sum(y * y * tf.constant(mc.f32(265, 2, 3, 4, 5))) + tf.reduce_sum(yi)
        gx, gs, go = tf.gradients(loss, [x, scale, offset])
        named = {"y": y, "m": m, "v": v, "yi": yi, "loss": loss, "gx": gx, "gs": gs, "go": go}
        return {}, named

    mc.plain_case("host_nchw_batchnorm", build, [([], ["y", "m", "v", "yi", "loss", "gx", "gs", "go"])])


# ---------------------------------------------------------------- Prod and Einsum gradients


def host_prod_einsum_grads():
    """Prod (with a zero, keep_dims, several axes) and Einsum (matmul, batch, outer, transpose,
    reduction) and their gradients. The feeds "x", "z", "a", "b", "c", "e" feed both TF's own
    gradient graph and the .opg `gradients` call of the Rust test."""
    x = mc.f32(240, 3, 4) + 1.5
    z = mc.f32(241, 2, 3)
    z[0, 1] = 0.0
    a, b = mc.f32(242, 2, 3, 4), mc.f32(243, 2, 4, 5)
    c, e = mc.f32(244, 3), mc.f32(245, 3, 3)
    g = tf.Graph()
    with g.as_default():
        ph = {k: tf1.placeholder(tf.float32, v.shape, name=k) for k, v in dict(x=x, z=z, a=a, b=b, c=c, e=e).items()}
        outs = {
            "prod_rows": tf.reduce_prod(ph["x"], axis=1, name="prod_rows"),
            "prod_all": tf.reduce_prod(ph["x"], axis=[0, 1], keepdims=True, name="prod_all"),
            "prod_zero": tf.reduce_prod(ph["z"], axis=0, name="prod_zero"),
            "bmm": tf.einsum("bij,bjk->bik", ph["a"], ph["b"], name="bmm"),
            "outer": tf.einsum("i,jk->ijk", ph["c"], ph["e"], name="outer"),
            "reduce": tf.einsum("bij->j", ph["a"], name="reduce"),
            "trans": tf.einsum("ij->ji", ph["e"], name="trans"),
        }
        weights = {k: tf.constant(mc.f32(250 + i, *v.shape.as_list())) for i, (k, v) in enumerate(outs.items())}
        loss = tf.add_n([tf.reduce_sum(v * weights[k]) for k, v in outs.items()], name="loss")
        xs = ["x", "z", "a", "b", "c", "e"]
        grads = tf.gradients(loss, [ph[k] for k in xs])
        grads = {f"d_{k}": tf.identity(gr, name=f"d_{k}") for k, gr in zip(xs, grads)}
        feeds = {ph[k]: v for k, v in dict(x=x, z=z, a=a, b=b, c=c, e=e).items()}
        with tf1.Session(graph=g) as sess:
            tensors = {**outs, **grads, "loss": loss}
            fetched = sess.run(tensors, feed_dict=feeds)
        weight_values = tf1.Session(graph=g).run(weights)
    meta = {
        "kind": "plain",
        "num_replicas": 1,
        "feeds": {p.name: enc(v) for p, v in feeds.items()},
        "runs": [{"targets": [], "fetches": {tensors[k].name: enc(v) for k, v in fetched.items()}}],
        "weights": {k: enc(v) for k, v in weight_values.items()},
        "rtol": 1e-4,
    }
    mc.write("host_prod_einsum_grads", g, meta)


CASES = {
    "host_print_step": host_print_step,
    "host_string_format": host_string_format,
    "host_nchw": host_nchw,
    "host_gather_batch_dims": host_gather_batch_dims,
    "host_nchw_batchnorm": host_nchw_batchnorm,
    "host_prod_einsum_grads": host_prod_einsum_grads,
}

if __name__ == "__main__":
    for case in sys.argv[1:] or list(CASES):
        CASES[case]()
