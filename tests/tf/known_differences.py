"""The semantic differences between the simulator and XLA that
tests/it/differential_fuzz.rs pins, computed by TensorFlow on its CPU kernels
and under jit_compile (XLA). The simulator follows the CPU column, the PJRT
backend the jit column. Writes tests/tf/known_differences.json, which
tests/it/differential_fuzz.rs checks the simulator's kernels against.
Its "device_checks" part holds the operands XLA accepts in silence where
the CPU kernels fail (integer division by zero, scatter indices out of
range), which tests/it/xla_device_checks.rs checks both backends against.

Run: tests/tf/.venv/bin/python tests/tf/known_differences.py
"""

import json
import os

import numpy as np
import tensorflow as tf

F32_MAX = float(np.finfo(np.float32).max)

CASES = {
    # a / (b / c): XLA's algebraic simplifier computes (a * c) / b, whose
    # product overflows where the quotient of the rounded values does not.
    "a/(a/c), a=f32max, c=-1.5312499": (lambda a, c: a / (a / c), [F32_MAX], [-1.5312499]),
    # (e / b) / (1 / b): XLA cancels b; on the CPU both quotients are
    # subnormal, flush to 0, and 0 / 0 is NaN.
    "(exp(a)/b)/(1/b), a=0.5, b=3e38": (lambda a, b: (tf.exp(a) / b) / (1.0 / b), [0.5], [3e38]),
    # (y / x) / (y / x): y / x overflows to -inf on the CPU, and -inf / -inf
    # is NaN; XLA cancels the quotients. DivNoNan does the same.
    "div_no_nan(y/x, y/x), x=1e-30, y=-1e30": (lambda x, y: tf.math.divide_no_nan(y / x, y / x), [1e-30], [-1e30]),
    # softsign(y / x): XLA divides y by x * (1 + |y / x|); on the CPU y / x
    # overflows to -inf first, and -inf / inf is NaN.
    "softsign(y/x), x=1e-30, y=-1e30": (lambda x, y: tf.nn.softsign(y / x), [1e-30], [-1e30]),
    # log(exp(a)): XLA computes a; on the CPU exp underflows to 0 first.
    "log(exp(a)), a=f32 lowest": (lambda a, _: tf.math.log(tf.exp(a)), [-F32_MAX], [0.0]),
    # log(rsqrt(a)): XLA computes -0.5 * log(a); on the CPU rsqrt(-0) is -inf.
    "log(rsqrt(a)), a=-0": (lambda a, _: tf.math.log(tf.math.rsqrt(a)), [-0.0], [0.0]),
    # max over a NaN: the CPU kernel keeps it, XLA:CPU may drop it.
    "reduce_max([4.47, nan])": (lambda a, _: tf.reduce_max(a), [4.47, float("nan")], [0.0]),
}


def _var_scatter(op):
    # One variable per case, reset before each call (tf.function keeps it).
    v = tf.Variable(tf.zeros([4]))

    def run(indices):
        v.assign(tf.zeros([4]))
        getattr(tf.raw_ops, op)(resource=v.handle, indices=indices, updates=tf.constant([1.0, 2.0]))
        return v.read_value()

    return run


_A = tf.constant([7, -7, 5], tf.int32)
_DATA = tf.constant([1.0, 2.0, 3.0, 4.0])
_UPDATES = tf.constant([1.0, 2.0])

# Operands XLA accepts in silence where TensorFlow's CPU kernels refuse
# them; tests/it/xla_device_checks.rs feeds replica 0 the first operand
# and replica 1 the second. Each op reads one fed tensor.
DEVICE_CHECKS = {
    "Div": (lambda b: tf.raw_ops.Div(x=_A, y=b), [2, 2, 3], [2, 2, 0], tf.int32),
    "FloorDiv": (lambda b: tf.raw_ops.FloorDiv(x=_A, y=b), [2, 2, 3], [2, 2, 0], tf.int32),
    "FloorMod": (lambda b: tf.raw_ops.FloorMod(x=_A, y=b), [2, 2, 3], [2, 2, 0], tf.int32),
    "ScatterNd": (
        lambda i: tf.raw_ops.ScatterNd(indices=i, updates=_UPDATES, shape=tf.constant([4])),
        [[1], [2]],
        [[1], [5]],
        tf.int32,
    ),
    "TensorScatterUpdate": (
        lambda i: tf.raw_ops.TensorScatterUpdate(tensor=_DATA, indices=i, updates=_UPDATES),
        [[1], [2]],
        [[1], [-1]],
        tf.int32,
    ),
    "TensorScatterAdd": (
        lambda i: tf.raw_ops.TensorScatterAdd(tensor=_DATA, indices=i, updates=_UPDATES),
        [[1], [2]],
        [[1], [4]],
        tf.int32,
    ),
    # Negative ids are dropped on both paths; ids past the count are not.
    "UnsortedSegmentSum": (
        lambda i: tf.raw_ops.UnsortedSegmentSum(data=_DATA, segment_ids=i, num_segments=tf.constant(4)),
        [0, 1, -1, 2],
        [0, 1, 5, 3],
        tf.int32,
    ),
    "ResourceScatterUpdate": (_var_scatter("ResourceScatterUpdate"), [1, 2], [1, 5], tf.int32),
    "ResourceScatterAdd": (_var_scatter("ResourceScatterAdd"), [1, 2], [1, 5], tf.int32),
    "ResourceScatterSub": (_var_scatter("ResourceScatterSub"), [1, 2], [-1, 2], tf.int32),
}


def device_checks():
    """For each case: the value (or error) on the CPU kernels and under
    jit_compile, for the valid operand and for the refused one."""
    out = {}
    for name, (fn, good, bad, dtype) in DEVICE_CHECKS.items():
        row = {"good": good, "bad": bad}
        jitted = tf.function(fn, jit_compile=True)
        for label, arg in (("good", good), ("bad", bad)):
            arg = tf.constant(arg, dtype)
            try:
                row["cpu_" + label] = as_list(fn(arg))
            except tf.errors.OpError as e:
                row["cpu_" + label] = "error: " + type(e).__name__
            row["jit_compile_" + label] = as_list(jitted(arg))
        out[name] = row
    return out


def as_list(t):
    # Strings ("nan", "inf", "-1.53...") keep NaN and infinities in plain JSON.
    return [repr(float(v)) for v in np.asarray(t, np.float64).reshape(-1)]


def main():
    out = {"tensorflow": tf.__version__}
    for name, (fn, a, b) in CASES.items():
        a = tf.constant(a, tf.float32)
        b = tf.constant(b, tf.float32)
        out[name] = {
            "cpu": as_list(fn(a, b)),
            "jit_compile": as_list(tf.function(fn, jit_compile=True)(a, b)),
        }
    out["device_checks"] = device_checks()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_differences.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
