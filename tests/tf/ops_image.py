"""Writes tests/tf/corpus/ops/image.{pbtxt,json}: TensorFlow's numbers for the image ops.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_image.py

ResizeBilinear (plain, align_corners, half_pixel_centers) and its gradient op, ResizeNearestNeighbor (the
same modes, and int32 images) and its gradient op, LRN and LRNGrad, the colour ops (RGBToHSV, HSVToRGB,
AdjustHue, AdjustSaturation, AdjustContrastv2), BiasAddV1, and the max pools with operand windows
(MaxPoolV2, MaxPoolGradV2, MaxPoolGradGradV2) or second-order gradients (MaxPoolGradGrad,
MaxPool3DGradGrad; and the gradients of MaxPoolGrad and MaxPool3DGrad, which TensorFlow computes with
them), and the gradients of the convolution backprops and AvgPoolGrad (second-order gradients of
convolutions and pools), ExtractImagePatches, the generic Conv (2-D and 3-D), and the gradients of FusedBatchNorm and FusedBatchNormV2
(training and inference). Pool inputs hold distinct values, so every window has one maximum; the second-order pool cases
use values bfloat16 holds exactly, because TensorFlow's XLA bridge packs value and gradient into one
f32 there. TensorFlow's XLA bridge returns garbage for ResizeBilinearGrad of a float64 image (it
leaves the result uninitialised, 1e219 and such), so that case keeps TensorFlow's CPU values for PJRT
(xla=False). Checked by tests/it/op_cases.rs (`op_cases::image`).
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case


def values(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, size=shape).astype(dtype)


def distinct(shape, seed=0, dtype=np.float32):
    """A permutation of 1/8, 2/8, ...: distinct values that bfloat16 holds exactly."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    return (rng.permutation(n) + 1).astype(dtype).reshape(shape) / 8


def eighths(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.integers(-16, 16, size=shape)).astype(dtype) / 8


def i32(v):
    return np.array(v, dtype=np.int32)


def pooled(x, ksize, strides, padding):
    return tf.nn.max_pool(x, ksize, strides, padding).numpy()


def pooled3d(x, ksize, strides, padding):
    return tf.nn.max_pool3d(x, ksize, strides, padding).numpy()


LRN_ATTRS = {"depth_radius": 2, "bias": 1.5, "alpha": 0.3, "beta": 0.75}
lrn_x = values([1, 2, 2, 7], seed=20)
lrn_y = tf.raw_ops.LRN(input=lrn_x, **LRN_ATTRS).numpy()

