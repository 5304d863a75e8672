"""Writes tests/tf/corpus/keras_more/: more Keras (tf_keras 2.21) training steps under tpu.replicate, with TF's numbers.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/corpus_keras_more.py [CASE...]

The cases are built exactly as corpus_keras.py builds its own (its `keras_case` and
`replicated_training`, whose docstring describes the graph and the files), and written to their own
directory: volumetric convolution and pooling, the learning-rate schedules and the losses that
corpus_keras.py does not cover, mixed_bfloat16 with loss scaling, and (`keras3_optimizers`, see
there) the Keras 3 optimizers.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


# Keras 3 (`tf.keras` in TF 2.21) optimizers. Keras 3 builds no TF1 graph: its optimizers need eager
# execution or a tf.function, so a `tpu.replicate` graph cannot be made with them. Each case is the
# TF2 user's artifact instead, as tests/tf/corpus_tf2.py writes it: a SavedModel whose `train_step`
# tf.function applies the optimizer, the batch, and TensorFlow's losses and final variables.
KERAS3 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "keras_more", "keras3")
KERAS3_STEPS = 3


def keras3_optimizers():
    """One SavedModel per Keras 3 optimizer (and option) on a small Dense model."""
    import shutil

    import corpus_tf2
    import keras as keras3
    import numpy as np
    import tensorflow as tf

    O = keras3.optimizers
    optimizers = {
        "sgd_momentum": lambda: O.SGD(0.1, momentum=0.8),
        "sgd_nesterov": lambda: O.SGD(0.1, momentum=0.8, nesterov=True),
        "adam": lambda: O.Adam(0.05),
        "adam_amsgrad": lambda: O.Adam(0.05, amsgrad=True),
        "adamw": lambda: O.AdamW(0.05, weight_decay=0.1),
        "adamax": lambda: O.Adamax(0.05),
        "nadam": lambda: O.Nadam(0.05),
        "rmsprop_centered": lambda: O.RMSprop(0.01, momentum=0.5, centered=True),
        "adagrad": lambda: O.Adagrad(0.1),
        "adadelta": lambda: O.Adadelta(1.0),
        "ftrl": lambda: O.Ftrl(0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.01),
        "lion": lambda: O.Lion(0.01),
        "adafactor": lambda: O.Adafactor(0.1),
        "sgd_clipnorm_schedule": lambda: O.SGD(O.schedules.ExponentialDecay(0.5, 1, 0.5), clipnorm=0.1),
        "adam_global_clipnorm": lambda: O.Adam(0.05, global_clipnorm=0.1),
        "sgd_clipvalue": lambda: O.SGD(0.5, clipvalue=0.05),
    }
    for name, make_opt in optimizers.items():
        keras3.backend.clear_session()
        keras3.utils.set_random_seed(0)
        model = keras3.Sequential([
            keras3.Input((4,)), keras3.layers.Dense(6, activation="tanh"), keras3.layers.Dense(3),
        ])
        rng = np.random.default_rng(780)
        x = rng.standard_normal((4, 4)).astype(np.float32)
        y = rng.integers(0, 3, 4).astype(np.int32)
        optimizer = make_opt()
        optimizer.build(model.trainable_variables)
        spec = [tf.TensorSpec(x.shape, tf.float32), tf.TensorSpec(y.shape, tf.int32)]

        class Trainer(tf.Module):
            def __init__(self):
                super().__init__()
                self.model, self.optimizer = model, optimizer

            @tf.function(input_signature=spec)
            def train_step(self, x, y):
                with tf.GradientTape() as tape:
                    logits = self.model(x, training=True)
                    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
                grads = tape.gradient(loss, self.model.trainable_variables)
                self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
                return loss

        trainer = Trainer()
        out = os.path.join(KERAS3, name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        saved = os.path.join(out, "saved_model")
        tf.saved_model.save(trainer, saved)
        corpus_tf2.write_json(os.path.join(out, "feeds.json"), {"x": x.tolist(), "y": y.tolist()})
        variables = {v.path: v for v in model.variables + optimizer.variables}
        losses = [float(trainer.train_step(x, y).numpy()) for _ in range(KERAS3_STEPS)]
        keys = corpus_tf2.checkpoint_keys(saved)
        expected = {
            "steps": KERAS3_STEPS,
            "losses": losses,
            "variables": {
                path: {"checkpoint_key": keys[path], "final": corpus_tf2.enc(v.numpy())}
                for path, v in variables.items()
                if path in keys
            },
        }
        corpus_tf2.write_json(os.path.join(out, "expected.json"), expected)
        print("wrote keras3", name, losses, file=sys.stderr)


if __name__ == "__main__" and sys.argv[1:] == ["--keras3"]:
    keras3_optimizers()
    sys.exit(0)

import corpus_keras  # noqa: E402
from corpus_keras import L, keras, keras_case, labels, onehot, optimizer_case, small_dense, sparse_ce  # noqa: E402
from make_corpus import f32, rng, tf  # noqa: E402
import numpy as np  # noqa: E402

# corpus_keras's writers read their directory from this module global.
corpus_keras.OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "keras_more")


def conv3d():
    """Conv3D (SAME, strided), MaxPooling3D, Conv3DTranspose, AveragePooling3D and the global 3-D pools."""

    def model():
        x = keras.Input((4, 4, 4, 2))
        h = L.Conv3D(3, 2, strides=(1, 2, 1), padding="same", activation="tanh")(x)
        h = L.MaxPooling3D(2, strides=1)(h)
        h = L.Conv3DTranspose(2, 2, strides=2, activation="tanh")(h)
        parts = [
            L.Flatten()(L.AveragePooling3D(2, padding="same")(h)),
            L.GlobalMaxPooling3D()(h),
            L.GlobalAveragePooling3D()(h),
        ]
        return keras.Model(x, L.Dense(3)(L.Concatenate()(parts)))

    keras_case(
        "conv3d",
        model,
        sparse_ce,
        lambda: keras.optimizers.legacy.Adam(0.01),
        [(f32(700 + r, 2, 4, 4, 4, 2), labels(710 + r, 2, 3)) for r in range(2)],
        metrics=[keras.metrics.sparse_categorical_accuracy],
    )


def schedules():
    """The learning-rate schedules corpus_keras.py does not cover, each on a legacy optimizer."""
    O, S = keras.optimizers.legacy, keras.optimizers.schedules
    optimizer_case(
        "opt_schedule_piecewise",
        lambda: O.SGD(S.PiecewiseConstantDecay([1, 2], [0.5, 0.2, 0.05]), momentum=0.5),
        steps=4,
    )
    optimizer_case("opt_schedule_polynomial", lambda: O.Adam(S.PolynomialDecay(0.1, 3, 0.01, power=2.0)), steps=4)
    optimizer_case("opt_schedule_inverse_time", lambda: O.RMSprop(S.InverseTimeDecay(0.05, 1, 0.5)), steps=3)


def losses_logits():
    """The cross-entropies on logits with label smoothing, the focal cross-entropies, and the other
    options of the built-in losses that corpus_keras.py's `losses` case leaves at their defaults."""
    K = keras.losses

    def loss():
        parts = [
            K.CategoricalCrossentropy(from_logits=True, label_smoothing=0.2),
            K.BinaryCrossentropy(from_logits=True, label_smoothing=0.1),
            K.CategoricalFocalCrossentropy(alpha=0.3, gamma=1.5, from_logits=True),
            K.BinaryFocalCrossentropy(gamma=1.0, apply_class_balancing=True, alpha=0.3, from_logits=True),
            K.Huber(delta=2.0),
            K.MeanSquaredLogarithmicError(),
        ]
        return lambda y, p: tf.add_n([f(y, p) for f in parts])

    keras_case(
        "losses_logits",
        small_dense(3),
        loss,
        lambda: keras.optimizers.legacy.SGD(0.1),
        [(f32(720 + r, 4, 4), rng(730 + r).uniform(0.0, 1.0, (4, 3)).astype(np.float32)) for r in range(2)],
    )


