"""Op cases of the igamma family: the regularized incomplete gamma and beta functions and their
derivatives (Igamma, Igammac, IgammaGradA, RandomGammaGrad, Betainc), with TensorFlow's values
(see op_cases.py).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_igamma.py

Writes tests/tf/corpus/ops/igamma.{pbtxt,json}; tests/it/op_cases.rs (`igamma`) compares the
simulator and PJRT with them. The points cover both expansions XLA and Eigen use (the series where
x <= 1 or x <= a, the continued fraction elsewhere) and the edges x = 0 and a <= 0.
"""

import numpy as np

import op_cases
from op_cases import Case

F32, F64 = np.float32, np.float64


def a(values, dtype=F32):
    return np.array(values, dtype=dtype)


def cases():
    out = []
    # (a, x) pairs: series (x <= 1 or x <= a) and continued fraction (x > 1 and x > a).
    av = [0.5, 1.5, 3.0, 2.0, 10.0, 0.8, 4.5]
    xv = [0.3, 1.0, 7.0, 0.5, 12.0, 4.0, 2.5]
    for dt, tag in ((F32, "f32"), (F64, "f64")):
        rtol = 1e-4 if dt == F32 else 1e-9
        out += [
            Case(f"igamma_{tag}", "Igamma", inputs={"a": a(av, dt), "x": a(xv, dt)}, grad=True, rtol=rtol),
            Case(f"igammac_{tag}", "Igammac", inputs={"a": a(av, dt), "x": a(xv, dt)}, grad=True, rtol=rtol),
            Case(f"igamma_grad_a_{tag}", "IgammaGradA", inputs={"a": a(av, dt), "x": a(xv, dt)}, rtol=rtol),
            Case(f"random_gamma_grad_{tag}", "RandomGammaGrad", inputs={"alpha": a(av, dt), "sample": a(xv, dt)},
                 rtol=rtol),
            Case(f"betainc_{tag}", "Betainc",
                 inputs={"a": a([0.5, 2.0, 5.0, 1.5, 3.0], dt), "b": a([1.5, 3.0, 0.7, 4.0, 3.0], dt),
                         "x": a([0.2, 0.6, 0.9, 0.05, 0.5], dt)}, grad=True, rtol=rtol),
        ]
    out += [
        # Broadcasting, and the gradient summed back to each operand's shape.
        Case("igamma_broadcast", "Igamma", inputs={"a": a([[0.7], [2.5]]), "x": a([0.4, 1.8, 6.0])}, grad=True,
             rtol=1e-4),
        Case("igammac_broadcast", "Igammac", inputs={"a": a(3.0), "x": a([0.4, 1.8, 6.0])}, grad=True, rtol=1e-4),
        Case("betainc_scalar_a", "Betainc", inputs={"a": a(2.0), "b": a([1.5, 3.0, 0.8]), "x": a([0.3, 0.7, 0.95])},
             grad=True, rtol=1e-4),
        # Domain edges: x = 0 gives 0 (Igammac 1), a <= 0 or x < 0 NaN (Igammac 1).
        Case("igamma_edges", "Igamma", inputs={"a": a([2.0, -1.0, 1.0, 0.0]), "x": a([0.0, 2.0, -0.5, 1.0])},
             grad=False),
        Case("igammac_edges", "Igammac", inputs={"a": a([2.0, -1.0, 1.0, 0.0]), "x": a([0.0, 2.0, -0.5, 1.0])},
             grad=False),
        Case("igamma_grad_a_edges", "IgammaGradA", inputs={"a": a([2.0, -1.0, 1.0]), "x": a([0.0, 2.0, -0.5])}),
        Case("betainc_edges", "Betainc", inputs={"a": a([2.0, -1.0, 1.0, 2.0]), "b": a([1.0, 2.0, 1.0, 3.0]),
                                                 "x": a([0.0, 0.5, 1.5, 1.0])}, grad=False),
    ]
    return out


if __name__ == "__main__":
    op_cases.write_family("igamma", cases())
