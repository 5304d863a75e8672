"""Op cases of the ptn family: StatelessParameterizedTruncatedNormal and the seeded
ParameterizedTruncatedNormal, with TensorFlow's values (see op_cases.py).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_ptn.py

Writes tests/tf/corpus/ops/ptn.{pbtxt,json} and ptn_cpu.{pbtxt,json}. tests/it/op_cases.rs (`ptn`)
compares the simulator with TensorFlow's CPU kernels (its rejection samplers on the Philox stream,
bit for bit) and PJRT with TensorFlow's XLA bridge (the inverse CDF of the seed's uniforms), the
gradients of the stateless op on each backend with TensorFlow's gradients of the sample that
backend draws. The cases force each of the CPU kernel's three samplers: normals kept inside wide
bounds, uniform proposals on a narrow interval and exponential proposals far in a tail (upper
tails by mirroring), with scalar, per-batch and broadcast parameters in f32 and f64.

The seeded op's XLA stream is XLA's own generator, which ignores the seeds: in `ptn` it is
compared by statistics of 1000 samples per row (mean, variance, and whether every sample is
within its bounds), to a loose tolerance. Its exact CPU numbers, and the f16 draws (the bridge
compiles the stateless op in f16 from uniforms the lowering does not reproduce, so the lowering
refuses f16), are in `ptn_cpu` (`ptn_cpu`: the simulator only).
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case


def stateless(name, shape, means, stddevs, minvals, maxvals, dtype=np.float32, seed=(7, 11), grad=True,
              rtol=1e-5, xla=True):
    values = {"means": means, "stddevs": stddevs, "minvals": minvals, "maxvals": maxvals}
    inputs = {"seed": np.array(seed, np.int32)}
    inputs.update({k: np.asarray(v, dtype) for k, v in values.items()})
    return Case(name, "StatelessParameterizedTruncatedNormal", inputs=inputs,
                consts={"shape": np.array(shape, np.int32)},
                grad=grad, xla_grads=grad, rtol=rtol, xla=xla)


def seeded(name, shape, means, stdevs, minvals, maxvals, dtype=np.float32, seed=(3, 5), post=None, rtol=1e-5,
           xla=True):
    values = {"means": means, "stdevs": stdevs, "minvals": minvals, "maxvals": maxvals}
    return Case(name, "ParameterizedTruncatedNormal", inputs={k: np.asarray(v, dtype) for k, v in values.items()},
                consts={"shape": np.array(shape, np.int32)},
                attrs={"seed": seed[0], "seed2": seed[1]},
                grad=False, post=post, rtol=rtol, xla=xla)


def statistics(lo, hi):
    """Per row: mean, variance, and 1 where every sample lies in [lo, hi] (bounds per row)."""
    def post(outs):
        x = outs[0]
        mean = tf.reduce_mean(x, axis=1)
        var = tf.reduce_mean(tf.square(x - mean[:, None]), axis=1)
        low = tf.constant(np.asarray(lo, x.dtype.as_numpy_dtype))
        high = tf.constant(np.asarray(hi, x.dtype.as_numpy_dtype))
        inside = tf.logical_and(x >= low[:, None], x <= high[:, None])
        inside = tf.cast(tf.reduce_all(inside, axis=1), x.dtype)
        return [mean, var, inside]
    return post


def cases():
    inf = np.inf
    main = [
        # Normals kept inside the bounds (the upper bound 1.67 deviations above the mean).
        stateless("wide", [3, 4], 0.5, 1.5, -2.0, 3.0),
        # Uniform proposals: [0.1, 0.4] is narrower than the cutoff.
        stateless("narrow", [10], 0.0, 1.0, 0.1, 0.4),
        # Exponential proposals three deviations out; the bridge's inverse CDF loses digits there.
        stateless("tail", [2, 5], 0.0, 1.0, 3.0, 5.0, rtol=2e-3),
        # An upper tail, mirrored into a lower one, in f64.
        stateless("upper_tail_f64", [7], 1.0, 0.5, -3.0, -1.0, dtype=np.float64, rtol=1e-9),
        # A lower bound at -inf, mirrored: normals again.
        stateless("below_f64", [6], 0.0, 1.0, -inf, 0.5, dtype=np.float64, rtol=1e-9),
        stateless("narrow_f64", [3, 3], 2.0, 0.25, 2.1, 2.2, dtype=np.float64, rtol=1e-9),
        # Broadcast parameters: batches [2, 3] of every regime, 4 samples each.
        stateless("broadcast", [4, 2, 3], [[0.0], [1.0]], [1.0], [[-1.5, 0.2, 3.5]], [[2.0, 0.6, 4.5], [1.8, 1.3, 6.0]],
                  seed=(-4, 123), rtol=2e-3),
        stateless("broadcast_f64", [3, 3], [0.0, 0.5, -1.0], [1.0, 2.0, 0.5], [-1.0, 0.8, 1.0], 3.0,
                  dtype=np.float64, rtol=1e-9),
        # The seeded op by its statistics (XLA ignores its seeds).
        seeded("seeded_stats", [2, 1000], [0.0, 1.0], [1.0, 2.0], [-1.0, 1.5], [2.0, 6.0],
               post=statistics([-1.0, 1.5], [2.0, 6.0]), rtol=0.15),
        seeded("seeded_stats_f64", [2, 1000], 0.5, 1.0, 2.0, 2.6, dtype=np.float64,
               post=statistics([2.0, 2.0], [2.6, 2.6]), rtol=0.15),
    ]
    # Exact: rtol 0 (f16: the harness's two units in the last place; f64: 1e-15, as the JSON reader
    # may round a decimal one unit in the last place away).
    cpu_only = [
        # Scalar parameters: batches of 100, the last one short.
        seeded("scalar", [250], 0.0, 1.0, -1.0, 1.0, xla=False, rtol=0.0),
        # Per-batch vectors: rows of each regime.
        seeded("rows", [3, 5], [0.0, 0.0, 0.0], [1.0], [-3.0, 0.2, 3.0], [3.0, 0.5, 6.0], xla=False, rtol=0.0),
        seeded("rows_f64", [4, 3], [0.0, 1.0, 0.0, -1.0], 1.0, [-inf, 1.2, 0.3, -1.1],
               [0.0, 4.0, 0.35, 5.0], dtype=np.float64, xla=False, rtol=1e-15),
        seeded("scalar_f16", [2, 9], 0.0, 1.0, -0.5, 2.0, dtype=np.float16, xla=False, rtol=0.0),
        # f16: each step rounded to f16, as Eigen's half computes; with TensorFlow's f16 gradients.
        stateless("stateless_f16", [3, 4], [0.0, 1.0, 0.0, 2.0], 1.0, [-1.0, 1.1, 2.5, -5.0], [1.0, 1.4, 4.0, 2.1],
                  dtype=np.float16, xla=False, rtol=0.0),
        # The stateless f32 samplers bit for bit (the cases of `ptn` allow the bridge's error).
        stateless("tail_exact", [2, 5], 0.0, 1.0, 3.0, 5.0, grad=False, xla=False, rtol=0.0),
        stateless("broadcast_exact", [4, 2, 3], [[0.0], [1.0]], [1.0], [[-1.5, 0.2, 3.5]],
                  [[2.0, 0.6, 4.5], [1.8, 1.3, 6.0]], seed=(-4, 123), grad=False, xla=False, rtol=0.0),
        stateless("wide_exact", [3, 4], 0.5, 1.5, -2.0, 3.0, grad=False, xla=False, rtol=0.0),
        stateless("narrow_exact", [10], 0.0, 1.0, 0.1, 0.4, grad=False, xla=False, rtol=0.0),
    ]
    return main, cpu_only


if __name__ == "__main__":
    main, cpu_only = cases()
    op_cases.write_family("ptn", main)
    op_cases.write_family("ptn_cpu", cpu_only)
