"""Writes tests/tf/corpus/tf1_tensor_array/: a `dynamic_rnn`-style TF1 `while_loop` that reads its
inputs from a TensorArray and writes its states to another, with `tf.gradients` of a loss, as
TensorFlow 2.21 builds it with control flow v2 off. The gradient loop is TF1 control flow too: the
forward loop pushes the values the backward loop needs onto stacks (`StackV2`, `StackPushV2`) and
the backward loop pops them (`StackPopV2`), one per iteration.

- `rnn_plain`: a plain graph (outside an XLA context TensorFlow makes its stacks unbounded,
  `max_size` -1).
- `rnn_replicated`: the same step inside `tpu.replicate` over two replicas, with
  `maximum_iterations` on the loop (inside an XLA context TensorFlow bounds the stacks by it).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/corpus_tf1_tensor_array.py

The file formats are make_corpus.py's (see its docstring); tests/it/tf1_tensor_array.rs reads them.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import make_corpus as mc  # noqa: E402
from make_corpus import f32, plain_case, replicated_case, tf, tf1  # noqa: E402

tf1.disable_control_flow_v2()
mc.OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "tf1_tensor_array")

STEPS, BATCH, IN, HIDDEN = 4, 2, 3, 3


def rnn(x, w, u, maximum_iterations=None):
    """h_t = tanh(x_t w + h_{t-1} u) over the time-major `x`; the loss, its gradients, the states."""
    inputs = tf.TensorArray(tf.float32, size=STEPS, element_shape=[BATCH, IN]).unstack(x)
    states = tf.TensorArray(tf.float32, size=STEPS, element_shape=[BATCH, HIDDEN])

    def body(t, h, out):
        h2 = tf.tanh(tf.matmul(inputs.read(t), w) + tf.matmul(h, u))
        return [t + 1, h2, out.write(t, h2)]

    _, h, out = tf1.while_loop(lambda t, h, out: t < STEPS, body, [tf.constant(0), tf.zeros([BATCH, HIDDEN]), states],
                               maximum_iterations=maximum_iterations)
    seq = out.stack()
    loss = tf.reduce_sum(seq * seq) * 0.5 + tf.reduce_sum(h)
    dx, dw, du = tf.gradients(loss, [x, w, u])
    return [loss, seq, dx, dw, du]


def rnn_plain():
    def build():
        x = tf1.placeholder(tf.float32, [STEPS, BATCH, IN], name="x")
        w = tf1.placeholder(tf.float32, [IN, HIDDEN], name="w")
        u = tf1.placeholder(tf.float32, [HIDDEN, HIDDEN], name="u")
        loss, seq, dx, dw, du = rnn(x, w, u)
        feeds = {x: f32(1, STEPS, BATCH, IN), w: f32(2, IN, HIDDEN, scale=0.5), u: f32(3, HIDDEN, HIDDEN, scale=0.5)}
        return feeds, {"loss": loss, "seq": seq, "dx": dx, "dw": dw, "du": du}

    plain_case("rnn_plain", build, [([], ["loss", "seq", "dx", "dw", "du"])])


def rnn_replicated():
    def step(x, w, u):
        return rnn(x, w, u, maximum_iterations=STEPS)

    w, u = f32(12, IN, HIDDEN, scale=0.5), f32(13, HIDDEN, HIDDEN, scale=0.5)
    replicated_case("rnn_replicated", step, [[f32(10 + r, STEPS, BATCH, IN), w, u] for r in range(2)])


if __name__ == "__main__":
    rnn_plain()
    rnn_replicated()
