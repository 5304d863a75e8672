//! Functional control flow: `While`, `If`, `Case` and the call ops over
//! functions that are graphs of the module (`role = "function"`), written
//! in `.opg` and imported from TensorFlow's function library. The corpus
//! numbers of TensorFlow itself are checked by tests/it/tf_corpus.rs
//! (`while_loop`, `cond`, `replicated_while`); here: the text form round
//! trips, the simulator runs it, the verifier rejects calls that do not
//! match their functions, and a GraphDef with `While` bodies round trips
//! through `.pb` and `.pbtxt`.

use std::path::Path;

use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::{self, functions, IrError, Module};
use tpu_rewrite::tf::export::{to_pb, to_pbtxt};
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

/// `@main` runs a While (x doubled while i < 3), an If on the sign of the
/// sum, a Case with an out-of-range index (the last branch) and a call.
const PROGRAM: &str = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape [2]}
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %loop = While(%zero, %x) {T = [i32, f32], cond = func "cond", body = func "body", parallel_iterations = 10}
  %sum = Sum(%loop:1, %axis) {T = f32, Tidx = i32, keep_dims = false}
  %axis = Const() {dtype = i32, value = tensor(i32, [1]) [0]}
  %fzero = Const() {dtype = f32, value = tensor(f32, []) [0.0]}
  %pos = Greater(%sum, %fzero) {T = f32}
  %branch = StatelessIf(%pos, %loop:1) {Tcond = bool, Tin = [f32], Tout = [f32], then_branch = func "negate", else_branch = func "square"}
  %nine = Const() {dtype = i32, value = tensor(i32, []) [9]}
  %case = Case(%nine, %x) {Tin = [f32], Tout = [f32], branches = [func "negate", func "square"]}
  %call = PartitionedCall(%x) {Tin = [f32], Tout = [f32], f = func "square"}
}

graph @cond (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %v = _Arg() {T = f32, index = 1}
  %three = Const() {dtype = i32, value = tensor(i32, []) [3]}
  %less = Less(%i, %three) {T = i32}
  %ok = _Retval(%less) {T = bool, index = 0}
}

graph @body (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %v = _Arg() {T = f32, index = 1}
  %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
  %next = AddV2(%i, %one) {T = i32}
  %twice = AddV2(%v, %v) {T = f32}
  %r0 = _Retval(%next) {T = i32, index = 0}
  %r1 = _Retval(%twice) {T = f32, index = 1}
}

graph @negate (role = "function") {
  %a = _Arg() {T = f32, index = 0}
  %n = Neg(%a) {T = f32}
  %r = _Retval(%n) {T = f32, index = 0}
}

graph @square (role = "function") {
  %a = _Arg() {T = f32, index = 0}
  %s = Square(%a) {T = f32}
  %r = _Retval(%s) {T = f32, index = 0}
}
"#;

fn parse(text: &str) -> (Module, Vec<IrError>) {
    ir::parse_module(text.as_bytes()).expect("parses")
}

fn run(module: &Module, feeds: &[(&str, Tensor)], fetches: &[&str]) -> Vec<Tensor> {
    let mesh = Mesh::new(module, MeshConfig::default()).expect("the mesh builds");
    let mut f = Feeds::new();
    for (name, t) in feeds {
        f.insert("main", name.to_string(), t.clone());
    }
    let fetches: Vec<Fetch> = fetches.iter().map(|n| Fetch::new("main", *n)).collect();
    mesh.run_step(&f, &fetches).expect("the step runs")
}

#[test]
fn opg_functions_verify_round_trip_and_run() {
    let (module, errors) = parse(PROGRAM);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(functions::functions(&module).count(), 4);
    let printed = tpu_rewrite::emit::print_module(&module);
    let (again, errors) = parse(&printed);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(again == module, "parse(print(x)) == x:\n{printed}");

    let x = Tensor::vector(vec![1.5f32, -0.25]);
    let got = run(&module, &[("x:0", x)], &["loop:0", "loop:1", "branch:0", "case:0", "call:0"]);
    // Three iterations double x three times; the sum (10) is positive, so the
    // If negates; index 9 is out of range, so the Case takes its last branch.
    assert_eq!(got[0], Tensor::scalar(3i32));
    assert_eq!(got[1], Tensor::vector(vec![12.0f32, -2.0]));
    assert_eq!(got[2], Tensor::vector(vec![-12.0f32, 2.0]));
    assert_eq!(got[3], Tensor::vector(vec![2.25f32, 0.0625]));
    assert_eq!(got[4], Tensor::vector(vec![2.25f32, 0.0625]));
}

/// The codes of the verifier's errors for `PROGRAM` with `from` replaced by `to`.
fn codes_after(from: &str, to: &str) -> Vec<String> {
    assert!(PROGRAM.contains(from), "{from}");
    let (_, errors) = parse(&PROGRAM.replace(from, to));
    errors.iter().map(|e| miette::Diagnostic::code(e).map(|c| c.to_string()).unwrap_or_default()).collect()
}

