"""Writes tests/tf/corpus/keras/: Keras (tf_keras 2.21) training steps under tpu.replicate, with TF's numbers.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/corpus_keras.py [CASE...]

Each case is a model, a Keras loss and a Keras optimizer (or a tf.compat.v1 step: the *Setup
classes), built in graph mode the TPUEstimator-era way: the model and the optimizer's slots are made outside the replicated step, the step computes
the loss, takes tf.gradients, averages them over the replicas with cross_replica_sum (as
CrossShardOptimizer does) and applies them with the Keras optimizer. Layer updates (batch-norm
moving statistics) run with the step.

The files are make_corpus.py's formats (see its docstring) for a replicated case with variables:
NAME.pbtxt (or NAME.pb when the text would be large), NAME.tags.json, and NAME.json whose
"runs" fetch every replica's loss of the last step (output_0_shard_{r}:0) and, where the case has
metrics, their values (output_{k}_shard_{r}:0, k >= 1), "steps" says how many
steps run, and "variables_after" holds every replica's copy of each variable the step reads or
writes after them. The graph is pruned to what a session runs: the step and the initialisers.

Initial values: every variable (weights, slots, hyper-parameters) is created with a constant, the
value its own Keras initializer gives in a separate session, so the graph needs no random op and
TF's reference run and the replicated graph start from the same numbers. TF cannot run
tpu.replicate on CPU; its numbers come from a plain graph that runs the same model on each
replica's batch, averages the gradients and applies them once per step.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from make_corpus import enc, f32, rng, tf, tf1  # noqa: E402
import numpy as np  # noqa: E402
import tf_keras as keras  # noqa: E402
from tf_keras.src.applications import efficientnet, efficientnet_v2  # noqa: E402
from tensorflow.python.tpu import tpu  # noqa: E402
from tensorflow.python.tpu.ops import tpu_ops  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "keras")
# Graphs whose text is larger than this are written as binary GraphDefs.
PBTXT_LIMIT = 2_000_000


# Variables with more elements than this start from `spread`, not from a constant.
CONSTANT_LIMIT = 4096


def spread(shape, scale, seed):
    """A deterministic pseudo-random tensor made in the graph: uniform on [-scale, scale] from a
    quadratic residue sequence of int64 element indices. Every step of it is exact but the one
    multiplication by `scale`, and its one other constant is a power of two, so no rewrite of the
    arithmetic changes a bit (with `h / 32760 - 1`, TensorFlow's session, whose graph optimizer
    rewrites it, gave other values than the graph's ops in 14427 of 23104 elements): TensorFlow
    and both backends compute the same values. It keeps the graphs of large models small (no
    constant holds their weights)."""
    n = int(np.prod(shape))
    i = tf.range(n, dtype=tf.int64)
    h = tf.math.floormod(i * i * 31 + i * 7919 + seed, 65521)
    u = tf.cast(h - 32760, tf.float32) * (1.0 / 32768.0)
    return tf.reshape(u * scale, shape)


class Initial:
    """Gives every variable an initial value independent of random ops: its Keras initializer's
    value, computed once, as a constant; or, for variables of more than CONSTANT_LIMIT elements,
    `spread` with the standard deviation of that value."""

    def __init__(self):
        self.values = {}

    def creator(self, next_creator, **kwargs):
        name = kwargs.get("name") or "var"
        key = tf1.get_default_graph().unique_name(name, mark_as_used=False)
        if key not in self.values:
            init = kwargs["initial_value"]
            if isinstance(init, tf.Tensor):
                # A tensor of this graph (the new optimizers' slots): its value must be constant.
                init = tf.get_static_value(init)
                assert init is not None, f"{name}: the initial value is not a constant"
            with tf.Graph().as_default():
                # tf_keras draws an unseeded initializer's op seed from Python's `random`:
                # seeding it too makes every run of this script write the same files.
                keras.utils.set_random_seed(len(self.values))
                tf1.set_random_seed(len(self.values))
                t = init() if callable(init) else tf.convert_to_tensor(init)
                with tf1.Session() as sess:
                    value = sess.run(t)
            if value.size > CONSTANT_LIMIT and value.dtype == np.float32:
                args = (value.shape, float(np.std(value) * np.sqrt(3.0)), len(self.values))
                value = lambda: spread(*args)  # noqa: E731
            self.values[key] = value
        value = self.values[key]
        if kwargs.get("dtype") is not None and tf.as_dtype(kwargs["dtype"]) == tf.float64:
            # A float64 model starts from its float32 build's values, exactly widened.
            if callable(value):
                value = (lambda v: lambda: tf.cast(v(), tf.float64))(value)
            elif value.dtype == np.float32:
                value = value.astype(np.float64)
        kwargs["initial_value"] = value
        return next_creator(**kwargs)


class KerasSetup:
    """A Keras model, loss and optimizer (clipping, schedules and loss scaling are the optimizer's)."""

    def __init__(self, make_model, make_loss, make_opt, metrics=()):
        self.make_model, self.make_loss, self.make_opt = make_model, make_loss, make_opt
        self.metrics = metrics

    def build(self, initial):
        """Makes the model, the optimizer and every variable in the current graph."""
        with tf1.variable_creator_scope(initial.creator):
            self.model = self.make_model()
            self.opt = self.make_opt()
            if hasattr(self.opt, "_create_all_weights"):
                self.opt._create_all_weights(self.model.trainable_variables)
            else:
                self.opt.build(self.model.trainable_variables)
            self.opt.iterations  # noqa: B018  (made here, not inside the step)
        self.loss_fn = self.make_loss()
        self.trainable = self.model.trainable_variables
        self.moving = self.model.non_trainable_variables

    def forward(self, x, y):
        """The loss, its gradients and the layers' updates of one batch."""
        pred = self.model(x, training=True)
        loss = self.loss_fn(y, pred)
        grads = tf.gradients(loss, self.trainable)
        updates = self.model.get_updates_for(x) + self.model.get_updates_for(None)
        # Metrics are further outputs of the step: each one's batch mean.
        self.metric_values = [tf.reduce_mean(m(y, pred)) for m in self.metrics]
        return loss, grads, updates

    def apply(self, grads):
        return self.opt.apply_gradients(zip(grads, self.trainable))


def step_graph(graph, outputs, variables):
    """The GraphDef pruned to what a session runs: the replicated step's outputs, the cluster's
    metadata and the variables' initialisers. Keras's symbolic model construction leaves ops
    outside the step (layers called on keras.Input, batch-norm updates under the learning phase)
    that no run executes; they are dropped."""
    keep = [t.op.name for t in outputs] + [v.initializer.name for v in variables]
    keep += [op.name for op in graph.get_operations() if op.type in ("TPUReplicateMetadata", "TPUCompilationResult")]
    return tf1.graph_util.extract_sub_graph(graph.as_graph_def(), keep)


def write_graph(name, graph_def):
    text = str(graph_def)
    os.makedirs(OUT, exist_ok=True)
    for ext in (".pbtxt", ".pb"):
        path = os.path.join(OUT, name + ext)
        if os.path.exists(path):
            os.remove(path)
    if len(text) <= PBTXT_LIMIT:
        with open(os.path.join(OUT, name + ".pbtxt"), "w") as f:
            f.write(text)
    else:
        with open(os.path.join(OUT, name + ".pb"), "wb") as f:
            f.write(graph_def.SerializeToString(deterministic=True))


def keras_case(name, make_model, make_loss, make_opt, batches, metrics=(), **kwargs):
    """A Keras model, loss and optimizer, and metric functions (y, pred) -> values whose means the
    step also returns; see `replicated_training`."""
    replicated_training(name, lambda: KerasSetup(make_model, make_loss, make_opt, metrics), batches, **kwargs)


def replicated_training(name, make_setup, batches, steps=2, rtol=1e-4, largest=None, initial=None):
    """Writes case `name`: `batches` holds one (x, y) per replica. With `largest`, only variables of
    at most that many elements are recorded (keeps the files of large models small). `initial`
    gives the variables' values where a caller has made them (see `Initial`)."""
    num_replicas = len(batches)
    initial = initial or Initial()

    # The replicated graph.
    g = tf.Graph()
    with g.as_default():
        setup = make_setup()
        setup.build(initial)

        def step(x, y):
            loss, grads, updates = setup.forward(x, y)
            grads = [tpu_ops.cross_replica_sum(gr) / num_replicas for gr in grads]
            train = setup.apply(grads)
            with tf.control_dependencies([train] + updates):
                return [tf.identity(loss)] + [tf.identity(m) for m in getattr(setup, "metric_values", [])]

        ph = [
            [tf1.placeholder(tf.as_dtype(v.dtype), v.shape, name=f"in{k}_{r}") for k, v in enumerate(batch)]
            for r, batch in enumerate(batches)
        ]
        outputs = tpu.replicate(step, ph)
        # Every variable: the setup's and the optimizer's hyper-parameters.
        handles = [v.handle.op.name for v in tf1.global_variables()]
        graph_def = step_graph(g, [t for replica in outputs for t in replica], tf1.global_variables())

    # TensorFlow's numbers: the same model in a plain graph, gradients averaged by hand.
    pg = tf.Graph()
    with pg.as_default():
        setup = make_setup()
        setup.build(initial)
        variables, moving = tf1.global_variables(), setup.moving
        assert [v.handle.op.name for v in variables] == handles, "both graphs name the variables alike"
        losses, grads, updates = [], [], []
        for x, y in batches:
            loss, gr, up = setup.forward(tf.constant(x), tf.constant(y))
            losses.append([loss] + list(getattr(setup, "metric_values", [])))
            grads.append(gr)
            updates.append(up)
        mean = [tf.add_n(list(gs)) / num_replicas for gs in zip(*grads)]
        with tf.control_dependencies([t for ts in losses for t in ts] + [g for gs in grads for g in gs]):
            train = setup.apply(mean)
        # Layer updates (moving statistics) differ by replica: each replica keeps its own copy.
        with tf1.Session(graph=pg) as sess:
            sess.run(tf1.global_variables_initializer())
            copies = [sess.run(moving)] * num_replicas
            for _ in range(steps):
                for r in range(num_replicas):
                    if updates[r]:
                        for v, value in zip(moving, copies[r]):
                            v.load(value, sess)
                        sess.run(updates[r])
                        copies[r] = sess.run(moving)
                got, _ = sess.run([losses, train])
            after = sess.run([v.read_value() for v in variables])
        per_replica = {id(v): [c[k] for c in copies] for k, v in enumerate(moving)}
        after = [per_replica.get(id(v), [value] * num_replicas) for v, value in zip(variables, after)]

    meta = {
        "kind": "replicated",
        "num_replicas": num_replicas,
        "steps": steps,
        "feeds": {f"in{k}_{r}:0": enc(v) for r, batch in enumerate(batches) for k, v in enumerate(batch)},
        "runs": [{
            "targets": [],
            "fetches": {f"output_{k}_shard_{r}:0": enc(v) for r, vs in enumerate(got) for k, v in enumerate(vs)},
        }],
        "variables_after": {
            h: [enc(c) for c in cs] for h, cs in zip(handles, after) if largest is None or cs[0].size <= largest
        },
        "rtol": rtol,
    }
    tags = {}
    # The variables the step reads or writes (the others stay on the host, untouched by the step).
    in_step = {i.split(":")[0].lstrip("^") for n in graph_def.node if "_tpu_replicate" in n.attr for i in n.input}
    meta["variables_after"] = {h: v for h, v in meta["variables_after"].items() if h in in_step}
    for node in graph_def.node:
        entry = {"op": node.op}
        if "_tpu_replicate" in node.attr:
            entry["R"] = node.attr["_tpu_replicate"].s.decode()
        if "_xla_outside_compilation" in node.attr:
            entry["OC"] = node.attr["_xla_outside_compilation"].s.decode()
        tags[node.name] = entry
    write_graph(name, graph_def)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(meta, f, indent=None, separators=(",", ":"))
        f.write("\n")
    with open(os.path.join(OUT, name + ".tags.json"), "w") as f:
        json.dump(tags, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", name, file=sys.stderr)


def labels(seed, n, classes):
    return rng(seed).integers(0, classes, n).astype(np.int32)


def onehot(seed, n, classes):
    return np.eye(classes, dtype=np.float32)[labels(seed, n, classes)]


L = keras.layers


def dense_adam():
    """A Dense model trained by Keras Adam with sparse categorical cross-entropy."""
    keras_case(
        "dense_adam",
        lambda: keras.Sequential([L.Dense(8, activation="relu", input_shape=(5,)), L.Dense(3)]),
        lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        lambda: keras.optimizers.legacy.Adam(0.01),
        [(f32(200 + r, 4, 5), labels(210 + r, 4, 3)) for r in range(2)],
    )


def conv_batchnorm():
    """Conv2D + BatchNormalization + max and average pooling, SGD with momentum."""

    def model():
        return keras.Sequential([
            L.Conv2D(4, 3, padding="same", input_shape=(6, 6, 2)),
            L.BatchNormalization(),
            L.ReLU(),
            L.MaxPooling2D(2),
            L.Conv2D(3, 2),
            L.GlobalAveragePooling2D(),
            L.Dense(3, activation="softmax"),
        ])

    keras_case(
        "conv_batchnorm",
        model,
        lambda: keras.losses.CategoricalCrossentropy(),
        lambda: keras.optimizers.legacy.SGD(0.05, momentum=0.9),
        [(f32(220 + r, 2, 6, 6, 2), onehot(230 + r, 2, 3)) for r in range(2)],
    )


def lstm_classifier():
    """An Embedding + LSTM text classifier, RMSprop, binary cross-entropy."""

    def model():
        return keras.Sequential([
            L.Embedding(10, 4, input_length=5),
            L.LSTM(6),
            L.Dense(1, activation="sigmoid"),
        ])

    keras_case(
        "lstm_classifier",
        model,
        lambda: keras.losses.BinaryCrossentropy(),
        lambda: keras.optimizers.legacy.RMSprop(0.01),
        [(labels(240 + r, 15, 10).reshape(3, 5), rng(250 + r).integers(0, 2, (3, 1)).astype(np.float32))
         for r in range(2)],
    )


def gru_classifier():
    """An Embedding + GRU classifier returning sequences, pooled, Adagrad."""

    def model():
        return keras.Sequential([
            L.Embedding(10, 4, input_length=5),
            L.GRU(6, return_sequences=True),
            L.GlobalMaxPooling1D(),
            L.Dense(3),
        ])

    keras_case(
        "gru_classifier",
        model,
        lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        lambda: keras.optimizers.legacy.Adagrad(0.1),
        [(labels(260 + r, 15, 10).reshape(3, 5), labels(270 + r, 3, 3)) for r in range(2)],
    )


def conv1d_text():
    """A Conv1D text model: Embedding, Conv1D, global max pooling, Nadam."""

    def model():
        return keras.Sequential([
            L.Embedding(12, 4, input_length=8),
            L.Conv1D(5, 3, activation="relu"),
            L.MaxPooling1D(2),
            L.Conv1D(4, 2, activation="tanh"),
            L.GlobalMaxPooling1D(),
            L.Dense(2),
        ])

    keras_case(
        "conv1d_text",
        model,
        lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        lambda: keras.optimizers.legacy.Nadam(0.01),
        [(labels(280 + r, 16, 12).reshape(2, 8), labels(290 + r, 2, 2)) for r in range(2)],
    )


def transformer_encoder():
    """MultiHeadAttention + LayerNormalization + Dense feed-forward, mean squared error, AdamW-style Adam."""

    def model():
        x = keras.Input((4, 8))
        a = L.MultiHeadAttention(num_heads=2, key_dim=4)(x, x)
        h = L.LayerNormalization()(x + a)
        f = L.Dense(16, activation="gelu")(h)
        f = L.Dense(8)(f)
        h = L.LayerNormalization()(h + f)
        out = L.Dense(2)(L.GlobalAveragePooling1D()(h))
        return keras.Model(x, out)

    keras_case(
        "transformer_encoder",
        model,
        lambda: keras.losses.MeanSquaredError(),
        lambda: keras.optimizers.legacy.Adam(0.01, amsgrad=True),
        [(f32(300 + r, 2, 4, 8), f32(310 + r, 2, 2)) for r in range(2)],
    )


def mobilenet_v2():
    """keras.applications.MobileNetV2 at 32x32, weights=None, 4 classes, SGD."""
    keras_case(
        "mobilenet_v2",
        lambda: keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=4),
        lambda: keras.losses.CategoricalCrossentropy(),
        lambda: keras.optimizers.legacy.SGD(0.01),
        [(f32(320 + r, 1, 32, 32, 3), onehot(330 + r, 1, 4)) for r in range(2)],
        steps=1,
        rtol=1e-3,
        largest=300,
    )


class TF1AdamSetup:
    """A tf.compat.v1 training step: Adam with an exponential_decay learning rate, global-norm
    clipping and the int64 global step that apply_gradients increments."""

    def build(self, initial):
        with tf1.variable_creator_scope(initial.creator):
            init = tf1.glorot_uniform_initializer()
            self.trainable = [
                tf1.get_variable("w1", [4, 6], initializer=init, use_resource=True),
                tf1.get_variable("b1", [6], initializer=tf1.zeros_initializer(), use_resource=True),
                tf1.get_variable("w2", [6, 3], initializer=init, use_resource=True),
            ]
            self.global_step = tf1.train.get_or_create_global_step()
            step = self.global_step
            # A callable: the learning rate is computed inside the step, from the step's global step.
            lr = lambda: tf1.train.exponential_decay(0.05, step, decay_steps=1, decay_rate=0.7)  # noqa: E731
            self.opt = tf1.train.AdamOptimizer(lr)
            self.opt._create_slots(self.trainable)
        self.moving = []

    def forward(self, x, y):
        w1, b1, w2 = self.trainable
        logits = tf.matmul(tf.tanh(tf.matmul(x, w1) + b1), w2)
        loss = tf1.losses.sparse_softmax_cross_entropy(y, logits * 3.0)
        return loss, tf.gradients(loss, self.trainable), []

    def apply(self, grads):
        clipped, _ = tf.clip_by_global_norm(grads, 0.5)
        return self.opt.apply_gradients(zip(clipped, self.trainable), global_step=self.global_step)


def tf1_adam_decay_clip():
    """Section 4's step: tf.train Adam, exponential_decay, clip_by_global_norm, int64 global step."""
    replicated_training(
        "tf1_adam_decay_clip", TF1AdamSetup, [(f32(400 + r, 5, 4), labels(410 + r, 5, 3)) for r in range(2)], steps=3
    )


class TF1LoopSetup:
    """A recurrent cell run by a control-flow-v1 tf.while_loop with a tf.cond in its body; the body
    reads the cell's variables. The readout after the loop trains by tf.gradients with SGD (the
    loop's own gradient needs TF1 stack accumulators, which the simulator does not run)."""

    def build(self, initial):
        with tf1.variable_creator_scope(initial.creator):
            init = tf1.glorot_uniform_initializer()
            self.cell = [
                tf1.get_variable("w", [3, 4], initializer=init, use_resource=True),
                tf1.get_variable("u", [4, 4], initializer=init, use_resource=True),
            ]
            self.trainable = [tf1.get_variable("v", [4, 2], initializer=init, use_resource=True)]
        self.moving = []

    def forward(self, x, y):
        w, u = self.cell
        steps = x.shape[1]

        def body(t, h):
            xt = tf.gather(x, t, axis=1)
            h2 = tf.tanh(tf.matmul(xt, w.read_value()) + tf.matmul(h, u.read_value()))
            h2 = tf.cond(tf.equal(t % 2, 0), lambda: h2 * 0.9, lambda: h2 + 0.1)
            return [t + 1, h2]

        _, h = tf1.while_loop(lambda t, h: t < steps, body, [tf.constant(0), tf.zeros([x.shape[0], 4])])
        loss = tf.reduce_mean(tf.square(tf.matmul(h, self.trainable[0]) - y))
        return loss, tf.gradients(loss, self.trainable), []

    def apply(self, grads):
        return tf.group(*[t.assign_sub(0.5 * g) for t, g in zip(self.trainable, grads)])


def tf1_while_cond():
    """Section 4: a control-flow-v1 while_loop and cond inside tpu.replicate, trained through."""
    tf1.disable_control_flow_v2()
    try:
        replicated_training(
            "tf1_while_cond", TF1LoopSetup, [(f32(460 + r, 2, 3, 3), f32(470 + r, 2, 2)) for r in range(2)], steps=2
        )
    finally:
        tf1.enable_control_flow_v2()


def small_dense(outputs=3, activation=None):
    return lambda: keras.Sequential([L.Dense(6, activation="tanh", input_shape=(4,)), L.Dense(outputs, activation)])


def optimizer_case(name, make_opt, steps=3):
    keras_case(
        name,
        small_dense(),
        lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        make_opt,
        [(f32(420 + r, 4, 4), labels(430 + r, 4, 3)) for r in range(2)],
        steps=steps,
    )


def optimizers():
    """Every optimizer of tf_keras 2.21 that lowers to a fused update, and the clipping options."""
    O = keras.optimizers.legacy
    optimizer_case("opt_sgd_nesterov", lambda: O.SGD(0.1, momentum=0.8, nesterov=True))
    optimizer_case("opt_adamax", lambda: O.Adamax(0.05))
    optimizer_case("opt_adadelta", lambda: O.Adadelta(1.0))
    optimizer_case("opt_rmsprop_centered", lambda: O.RMSprop(0.01, momentum=0.5, centered=True))
    optimizer_case("opt_adam_clipnorm", lambda: O.Adam(0.05, clipnorm=0.1))
    optimizer_case("opt_sgd_clipvalue", lambda: O.SGD(0.5, clipvalue=0.05))
    optimizer_case("opt_adam_global_clipnorm", lambda: O.Adam(0.05, global_clipnorm=0.1))
    optimizer_case(
        "opt_schedule_exponential",
        lambda: O.SGD(keras.optimizers.schedules.ExponentialDecay(0.5, decay_steps=1, decay_rate=0.5)),
    )
    optimizer_case(
        "opt_schedule_cosine",
        lambda: O.Adam(keras.optimizers.schedules.CosineDecay(0.1, decay_steps=4, alpha=0.1)),
    )


def losses():
    """Every regression, probabilistic and hinge loss of Keras, summed, on one model."""
    K = keras.losses

    def loss():
        parts = [
            K.MeanSquaredError(), K.MeanAbsoluteError(), K.MeanAbsolutePercentageError(),
            K.MeanSquaredLogarithmicError(), K.Huber(delta=0.5), K.LogCosh(), K.KLDivergence(), K.Poisson(),
            K.CosineSimilarity(), K.Hinge(), K.SquaredHinge(), K.CategoricalHinge(), K.BinaryCrossentropy(),
            K.BinaryFocalCrossentropy(gamma=2.0), K.CategoricalCrossentropy(label_smoothing=0.1),
        ]
        return lambda y, p: tf.add_n([f(y, p) for f in parts])

    keras_case(
        "losses",
        small_dense(3, "sigmoid"),
        loss,
        lambda: keras.optimizers.legacy.SGD(0.1),
        [(f32(440 + r, 4, 4), rng(450 + r).uniform(0.05, 0.95, (4, 3)).astype(np.float32)) for r in range(2)],
    )


def application(name, make_model, size=32, batch=1, floatx="float32", **kwargs):
    """A keras.applications family at a small input, weights=None, 4 classes, one step of SGD. With
    floatx float64 the whole model (weights, slots, inputs) is float64 and starts from the float32
    model's initial values, widened: the same step, computed in float64."""
    make_loss = lambda: keras.losses.CategoricalCrossentropy()  # noqa: E731
    make_opt = lambda: keras.optimizers.legacy.SGD(0.01)  # noqa: E731
    batches = [(f32(340 + r, batch, size, size, 3), onehot(350 + r, batch, 4)) for r in range(2)]
    initial = Initial()
    if floatx == "float64":
        # The float32 build fills `initial` with its values (keyed by variable name, alike per graph).
        with tf.Graph().as_default():
            KerasSetup(make_model, make_loss, make_opt).build(initial)
        batches = [tuple(a.astype(np.float64) for a in batch) for batch in batches]
    keras.backend.set_floatx(floatx)
    try:
        keras_case(
            name,
            make_model,
            make_loss,
            make_opt,
            batches,
            steps=1,
            rtol=kwargs.pop("rtol", 1e-3),
            largest=300,
            initial=initial,
            **kwargs,
        )
    finally:
        keras.backend.set_floatx("float32")


A = keras.applications
# keras.applications families at a small input and width (MobileNetV2 is `mobilenet_v2`). Top dropout
# is off: Keras's unseeded dropout is a stateful RandomUniform, whose stream neither backend follows.
APPLICATIONS = {
    "app_mobilenet": lambda: A.MobileNet(input_shape=(32, 32, 3), alpha=0.25, weights=None, classes=4, dropout=0.0),
    "app_mobilenet_v3_small": lambda: A.MobileNetV3Small(
        input_shape=(32, 32, 3), alpha=0.75, weights=None, classes=4, dropout_rate=0.0
    ),
    # EfficientNetB0's widths and depths; its constructor fixes the top dropout, so it is built directly.
    "app_efficientnet_b0": lambda: efficientnet.EfficientNet(
        1.0, 1.0, 224, 0.0, drop_connect_rate=0.0, model_name="efficientnetb0",
        input_shape=(32, 32, 3), weights=None, classes=4,
    ),
    # EfficientNetV2B0's widths and depths, built directly for the same reason (and its stochastic depth).
    "app_efficientnet_v2_b0": lambda: efficientnet_v2.EfficientNetV2(
        1.0, 1.0, 224, dropout_rate=0.0, drop_connect_rate=0.0, model_name="efficientnetv2-b0",
        input_shape=(32, 32, 3), weights=None, classes=4,
    ),
    "app_resnet50_v2": lambda: A.ResNet50V2(input_shape=(32, 32, 3), weights=None, classes=4),
    "app_densenet121": lambda: A.DenseNet121(input_shape=(32, 32, 3), weights=None, classes=4),
    "app_inception_v3": lambda: A.InceptionV3(input_shape=(75, 75, 3), weights=None, classes=4),
    "app_xception": lambda: A.Xception(input_shape=(71, 71, 3), weights=None, classes=4),
    "app_nasnet_mobile": lambda: A.NASNetMobile(input_shape=(64, 64, 3), weights=None, classes=4),
    "app_convnext_tiny": lambda: A.ConvNeXtTiny(input_shape=(32, 32, 3), weights=None, classes=4),
    "app_regnet_x002": lambda: A.RegNetX002(input_shape=(64, 64, 3), weights=None, classes=4),
    "app_vgg16": lambda: A.VGG16(input_shape=(32, 32, 3), weights=None, classes=4),
    "app_mobilenet_v3_large": lambda: A.MobileNetV3Large(
        input_shape=(32, 32, 3), alpha=0.75, weights=None, classes=4, dropout_rate=0.0
    ),
}
# The input side of each family that needs more than 32 (its constructor's minimum). RegNet accepts 32,
# but its last stage is then 1x1: batch norm over one image's single position gives zeros, the
# unnormalised-probability loss divides 0 by 0 and TensorFlow's loss is NaN; at 64 that stage is 2x2.
# NASNetMobile's last cells are 1x1 at 32, where batch norm over two images gives +-1 whatever its
# inputs and the gradient reaching the cells before is rounding alone; at 64 they are 2x2.
APPLICATION_SIZES = {"app_inception_v3": 75, "app_xception": 71, "app_nasnet_mobile": 64, "app_regnet_x002": 64}
# The per-replica batch of each family that needs more than one image. NASNetMobile takes two, so that
# its last cells' batch norms normalise 8 values (2x2 positions of two images), not 4.
APPLICATION_BATCHES = {"app_nasnet_mobile": 2}
# The families computed in float64 (the whole model). RegNetX002's float32 step at 64x64 is too
# ill-conditioned to compare, and NASNetMobile's turns on ReLUs whose inputs float32 rounding puts on
# either side of zero (tests/it/keras_corpus.rs says why, with keras_conditioning.py's numbers).
APPLICATION_FLOATX = {"app_regnet_x002": "float64", "app_nasnet_mobile": "float64"}


def sparse_ce():
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def conv_transpose():
    """Conv2DTranspose, DepthwiseConv2D, SeparableConv2D, average and global max pooling."""

    def model():
        return keras.Sequential([
            L.Conv2DTranspose(3, 3, strides=2, input_shape=(4, 4, 2)),
            L.DepthwiseConv2D(3, depth_multiplier=2, activation="relu"),
            L.SeparableConv2D(4, 2, padding="same"),
            L.AveragePooling2D(2),
            L.GlobalMaxPooling2D(),
            L.Dense(3),
        ])

    keras_case(
        "conv_transpose",
        model,
        sparse_ce,
        lambda: keras.optimizers.legacy.Adam(0.01),
        [(f32(500 + r, 2, 4, 4, 2), labels(510 + r, 2, 3)) for r in range(2)],
        metrics=[keras.metrics.sparse_categorical_accuracy],
    )


def conv1d_transpose():
    """Conv1DTranspose, SeparableConv1D, 1-D average pooling and global average pooling."""

    def model():
        return keras.Sequential([
            L.Conv1DTranspose(3, 3, strides=2, input_shape=(5, 2)),
            L.SeparableConv1D(4, 2, activation="relu"),
            L.AveragePooling1D(2),
            L.GlobalAveragePooling1D(),
            L.Dense(3),
        ])

    keras_case(
        "conv1d_transpose",
        model,
        sparse_ce,
        lambda: keras.optimizers.legacy.SGD(0.1),
        [(f32(520 + r, 2, 5, 2), labels(530 + r, 2, 3)) for r in range(2)],
    )


def rnn_masked():
    """Embedding with mask_zero, a Bidirectional SimpleRNN returning sequences and a masked LSTM."""

    def model():
        return keras.Sequential([
            L.Embedding(8, 3, mask_zero=True, input_length=5),
            L.Bidirectional(L.SimpleRNN(4, return_sequences=True)),
            L.LSTM(3),
            L.Dense(3),
        ])

    tokens = [labels(540 + r, 10, 8).reshape(2, 5) for r in range(2)]
    for t in tokens:
        t[:, 3:] = 0  # Padding the mask hides.
    keras_case(
        "rnn_masked",
        model,
        sparse_ce,
        lambda: keras.optimizers.legacy.RMSprop(0.01),
        [(t, labels(550 + r, 2, 3)) for r, t in enumerate(tokens)],
        metrics=[keras.metrics.sparse_categorical_accuracy],
    )


def attention():
    """Dot-product Attention (scaled) and AdditiveAttention on a query and a value sequence."""

    def model():
        x = keras.Input((6, 4))
        q = L.Dense(4)(x[:, :3])
        v = x[:, 3:]
        a = L.Attention(use_scale=True)([q, v])
        b = L.AdditiveAttention()([q, v])
        h = L.Concatenate()([a, b])
        return keras.Model(x, L.Dense(2)(L.Flatten()(h)))

    keras_case(
        "attention",
        model,
        lambda: keras.losses.CategoricalCrossentropy(from_logits=True),
        lambda: keras.optimizers.legacy.Adam(0.01),
        [(f32(560 + r, 2, 6, 4), onehot(570 + r, 2, 2)) for r in range(2)],
        metrics=[keras.metrics.categorical_accuracy],
    )


def normalization():
    """GroupNormalization and UnitNormalization."""

    def model():
        return keras.Sequential([
            L.Dense(8, input_shape=(4,)),
            L.Reshape((2, 4)),
            L.GroupNormalization(groups=2),
            L.UnitNormalization(),
            L.Flatten(),
            L.Dense(1, activation="sigmoid"),
        ])

    keras_case(
        "normalization",
        model,
        lambda: keras.losses.BinaryCrossentropy(),
        lambda: keras.optimizers.legacy.SGD(0.1),
        [(f32(580 + r, 3, 4), rng(590 + r).integers(0, 2, (3, 1)).astype(np.float32)) for r in range(2)],
        metrics=[keras.metrics.binary_accuracy],
    )


def activations():
    """The activation layers and the activation functions by name."""

    def model():
        acts = [
            L.LeakyReLU(0.2), L.PReLU(), L.ELU(0.7), L.ThresholdedReLU(0.1), L.ReLU(max_value=2.0, threshold=0.1),
            L.Activation("selu"), L.Activation("softplus"), L.Activation("softsign"), L.Activation("swish"),
            L.Activation("hard_sigmoid"), L.Activation("gelu"), L.Activation("mish"), L.Activation("relu6"),
            L.Activation("exponential"), L.Activation("tanh"), L.Softmax(),
        ]
        return keras.Sequential([L.Dense(5, input_shape=(3,))] + [x for a in acts for x in (a, L.Dense(5))])

    keras_case(
        "activations",
        model,
        sparse_ce,
        lambda: keras.optimizers.legacy.SGD(0.1),
        [(f32(600 + r, 4, 3), labels(610 + r, 4, 5)) for r in range(2)],
    )


def pooling():
    """Every 1-D and 2-D pooling layer, max and average, local and global."""

    def model():
        x = keras.Input((6, 6, 2))
        s = L.Reshape((12, 6))(x)
        parts = [
            L.Flatten()(L.MaxPooling2D(2, strides=1, padding="same")(x)),
            L.Flatten()(L.AveragePooling2D(3, strides=2, padding="same")(x)),
            L.GlobalMaxPooling2D()(x), L.GlobalAveragePooling2D()(x),
            L.Flatten()(L.MaxPooling1D(3, strides=2)(s)), L.Flatten()(L.AveragePooling1D(2, padding="same")(s)),
            L.GlobalMaxPooling1D()(s), L.GlobalAveragePooling1D()(s),
        ]
        return keras.Model(x, L.Dense(3)(L.Concatenate()(parts)))

    keras_case(
        "pooling",
        model,
        sparse_ce,
        lambda: keras.optimizers.legacy.SGD(0.1),
        [(f32(620 + r, 2, 6, 6, 2), labels(630 + r, 2, 3)) for r in range(2)],
        metrics=[keras.metrics.sparse_categorical_accuracy, lambda y, p: keras.metrics.sparse_top_k_categorical_accuracy(y, p, k=2)],
    )


def ftrl():
    """The legacy Ftrl optimizer with L1 and L2 regularisation (ResourceApplyFtrl)."""
    optimizer_case(
        "opt_ftrl",
        lambda: keras.optimizers.legacy.Ftrl(0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.01),
    )


def new_optimizers():
    """The new (non-legacy) tf_keras optimizer classes: plain variable ops, no fused update."""
    O = keras.optimizers
    optimizer_case("opt_adamw", lambda: O.AdamW(0.05, weight_decay=0.1))
    optimizer_case("opt_lion", lambda: O.Lion(0.01))
    optimizer_case("opt_adafactor", lambda: O.Adafactor(0.1))
    optimizer_case("opt_adam_new", lambda: O.Adam(0.05))


CASES = {
    "dense_adam": dense_adam,
    "conv_batchnorm": conv_batchnorm,
    "lstm_classifier": lstm_classifier,
    "gru_classifier": gru_classifier,
    "conv1d_text": conv1d_text,
    "transformer_encoder": transformer_encoder,
    "mobilenet_v2": mobilenet_v2,
    "losses": losses,
    "optimizers": optimizers,
    "tf1_adam_decay_clip": tf1_adam_decay_clip,
    "tf1_while_cond": tf1_while_cond,
    "conv_transpose": conv_transpose,
    "conv1d_transpose": conv1d_transpose,
    "rnn_masked": rnn_masked,
    "attention": attention,
    "normalization": normalization,
    "activations": activations,
    "pooling": pooling,
    "ftrl": ftrl,
    "new_optimizers": new_optimizers,
}
CASES.update({
    name: (lambda name=name: application(
        name, APPLICATIONS[name], APPLICATION_SIZES.get(name, 32), APPLICATION_BATCHES.get(name, 1),
        APPLICATION_FLOATX.get(name, "float32"),
    ))
    for name in APPLICATIONS
})


def main(cases, script):
    """Writes the cases named on the command line (default: all of `cases`), each in its own
    process when there are several: TensorFlow numbers functions and gradient types from a
    process-wide counter, so a case made after others would get other names."""
    wanted = sys.argv[1:] or list(cases)
    if len(wanted) == 1:
        cases[wanted[0]]()
    else:
        for case in wanted:
            subprocess.run([sys.executable, script, case], check=True)


if __name__ == "__main__":
    main(CASES, __file__)
