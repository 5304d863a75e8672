//! Each op family of TensorFlow's XLA op set against TensorFlow's own
//! numbers, on the simulator and on PJRT, with the IR's gradients
//! (`tests/tf/ops_<family>.py`; the harness is `support::op_cases`).

use crate::support::op_cases::check_family;

/// The harness's own check, on ops every backend already had.
#[test]
fn basic() {
    check_family("basic");
}

/// Bitwise ops, shifts, population counts and integer truncating divisions.
#[test]
fn bitwise() {
    check_family("bitwise");
}

/// Grouped `Conv2D` and its backprops; the 2-D backprops' own gradients.
#[test]
fn grouped_conv() {
    check_family("grouped_conv");
}

/// Image ops, and the second-order gradients of convolutions and pools (`tests/tf/ops_image.py`).
#[test]
fn image() {
    check_family("image");
}

/// Concat, Gather, reversals, Roll, TopKV2, LinSpace, Empty, Bucketize and the bounds
/// (`tests/tf/ops_index.py`).
#[test]
fn index() {
    check_family("index");
}

/// Linear algebra: band parts, the diagonal ops (V1-V3), Diag/DiagPart,
/// Cross, Cholesky and MatrixTriangularSolve (`tests/tf/ops_linalg.py`).
#[test]
fn linalg() {
    check_family("linalg");
}

/// The TensorList gradients, TensorListSplit and TensorListConcatV2, each case a chain of list
/// ops from a dense tensor to a dense tensor (`tests/tf/ops_lists.py`).
#[test]
fn lists() {
    check_family("lists");
}

/// Quantization-aware training: FakeQuant* and QuantizeAndDequantizeV2/V3/V4.
#[test]
fn quant() {
    check_family("quant");
}

/// The tensor and resource scatters, ScatterNd, GatherNd and the proximal, AdagradDA, AddSign
/// and PowerSign optimizers (`tests/tf/ops_index.py`).
#[test]
fn scatter() {
    check_family("scatter");
}

/// UnsortedSegmentSum/Max/Min/Prod (`tests/tf/ops_index.py`).
#[test]
fn segment() {
    check_family("segment");
}

/// Spatial data movement and data-format ops (`tests/tf/ops_spatial.py`).
#[test]
fn spatial() {
    check_family("spatial");
}

/// Special functions, elementwise math and the gradients of elementwise ops.
#[test]
fn special() {
    check_family("special");
}
