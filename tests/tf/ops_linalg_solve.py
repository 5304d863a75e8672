"""Op cases of the factorizations and solves, with TensorFlow's numbers (tests/tf/op_cases.py).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_linalg_solve.py

Writes tests/tf/corpus/ops/linalg_solve.pbtxt and linalg_solve.json: MatrixInverse and
MatrixSolve (single and batched matrices, with and without `adjoint`, f32 and f64) and
TridiagonalSolve (with and without partial pivoting) and Qr (deep, square, wide, full_matrices),
SelfAdjointEigV2, XlaSelfAdjointEig, Svd and XlaSvd (eigen- and singular vectors compared squared:
they are unique only up to sign), with gradients. The matrices are diagonally dominant, so they are well conditioned and every pivot
order gives the same numbers to the tolerance.
"""

import numpy as np

import op_cases
import tensorflow as tf
from op_cases import Case

RNG = np.random.default_rng(2506)


def mat(*shape, dtype=np.float32):
    return RNG.uniform(-2.0, 2.0, size=shape).astype(dtype)


def square(*batch, n, dtype=np.float32):
    """Well-conditioned square matrices: random entries plus a diagonal of 2n, some of it negative,
    so the pivots move rows."""
    m = RNG.uniform(-1.0, 1.0, size=batch + (n, n))
    signs = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    m = m + np.diag(signs * 2.0 * n)
    # A row permutation: partial pivoting has to swap rows back.
    m = m[..., np.roll(np.arange(n), 1), :]
    return m.astype(dtype)


def symmetric(*batch, values, dtype):
    """Symmetric matrices with the given well-separated eigenvalues (a random orthogonal basis)."""
    q, _ = np.linalg.qr(RNG.normal(size=batch + (len(values), len(values))))
    return (q @ np.diag(values) @ np.swapaxes(q, -1, -2)).astype(dtype)


def squared(outputs):
    """The eigenvalues (or singular values) as they are, each vector output squared elementwise:
    unique only up to each column's sign, a vector compares as its square."""
    return [t if i == 0 else t * t for i, t in enumerate(outputs)]


