"""Writes tests/tf/corpus/random/random_ops.json: TensorFlow's outputs of the stateless random ops,
and tests/tf/corpus/random/seeded_ops.json: those of the seeded stateful ops over two runs.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/random_ops.py

Each case runs one raw op twice: eagerly on TensorFlow's CPU kernels ("cpu", the stream the
simulator reproduces bit for bit) and inside `tf.function(jit_compile=True)`, which TensorFlow's XLA
bridge compiles for XLA_CPU_JIT ("xla", the stream the StableHLO lowering reproduces). The two
streams draw the same Philox bits from the same key and counter; they turn them into numbers
differently (see docs/xla.md).

A case: {"op", "dtype", "shape", "seed" (V1 ops and the key/counter ops), "minval"/"maxval"
(integer ops), "cpu": {"values": [...], "dtype": ...} or a list of them for several outputs,
"xla": the same, or null when XLA does not compile the case}. Floats are written exactly (f16 and
bf16 as the f32 of their value), and their bit patterns as "bits" (decimal strings of the f64 bits, or
of the f32 bits for f32, f16 and bf16); u64 values as decimal strings.

A seeded case (RandomUniform, RandomStandardNormal, TruncatedNormal, RandomUniformInt with `seed` and
`seed2` attributes): {"op", "dtype", "shape", "seed", "seed2", "minval"/"maxval", "runs": [first,
second]}, the op's outputs in two session runs of one TF1 graph on TensorFlow's CPU kernels (every
op keeps its own generator, which each run moves on). "xla_repeats" says whether two calls of the
same seeded op under `jit_compile` gave equal values (TensorFlow's bridge ignores the seeds).
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

raw = tf.raw_ops
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "random", "random_ops.json")
SEEDED_OUT = os.path.join(os.path.dirname(OUT), "seeded_ops.json")

# (op, dtype, shape, seed, seed2, (minval, maxval) for the integer op).
SEEDED = [
    ("RandomUniform", tf.float32, [5], 1, 2, None),
    ("RandomUniform", tf.float64, [2, 3], 87654321, 7, None),
    ("RandomUniform", tf.float16, [4], 0, 9, None),
    ("RandomUniform", tf.bfloat16, [3], -5, 3, None),
    ("RandomStandardNormal", tf.float32, [2, 3], 1, 2, None),
    ("RandomStandardNormal", tf.float64, [5], 3, 4, None),
    ("RandomStandardNormal", tf.float16, [3], 7, 0, None),
    ("TruncatedNormal", tf.float32, [6], 1, 2, None),
    ("TruncatedNormal", tf.float64, [3], 5, 6, None),
    ("TruncatedNormal", tf.bfloat16, [4], 2, 2, None),
    ("RandomUniformInt", tf.int32, [5], 1, 2, (-5, 17)),
    ("RandomUniformInt", tf.int64, [4], 8, 9, (3, 2**40)),
]

SEEDS = [[1, 2], [0, 0], [-7, 123456789], [2**31 - 1, -(2**31)]]
SHAPES = [[5], [2, 3], [4, 1, 3], [9]]
FLOATS = [tf.float32, tf.float64, tf.float16, tf.bfloat16]


def enc(t):
    a = t.numpy()
    dtype = t.dtype.name
    if t.dtype in (tf.bfloat16, tf.float16):
        values = [float(v) for v in a.astype(np.float32).reshape(-1)]
    elif t.dtype == tf.uint64:
        values = [str(int(v)) for v in a.reshape(-1)]
    elif t.dtype.is_floating:
        values = [float(v) for v in a.reshape(-1)]
    else:
        values = [int(v) for v in a.reshape(-1)]
    out = {"dtype": dtype, "shape": list(a.shape), "values": values}
    if t.dtype.is_floating:
        # The exact bit patterns (of the f32 value for f16 and bf16), as decimal strings.
        wide = a.astype(np.float64 if t.dtype == tf.float64 else np.float32)
        out["bits"] = [str(int(b)) for b in wide.reshape(-1).view(np.uint64 if t.dtype == tf.float64 else np.uint32)]
    return out


def seeded_op(op, dtype, shape, seed, seed2, bounds):
    f = getattr(raw, op)
    if bounds is None:
        return f(shape=shape, dtype=dtype, seed=seed, seed2=seed2)
    return f(shape=shape, minval=tf.constant(bounds[0], dtype), maxval=tf.constant(bounds[1], dtype), seed=seed, seed2=seed2)


def seeded():
    """Two session runs of every seeded case, in one TF1 graph on the CPU."""
    g = tf.Graph()
    with g.as_default():
        outs = [seeded_op(*case) for case in SEEDED]
        with tf.compat.v1.Session(graph=g) as sess:
            runs = [sess.run(outs), sess.run(outs)]
    cases = []
    for k, (op, dtype, shape, seed, seed2, bounds) in enumerate(SEEDED):
        case = {"op": op, "dtype": dtype.name, "shape": shape, "seed": seed, "seed2": seed2,
                "runs": [enc(tf.constant(r[k], dtype)) for r in runs]}
        if bounds is not None:
            case["minval"], case["maxval"] = bounds
        cases.append(case)
    jit = tf.function(lambda: seeded_op(*SEEDED[0]), jit_compile=True)
    xla_repeats = bool(np.array_equal(jit().numpy(), jit().numpy()))
    doc = {"tensorflow": tf.__version__, "xla_repeats": xla_repeats, "cases": cases}
    tmp = SEEDED_OUT + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, SEEDED_OUT)
    print(f"wrote {SEEDED_OUT}: {len(cases)} cases, XLA repeats: {xla_repeats}")


def both(fn):
    cpu = fn()
    try:
        xla = tf.function(fn, jit_compile=True)()
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
        xla = None

    def pack(out):
        if out is None:
            return None
        if isinstance(out, (list, tuple)):
            return [enc(o) for o in out]
        return enc(out)

    return pack(cpu), pack(xla)


def main():
    cases = []
    for i, seed in enumerate(SEEDS):
        seed_t = tf.constant(seed, tf.int64 if i % 2 else tf.int32)
        cpu, xla = both(lambda: raw.StatelessRandomGetKeyCounterAlg(seed=seed_t))
        cases.append({"op": "StatelessRandomGetKeyCounterAlg", "seed": seed, "seed_dtype": seed_t.dtype.name, "cpu": cpu, "xla": xla})
        key, counter, _ = raw.StatelessRandomGetKeyCounterAlg(seed=seed_t)
        shape = SHAPES[i]
        for dtype in FLOATS:
            for op in ["StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2"]:
                f = getattr(raw, op)
                cpu, xla = both(lambda: f(shape=shape, key=key, counter=counter, alg=1, dtype=dtype))
                cases.append({"op": op, "dtype": dtype.name, "shape": shape, "seed": seed, "seed_dtype": seed_t.dtype.name, "cpu": cpu, "xla": xla})
            for op in ["StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal"]:
                f = getattr(raw, op)
                cpu, xla = both(lambda: f(shape=shape, seed=seed_t, dtype=dtype))
                cases.append({"op": op, "dtype": dtype.name, "shape": shape, "seed": seed, "seed_dtype": seed_t.dtype.name, "cpu": cpu, "xla": xla})
        for dtype in [tf.int32, tf.int64]:
            lo, hi = (-5, 17) if i % 2 else (3, 2**30)
            cpu, xla = both(lambda: raw.StatelessRandomUniformIntV2(shape=shape, key=key, counter=counter, alg=1, minval=tf.constant(lo, dtype), maxval=tf.constant(hi, dtype)))
            cases.append({"op": "StatelessRandomUniformIntV2", "dtype": dtype.name, "shape": shape, "seed": seed, "seed_dtype": seed_t.dtype.name, "minval": lo, "maxval": hi, "cpu": cpu, "xla": xla})
            cpu, xla = both(lambda: raw.StatelessRandomUniformInt(shape=shape, seed=seed_t, minval=tf.constant(lo, dtype), maxval=tf.constant(hi, dtype)))
            cases.append({"op": "StatelessRandomUniformInt", "dtype": dtype.name, "shape": shape, "seed": seed, "seed_dtype": seed_t.dtype.name, "minval": lo, "maxval": hi, "cpu": cpu, "xla": xla})
        for dtype in [tf.int32, tf.int64, tf.uint64]:
            cpu, xla = both(lambda: raw.StatelessRandomUniformFullIntV2(shape=shape, key=key, counter=counter, alg=1, dtype=dtype))
            cases.append({"op": "StatelessRandomUniformFullIntV2", "dtype": dtype.name, "shape": shape, "seed": seed, "seed_dtype": seed_t.dtype.name, "cpu": cpu, "xla": xla})
            cpu, xla = both(lambda: raw.StatelessRandomUniformFullInt(shape=shape, seed=seed_t, dtype=dtype))
            cases.append({"op": "StatelessRandomUniformFullInt", "dtype": dtype.name, "shape": shape, "seed": seed, "seed_dtype": seed_t.dtype.name, "cpu": cpu, "xla": xla})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    tmp = OUT + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"tensorflow": tf.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, OUT)
    print(f"wrote {OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
    seeded()