mp_x = distinct([1, 4, 4, 2], seed=30)
mp_y = pooled(mp_x, 2, 2, "VALID")
mp2_x = distinct([1, 5, 5, 1], seed=31)
mp2_y = pooled(mp2_x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
mp3_x = distinct([1, 2, 4, 4, 1], seed=32)
mp3_y = pooled3d(mp3_x, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID")

CASES = [
    Case("bias_add_v1", "BiasAddV1", inputs={"value": values([2, 3, 4]), "bias": values([4], seed=1)}),
    Case("resize_bilinear", "ResizeBilinear", inputs={"images": values([1, 3, 4, 2], seed=2)},
         consts={"size": i32([5, 7])}),
    Case("resize_bilinear_align", "ResizeBilinear", inputs={"images": values([2, 4, 3, 1], np.float64, 3)},
         consts={"size": i32([3, 5])}, attrs={"align_corners": True}),
    Case("resize_bilinear_half", "ResizeBilinear", inputs={"images": values([1, 4, 4, 1], seed=4)},
         consts={"size": i32([6, 3])}, attrs={"half_pixel_centers": True}),
    Case("resize_bilinear_grad", "ResizeBilinearGrad",
         inputs={"grads": values([1, 5, 7, 2], seed=5), "original_image": values([1, 3, 4, 2], seed=6)}),
    Case("resize_bilinear_grad_half", "ResizeBilinearGrad",
         inputs={"grads": values([1, 2, 6, 1], seed=7), "original_image": values([1, 4, 4, 1], np.float64, 8)},
         attrs={"half_pixel_centers": True}, xla=False),
    Case("resize_nearest", "ResizeNearestNeighbor", inputs={"images": values([1, 3, 4, 2], seed=9)},
         consts={"size": i32([5, 7])}),
    Case("resize_nearest_align", "ResizeNearestNeighbor", inputs={"images": values([2, 4, 3, 1], np.float64, 10)},
         consts={"size": i32([3, 5])}, attrs={"align_corners": True}),
    Case("resize_nearest_half", "ResizeNearestNeighbor", inputs={"images": values([1, 4, 4, 1], seed=11)},
         consts={"size": i32([6, 3])}, attrs={"half_pixel_centers": True}),
    Case("resize_nearest_i32", "ResizeNearestNeighbor", inputs={"images": i32(np.arange(12).reshape(1, 3, 2, 2))},
         consts={"size": i32([4, 5])}),
    Case("resize_nearest_grad", "ResizeNearestNeighborGrad", inputs={"grads": values([1, 5, 7, 2], seed=12)},
         consts={"size": i32([3, 4])}, attrs={"half_pixel_centers": True}),
    Case("lrn", "LRN", inputs={"input": lrn_x}, attrs=LRN_ATTRS, rtol=1e-4),
    Case("lrn_default", "LRN", inputs={"input": values([2, 1, 2, 5], seed=21)}, rtol=1e-4),
    Case("lrn_grad", "LRNGrad",
         inputs={"input_grads": values([1, 2, 2, 7], seed=22), "input_image": lrn_x, "output_image": lrn_y},
         attrs=LRN_ATTRS, rtol=1e-4),
    Case("rgb_to_hsv", "RGBToHSV", inputs={"images": values([2, 3, 3], seed=40, low=0.0, high=1.0)}),
    Case("rgb_to_hsv_ties", "RGBToHSV",
         inputs={"images": np.array([[0.5, 0.5, 0.2], [0.1, 0.7, 0.7], [0.3, 0.3, 0.3], [0.0, 0.4, 0.9]], np.float32)},
         rtol=1e-4),
    # TensorFlow's RGBToHSV gradient casts its masks to float32: it has none for float64 images.
    Case("rgb_to_hsv_f64", "RGBToHSV", inputs={"images": values([4, 3], np.float64, 41, 0.0, 1.0)}, grad=False),
    Case("hsv_to_rgb", "HSVToRGB", inputs={"images": values([2, 3, 3], seed=42, low=0.0, high=1.0)}),
    Case("hsv_to_rgb_f64", "HSVToRGB", inputs={"images": values([4, 3], np.float64, 43, 0.0, 1.0)}),
    Case("adjust_hue", "AdjustHue", inputs={"images": values([2, 2, 3], seed=44, low=0.0, high=1.0)},
         consts={"delta": np.float32(0.3)}, rtol=1e-4),
    Case("adjust_hue_negative", "AdjustHue", inputs={"images": values([3, 1, 3], seed=45, low=0.0, high=1.0)},
         consts={"delta": np.float32(-0.7)}, rtol=1e-4),
    Case("adjust_saturation", "AdjustSaturation", inputs={"images": values([2, 2, 3], seed=46, low=0.0, high=1.0)},
         consts={"scale": np.float32(1.7)}, rtol=1e-4),
    Case("adjust_saturation_down", "AdjustSaturation",
         inputs={"images": values([3, 1, 3], seed=47, low=0.0, high=1.0)}, consts={"scale": np.float32(0.4)},
         rtol=1e-4),
    Case("adjust_contrast", "AdjustContrastv2", inputs={"images": values([2, 3, 4, 3], seed=48)},
         consts={"contrast_factor": np.float32(1.8)}),
    Case("max_pool_v2", "MaxPoolV2", inputs={"input": distinct([1, 4, 5, 2], seed=33)},
         consts={"ksize": i32([1, 2, 2, 1]), "strides": i32([1, 2, 2, 1])}, attrs={"padding": "SAME"}),
    Case("max_pool_grad", "MaxPoolGrad",
         inputs={"orig_input": mp_x, "orig_output": mp_y, "grad": eighths([1, 2, 2, 2], seed=34)},
         attrs={"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}),
    Case("max_pool_grad_v2", "MaxPoolGradV2",
         inputs={"orig_input": mp2_x, "orig_output": mp2_y, "grad": eighths([1, 3, 3, 1], seed=35)},
         consts={"ksize": i32([1, 3, 3, 1]), "strides": i32([1, 2, 2, 1])}, attrs={"padding": "SAME"}),
    Case("max_pool_grad_grad", "MaxPoolGradGrad",
         inputs={"orig_input": mp_x, "orig_output": mp_y, "grad": eighths([1, 4, 4, 2], seed=36)},
         attrs={"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}),
    Case("max_pool_grad_grad_v2", "MaxPoolGradGradV2",
         inputs={"orig_input": mp2_x, "orig_output": mp2_y, "grad": eighths([1, 5, 5, 1], seed=37)},
         consts={"ksize": i32([1, 3, 3, 1]), "strides": i32([1, 2, 2, 1])}, attrs={"padding": "SAME"}),
    Case("max_pool3d_grad", "MaxPool3DGrad",
         inputs={"orig_input": mp3_x, "orig_output": mp3_y, "grad": eighths([1, 1, 2, 2, 1], seed=38)},
         attrs={"ksize": [1, 2, 2, 2, 1], "strides": [1, 2, 2, 2, 1], "padding": "VALID"}),
    Case("conv2d_backprop_input", "Conv2DBackpropInput",
         inputs={"filter": values([2, 2, 3, 2], seed=50), "out_backprop": values([1, 2, 2, 2], seed=51)},
         consts={"input_sizes": i32([1, 4, 4, 3])}, attrs={"strides": [1, 2, 2, 1], "padding": "SAME"}),
    Case("conv2d_backprop_filter", "Conv2DBackpropFilter",
         inputs={"input": values([1, 4, 4, 3], seed=52), "out_backprop": values([1, 3, 3, 2], seed=53)},
         consts={"filter_sizes": i32([2, 2, 3, 2])}, attrs={"strides": [1, 1, 1, 1], "padding": "VALID"}),
    Case("depthwise_backprop_input", "DepthwiseConv2dNativeBackpropInput",
         inputs={"filter": values([3, 3, 2, 2], seed=54), "out_backprop": values([1, 4, 4, 4], seed=55)},
         consts={"input_sizes": i32([1, 4, 4, 2])}, attrs={"strides": [1, 1, 1, 1], "padding": "SAME"}),
    Case("depthwise_backprop_filter", "DepthwiseConv2dNativeBackpropFilter",
         inputs={"input": values([1, 5, 5, 2], seed=56), "out_backprop": values([1, 2, 2, 2], seed=57)},
         consts={"filter_sizes": i32([3, 3, 2, 1])}, attrs={"strides": [1, 2, 2, 1], "padding": "VALID"}),
    Case("avg_pool_grad", "AvgPoolGrad", inputs={"grad": values([1, 2, 3, 2], seed=58)},
         consts={"orig_input_shape": i32([1, 4, 5, 2])},
         attrs={"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}),
    Case("extract_image_patches", "ExtractImagePatches", inputs={"images": values([2, 4, 5, 2], seed=60)},
         attrs={"ksizes": [1, 2, 3, 1], "strides": [1, 2, 1, 1], "rates": [1, 1, 1, 1], "padding": "VALID"}),
    Case("extract_image_patches_same", "ExtractImagePatches",
         inputs={"images": values([1, 5, 4, 1], np.float64, 61)},
         attrs={"ksizes": [1, 2, 2, 1], "strides": [1, 2, 3, 1], "rates": [1, 2, 1, 1], "padding": "SAME"}),
    Case("fused_batch_norm", "FusedBatchNorm",
         inputs={"x": values([2, 3, 2, 4], seed=62), "scale": values([4], seed=63), "offset": values([4], seed=64)},
         consts={"mean": np.zeros(4, np.float32), "variance": np.ones(4, np.float32)},
         attrs={"epsilon": 0.001, "is_training": True}, rtol=1e-4),
    Case("fused_batch_norm_v2_inference", "FusedBatchNormV2",
         inputs={"x": values([2, 2, 3, 3], seed=65), "scale": values([3], seed=66), "offset": values([3], seed=67),
                 "mean": values([3], seed=68), "variance": values([3], seed=69, low=0.5, high=1.5)},
         attrs={"epsilon": 0.01, "is_training": False}, rtol=1e-4),
    Case("conv_2d", "Conv", inputs={"input": values([1, 5, 5, 2], seed=70), "filter": values([3, 3, 2, 3], seed=71)},
         attrs={"strides": [1, 2, 2, 1], "padding": "SAME"}),
    Case("conv_3d", "Conv",
         inputs={"input": values([1, 3, 4, 4, 1], seed=72), "filter": values([2, 2, 2, 1, 2], seed=73)},
         attrs={"strides": [1, 1, 1, 1, 1], "padding": "VALID", "dilations": [1, 1, 1, 1, 1]}),
    Case("max_pool3d_grad_grad", "MaxPool3DGradGrad",
         inputs={"orig_input": mp3_x, "orig_output": mp3_y, "grad": eighths([1, 2, 4, 4, 1], seed=39)},
         attrs={"ksize": [1, 2, 2, 2, 1], "strides": [1, 2, 2, 2, 1], "padding": "VALID"}),
]

if __name__ == "__main__":
    op_cases.write_family("image", CASES)
