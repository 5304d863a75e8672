"""Writes tests/tf/corpus_ir_gradients/: forward graphs with TF 2 control flow (While, If, Case,
PartitionedCall), and the gradients TensorFlow computes of them with tf.gradients.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ir_gradients.py

For each case NAME it writes
  NAME.pbtxt  the GraphDef of the forward computation only, taken before tf.gradients changed the
              graph (tf.gradients widens a While with accumulators and an If with intermediates);
  NAME.json   {"loss": tensor, "xs": [tensor], "rtol",
               "runs": [{"feeds": {tensor: T}, "loss": T, "grads": [T]}]}
              with T in make_corpus.py's encoding. tests/it/gradients_control_flow.rs asks the
              IR's own gradients(ys = [loss], xs) of the imported graph for the same values.
  rnn_loop_training.json  examples/rnn_loop.opg trained 5 steps by TF (same weights, feeds and
              update): {"steps", "losses": [[replica 0, replica 1] per step], "variables", "rtol"}.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from make_corpus import enc, f32, np, tf  # noqa: E402  (sets the TF env first)

tf1 = tf.compat.v1
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_ir_gradients")


def case(name, build, feed_sets, rtol=1e-4):
    """build() -> (placeholders {key: tensor}, loss, xs); feed_sets: [{key: value}]."""
    g = tf.Graph()
    with g.as_default():
        places, loss, xs = build()
        forward = g.as_graph_def()
        grads = tf.gradients(loss, xs)
        runs = []
        with tf1.Session(graph=g) as sess:
            for feeds in feed_sets:
                feed_dict = {places[k]: v for k, v in feeds.items()}
                values = sess.run([loss] + grads, feed_dict=feed_dict)
                runs.append(
                    {
                        "feeds": {places[k].name: enc(v) for k, v in feeds.items()},
                        "loss": enc(values[0]),
                        "grads": [enc(v) for v in values[1:]],
                    }
                )
    meta = {"loss": loss.name, "xs": [x.name for x in xs], "rtol": rtol, "runs": runs}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name + ".pbtxt"), "w") as f:
        f.write(str(forward))
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(meta, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("wrote", name, file=sys.stderr)


def cond():
    """tf.cond (If) on the sign of a sum; one run takes each branch."""

    def build():
        x = tf1.placeholder(tf.float32, [4], name="x")
        w = tf1.placeholder(tf.float32, [4], name="w")
        y = tf.cond(tf.reduce_sum(x * w) > 0.0, lambda: tf.square(x * w), lambda: tf.sigmoid(x) - w)
        loss = tf.reduce_sum(y * y, name="loss")
        return {"x": x, "w": w}, loss, [x, w]

    w = f32(302, 4)
    case("cond", build, [{"x": f32(301, 4), "w": w}, {"x": -f32(301, 4), "w": w}, {"x": f32(303, 4), "w": w}])


def switch_case():
    """tf.switch_case (Case) over three branches, and an index past the last (runs the last)."""

    def build():
        i = tf1.placeholder(tf.int32, [], name="i")
        x = tf1.placeholder(tf.float32, [2, 3], name="x")
        w = tf1.placeholder(tf.float32, [3, 3], name="w")
        branches = [
            lambda: tf.tanh(tf.matmul(x, w)),
            lambda: tf.matmul(x * x, w),
            lambda: tf.exp(x) * 0.5,
        ]
        y = tf.switch_case(i, branches)
        loss = tf.reduce_sum(y * y, name="loss")
        return {"i": i, "x": x, "w": w}, loss, [x, w]

    x, w = f32(311, 2, 3), f32(312, 3, 3, scale=0.5)
    case("switch_case", build, [{"i": np.int32(k), "x": x, "w": w} for k in (0, 1, 2, 7)])


def call():
    """A tf.function called from the graph (PartitionedCall), itself calling a tf.function."""

    @tf.function
    def inner(a):
        return tf.sin(a) * a

    @tf.function
    def outer(a, b):
        return inner(tf.matmul(a, b)) + b[0]

    def build():
        x = tf1.placeholder(tf.float32, [2, 3], name="x")
        w = tf1.placeholder(tf.float32, [3, 3], name="w")
        loss = tf.reduce_sum(tf.square(outer(x, w)), name="loss")
        return {"x": x, "w": w}, loss, [x, w]

    case("call", build, [{"x": f32(321, 2, 3), "w": f32(322, 3, 3)}])


def rnn_loop():
    """An RNN as a tf.while_loop: h = tanh(x[t] @ wx + h @ wh + b) for t < 4, loss on the last h."""

    def build():
        xs = tf1.placeholder(tf.float32, [4, 2, 3], name="xs")
        h0 = tf1.placeholder(tf.float32, [2, 5], name="h0")
        wx = tf1.placeholder(tf.float32, [3, 5], name="wx")
        wh = tf1.placeholder(tf.float32, [5, 5], name="wh")
        b = tf1.placeholder(tf.float32, [5], name="b")

        def body(t, h):
            return t + 1, tf.tanh(tf.matmul(tf.gather(xs, t), wx) + tf.matmul(h, wh) + b)

        _, h = tf.while_loop(lambda t, h: t < 4, body, [tf.constant(0), h0], name="rnn")
        loss = tf.reduce_sum(tf.square(h - 0.25), name="loss")
        return {"xs": xs, "h0": h0, "wx": wx, "wh": wh, "b": b}, loss, [xs, h0, wx, wh, b]

    feeds = {
        "xs": f32(331, 4, 2, 3),
        "h0": f32(332, 2, 5, scale=0.5),
        "wx": f32(333, 3, 5, scale=0.5),
        "wh": f32(334, 5, 5, scale=0.5),
        "b": f32(335, 5, scale=0.1),
    }
    case("rnn_loop", build, [feeds])


def loop_with_cond():
    """A loop whose body holds a tf.cond on the iteration's parity (an If in a While), run a
    number of times given at run time."""

    def build():
        n = tf1.placeholder(tf.int32, [], name="n")
        x = tf1.placeholder(tf.float32, [3], name="x")
        w = tf1.placeholder(tf.float32, [3], name="w")

        def body(t, v):
            even = tf.equal(t % 2, 0)
            v2 = tf.cond(even, lambda: tf.sin(v * w), lambda: v * v - w)
            return t + 1, v2

        _, v = tf.while_loop(lambda t, v: t < n, body, [tf.constant(0), x], name="loop")
        loss = tf.reduce_sum(v * x, name="loss")
        return {"n": n, "x": x, "w": w}, loss, [x, w]

    x, w = f32(341, 3, scale=0.5), f32(342, 3, scale=0.5)
    case("loop_with_cond", build, [{"n": np.int32(k), "x": x, "w": w} for k in (0, 1, 3)])


def example_constants(path):
    """The f32 `Const` literals of an .opg file, by node name: {name: (shape, values)}."""
    out = {}
    pattern = re.compile(r"%(\w+) = Const\(\) \{dtype = f32, value = tensor\(f32, \[([\d, ]*)\]\) \[([^\]]*)\]\}")
    with open(path) as f:
        for m in pattern.finditer(f.read()):
            dims = [int(d) for d in m.group(2).split(",") if d.strip()]
            values = [float(v) for v in m.group(3).split(",")]
            out[m.group(1)] = (dims, values)
    return out


def rnn_training(steps=5):
    """examples/rnn_loop.opg trained by TF: the same RNN as a tf.while_loop over 2 replicas' feeds
    (examples/rnn_loop.feeds.json), the gradients of each replica's loss summed, SGD with rate 0.1.
    Writes each step's per-replica losses and the variables after the last step."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
    consts = example_constants(os.path.join(root, "rnn_loop.opg"))
    with open(os.path.join(root, "rnn_loop.feeds.json")) as f:
        feeds = json.load(f)

    def init(name):
        dims, values = consts[name + "_init_value"]
        a = np.array(values, np.float32)
        # A literal with one value fills its shape, as in the .opg text.
        return np.broadcast_to(a, dims).copy() if a.size == 1 else a.reshape(dims)

    g = tf.Graph()
    with g.as_default():
        names = ["wx", "wh", "b", "wo"]
        variables = {n: tf1.Variable(init(n), name=n) for n in names}
        losses, grads = [], []
        for r in range(2):
            xs = tf.constant(np.array(feeds[f"xs{r}:0"], np.float32))
            y = tf.constant(np.array(feeds[f"y{r}:0"], np.float32))
            wx, wh, b, wo = (variables[n] for n in names)

            def body(t, h, xs=xs, wx=wx, wh=wh, b=b):
                return t + 1, tf.tanh(tf.matmul(tf.gather(xs, t), wx) + tf.matmul(h, wh) + b)

            _, h = tf.while_loop(lambda t, h: t < 4, body, [tf.constant(0), tf.zeros([2, 5])])
            loss = tf.reduce_mean(tf.square(tf.matmul(h, wo) - y))
            losses.append(loss)
            grads.append(tf.gradients(loss, [variables[n] for n in names]))
        updates = [
            variables[n].assign_sub(0.1 * tf.add_n([grads[r][k] for r in range(2)])) for k, n in enumerate(names)
        ]
        with tf1.Session(graph=g) as sess:
            sess.run(tf1.global_variables_initializer())
            per_step = []
            for _ in range(steps):
                values = sess.run(losses + updates)
                per_step.append([float(v) for v in values[:2]])
            final = {n: enc(v) for n, v in zip(names, sess.run([variables[n] for n in names]))}
    meta = {"steps": steps, "losses": per_step, "variables": final, "rtol": 1e-4}
    with open(os.path.join(OUT, "rnn_loop_training.json"), "w") as f:
        json.dump(meta, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("wrote rnn_loop_training", file=sys.stderr)


if __name__ == "__main__":
    tf1.disable_eager_execution()
    cond()
    switch_case()
    call()
    rnn_loop()
    loop_with_cond()
    rnn_training()
