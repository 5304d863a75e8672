//! Each op family of TensorFlow's XLA op set against TensorFlow's own
//! numbers, on the simulator and on PJRT, with the IR's gradients
//! (`tests/tf/ops_<family>.py`; the harness is `support::op_cases`).

use crate::support::op_cases::check_family;
use miette::Diagnostic;
use tpu_rewrite::ir::{parse_module, IrError};
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

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

/// The incomplete gamma and beta functions and their derivatives: Igamma, Igammac, IgammaGradA,
/// RandomGammaGrad and Betainc (`tests/tf/ops_igamma.py`).
#[test]
fn igamma() {
    check_family("igamma");
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

/// Factorizations and solves: MatrixInverse, MatrixSolve, TridiagonalSolve, Qr,
/// SelfAdjointEigV2, XlaSelfAdjointEig, Svd and XlaSvd (`tests/tf/ops_linalg_solve.py`).
#[test]
fn linalg_solve() {
    check_family("linalg_solve");
}

/// Quantization-aware training: FakeQuant* and QuantizeAndDequantizeV2/V3/V4.
#[test]
fn quant() {
    check_family("quant");
}

/// The counter moves of `tf.random.Generator`'s state: RngSkip and RngReadAndSkip
/// (`tests/tf/ops_random_state.py`).
#[test]
fn random_state() {
    check_family("random_state");
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

/// Sharding annotations, SPMD shape ops, dynamic sizes, tiled splits and concatenations, and
/// runtime ops (`tests/tf/ops_spmd.py`).
#[test]
fn spmd() {
    check_family("spmd");
}

/// Special functions, elementwise math and the gradients of elementwise ops.
#[test]
fn special() {
    check_family("special");
}

/// The XLA-only ops of tf2xla's helpers: XlaPad, XlaDynamicSlice, XlaDynamicUpdateSlice,
/// XlaReducePrecision, XlaBroadcastHelper, XlaDot(V2), XlaEinsum, XlaGather, XlaConv(V2)
/// (`tests/tf/ops_xla_ops.py`).
#[test]
fn xla_ops() {
    check_family("xla_ops");
}

/// The XLA ops' serialized-message attributes (`dimension_numbers`, `precision_config`) print in
/// `.opg` text and parse back unchanged; bytes that are not the message are a diagnostic.
#[test]
fn xla_ops_proto_attributes_round_trip_and_bad_bytes_are_diagnosed() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tf/corpus/ops/xla_ops.pbtxt");
    let bytes = std::fs::read(path).expect("the xla_ops family (tests/tf/ops_xla_ops.py)");
    let (module, errors) = import_graphdef(&bytes, GraphDefFormat::Text).expect("the family imports");
    assert!(errors.is_empty(), "{errors:?}");
    let text = tpu_rewrite::emit::text::print_module(&module);
    let (again, errors) = parse_module(text.as_bytes()).expect("the printed module parses");
    assert!(errors.is_empty(), "{errors:?}");
    let (before, after) = (&module.graphs[0], &again.graphs[0]);
    assert_eq!(tpu_rewrite::ir::eq::first_difference(before, after), None);
    let mut seen = 0;
    for id in before.node_ids() {
        let node = before.node(id);
        if let Some(value) = node.attrs.get("dimension_numbers") {
            let back = after.node(after.find(&node.name).expect("the node is printed")).attrs.get("dimension_numbers");
            assert_eq!(back, Some(value), "{}", node.name);
            seen += 1;
        }
    }
    assert_eq!(seen, 16, "the dot, gather and convolution cases carry dimension numbers");

    let source = "graph @main {\n  %a = Placeholder() {dtype = f32, shape = [2, 3]}\n  \
                  %d = XlaDot(%a, %a) {T = f32, dimension_numbers = \"\\x0a\\x05\\x01\", precision_config = \"\"}\n}\n";
    let (_, errors) = parse_module(source.as_bytes()).expect("the graph parses");
    let error = errors.iter().find(|e| matches!(e, IrError::XlaProto { .. })).expect("a diagnostic for the bytes");
    assert_eq!(error.code().map(|c| c.to_string()).as_deref(), Some("tpu_rewrite::ir::xla_proto"));
    assert!(error.to_string().contains("not a serialized xla.DotDimensionNumbers"), "{error}");
}

/// The XLA ops whose attrs are functions (reducers, comparators, branches, loop bodies) and the
/// XLA sorts, with TensorFlow's XLA values (`tests/tf/ops_xla_fn.py`).
#[test]
fn xla_fn() {
    check_family("xla_fn");
}
