//! Each op family of TensorFlow's XLA op set against TensorFlow's own
//! numbers, on the simulator and on PJRT, with the IR's gradients
//! (`tests/tf/ops_<family>.py`; the harness is `support::op_cases`).

use crate::support::op_cases::check_family;

/// The harness's own check, on ops every backend already had.
#[test]
fn basic() {
    check_family("basic");
}

/// Concat, Gather, Reverse, ReverseSequence, Roll, TopKV2, splits, unstacking, strided-slice
/// gradients, LinSpace, Empty, Bucketize and the sorted searches (`tests/tf/ops_index.py`).
#[test]
fn index() {
    check_family("index");
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
