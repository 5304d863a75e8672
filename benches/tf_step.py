"""A transformer training step made and timed by TensorFlow 2.21 on CPU.

Usage: python benches/tf_step.py OUT_DIR [--layers L] [--steps N]

Builds a plain (not replicated) TF1-style graph of a small transformer
encoder step written as a Keras user's layers write it: dense projections
(MatMul + BiasAdd), multi-head self-attention (BatchMatMulV2, Softmax), layer
norm (Mean, SquaredDifference, Rsqrt), a GELU MLP (Erf), residual adds, a
mean-squared-error loss, `tf.gradients` and plain SGD
(ResourceApplyGradientDescent). Times `session.run(train_op)` per step after
warm-up and writes OUT_DIR/step.pb (the GraphDef) and OUT_DIR/step.json:
  {"feeds": {tensor: T}, "init": op, "train": op, "loss": tensor,
   "steps": N, "tf_step_ms": median per-step ms, "tf_step_cpu_ms": median per-step CPU ms
   (all threads), "tf_threads": n,
   "loss_after": T (the loss fetched after N steps)}
with T = {"dtype", "shape", "values"} as in tests/tf/make_corpus.py.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()

BATCH, SEQ, D_MODEL, HEADS = 4, 32, 64, 4


def enc(value):
    a = np.asarray(value)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "values": [float(v) for v in a.reshape(-1)]}


def dense(x, n_in, n_out, name, rng):
    w = tf1.get_variable(name + "/kernel", initializer=(rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32), use_resource=True)
    b = tf1.get_variable(name + "/bias", initializer=np.zeros(n_out, np.float32), use_resource=True)
    flat = tf.reshape(x, [-1, n_in])
    return tf.reshape(tf.nn.bias_add(tf.matmul(flat, w), b), [BATCH, SEQ, n_out])


def layer_norm(x, name):
    gamma = tf1.get_variable(name + "/gamma", initializer=np.ones(D_MODEL, np.float32), use_resource=True)
    beta = tf1.get_variable(name + "/beta", initializer=np.zeros(D_MODEL, np.float32), use_resource=True)
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    var = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1, keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-6) * gamma + beta


def heads(x):
    return tf.transpose(tf.reshape(x, [BATCH, SEQ, HEADS, D_MODEL // HEADS]), [0, 2, 1, 3])


def block(x, i, rng):
    h = layer_norm(x, f"layer{i}/ln1")
    q, k, v = (heads(dense(h, D_MODEL, D_MODEL, f"layer{i}/{n}", rng)) for n in "qkv")
    scores = tf.matmul(q, k, transpose_b=True) / np.float32(np.sqrt(D_MODEL // HEADS))
    attn = tf.matmul(tf.nn.softmax(scores), v)
    attn = tf.reshape(tf.transpose(attn, [0, 2, 1, 3]), [BATCH, SEQ, D_MODEL])
    x = x + dense(attn, D_MODEL, D_MODEL, f"layer{i}/out", rng)
    h = layer_norm(x, f"layer{i}/ln2")
    h = dense(h, D_MODEL, 4 * D_MODEL, f"layer{i}/mlp_in", rng)
    h = 0.5 * h * (1.0 + tf.math.erf(h / np.float32(np.sqrt(2.0))))
    return x + dense(h, 4 * D_MODEL, D_MODEL, f"layer{i}/mlp_out", rng)


def main():
    out = sys.argv[1]
    layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 4
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 50
    rng = np.random.default_rng(0)
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [BATCH, SEQ, D_MODEL], name="x")
        y = tf1.placeholder(tf.float32, [BATCH, SEQ, D_MODEL], name="y")
        h = x
        for i in range(layers):
            h = block(h, i, rng)
        loss = tf.reduce_mean(tf.math.squared_difference(h, y), name="loss")
        params = tf1.trainable_variables()
        grads = tf.gradients(loss, params)
        lr = tf.constant(0.01, name="lr")
        updates = [
            tf.raw_ops.ResourceApplyGradientDescent(var=p.handle, alpha=lr, delta=gr) for p, gr in zip(params, grads)
        ]
        train = tf.group(*updates, name="train")
        init = tf1.global_variables_initializer()
        feeds = {x: rng.standard_normal((BATCH, SEQ, D_MODEL)).astype(np.float32),
                 y: rng.standard_normal((BATCH, SEQ, D_MODEL)).astype(np.float32)}
        config = tf1.ConfigProto()
        with tf1.Session(graph=g, config=config) as sess:
            sess.run(init)
            for _ in range(5):
                sess.run(train, feed_dict=feeds)
            sess.run(init)
            times, cpus = [], []
            for _ in range(steps):
                start, cpu = time.perf_counter(), time.process_time()
                sess.run(train, feed_dict=feeds)
                times.append(time.perf_counter() - start)
                cpus.append(time.process_time() - cpu)
            loss_after = sess.run(loss, feed_dict=feeds)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "step.pb"), "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    meta = {
        "feeds": {p.name: enc(v) for p, v in feeds.items()},
        "init": init.name,
        "train": train.name,
        "loss": loss.name,
        "steps": steps,
        "layers": layers,
        "nodes": len(g.as_graph_def().node),
        "tf_step_ms": float(np.median(times) * 1e3),
        "tf_step_cpu_ms": float(np.median(cpus) * 1e3),
        "tf_threads": os.cpu_count(),
        "loss_after": enc(loss_after),
    }
    with open(os.path.join(out, "step.json"), "w") as f:
        json.dump(meta, f)
    print(f"tensorflow {tf.__version__}: {meta['nodes']} nodes, {layers} layers, "
          f"median step {meta['tf_step_ms']:.3f} ms over {steps} steps", file=sys.stderr)


if __name__ == "__main__":
    main()
