"""Writes tests/tf/corpus/ops/grouped_conv.{pbtxt,json}: grouped 2-D convolution (an input with a
multiple of the filter's input depth, as Keras `Conv2D(groups=...)` makes it) and its two backprops,
with TensorFlow's numbers; the backprops' own gradients, regular and depthwise, as well.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_grouped_conv.py
"""

import numpy as np

import op_cases
from op_cases import Case


def f32(seed, *shape):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape).astype(np.float32)


def geometry(strides=1, padding="SAME", dilations=1, explicit=None):
    attrs = {"strides": [1, strides, strides, 1], "padding": padding, "dilations": [1, dilations, dilations, 1]}
    if explicit is not None:
        attrs["explicit_paddings"] = explicit
    return attrs


def sizes(*dims):
    return np.array(dims, np.int32)


CASES = [
    # Forward: two groups of two channels, SAME 3x3.
    Case("g2_same", "Conv2D", inputs={"input": f32(1, 1, 5, 5, 4), "filter": f32(2, 3, 3, 2, 6)}, attrs=geometry()),
    # Three groups, stride 2, VALID, a 2x3 window, two images.
    Case("g3_valid_stride2", "Conv2D", inputs={"input": f32(3, 2, 6, 5, 6), "filter": f32(4, 2, 3, 2, 3)},
         attrs=geometry(2, "VALID")),
    # Four groups, explicit uneven padding, undilated and dilated 2. Without gradients: TensorFlow's
    # CPU backprops refuse groups with explicit padding, and dilations.
    Case("g4_explicit", "Conv2D", inputs={"input": f32(5, 1, 6, 6, 8), "filter": f32(6, 3, 3, 2, 4)},
         attrs=geometry(1, "EXPLICIT", 1, [0, 0, 1, 2, 2, 1, 0, 0]), grad=False),
    Case("g4_dilated_explicit", "Conv2D", inputs={"input": f32(5, 1, 6, 6, 8), "filter": f32(6, 3, 3, 2, 4)},
         attrs=geometry(1, "EXPLICIT", 2, [0, 0, 1, 2, 2, 1, 0, 0]), grad=False),
    # One channel per group (ConvNeXt's depthwise convolutions), two outputs per group.
    Case("g3_one_channel", "Conv2D", inputs={"input": f32(7, 1, 5, 5, 3), "filter": f32(8, 3, 3, 1, 6)},
         attrs=geometry()),
    # Double precision (without a gradient: TensorFlow's CPU backprops refuse groups in f64).
    Case("g2_f64", "Conv2D", inputs={"input": f32(9, 1, 4, 4, 4).astype(np.float64),
                                     "filter": f32(10, 2, 2, 2, 4).astype(np.float64)}, attrs=geometry(1, "VALID"),
         grad=False),
    # The backprops with groups, stride 2.
    Case("g2_backprop_input", "Conv2DBackpropInput", consts={"input_sizes": sizes(1, 5, 5, 4)},
         inputs={"filter": f32(11, 3, 3, 2, 6), "out_backprop": f32(12, 1, 3, 3, 6)}, attrs=geometry(2)),
    Case("g2_backprop_filter", "Conv2DBackpropFilter", consts={"filter_sizes": sizes(3, 3, 2, 6)},
         inputs={"input": f32(13, 1, 5, 5, 4), "out_backprop": f32(14, 1, 3, 3, 6)}, attrs=geometry(2)),
    Case("g4_one_channel_backprop_input", "Conv2DBackpropInput", consts={"input_sizes": sizes(1, 4, 4, 4)},
         inputs={"filter": f32(15, 3, 3, 1, 4), "out_backprop": f32(16, 1, 4, 4, 4)}, attrs=geometry()),
    Case("g4_one_channel_backprop_filter", "Conv2DBackpropFilter", consts={"filter_sizes": sizes(3, 3, 1, 4)},
         inputs={"input": f32(17, 1, 4, 4, 4), "out_backprop": f32(18, 1, 4, 4, 4)}, attrs=geometry()),
    # The ungrouped backprops and the depthwise ones, whose gradients are the other convolutions.
    Case("backprop_input", "Conv2DBackpropInput", consts={"input_sizes": sizes(1, 5, 4, 2)},
         inputs={"filter": f32(19, 2, 3, 2, 3), "out_backprop": f32(20, 1, 2, 1, 3)}, attrs=geometry(2, "VALID")),
    Case("backprop_filter", "Conv2DBackpropFilter", consts={"filter_sizes": sizes(2, 3, 2, 3)},
         inputs={"input": f32(21, 1, 5, 4, 2), "out_backprop": f32(22, 1, 2, 1, 3)}, attrs=geometry(2, "VALID")),
    Case("depthwise_backprop_input", "DepthwiseConv2dNativeBackpropInput", consts={"input_sizes": sizes(1, 4, 4, 2)},
         inputs={"filter": f32(23, 3, 3, 2, 2), "out_backprop": f32(24, 1, 4, 4, 4)}, attrs=geometry()),
    Case("depthwise_backprop_filter", "DepthwiseConv2dNativeBackpropFilter", consts={"filter_sizes": sizes(3, 3, 2, 2)},
         inputs={"input": f32(25, 1, 4, 4, 2), "out_backprop": f32(26, 1, 2, 2, 4)}, attrs=geometry(2)),
]

if __name__ == "__main__":
    op_cases.write_family("grouped_conv", CASES)
