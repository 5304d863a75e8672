"""The semantic differences between the simulator and XLA that
tests/it/differential_fuzz.rs pins, computed by TensorFlow on its CPU kernels
and under jit_compile (XLA). The simulator follows the CPU column, the PJRT
backend the jit column. Writes tests/tf/known_differences.json, which
tests/it/differential_fuzz.rs checks the simulator's kernels against.

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
    # log(exp(a)): XLA computes a; on the CPU exp underflows to 0 first.
    "log(exp(a)), a=f32 lowest": (lambda a, _: tf.math.log(tf.exp(a)), [-F32_MAX], [0.0]),
    # log(rsqrt(a)): XLA computes -0.5 * log(a); on the CPU rsqrt(-0) is -inf.
    "log(rsqrt(a)), a=-0": (lambda a, _: tf.math.log(tf.math.rsqrt(a)), [-0.0], [0.0]),
    # max over a NaN: the CPU kernel keeps it, XLA:CPU may drop it.
    "reduce_max([4.47, nan])": (lambda a, _: tf.reduce_max(a), [4.47, float("nan")], [0.0]),
}


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
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_differences.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
