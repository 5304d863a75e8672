"""Op cases of the random_state family: the counter moves of `tf.random.Generator`'s state
(RngSkip, RngReadAndSkip) on an int64 state variable [counter_lo, counter_hi, key], with
TensorFlow's values (see op_cases.py).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_random_state.py

Writes tests/tf/corpus/ops/random_state.{pbtxt,json}; tests/it/op_cases.rs (`random_state`) compares
the simulator and PJRT with them. The states include a generator's own (tf.random.Generator's
from_seed) and counters whose low word wraps into the high one.
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case


def generator_state(seed):
    """The state tf.random.Generator.from_seed(seed) starts with (Philox)."""
    return tf.random.Generator.from_seed(seed, alg="philox").state.numpy()


def cases():
    i64, u64 = np.int64, np.uint64
    state = generator_state(1234)
    # A low word 3 short of wrapping: a skip of any delta carries into the high word.
    wrapping = np.array([-3, 41, 987654321], i64)
    return [
        Case("read_and_skip", "RngReadAndSkip", variables={"resource": state},
             consts={"alg": np.int32(1), "delta": u64(5)}),
        Case("read_and_skip_auto", "RngReadAndSkip", variables={"resource": state},
             consts={"alg": np.int32(3), "delta": u64(1000)}),
        Case("read_and_skip_carry", "RngReadAndSkip", variables={"resource": wrapping},
             consts={"alg": np.int32(1), "delta": u64(1)}),
        Case("read_and_skip_wide_delta", "RngReadAndSkip", variables={"resource": wrapping},
             consts={"alg": np.int32(1), "delta": u64(0xFFFF_FFFF_FFFF)}),
        Case("skip", "RngSkip", variables={"resource": state},
             consts={"algorithm": i64(1), "delta": i64(7)}),
        Case("skip_carry", "RngSkip", variables={"resource": wrapping},
             consts={"algorithm": i64(1), "delta": i64(1 << 40)}),
    ]


if __name__ == "__main__":
    op_cases.write_family("random_state", cases())
