"""Writes tests/tf/corpus/tf1_variables/ref_variables.{pbtxt,json}: a TF1 graph whose variables are
ref variables (`VariableV2`, set by `Assign` from constants, read through `<name>/read`), with
no `VarHandleOp`, and TensorFlow's value of its loss after running its `init` op.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/tf1_ref_variables.py

It lives in its own directory because tests/it/tf_corpus.rs runs every top-level case on the
library's kernels, which have none for ref variables (the CLI's plain-graph run converts them).
The JSON is make_corpus.py's format: {"kind": "plain", "feeds": {tensor: T},
"runs": [{"targets": ["init"], "fetches": {}}, {"targets": [], "fetches": {tensor: T}}]}.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import make_corpus as mc  # noqa: E402
import numpy as np  # noqa: E402

tf1 = mc.tf1


def main():
    graph = mc.tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(mc.tf.float32, [2, 3], name="x")
        w = tf1.Variable(mc.f32(1, 3, 4), name="w", use_resource=False)
        b = tf1.Variable(mc.f32(2, 4), name="b", use_resource=False)
        y = mc.tf.nn.tanh(mc.tf.matmul(x, w) + b)
        loss = mc.tf.reduce_sum(y * y, name="loss")
        init = tf1.global_variables_initializer()
    ops = {op.type for op in graph.get_operations()}
    assert "VariableV2" in ops and "VarHandleOp" not in ops, ops
    feed = mc.f32(3, 2, 3)
    with tf1.Session(graph=graph) as sess:
        sess.run(init)
        value = sess.run(loss, {x: feed})
    meta = {
        "kind": "plain",
        "feeds": {"x:0": mc.enc(feed)},
        "runs": [
            {"targets": [init.name], "fetches": {}},
            {"targets": [], "fetches": {"loss:0": mc.enc(value)}},
        ],
        "rtol": 1e-5,
    }
    out = os.path.join(mc.OUT, "tf1_variables")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "ref_variables.pbtxt"), "w") as f:
        f.write(str(graph.as_graph_def()))
    with open(os.path.join(out, "ref_variables.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("tf1_ref_variables: loss", value)


if __name__ == "__main__":
    main()
