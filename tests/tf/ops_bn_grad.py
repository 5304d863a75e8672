"""Writes tests/tf/corpus/ops/bn_grad.{pbtxt,json}: TensorFlow's numbers for the second-order
gradients of the fused batch norms.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_bn_grad.py

FusedBatchNormGrad, FusedBatchNormGradV2 and FusedBatchNormGradV3 as raw ops, differentiated with
respect to the backprop, the input and the scale (TensorFlow's `_FusedBatchNormGradGrad*`), in
training and inference modes, NHWC and NCHW, f32 and an f16 input with f32 statistics. The
reserve spaces fed in training mode are the input's own batch mean and (biased) variance, as the
forward op leaves them on the CPU; the gradient does not read them. The compared outputs are the
three backprops (the reserve outputs carry nothing), or only the input backprop, so the other two
outputs reach the gradient as zeros. `keras_double_backprop` is the gradient of a gradient through a
training-mode FusedBatchNormV3, as Keras' BatchNormalization builds it: its outputs are the first
gradients (TensorFlow's own FusedBatchNormGradV3 in the GraphDef), which the harness differentiates
again. Checked by tests/it/op_cases.rs (`op_cases::bn_grad`).
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case


def values(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, size=shape).astype(dtype)


def channel_axes(data_format, rank):
    """The axes a batch norm reduces over."""
    if data_format.startswith("NC"):
        return tuple(i for i in range(rank) if i != 1)
    return tuple(range(rank - 1))


def bn_grad_case(name, op, shape, data_format, training, seed, dtype=np.float32, keep=3, rtol=1e-4):
    channels = shape[1] if data_format.startswith("NC") else shape[-1]
    x = values(shape, dtype, seed)
    if training:
        axes = channel_axes(data_format, len(shape))
        mean = x.astype(np.float32).mean(axis=axes)
        var = x.astype(np.float32).var(axis=axes)
    else:
        mean = values([channels], seed=seed + 3, low=-0.5, high=0.5)
        var = values([channels], seed=seed + 4, low=0.5, high=1.5)
    inputs = {"y_backprop": values(shape, dtype, seed + 1), "x": x,
              "scale": values([channels], seed=seed + 2, low=0.5, high=1.5),
              "reserve_space_1": mean, "reserve_space_2": var}
    if op == "FusedBatchNormGradV3":
        inputs["reserve_space_3"] = np.zeros([0], np.float32)
    return Case(name, op, inputs=inputs,
                attrs={"epsilon": 0.01, "data_format": data_format, "is_training": training},
                post=lambda outs: outs[:keep], rtol=rtol)


def double_backprop(x, scale, offset, w):
    """The first gradients of sum(w * FusedBatchNormV3(x)) with respect to x, scale and offset."""
    y = tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=tf.zeros([3]), variance=tf.ones([3]),
                                    epsilon=0.001, is_training=True)[0]
    return tf.gradients(tf.reduce_sum(y * w), [x, scale, offset])


cases = [
    bn_grad_case("v1_nhwc_training", "FusedBatchNormGrad", [2, 2, 3, 3], "NHWC", True, 10),
    bn_grad_case("v1_nchw_training", "FusedBatchNormGrad", [2, 3, 2, 2], "NCHW", True, 20),
    bn_grad_case("v1_nhwc_inference", "FusedBatchNormGrad", [2, 2, 2, 3], "NHWC", False, 30),
    bn_grad_case("v2_nchw_inference", "FusedBatchNormGradV2", [2, 3, 2, 2], "NCHW", False, 40),
    bn_grad_case("v2_nhwc_training_dx_only", "FusedBatchNormGradV2", [3, 2, 2, 2], "NHWC", True, 50, keep=1),
    bn_grad_case("v2_nhwc_training_f16", "FusedBatchNormGradV2", [2, 2, 2, 3], "NHWC", True, 60,
                 dtype=np.float16, rtol=2e-2),
    bn_grad_case("v3_nhwc_training", "FusedBatchNormGradV3", [2, 3, 2, 2], "NHWC", True, 70),
    bn_grad_case("v3_nchw_training", "FusedBatchNormGradV3", [2, 2, 3, 2], "NCHW", True, 80),
    bn_grad_case("v3_nchw_inference", "FusedBatchNormGradV3", [2, 2, 2, 2], "NCHW", False, 90),
    Case("keras_double_backprop", "FusedBatchNormV3",
         inputs={"x": values([2, 2, 2, 3], seed=110), "scale": values([3], seed=111, low=0.5, high=1.5),
                 "offset": values([3], seed=112)},
         consts={"w": values([2, 2, 2, 3], seed=113)}, fn=double_backprop, rtol=1e-4),
]

op_cases.write_family("bn_grad", cases)