def losses_sparse():
    """Sparse categorical cross-entropy on probabilities, and categorical hinge on one-hot labels.
    (`ignore_class` is left out: its boolean mask is a `Where`, whose result shape depends on the
    labels, which the StableHLO emitter does not lower.)"""
    K = keras.losses

    def loss():
        sparse = K.SparseCategoricalCrossentropy()
        hinge = K.CategoricalHinge()
        return lambda y, p: sparse(y, tf.nn.softmax(p)) + hinge(tf.one_hot(y, 3), p)

    keras_case(
        "losses_sparse",
        small_dense(3),
        loss,
        lambda: keras.optimizers.legacy.SGD(0.1),
        [(f32(740 + r, 4, 4), labels(750 + r, 4, 3)) for r in range(2)],
        metrics=[lambda y, p: keras.metrics.categorical_accuracy(tf.one_hot(y, 3), p)],
    )


def dropout():
    """Dropout, SpatialDropout1D and GaussianNoise with fixed seeds on one replica, over two steps.
    tf_keras draws their masks and noise with the seeded stateful RandomUniform and
    RandomStandardNormal, whose generators move on from step to step. (One replica: the plain graph
    that makes TensorFlow's numbers would give a second replica's forward pass ops of their own
    seeds, where the replicated step has one op for both.)"""

    def model():
        x = keras.Input((4, 3))
        h = L.Dense(4, activation="tanh")(x)
        h = L.SpatialDropout1D(0.3, seed=3)(h)
        h = L.GaussianNoise(0.2, seed=5)(h)
        h = L.Flatten()(h)
        h = L.Dropout(0.4, seed=7)(h)
        return keras.Model(x, L.Dense(3)(h))

    keras_case(
        "dropout",
        model,
        sparse_ce,
        lambda: keras.optimizers.legacy.SGD(0.1),
        [(f32(780, 4, 4, 3), labels(790, 4, 3))],
        metrics=[keras.metrics.sparse_categorical_accuracy],
    )


