//! Each op family of TensorFlow's XLA op set against TensorFlow's own
//! numbers, on the simulator and on PJRT, with the IR's gradients
//! (`tests/tf/ops_<family>.py`; the harness is `support::op_cases`).

use crate::support::op_cases::check_family;

/// The harness's own check, on ops every backend already had.
#[test]
fn basic() {
    check_family("basic");
}

/// Linear algebra: band parts, the diagonal ops (V1-V3), Diag/DiagPart,
/// Cross, Cholesky and MatrixTriangularSolve (`tests/tf/ops_linalg.py`).
#[test]
fn linalg() {
    check_family("linalg");
}

/// Quantization-aware training: FakeQuant* and QuantizeAndDequantizeV2/V3/V4.
#[test]
fn quant() {
    check_family("quant");
}
