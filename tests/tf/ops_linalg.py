"""Op cases of the linear-algebra family, with TensorFlow's numbers (tests/tf/op_cases.py).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_linalg.py

Writes tests/tf/corpus/ops/linalg.pb and linalg.json: band parts, the diagonal ops (every version,
several bands and alignments, padding values, rectangular matrices, batches), Diag/DiagPart and
Cross, in f32 and f64 (and i32 or bf16 where the op moves elements only), with gradients.
`k`, `num_rows` and `num_cols` are constants, as TensorFlow's XLA bridge requires.
"""

import numpy as np

import op_cases
import tensorflow as tf
from op_cases import Case

BF16 = tf.bfloat16.as_numpy_dtype

RNG = np.random.default_rng(25)


def mat(*shape, dtype=np.float32):
    """Small distinct values: every element is told apart in a comparison."""
    return RNG.uniform(-2.0, 2.0, size=shape).astype(dtype)


def i32(v):
    return np.array(v, dtype=np.int32)


def cases():
    out = []
    f32, f64 = np.float32, np.float64

    # MatrixBandPart: lower/upper counts, negative ones keep the whole triangle.
    for name, lower, upper, shape, dt in [
        ("band_1_0", 1, 0, (4, 5), f32),
        ("band_neg_2", -1, 2, (2, 4, 3), f64),
        ("band_0_neg", 0, -1, (3, 3), f32),
        ("band_int", 1, 1, (3, 4), np.int32),
    ]:
        x = mat(*shape, dtype=f32)
        x = (x * 10).astype(np.int32) if dt == np.int32 else x.astype(dt)
        out.append(Case(f"matrix_{name}", "MatrixBandPart", inputs={"input": x},
                        consts={"num_lower": np.int64(lower), "num_upper": np.int64(upper)},
                        grad=dt != np.int32))

    # V1 diag ops (main diagonal).
    out.append(Case("matrix_diag_v1", "MatrixDiag", inputs={"diagonal": mat(2, 3)}, grad=True))
    out.append(Case("matrix_diag_part_v1", "MatrixDiagPart", inputs={"input": mat(2, 3, 4, dtype=f64)}, grad=True))
    out.append(Case("matrix_set_diag_v1", "MatrixSetDiag",
                    inputs={"input": mat(2, 4, 3), "diagonal": mat(2, 3)}, grad=True))

    # MatrixDiagPartV2/V3: one diagonal, bands, paddings, alignments.
    for name, op, shape, k, align, dt in [
        ("part_v2_band", "MatrixDiagPartV2", (3, 4), [-1, 1], None, f32),
        ("part_v3_sub", "MatrixDiagPartV3", (2, 4, 3), -1, "RIGHT_LEFT", f64),
        ("part_v3_rl", "MatrixDiagPartV3", (2, 3, 5), [-1, 2], "RIGHT_LEFT", f32),
        ("part_v3_lr", "MatrixDiagPartV3", (4, 3), [-2, 1], "LEFT_RIGHT", f32),
        ("part_v3_rr", "MatrixDiagPartV3", (3, 4), [0, 2], "RIGHT_RIGHT", f64),
        ("part_v3_ll", "MatrixDiagPartV3", (4, 4), [-3, -1], "LEFT_LEFT", f32),
    ]:
        attrs = {} if align is None else {"align": align}
        out.append(Case(f"matrix_diag_{name}", op, inputs={"input": mat(*shape, dtype=dt)},
                        consts={"k": i32(k), "padding_value": np.array(9.0, dt)}, attrs=attrs, grad=True))

    # MatrixDiagV2/V3: square and rectangular results, inferred sizes.
    for name, op, dshape, k, rows, cols, align, dt in [
        ("v2_single", "MatrixDiagV2", (2, 3), 1, -1, -1, None, f32),
        ("v2_band", "MatrixDiagV2", (2, 3), [-1, 0], -1, -1, None, f64),
        ("v3_rect", "MatrixDiagV3", (2, 3), [0, 1], 3, 4, "RIGHT_LEFT", f32),
        ("v3_rows", "MatrixDiagV3", (3,), -1, 5, -1, "RIGHT_LEFT", f64),
        ("v3_lr", "MatrixDiagV3", (2, 2, 3), [-1, 0], -1, 4, "LEFT_RIGHT", f32),
    ]:
        attrs = {} if align is None else {"align": align}
        out.append(Case(f"matrix_diag_{name}", op, inputs={"diagonal": mat(*dshape, dtype=dt)},
                        consts={"k": i32(k), "num_rows": i32(rows), "num_cols": i32(cols),
                                "padding_value": np.array(-1.5, dt)}, attrs=attrs, grad=True))

    # MatrixSetDiagV2/V3.
    for name, op, shape, dshape, k, align, dt in [
        ("v2_single", "MatrixSetDiagV2", (3, 4), (3,), 0, None, f32),
        ("v3_band", "MatrixSetDiagV3", (2, 3, 4), (2, 3, 3), [-1, 1], "RIGHT_LEFT", f64),
        ("v3_rr", "MatrixSetDiagV3", (4, 3), (2, 3), [-2, -1], "RIGHT_RIGHT", f32),
    ]:
        attrs = {} if align is None else {"align": align}
        out.append(Case(f"matrix_set_diag_{name}", op,
                        inputs={"input": mat(*shape, dtype=dt), "diagonal": mat(*dshape, dtype=dt)},
                        consts={"k": i32(k)}, attrs=attrs, grad=True))
    out.append(Case("matrix_set_diag_int", "MatrixSetDiagV3",
                    inputs={"input": i32([[1, 2, 3], [4, 5, 6]]), "diagonal": i32([[7, 8], [9, 10]])},
                    consts={"k": i32([0, 1])}, attrs={"align": "LEFT_RIGHT"}, grad=False))

    # Diag and DiagPart of rank 1 and 2.
    out.append(Case("diag_vector", "Diag", inputs={"diagonal": mat(3)}, grad=True))
    out.append(Case("diag_matrix", "Diag", inputs={"diagonal": mat(2, 2, dtype=f64)}, grad=True))
    out.append(Case("diag_part_vector", "DiagPart", inputs={"input": mat(3, 3)}, grad=True))
    out.append(Case("diag_part_matrix", "DiagPart", inputs={"input": mat(2, 3, 2, 3, dtype=f64)}, grad=True))

    # Cross.
    out.append(Case("cross_f32", "Cross", inputs={"a": mat(4, 3), "b": mat(4, 3)}, grad=True))
    out.append(Case("cross_f64", "Cross", inputs={"a": mat(2, 2, 3, dtype=f64), "b": mat(2, 2, 3, dtype=f64)},
                    grad=True))
    out.append(Case("cross_i32", "Cross", inputs={"a": i32([[1, -2, 3], [4, 5, -6]]),
                                                  "b": i32([[7, 8, 9], [-1, 0, 2]])}, grad=False))
    # Cholesky of symmetric positive-definite matrices (batched); the gradient is TF's symmetric one.
    for name, n, batch, dt in [("cholesky_f32", 3, (2,), f32), ("cholesky_f64", 4, (), f64)]:
        m = mat(*batch, n, n, dtype=f64)
        spd = (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dt)
        out.append(Case(name, "Cholesky", inputs={"input": spd}, grad=True, rtol=1e-4))

    # MatrixTriangularSolve: lower/upper, adjoint, broadcast batch dims; diagonals kept away from 0.
    for name, lower, adjoint, ashape, bshape, dt in [
        ("tri_solve_lower", True, False, (3, 3), (3, 2), f32),
        ("tri_solve_upper_adj", False, True, (2, 3, 3), (2, 3, 4), f64),
        ("tri_solve_bcast", True, True, (1, 2, 2), (3, 2, 1), f32),
    ]:
        a = mat(*ashape, dtype=dt)
        n = ashape[-1]
        a = a + (3.0 * np.eye(n)).astype(dt)
        out.append(Case(name, "MatrixTriangularSolve", inputs={"matrix": a, "rhs": mat(*bshape, dtype=dt)},
                        attrs={"lower": lower, "adjoint": adjoint}, grad=True, rtol=1e-4))
    # SparseMatMul: f32 and bf16 operands (an f32 product), every transpose.
    for name, ta, tb, ashape, bshape, da, db in [
        ("sparse_matmul", False, False, (2, 3), (3, 4), f32, f32),
        ("sparse_matmul_ta_tb", True, True, (3, 2), (4, 3), f32, f32),
        ("sparse_matmul_bf16", False, True, (2, 3), (4, 3), BF16, f32),
    ]:
        out.append(Case(name, "SparseMatMul", inputs={"a": mat(*ashape).astype(da), "b": mat(*bshape).astype(db)},
                        attrs={"transpose_a": ta, "transpose_b": tb, "a_is_sparse": True}, grad=True,
                        rtol=1e-2 if da is BF16 else 1e-5))
    # TridiagonalMatMul: diagonals [..., 1, M] (super's last and sub's first element unread).
    for name, batch, m, n, dt in [("tridiagonal_matmul", (), 4, 2, f32), ("tridiagonal_matmul_batch", (2,), 3, 3, f64)]:
        diags = {k: mat(*batch, 1, m, dtype=dt) for k in ("superdiag", "maindiag", "subdiag")}
        out.append(Case(name, "TridiagonalMatMul", inputs={**diags, "rhs": mat(*batch, m, n, dtype=dt)}, grad=True))
    return out


if __name__ == "__main__":
    op_cases.write_family("linalg", cases())
