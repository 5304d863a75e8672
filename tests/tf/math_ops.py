"""Writes tests/tf/corpus/math/math_ops.json: TensorFlow's values and gradients of elementwise math ops.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/math_ops.py

For each op and dtype (f32, f64): the input "x", TensorFlow's output "y" = op(x) on its CPU kernels,
and "dydx" = the gradient of sum(op(x)) with respect to x by tf.GradientTape (null where TensorFlow
has none). Inputs lie in each op's domain. Values are written exactly (repr of the float).
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "math", "math_ops.json")

WIDE = [-1.2, -0.7, -0.25, 0.0, 0.3, 0.55, 0.9, 1.15]
UNIT = [-0.9, -0.6, -0.3, 0.0, 0.2, 0.45, 0.7, 0.85]
ABOVE_ONE = [1.05, 1.2, 1.5, 1.9, 2.3, 2.8, 3.5, 4.0]
HALVES = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -1.51]

OPS = {
    "Sin": (tf.raw_ops.Sin, WIDE),
    "Cos": (tf.raw_ops.Cos, WIDE),
    "Tan": (tf.raw_ops.Tan, WIDE),
    "Asin": (tf.raw_ops.Asin, UNIT),
    "Acos": (tf.raw_ops.Acos, UNIT),
    "Atan": (tf.raw_ops.Atan, WIDE),
    "Sinh": (tf.raw_ops.Sinh, WIDE),
    "Cosh": (tf.raw_ops.Cosh, WIDE),
    "Asinh": (tf.raw_ops.Asinh, WIDE),
    "Acosh": (tf.raw_ops.Acosh, ABOVE_ONE),
    "Atanh": (tf.raw_ops.Atanh, UNIT),
    "Rint": (tf.raw_ops.Rint, HALVES),
}


def main():
    cases = []
    for name, (fn, xs) in OPS.items():
        for dtype in (tf.float32, tf.float64):
            x = tf.constant(np.array(xs), dtype)
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = fn(x=x)
                s = tf.reduce_sum(y)
            g = tape.gradient(s, x)
            cases.append({
                "op": name,
                "dtype": dtype.name,
                "x": [float(v) for v in x.numpy()],
                "y": [float(v) for v in y.numpy()],
                "dydx": None if g is None else [float(v) for v in g.numpy()],
            })
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    tmp = OUT + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"tensorflow": tf.__version__, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, OUT)
    print(f"wrote {OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
