"""JAX compiles and runs the StableHLO of examples/mlp_train.opg, and gets
the simulator's numbers: the loss of every replica and the updated variables."""

import jax
import jax.extend
import numpy as np
from jax._src.lib import xla_client as xc

import tpu_rewrite as tr


def test_stablehlo_runs_under_jax(root):
    lowered = tr.lower(tr.rewrite(tr.load(root / "examples" / "mlp_train.opg")), topology="1x8")
    text = lowered.stablehlo()
    [program] = lowered.programs()
    assert program["module"] == text
    sim = tr.run(lowered, backend="sim")

    backend = jax.extend.backend.get_backend("cpu")
    ids = np.array(program["device_ids"])
    assert ids.shape == (program["num_replicas"], program["num_partitions"]) == (8, 1)
    np.testing.assert_array_equal(ids, lowered.device_assignment)
    devices = [backend.devices()[i] for i in ids[:, 0]]
    options = xc.CompileOptions()
    options.num_replicas = program["num_replicas"]
    options.num_partitions = program["num_partitions"]
    options.device_assignment = xc.DeviceAssignment.create(ids)
    executable = backend.compile_and_load(text, xc.DeviceList(tuple(devices)), options)

    # One global array per argument, replica r's value on replica r's device.
    sharding = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), ("r",)), jax.sharding.PartitionSpec("r"))

    def global_array(values):
        shape = (values.shape[0] * values.shape[1],) + values.shape[2:]
        shards = [jax.device_put(values[r], d) for r, d in enumerate(devices)]
        return jax.make_array_from_single_device_arrays(shape, sharding, shards)

    results = executable.execute_sharded([global_array(v) for v in program["argument_values"]])
    per_result = results.disassemble_into_single_device_arrays()
    # Results: the computation outputs, then the variables in argument order.
    assert len(per_result) == len(program["outputs"]) + len(program["variables"])
    loss = np.stack([np.asarray(a) for a in per_result[0]])
    np.testing.assert_allclose(loss.reshape(sim["loss:0"].shape), sim["loss:0"], rtol=1e-5)
    for k, name in enumerate(program["variables"]):
        for replica in per_result[len(program["outputs"]) + k]:
            np.testing.assert_allclose(np.asarray(replica), sim.variables[name], rtol=1e-5, atol=1e-6)
