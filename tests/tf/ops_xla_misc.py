"""Writes tests/tf/corpus/ops/xla_misc.{pbtxt,json}: XlaScatter (the general XLA scatter with a
function combining each update into the operand) and the variable forms of the SPMD tilers,
ReadVariableXlaSplitND (read a variable, pad it, split it into tiles) and AssignVariableXlaConcatND
(join tiles, drop the padding, assign the variable).

None of them has a CPU kernel in TensorFlow 2.21: their values are those of TensorFlow's XLA
bridge, and TensorFlow registers no gradient for them. Its `dimension_numbers` are serialized
`xla.ScatterDimensionNumbers`; its `update_computation` a concrete `tf.function` (to the GraphDef's
library). Cases whose updates meet at one position use an order-free combiner (add, max) or
exact values, since XLA leaves the order of such updates open; one case has a window that reaches
past the operand, which XLA skips whole.

CollectiveAssignGroupV2 (the group size and key of a device, from a group assignment) has both:
the CPU kernel's values and the XLA bridge's.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_xla_misc.py
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case
from tensorflow.compiler.xla import xla_data_pb2 as xd  # noqa: E402 (after TensorFlow itself)

F32, F64, I32 = tf.float32, tf.float64, tf.int32


def fn(body, *dtypes):
    """The concrete function of `body` on scalars of `dtypes`."""
    return tf.function(body).get_concrete_function(*[tf.TensorSpec([], d) for d in dtypes])


def add(a, b):
    return a + b


def take_update(a, b):
    """Replaces the operand's element by the update."""
    return b


def select_max(a, b):
    return tf.where(a > b, a, b)


def mul(a, b):
    return a * b


def scale_add(a, b):
    """Not a plain reducer: the operand halved plus the update."""
    return a * 0.5 + b


ADD_F32 = fn(add, F32, F32)
TAKE_F32 = fn(take_update, F32, F32)
MAX_F64 = fn(select_max, F64, F64)
MUL_I32 = fn(mul, I32, I32)
SCALE_ADD_F32 = fn(scale_add, F32, F32)


def scatter_dims(window, inserted, to_operand, index_dim):
    return xd.ScatterDimensionNumbers(update_window_dims=window, inserted_window_dims=inserted,
                                      scatter_dims_to_operand_dims=to_operand,
                                      index_vector_dim=index_dim).SerializeToString()


def rand(seed, *shape, dtype=np.float32, scale=3.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=shape).astype(dtype)


def grid(shape, dtype=np.float32, start=0.5):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64) * 0.75 - start * n).astype(dtype).reshape(shape)


def scatter_cases():
    i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
    return [
        # Rows added in at row indices, one row twice (add is order-free).
        Case("scatter_add_rows", "XlaScatter",
             inputs={"operand": rand(1, 5, 3), "scatter_indices": i32(1, 3, 1).reshape(3, 1),
                     "updates": rand(2, 3, 3)},
             attrs={"update_computation": ADD_F32, "dimension_numbers": scatter_dims([1], [0], [0], 1),
                    "indices_are_sorted": False}, grad=False, cpu=False),
        # 2x2 windows replacing the operand; the window at (3, 4) reaches past it and is skipped.
        Case("scatter_windows_replace", "XlaScatter",
             inputs={"operand": rand(3, 4, 5), "scatter_indices": i32(0, 1, 2, 3, 3, 4).reshape(3, 2),
                     "updates": rand(4, 3, 2, 2)},
             attrs={"update_computation": TAKE_F32, "dimension_numbers": scatter_dims([1, 2], [], [0, 1], 1),
                    "indices_are_sorted": True}, grad=False, cpu=False),
        # The index vector first (index_vector_dim 0), columns into a [3, 4] f64 operand, by a select-max.
        Case("scatter_max_columns_f64", "XlaScatter",
             inputs={"operand": rand(5, 3, 4, dtype=np.float64),
                     "scatter_indices": np.array([[2, 0, 2]], np.int64),
                     "updates": rand(6, 3, 3, dtype=np.float64)},
             attrs={"update_computation": MAX_F64, "dimension_numbers": scatter_dims([0], [1], [1], 0),
                    "indices_are_sorted": False}, grad=False, cpu=False),
        # Scalar indices (index_vector_dim past the last dimension) multiplying int32 elements in,
        # one negative index (skipped).
        Case("scatter_mul_i32", "XlaScatter",
             inputs={"operand": np.arange(1, 7, dtype=np.int32), "scatter_indices": i32(0, 5, -1, 2),
                     "updates": i32(3, -2, 7, 4)},
             attrs={"update_computation": MUL_I32, "dimension_numbers": scatter_dims([], [0], [0], 1),
                    "indices_are_sorted": False}, grad=False, cpu=False),
        # A combiner that is no plain reducer, with distinct positions (order does not matter).
        Case("scatter_scale_add", "XlaScatter",
             inputs={"operand": rand(7, 2, 3), "scatter_indices": i32(1, 0, 0, 2).reshape(2, 2),
                     "updates": rand(8, 2)},
             attrs={"update_computation": SCALE_ADD_F32, "dimension_numbers": scatter_dims([], [0, 1], [0, 1], 1),
                    "indices_are_sorted": False}, grad=False, cpu=False),
    ]


