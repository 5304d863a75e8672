"""Writes tests/tf/corpus/ops/strided_grads.{pbtxt,json}: the stride-2 gradients of NASNetMobile's
reduction cells and adjust blocks (tests/tf/corpus/keras/app_nasnet_mobile, 64x64, two images per
replica), with the shapes and attributes its graph gives them, and TensorFlow's numbers.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_strided_grads.py

The first reduction cell takes the 31x31x32 output of the stem's stride-2 convolution to 11 channels,
pads it for the window (`ZeroPadding2D`, `correct_pad`: 2 a side for 5x5, 3 for 7x7, 1 for 3x3) and
applies stride-2 VALID depthwise convolutions (5x5 and 7x7) and 3x3 stride-2 VALID max and average
pools; the adjust block of the next cell averages 1x1 windows with stride 2. The cases keep those
spatial sizes, windows and strides, with one image and two channels (the geometry is per channel).
They agree on both backends: NASNetMobile's float32 difference on PJRT was not one of these ops but
a ReLU whose input rounding put on either side of zero (tests/it/keras_corpus.rs). Checked by
tests/it/op_cases.rs (`op_cases::strided_grads`).
"""

import numpy as np

import op_cases
from op_cases import Case, tf


def f32(seed, *shape):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape).astype(np.float32)


def i32(v):
    return np.array(v, dtype=np.int32)


def stride2(padding="VALID"):
    return {"strides": [1, 2, 2, 1], "padding": padding}


def pool(k, padding="VALID"):
    return {"ksize": [1, k, k, 1], "strides": [1, 2, 2, 1], "padding": padding}


# Distinct values, so that every window has one maximum.
mp_x = np.random.default_rng(11).permutation(33 * 33 * 2).reshape([1, 33, 33, 2]).astype(np.float32) / 1024
mp_y = tf.nn.max_pool(mp_x, 3, 2, "VALID").numpy()

CASES = [
    # separable_conv_1 of the first reduction cell's 5x5 and 7x7 blocks: 31 padded to 35 (37), 16x16 out.
    Case("depthwise_filter_5x5", "DepthwiseConv2dNativeBackpropFilter", inputs={"input": f32(1, 1, 35, 35, 2),
         "out_backprop": f32(2, 1, 16, 16, 2)}, consts={"filter_sizes": i32([5, 5, 2, 1])}, attrs=stride2(),
         rtol=1e-4),
    Case("depthwise_filter_7x7", "DepthwiseConv2dNativeBackpropFilter", inputs={"input": f32(3, 1, 37, 37, 2),
         "out_backprop": f32(4, 1, 16, 16, 2)}, consts={"filter_sizes": i32([7, 7, 2, 1])}, attrs=stride2(),
         rtol=1e-4),
    # The second reduction cell's: its 16x16 input padded 1 before and 2 after (2 and 3 for 7x7), 8x8 out.
    Case("depthwise_filter_5x5_even", "DepthwiseConv2dNativeBackpropFilter",
         inputs={"input": f32(15, 1, 19, 19, 2), "out_backprop": f32(16, 1, 8, 8, 2)},
         consts={"filter_sizes": i32([5, 5, 2, 1])}, attrs=stride2(), rtol=1e-4),
    Case("depthwise_filter_7x7_even", "DepthwiseConv2dNativeBackpropFilter",
         inputs={"input": f32(17, 1, 21, 21, 2), "out_backprop": f32(18, 1, 8, 8, 2)},
         consts={"filter_sizes": i32([7, 7, 2, 1])}, attrs=stride2(), rtol=1e-4),
    Case("depthwise_input_5x5", "DepthwiseConv2dNativeBackpropInput", inputs={"filter": f32(5, 5, 5, 2, 1),
         "out_backprop": f32(6, 1, 16, 16, 2)}, consts={"input_sizes": i32([1, 35, 35, 2])}, attrs=stride2(),
         rtol=1e-4),
    Case("depthwise_input_7x7", "DepthwiseConv2dNativeBackpropInput", inputs={"filter": f32(7, 7, 7, 2, 1),
         "out_backprop": f32(8, 1, 16, 16, 2)}, consts={"input_sizes": i32([1, 37, 37, 2])}, attrs=stride2(),
         rtol=1e-4),
    Case("depthwise_5x5", "DepthwiseConv2dNative", inputs={"input": f32(9, 1, 35, 35, 2),
         "filter": f32(10, 5, 5, 2, 1)}, attrs=stride2(), rtol=1e-4),
    # The cell's 3x3 stride-2 pools of the padded 33x33 input, and the adjust block's 1x1 average.
    Case("max_pool_grad_3x3", "MaxPoolGrad", inputs={"orig_input": mp_x, "orig_output": mp_y,
         "grad": f32(12, 1, 16, 16, 2)}, attrs=pool(3)),
    Case("avg_pool_grad_3x3", "AvgPoolGrad", inputs={"grad": f32(13, 1, 16, 16, 2)},
         consts={"orig_input_shape": i32([1, 33, 33, 2])}, attrs=pool(3)),
    Case("avg_pool_grad_1x1", "AvgPoolGrad", inputs={"grad": f32(14, 1, 16, 16, 2)},
         consts={"orig_input_shape": i32([1, 31, 31, 2])}, attrs=pool(1)),
    Case("avg_pool_grad_1x1_even", "AvgPoolGrad", inputs={"grad": f32(19, 1, 8, 8, 2)},
         consts={"orig_input_shape": i32([1, 16, 16, 2])}, attrs=pool(1)),
]

if __name__ == "__main__":
    op_cases.write_family("strided_grads", CASES)
