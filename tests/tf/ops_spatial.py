"""Writes tests/tf/corpus/ops/spatial.{pbtxt,json}: TensorFlow's numbers for the spatial data-movement ops.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_spatial.py

DepthToSpace, SpaceToDepth, SpaceToBatchND, BatchToSpaceND, SpaceToBatch, BatchToSpace, MirrorPad (both
modes), MirrorPadGrad, DataFormatDimMap and DataFormatVecPermute, on small tensors of several dtypes;
block shapes, paddings and crops are constants (XLA needs them constant). Checked by
tests/it/op_cases.rs (`op_cases::spatial`).
"""

import numpy as np

import op_cases
from op_cases import Case


def values(shape, dtype=np.float32, seed=0):
    """Distinct values in [-2, 2) of `shape`."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-2.0, 2.0, size=shape).astype(dtype)


def ints(shape, dtype=np.int32):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) - 5


def i32(v):
    return np.array(v, dtype=np.int32)


CASES = [
    Case("depth_to_space", "DepthToSpace", inputs={"input": values([1, 2, 2, 8])}, attrs={"block_size": 2}),
    Case("depth_to_space_f64", "DepthToSpace", inputs={"input": values([2, 1, 2, 9], np.float64, 1)},
         attrs={"block_size": 3}),
    Case("depth_to_space_i32", "DepthToSpace", inputs={"input": ints([1, 1, 2, 4])}, attrs={"block_size": 2}),
    Case("space_to_depth", "SpaceToDepth", inputs={"input": values([1, 4, 4, 2], seed=2)}, attrs={"block_size": 2}),
    Case("space_to_depth_f64", "SpaceToDepth", inputs={"input": values([2, 3, 6, 1], np.float64, 3)},
         attrs={"block_size": 3}),
    Case("space_to_batch_nd", "SpaceToBatchND", inputs={"input": values([2, 3, 4, 1], seed=4)},
         consts={"block_shape": i32([2, 2]), "paddings": i32([[1, 0], [0, 2]])}),
    Case("space_to_batch_nd_1d", "SpaceToBatchND", inputs={"input": values([1, 4, 3], np.float64, 5)},
         consts={"block_shape": i32([2]), "paddings": i32([[1, 1]])}),
    Case("batch_to_space_nd", "BatchToSpaceND", inputs={"input": values([8, 2, 3, 1], seed=6)},
         consts={"block_shape": i32([2, 2]), "crops": i32([[1, 0], [0, 2]])}),
    Case("batch_to_space_nd_1d", "BatchToSpaceND", inputs={"input": values([4, 3, 2], np.float64, 7)},
         consts={"block_shape": i32([4]), "crops": i32([[2, 1]])}),
    Case("space_to_batch", "SpaceToBatch", inputs={"input": values([1, 4, 2, 2], seed=8)},
         consts={"paddings": i32([[0, 0], [1, 1]])}, attrs={"block_size": 2}),
    Case("batch_to_space", "BatchToSpace", inputs={"input": values([4, 2, 2, 1], seed=9)},
         consts={"crops": i32([[0, 1], [1, 0]])}, attrs={"block_size": 2}),
    Case("mirror_pad_reflect", "MirrorPad", inputs={"input": values([3, 4], seed=10)},
         consts={"paddings": i32([[1, 2], [2, 1]])}, attrs={"mode": "REFLECT"}),
    Case("mirror_pad_symmetric", "MirrorPad", inputs={"input": values([2, 3, 2], np.float64, 11)},
         consts={"paddings": i32([[2, 2], [0, 3], [1, 0]])}, attrs={"mode": "SYMMETRIC"}),
    Case("mirror_pad_i32", "MirrorPad", inputs={"input": ints([2, 3])},
         consts={"paddings": i32([[1, 1], [2, 2]])}, attrs={"mode": "REFLECT"}),
    Case("mirror_pad_grad_reflect", "MirrorPadGrad", inputs={"input": values([6, 7], seed=12)},
         consts={"paddings": i32([[1, 2], [2, 1]])}, attrs={"mode": "REFLECT"}),
    Case("mirror_pad_grad_symmetric", "MirrorPadGrad", inputs={"input": values([5, 5], np.float64, 13)},
         consts={"paddings": i32([[1, 1], [2, 0]])}, attrs={"mode": "SYMMETRIC"}),
    Case("data_format_dim_map", "DataFormatDimMap", inputs={"x": i32([-4, -3, -2, -1, 0, 1, 2, 3])}),
    Case("data_format_dim_map_i64", "DataFormatDimMap", inputs={"x": np.array([[0, 1], [2, 3]], np.int64)},
         attrs={"src_format": "NCHW", "dst_format": "NHWC"}),
    Case("data_format_vec_permute", "DataFormatVecPermute", inputs={"x": i32([1, 28, 29, 3])}),
    Case("data_format_vec_permute_pairs", "DataFormatVecPermute",
         inputs={"x": np.array([[0, 0], [1, 2], [3, 4], [0, 0]], np.int64)},
         attrs={"src_format": "NCHW", "dst_format": "NHWC"}),
    Case("data_format_vec_permute_spatial", "DataFormatVecPermute", inputs={"x": i32([7, 9])},
         attrs={"src_format": "NHWC", "dst_format": "NCHW"}),
]

if __name__ == "__main__":
    op_cases.write_family("spatial", CASES)
