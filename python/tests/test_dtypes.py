"""Every dtype crosses both ways: fed as a NumPy array, returned as one of the same dtype."""

import ml_dtypes
import numpy as np
import pytest

import tpu_rewrite as tr

CASES = [
    ("f32", np.float32),
    ("f64", np.float64),
    ("f16", np.float16),
    ("bf16", ml_dtypes.bfloat16),
    ("i8", np.int8),
    ("u8", np.uint8),
    ("i32", np.int32),
    ("i64", np.int64),
    ("bool", np.bool_),
]


def identity_graph(dtype):
    return f"""graph @main {{
  %a = Placeholder() {{dtype = {dtype}, shape = shape[2, 3]}}
  %b = Placeholder() {{dtype = {dtype}, shape = shape[2, 3]}}
  replicate (num_replicas = 2) (%x = [%a, %b]) {{
    %y = Identity(%x) {{T = {dtype}}}
    return %y
  }}
}}
"""


@pytest.mark.parametrize("name,np_dtype", CASES)
def test_dtype_round_trip(name, np_dtype):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((2, 3)) * 50).astype(np_dtype)
    b = (rng.standard_normal((2, 3)) * 50).astype(np_dtype)
    result = tr.run(tr.load(identity_graph(name)), feeds={"a:0": a, "b:0": b}, topology="1x2")
    got = result["y:0"]
    assert got.dtype == np.dtype(np_dtype)
    assert got.shape == (2, 2, 3)
    np.testing.assert_array_equal(got[0], a)
    np.testing.assert_array_equal(got[1], b)


def test_a_non_contiguous_feed_is_read_in_order():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = base.T[:2, :3]  # a strided view
    b = np.ascontiguousarray(a) + 1
    result = tr.run(tr.load(identity_graph("f32")), feeds={"a:0": a, "b:0": b}, topology="1x2")
    np.testing.assert_array_equal(result["y:0"][0], a)
