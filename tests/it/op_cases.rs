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

/// Complex numbers: `Complex`, `Real`, `Imag`, `Conj`, `ComplexAbs`, `Angle`,
/// `ConjugateTranspose`, and float inputs differentiated through them (`tests/tf/ops_complex.py`).
#[test]
fn complex() {
    check_family("complex");
}

/// The FFTs in 1-3 dimensions, with `fft_length` cropping and padding, and their gradients
/// (`tests/tf/ops_fft.py`).
#[test]
fn fft() {
    check_family("fft");
}

/// Data-dependent and update ops: CumulativeLogsumexp, TensorStridedSliceUpdate,
/// ResourceStridedSliceAssign, SparseToDense and the bincounts (`tests/tf/ops_data.py`).
#[test]
fn data() {
    check_family("data");
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

/// The draws of `tf.random.Generator` from its state variable: StatefulUniform,
/// StatefulStandardNormalV2, StatefulTruncatedNormal, StatefulUniformInt and
/// StatefulUniformFullInt, one and two steps (`tests/tf/ops_stateful_random.py`).
#[test]
fn stateful_random() {
    check_family("stateful_random");
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

/// Complex feeds and outputs through the command line: JSON `[real, imaginary]`
/// pairs and `.npy` (`c8`), on the simulator and on PJRT, giving the FFT the
/// identity `FFT([1+1j, 2-2j]) = [3-1j, -1+3j]` computes by hand.
#[test]
fn complex_values_cross_the_command_line() {
    use crate::support::cli::run;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let graph = dir.path().join("fft.opg");
    std::fs::write(
        &graph,
        "graph @main {\n  %x = Placeholder() {dtype = c64, shape = shape[2]}\n  \
         %f = FFT(%x) {Tcomplex = c64}\n  %a = ComplexAbs(%f) {T = c64, Tout = f32}\n}\n",
    )
    .expect("writes the graph");
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x:0": [[1.0, 1.0], [2.0, -2.0]]}"#).expect("writes the feeds");
    let plugin = crate::support::pjrt::plugin_path();
    let npy = dir.path().join("out");
    for backend in [vec!["--backend", "sim"], vec!["--backend", "pjrt", "--pjrt-plugin", plugin.to_str().unwrap()]] {
        let mut args = vec!["run", graph.to_str().unwrap(), "--feeds", feeds.to_str().unwrap(), "--json"];
        args.extend(["--fetch", "f:0", "--fetch", "a:0", "--npy-dir", npy.to_str().unwrap()]);
        args.extend(backend.iter().copied());
        let o = run(&args);
        assert!(o.status.success(), "{backend:?}: {}", crate::support::cli::stderr(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        let outputs = doc["outputs"].as_array().expect("outputs");
        assert_eq!(outputs[0]["dtype"], "c64", "{backend:?}");
        assert_eq!(outputs[0]["value"], serde_json::json!([[3.0, -1.0], [-1.0, 3.0]]), "{backend:?}");
        let abs = outputs[1]["value"].as_array().expect("|FFT|");
        assert!(abs.iter().all(|v| (v.as_f64().unwrap() - 10f64.sqrt()).abs() < 1e-6), "{backend:?}: {abs:?}");
        let written = tpu_rewrite::exec::read_npy_file(&npy.join("f_0.npy")).expect("a complex .npy");
        let want = [num_complex::Complex32::new(3.0, -1.0), num_complex::Complex32::new(-1.0, 3.0)];
        assert_eq!(written.to_vec::<num_complex::Complex32>().expect("c64"), want, "{backend:?}");
    }
}
