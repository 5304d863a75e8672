"""Writes the functional control-flow cases of tests/tf/corpus/ (TF 2 control flow: While, If, Case,
PartitionedCall and the TensorList accumulators of tf.while_loop), with TF's own numbers.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/corpus_control_flow.py

The file formats are make_corpus.py's (see its docstring); this script only adds cases. Control
flow v2 is TensorFlow 2's default even with eager execution disabled, so tf.while_loop writes a
`While` (or `StatelessWhile`) node whose cond and body are functions of the GraphDef's library.
"""

import sys




from make_corpus import f32, np, plain_case, replicated_case, tf  # noqa: E402  (sets the TF env first)

tf1 = tf.compat.v1


def while_loop():
    """A tf.while_loop with a TensorArray accumulator and the gradient through it."""

    def build():
        x0 = tf1.placeholder(tf.float32, [2, 3], name="x0")
        w = tf.constant(f32(201, 3, 3, scale=0.5), name="w")
        n = tf.constant(4, name="n")
        ta = tf.TensorArray(tf.float32, size=4, element_shape=[2, 3])

        def cond(i, x, acc):
            return i < n

        def body(i, x, acc):
            y = tf.tanh(tf.matmul(x, w)) + 0.1 * tf.cast(i, tf.float32)
            return i + 1, y, acc.write(i, tf.reduce_sum(y, axis=0, keepdims=True) * tf.ones([2, 1]))

        i, x, acc = tf.while_loop(cond, body, [tf.constant(0), x0, ta], name="loop")
        stacked = tf.identity(acc.stack(), name="stacked")
        loss = tf.reduce_sum(x * x) + tf.reduce_sum(stacked)
        gx, gw = tf.gradients(loss, [x0, w])
        named = {
            "i": tf.identity(i, name="i_out"),
            "x": tf.identity(x, name="x_out"),
            "stacked": stacked,
            "gx": tf.identity(gx, name="gx"),
            "gw": tf.identity(gw, name="gw"),
        }
        return {x0: f32(202, 2, 3)}, named

    plain_case("while_loop", build, [([], ["i", "x", "stacked", "gx", "gw"])])


def cond():
    """tf.cond both ways, tf.switch_case, a tf.function call, and gradients through the cond."""

    def build():
        x = tf1.placeholder(tf.float32, [4], name="x")
        w = tf.constant(f32(211, 4), name="w")
        pos = tf.reduce_sum(x) > 0.0
        a = tf.cond(pos, lambda: tf.square(x * w), lambda: tf.sigmoid(x) - w, name="cond_true")
        b = tf.cond(tf.logical_not(pos), lambda: x * 3.0, lambda: tf.exp(x * w), name="cond_false")
        k = tf.constant(2, name="k")
        c = tf.switch_case(k, [lambda: x + 1.0, lambda: x * w, lambda: tf.tanh(x) * 2.0], name="case")

        @tf.function
        def affine(v, u):
            return v * u + 1.0, tf.reduce_sum(v)

        d, s = affine(x, w)
        loss = tf.reduce_sum(a) + tf.reduce_sum(b * c)
        gx, gw = tf.gradients(loss, [x, w])
        named = {
            "a": tf.identity(a, name="a"),
            "b": tf.identity(b, name="b"),
            "c": tf.identity(c, name="c"),
            "d": tf.identity(d, name="d"),
            "s": tf.identity(s, name="s"),
            "gx": tf.identity(gx, name="gx"),
            "gw": tf.identity(gw, name="gw"),
        }
        return {x: np.array([0.5, -0.25, 1.5, 0.75], np.float32)}, named

    plain_case("cond", build, [([], ["a", "b", "c", "d", "s", "gx", "gw"])])


def replicated_while():
    """A tf.while_loop and a tf.cond inside tpu.replicate, 2 replicas, with a gradient step."""

    def step(x, w):
        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, w))

        _, h = tf.while_loop(lambda i, h: i < 3, body, [tf.constant(0), x])
        loss = tf.reduce_mean(h * h)
        h2 = tf.cond(loss > 0.1, lambda: h * 2.0, lambda: h - 1.0)
        loss2 = loss + tf.reduce_mean(h2)
        (gw,) = tf.gradients(loss2, [w])
        return [loss2, h2, w - 0.1 * gw]

    w0 = f32(221, 3, 3, scale=0.7)
    replicated_case("replicated_while", step, [[f32(222 + r, 2, 3), w0] for r in range(2)])


