"""Writes tests/tf/corpus/ops/fft.{pbtxt,json}: FFT, IFFT, RFFT and IRFFT in 1-3 dimensions on
complex64/complex128 and float32/float64 feeds, with `fft_length` cropping the real transforms'
inputs, and float inputs differentiated through the transforms (the `fn` cases:
gradients are recorded for float placeholders only).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_fft.py
"""

import numpy as np
import tensorflow as tf

import op_cases
from op_cases import Case

raw = tf.raw_ops


def f32(seed, *shape):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape).astype(np.float32)


def c64(seed, *shape):
    return (f32(seed, *shape) + 1j * f32(seed + 100, *shape)).astype(np.complex64)


def n(*lengths):
    return np.array(lengths, np.int32)


def complex_of(re, im):
    return raw.Complex(real=re, imag=im, Tout=tf.complex128 if re.dtype == tf.float64 else tf.complex64)


def both_parts(y):
    real = tf.float64 if y.dtype == tf.complex128 else tf.float32
    return [raw.Real(input=y, Tout=real), raw.Imag(input=y, Tout=real)]


def through(op):
    """Complex(re, im) -> op -> (Real, Imag)."""
    return lambda re, im: both_parts(getattr(raw, op)(input=complex_of(re, im)))


def rfft_parts(op):
    return lambda x, fft_length: both_parts(getattr(raw, op)(input=x, fft_length=fft_length))


def irfft_of(op):
    return lambda re, im, fft_length: getattr(raw, op)(input=complex_of(re, im), fft_length=fft_length)


def abs_of_fft(re, im):
    y = raw.FFT(input=complex_of(re, im))
    return raw.ComplexAbs(x=y, Tout=tf.float32)


C = tf.complex64
C128 = tf.complex128

CASES = [
    Case("fft_c64", "FFT", inputs={"input": c64(1, 2, 8)}),
    Case("fft_c128", "FFT", inputs={"input": c64(2, 3, 5).astype(np.complex128)}),
    Case("fft2d_c64", "FFT2D", inputs={"input": c64(3, 2, 3, 4)}),
    Case("fft3d_c64", "FFT3D", inputs={"input": c64(4, 2, 3, 4)}),
    Case("ifft_c64", "IFFT", inputs={"input": c64(5, 2, 6)}),
    Case("ifft2d_c128", "IFFT2D", inputs={"input": c64(6, 3, 4).astype(np.complex128)}),
    Case("ifft3d_c64", "IFFT3D", inputs={"input": c64(7, 2, 2, 3)}),
    Case("rfft_even", "RFFT", inputs={"input": f32(8, 2, 8)}, consts={"fft_length": n(8)}, attrs={"Tcomplex": C}),
    Case("rfft_odd_f64", "RFFT", inputs={"input": f32(9, 3, 7).astype(np.float64)}, consts={"fft_length": n(7)},
         attrs={"Tcomplex": C128}),
    Case("rfft_crop", "RFFT", inputs={"input": f32(10, 2, 8)}, consts={"fft_length": n(6)}, attrs={"Tcomplex": C}),
    Case("rfft2d", "RFFT2D", inputs={"input": f32(12, 2, 4, 6)}, consts={"fft_length": n(4, 6)},
         attrs={"Tcomplex": C}),
    Case("rfft2d_crop", "RFFT2D", inputs={"input": f32(13, 3, 9)}, consts={"fft_length": n(2, 8)},
         attrs={"Tcomplex": C}),
    Case("rfft3d", "RFFT3D", inputs={"input": f32(14, 2, 3, 4)}, consts={"fft_length": n(2, 3, 4)},
         attrs={"Tcomplex": C}),
    Case("irfft_even", "IRFFT", inputs={"input": c64(15, 2, 5)}, consts={"fft_length": n(8)},
         attrs={"Treal": tf.float32}),
    Case("irfft_odd_c128", "IRFFT", inputs={"input": c64(16, 2, 4).astype(np.complex128)},
         consts={"fft_length": n(7)}, attrs={"Treal": tf.float64}),
    Case("irfft_crop", "IRFFT", inputs={"input": c64(17, 2, 6)}, consts={"fft_length": n(6)},
         attrs={"Treal": tf.float32}),
    Case("irfft2d", "IRFFT2D", inputs={"input": c64(19, 3, 5)}, consts={"fft_length": n(3, 8)},
         attrs={"Treal": tf.float32}),
    Case("irfft3d", "IRFFT3D", inputs={"input": c64(20, 2, 3, 3)}, consts={"fft_length": n(2, 3, 4)},
         attrs={"Treal": tf.float32}),
    # Float inputs differentiated through the transforms.
    Case("grad_fft", "FFT", inputs={"re": f32(21, 2, 6), "im": f32(22, 2, 6)}, fn=through("FFT")),
    Case("grad_ifft", "IFFT", inputs={"re": f32(23, 5), "im": f32(24, 5)}, fn=through("IFFT")),
    Case("grad_fft2d_f64", "FFT2D",
         inputs={"re": f32(25, 3, 4).astype(np.float64), "im": f32(26, 3, 4).astype(np.float64)},
         fn=through("FFT2D")),
    Case("grad_ifft2d", "IFFT2D", inputs={"re": f32(27, 2, 3), "im": f32(28, 2, 3)}, fn=through("IFFT2D")),
    Case("grad_fft3d", "FFT3D", inputs={"re": f32(29, 2, 2, 3), "im": f32(30, 2, 2, 3)}, fn=through("FFT3D")),
    Case("grad_ifft3d", "IFFT3D", inputs={"re": f32(31, 2, 3, 2), "im": f32(32, 2, 3, 2)}, fn=through("IFFT3D")),
    Case("grad_abs_fft", "FFT", inputs={"re": f32(33, 2, 4), "im": f32(34, 2, 4)}, fn=abs_of_fft),
    Case("grad_rfft_even", "RFFT", inputs={"x": f32(35, 2, 8)}, consts={"fft_length": n(8)}, fn=rfft_parts("RFFT")),
    Case("grad_rfft_odd", "RFFT", inputs={"x": f32(36, 7)}, consts={"fft_length": n(7)}, fn=rfft_parts("RFFT")),
    Case("grad_rfft2d", "RFFT2D", inputs={"x": f32(37, 2, 3, 4)}, consts={"fft_length": n(3, 4)},
         fn=rfft_parts("RFFT2D")),
    Case("grad_irfft_even", "IRFFT", inputs={"re": f32(38, 2, 5), "im": f32(39, 2, 5)}, consts={"fft_length": n(8)},
         fn=irfft_of("IRFFT")),
    Case("grad_irfft_odd", "IRFFT", inputs={"re": f32(40, 4), "im": f32(41, 4)}, consts={"fft_length": n(7)},
         fn=irfft_of("IRFFT")),
    Case("grad_irfft2d", "IRFFT2D", inputs={"re": f32(42, 3, 5), "im": f32(43, 3, 5)}, consts={"fft_length": n(3, 8)},
         fn=irfft_of("IRFFT2D")),
]

if __name__ == "__main__":
    op_cases.write_family("fft", CASES)
