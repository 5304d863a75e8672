"""One process of `tpu-rewrite run --backend jax-distributed`.

tpu-rewrite writes a job directory (module.mlir, job.json, one .npy per
argument and replica) and starts N copies of this script, one per process
(or, with --coordinator/--num-processes/--process-id, each host's
tpu-rewrite starts its own copy). Each copy joins the coordination
service, checks through its key-value store that every process lowered
the same module (the SHA3-256 of module.mlir; a mismatch ends every
process with exit code 4), compiles the StableHLO module
for the global device assignment tpu-rewrite chose (replica r on the
device it names), feeds the replicas it owns, executes the module `steps`
times (variables are results that replace their arguments), and process 0
gathers every replica's results and writes them as out_<stage>_<i>_<r>.npy
(and variables as var_out_<v>_<r>.npy). A cluster with outside-compilation
ops has several stages: after a stage that hands values to the host, this
script writes them as x_<stage>_<c>_<r>.npy and asks tpu-rewrite on its
stdout (`host <stage> <replicas>`); tpu-rewrite runs the host ops of this
process's replicas, writes the next stage's host values as
h_<stage>_<a>_<r>.npy and answers `ok` on stdin. Each process loads only
its own replicas' argument values and records their size in held_<p>.json.

Usage: tpu_rewrite_launch.py JOB_DIR [--process-id P] [--num-processes N]
       [--coordinator HOST:PORT] --cpu-devices K
An absent --process-id or --coordinator is left to jax.distributed's own
detection (Slurm, Cloud TPU, GKE, MPI).
"""

import argparse
import hashlib
import json
import os
import signal
import sys
import threading
import time