def stateful_control_flow():
    """A loop and a cond that read and update resource variables: TF writes `While` and `If`."""

    def build():
        x0 = tf1.placeholder(tf.float32, [2, 3], name="x0")
        v = tf1.Variable(f32(231, 3, 3, scale=0.5), name="v", use_resource=True)
        total = tf1.Variable(np.zeros([2, 3], np.float32), name="total", use_resource=True)

        def body(i, x):
            y = tf.tanh(tf.matmul(x, v.read_value()))
            # A function runs what its results and control outputs need: the update is made a dependency.
            with tf.control_dependencies([total.assign_add(y)]):
                y = tf.identity(y)
            return i + 1, y

        i, x = tf.while_loop(lambda i, x: i < 3, body, [tf.constant(0), x0], name="loop")
        z = tf.cond(
            tf.reduce_sum(x) > 0.0, lambda: x + v.read_value()[0], lambda: x - total.read_value(), name="branch"
        )
        named = {
            "init": tf1.global_variables_initializer(),
            "i": tf.identity(i, name="i_out"),
            "x": tf.identity(x, name="x_out"),
            "z": tf.identity(z, name="z_out"),
        }
        named["total"] = tf.identity(total.read_value(), name="read_total")
        return {x0: f32(232, 2, 3)}, named

    # The reads of `total` get a run of their own, after the loop has updated it.
    plain_case("stateful_control_flow", build, [(["init"], []), ([], ["i", "x", "z"]), ([], ["total"])])


def tensor_array():
    """TensorArray ops as TF writes them: unstack, scatter, gather, concat, a dynamic-size write loop."""

    def build():
        x = tf1.placeholder(tf.float32, [4, 3], name="x")
        ta = tf.TensorArray(tf.float32, size=4, element_shape=[3]).unstack(x)
        scattered = tf.TensorArray(tf.float32, size=3, element_shape=[3])
        scattered = scattered.scatter([2, 0], tf.stack([x[1], x[3]]))
        parts = tf.TensorArray(tf.float32, size=2, element_shape=[None, 3], infer_shape=False)
        parts = parts.write(0, x[:1]).write(1, x[1:] * 2.0)

        def body(i, t):
            return i + 1, t.write(i, tf.reduce_sum(x, axis=0) * tf.cast(i, tf.float32))

        _, grown = tf.while_loop(
            lambda i, t: i < 5, body, [0, tf.TensorArray(tf.float32, size=1, dynamic_size=True)], name="loop"
        )
        named = {
            "gathered": tf.identity(ta.gather([3, 1]), name="gathered"),
            "scattered": tf.identity(scattered.stack(), name="scattered"),
            "concat": tf.identity(parts.concat(), name="concat"),
            "grown": tf.identity(grown.stack(), name="grown"),
            "size": tf.identity(grown.size(), name="size"),
        }
        return {x: f32(241, 4, 3)}, named

    plain_case("tensor_array", build, [([], ["gathered", "scattered", "concat", "grown", "size"])])


def replicated_cond_grad():
    """The gradient of a tf.cond inside tpu.replicate, 2 replicas (one takes each branch). In an XLA
    context cond_v2 gives each branch function FakeParam ops standing in for the intermediates
    only the other branch makes, so that both branches have the same outputs."""

    def step(x, w):
        y = tf.cond(
            tf.reduce_sum(x) > 0.0,
            lambda: tf.tanh(tf.matmul(x, w)) * 2.0,
            lambda: tf.sigmoid(tf.matmul(x * x, w)) - 1.0,
        )
        loss = tf.reduce_mean(y * y)
        gx, gw = tf.gradients(loss, [x, w])
        return [loss, gx, w - 0.1 * gw]

    w0 = f32(251, 3, 3, scale=0.7)
    x0 = np.abs(f32(252, 2, 3))
    replicated_case("replicated_cond_grad", step, [[x0, w0], [-x0 * 0.5, w0]])


CASES = {
    "tensor_array": tensor_array,
    "while_loop": while_loop,
    "cond": cond,
    "replicated_while": replicated_while,
    "stateful_control_flow": stateful_control_flow,
    "replicated_cond_grad": replicated_cond_grad,
}

if __name__ == "__main__":
    for case in sys.argv[1:] or list(CASES):
        CASES[case]()
