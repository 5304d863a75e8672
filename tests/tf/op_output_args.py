"""Writes src/tf/op_output_args.rs: the output argument names of the ops
tpu-rewrite knows, read from TensorFlow's op registry.

Usage: python tests/tf/op_output_args.py OPS.txt > src/tf/op_output_args.rs
(OPS.txt: one op type per line; ops TensorFlow does not register are left
out). The table is committed; rerun this when an op is added.
"""

import sys

from tensorflow.python.framework import op_def_registry
import tensorflow as tf

names = sorted({line.strip() for line in open(sys.argv[1]) if line.strip()})
rows = []
for name in names:
    op = op_def_registry.get(name)
    if op is None:
        continue
    args = [a.name for a in op.output_arg]
    lists = [a.name for a in op.output_arg if a.number_attr or a.type_list_attr]
    if len(args) > 1 and lists:
        sys.exit(f"{name}: several output arguments, some of them lists: not in the table's form")
    rows.append((name, args))

print("//! TensorFlow's output argument names of the ops tpu-rewrite knows, for")
print("//! the `node:arg:index` tensor names of a FunctionDef's body.")
print("//!")
print(f"//! Generated from TensorFlow {tf.__version__}'s op registry by")
print("//! `tests/tf/op_output_args.py`; do not edit. An op with one output")
print("//! argument (a list or not) names its tensor `k` as `arg:k`; an op with")
print("//! several names tensor `k` as `args[k]:0` (each is a single tensor).")
print()
print("/// `(op type, output argument names)`, sorted by op type.")
print("pub(super) const OUTPUT_ARGS: &[(&str, &[&str])] = &[")
for name, args in rows:
    quoted = ", ".join(f'"{a}"' for a in args)
    print(f'    ("{name}", &[{quoted}]),')
print("];")
