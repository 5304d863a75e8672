"""Op cases of the prand_i16 family: StochasticCastToInt with `Tout = int16`, which TensorFlow
allows beside int8 and int32, with TensorFlow's values (see op_cases.py and ops_prand.py, whose
helpers these cases share).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_prand_i16.py

Writes tests/tf/corpus/ops/prand_i16.{pbtxt,json}; tests/it/op_cases.rs (`prand_i16`) compares
the simulator with TensorFlow's CPU kernel and PJRT with TensorFlow's XLA bridge. The cases cover
each input dtype the lowering takes (f32, f64, bf16), integers (kept), and values beyond int16's
range (clamped).
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case


def cases():
    rng = np.random.default_rng(16)
    u64 = np.uint64
    key = np.array([0x0F1E2D3C4B5A6978], u64)
    counter = np.array([3, 11], u64)

    def stochastic(name, x, alg=1):
        return Case(name, "StochasticCastToInt", inputs={"input": x, "key": key, "counter": counter},
                    consts={"alg": np.int32(alg)}, attrs={"Tout": tf.int16}, grad=False)

    def floats(shape, dtype, lo, hi):
        x = rng.uniform(lo, hi, size=shape)
        x.reshape(-1)[1] = 3.0  # an integer: kept as it is, with no draw
        return x.astype(dtype)

    beyond = np.array([2.5, -40000.0, 40000.0, -0.25, 32767.5, -32768.75, 5.0, 0.75, -7.5, 1e9], np.float32)
    return [
        stochastic("f32_to_i16", floats([3, 7], np.float32, -500.0, 500.0)),
        stochastic("f32_to_i16_beyond", beyond),
        stochastic("f64_to_i16", floats([13], np.float64, -500.0, 500.0), alg=3),
        stochastic("bf16_to_i16", floats([9], tf.bfloat16.as_numpy_dtype, -100.0, 100.0)),
    ]


if __name__ == "__main__":
    op_cases.write_family("prand_i16", cases())
