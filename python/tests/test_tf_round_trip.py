"""From TensorFlow to TensorFlow: a tpu.replicate graph built in TF 2.21 is
loaded, rewritten (its clusters compared with TF's tags), run on both
backends (its numbers compared with TF's own, the step run once per replica
in a plain graph) and exported back into tf.compat.v1.import_graph_def."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.tpu import tpu

import tpu_rewrite as tr

tf1 = tf.compat.v1
REPLICAS = 2


def step(x, w):
    h = tf.nn.relu(tf.matmul(x, w))
    return [tf.reduce_sum(h * h), h * 0.5]


def inputs():
    rng = np.random.default_rng(3)
    return [
        (rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32))
        for _ in range(REPLICAS)
    ]


@pytest.fixture(scope="module")
def tf_graph():
    g = tf.Graph()
    with g.as_default():
        placeholders = [
            [tf1.placeholder(tf.float32, x.shape, name=f"x_{r}"), tf1.placeholder(tf.float32, w.shape, name=f"w_{r}")]
            for r, (x, w) in enumerate(inputs())
        ]
        tpu.replicate(step, placeholders)
    return g


def tf_numbers():
    """TF's outputs of the step, run once per replica: [output][replica]."""
    per_replica = []
    for x, w in inputs():
        g = tf.Graph()
        with g.as_default():
            outs = step(tf.constant(x), tf.constant(w))
            with tf1.Session(graph=g) as sess:
                per_replica.append(sess.run(outs))
    return [np.stack([per_replica[r][i] for r in range(REPLICAS)]) for i in range(len(per_replica[0]))]


def feeds():
    out = {}
    for r, (x, w) in enumerate(inputs()):
        out[f"x_{r}:0"] = x
        out[f"w_{r}:0"] = w
    return out


def test_clusters_match_tf_tags(tf_graph):
    graph_def = tf_graph.as_graph_def()
    module = tr.rewrite(tr.load(graph_def))
    [cluster] = module.clusters
    tagged = {n.name: n.attr["_tpu_replicate"].s.decode() for n in graph_def.node if "_tpu_replicate" in n.attr}
    assert set(tagged.values()) == {cluster["name"]}
    assert cluster["num_replicas"] == REPLICAS
    # Every op TF tagged is a member of our cluster.
    assert set(tagged) <= set(cluster["members"])


@pytest.mark.parametrize("backend", ["sim", "pjrt"])
def test_numbers_match_tf(tf_graph, backend):
    expected = tf_numbers()
    result = tr.run(tr.load(tf_graph.as_graph_def()), feeds=feeds(), topology="1x2", backend=backend)
    got = list(result.values())
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_graph_def_goes_back_into_tf(tf_graph):
    module = tr.rewrite(tr.load(tf_graph.as_graph_def().SerializeToString()))
    graph_def = tf1.GraphDef.FromString(module.to_graph_def())
    names = {n.name for n in graph_def.node}
    assert {"x_0", "w_1"} <= names
    g = tf.Graph()
    with g.as_default():
        tf1.import_graph_def(graph_def, name="")
    ops = {op.type for op in g.get_operations()}
    assert "TPUReplicateMetadata" in ops and "TPUReplicatedInput" in ops
    # And it loads back into tpu_rewrite with the same cluster.
    again = tr.rewrite(tr.load(g.as_graph_def()))
    assert [c["name"] for c in again.clusters] == [c["name"] for c in module.clusters]
