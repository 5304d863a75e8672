"""Keras training steps, side by side: TensorFlow, TensorFlow with XLA, the simulator, PJRT.

Usage: tests/tf/.venv/bin/python benches/tf_models.py [--models a,b] [--steps N] [--bin PATH]
                                                       [--cache DIR] [--paths p,q] [--json FILE]

Models (tf_keras 2.21, small sizes, SGD): resnet50 (keras.applications.ResNet50, 32x32, 4 classes),
mobilenet_v2 (alpha 0.35, 32x32), transformer (2 encoder blocks, sequence 16, width 32), lstm
(LSTM(32) over 16 steps of 8 features); plus `tf_step`, the 4-layer transformer step of
benches/tf_step.py (a plain graph). Every measurement runs in its own child process of this one,
so each peak memory is that process's maximum resident set (`wait4`).

Paths, each on the same global batch (2 replicas x the per-replica batch):
  tf       TensorFlow graph mode: the step as a `tf.function` (for tf_step: a TF1 session);
  tf_xla   the same step function with `jit_compile=True` (for tf_step: auto-jit,
           TF_XLA_FLAGS=--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit);
  sim      `tpu-rewrite run` on the replicated graph that tpu.replicate made (the simulator);
  pjrt     the same with `--backend pjrt`;
  tf_1r, tf_xla_1r, sim_1r, pjrt_1r   the same four on one replica's batch, ours on the graph
           tpu.replicate made for one replica (not in the default paths): one replica's program
           on each side, so pjrt_1r against tf_xla_1r is our emission against TensorFlow's bridge
           on the same program, and 2x tf_xla_1r is the floor of two replicas on the same cores
           (each replica does all the per-weight work: reading the filters, their gradients, the
           update).
For TF, "first" is the first call of the step (tracing, compiling, running once) and "step" the
median of N timed calls after two warm-up calls; "trace" is the tracing alone and "compile" the
first call after it less one step (with jit_compile: XLA's compile). For ours, "first" is the whole `run --steps 1`
command (load, lower, compile, initialisers, one step). The simulator's "step" is
(wall(run --steps 1+N) - wall(run --steps 1)) / N; PJRT's is the same difference of the two runs'
`execute` totals (`run --time-passes`), with the compile time, and the second run's first step
with the program loaded from a fresh compile cache ("cached first"). "cpu" is the CPU time of the
same step, all threads: TensorFlow's median `process_time` per call, the simulator's difference of
the two runs' CPU time (`wait4`) over N, PJRT's that of the `execute` totals; on a shared machine it
is the figure to compare. The replicated graphs and feeds are generated
into the cache directory (default: ~/.cache/tpu-rewrite/bench-models), not committed.
"""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REPLICAS = 2
# The per-replica batch of each model.
BATCH = {"resnet50": 1, "mobilenet_v2": 1, "transformer": 4, "lstm": 4}


def make_model(name, keras):
    """The Keras model `name`, built in the current graph or eagerly."""
    L = keras.layers
    if name == "resnet50":
        return keras.applications.ResNet50(input_shape=(32, 32, 3), weights=None, classes=4)
    if name == "mobilenet_v2":
        return keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=4)
    if name == "transformer":
        x = keras.Input((16, 32))
        h = x
        for _ in range(2):
            a = L.MultiHeadAttention(num_heads=2, key_dim=16)(h, h)
            h = L.LayerNormalization()(h + a)
            f = L.Dense(64, activation="gelu")(h)
            h = L.LayerNormalization()(h + L.Dense(32)(f))
        return keras.Model(x, L.Dense(4)(L.GlobalAveragePooling1D()(h)))
    if name == "lstm":
        return keras.Sequential([L.LSTM(32, input_shape=(16, 8)), L.Dense(4)])
    raise SystemExit(f"unknown model {name!r} (resnet50, mobilenet_v2, transformer, lstm)")


def batch(name, replica):
    """Replica `replica`'s (x, one-hot y) of model `name`."""
    import numpy as np

    rng = np.random.default_rng(100 + replica)
    n = BATCH[name]
    shape = {"resnet50": (32, 32, 3), "mobilenet_v2": (32, 32, 3), "transformer": (16, 32), "lstm": (16, 8)}[name]
    x = rng.standard_normal((n, *shape)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, n)]
    return x, y


