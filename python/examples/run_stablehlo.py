"""Runs a StableHLO file written by `tpu-rewrite lower --format stablehlo -o
step.mlir` in JAX, one CPU device per replica, from its sidecar
`step.mlir.json` alone (docs/xla.md, "the StableHLO file in JAX").

The sidecar names every argument of `@main`: a `feed` takes each replica's
tensor (`replica_feeds`) from `--feeds` (the JSON `tpu-rewrite run --feeds`
reads: tensor name to nested list), a `host_value` its one value from the
same file, and a `variable` its value from `--variables DIR` (the `.npy`
files `tpu-rewrite run --npy-dir` writes under `variables/`:
`<name>.npy`, or `<name>_replica_<r>.npy` per replica). A missing value is
an error; nothing defaults to zeros. The script runs `--steps` steps (a
variable's result becomes its next argument, as `tf.aliasing_output`
says), prints every result as JSON (`outputs` and `variables`, each
`{"name", "per_replica"}`) and, with `--compare RUN.json` (the output of
`tpu-rewrite run --json`), checks that every output and variable there
equals JAX's to within `--rtol`/`--atol`: exit 1 and the differences when
one does not.
"""

import argparse
import json
import os
import sys


def fail(message):
    print(f"run_stablehlo: {message}", file=sys.stderr)
    sys.exit(1)


DTYPES = {
    "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "bool": "bool", "c64": "complex64", "c128": "complex128",
}


def numpy_dtype(name):
    import numpy as np
    import ml_dtypes

    if name not in DTYPES:
        fail(f"dtype {name!r} is not one this script feeds")
    if name == "bf16":
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(DTYPES[name])


def value_of(values, shape, dtype, what):
    import numpy as np

    array = np.asarray(values, dtype=dtype)
    if array.size != int(np.prod(shape, dtype=np.int64)):
        fail(f"{what} has {array.size} element(s); the module takes shape {shape}")
    return array.reshape(shape)


def arguments(module, feeds, variables_dir):
    """Each argument of `@main` as one numpy array per replica."""
    import numpy as np

    replicas = module["num_replicas"]
    args = []
    for arg in module["arguments"]:
        name, kind, shape = arg["name"], arg["kind"], arg["shape"]
        dtype = numpy_dtype(arg["dtype"])
        if kind == "feed":
            names = arg.get("replica_feeds") or [name] * replicas
            per = []
            for tensor in names:
                if tensor not in feeds:
                    fail(f"argument {name!r} needs feed {tensor!r}: give it in --feeds")
                per.append(value_of(feeds[tensor], shape, dtype, f"feed {tensor!r}"))
            args.append(per)
        elif kind == "host_value":
            if name not in feeds:
                fail(f"argument {name!r} (a host value) needs a value: give it in --feeds")
            args.append([value_of(feeds[name], shape, dtype, f"host value {name!r}")] * replicas)
        elif kind == "variable":
            if variables_dir is None:
                fail(f"argument {name!r} is a variable: give its value with --variables DIR")
            stem = os.path.join(variables_dir, name.replace("/", "_").replace(":", "_"))
            if os.path.exists(stem + ".npy"):
                per = [np.load(stem + ".npy")] * replicas
            else:
                files = [f"{stem}_replica_{r}.npy" for r in range(replicas)]
                missing = [f for f in files if not os.path.exists(f)]
                if missing:
                    fail(f"no value for variable {name!r}: {stem}.npy does not exist")
                per = [np.load(f) for f in files]
            args.append([value_of(v, shape, dtype, f"variable {name!r}") for v in per])
        else:
            fail(f"argument {name!r} is of kind {kind!r}: only single-stage modules run here")
    return args