def cases():
    out = []
    f32, f64 = np.float32, np.float64
    for name, batch, n, adjoint, dt in [
        ("inverse", (), 3, False, f32),
        ("inverse_adjoint", (), 4, True, f64),
        ("inverse_batch", (2,), 3, False, f64),
        ("inverse_batch_adjoint", (2, 1), 2, True, f32),
    ]:
        out.append(Case(name, "MatrixInverse", inputs={"input": square(*batch, n=n, dtype=dt)},
                        attrs={"adjoint": adjoint}, grad=True, rtol=1e-4 if dt is f32 else 1e-9))
    for name, batch, n, k, adjoint, dt in [
        ("solve", (), 3, 2, False, f32),
        ("solve_adjoint", (), 3, 1, True, f32),
        ("solve_batch", (2,), 4, 3, False, f64),
        ("solve_batch_adjoint", (2,), 2, 2, True, f64),
    ]:
        out.append(Case(name, "MatrixSolve",
                        inputs={"matrix": square(*batch, n=n, dtype=dt), "rhs": mat(*batch, n, k, dtype=dt)},
                        attrs={"adjoint": adjoint}, grad=True, rtol=1e-4 if dt is f32 else 1e-9))
    # TridiagonalSolve: diagonals [..., 3, M] (super's last and sub's first element unread). TensorFlow's
    # XLA bridge solves without pivoting only; with pivoting it refuses, and its CPU values stand.
    for name, batch, m, k, pivoting, dt in [
        ("tridiagonal_solve", (), 4, 2, True, f32),
        ("tridiagonal_solve_no_pivoting", (2,), 3, 1, False, f64),
        ("tridiagonal_solve_batch", (2,), 5, 2, True, f64),
    ]:
        diags = RNG.uniform(-1.0, 1.0, size=batch + (3, m))
        diags[..., 1, :] += np.where(np.arange(m) % 2 == 0, 3.0, -3.0)
        out.append(Case(name, "TridiagonalSolve",
                        inputs={"diagonals": diags.astype(dt), "rhs": mat(*batch, m, k, dtype=dt)},
                        attrs={"partial_pivoting": pivoting}, grad=True, rtol=1e-4 if dt is f32 else 1e-9))
    # Qr: deep, square, wide and full_matrices, batched; TensorFlow's CPU kernel, its XLA bridge and
    # ours all take LAPACK's Householder signs, so q and r compare as they are. TensorFlow has no
    # gradient for a deep matrix with full_matrices.
    for name, shape, full, dt, grad in [
        ("qr_deep", (4, 3), False, f32, True),
        ("qr_square_batch", (2, 3, 3), False, f64, True),
        ("qr_wide", (2, 4), False, f64, True),
        ("qr_wide_full", (2, 3, 5), True, f32, True),
        ("qr_deep_full", (4, 2), True, f64, False),
    ]:
        out.append(Case(name, "Qr", inputs={"input": mat(*shape, dtype=dt)}, attrs={"full_matrices": full},
                        grad=grad, rtol=1e-4 if dt is f32 else 1e-9))
    # SelfAdjointEigV2 reads the lower triangle (one case has a different upper one); eigenvalues
    # ascend; eigenvectors compare squared. Without compute_v the gradient recomputes them.
    for name, batch, values, compute_v, dt, skew in [
        ("eigh", (), [-2.0, 0.5, 3.0], True, f32, False),
        ("eigh_batch_lower", (2,), [-1.5, -0.25, 1.0, 2.5], True, f64, True),
        ("eigh_values_only", (), [0.5, 1.5, 4.0], False, f64, False),
    ]:
        a = symmetric(*batch, values=values, dtype=dt)
        if skew:
            a = a + np.triu(RNG.uniform(-1.0, 1.0, size=a.shape), 1).astype(dt)
        # Without compute_v, TensorFlow's CPU kernel leaves `v` an uninitialized scalar: not compared.
        out.append(Case(name, "SelfAdjointEigV2", inputs={"input": a}, attrs={"compute_v": compute_v}, grad=True,
                        rtol=1e-4 if dt is f32 else 1e-7, post=squared if compute_v else lambda o: o[:1]))
    # XlaSelfAdjointEig: XLA only (no CPU kernel, no gradient); lower or upper triangle, its own
    # iteration bound and tolerance. XLA stops sweeping once the off-diagonal part is below epsilon
    # (1e-6) of the norm, so its f64 eigenvectors are only that close to converged ones.
    for name, batch, values, lower, dt in [
        ("xla_eigh_lower", (), [-1.0, 0.25, 2.0], True, f32),
        ("xla_eigh_upper", (2,), [-3.0, -1.0, 0.5, 2.0], False, f64),
    ]:
        a = symmetric(*batch, values=values, dtype=dt)
        off = RNG.uniform(-1.0, 1.0, size=a.shape).astype(dt)
        a = a + (np.triu(off, 1) if lower else np.tril(off, -1))
        out.append(Case(name, "XlaSelfAdjointEig", inputs={"a": a},
                        attrs={"lower": lower, "max_iter": 100, "epsilon": 1e-6}, grad=False, cpu=False,
                        rtol=1e-4 if dt is f32 else 1e-5, post=squared))
    # Svd: deep, wide, square and batched; singular values descend; vectors compare squared. With
    # full_matrices a complement of more than one column is not unique even up to sign: its case
    # compares the thin columns and the orthonormality of u (u^T u) instead, and TensorFlow has no
    # gradient for it (nor for any full SVD whose sides differ by more than one). Without compute_uv
    # TensorFlow's CPU kernel leaves
    # u and v uninitialized scalars: only s compares. TensorFlow's XLA bridge stops its Jacobi
    # sweeps at 1e-6 of the norm, hence the f64 tolerance.
    def thin_and_gram(o):
        s, u, v = o
        p = s.shape[-1]
        return [s, u[..., :p] * u[..., :p], v * v, tf.matmul(u, u, adjoint_a=True)]

    for name, shape, compute_uv, full, dt, post, grad in [
        ("svd_deep", (4, 3), True, False, f32, squared, True),
        ("svd_wide_batch", (2, 2, 3), True, False, f64, squared, True),
        ("svd_square", (3, 3), True, False, f64, squared, True),
        ("svd_values_only", (3, 2), False, False, f64, lambda o: o[:1], True),
        ("svd_full_wide", (3, 4), True, True, f32, squared, True),
        ("svd_full_deep", (3, 2), True, True, f64, squared, True),
        ("svd_full_deep_gram", (5, 2), True, True, f64, thin_and_gram, False),
    ]:
        out.append(Case(name, "Svd", inputs={"input": mat(*shape, dtype=dt)},
                        attrs={"compute_uv": compute_uv, "full_matrices": full}, grad=grad,
                        rtol=1e-4 if dt is f32 else 1e-5, post=post))
    # XlaSvd: XLA only, no gradient; u and v are always full.
    for name, shape, dt in [("xla_svd", (3, 3), f32), ("xla_svd_batch", (2, 4, 3), f64)]:
        out.append(Case(name, "XlaSvd", inputs={"a": mat(*shape, dtype=dt)},
                        attrs={"max_iter": 100, "epsilon": 1e-6, "precision_config": ""}, grad=False, cpu=False,
                        rtol=1e-4 if dt is f32 else 1e-5, post=squared))
    return out


if __name__ == "__main__":
    op_cases.write_family("linalg_solve", cases())