def model_file(name, replicas):
    """The file stem of model `name`'s graph on `replicas` replicas: NAME, or NAME_1r for one."""
    return name if replicas == REPLICAS else f"{name}_{replicas}r"


def child_build(name, out, replicas=REPLICAS):
    """Writes OUT/STEM.pb (the step under tpu.replicate on `replicas` replicas) and
    OUT/STEM.feeds.json, STEM being `model_file(name, replicas)`."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "tf"))
    from corpus_keras import Initial, KerasSetup, step_graph, tf, tf1, tpu, tpu_ops, keras

    g = tf.Graph()
    with g.as_default():
        setup = KerasSetup(
            lambda: make_model(name, keras),
            lambda: keras.losses.CategoricalCrossentropy(from_logits=True),
            lambda: keras.optimizers.legacy.SGD(0.01),
        )
        setup.build(Initial())

        def step(x, y):
            loss, grads, updates = setup.forward(x, y)
            grads = [tpu_ops.cross_replica_sum(gr) / replicas for gr in grads]
            train = setup.apply(grads)
            with tf.control_dependencies([train] + updates):
                return [tf.identity(loss)]

        data = [batch(name, r) for r in range(replicas)]
        ph = [[tf1.placeholder(tf.float32, v.shape, name=f"in{k}_{r}") for k, v in enumerate(b)] for r, b in enumerate(data)]
        outputs = tpu.replicate(step, ph)
        graph_def = step_graph(g, [t for replica in outputs for t in replica], tf1.global_variables())
    atomic_write(os.path.join(out, model_file(name, replicas) + ".pb"), graph_def.SerializeToString())
    feeds = {f"in{k}_{r}:0": v.tolist() for r, b in enumerate(data) for k, v in enumerate(b)}
    atomic_write(os.path.join(out, model_file(name, replicas) + ".feeds.json"), json.dumps(feeds).encode())
    print(json.dumps({"nodes": len(graph_def.node), "bytes": graph_def.ByteSize()}))


def child_tf(name, jit, steps, replicas=REPLICAS):
    """Times the step of `name` on the batch of `replicas` replicas in TensorFlow (`jit`: with
    jit_compile=True); the global batch by default."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    data = [batch(name, r) for r in range(replicas)]
    x = tf.constant(np.concatenate([d[0] for d in data]))
    y = tf.constant(np.concatenate([d[1] for d in data]))
    model = make_model(name, keras)
    loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)
    opt = keras.optimizers.legacy.SGD(0.01)

    @tf.function(jit_compile=jit)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    # Tracing first, then the first call: with jit_compile it is XLA's compile and one step.
    start, cpu = time.perf_counter(), time.process_time()
    step.get_concrete_function(x, y)
    trace, trace_cpu = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    step(x, y).numpy()
    call, call_cpu = time.perf_counter() - start, time.process_time() - cpu
    for _ in range(2):
        step(x, y).numpy()
    times, cpus = [], []
    for _ in range(steps):
        start, cpu = time.perf_counter(), time.process_time()
        step(x, y).numpy()
        times.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    step_s, step_cpu = float(np.median(times)), float(np.median(cpus))
    print(json.dumps({"first_s": trace + call, "step_s": step_s, "step_cpu_s": step_cpu, "trace_s": trace,
                      "compile_s": max(call - step_s, 0.0), "compile_cpu_s": max(call_cpu - step_cpu, 0.0)}))


def atomic_write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def measure(cmd, env=None):
    """Runs `cmd`; returns (wall seconds, stdout). Fails loudly."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    return wall, out.decode()


def peak_of(cmd, env=None):
    """Runs `cmd`: (wall seconds, peak RSS in MB, stdout, stderr, CPU seconds), the child's own."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # wait4 gives this child's own rusage; read its pipes on threads so it cannot block on them.
    import threading

    chunks = {"out": [], "err": []}
    readers = [
        threading.Thread(target=lambda s=s, k=k: chunks[k].append(s.read()))
        for s, k in ((proc.stdout, "out"), (proc.stderr, "err"))
    ]
    for t in readers:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    for t in readers:
        t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    out, err = b"".join(chunks["out"]).decode(), b"".join(chunks["err"]).decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    return wall, usage.ru_maxrss / 1024, out, err, usage.ru_utime + usage.ru_stime


