"""TensorFlow's numbers for the sharding, SPMD, dynamic-size and runtime ops
(family `spmd`; the harness is tests/tf/op_cases.py).

Run: tests/tf/.venv/bin/python tests/tf/ops_spmd.py
Writes tests/tf/corpus/ops/spmd.{pbtxt,json}.

The sharding annotations are serialized `xla.OpSharding`s, made by TensorFlow's own
`xla_sharding.Sharding`. One device runs every case, so only shardings whose shard is the
whole value (replicated, maximal, manual, or a tile grid of ones) have values here.
"""

import numpy as np

import op_cases
from op_cases import Case
from tensorflow.python.compiler.xla.experimental import xla_sharding

REPLICATED = xla_sharding.Sharding.replicate().proto.SerializeToString()
MAXIMAL = xla_sharding.Sharding.assign_device(0).proto.SerializeToString()
MANUAL = xla_sharding.Sharding.manual().proto.SerializeToString()
ONE_TILE = xla_sharding.Sharding.tile(np.array([[0]])).proto.SerializeToString()


def grid(shape, dtype=np.float32, start=0.5):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64) * 0.75 - start * n).astype(dtype).reshape(shape)


def cases():
    x = grid([2, 3])
    out = []
    for name, s in (("replicated", REPLICATED), ("maximal", MAXIMAL), ("manual", MANUAL), ("one_tile", ONE_TILE)):
        out.append(Case(f"sharding_{name}", "XlaSharding", inputs={"input": x}, attrs={"sharding": s}, cpu=False))
        out.append(Case(f"full_to_shard_{name}", "XlaSpmdFullToShardShape", inputs={"input": x},
                        attrs={"manual_sharding": s}, cpu=False))
        out.append(Case(f"shard_to_full_{name}", "XlaSpmdShardToFullShape", inputs={"input": x},
                        attrs={"manual_sharding": s, "full_shape": [2, 3]}, cpu=False))
    out.append(Case("sharding_f64", "XlaSharding", inputs={"input": grid([4], np.float64)},
                    attrs={"sharding": REPLICATED, "unspecified_dims": [0]}, cpu=False))
    out.append(Case("sharding_i32", "XlaSharding", inputs={"input": np.arange(5, dtype=np.int32)},
                    attrs={"sharding": MAXIMAL}, cpu=False))
    out.append(Case("full_to_shard_dim", "XlaSpmdFullToShardShape", inputs={"input": grid([3, 2])},
                    attrs={"manual_sharding": MANUAL, "dim": 1}, cpu=False))
    out.append(Case("set_bound", "XlaSetBound", inputs={"input": np.array(3, np.int32)},
                    consts={"bound": np.array(5, np.int32)}, cpu=False))
    out.append(Case("set_dynamic_size", "XlaSetDynamicDimensionSize", inputs={"input": grid([2, 4])},
                    consts={"dim_index": np.array(1, np.int32), "size": np.array(3, np.int32)}, cpu=False))
    out.append(Case("set_dynamic_size_full", "XlaSetDynamicDimensionSize",
                    inputs={"input": np.arange(6, dtype=np.int32).reshape(3, 2)},
                    consts={"dim_index": np.array(0, np.int32), "size": np.array(3, np.int32)}, cpu=False))
    out.append(Case("remove_dynamic_size", "XlaRemoveDynamicDimensionSize", inputs={"input": grid([2, 4])},
                    consts={"dim_index": np.array(1, np.int32)}, cpu=False))
    out.append(Case("optimization_barrier", "XlaOptimizationBarrier",
                    inputs={"input": [grid([2, 2]), np.arange(3, dtype=np.int32), grid([3], np.float64)]},
                    cpu=False))
    # A compiled program takes tf2xla's value (the number of names), as the simulator does.
    out.append(Case("device_index", "DeviceIndex", attrs={"device_names": ["GPU", "CPU", "TPU"]}, cpu=False))
    out.append(Case("device_index_two", "DeviceIndex", attrs={"device_names": ["GPU", "TPU"]}, cpu=False))
    out.append(Case("control_trigger", "ControlTrigger"))
    for name, shape, splits, pads in (("split_2x2", [4, 6], [2, 2], []),
                                      ("split_padded", [3, 5], [2, 3], [1, 1]),
                                      ("split_1d", [6], [3], [0]),
                                      ("split_3d", [2, 2, 4], [1, 2, 2], [0, 0, 2])):
        out.append(Case(name, "XlaSplitND", inputs={"input": grid(shape)},
                        attrs={"N": int(np.prod(splits)), "num_splits": splits, "paddings": pads}, cpu=False))
    out.append(Case("split_i32", "XlaSplitND", inputs={"input": np.arange(8, dtype=np.int32).reshape(2, 4)},
                    attrs={"N": 2, "num_splits": [1, 2]}, cpu=False))
    for name, shape, concats, pads in (("concat_2x2", [2, 3], [2, 2], []),
                                       ("concat_padded", [2, 2], [2, 3], [1, 1]),
                                       ("concat_1d", [2], [3], [1]),
                                       ("concat_f64", [1, 2], [3, 1], [0, 0])):
        n = int(np.prod(concats))
        dtype = np.float64 if name.endswith("f64") else np.float32
        out.append(Case(name, "XlaConcatND", inputs={"inputs": [grid(shape, dtype, start=k) for k in range(n)]},
                        attrs={"num_concats": concats, "paddings": pads}, cpu=False))
    # Collectives over a group of one (one device: TensorFlow compiles no collective of several CPU devices).
    one = np.array([[0]], np.int32)
    for reduce in ("Add", "Mean", "Max", "Min", "Mul"):
        out.append(Case(f"all_reduce_{reduce.lower()}", "XlaAllReduce", inputs={"input": grid([2, 3])},
                        consts={"group_assignment": one}, attrs={"reduce_op": reduce, "mode": "CrossReplica"},
                        cpu=False))
    out.append(Case("all_reduce_i32", "XlaAllReduce", inputs={"input": np.arange(4, dtype=np.int32)},
                    consts={"group_assignment": one}, attrs={"reduce_op": "Max", "mode": "CrossReplicaAndPartition"},
                    cpu=False))
    for k, (merge, final) in enumerate((("Add", "Id"), ("Max", "Id"), ("Mul", "Div"), ("Min", "Id"))):
        out.append(Case(f"collective_reduce_{merge.lower()}_{final.lower()}", "CollectiveReduceV2",
                        inputs={"input": grid([3, 2]), "ordering_token": []},
                        consts={"group_size": np.array(1, np.int32), "group_key": np.array(7, np.int32),
                                "instance_key": np.array(100 + k, np.int32)},
                        attrs={"merge_op": merge, "final_op": final}))
    return out


if __name__ == "__main__":
    op_cases.write_family("spmd", cases())