#[test]
fn calls_that_do_not_match_their_functions_are_rejected() {
    let unknown = codes_after(r#"f = func "square""#, r#"f = func "cube""#);
    assert_eq!(unknown, ["tpu_rewrite::ir::unknown_function"]);
    // One operand too many for `cond` and `body`.
    let arity = codes_after("While(%zero, %x)", "While(%zero, %x, %x)");
    assert!(arity.iter().all(|c| c == "tpu_rewrite::ir::call_signature") && arity.len() == 2, "{arity:?}");
    // The declared dtype of operand 0 differs from the argument's.
    let dtype = codes_after("T = [i32, f32], cond", "T = [i64, f32], cond");
    assert!(dtype.contains(&"tpu_rewrite::ir::call_signature".to_string()), "{dtype:?}");
    let not_bool = codes_after("%ok = _Retval(%less) {T = bool", "%ok = _Retval(%less) {T = i32");
    assert!(not_bool.contains(&"tpu_rewrite::ir::call_signature".to_string()), "{not_bool:?}");
    let twice = codes_after("%v = _Arg() {T = f32, index = 1}\n  %three", "%v = _Arg() {T = f32, index = 0}\n  %three");
    assert!(twice.contains(&"tpu_rewrite::ir::function_signature".to_string()), "{twice:?}");
    let (_, errors) = parse(&PROGRAM.replace(r#"f = func "square""#, r#"f = func "cube""#));
    let text = errors[0].to_string();
    assert!(text.contains("%call") && text.contains("cube"), "{text}");
}

#[test]
fn bad_function_bodies_and_arguments_are_errors_not_panics() {
    // An unknown operand inside a function is an IR error of that function.
    let (_, errors) = parse(&PROGRAM.replace("%s = Square(%a) {T = f32}", "%s = Square(%missing) {T = f32}"));
    assert!(errors.iter().any(|e| e.to_string().contains("missing")), "{errors:?}");
    // A call whose operand has another dtype than the function's `_Arg` fails the step, naming the op.
    let (module, _) = parse(PROGRAM);
    let mesh = Mesh::new(&module, MeshConfig::default()).expect("the mesh builds");
    let mut f = Feeds::new();
    f.insert("main", "x:0".to_string(), Tensor::vector(vec![1i32, 2]));
    let err = mesh.run_step(&f, &[Fetch::new("main", "call:0")]).unwrap_err().to_string();
    assert!(err.contains("PartitionedCall") && err.contains("argument 0"), "{err}");
}

#[test]
fn a_function_that_calls_itself_is_stopped_with_an_error() {
    let source = PROGRAM
        .replace("%n = Neg(%a) {T = f32}", "%n = PartitionedCall(%a) {Tin = [f32], Tout = [f32], f = func \"negate\"}");
    let (module, errors) = parse(&source);
    assert!(errors.is_empty(), "{errors:?}");
    let mesh = Mesh::new(&module, MeshConfig::default()).expect("the mesh builds");
    let mut f = Feeds::new();
    f.insert("main", "x:0".to_string(), Tensor::vector(vec![1.0f32, 2.0]));
    let err = mesh.run_step(&f, &[Fetch::new("main", "branch:0")]).unwrap_err().to_string();
    assert!(err.contains("nest deeper than 64") && err.contains("@negate"), "{err}");
}

fn corpus(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run tests/tf/corpus_control_flow.py)", path.display()))
}

fn import(bytes: &[u8], format: GraphDefFormat) -> Module {
    let (module, errors) = import_graphdef(bytes, format).expect("imports");
    assert!(errors.is_empty(), "import problems: {errors:?}");
    module
}

/// A TF 2.21 graph with a While (and its gradient While) and a library of
/// cond/body functions: text -> IR -> binary -> IR -> text gives the same
/// GraphDef and equal modules, the function bodies are graphs of the
/// module that verify and print as `.opg` and parse back.
#[test]
fn library_with_while_bodies_round_trips_through_pb_and_pbtxt() {
    let text = corpus("while_loop.pbtxt");
    let from_text = import(&text, GraphDefFormat::Text);
    let main = from_text.graph("main").expect("@main");
    let pb = to_pb(main).expect("exports as pb");
    let from_pb = import(&pb, GraphDefFormat::Binary);
    assert!(from_pb == from_text, "{:?}", ir::eq::first_difference(from_pb.graph("main").unwrap(), main));
    let text_again = to_pbtxt(from_pb.graph("main").expect("@main")).expect("exports as pbtxt");
    assert_eq!(text_again, to_pbtxt(main).expect("exports as pbtxt"), "pbtxt -> pb -> pbtxt");
    assert_eq!(to_pb(from_pb.graph("main").unwrap()).expect("exports"), pb, "pb -> IR -> pb is byte-identical");
    let parsed_original = tpu_rewrite::tf::pbtxt::parse_graphdef_text(&text).expect("parses").graph;
    let parsed_again = tpu_rewrite::tf::pbtxt::parse_graphdef_text(text_again.as_bytes()).expect("parses").graph;
    assert_eq!(parsed_again, parsed_original, "the library survives both formats");

    // Every function of the library is a graph of the module, and the While calls them.
    let library = tpu_rewrite::tf::library(main).expect("decodes").expect("has a library");
    let names: Vec<&str> = functions::functions(&from_text).map(|g| g.name.as_str()).collect();
    assert_eq!(names.len(), library.function.len());
    let whiles: Vec<_> = main.node_ids().filter(|&id| &*main.node(id).op == "StatelessWhile").collect();
    assert_eq!(whiles.len(), 2, "the loop and its gradient");
    for id in whiles {
        for (_, f) in functions::callees(main.node(id)) {
            assert!(names.contains(&f.name.as_str()), "{} calls {}", main.node(id).name, f.name);
        }
    }
    assert!(ir::verify::verify(&from_text).is_empty(), "{:?}", ir::verify::verify(&from_text));
    let printed = tpu_rewrite::emit::print_module(&from_text);
    let (parsed, errors) = ir::parse_module(printed.as_bytes()).expect("the printed module parses");
    assert!(errors.is_empty(), "{errors:?}");
    assert!(parsed == from_text, "parse(print(x)) == x");
}

/// A While inside a replicate region: the simulator runs it per replica;
/// the StableHLO emitter lowers it to a `stablehlo.while` over the cond and
/// body functions (tests/it/xla_backend.rs runs such a loop on PJRT).
const REPLICATED: &str = r#"graph @main {
  %a = Const() {dtype = f32, value = tensor(f32, [2]) [1.0, 2.0]}
  %b = Const() {dtype = f32, value = tensor(f32, [2]) [3.0, -4.0]}
  replicate (num_replicas = 2) (%x = [%a, %b]) {
    %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
    %loop = While(%zero, %x) {T = [i32, f32], cond = func "cond", body = func "body"}
    return %loop:1
  }
}
"#;

fn replicated_program() -> String {
    let functions = &PROGRAM[PROGRAM.find("graph @cond").expect("functions")..];
    format!("{REPLICATED}\n{functions}")
}

#[test]
fn a_replicated_while_runs_per_replica_and_lowers_to_a_stablehlo_while() {
    use tpu_rewrite::lower::{lower, LowerConfig, Topology};
    let source = replicated_program();
    let (mut module, errors) = parse(&source);
    assert!(errors.is_empty(), "{errors:?}");
    let report = tpu_rewrite::run_pipeline(&mut module, &tpu_rewrite::PipelineConfig::default());
    assert!(!report.has_errors(), "{report:?}");
    let config = LowerConfig { topology: Topology::parse("1x2").expect("topology"), ..LowerConfig::default() };
    let mut lowered = lower(&module.graphs[0], &config).expect("lowers").module;
    functions::carry_functions(&module, &mut lowered);
    let fetches = ["output_0_shard_0:0".to_string(), "output_0_shard_1:0".to_string()];
    let outcome = tpu_rewrite::exec::driver::run(
        &lowered,
        &[],
        &fetches,
        &tpu_rewrite::exec::driver::RunConfig::default(),
        &mut |_, _| {},
    )
    .expect("runs");
    // Each replica doubles its own operand three times.
    assert_eq!(outcome.fetched[0].1, Tensor::vector(vec![8.0f32, 16.0]));
    assert_eq!(outcome.fetched[1].1, Tensor::vector(vec![24.0f32, -32.0]));

    let dir = std::env::temp_dir().join(format!("tfcf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("replicated_while.opg");
    std::fs::write(&path, &source).expect("writes");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
        .args(["lower", "--format", "stablehlo", "--topology", "1x2"])
        .arg(&path)
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"stablehlo.while\"("), "{text}");
    for f in ["@f_cond_", "@f_body_"] {
        assert!(text.contains(&format!("func.func private {f}")), "{f} is defined: {text}");
        assert!(text.contains(&format!("{{callee = {f}")), "{f} is called: {text}");
    }
}

/// Functions written in `.opg` are written as FunctionDefs of the
/// GraphDef's library (operands named `node:arg:k`, as TensorFlow names
/// them), and the GraphDef read back runs as the `.opg` does.
#[test]
fn opg_functions_are_emitted_as_function_defs_and_run_the_same() {
    let dir = std::env::temp_dir().join(format!("tfcf-emit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("functions.opg");
    std::fs::write(&path, PROGRAM).expect("writes");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
        .args(["emit", "--format", "pbtxt"])
        .arg(&path)
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    for f in ["cond", "body", "negate", "square"] {
        assert!(text.contains(&format!("name: \"{f}\"")), "@{f} has a FunctionDef: {text}");
    }
    assert!(text.contains("input: \"i\"") && text.contains("\"next:z:0\""), "{text}");

    let (module, _) = parse(PROGRAM);
    let (back, errors) = tpu_rewrite::tf::import_graphdef(&out.stdout, tpu_rewrite::tf::GraphDefFormat::Text)
        .expect("the GraphDef imports");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(functions::functions(&back).count(), 4);
    let x = Tensor::vector(vec![1.5f32, -0.25]);
    let fetches = ["loop:0", "loop:1", "branch:0", "case:0", "call:0"];
    assert_eq!(run(&back, &[("x:0", x.clone())], &fetches), run(&module, &[("x:0", x)], &fetches));
}
