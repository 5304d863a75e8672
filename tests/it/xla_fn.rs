//! The XLA ops whose attrs are functions, written in `.opg`: the text form
//! round trips, the simulator runs the functions, the verifier rejects a
//! function whose arity does not fit the op, and the StableHLO lowering
//! refuses a window that is not a compile-time constant. TensorFlow's own
//! numbers are checked by `op_cases::xla_fn`.

use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::{self, Module};

use crate::support::cli;

/// `@main` sums the rows of `x` with `@add` and sorts `x`'s first row by `@less`, carrying an iota.
const PROGRAM: &str = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape [2, 3]}
  %zero = Const() {dtype = f32, value = tensor(f32, []) [0.5]}
  %sum = XlaReduce(%x, %zero) {T = f32, dimensions_to_reduce = [1], reducer = func "add"}
  %keys = Const() {dtype = f32, value = tensor(f32, [4]) [2.0, -1.0, 2.0, 0.0]}
  %iota = Const() {dtype = i32, value = tensor(i32, [4]) [0, 1, 2, 3]}
  %dim = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %sorted = XlaVariadicSort(%keys, %iota, %dim) {T = [f32, i32], comparator = func "less", is_stable = true}
}

graph @add (role = "function") {
  %a = _Arg() {T = f32, index = 0}
  %b = _Arg() {T = f32, index = 1}
  %s = AddV2(%a, %b) {T = f32}
  %r = _Retval(%s) {T = f32, index = 0}
}

graph @less (role = "function") {
  %a = _Arg() {T = f32, index = 0}
  %b = _Arg() {T = f32, index = 1}
  %i = _Arg() {T = i32, index = 2}
  %j = _Arg() {T = i32, index = 3}
  %lt = Less(%a, %b) {T = f32}
  %r = _Retval(%lt) {T = bool, index = 0}
}
"#;

fn parse(text: &str) -> (Module, Vec<ir::IrError>) {
    ir::parse_module(text.as_bytes()).expect("parses")
}

#[test]
fn opg_xla_function_ops_round_trip_and_run() {
    let (module, errors) = parse(PROGRAM);
    assert!(errors.is_empty(), "{errors:?}");
    let printed = tpu_rewrite::emit::print_module(&module);
    let (again, errors) = parse(&printed);
    assert!(errors.is_empty() && again == module, "parse(print(x)) == x:\n{printed}");
    let mesh = Mesh::new(&module, MeshConfig::default()).expect("the mesh builds");
    let mut feeds = Feeds::new();
    feeds.insert("main", "x:0".to_string(), Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap());
    let fetches: Vec<Fetch> = ["sum:0", "sorted:0", "sorted:1"].iter().map(|n| Fetch::new("main", *n)).collect();
    let got = mesh.run_step(&feeds, &fetches).expect("the step runs");
    assert_eq!(got[0], Tensor::vector(vec![6.5f32, 15.5]));
    assert_eq!(got[1], Tensor::vector(vec![-1.0f32, 0.0, 2.0, 2.0]));
    assert_eq!(got[2], Tensor::vector(vec![1i32, 3, 0, 2]), "a stable sort keeps the tied keys' order");
}

#[test]
fn a_function_whose_arity_does_not_fit_the_op_is_rejected() {
    // The reducer of one operand takes two scalars; the comparator of two operands four.
    let three = PROGRAM.replace(
        "%b = _Arg() {T = f32, index = 1}\n  %s",
        "%b = _Arg() {T = f32, index = 1}\n  %c = _Arg() {T = f32, index = 2}\n  %s",
    );
    let lone = PROGRAM
        .replace("XlaVariadicSort(%keys, %iota, %dim) {T = [f32, i32]", "XlaVariadicSort(%keys, %dim) {T = [f32]");
    for text in [three, lone] {
        assert_ne!(text, PROGRAM);
        let (_, errors) = parse(&text);
        let codes: Vec<String> =
            errors.iter().map(|e| miette::Diagnostic::code(e).map(|c| c.to_string()).unwrap_or_default()).collect();
        assert_eq!(codes, ["tpu_rewrite::ir::call_signature"], "{errors:?}");
    }
}

#[test]
fn a_window_that_is_not_a_constant_is_refused_by_the_lowering() {
    let program = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape [4]}
  %w = Placeholder() {dtype = i32, shape = shape [1]}
  %one = Const() {dtype = i32, value = tensor(i32, [1]) [1]}
  %pad = Const() {dtype = i32, value = tensor(i32, [1, 2]) [0, 0]}
  %zero = Const() {dtype = f32, value = tensor(f32, []) [0.0]}
  %y = XlaReduceWindow(%x, %zero, %w, %one, %one, %one, %pad) {T = f32, Tindices = i32, computation = func "add"}
}

graph @add (role = "function") {
  %a = _Arg() {T = f32, index = 0}
  %b = _Arg() {T = f32, index = 1}
  %s = AddV2(%a, %b) {T = f32}
  %r = _Retval(%s) {T = f32, index = 0}
}
"#;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("window.opg");
    std::fs::write(&path, program).expect("written");
    let out = cli::run(&["lower", path.to_str().expect("UTF-8"), "--format", "stablehlo"]);
    let err = cli::stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("window_dimensions") && err.contains("compile-time constant"), "{err}");
}