def variable_cases():
    out = []
    for name, shape, splits, pads, dtype in (("read_split_2x2", [4, 6], [2, 2], [], np.float32),
                                             ("read_split_padded", [3, 5], [2, 3], [1, 1], np.float32),
                                             ("read_split_1d_f64", [5], [3], [1], np.float64),
                                             ("read_split_i32", [2, 4], [1, 2], [0, 0], np.int32)):
        n = int(np.prod(splits))
        out.append(Case(name, "ReadVariableXlaSplitND", variables={"resource": grid(shape, dtype)},
                        attrs={"T": tf.as_dtype(dtype), "N": n, "num_splits": splits, "paddings": pads},
                        grad=False, cpu=False))
    for name, shape, concats, pads, dtype in (("assign_concat_2x2", [2, 3], [2, 2], [], np.float32),
                                              ("assign_concat_padded", [2, 2], [2, 3], [1, 1], np.float32),
                                              ("assign_concat_1d_f64", [2], [3], [1], np.float64),
                                              ("assign_concat_i32", [1, 2], [3, 1], [0, 0], np.int32)):
        n = int(np.prod(concats))
        full = [s * c - p for s, c, p in zip(shape, concats, pads or [0] * len(shape))]
        out.append(Case(name, "AssignVariableXlaConcatND", variables={"resource": np.zeros(full, dtype)},
                        inputs={"inputs": [grid(shape, dtype, start=k) for k in range(n)]},
                        attrs={"num_concats": concats, "paddings": pads}, grad=False, cpu=False))
    return out


def assign_group_cases():
    """CollectiveAssignGroupV2: TensorFlow's CPU kernel gives the size of the device's group and
    `base_key` plus the group's row; its XLA bridge gives values of its own (recorded as it gives them)."""
    out = []
    for name, groups, device, base in (("assign_group_2x2", [[0, 2], [1, 3]], 3, 10),
                                       ("assign_group_2x3", [[3, 1, 0], [2, 5, 4]], 4, 7),
                                       ("assign_group_first", [[3, 1, 0], [2, 5, 4]], 0, 1),
                                       ("assign_group_1x4", [[2, 0, 3, 1]], 1, 5)):
        out.append(Case(name, "CollectiveAssignGroupV2", inputs={"device_index": np.array(device, np.int32)},
                        consts={"group_assignment": np.array(groups, np.int32), "base_key": np.array(base, np.int32)},
                        grad=False))
    # Every operand a constant, as TensorFlow programs usually give them.
    out.append(Case("assign_group_consts", "CollectiveAssignGroupV2",
                    consts={"group_assignment": np.array([[0, 1], [2, 3], [4, 5]], np.int32),
                            "device_index": np.array(5, np.int32), "base_key": np.array(3, np.int32)},
                    grad=False))
    return out


if __name__ == "__main__":
    op_cases.write_family("xla_misc", scatter_cases() + variable_cases() + assign_group_cases())