def phases(err):
    """The `run --time-passes` lines of a PJRT run: phase -> (wall ms, cpu ms or None)."""
    found = {}
    for line in err.splitlines():
        for phase in ("pjrt plugin load", "pjrt client", "stablehlo emit", "xla compile", "transfers", "execute"):
            rest = line[len(phase):].split() if line.startswith(phase + " ") else None
            if rest and rest[1] == "ms" and rest[2] == "wall":
                cpu = float(rest[3]) if len(rest) > 5 and rest[4] == "ms" and rest[5] == "cpu" else None
                found[phase] = (float(rest[0]), cpu)
    return found


def ours(binary, pb, feeds, backend, steps, extra=()):
    """`run --steps 1` and `run --steps 1+N` on `backend`: first-run wall, per-step seconds, peak MB.

    On PJRT both runs use a fresh compile cache of their own: the first compiles (its wall is what
    a new user waits for), the second loads the compiled program (its wall less N steps is a
    second run's first step). The per-step time is the difference of the two runs' `execute`
    totals (`--time-passes`) over N, so the compile time's variance does not enter it."""
    base = [binary, "run", pb, "--backend", backend, *extra]
    if feeds:
        base += ["--feeds", feeds]
    if backend != "pjrt":
        first, peak1, _, _, cpu1 = peak_of(base + ["--steps", "1"])
        more, peak, _, _, cpu2 = peak_of(base + ["--steps", str(1 + steps)])
        return {"first_s": first, "step_s": max(more - first, 0.0) / steps,
                "step_cpu_s": max(cpu2 - cpu1, 0.0) / steps, "peak_mb": max(peak1, peak)}
    import shutil
    import tempfile

    cache = tempfile.mkdtemp(prefix="tf_models-cache-")
    try:
        base += ["--time-passes", "--compile-cache", cache]
        first, peak1, _, err1, _ = peak_of(base + ["--steps", "1"])
        more, peak, _, err2, _ = peak_of(base + ["--steps", str(1 + steps)])
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    p1, p2 = phases(err1), phases(err2)
    if "execute" not in p1 or "execute" not in p2:
        raise SystemExit(f"no `execute` line in the --time-passes output of {' '.join(base)}:\n{err2[-2000:]}")
    step_ms = (p2["execute"][0] - p1["execute"][0]) / steps
    step_cpu_ms = (p2["execute"][1] - p1["execute"][1]) / steps
    return {
        "first_s": first,
        "step_s": step_ms / 1e3,
        "step_cpu_s": step_cpu_ms / 1e3,
        "compile_s": p1["xla compile"][0] / 1e3,
        "compile_cpu_s": (p1["xla compile"][1] or 0.0) / 1e3,
        "emit_s": p1["stablehlo emit"][0] / 1e3,
        "cached_first_s": more - steps * step_ms / 1e3,
        "peak_mb": max(peak1, peak),
    }


