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
second]}; RandomShuffle and Multinomial give "operands" (name: tensor) and "output_dtype" instead of
"dtype", "shape" and the bounds. "stateless_multinomial" holds StatelessMultinomial cases with "cpu"
and "xla" outputs as random_ops.json has them, the op's outputs in two session runs of one TF1 graph on TensorFlow's CPU kernels (every
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

# The seeded ops with a data operand: (op, operands, attrs, seed, seed2).
LOGITS = np.array([[0.5, -1.0, 2.0, 0.0, -np.inf], [1.0, 1.0, 1.0, 1.0, 1.0], [-3.0, 4.0, 0.5, 0.0, 1.5]], np.float32)
SEEDED_DATA = [
    ("RandomShuffle", {"value": np.arange(10, dtype=np.float32)}, {}, 1, 2),
    ("RandomShuffle", {"value": np.arange(12, dtype=np.int32).reshape(4, 3)}, {}, 4, 5),
    ("RandomShuffle", {"value": np.arange(7, dtype=np.float64)}, {}, 0, 3),
    ("Multinomial", {"logits": LOGITS, "num_samples": np.int32(6)}, {"output_dtype": tf.int64}, 6, 7),
    ("Multinomial", {"logits": LOGITS.astype(np.float64), "num_samples": np.int32(3)}, {"output_dtype": tf.int32}, 8, 0),
]

# StatelessMultinomial: (logits, num_samples, seed, seed dtype, output dtype).
STATELESS_MULTINOMIAL = [
    (LOGITS, 6, [1, 2], tf.int32, tf.int64),
    (LOGITS.astype(np.float64), 4, [7, 123456789], tf.int64, tf.int32),
    (np.array([[0.0, 0.0], [5.0, -5.0]], np.float32), 9, [3, 4], tf.int32, tf.int64),
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
        # Non-finite values as the strings "inf", "-inf", "nan" (JSON has no literal for them).
        values = [float(v) if np.isfinite(v) else str(float(v)) for v in a.reshape(-1)]
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


def data_op(op, operands, attrs, seed, seed2):
    return getattr(raw, op)(**{k: tf.constant(v) for k, v in operands.items()}, **attrs, seed=seed, seed2=seed2)


def seeded():
    """Two session runs of every seeded case, in one TF1 graph on the CPU."""
    g = tf.Graph()
    with g.as_default():
        outs = [seeded_op(*case) for case in SEEDED]
        data_outs = [data_op(*case) for case in SEEDED_DATA]
        with tf.compat.v1.Session(graph=g) as sess:
            runs = [sess.run(outs), sess.run(outs)]
            data_runs = [sess.run(data_outs), sess.run(data_outs)]
    cases = []
    for k, (op, operands, attrs, seed, seed2) in enumerate(SEEDED_DATA):
        case = {"op": op, "seed": seed, "seed2": seed2,
                "operands": {name: enc(tf.constant(v)) for name, v in operands.items()},
                "runs": [enc(tf.constant(r[k])) for r in data_runs]}
        if "output_dtype" in attrs:
            case["output_dtype"] = attrs["output_dtype"].name
        cases.append(case)
    for k, (op, dtype, shape, seed, seed2, bounds) in enumerate(SEEDED):
        case = {"op": op, "dtype": dtype.name, "shape": shape, "seed": seed, "seed2": seed2,
                "runs": [enc(tf.constant(r[k], dtype)) for r in runs]}
        if bounds is not None:
            case["minval"], case["maxval"] = bounds
        cases.append(case)
    stateless = []
    for logits, samples, seed, seed_dtype, out_dtype in STATELESS_MULTINOMIAL:
        seed_t = tf.constant(seed, seed_dtype)
        fn = lambda: raw.StatelessMultinomial(logits=tf.constant(logits), num_samples=samples, seed=seed_t, output_dtype=out_dtype)  # noqa: E731
        cpu, xla = both(fn)
        stateless.append({"op": "StatelessMultinomial", "logits": enc(tf.constant(logits)), "num_samples": samples,
                          "seed": seed, "seed_dtype": seed_dtype.name, "output_dtype": out_dtype.name, "cpu": cpu, "xla": xla})
    jit = tf.function(lambda: seeded_op(*SEEDED[0]), jit_compile=True)
    xla_repeats = bool(np.array_equal(jit().numpy(), jit().numpy()))
    doc = {"tensorflow": tf.__version__, "xla_repeats": xla_repeats, "cases": cases, "stateless_multinomial": stateless}
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