def die_with_parent():
    """Ends this process when tpu-rewrite (its parent) ends, so no copy is orphaned."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: fall back on polling
        pass
    parent = os.getppid()

    def watch():
        while True:
            if os.getppid() != parent:
                os._exit(3)
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True).start()


class HostStepFailed(Exception):
    """tpu-rewrite could not run the host ops between two stages."""


class ModuleMismatch(Exception):
    """Another process lowered a different module."""


def check_same_module(module, me, count, timeout_s):
    """Publishes this process's module hash and compares every process's with process 0's."""
    from jax._src import distributed

    client = distributed.global_state.client
    digest = hashlib.sha3_256(module.encode()).hexdigest()
    client.key_value_set(f"tpu_rewrite/module_sha3/{me}", digest)
    hashes = [client.blocking_key_value_get(f"tpu_rewrite/module_sha3/{p}", timeout_s * 1000) for p in range(count)]
    differ = [p for p, h in enumerate(hashes) if h != hashes[0]]
    if differ:
        listing = ", ".join(f"process {p} has {hashes[p][:16]}" for p in differ)
        raise ModuleMismatch(
            f"the lowered module differs between processes: process 0 has sha3 {hashes[0][:16]}, {listing} "
            f"(this is process {me} of {count}); every process must run the same file with the same flags"
        )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("job")
    p.add_argument("--process-id", type=int, default=None)
    p.add_argument("--num-processes", type=int, default=None)
    p.add_argument("--coordinator", default=None)
    p.add_argument("--init-timeout", type=int, default=60, help="seconds to wait for every process to join")
    p.add_argument("--cpu-devices", type=int, default=0, help="local CPU devices (0: the platform's devices)")
    p.add_argument("--heartbeat-timeout", type=int, default=10)
    a = p.parse_args()
    die_with_parent()
    # The host-step channel to tpu-rewrite is the original stdout; anything
    # else printed to stdout goes to the log instead.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    import numpy as np
    import jax
    import jax.extend.backend

    if a.cpu_devices > 0:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", a.cpu_devices)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=a.coordinator,
        num_processes=a.num_processes,
        process_id=a.process_id,
        heartbeat_timeout_seconds=a.heartbeat_timeout,
        initialization_timeout=a.init_timeout,
    )
    from jax._src.lib import xla_client as xc
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from jax.experimental import multihost_utils

    with open(os.path.join(a.job, "job.json")) as f:
        job = json.load(f)
    stages = job["stages"]
    modules = []
    for stage in stages:
        with open(os.path.join(a.job, stage["module"])) as f:
            modules.append(f.read())
    me = jax.process_index()
    with open(os.path.join(a.job, "process.json"), "w") as f:
        json.dump({"process_index": me, "process_count": jax.process_count()}, f)
    check_same_module("".join(modules), me, jax.process_count(), a.init_timeout)

    # tpu-rewrite's device d is the d-th device in (process, local id) order.
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    replica_devices = [devices[d] for d in job["device_ids"]]
    replicas = len(replica_devices)
    mine = [r for r, d in enumerate(replica_devices) if d.process_index == jax.process_index()]

    options = xc.CompileOptions()
    build = options.executable_build_options
    build.num_replicas = replicas
    build.num_partitions = 1
    build.device_assignment = xc.DeviceAssignment.create(np.array([[d.id] for d in replica_devices]))
    backend = jax.extend.backend.get_backend()
    t = time.perf_counter()
    exes = [backend.compile_and_load(m, xc.DeviceList(tuple(replica_devices)), options) for m in modules]
    compile_s = time.perf_counter() - t

    # One Array per argument over the executable's local devices; each
    # device holds its own replica's value (shards of a "replicated" layout).
    local = [replica_devices[r] for r in mine]
    mesh = Mesh(np.array(local), ("r",))
    sharding = NamedSharding(mesh, PartitionSpec())

    def array(values):
        shards = [jax.device_put(v, d) for v, d in zip(values, local)]
        return jax.make_array_from_single_device_arrays(values[0].shape, sharding, shards)

    def load(files):
        return [np.load(os.path.join(a.job, files[r])) for r in mine]

    # What this process holds of the feeds and host values: its own replicas' only.
    held = {"replicas": mine, "bytes": 0}
    fixed = []
    for stage in stages:
        row = []
        for arg in stage["args"]:
            if arg["kind"] in ("replicated", "host"):
                values = load(arg["files"])
                held["bytes"] += sum(v.nbytes for v in values)
                row.append(array(values))
            else:
                row.append(None)
        fixed.append(row)
    variables = [array(load(v["files"])) for v in job["variables"]]
    with open(os.path.join(a.job, f"held_{me}.json"), "w") as f:
        json.dump(held, f)

    def host_step(k):
        """Hands stage k's carried values to tpu-rewrite, which runs the host ops of this process's replicas."""
        channel.write(f"host {k} {','.join(str(r) for r in mine)}\n")
        channel.flush()
        answer = sys.stdin.readline().strip()
        if answer != "ok":
            raise HostStepFailed(answer.removeprefix("error ") or "tpu-rewrite closed the host channel")

    last = [None] * len(stages)
    step_s = []
    # Compiled and fed: from here on this process is in the step loop.
    open(os.path.join(a.job, f"running_{a.process_id}"), "w").close()
    for _ in range(job["steps"]):
        t = time.perf_counter()
        carried_in = {}
        for k, (stage, exe) in enumerate(zip(stages, exes)):
            args = []
            for i, arg in enumerate(stage["args"]):
                if arg["kind"] == "variable":
                    args.append(variables[arg["variable"]])
                elif arg["kind"] == "carried":
                    args.append(carried_in[i])
                else:
                    args.append(fixed[k][i])
            results = exe.execute_sharded(args).disassemble_into_single_device_arrays()
            for out in results:
                out[0].block_until_ready()
            outputs, carried = stage["outputs"], stage["carried"]
            last[k] = results[:outputs]
            # Variables (the last results) replace their (donated) arguments.
            for j, v in enumerate(stage["variables"]):
                shards = results[outputs + carried + j]
                variables[v] = jax.make_array_from_single_device_arrays(shards[0].shape, sharding, shards)
            if stage["exchange"]:
                for c in range(carried):
                    for r, s in zip(mine, results[outputs + c]):
                        np.save(os.path.join(a.job, f"x_{k}_{c}_{r}.npy"), np.asarray(s))
                host_step(k)
                if k + 1 < len(stages):
                    carried_in = {
                        i: array([np.load(os.path.join(a.job, f"h_{k + 1}_{i}_{r}.npy")) for r in mine])
                        for i, arg in enumerate(stages[k + 1]["args"])
                        if arg["kind"] == "carried"
                    }
        step_s.append(time.perf_counter() - t)

    # Process 0 gathers every replica's results.
    def gather(shards):
        return multihost_utils.process_allgather(np.stack([np.asarray(s) for s in shards]))

    owners = multihost_utils.process_allgather(np.array(mine, dtype=np.int32))
    files = []
    for k, outputs in enumerate(last):
        files += [(f"out_{k}_{i}", gather(shards)) for i, shards in enumerate(outputs)]
    for v, var in enumerate(variables):
        by_device = {s.device: s.data for s in var.addressable_shards}
        files.append((f"var_out_{v}", gather([by_device[d] for d in local])))
    if jax.process_index() == 0:
        for prefix, g in files:
            for p in range(g.shape[0]):
                for k in range(g.shape[1]):
                    np.save(os.path.join(a.job, f"{prefix}_{int(owners[p][k])}.npy"), g[p][k])
        with open(os.path.join(a.job, "timing.json"), "w") as f:
            json.dump({"compile_s": compile_s, "step_s": step_s}, f)
    jax.distributed.shutdown()


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except ModuleMismatch as e:
        print(f"tpu_rewrite_launch: ModuleMismatch: {e}", file=sys.stderr, flush=True)
        # Every process found the mismatch: leave together, so that no
        # process loses the coordinator while it is still reading.
        try:
            import jax

            jax.distributed.shutdown()
        except BaseException:
            pass
        os._exit(4)
    except BaseException as e:  # one line for tpu-rewrite, then a non-zero exit
        print(f"tpu_rewrite_launch: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        os._exit(1)
