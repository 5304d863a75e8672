"""Op cases of the prand family: StochasticCastToInt (TensorFlow's CPU Philox stream on the
simulator, the XLA bridge's uniforms on PJRT), XlaDequantize (u32 words of four packed bytes to
bf16; XLA only) and the u32 draws (StatefulUniformFullInt and XlaRngBitGenerator of uint32),
with TensorFlow's values (see op_cases.py).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_prand.py

Writes tests/tf/corpus/ops/prand.{pbtxt,json}; tests/it/op_cases.rs (`prand`) compares the
simulator with TensorFlow's CPU kernels and PJRT with TensorFlow's XLA bridge
(`jit_compile=True`). The f16 stochastic casts, which the StableHLO lowering refuses, go to
tests/tf/corpus/ops/prand_cpu.{pbtxt,json} (`prand_cpu`: the simulator only). The stochastic casts' sizes cover the CPU kernel's vectorised chunks of 8
elements and the elements after them (drawn one at a time), integers (kept, no draw), values
beyond the output's range (clamped) and every input dtype. XlaDequantize has no CPU kernel: its
XLA values stand for both backends.
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case


def cases():
    rng = np.random.default_rng(8)
    u64 = np.uint64
    key = np.array([0x0123456789ABCDEF], u64)
    counter = np.array([17, 5], u64)

    def stochastic(name, x, tout, alg=1, k=key, c=counter):
        return Case(name, "StochasticCastToInt", inputs={"input": x, "key": k, "counter": c},
                    consts={"alg": np.int32(alg)}, attrs={"Tout": tout}, grad=False)

    def floats(shape, dtype, lo=-20.0, hi=20.0):
        x = rng.uniform(lo, hi, size=shape)
        flat = x.reshape(-1)
        flat[1] = 3.0  # an integer: kept as it is, with no draw
        return x.astype(dtype)

    beyond = np.array([2.5, -300.0, 300.0, -0.25, 127.5, -128.75, 5.0, 0.75, -7.5, 1e9], np.float32)

    def dequantize(name, words, lo, hi, transpose=False):
        return Case(name, "XlaDequantize", inputs={"input": np.array(words, np.uint32)},
                    attrs={"min_range": lo, "max_range": hi, "mode": "MIN_COMBINED",
                           "transpose_output": transpose}, grad=False, cpu=False)

    words = rng.integers(0, 2**32, size=(2, 3), dtype=np.uint64).astype(np.uint32)
    state = tf.random.Generator.from_seed(1234, alg="philox").state.numpy()

    def u32_draw(name, op, shape):
        consts = {"algorithm": np.int64(1), "shape": np.array(shape, np.int64)}
        return Case(name, op, variables={"resource": state}, consts=consts, attrs={"dtype": tf.uint32}, grad=False)

    def u32_bits(name, alg, initial, shape):
        return Case(name, "XlaRngBitGenerator", inputs={"initial_state": np.array(initial, u64)},
                    consts={"algorithm": np.int32(alg), "shape": np.array(shape, np.int32)},
                    attrs={"dtype": tf.uint32}, grad=False, cpu=False)
    main = [
        # 21 f32 elements: two vectorised chunks of 8, then 5 one at a time.
        stochastic("f32_to_i32", floats([3, 7], np.float32), tf.int32),
        stochastic("f32_to_i32_auto", floats([8], np.float32), tf.int32, alg=3,
                   k=np.array([99], u64), c=np.array([2**64 - 1, 0], u64)),
        # f64: a block per 4 elements within chunks of 8; 13 = 8 + 5.
        stochastic("f64_to_i32", floats([13], np.float64), tf.int32),
        stochastic("f32_to_i8", beyond, tf.int8),
        stochastic("f64_to_i8", floats([2, 5], np.float64, -200.0, 200.0), tf.int8),
        stochastic("bf16_to_i8", floats([9], tf.bfloat16.as_numpy_dtype), tf.int8),
        dequantize("dequantize", words, -1.0, 1.0),
        dequantize("dequantize_transposed", words, -1.0, 1.0, transpose=True),
        dequantize("dequantize_range", np.array([0x00FF7F80, 0x01020304, 0xFFFFFFFF], np.uint32), 0.5, 7.25),
        # u32 draws, which the simulator's u32 tensors hold.
        u32_draw("full_int_u32", "StatefulUniformFullInt", [2, 3]),
        u32_bits("bits_u32_philox", 1, [5, 2**64 - 2, 9], [2, 3]),
        u32_bits("bits_u32_threefry", 2, [11, 3], [5]),
    ]
    # f16 inputs: the lowering refuses them (the bridge's f16 uniforms come from bits it does not
    # reproduce), so these run on the simulator only, against TensorFlow's CPU kernel.
    cpu_only = [
        stochastic("f16_to_i32", floats([11], np.float16), tf.int32),
        stochastic("f16_to_i8", floats([2, 9], np.float16, -150.0, 150.0), tf.int8),
    ]
    return main, cpu_only


if __name__ == "__main__":
    main, cpu_only = cases()
    op_cases.write_family("prand", main)
    op_cases.write_family("prand_cpu", cpu_only)
