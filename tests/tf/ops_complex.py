"""Writes tests/tf/corpus/ops/complex.{pbtxt,json}: the complex-number ops (Complex, Real, Imag,
Conj, ComplexAbs, Angle, ConjugateTranspose) on complex64 and complex128 feeds, and float inputs
differentiated through them (the `fn` cases: gradients are recorded for float placeholders only).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_complex.py
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


def with_zero(z):
    """`z` with its first element 0 (ComplexAbs's gradient divides by |z|, and is 0 there)."""
    z = z.copy()
    z.reshape(-1)[0] = 0
    return z


def parts(re, im):
    """Every real view of `Complex(re, im)`: through Conj, ComplexAbs and Angle too."""
    z = raw.Complex(real=re, imag=im, Tout=tf.complex128 if re.dtype == tf.float64 else tf.complex64)
    zc = raw.Conj(input=z)
    return [raw.Real(input=zc, Tout=re.dtype), raw.Imag(input=zc, Tout=re.dtype),
            raw.ComplexAbs(x=z, Tout=re.dtype), raw.Angle(input=z, Tout=re.dtype)]


def transposed(re, im, perm):
    z = raw.Complex(real=re, imag=im, Tout=tf.complex64)
    t = raw.ConjugateTranspose(x=z, perm=perm)
    return [raw.Real(input=t, Tout=tf.float32), raw.Imag(input=t, Tout=tf.float32)]


def arithmetic(re, im):
    """Complex products and quotients, whose gradients take the operands' conjugates."""
    z = raw.Complex(real=re, imag=im, Tout=tf.complex64)
    w = raw.Complex(real=im + 3.0, imag=re, Tout=tf.complex64)
    p = raw.Mul(x=z, y=w)
    q = raw.RealDiv(x=z, y=w)
    s = raw.Square(x=raw.Sub(x=z, y=raw.Neg(x=w)))
    return [raw.Real(input=p, Tout=tf.float32), raw.Imag(input=q, Tout=tf.float32),
            raw.ComplexAbs(x=raw.AddV2(x=s, y=q), Tout=tf.float32)]


PERM = np.array([1, 0, 2], np.int32)

CASES = [
    Case("complex_broadcast", "Complex", inputs={"real": f32(1, 2, 3), "imag": f32(2, 3)},
         attrs={"Tout": tf.complex64}),
    Case("complex_f64", "Complex", inputs={"real": f32(3, 4).astype(np.float64), "imag": f32(4, 4).astype(np.float64)},
         attrs={"Tout": tf.complex128}),
    Case("real_c64", "Real", inputs={"input": c64(5, 2, 3)}, attrs={"Tout": tf.float32}),
    Case("imag_c128", "Imag", inputs={"input": c64(6, 3).astype(np.complex128)}, attrs={"Tout": tf.float64}),
    Case("conj_c64", "Conj", inputs={"input": c64(7, 2, 2)}),
    Case("complex_abs_c64", "ComplexAbs", inputs={"x": with_zero(c64(8, 2, 3))}, attrs={"Tout": tf.float32}),
    Case("complex_abs_c128", "ComplexAbs", inputs={"x": c64(9, 4).astype(np.complex128)}, attrs={"Tout": tf.float64}),
    Case("angle_c64", "Angle", inputs={"input": with_zero(c64(10, 5))}, attrs={"Tout": tf.float32}),
    Case("conjugate_transpose_c64", "ConjugateTranspose", inputs={"x": c64(11, 2, 3, 2)}, consts={"perm": PERM}),
    Case("conjugate_transpose_f32", "ConjugateTranspose", inputs={"x": f32(12, 2, 3, 2)}, consts={"perm": PERM}),
    # Float inputs differentiated through the complex ops.
    Case("grad_parts_f32", "Complex", inputs={"re": f32(13, 2, 3), "im": with_zero(f32(14, 2, 3))},
         fn=lambda re, im: parts(re, im)),
    Case("grad_parts_f64", "Complex",
         inputs={"re": f32(15, 4).astype(np.float64), "im": f32(16, 4).astype(np.float64)},
         fn=lambda re, im: parts(re, im)),
    Case("grad_conjugate_transpose", "ConjugateTranspose", inputs={"re": f32(17, 2, 3, 2), "im": f32(18, 2, 3, 2)},
         consts={"perm": PERM}, fn=transposed),
    Case("grad_arithmetic", "Mul", inputs={"re": f32(19, 2, 3), "im": f32(20, 2, 3)}, fn=arithmetic),
]

if __name__ == "__main__":
    op_cases.write_family("complex", CASES)
