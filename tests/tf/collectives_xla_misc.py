"""TensorFlow's values of CollectiveReduceV2 across four logical CPU devices, for the replicated
program tests/strategy/xla_collectives.opg (tested by tests/it/xla_misc.rs).

TensorFlow runs CollectiveReduceV2 on CPU devices (its collective executor), so these values are
TensorFlow's own: the feeds of replica r are the program's feeds of replica r, each device runs the
op with group_size 4 (Add then Div: the mean; Min), and the outputs per device are written. The other collectives of the program
(XlaAllReduce, XlaReduceScatter, XlaReplicaId) compile only into XLA programs of several replicas,
which TensorFlow does not run on CPU devices; the test checks them against their definitions.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/collectives_xla_misc.py
Writes tests/tf/corpus/collectives/xla_misc.json: {"tensorflow", "cases": {name: [per-replica T]}}.
"""

import json
import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

REPLICAS = 4
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "collectives", "xla_misc.json")


def x(r):
    return np.array([r + 1.0, -r, 0.5 * r, 2.0 - r * r], np.float32)


def n(r):
    return np.array([r + 1, 3 - 2 * r], np.int32)


def enc(a):
    a = np.asarray(a)
    values = [float(v) for v in a.reshape(-1)] if a.dtype.kind == "f" else [int(v) for v in a.reshape(-1)]
    return {"dtype": a.dtype.name, "shape": list(a.shape), "values": values}


def main():
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    assert len(devices) == REPLICAS, devices

    # Each device's op runs eagerly in a thread of its own (one function holding the four members
    # waits forever on this TensorFlow); the members meet in TensorFlow's collective executor.
    means, mins = [None] * REPLICAS, [None] * REPLICAS

    def member(r):
        with tf.device(devices[r]):
            means[r] = tf.raw_ops.CollectiveReduceV2(
                input=tf.constant(x(r)), group_size=REPLICAS, group_key=1, instance_key=1, ordering_token=[],
                merge_op="Add", final_op="Div", timeout_seconds=60).numpy()
            mins[r] = tf.raw_ops.CollectiveReduceV2(
                input=tf.constant(n(r)), group_size=REPLICAS, group_key=1, instance_key=2, ordering_token=[],
                merge_op="Min", final_op="Id", timeout_seconds=60).numpy()

    threads = [threading.Thread(target=member, args=(r,)) for r in range(REPLICAS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if any(v is None for v in means + mins):
        raise SystemExit("a member of the collective failed (see the messages above)")
    doc = {"tensorflow": tf.__version__,
           "cases": {"cmean": [enc(v) for v in means], "cmin": [enc(v) for v in mins]}}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT + ".tmp", "w") as f:
        f.write(json.dumps(doc, separators=(",", ":")) + "\n")
    os.replace(OUT + ".tmp", OUT)
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
