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

/// The second-order gradients of the fused batch norms (`FusedBatchNormGrad`, `V2`, `V3`: training
/// and inference, NHWC, NCHW and NDHWC, an f16 input) and a gradient of a gradient through a
/// training-mode `FusedBatchNormV3` (`tests/tf/ops_bn_grad.py`).
#[test]
fn bn_grad() {
    check_family("bn_grad");
}

/// Complex numbers: `Complex`, `Real`, `Imag`, `Conj`, `ComplexAbs`, `Angle`,
/// `ConjugateTranspose`, and float inputs differentiated through them (`tests/tf/ops_complex.py`).
#[test]
fn complex() {
    check_family("complex");
}

/// The ops whose output size depends on their operands' values: Unique, UniqueV2,
/// DynamicPartition (and its gradient), NonMaxSuppressionV3/V4 (`tests/tf/ops_dynamic_shape.py`).
/// On PJRT their outputs are padded buffers trimmed to their sizes (docs/xla.md).
#[test]
fn dynamic_shape() {
    check_family("dynamic_shape");
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

/// StochasticCastToInt (TensorFlow's CPU Philox stream on the simulator, the XLA bridge's on PJRT)
/// and XlaDequantize (`tests/tf/ops_prand.py`).
#[test]
fn prand() {
    check_family("prand");
}

/// StochasticCastToInt of f16 inputs, which the StableHLO lowering refuses: the simulator against
/// TensorFlow's CPU kernel (`tests/tf/ops_prand.py`).
#[test]
fn prand_cpu() {
    crate::support::op_cases::check_family_on_simulator("prand_cpu");
}

/// StochasticCastToInt with `Tout = int16` on both backends (`tests/tf/ops_prand_i16.py`).
#[test]
fn prand_i16() {
    check_family("prand_i16");
}

/// Parameterized truncated normals: the stateless op (TensorFlow's CPU rejection samplers on the
/// simulator, the bridge's inverse CDF on PJRT, gradients on both) and the seeded op by its
/// statistics (`tests/tf/ops_ptn.py`).
#[test]
fn ptn() {
    check_family("ptn");
}

/// The seeded op's exact CPU numbers and the f16 draws, which the bridge does not compile: the
/// simulator against TensorFlow's CPU kernel (`tests/tf/ops_ptn.py`).
#[test]
fn ptn_cpu() {
    crate::support::op_cases::check_family_on_simulator("ptn_cpu");
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

/// NASNetMobile's stride-2 depthwise convolution and pool gradients, with its shapes
/// (`tests/tf/ops_strided_grads.py`).
#[test]
fn strided_grads() {
    check_family("strided_grads");
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

/// TensorFlow 1's stacks (StackV2, StackPushV2, StackPopV2, StackCloseV2), each case a StackV2
/// with pushes and pops ordered by control edges (`tests/tf/ops_stack.py`).
#[test]
fn stack() {
    check_family("stack");
}

/// TensorFlow 1's TensorArray*V3 ops and their gradients, each case a chain of raw ops from a
/// dense tensor to a dense tensor (`tests/tf/ops_tensor_array.py`).
#[test]
fn tensor_array() {
    check_family("tensor_array");
}

/// The quantized-integer ops: UniformQuantize, UniformDequantize, UniformRequantize,
/// UniformQuantizedClipByValue and Dequantize, per tensor and per axis, on qint8, quint8 and
/// qint32 (`tests/tf/ops_uniform_quant.py`).
#[test]
fn uniform_quant() {
    check_family("uniform_quant");
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

/// `XlaCallModule` nodes holding `jax.export` modules (an MLP, conv + relu + pooling, while and
/// fori loops, cond and switch, reductions with an arg-max, plain reductions, integer and bool math,
/// gathers with a dynamic slice and a scatter-add, gathers and scatters with batching dimensions, a
/// sort), raised into IR functions (`tests/tf/ops_xla_call_module.py`).
#[test]
fn xla_call_module() {
    check_family("xla_call_module");
}

/// SymbolicGradient (the IR's gradient of a library function, nested calls included) and the
/// custom calls XlaCustomCall(V2) on the targets TensorFlow's XLA bridge runs on CPU
/// (`tests/tf/ops_xla_ext.py`).
#[test]
fn xla_ext() {
    check_family("xla_ext");
}

/// `XlaSend`/`XlaRecv` by `tensor_name` within one program, on both backends: TensorFlow runs
/// them only under XLA, whose CPU backend has no send/recv, so there are no TensorFlow numbers;
/// the recv must give exactly the value fetched from the send's operand
/// (`tests/fixtures/xla_send_recv.opg`). A recv with no matching send is a diagnostic naming its
/// `tensor_name`.
#[test]
fn xla_ext_send_and_recv_pass_the_value_on() {
    use crate::support::cli::{run, stderr};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/xla_send_recv.opg");
    let graph = std::fs::read_to_string(path).expect("the send/recv fixture");
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x": [1.5, -2.0, 0.25]}"#).expect("writes the feeds");
    let x = [1.5f64, -2.0, 0.25];
    let (p, f) = (path, feeds.to_str().expect("utf-8"));
    for backend in ["sim", "pjrt"] {
        let o = run(&["run", p, "--feeds", f, "--fetch", "y", "--fetch", "z", "--backend", backend]);
        assert!(o.status.success(), "{backend}: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let values = |name: &str| -> Vec<f64> {
            let line = out.lines().find_map(|l| l.strip_prefix(&format!("{name} = "))).expect("fetched");
            serde_json::from_str(line).expect("a JSON list")
        };
        let (y, z) = (values("y"), values("z"));
        // z = recv * x, where the recv must carry the sent y.
        let want: Vec<f64> = y.iter().zip(&x).map(|(a, b)| a * b).collect();
        assert_eq!(z, want, "{backend}: {out}");
        assert!(y.iter().zip(&x).all(|(a, b)| a != b), "{backend}: the sent value differs from the feed");
    }
    let bad = dir.path().join("unpaired.opg");
    std::fs::write(&bad, graph.replace("tensor_name = \"chan\", shape", "tensor_name = \"lost\", shape"))
        .expect("writes the graph");
    let o = run(&["run", bad.to_str().expect("utf-8"), "--feeds", f, "--fetch", "z"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("tpu_rewrite::passes::xla_channel") && err.contains("`lost`"), "{err}");
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
/// XlaScatter with its update function, and the variable forms of the SPMD tilers
/// (ReadVariableXlaSplitND, AssignVariableXlaConcatND), against TensorFlow's XLA bridge
/// (`tests/tf/ops_xla_misc.py`; TensorFlow has no CPU kernel and no gradient for them).
#[test]
fn xla_misc() {
    check_family("xla_misc");
}

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