class MixedSetup(corpus_keras.KerasSetup):
    """A KerasSetup whose optimizer is a LossScaleOptimizer: the gradients of the scaled loss,
    unscaled; the optimizer applies them when they are finite and updates its loss scale."""

    def forward(self, x, y):
        pred = self.model(x, training=True)
        loss = self.loss_fn(y, pred)
        scaled = tf.gradients(self.opt.get_scaled_loss(loss), self.trainable)
        grads = self.opt.get_unscaled_gradients(scaled)
        self.metric_values = []
        return loss, grads, []


def mixed_bfloat16():
    """A Dense model under the mixed_bfloat16 policy (bf16 compute, f32 variables) trained by a
    dynamically loss-scaled SGD."""

    def model():
        return keras.Sequential([
            L.Dense(6, activation="tanh", input_shape=(4,)),
            L.Dense(3),
            L.Activation("linear", dtype="float32"),
        ])

    def make():
        return MixedSetup(
            model,
            lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            lambda: keras.mixed_precision.LossScaleOptimizer(
                keras.optimizers.legacy.SGD(0.1), initial_scale=256.0, dynamic_growth_steps=2
            ),
        )

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        corpus_keras.replicated_training(
            "mixed_bfloat16", make, [(f32(760 + r, 4, 4), labels(770 + r, 4, 3)) for r in range(2)], steps=3,
            rtol=2e-2,
        )
    finally:
        keras.mixed_precision.set_global_policy("float32")


CASES = {
    "conv3d": conv3d,
    "dropout": dropout,
    "schedules": schedules,
    "losses_logits": losses_logits,
    "losses_sparse": losses_sparse,
    "mixed_bfloat16": mixed_bfloat16,
    "keras3_optimizers": lambda: subprocess.run([sys.executable, os.path.abspath(__file__), "--keras3"], check=True),
}

if __name__ == "__main__":
    corpus_keras.main(CASES, __file__)
