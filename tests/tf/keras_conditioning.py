"""How well conditioned a keras.applications step of the Keras corpus is: TensorFlow's own float32
and float64 results of the same step, compared by the corpus's rule.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/keras_conditioning.py MODEL SIZE BATCH [--float64|--float32]

MODEL is app_regnet_x002 or app_nasnet_mobile; SIZE the input side; BATCH the images per replica
(two replicas, as in tests/tf/corpus_keras.py). The step is the corpus's: categorical
cross-entropy, SGD at 0.01, each replica's batch norms on its own images, the gradients averaged.
The float32 model's initial values (corpus_keras.Initial) are cast to float64 for the second run.
They are a draw of the same initializers, not necessarily the corpus graph's: for app_nasnet_mobile
64 2 its losses (0.965, 2.195) are not those of the corpus's float32 graph (0.855, 2.075).

It prints, per variable, the largest |float32 - float64| / (1e-3 * max(|float64|, 1)): the corpus's
tolerance is 1, so a variable above 1 differs from the exact step by more than the tests allow
even in TensorFlow itself, and comparing another implementation's float32 step with TensorFlow's
there tests rounding, not arithmetic. With --float64 it compares instead the float64 step with the
same float64 step from initial values one rounding away: how far rounding alone moves the float64
results, in the same units. --float32 does the same for the float32 step, each initial value moved
by at most one float32 rounding (up, down or not at all, at random): how far a perturbation of the
size of rounding moves the float32 results. Moving statistics are listed per replica (NAME#1 for
the second). "compared" are the variables of at most 300 elements, the ones the corpus records.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import corpus_keras as ck  # noqa: E402
from corpus_keras import f32, keras, np, onehot, tf, tf1  # noqa: E402

MODELS = {
    "app_regnet_x002": lambda size: keras.applications.RegNetX002(
        input_shape=(size, size, 3), weights=None, classes=4
    ),
    "app_nasnet_mobile": lambda size: keras.applications.NASNetMobile(
        input_shape=(size, size, 3), weights=None, classes=4
    ),
}


def step(model, size, batch, floatx, initial=None):
    """One corpus step in `floatx`: (initial values, per-replica losses, values after)."""
    keras.backend.set_floatx(floatx)
    keras.backend.clear_session()
    batches = [(f32(340 + r, batch, size, size, 3), onehot(350 + r, batch, 4)) for r in range(2)]
    g = tf.Graph()
    with g.as_default():
        if initial is None:
            creator = ck.Initial().creator
        else:
            def creator(next_creator, **kwargs):
                key = tf1.get_default_graph().unique_name(kwargs.get("name") or "var", mark_as_used=False)
                value = initial[key]
                kwargs["initial_value"] = value.astype(floatx) if value.dtype.kind == "f" else value
                return next_creator(**kwargs)

        setup = ck.KerasSetup(
            lambda: MODELS[model](size),
            lambda: keras.losses.CategoricalCrossentropy(),
            lambda: keras.optimizers.legacy.SGD(0.01),
        )
        with tf1.variable_creator_scope(creator):
            setup.model = setup.make_model()
            setup.opt = setup.make_opt()
            setup.opt._create_all_weights(setup.model.trainable_variables)
            setup.opt.iterations  # noqa: B018
        setup.loss_fn = setup.make_loss()
        setup.trainable = setup.model.trainable_variables
        moving = setup.model.non_trainable_variables
        variables = tf1.global_variables()
        keys = [v.handle.op.name for v in variables]
        losses, grads, updates = [], [], []
        for x, y in batches:
            loss, gr, up = setup.forward(tf.constant(x.astype(floatx)), tf.constant(y.astype(floatx)))
            losses.append(loss)
            grads.append(gr)
            updates.append(up)
        mean = [tf.add_n(list(gs)) / 2 for gs in zip(*grads)]
        with tf.control_dependencies(losses + [t for gs in grads for t in gs]):
            train = setup.opt.apply_gradients(zip(mean, setup.trainable))
        with tf1.Session(graph=g) as sess:
            sess.run(tf1.global_variables_initializer())
            start = dict(zip(keys, sess.run(variables)))
            first = sess.run(moving)
            copies = []
            for r in range(2):
                for v, value in zip(moving, first):
                    v.load(value, sess)
                sess.run(updates[r])
                copies.append(sess.run(moving))
            got, _ = sess.run([losses, train])
            after = dict(zip(keys, sess.run(variables)))
            for k, v in enumerate(moving):
                after[v.handle.op.name] = copies[0][k]
                after[v.handle.op.name + "#1"] = copies[1][k]
    keras.backend.set_floatx("float32")
    return start, got, after


def ratios(got, exact):
    """(worst ratio to the corpus's tolerance, variable, elements), worst first."""
    rows = []
    for name, want in exact.items():
        a, b = np.asarray(got[name], np.float64), np.asarray(want, np.float64)
        if b.dtype.kind == "f":
            rows.append((float((np.abs(a - b) / (1e-3 * np.maximum(np.abs(b), 1.0))).max()), name, b.size))
    return sorted(rows, reverse=True)


def main():
    model, size, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    start, loss32, after32 = step(model, size, batch, "float32")
    if sys.argv[4:] == ["--float32"]:
        # The float32 step's own conditioning: the same step from initial values each moved by at
        # most one float32 rounding, up, down or not at all at random (a common factor would not do:
        # batch norm cancels it), against the float32 step.
        signs = np.random.default_rng(0)
        nudged = {
            k: (v.astype(np.float64) * (1 + signs.integers(-1, 2, v.shape) * 2.0**-24)).astype(np.float32)
            if v.dtype.kind == "f" else v
            for k, v in start.items()
        }
        _, loss_nudged, after_nudged = step(model, size, batch, "float32", nudged)
        print(f"{model} {size}x{size}, {batch} per replica: loss float32 {loss32}")
        print(f"float32 from values one rounding away: loss {loss_nudged}")
        report(ratios(after_nudged, after32))
        return
    _, loss64, after64 = step(model, size, batch, "float64", start)
    print(f"{model} {size}x{size}, {batch} per replica: loss float32 {loss32}, float64 {loss64}")
    if sys.argv[4:] == ["--float64"]:
        # The float64 step's own conditioning: the same step from initial values one float64
        # rounding away (each scaled by 1 + 2^-52), against the unperturbed float64 step.
        nudged = {k: v.astype(np.float64) * (1 + 2.0**-52) if v.dtype.kind == "f" else v for k, v in start.items()}
        _, loss_nudged, after_nudged = step(model, size, batch, "float64", nudged)
        print(f"float64 from values one rounding away: loss {loss_nudged}")
        report(ratios(after_nudged, after64))
        return
    report(ratios(after32, after64))


def report(rows):
    """Prints how many variables are beyond the tolerance, and the worst ones."""
    compared = [r for r in rows if r[2] <= 300]
    for label, group in (("all", rows), ("compared", compared)):
        failing = sum(1 for r in group if r[0] > 1)
        print(f"{label}: {failing} of {len(group)} variables beyond the tolerance; worst:")
        for worst, name, n in group[:5]:
            print(f"  {worst:9.3g}  {name} ({n})")


if __name__ == "__main__":
    main()