def tf_step_rows(cache, binary, steps, paths):
    """The 4-layer benches/tf_step.py step: TF, TF auto-jit (as tf_xla), simulator, PJRT."""
    rows = {}
    out = os.path.join(cache, "tf_step")
    jit = dict(os.environ, TF_XLA_FLAGS="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    for path, env in (("tf", None), ("tf_xla", jit)):
        if path in paths:
            d = out if path == "tf" else out + "_jit"
            _, peak, _, _, _ = peak_of([sys.executable, os.path.join(HERE, "tf_step.py"), d, "--steps", str(max(steps, 20))], env)
            meta = json.load(open(os.path.join(d, "step.json")))
            rows[path] = {"step_s": meta["tf_step_ms"] / 1e3, "step_cpu_s": meta["tf_step_cpu_ms"] / 1e3,
                          "peak_mb": peak}
    meta = json.load(open(os.path.join(out, "step.json")))
    import numpy as np

    feeds = {k: np.asarray(v["values"], np.float32).reshape(v["shape"]).tolist() for k, v in meta["feeds"].items()}
    atomic_write(os.path.join(out, "feeds.json"), json.dumps(feeds).encode())
    for path in ("sim", "pjrt"):
        if path in paths:
            rows[path] = ours(binary, os.path.join(out, "step.pb"), os.path.join(out, "feeds.json"),
                              path, steps, ["--fetch", "^" + meta["train"]])
    return rows


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child-build":
        replicas = int(sys.argv[4]) if len(sys.argv) > 4 else REPLICAS
        return child_build(sys.argv[2], sys.argv[3], replicas)
    if len(sys.argv) > 1 and sys.argv[1] == "--child-tf":
        replicas = int(sys.argv[5]) if len(sys.argv) > 5 else REPLICAS
        return child_tf(sys.argv[2], sys.argv[3] == "jit", int(sys.argv[4]), replicas)
    models = arg("--models", "resnet50,mobilenet_v2,transformer,lstm,tf_step").split(",")
    paths = arg("--paths", "tf,tf_xla,sim,pjrt").split(",")
    steps = int(arg("--steps", "5"))
    binary = arg("--bin", os.path.join(ROOT, "target", "release", "tpu-rewrite"))
    cache = arg("--cache", os.path.join(os.path.expanduser("~"), ".cache", "tpu-rewrite", "bench-models"))
    if any(p.removesuffix("_1r") in ("sim", "pjrt") for p in paths) and not os.path.exists(binary):
        raise SystemExit(f"{binary} is missing: build it with `cargo build --release` or pass --bin")
    os.makedirs(cache, exist_ok=True)
    results = {}
    for name in models:
        if name == "tf_step":
            rows = tf_step_rows(cache, binary, steps, paths)
        else:
            rows = {}
            for path in paths:
                replicas = 1 if path.endswith("_1r") else REPLICAS
                stem = model_file(name, replicas)
                pb = os.path.join(cache, stem + ".pb")
                if path in ("sim", "pjrt", "sim_1r", "pjrt_1r") and not os.path.exists(pb):
                    _, out = measure([sys.executable, __file__, "--child-build", name, cache, str(replicas)])
                    print(f"{stem}: made {out.strip()}", file=sys.stderr)
                if path in ("tf", "tf_xla", "tf_1r", "tf_xla_1r"):
                    mode = "jit" if path.startswith("tf_xla") else "graph"
                    _, peak, out, _, _ = peak_of(
                        [sys.executable, __file__, "--child-tf", name, mode, str(max(steps, 10)), str(replicas)])
                    rows[path] = dict(json.loads(out.strip().splitlines()[-1]), peak_mb=peak)
                else:
                    rows[path] = ours(binary, pb, os.path.join(cache, stem + ".feeds.json"), path.removesuffix("_1r"), steps)
        results[name] = rows
        for path, r in rows.items():
            first = f"{r['first_s']:.2f} s" if "first_s" in r else "-"
            cpu = f"{r['step_cpu_s'] * 1e3:9.1f} ms" if "step_cpu_s" in r else "-"
            more = ""
            if "emit_s" in r:
                more = (f"  (compile {r['compile_s']:.2f} s / {r['compile_cpu_s']:.2f} s cpu,"
                        f" emit {r['emit_s']:.2f} s, cached first {r['cached_first_s']:.2f} s)")
            elif "trace_s" in r:
                more = f"  (trace {r['trace_s']:.2f} s, compile {r['compile_s']:.2f} s / {r['compile_cpu_s']:.2f} s cpu)"
            # A difference of two runs at or below zero is the load's noise, not a step time.
            step = f"{r['step_s'] * 1e3:9.1f} ms" if r["step_s"] > 0 else "below noise"
            print(f"{name:13} {path:7} step {step:>12}  cpu {cpu:>12}  first {first:>9}  peak {r['peak_mb']:7.0f} MB{more}",
                  flush=True)
    if "--json" in sys.argv:
        atomic_write(arg("--json", ""), json.dumps(results, indent=1).encode())


if __name__ == "__main__":
    main()
