"""Writes tests/tf/corpus/ops/lists.{pbtxt,json}: the gradients of the TensorList ops (as
TensorFlow's `list_ops.py` registers them) and TensorListSplit/TensorListConcatV2. A TensorList
cannot be fed, so each case is a small chain of ops that starts and ends with dense tensors
(`TensorListFromTensor` or `TensorListSplit` in, `TensorListStack`, `TensorListGetItem`,
`TensorListGather` or `TensorListConcatV2` out).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_lists.py
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case

raw = tf.raw_ops


def f32(seed, *shape):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape).astype(np.float32)


def i32(*v):
    return np.array(v, np.int32)


def i64(*v):
    return np.array(v, np.int64)


def from_tensor(x, shape):
    return raw.TensorListFromTensor(tensor=x, element_shape=shape)


def stack(l, shape, dtype, n):
    return raw.TensorListStack(input_handle=l, element_shape=shape, element_dtype=dtype, num_elements=n)


def known(t, shape):
    """`t` with its static shape set (a graph-mode shape function leaves list results' leading
    dimension unknown; the harness puts only fully known outputs in the loss)."""
    t.set_shape(shape)
    return t


def from_tensor_stack(x, element_shape, name=None):
    with tf.name_scope(name or "case"):
        return stack(from_tensor(x, element_shape), element_shape, x.dtype, x.shape[0])


def get_item(x, element_shape, index, name=None):
    with tf.name_scope(name or "case"):
        l = from_tensor(x, element_shape)
        return raw.TensorListGetItem(input_handle=l, index=index, element_shape=element_shape, element_dtype=x.dtype)


def set_item(x, y, element_shape, index, name=None):
    with tf.name_scope(name or "case"):
        l = raw.TensorListSetItem(input_handle=from_tensor(x, element_shape), index=index, item=y)
        return stack(l, element_shape, x.dtype, x.shape[0])


def push_back(x, y, element_shape, name=None):
    with tf.name_scope(name or "case"):
        l = raw.TensorListPushBack(input_handle=from_tensor(x, element_shape), tensor=y)
        return stack(l, element_shape, x.dtype, x.shape[0] + 1)


def pop_back(x, element_shape, name=None):
    with tf.name_scope(name or "case"):
        l, item = raw.TensorListPopBack(input_handle=from_tensor(x, element_shape), element_shape=element_shape,
                                        element_dtype=x.dtype)
        return [stack(l, element_shape, x.dtype, x.shape[0] - 1), item]


def gather(x, element_shape, indices, name=None):
    with tf.name_scope(name or "case"):
        return raw.TensorListGather(input_handle=from_tensor(x, element_shape), indices=indices,
                                    element_shape=element_shape, element_dtype=x.dtype)


def concat(x, element_shape, concat_shape, leading_dims, name=None):
    with tf.name_scope(name or "case"):
        out, lengths = raw.TensorListConcatV2(input_handle=from_tensor(x, element_shape), element_shape=concat_shape,
                                              leading_dims=leading_dims, element_dtype=x.dtype)
        return [known(out, [x.shape[0] * x.shape[1]] + x.shape[2:]), lengths]


def split_stack(x, element_shape, lengths, stack_shape, name=None):
    with tf.name_scope(name or "case"):
        l = raw.TensorListSplit(tensor=x, element_shape=element_shape, lengths=lengths)
        return stack(l, stack_shape, x.dtype, lengths.shape[0])


def split_get(x, element_shape, lengths, item_shape, index, name=None):
    with tf.name_scope(name or "case"):
        l = raw.TensorListSplit(tensor=x, element_shape=element_shape, lengths=lengths)
        return raw.TensorListGetItem(input_handle=l, index=index, element_shape=item_shape, element_dtype=x.dtype)


def split_concat(x, element_shape, lengths, name=None):
    with tf.name_scope(name or "case"):
        l = raw.TensorListSplit(tensor=x, element_shape=element_shape, lengths=lengths)
        out, _ = raw.TensorListConcatV2(input_handle=l, element_shape=element_shape, leading_dims=i64(),
                                        element_dtype=x.dtype)
        return known(out, x.shape)


CASES = [
    Case("stack", from_tensor_stack, inputs={"x": f32(1, 3, 2)}, consts={"element_shape": i32(2)}),
    Case("stack_f64", from_tensor_stack, inputs={"x": f32(2, 2, 2, 2).astype(np.float64)},
         consts={"element_shape": i32(2, 2)}),
    Case("get_item", get_item, inputs={"x": f32(3, 3, 2)}, consts={"element_shape": i32(2), "index": np.int32(1)}),
    Case("set_item", set_item, inputs={"x": f32(4, 3, 2), "y": f32(5, 2)},
         consts={"element_shape": i32(2), "index": np.int32(2)}),
    Case("push_back", push_back, inputs={"x": f32(6, 2, 3), "y": f32(7, 3)}, consts={"element_shape": i32(3)}),
    Case("pop_back", pop_back, inputs={"x": f32(8, 3, 2)}, consts={"element_shape": i32(2)}),
    Case("gather", gather, inputs={"x": f32(9, 4, 2)}, consts={"element_shape": i32(2), "indices": i32(3, 0)}),
    Case("concat", concat, inputs={"x": f32(10, 3, 2, 2)},
         consts={"element_shape": i32(2, 2), "concat_shape": i32(-1, 2), "leading_dims": i64()}),
    Case("split_stack", split_stack, inputs={"x": f32(11, 6, 2)},
         consts={"element_shape": i32(-1, 2), "lengths": i64(2, 2, 2), "stack_shape": i32(2, 2)}),
    Case("split_get", split_get, inputs={"x": f32(12, 6, 2)},
         consts={"element_shape": i32(-1, 2), "lengths": i64(3, 3), "item_shape": i32(3, 2), "index": np.int32(1)}),
    Case("split_concat", split_concat, inputs={"x": f32(13, 4, 3)},
         consts={"element_shape": i32(-1, 3), "lengths": i64(2, 2)}),
]

if __name__ == "__main__":
    op_cases.write_family("lists", CASES)
