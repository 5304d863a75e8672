"""Writes tests/tf/corpus/ops/tensor_array.{pbtxt,json}: TensorFlow 1's TensorArray*V3 ops and the
gradients `tensor_array_grad.py` registers for them. A TensorArray cannot be fed, so each case is a
small chain of raw ops that starts and ends with dense tensors (`TensorArrayV3`, then writes,
scatters or splits, then reads, gathers or a concat). The gradients are taken with TensorFlow 1's
control flow (control flow v2 off), as a TF1 program builds them: `tf.gradients` then makes
`TensorArrayGradV3` arrays on the raw handles.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_tensor_array.py
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case

raw = tf.raw_ops
tf.compat.v1.disable_control_flow_v2()


def f32(seed, *shape):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape).astype(np.float32)


def i32(*v):
    return np.array(v, np.int32)


def i64(*v):
    return np.array(v, np.int64)


def array(size, dtype, element_shape=None, dynamic_size=False, clear_after_read=True):
    return raw.TensorArrayV3(size=size, dtype=dtype, element_shape=element_shape, dynamic_size=dynamic_size,
                             clear_after_read=clear_after_read)


def known(t, shape):
    """`t` with its static shape set (the harness puts only fully known outputs in the loss)."""
    t.set_shape(shape)
    return t


def write_gather(x, order, name=None):
    """Each row of `x` written (in the order `order`), then all gathered, and the size."""
    with tf.name_scope(name or "case"):
        n = x.shape[0]
        h, flow = array(n, x.dtype, x.shape[1:])
        for i in order:
            flow = raw.TensorArrayWriteV3(handle=h, index=i, value=x[i], flow_in=flow)
        out = raw.TensorArrayGatherV3(handle=h, indices=np.arange(n, dtype=np.int32), flow_in=flow, dtype=x.dtype,
                                      element_shape=x.shape[1:])
        size = raw.TensorArraySizeV3(handle=h, flow_in=flow)
        raw.TensorArrayCloseV3(handle=h)
        return [known(out, x.shape), size]


def write_read(a, b, name=None):
    """Two writes, reads in the other order; element 0 read twice (its gradients add)."""
    with tf.name_scope(name or "case"):
        h, flow = array(2, a.dtype, a.shape, clear_after_read=False)
        flow = raw.TensorArrayWriteV3(handle=h, index=0, value=a, flow_in=flow)
        flow = raw.TensorArrayWriteV3(handle=h, index=1, value=b, flow_in=flow)
        r1 = raw.TensorArrayReadV3(handle=h, index=1, flow_in=flow, dtype=a.dtype)
        r0 = raw.TensorArrayReadV3(handle=h, index=0, flow_in=flow, dtype=a.dtype)
        again = raw.TensorArrayReadV3(handle=h, index=0, flow_in=flow, dtype=a.dtype)
        return [known(r1, a.shape), known(r0 * again, a.shape)]


def scatter_gather(x, indices, picks, size, name=None):
    """Rows of `x` scattered to `indices` of an array of `size`, then the rows at `picks` gathered
    (rows written but not gathered get no gradient)."""
    with tf.name_scope(name or "case"):
        h, flow = array(size, x.dtype, x.shape[1:])
        flow = raw.TensorArrayScatterV3(handle=h, indices=indices, value=x, flow_in=flow)
        out = raw.TensorArrayGatherV3(handle=h, indices=picks, flow_in=flow, dtype=x.dtype, element_shape=x.shape[1:])
        return known(out, [picks.shape[0]] + x.shape[1:].as_list())


def split_concat(x, lengths, name=None):
    """`x` split into rows of `lengths`, then joined again, with the lengths."""
    with tf.name_scope(name or "case"):
        h, flow = array(lengths.shape[0], x.dtype, None)
        flow = raw.TensorArraySplitV3(handle=h, value=x, lengths=lengths, flow_in=flow)
        out, lens = raw.TensorArrayConcatV3(handle=h, flow_in=flow, dtype=x.dtype, element_shape_except0=x.shape[1:])
        return [known(out, x.shape) * 2.0, lens]


def split_read(x, lengths, index, name=None):
    """`x` split, one part read; its square, so the gradient depends on the value."""
    with tf.name_scope(name or "case"):
        h, flow = array(lengths.shape[0], x.dtype, None)
        flow = raw.TensorArraySplitV3(handle=h, value=x, lengths=lengths, flow_in=flow)
        part = raw.TensorArrayReadV3(handle=h, index=index, flow_in=flow, dtype=x.dtype)
        part = known(part, [int(x.shape[0]) // lengths.shape[0]] + x.shape[1:].as_list())
        return part * part


def scatter_concat(x, indices, name=None):
    """Rows of `x` scattered, then joined (each element is one row of `x`)."""
    with tf.name_scope(name or "case"):
        h, flow = array(x.shape[0], x.dtype, [1] + x.shape[1:].as_list())
        parts = tf.expand_dims(x, 1)
        flow = raw.TensorArrayScatterV3(handle=h, indices=indices, value=parts, flow_in=flow)
        out, lens = raw.TensorArrayConcatV3(handle=h, flow_in=flow, dtype=x.dtype, element_shape_except0=x.shape[1:])
        return [known(out, x.shape), lens]


def dynamic_write_gather(x, name=None):
    """A `dynamic_size` array of size 1 that grows with each write."""
    with tf.name_scope(name or "case"):
        n = x.shape[0]
        h, flow = array(1, x.dtype, x.shape[1:], dynamic_size=True)
        for i in range(n):
            flow = raw.TensorArrayWriteV3(handle=h, index=i, value=tf.sin(x[i]), flow_in=flow)
        out = raw.TensorArrayGatherV3(handle=h, indices=np.arange(n, dtype=np.int32)[::-1].copy(), flow_in=flow,
                                      dtype=x.dtype, element_shape=x.shape[1:])
        return [known(out, x.shape), raw.TensorArraySizeV3(handle=h, flow_in=flow)]


CASES = [
    Case("write_gather", write_gather, inputs={"x": f32(1, 3, 2)}, attrs={"order": [2, 0, 1]}),
    Case("write_gather_f64", write_gather, inputs={"x": f32(2, 2, 2, 2).astype(np.float64)}, attrs={"order": [0, 1]}),
    Case("write_read", write_read, inputs={"a": f32(3, 2, 2), "b": f32(4, 2, 2)}),
    Case("scatter_gather", scatter_gather, inputs={"x": f32(5, 3, 2)},
         consts={"indices": i32(2, 0, 4), "picks": i32(4, 0)}, attrs={"size": 5}),
    Case("split_concat", split_concat, inputs={"x": f32(6, 6, 2)}, consts={"lengths": i64(2, 2, 2)}),
    Case("split_read", split_read, inputs={"x": f32(7, 4, 3)}, consts={"lengths": i64(2, 2), "index": np.int32(1)}),
    Case("scatter_concat", scatter_concat, inputs={"x": f32(8, 3, 2)}, consts={"indices": i32(1, 2, 0)}),
    Case("dynamic_write_gather", dynamic_write_gather, inputs={"x": f32(9, 3, 2)}),
]

if __name__ == "__main__":
    op_cases.write_family("tensor_array", CASES)
