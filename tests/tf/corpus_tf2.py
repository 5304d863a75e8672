"""Writes tests/tf/corpus_tf2/: TF2 users' artifacts (Keras 3 models with a tf.function train step) and TF's numbers.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/corpus_tf2.py [--data-parallel-only] [NAME...]
(models: mlp, cnn, transformer, lstm, gpt2; gpt2 is keras-hub's GPT2Backbone, which setup.sh installs).
With --data-parallel-only, only the dp4_*.json files are (re)written, from the SavedModel already there.

For each model NAME it writes, under tests/tf/corpus_tf2/NAME/:
  saved_model/        tf.saved_model.save of a tf.Module with `model`, `optimizer` (Keras Adam) and the
                      `train_step` tf.function, saved before any step (the initial weights);
  concrete.pb         train_step.get_concrete_function().graph.as_graph_def(), binary;
  feeds.json          the batch, {"x": ..., "y": ...} as nested lists (a `run --feeds` file);
  concrete_feeds.json the batch and every captured variable's initial value, keyed by the name of the
                      resource placeholder that captures it in concrete.pb;
  dp4_feeds.json      a global batch of 4 times the traced one (another draw), for `--data-parallel 4`;
  dp4_expected.json   {"steps", "losses", "variables": {name: final value}}: TF's single-device step on that
                      global batch (a train_step traced for it, from the same initial weights);
  expected.json       {"steps": 3, "losses": [loss of each step], "concrete_names": {placeholder: name},
                      "variables": {name: {"checkpoint_key",
                      "initial", "final"}}} with name = the variable's path (its SavedModel name) and each
                      value {"dtype", "shape", "values" (flat, row-major)}.

`restore_tf2.py NAME PREFIX` rebuilds the same objects and restores a checkpoint written by tpu-rewrite.
"""

import json
import os
import shutil
import sys

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_tf2")
STEPS = 3


def mlp(rows=5, seed=1):
    """Dense(8, relu) then Dense(3); mean squared error."""
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 4)).astype(np.float32)
    y = rng.standard_normal((rows, 3)).astype(np.float32)

    def loss_fn(model, x, y):
        return tf.reduce_mean(tf.square(model(x, training=True) - y))

    return model, (x, y), loss_fn


def cnn(rows=4, seed=2):
    """Conv2D, batch norm (training mode), ReLU, Dense; softmax cross-entropy on integer labels."""
    model = keras.Sequential(
        [
            keras.Input((6, 6, 1)),
            keras.layers.Conv2D(2, 3, use_bias=False),
            keras.layers.BatchNormalization(),
            keras.layers.ReLU(),
            keras.layers.Flatten(),
            keras.layers.Dense(3),
        ]
    )
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 6, 6, 1)).astype(np.float32)
    y = np.array([0, 2, 1, 2], dtype=np.int32) if rows == 4 else rng.integers(0, 3, rows).astype(np.int32)

    def loss_fn(model, x, y):
        logits = model(x, training=True)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))

    return model, (x, y), loss_fn


def transformer(rows=4, seed=3):
    """Token embedding, one self-attention block (multi-head attention, residual, layer norm, feed-forward),
    mean over the sequence, Dense; softmax cross-entropy on integer labels."""
    tokens = keras.Input((6,), dtype="int32")
    h = keras.layers.Embedding(12, 8)(tokens)
    a = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(h, h)
    h = keras.layers.LayerNormalization()(h + a)
    f = keras.layers.Dense(8)(keras.layers.Dense(16, activation="relu")(h))
    h = keras.layers.LayerNormalization()(h + f)
    logits = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(h))
    model = keras.Model(tokens, logits)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 12, (rows, 6)).astype(np.int32)
    y = rng.integers(0, 3, rows).astype(np.int32)

    def loss_fn(model, x, y):
        logits = model(x, training=True)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))

    return model, (x, y), loss_fn


def lstm(rows=4, seed=4):
    """LSTM(4) over 5 steps of 3 features, Dense(2); mean squared error."""
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4), keras.layers.Dense(2)])
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 5, 3)).astype(np.float32)
    y = rng.standard_normal((rows, 2)).astype(np.float32)

    def loss_fn(model, x, y):
        return tf.reduce_mean(tf.square(model(x, training=True) - y))

    return model, (x, y), loss_fn


def gpt2(rows=2, seed=5):
    """keras-hub's GPT2Backbone, tiny from its constructor (dropout 0, no preset weights), with a Dense
    next-token head; softmax cross-entropy on the next token."""
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=16,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        dropout=0.0,
        max_sequence_length=6,
    )
    ids = keras.Input((6,), dtype="int32", name="token_ids")
    mask = keras.Input((6,), dtype="int32", name="padding_mask")
    hidden = backbone({"token_ids": ids, "padding_mask": mask})
    model = keras.Model([ids, mask], keras.layers.Dense(16)(hidden))
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 16, (rows, 6)).astype(np.int32)
    y = np.roll(x, -1, axis=1)

    def loss_fn(model, x, y):
        logits = model([x, tf.ones_like(x)], training=True)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))

    return model, (x, y), loss_fn


