"""Writes tests/tf/corpus/tf1/: TF1 control flow (Switch, Merge, Enter, Exit, NextIteration,
LoopCond) as TensorFlow 2.21 writes it with control flow v2 turned off, with TF's own numbers.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/corpus_tf1_control_flow.py

The file formats are make_corpus.py's (see its docstring); this script only adds cases and writes
them to the tf1/ subdirectory, which tests/it/tf1_control_flow.rs reads.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import make_corpus as mc  # noqa: E402
from make_corpus import f32, plain_case, replicated_case, tf, tf1  # noqa: E402
import numpy as np  # noqa: E402
from tensorflow.python.tpu import tpu_replication  # noqa: E402

tf1.disable_control_flow_v2()
mc.OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "tf1")


def while_loop():
    """A counted loop with two loop variables, a loop-invariant captured tensor and a nested cond."""

    def build():
        x = tf1.placeholder(tf.float32, [3], name="x")
        n = tf1.placeholder(tf.int32, [], name="n")
        scale = tf.constant(0.5, name="scale")

        def cond(i, acc):
            return i < n

        def body(i, acc):
            step = tf.cond(tf.equal(i % 2, 0), lambda: acc * scale + x, lambda: acc - x * 0.25)
            return i + 1, step

        i, acc = tf1.while_loop(cond, body, [tf.constant(0), tf.zeros([3])], name="loop")
        total = tf.reduce_sum(acc, name="total")
        return {x: f32(1, 3), n: np.array(5, np.int32)}, {"i": i, "acc": acc, "total": total}

    plain_case("while_loop", build, [([], ["i", "acc", "total"])])


def nested_while():
    """A while loop inside a while loop (frames within frames), and a loop that runs zero times."""

    def build():
        x = tf1.placeholder(tf.float32, [2, 2], name="x")

        def outer_body(i, m):
            def inner_body(j, a):
                return j + 1, tf.matmul(a, x) * 0.5 + 1.0

            _, m2 = tf1.while_loop(lambda j, a: j < i, inner_body, [tf.constant(0), m], name="inner")
            return i + 1, m2

        _, m = tf1.while_loop(lambda i, m: i < 4, outer_body, [tf.constant(0), tf.constant(np.eye(2, dtype=np.float32))], name="outer")
        _, z = tf1.while_loop(lambda k, v: k < 0, lambda k, v: (k + 1, v * 2.0), [tf.constant(0), x], name="never")
        return {x: f32(2, 2, 2, scale=0.5)}, {"m": m, "z": z}

    plain_case("nested_while", build, [([], ["m", "z"])])


def cond():
    """tf.cond both ways, and nested: the untaken branch's tensors are dead, Merge forwards the live one."""

    def build():
        x = tf1.placeholder(tf.float32, [4], name="x")
        p = tf1.placeholder(tf.bool, [], name="p")
        y = tf.cond(p, lambda: tf.nn.relu(x) * 2.0, lambda: tf.exp(x) - 1.0, name="c")
        s = tf.reduce_sum(x)
        z = tf.cond(s > 0.0, lambda: tf.square(x), lambda: -x, name="c2")
        # Nested conds: the inner one is in the untaken branch of the first, the taken one of the second.
        u = tf.cond(p, lambda: tf.cond(s > 0.0, lambda: x * 3.0, lambda: x + 1.0), lambda: x - 2.0, name="c3")
        v = tf.cond(tf.logical_not(p), lambda: tf.cond(s > 0.0, lambda: x * 3.0, lambda: x + 1.0), lambda: x - 2.0,
                    name="c4")
        return {x: f32(3, 4), p: np.array(False)}, {"y": y, "z": z, "out": y + z, "u": u, "v": v}

    plain_case("cond", build, [([], ["y", "z", "out", "u", "v"])])


def replicated_while():
    """A training-style step with a TF1 while loop (and a cond in its body) inside tpu.replicate."""

    def step(x, w):
        def body(i, h):
            h2 = tf.tanh(tf.matmul(h, w))
            h2 = tf.cond(tf.reduce_sum(h2) > 0.0, lambda: h2 * 0.9, lambda: h2 + 0.1)
            return i + 1, h2

        _, h = tf1.while_loop(lambda i, h: i < 3, body, [tf.constant(0), x])
        loss = tf.reduce_mean(tf.square(h))
        return [loss, h]

    w0 = f32(140, 3, 3)
    replicated_case("replicated_while", step, [[f32(141 + r, 2, 3), w0] for r in range(2)])


def replicated_while_outside_compilation():
    """A TF1 loop inside tpu.replicate whose body runs one op outside compilation (the tags)."""

    def step(x):
        def body(i, h):
            h2 = tpu_replication.outside_compilation(lambda t: tf.identity(t) * 2.0, tf.tanh(h))
            return i + 1, h2 + 1.0

        _, h = tf1.while_loop(lambda i, h: i < 3, body, [tf.constant(0), x])
        return [tf.reduce_sum(h)]

    replicated_case("replicated_while_outside_compilation", step, [[f32(150 + r, 2)] for r in range(2)])


CASES = {
    "while_loop": while_loop,
    "nested_while": nested_while,
    "cond": cond,
    "replicated_while": replicated_while,
    "replicated_while_outside_compilation": replicated_while_outside_compilation,
}

if __name__ == "__main__":
    wanted = sys.argv[1:] or list(CASES)
    for case in wanted:
        CASES[case]()
