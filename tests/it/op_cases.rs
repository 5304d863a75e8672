//! Each op family of TensorFlow's XLA op set against TensorFlow's own
//! numbers, on the simulator and on PJRT, with the IR's gradients
//! (`tests/tf/ops_<family>.py`; the harness is `support::op_cases`).

use crate::support::op_cases::check_family;

/// The harness's own check, on ops every backend already had.
#[test]
fn basic() {
    check_family("basic");
}

/// Concat, Gather, Reverse, Roll, splits, unstacking, strided-slice gradients, LinSpace, Empty,
/// Bucketize and the sorted searches.
#[test]
fn index() {
    check_family("index");
}

/// TensorScatterAdd/Sub/Max/Min/Update, ScatterNd and GatherNd.
#[test]
fn scatter() {
    check_family("scatter");
}

/// UnsortedSegmentSum/Max/Min/Prod.
#[test]
fn segment() {
    check_family("segment");
}