MODELS = {"mlp": mlp, "cnn": cnn, "transformer": transformer, "lstm": lstm, "gpt2": gpt2}


def build(name, **batch):
    """The model, its batch and the tf.Module that carries train_step, built from a fresh Keras session
    (`batch`: the model function's `rows` and `seed`, for another batch of the same model)."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(0)
    model, (x, y), loss_fn = MODELS[name](**batch)
    optimizer = keras.optimizers.Adam(learning_rate=0.01)
    optimizer.build(model.trainable_variables)
    spec = [tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)), tf.TensorSpec(y.shape, tf.as_dtype(y.dtype))]

    class Trainer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.optimizer = optimizer

        @tf.function(input_signature=spec)
        def train_step(self, x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(self.model, x, y)
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
            return loss

    return Trainer(), (x, y)


def variables(trainer):
    """Every variable the step uses, by path (Keras) = SavedModel name."""
    return {v.path: v for v in trainer.model.variables + trainer.optimizer.variables}


def enc(value):
    a = np.asarray(value)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "values": a.reshape(-1).tolist()}


def checkpoint_keys(directory):
    """Variable name -> checkpoint key, from the SavedModel's object graph and its checkpoint's."""
    from tensorflow.core.protobuf import saved_model_pb2, trackable_object_graph_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(directory, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    objects = saved.meta_graphs[0].object_graph_def.nodes
    reader = tf.train.load_checkpoint(os.path.join(directory, "variables", "variables"))
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    keys = {}
    for i, obj in enumerate(objects):
        if obj.WhichOneof("kind") == "variable":
            for attr in graph.nodes[i].attributes:
                if attr.name == "VARIABLE_VALUE":
                    keys[obj.variable.name] = attr.checkpoint_key
    return keys


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=1)
        f.write("\n")


def make(name):
    trainer, (x, y) = build(name)
    out = os.path.join(OUT, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    saved = os.path.join(out, "saved_model")
    tf.saved_model.save(trainer, saved)
    concrete = trainer.train_step.get_concrete_function()
    with open(os.path.join(out, "concrete.pb"), "wb") as f:
        f.write(concrete.graph.as_graph_def().SerializeToString(deterministic=True))
    by_id = {id(v.value.handle if hasattr(v, "value") else v.handle): path for path, v in variables(trainer).items()}
    feeds = {"x": x.tolist(), "y": y.tolist()}
    write_json(os.path.join(out, "feeds.json"), feeds)
    concrete_feeds = dict(feeds)
    concrete_names = {}
    for outer, inner in concrete.graph.captures:
        path = by_id.get(id(outer))
        if path is None:
            sys.exit(f"{name}: capture {inner.name} is no variable of the model or optimizer")
        concrete_feeds[inner.op.name] = variables(trainer)[path].numpy().tolist()
        concrete_names[inner.op.name] = path
    write_json(os.path.join(out, "concrete_feeds.json"), concrete_feeds)
    initial = {path: v.numpy() for path, v in variables(trainer).items()}
    losses = [float(trainer.train_step(x, y).numpy()) for _ in range(STEPS)]
    keys = checkpoint_keys(saved)
    expected = {
        "steps": STEPS,
        "losses": losses,
        "concrete_names": concrete_names,
        "variables": {
            path: {"checkpoint_key": keys[path], "initial": enc(initial[path]), "final": enc(v.numpy())}
            for path, v in variables(trainer).items()
            if path in keys  # Keras' seed generators are not saved (the step reads no random state)
        },
    }
    write_json(os.path.join(out, "expected.json"), expected)
    print(name, "losses", losses)


def make_data_parallel(name, replicas=4):
    """TF's numbers for the global batch that `--data-parallel REPLICAS` splits."""
    traced, (x, _) = build(name)
    rows = replicas * x.shape[0]
    trainer, (gx, gy) = build(name, rows=rows, seed=100)
    out = os.path.join(OUT, name)
    write_json(os.path.join(out, f"dp{replicas}_feeds.json"), {"x": gx.tolist(), "y": gy.tolist()})
    losses = [float(trainer.train_step(gx, gy).numpy()) for _ in range(STEPS)]
    keys = checkpoint_keys(os.path.join(out, "saved_model"))
    expected = {
        "steps": STEPS,
        "losses": losses,
        "variables": {path: enc(v.numpy()) for path, v in variables(trainer).items() if path in keys},
    }
    write_json(os.path.join(out, f"dp{replicas}_expected.json"), expected)
    print(name, f"global batch of {rows}: losses", losses)


# The models `--data-parallel 4` is tested on (dp4_*.json).
DATA_PARALLEL = ("mlp", "cnn", "transformer", "lstm", "gpt2")

if __name__ == "__main__":
    args = sys.argv[1:]
    only_dp = "--data-parallel-only" in args
    names = [a for a in args if a != "--data-parallel-only"] or list(MODELS)
    for name in names:
        if not only_dp:
            make(name)
        if name in DATA_PARALLEL:
            make_data_parallel(name)
