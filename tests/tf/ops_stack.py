"""Writes tests/tf/corpus/ops/stack.{pbtxt,json}: TensorFlow 1's stacks (`StackV2`, `StackPushV2`,
`StackPopV2`, `StackCloseV2`), the accumulators of control-flow-v1 while-loop gradients. A stack
lives only in its resource handle, so each case is a small chain of raw ops: a `StackV2`, pushes,
then pops, ordered by control dependencies (TensorFlow runs stateful ops in any order otherwise).
TensorFlow registers no gradient for the stack ops (they are not differentiable), so no case asks
for one.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_stack.py
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case

raw = tf.raw_ops


def f32(seed, *shape):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape).astype(np.float32)


def known(t, shape):
    """`t` with its static shape set (the harness compares only fully known outputs)."""
    t.set_shape(shape)
    return t


def push_pop(xs, max_size, name=None):
    """Every tensor of `xs` pushed in order, then as many pops (last in, first out), then a close."""
    with tf.name_scope(name or "case"):
        dtype = xs[0].dtype
        h = raw.StackV2(max_size=max_size, elem_type=dtype, stack_name="acc")
        last = []
        for x in xs:
            with tf.control_dependencies(last):
                last = [raw.StackPushV2(handle=h, elem=x)]
        out = []
        for x in reversed(xs):
            with tf.control_dependencies(last):
                p = known(raw.StackPopV2(handle=h, elem_type=dtype), x.shape)
            out.append(p)
            last = [p]
        with tf.control_dependencies(last):
            raw.StackCloseV2(handle=h)
        return out


def interleaved(a, b, c, max_size, name=None):
    """Push a, push b, pop (b), push c, pop (c), pop (a); the pushes' own outputs are used too."""
    with tf.name_scope(name or "case"):
        h = raw.StackV2(max_size=max_size, elem_type=a.dtype, stack_name="")
        pa = raw.StackPushV2(handle=h, elem=a * 2.0)
        with tf.control_dependencies([pa]):
            pb = raw.StackPushV2(handle=h, elem=b)
        with tf.control_dependencies([pb]):
            q1 = raw.StackPopV2(handle=h, elem_type=a.dtype)
        with tf.control_dependencies([q1]):
            pc = raw.StackPushV2(handle=h, elem=tf.sin(c), swap_memory=True)
        with tf.control_dependencies([pc]):
            q2 = raw.StackPopV2(handle=h, elem_type=a.dtype)
        with tf.control_dependencies([q2]):
            q3 = raw.StackPopV2(handle=h, elem_type=a.dtype)
        return [known(q1, a.shape) * known(q2, a.shape), known(q3, a.shape), pa + pb]


def two_stacks(x, y, name=None):
    """Two stacks of different dtypes used side by side (each keeps its own elements)."""
    with tf.name_scope(name or "case"):
        h1 = raw.StackV2(max_size=np.int32(2), elem_type=x.dtype)
        h2 = raw.StackV2(max_size=np.int32(2), elem_type=y.dtype)
        p1 = raw.StackPushV2(handle=h1, elem=x)
        p2 = raw.StackPushV2(handle=h2, elem=y)
        with tf.control_dependencies([p1]):
            p3 = raw.StackPushV2(handle=h1, elem=x + 1.0)
        with tf.control_dependencies([p2]):
            p4 = raw.StackPushV2(handle=h2, elem=y * y)
        with tf.control_dependencies([p3]):
            a1 = raw.StackPopV2(handle=h1, elem_type=x.dtype)
        with tf.control_dependencies([a1]):
            a2 = raw.StackPopV2(handle=h1, elem_type=x.dtype)
        with tf.control_dependencies([p4]):
            b1 = raw.StackPopV2(handle=h2, elem_type=y.dtype)
        return [known(a1, x.shape) - known(a2, x.shape), known(b1, y.shape)]


CASES = [
    Case("push_pop", push_pop, inputs={"xs": [f32(1, 2, 3), f32(2, 2, 3), f32(3, 2, 3)]},
         consts={"max_size": np.int32(3)}, grad=False),
    Case("push_pop_f64", push_pop, inputs={"xs": [f32(4, 4).astype(np.float64), f32(5, 4).astype(np.float64)]},
         consts={"max_size": np.int32(5)}, grad=False),
    Case("push_pop_i32", push_pop, inputs={"xs": [np.array([1, -2, 3], np.int32), np.array([4, 5, -6], np.int32)]},
         consts={"max_size": np.int32(2)}, grad=False),
    Case("interleaved", interleaved, inputs={"a": f32(6, 3), "b": f32(7, 3), "c": f32(8, 3)},
         consts={"max_size": np.int32(2)}, grad=False),
    Case("two_stacks", two_stacks, inputs={"x": f32(9, 2, 2), "y": f32(10, 3).astype(np.float64)}, grad=False),
]

if __name__ == "__main__":
    op_cases.write_family("stack", CASES)
