"""Writes src/ir/tf_op_names.txt: every op type TensorFlow registers, one a
line, sorted, headed by the TensorFlow version it was read from.

Usage: tests/tf/.venv/bin/python tests/tf/op_names.py > src/ir/tf_op_names.txt

The list is what `tpu-rewrite check` knows besides its own registry: an op
type in neither is reported as unknown (with a "did you mean"). It is read
from the C API's full op list (every op linked into the TensorFlow runtime,
hidden `_`-prefixed ones included), not from `tf.raw_ops`, which omits ops
without a Python wrapper. The file is committed; rerun this when the pinned
TensorFlow changes.
"""

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api

buffer = c_api.TF_GetAllOpList()
try:
    ops = op_def_pb2.OpList()
    ops.ParseFromString(c_api.TF_GetBuffer(buffer))
finally:
    c_api.TF_DeleteBuffer(buffer)

names = sorted({op.name for op in ops.op})
print(f"# TensorFlow {tf.__version__}: {len(names)} registered op types (tests/tf/op_names.py)")
for name in names:
    print(name)
