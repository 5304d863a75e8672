"""Op cases of the stateful_random family: the draws of `tf.random.Generator` from its state
variable (StatefulUniform, StatefulStandardNormalV2, StatefulTruncatedNormal, StatefulUniformInt,
StatefulUniformFullInt), and XLA's bit generator (XlaRngBitGenerator: Philox, ThreeFry and the
default on a u64 state), with TensorFlow's values (see op_cases.py).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_stateful_random.py

Writes tests/tf/corpus/ops/stateful_random.{pbtxt,json}; tests/it/op_cases.rs (`stateful_random`)
compares the simulator with TensorFlow's CPU kernels and PJRT with TensorFlow's XLA bridge
(`jit_compile=True`), which draw other numbers from the same state and move its counter by other
amounts. Each case records the draw and the state variable after it; `two_steps` draws twice from
one variable, so the second draw starts where the first left the counter. XlaRngBitGenerator has
no CPU kernel: its XLA values stand for both backends (the simulator makes XLA's bits).
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case


def generator_state(seed):
    """The state tf.random.Generator.from_seed(seed) starts with (Philox)."""
    return tf.random.Generator.from_seed(seed, alg="philox").state.numpy()


def two_steps(resource, algorithm, shape, dtype, name=None):
    """Two StatefulUniform draws from one state variable, the second after the first."""
    with tf.name_scope(name or "two_steps"):
        first = tf.raw_ops.StatefulUniform(resource=resource, algorithm=algorithm, shape=shape, dtype=dtype)
        with tf.control_dependencies([first]):
            second = tf.raw_ops.StatefulUniform(resource=resource, algorithm=algorithm, shape=shape, dtype=dtype)
    return first, second


def cases():
    i32, i64, u64 = np.int32, np.int64, np.uint64
    state = generator_state(1234)
    other = generator_state(99)
    # A low counter word 3 short of wrapping: a draw carries into the high word.
    wrapping = np.array([-3, 41, 987654321], i64)
    philox, auto = i64(1), i64(3)

    def draw(name, op, shape, dtype, var=state, alg=philox, **bounds):
        consts = {"algorithm": alg, "shape": np.array(shape, i64)}
        consts.update(bounds)
        # StatefulUniformInt takes its dtype from the bounds.
        attrs = {} if bounds else {"dtype": dtype}
        return Case(name, op, variables={"resource": var}, consts=consts, attrs=attrs, grad=False)

    def bits(name, alg, state, shape, dtype):
        return Case(name, "XlaRngBitGenerator", inputs={"initial_state": np.array(state, u64)},
                    consts={"algorithm": i32(alg), "shape": np.array(shape, i32)}, attrs={"dtype": dtype},
                    grad=False, cpu=False)

    return [
        draw("uniform", "StatefulUniform", [2, 3], tf.float32),
        draw("uniform_f64_auto", "StatefulUniform", [5], tf.float64, alg=auto),
        # TensorFlow's XLA bridge refuses f16 draws from a generator's state (the lowering too).
        draw("uniform_bf16", "StatefulUniform", [3], tf.bfloat16, var=other),
        draw("uniform_carry", "StatefulUniform", [2, 2], tf.float32, var=wrapping),
        draw("normal", "StatefulStandardNormalV2", [2, 3], tf.float32),
        draw("normal_odd", "StatefulStandardNormalV2", [5], tf.float32, var=other),
        draw("normal_f64", "StatefulStandardNormalV2", [3], tf.float64),
        # XLA splits a normal draw's shape in halves along its first even dimension (else its largest).
        draw("normal_3d", "StatefulStandardNormalV2", [3, 2, 5], tf.float32, var=other),
        draw("normal_odd_dims", "StatefulStandardNormalV2", [3, 5], tf.float64, var=wrapping),
        draw("normal_bf16", "StatefulStandardNormalV2", [2, 2], tf.bfloat16),
        draw("truncated_bf16", "StatefulTruncatedNormal", [3], tf.bfloat16, var=other),
        draw("truncated", "StatefulTruncatedNormal", [7], tf.float32),
        draw("truncated_f64", "StatefulTruncatedNormal", [3], tf.float64, var=other),
        draw("uniform_int", "StatefulUniformInt", [6], tf.int32, minval=i32(-5), maxval=i32(9)),
        draw("uniform_int64", "StatefulUniformInt", [2, 2], tf.int64, var=other,
             minval=i64(-(1 << 40)), maxval=i64(1 << 41)),
        draw("full_int_u64", "StatefulUniformFullInt", [3], tf.uint64),
        draw("full_int_i64", "StatefulUniformFullInt", [2], tf.int64, var=other),
        draw("full_int_i32", "StatefulUniformFullInt", [5], tf.int32, var=wrapping),
        bits("bits_philox_u64", 1, [5, 1234, 0], [2, 3], tf.uint64),
        bits("bits_philox_u8", 1, [5, 1234, 0], [5], tf.uint8),
        bits("bits_philox_carry", 1, [7, (1 << 64) - 2, 3], [3], tf.uint64),
        bits("bits_default_u64", 3, [9, 0, 1 << 40], [4], tf.uint64),
        bits("bits_threefry_u64", 2, [5, 1234], [5], tf.uint64),
        bits("bits_threefry_u8", 2, [5, 1234], [7], tf.uint8),
        bits("bits_threefry_wrap", 2, [(1 << 63) + 11, (1 << 64) - 1], [4], tf.uint8),
        Case("two_steps", two_steps, variables={"resource": state},
             consts={"algorithm": philox, "shape": np.array([3], i64)}, attrs={"dtype": tf.float32}, grad=False),
    ]


if __name__ == "__main__":
    op_cases.write_family("stateful_random", cases())