def run(text, module, args, steps):
    """Compiles `text` for one CPU device per replica and runs `steps` steps."""
    import numpy as np
    import jax
    import jax.extend.backend
    from jax._src.lib import xla_client as xc
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    replicas = module["num_replicas"]
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", replicas)
    devices = jax.devices()[:replicas]
    if len(devices) < replicas:
        fail(f"the module has {replicas} replicas; JAX gave {len(devices)} CPU devices")
    options = xc.CompileOptions()
    build = options.executable_build_options
    build.num_replicas = replicas
    build.num_partitions = 1
    build.device_assignment = xc.DeviceAssignment.create(np.array([[d.id] for d in devices]))
    backend = jax.extend.backend.get_backend()
    exe = backend.compile_and_load(text, xc.DeviceList(tuple(devices)), options)
    sharding = NamedSharding(Mesh(np.array(devices), ("r",)), PartitionSpec())

    def array(per_replica):
        shards = [jax.device_put(v, d) for v, d in zip(per_replica, devices)]
        return jax.make_array_from_single_device_arrays(per_replica[0].shape, sharding, shards)

    live = [array(per) for per in args]
    results = module["results"]
    out = None
    for _ in range(steps):
        out = exe.execute_sharded(live).disassemble_into_single_device_arrays()
        # A variable's result is its argument in the next step.
        for i, result in enumerate(results):
            if result["kind"] == "variable":
                live[result["alias"]] = jax.make_array_from_single_device_arrays(
                    out[i][0].shape, sharding, out[i])
    return [[np.asarray(s) for s in shards] for shards in out]


def compare(results, values, run_json, rtol, atol):
    """The differences between `tpu-rewrite run --json` and JAX's values."""
    import numpy as np

    mine = {(r["kind"], r["name"]): v for r, v in zip(results, values)}
    problems = []
    checked = 0
    for kind, key in (("output", "outputs"), ("variable", "variables")):
        for entry in run_json.get(key, []):
            name = entry["name"]
            if (kind, name) not in mine:
                problems.append(f"{kind} {name!r} of the run is not a result of the module")
                continue
            per = [np.asarray(v, dtype=np.float64) for v in mine[(kind, name)]]
            if "per_replica" in entry:
                expected = [np.asarray(v, dtype=np.float64) for v in entry["per_replica"]]
                got = per
            else:
                op = entry.get("reduce_op")
                expected = [np.asarray(entry["value"], dtype=np.float64)]
                if op == "SUM":
                    got = [np.sum(per, axis=0)]
                elif op == "MEAN":
                    got = [np.mean(per, axis=0)]
                else:
                    got = per
                    expected = expected * len(per)
            for r, (g, e) in enumerate(zip(got, expected)):
                checked += 1
                if g.shape != e.shape or not np.allclose(g, e, rtol=rtol, atol=atol):
                    problems.append(f"{kind} {name!r} (replica {r}): JAX gives {g.tolist()}, run gave {e.tolist()}")
    if checked == 0:
        problems.append("the run's JSON has no output or variable to compare")
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mlir", help="the StableHLO file (its sidecar is MLIR.json)")
    p.add_argument("--feeds", help="JSON: tensor name to value, for feed and host_value arguments")
    p.add_argument("--variables", help="directory of <name>.npy values for variable arguments")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--compare", help="`tpu-rewrite run --json` output to check JAX's values against")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-6)
    a = p.parse_args()
    if a.steps < 1:
        fail("--steps must be at least 1")
    try:
        with open(a.mlir) as f:
            text = f.read()
        with open(a.mlir + ".json") as f:
            sidecar = json.load(f)
        feeds = {}
        if a.feeds:
            with open(a.feeds) as f:
                feeds = json.load(f)
        run_json = None
        if a.compare:
            with open(a.compare) as f:
                run_json = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail(str(e))
    modules = sidecar.get("modules", [])
    if len(modules) != 1:
        fail(f"the file has {len(modules)} modules; this script runs a file with one")
    module = modules[0]
    values = run(text, module, arguments(module, feeds, a.variables), a.steps)
    results = module["results"]
    report = {"outputs": [], "variables": []}
    for result, per in zip(results, values):
        key = "variables" if result["kind"] == "variable" else "outputs"
        report[key].append({"name": result["name"], "per_replica": [v.tolist() for v in per]})
    json.dump(report, sys.stdout)
    print()
    if run_json is not None:
        problems = compare(results, values, run_json, a.rtol, a.atol)
        if problems:
            fail("JAX and `tpu-rewrite run` differ:\n  " + "\n  ".join(problems))
        print("run_stablehlo: every output and variable equals `tpu-rewrite run`'s", file=sys.stderr)


if __name__ == "__main__":
    main()
