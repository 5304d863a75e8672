"""A transformer training step made by TensorFlow 2.21 under tpu.replicate, as a binary GraphDef.

Usage: python benches/tf_transformer.py OUT.pb [--layers L] [--replicas R]

The step is benches/tf_step.py's encoder block (dense projections, multi-head self-attention,
layer norm, a GELU MLP, residual adds) repeated L times (default 170: about 85k nodes), a mean-squared-error
loss, `tf.gradients`, gradients summed over the replicas with cross_replica_sum and plain SGD,
all inside `tpu.replicate` over R replicas (default 8, for `lower --topology 2x4`). The
variables are made outside the step with random initialisers (no large constants), so the file
holds what TF writes for such a graph: its nodes, attributes and `_output_shapes`. Prints
"nodes bytes" on stdout. The file is written atomically (temp file + rename).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.python.tpu import tpu  # noqa: E402
from tensorflow.python.tpu.ops import tpu_ops  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()

BATCH, SEQ, D_MODEL, HEADS = 2, 16, 32, 4


def var(name, shape):
    return tf1.get_variable(name, shape, initializer=tf1.glorot_uniform_initializer(), use_resource=True)


def dense(x, n_in, n_out, name):
    w, b = var(name + "/kernel", [n_in, n_out]), var(name + "/bias", [n_out])
    return tf.reshape(tf.nn.bias_add(tf.matmul(tf.reshape(x, [-1, n_in]), w), b), [BATCH, SEQ, n_out])


def layer_norm(x, name):
    gamma, beta = var(name + "/gamma", [D_MODEL]), var(name + "/beta", [D_MODEL])
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1, keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + 1e-6) * gamma + beta


def heads(x):
    return tf.transpose(tf.reshape(x, [BATCH, SEQ, HEADS, D_MODEL // HEADS]), [0, 2, 1, 3])


def block(x, i):
    h = layer_norm(x, f"layer{i}/ln1")
    q, k, v = (heads(dense(h, D_MODEL, D_MODEL, f"layer{i}/{n}")) for n in "qkv")
    scores = tf.matmul(q, k, transpose_b=True) / float((D_MODEL // HEADS) ** 0.5)
    attn = tf.reshape(tf.transpose(tf.matmul(tf.nn.softmax(scores), v), [0, 2, 1, 3]), [BATCH, SEQ, D_MODEL])
    x = x + dense(attn, D_MODEL, D_MODEL, f"layer{i}/out")
    h = dense(layer_norm(x, f"layer{i}/ln2"), D_MODEL, 4 * D_MODEL, f"layer{i}/mlp_in")
    h = 0.5 * h * (1.0 + tf.math.erf(h / 2.0**0.5))
    return x + dense(h, 4 * D_MODEL, D_MODEL, f"layer{i}/mlp_out")


def model(x, layers):
    for i in range(layers):
        x = block(x, i)
    return x


def main():
    out = sys.argv[1]
    layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 170
    replicas = int(sys.argv[sys.argv.index("--replicas") + 1]) if "--replicas" in sys.argv else 8
    g = tf.Graph()
    with g.as_default():
        # The variables, made outside the step; the forward pass that made them is pruned below.
        with tf1.variable_scope("model", reuse=tf1.AUTO_REUSE):
            model(tf.zeros([BATCH, SEQ, D_MODEL]), layers)
        params = tf1.trainable_variables()

        def step(x, y):
            with tf1.variable_scope("model", reuse=True):
                loss = tf.reduce_mean(tf.math.squared_difference(model(x, layers), y))
            grads = tf.gradients(loss, params)
            grads = [tpu_ops.cross_replica_sum(gr) / replicas for gr in grads]
            train = [tf.raw_ops.ResourceApplyGradientDescent(var=p.handle, alpha=0.01, delta=gr)
                     for p, gr in zip(params, grads)]
            with tf.control_dependencies(train):
                return [tf.identity(loss)]

        ph = [[tf1.placeholder(tf.float32, [BATCH, SEQ, D_MODEL], name=f"{n}_{r}") for n in "xy"]
              for r in range(replicas)]
        outputs = tpu.replicate(step, ph)
        keep = [t.op.name for replica in outputs for t in replica] + [p.initializer.name for p in params]
        keep += [op.name for op in g.get_operations() if op.type in ("TPUReplicateMetadata", "TPUCompilationResult")]
        graph_def = tf1.graph_util.extract_sub_graph(g.as_graph_def(add_shapes=True), keep)
    data = graph_def.SerializeToString()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "wb") as f:
        f.write(data)
    os.replace(out + ".tmp", out)
    print(len(graph_def.node), len(data))


if __name__ == "__main__":
    main()
