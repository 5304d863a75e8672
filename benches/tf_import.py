"""TensorFlow's own GraphDef -> MLIR import of a `.pb`, timed.

Usage: python benches/tf_import.py FILE.pb [RUNS]
Prints one line per run: "wall_s cpu_s mlir_bytes". The clock covers reading
the file, decoding the GraphDef and `tf.mlir.experimental.convert_graph_def`
(not `import tensorflow`, which is a fixed start-up cost).
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def main():
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        with open(path, "rb") as f:
            graph_def = tf.compat.v1.GraphDef.FromString(f.read())
        mlir = tf.mlir.experimental.convert_graph_def(graph_def)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{wall:.2f} {cpu:.2f} {len(mlir)}", flush=True)


if __name__ == "__main__":
    main()
