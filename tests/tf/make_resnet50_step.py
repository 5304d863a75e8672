"""Writes a tf_keras ResNet50 training step under tpu.replicate as a binary GraphDef.

Run after setup.sh:
    tests/tf/.venv/bin/python tests/tf/make_resnet50_step.py OUT_DIR [--size 32] [--batch 1] [--replicas 2]

Writes OUT_DIR/resnet50_{size}_b{batch}.pb: keras.applications.ResNet50 (weights=None, 1000
classes) built in graph mode as a new user would (Keras's own initializers), categorical
cross-entropy, tf.gradients averaged over the replicas with cross_replica_sum, and the legacy
SGD optimizer, with the batch-norm updates. Each replica reads placeholders `in0_{r}` (images,
batch x size x size x 3) and `in1_{r}` (one-hot labels). The graph is pruned to the replicated
step and the variables' initialisers. The files are about 1.3 MB at any size (the variables start
from Keras's initialisers, which are ops in the graph, not constants); they are not committed.
Used by docs/performance.md's StableHLO lowering figures.
"""

import argparse
import os

import tensorflow as tf
import tf_keras as keras
from tensorflow.python.tpu import tpu
from tensorflow.python.tpu.ops import tpu_ops

tf1 = tf.compat.v1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--replicas", type=int, default=2)
    args = parser.parse_args()
    g = tf.Graph()
    with g.as_default():
        model = keras.applications.ResNet50(weights=None, input_shape=(args.size, args.size, 3))
        opt = keras.optimizers.legacy.SGD(0.01)
        opt._create_all_weights(model.trainable_variables)
        opt.iterations  # noqa: B018  (made here, not inside the step)
        loss_fn = keras.losses.CategoricalCrossentropy()

        def step(x, y):
            pred = model(x, training=True)
            loss = loss_fn(y, pred)
            grads = tf.gradients(loss, model.trainable_variables)
            grads = [tpu_ops.cross_replica_sum(gr) / args.replicas for gr in grads]
            train = opt.apply_gradients(zip(grads, model.trainable_variables))
            updates = model.get_updates_for(x) + model.get_updates_for(None)
            with tf.control_dependencies([train] + updates):
                return [tf.identity(loss)]

        ph = [
            [
                tf1.placeholder(tf.float32, (args.batch, args.size, args.size, 3), name=f"in0_{r}"),
                tf1.placeholder(tf.float32, (args.batch, 1000), name=f"in1_{r}"),
            ]
            for r in range(args.replicas)
        ]
        outputs = tpu.replicate(step, ph)
        keep = [t.op.name for replica in outputs for t in replica]
        keep += [v.initializer.name for v in tf1.global_variables()]
        keep += [op.name for op in g.get_operations() if op.type in ("TPUReplicateMetadata", "TPUCompilationResult")]
        graph_def = tf1.graph_util.extract_sub_graph(g.as_graph_def(), keep)
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, f"resnet50_{args.size}_b{args.batch}.pb")
    with open(path + ".tmp", "wb") as f:
        f.write(graph_def.SerializeToString(deterministic=True))
    os.replace(path + ".tmp", path)
    print(path, len(graph_def.node), "nodes")


if __name__ == "__main__":
    main()
