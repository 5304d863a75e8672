//! TensorLists on XLA: the StableHLO lowering of `TensorList*` ops (a
//! buffer of compile-time capacity and an `i32` size, see
//! `src/xla/stablehlo/lists.rs`) against the simulator, through the pinned
//! PJRT CPU plugin. Each case is a small graph under a two-replica
//! `replicate`; every output must agree (|a − b| ≤ 1e-5 + 1e-4·|b|,
//! integers exactly). A list whose capacity cannot be known at compile
//! time is refused with a diagnostic that says what to change.

use crate::support::corpus;
use crate::support::lowering;
use crate::support::pjrt as support;

use lowering::{default_fetches, prepare};
use tpu_rewrite::exec::{driver, Tensor};
use tpu_rewrite::xla::{backend, XlaError};

/// A case: the replicate body (reading `%x`, f32 [4, 3] per replica), what
/// it returns, and the functions its loops name.
struct Case {
    name: &'static str,
    body: &'static str,
    returns: &'static str,
    functions: &'static str,
}

/// The module text of a case under a two-replica `replicate`.
fn source(case: &Case) -> String {
    let mut text = String::from("graph @main {\n");
    text.push_str("  %x0 = Placeholder() {dtype = f32, shape = shape[4, 3]}\n");
    text.push_str("  %x1 = Placeholder() {dtype = f32, shape = shape[4, 3]}\n");
    text.push_str("  replicate (num_replicas = 2) (%x = [%x0, %x1]) {\n");
    for line in case.body.lines() {
        text.push_str(&format!("    {}\n", line.trim()));
    }
    text.push_str(&format!("    return {}\n  }}\n}}\n", case.returns));
    text.push_str(case.functions);
    text
}

/// A case run on both backends.
struct Ran {
    /// The PJRT run, or the backend's error.
    pjrt: Result<backend::Outcome, XlaError>,
    /// The simulator's fetches.
    fetches: Vec<String>,
    sim: driver::RunOutcome,
}

/// Lowers a case and runs it on the simulator and on PJRT, with synthetic feeds.
fn pjrt(case: &Case) -> Ran {
    pjrt_with(case, None)
}

/// [`pjrt`] with `x` fed to every replica, when given.
fn pjrt_with(case: &Case, x: Option<&Tensor>) -> Ran {
    pjrt_fed(case, x.map(|x| [x.clone(), x.clone()]))
}

/// [`pjrt`] with replica r fed `x[r]`, when given.
fn pjrt_fed(case: &Case, x: Option<[Tensor; 2]>) -> Ran {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(format!("{}.opg", case.name));
    std::fs::write(&path, source(case)).expect("writes the case");
    let (tagged, lowered) = prepare(path.to_str().expect("utf-8"), "1x2", 1);
    let graph = &tagged.graphs[0];
    let feeds = match x {
        Some([x0, x1]) => vec![("x0:0".to_string(), x0), ("x1:0".to_string(), x1)],
        None => support::synthetic_feeds(graph),
    };
    let fetches = default_fetches(&lowered.module);
    let sim = driver::run(&lowered.module, &feeds, &fetches, &driver::RunConfig::default(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{}: the simulator failed: {e}", case.name));
    let config = support::one_step(&feeds, Some(&tagged));
    Ran { pjrt: backend::run(graph, &lowered.assignment, &config), fetches, sim }
}

/// Runs a case on both backends and compares every fetch.
fn differential(case: &Case) {
    differential_with(case, None);
}

/// [`differential`] with `x` fed to every replica, when given; returns PJRT's fetches.
fn differential_with(case: &Case, x: Option<&Tensor>) -> Vec<(String, Tensor)> {
    differential_fed(case, x.map(|x| [x.clone(), x.clone()]))
}

/// [`differential`] with replica r fed `x[r]`, when given; returns PJRT's fetches.
fn differential_fed(case: &Case, x: Option<[Tensor; 2]>) -> Vec<(String, Tensor)> {
    let Ran { pjrt: outcome, fetches, sim } = pjrt_fed(case, x);
    let run = outcome.unwrap_or_else(|e| panic!("{}: pjrt failed: {e:?}", case.name)).run;
    assert!(!fetches.is_empty(), "{}: no fetches", case.name);
    assert_eq!(run.fetched.len(), sim.fetched.len(), "{}: fetch count", case.name);
    for (name, want) in &sim.fetched {
        let got = &run.fetched.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("pjrt has no {name}")).1;
        assert_eq!((got.dtype(), got.shape()), (want.dtype(), want.shape()), "{}: {name}", case.name);
        let ((g, tol), (w, _)) = (support::values(got), support::values(want));
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!((a - b).abs() <= 1e-5 + tol * b.abs(), "{}: {name}[{i}]: pjrt {a} vs simulator {b}", case.name);
        }
    }
    run.fetched
}

/// Reserve, FromTensor, GetItem, SetItem, Stack, Gather, Length, and a
/// bounded EmptyTensorList pushed twice and popped once (straight-line).
/// A loop body that pushes its value onto the list while its counter
/// (counted down) is positive, and the condition that tests it.
const PUSH_WHILE_POSITIVE: &str = r#"
graph @push_n (role = "function") {
  %n = _Arg() {T = i32, index = 0}
  %v = _Arg() {T = f32, index = 1}
  %l = _Arg() {T = variant, index = 2}
  %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
  %n2 = Sub(%n, %one) {T = i32}
  %l2 = TensorListPushBack(%l, %v) {element_dtype = f32}
  %r0 = _Retval(%n2) {T = i32, index = 0}
  %r1 = _Retval(%v) {T = f32, index = 1}
  %r2 = _Retval(%l2) {T = variant, index = 2}
}

graph @positive (role = "function") {
  %n = _Arg() {T = i32, index = 0}
  %v = _Arg() {T = f32, index = 1}
  %l = _Arg() {T = variant, index = 2}
  %z = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %p = Greater(%n, %z) {T = i32}
  %r = _Retval(%p) {T = bool, index = 0}
}
"#;

#[test]
fn straight_line_list_ops_match_the_simulator() {
    differential(&Case {
        name: "straight_line",
        body: "%shape = Const() {dtype = i32, value = tensor(i32, [1]) [3]}
            %n = Const() {dtype = i32, value = tensor(i32, []) [4]}
            %r = TensorListReserve(%shape, %n) {element_dtype = f32, shape_type = i32}
            %ft = TensorListFromTensor(%x, %shape) {element_dtype = f32, shape_type = i32}
            %i1 = Const() {dtype = i32, value = tensor(i32, []) [1]}
            %i3 = Const() {dtype = i32, value = tensor(i32, []) [3]}
            %row = TensorListGetItem(%ft, %i1, %shape) {element_dtype = f32}
            %t = Tanh(%row) {T = f32}
            %s = TensorListSetItem(%r, %i1, %t) {element_dtype = f32}
            %s2 = TensorListSetItem(%s, %i3, %row) {element_dtype = f32}
            %st = TensorListStack(%s2, %shape) {element_dtype = f32, num_elements = 4}
            %idx = Const() {dtype = i32, value = tensor(i32, [2]) [3, 1]}
            %g = TensorListGather(%ft, %idx, %shape) {element_dtype = f32}
            %len = TensorListLength(%s2)
            %m = Const() {dtype = i32, value = tensor(i32, []) [3]}
            %e = EmptyTensorList(%shape, %m) {element_dtype = f32, shape_type = i32}
            %p1 = TensorListPushBack(%e, %row) {element_dtype = f32}
            %p2 = TensorListPushBack(%p1, %t) {element_dtype = f32}
            %pop = TensorListPopBack(%p2, %shape) {element_dtype = f32}
            %st2 = TensorListStack(%pop, %shape) {element_dtype = f32, num_elements = -1}
            %es = TensorListElementShape(%e) {shape_type = i32}",
        returns: "%st, %g, %len, %pop:1, %st2, %es",
        functions: "",
    });
}

/// The loops of a `tf.while_loop` and its gradient: `@push` pushes an
/// element per iteration onto an unbounded list (`max_num_elements` -1,
/// element shape of unknown rank), three times; `@pop` pops them all.
const LOOPS: &str = r#"
graph @push (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %v = _Arg() {T = f32, index = 1}
  %l = _Arg() {T = variant, index = 2}
  %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
  %i2 = AddV2(%i, %one) {T = i32}
  %t = Tanh(%v) {T = f32}
  %l2 = TensorListPushBack(%l, %t) {element_dtype = f32}
  %r0 = _Retval(%i2) {T = i32, index = 0}
  %r1 = _Retval(%t) {T = f32, index = 1}
  %r2 = _Retval(%l2) {T = variant, index = 2}
}

graph @below3 (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %v = _Arg() {T = f32, index = 1}
  %l = _Arg() {T = variant, index = 2}
  %k = Const() {dtype = i32, value = tensor(i32, []) [3]}
  %p = Less(%i, %k) {T = i32}
  %r = _Retval(%p) {T = bool, index = 0}
}

graph @pop (role = "function") {
  %n = _Arg() {T = i32, index = 0}
  %acc = _Arg() {T = f32, index = 1}
  %l = _Arg() {T = variant, index = 2}
  %shape = Const() {dtype = i32, value = tensor(i32, []) [-1]}
  %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
  %n2 = Sub(%n, %one) {T = i32}
  %p = TensorListPopBack(%l, %shape) {element_dtype = f32}
  %k = Const() {dtype = f32, value = tensor(f32, []) [0.5]}
  %h = Mul(%acc, %k) {T = f32}
  %a = AddV2(%h, %p:1) {T = f32}
  %r0 = _Retval(%n2) {T = i32, index = 0}
  %r1 = _Retval(%a) {T = f32, index = 1}
  %r2 = _Retval(%p) {T = variant, index = 2}
}

graph @positive (role = "function") {
  %n = _Arg() {T = i32, index = 0}
  %acc = _Arg() {T = f32, index = 1}
  %l = _Arg() {T = variant, index = 2}
  %z = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %p = Greater(%n, %z) {T = i32}
  %r = _Retval(%p) {T = bool, index = 0}
}
"#;

/// An unbounded accumulator: its capacity (3) and element shape ([4, 3])
/// are inferred from the loop with a fixed trip count that pushes to it;
/// the popping loop runs as many times as the pushing one did (a run-time
/// value), as a gradient loop does.
#[test]
fn loop_accumulator_with_inferred_capacity_matches_the_simulator() {
    differential(&Case {
        name: "accumulate",
        body: "%unknown = Const() {dtype = i32, value = tensor(i32, []) [-1]}
            %e = EmptyTensorList(%unknown, %unknown) {element_dtype = f32, shape_type = i32}
            %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
            %w = StatelessWhile(%zero, %x, %e) {T = [i32, f32, variant], body = func \"push\", cond = func \"below3\", parallel_iterations = 10}
            %st = TensorListStack(%w:2, %unknown) {element_dtype = f32, num_elements = -1}
            %acc = ZerosLike(%x) {T = f32}
            %b = StatelessWhile(%w, %acc, %w:2) {T = [i32, f32, variant], body = func \"pop\", cond = func \"positive\", parallel_iterations = 10}
            %len = TensorListLength(%b:2)",
        returns: "%st, %w:1, %b:1, %len",
        functions: LOOPS,
    });
}

/// A loop whose trip count comes from the input pushes to an unbounded
/// list: its size cannot be known at compile time, and the lowering says
/// so, naming the list and what to change in the TensorFlow program.
#[test]
fn an_unbounded_list_in_a_data_dependent_loop_is_refused() {
    let case = Case {
        name: "unbounded",
        body: "%unknown = Const() {dtype = i32, value = tensor(i32, []) [-1]}
            %e = EmptyTensorList(%unknown, %unknown) {element_dtype = f32, shape_type = i32}
            %ax = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}
            %s = Sum(%x, %ax) {T = f32, Tidx = i32}
            %a = Abs(%s) {T = f32}
            %n = Cast(%a) {SrcT = f32, DstT = i32}
            %w = StatelessWhile(%n, %x, %e) {T = [i32, f32, variant], body = func \"push_n\", cond = func \"positive\", parallel_iterations = 10}
            %st = TensorListLength(%w:2)",
        returns: "%st",
        functions: PUSH_WHILE_POSITIVE,
    };
    let err = match pjrt(&case).pjrt {
        Ok(_) => panic!("PJRT ran a list of unknown size"),
        Err(e) => e,
    };
    let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("tpu_rewrite::xla::lowering"), "{err:?}");
    let text = format!("{err:?}");
    assert!(text.contains("\"e\"") || text.contains("`e`") || text.contains("node: \"e\""), "names the list: {text}");
    assert!(text.contains("no compile-time capacity"), "{text}");
    assert!(text.contains("maximum_iterations"), "says what to change: {text}");
    assert!(text.contains("`w`"), "names the loop: {text}");
}

/// `tests/tf/corpus/tensor_array` (a plain graph, which `--backend pjrt`
/// does not take) under a two-replica `replicate`, op for op: a
/// `TensorArray` unstacked and gathered, one scattered into and stacked,
/// and one grown by `TensorListSetItem` (`resize_if_index_out_of_bounds`)
/// in a five-iteration loop, stacked and measured. Fed TensorFlow's `x`,
/// PJRT matches the simulator and the numbers TensorFlow computed. (The
/// corpus graph's `TensorListConcatV2` of rows of different shapes has no
/// buffer form and is left out.)
#[test]
fn tensor_array_matches_tensorflow() {
    let case = Case {
        name: "tensor_array",
        body: "%shape = Const() {dtype = i32, value = tensor(i32, [1]) [3]}
            %unknown = Const() {dtype = i32, value = tensor(i32, []) [-1]}
            %ft = TensorListFromTensor(%x, %shape) {element_dtype = f32, shape_type = i32}
            %gi = Const() {dtype = i32, value = tensor(i32, [2]) [3, 1]}
            %gathered = TensorListGather(%ft, %gi, %shape) {element_dtype = f32}
            %n3 = Const() {dtype = i32, value = tensor(i32, []) [3]}
            %r = TensorListReserve(%shape, %n3) {element_dtype = f32, shape_type = i32}
            %ri = Const() {dtype = i32, value = tensor(i32, [2]) [1, 3]}
            %ax0 = Const() {dtype = i32, value = tensor(i32, []) [0]}
            %rows = GatherV2(%x, %ri, %ax0) {Tparams = f32, Tindices = i32, Taxis = i32, batch_dims = 0}
            %si = Const() {dtype = i32, value = tensor(i32, [2]) [2, 0]}
            %sc = TensorListScatterIntoExistingList(%r, %rows, %si) {element_dtype = f32}
            %scattered = TensorListStack(%sc, %shape) {element_dtype = f32, num_elements = 3}
            %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
            %g = TensorListReserve(%unknown, %one) {element_dtype = f32, shape_type = i32}
            %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
            %loop = StatelessWhile(%zero, %unknown, %zero, %g, %x) {T = [i32, i32, i32, variant, f32], body = func \"grow\", cond = func \"below5\", parallel_iterations = 10}
            %grown = TensorListStack(%loop:3, %shape) {element_dtype = f32, num_elements = -1}
            %size = TensorListLength(%loop:3)",
        returns: "%gathered, %scattered, %grown, %size",
        functions: r#"
graph @grow (role = "function") {
  %counter = _Arg() {T = i32, index = 0}
  %limit = _Arg() {T = i32, index = 1}
  %i = _Arg() {T = i32, index = 2}
  %l = _Arg() {T = variant, index = 3}
  %x = _Arg() {T = f32, index = 4}
  %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
  %next = AddV2(%i, %one) {T = i32}
  %ax = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %sum = Sum(%x, %ax) {T = f32, Tidx = i32, keep_dims = false}
  %fi = Cast(%i) {SrcT = i32, DstT = f32, Truncate = false}
  %row = Mul(%sum, %fi) {T = f32}
  %l2 = TensorListSetItem(%l, %i, %row) {element_dtype = f32, resize_if_index_out_of_bounds = true}
  %c2 = AddV2(%counter, %one) {T = i32}
  %r0 = _Retval(%c2) {T = i32, index = 0}
  %r1 = _Retval(%limit) {T = i32, index = 1}
  %r2 = _Retval(%next) {T = i32, index = 2}
  %r3 = _Retval(%l2) {T = variant, index = 3}
  %r4 = _Retval(%x) {T = f32, index = 4}
}

graph @below5 (role = "function") {
  %counter = _Arg() {T = i32, index = 0}
  %limit = _Arg() {T = i32, index = 1}
  %i = _Arg() {T = i32, index = 2}
  %l = _Arg() {T = variant, index = 3}
  %x = _Arg() {T = f32, index = 4}
  %five = Const() {dtype = i32, value = tensor(i32, []) [5]}
  %p = Less(%i, %five) {T = i32}
  %r = _Retval(%p) {T = bool, index = 0}
}
"#,
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus");
    let meta = corpus::read_json(&dir.join("tensor_array.json"));
    let x = corpus::tensor_of(&meta["feeds"]["x:0"]);
    let fetched = differential_with(&case, Some(&x));
    let tf = &meta["runs"][0]["fetches"];
    for (i, name) in ["gathered:0", "scattered:0", "grown:0", "size:0"].iter().enumerate() {
        let want = corpus::tensor_of(&tf[*name]);
        for r in 0..2 {
            let key = format!("output_{i}_shard_{r}:0");
            let got = &fetched.iter().find(|(n, _)| *n == key).unwrap_or_else(|| panic!("no {key}")).1;
            corpus::assert_close(&format!("{name} (replica {r}) vs TensorFlow"), got, &want, 1e-4);
        }
    }
}

/// The branches of `tf.cond`/`tf.switch_case` and their gradients as
/// TensorFlow writes them outside XLA: each forward branch returns its
/// intermediate in an Optional (`OptionalFromValue`; `OptionalNone` in a
/// branch with nothing to keep), and the gradient branch reads it
/// (`OptionalGetValue`). Replica 0 takes one branch, replica 1 the other,
/// and then the other way round (the trace sees replica 0's branch).
const CONDS: &str = r#"
graph @keep_mul (role = "function") {
  %x = _Arg() {T = f32, index = 0}
  %k = Const() {dtype = f32, value = tensor(f32, []) [0.5]}
  %m = Mul(%x, %k) {T = f32}
  %y = Square(%m) {T = f32}
  %o = OptionalFromValue(%m) {Toutput_types = [f32]}
  %r0 = _Retval(%y) {T = f32, index = 0}
  %r1 = _Retval(%o) {T = variant, index = 1}
}

graph @keep_sigmoid (role = "function") {
  %x = _Arg() {T = f32, index = 0}
  %s = Sigmoid(%x) {T = f32}
  %one = Const() {dtype = f32, value = tensor(f32, []) [1.0]}
  %y = Sub(%s, %one) {T = f32}
  %o = OptionalFromValue(%s) {Toutput_types = [f32]}
  %r0 = _Retval(%y) {T = f32, index = 0}
  %r1 = _Retval(%o) {T = variant, index = 1}
}

graph @grad_mul (role = "function") {
  %dy = _Arg() {T = f32, index = 0}
  %o = _Arg() {T = variant, index = 1}
  %m = OptionalGetValue(%o) {output_shapes = [shape[4, 3]], output_types = [f32]}
  %two = Const() {dtype = f32, value = tensor(f32, []) [1.0]}
  %g = Mul(%m, %dy) {T = f32}
  %h = Mul(%g, %two) {T = f32}
  %r0 = _Retval(%h) {T = f32, index = 0}
}

graph @grad_sigmoid (role = "function") {
  %dy = _Arg() {T = f32, index = 0}
  %o = _Arg() {T = variant, index = 1}
  %s = OptionalGetValue(%o) {output_shapes = [shape[4, 3]], output_types = [f32]}
  %g = SigmoidGrad(%s, %dy) {T = f32}
  %r0 = _Retval(%g) {T = f32, index = 0}
}

graph @case_keep (role = "function") {
  %x = _Arg() {T = f32, index = 0}
  %t = Tanh(%x) {T = f32}
  %y = Mul(%t, %x) {T = f32}
  %o = OptionalFromValue(%t) {Toutput_types = [f32]}
  %r0 = _Retval(%y) {T = f32, index = 0}
  %r1 = _Retval(%o) {T = variant, index = 1}
}

graph @case_none (role = "function") {
  %x = _Arg() {T = f32, index = 0}
  %three = Const() {dtype = f32, value = tensor(f32, []) [3.0]}
  %y = Mul(%x, %three) {T = f32}
  %o = OptionalNone()
  %r0 = _Retval(%y) {T = f32, index = 0}
  %r1 = _Retval(%o) {T = variant, index = 1}
}

graph @case_grad_keep (role = "function") {
  %dy = _Arg() {T = f32, index = 0}
  %o = _Arg() {T = variant, index = 1}
  %t = OptionalGetValue(%o) {output_shapes = [shape[4, 3]], output_types = [f32]}
  %g = Mul(%t, %dy) {T = f32}
  %r0 = _Retval(%g) {T = f32, index = 0}
}

graph @case_grad_none (role = "function") {
  %dy = _Arg() {T = f32, index = 0}
  %o = _Arg() {T = variant, index = 1}
  %three = Const() {dtype = f32, value = tensor(f32, []) [3.0]}
  %g = Mul(%dy, %three) {T = f32}
  %r0 = _Retval(%g) {T = f32, index = 0}
}
"#;

#[test]
fn optionals_of_conditionals_and_their_gradients_match_the_simulator() {
    let case = Case {
        name: "optionals",
        body: "%ax = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}
            %sum = Sum(%x, %ax) {T = f32, Tidx = i32}
            %zero = Const() {dtype = f32, value = tensor(f32, []) [0.0]}
            %p = Greater(%sum, %zero) {T = f32}
            %f = StatelessIf(%p, %x) {Tcond = bool, Tin = [f32], Tout = [f32, variant], then_branch = func \"keep_mul\", else_branch = func \"keep_sigmoid\"}
            %k = Cast(%p) {SrcT = bool, DstT = i32}
            %c = StatelessCase(%k, %x) {Tin = [f32], Tout = [f32, variant], branches = [func \"case_keep\", func \"case_none\"]}
            %g = StatelessIf(%p, %f, %f:1) {Tcond = bool, Tin = [f32, variant], Tout = [f32], then_branch = func \"grad_mul\", else_branch = func \"grad_sigmoid\"}
            %h = StatelessCase(%k, %c, %c:1) {Tin = [f32, variant], Tout = [f32], branches = [func \"case_grad_keep\", func \"case_grad_none\"]}
            %has = OptionalHasValue(%c:1)",
        returns: "%f, %c, %g, %h, %has",
        functions: CONDS,
    };
    let positive = Tensor::from_vec(&[4, 3], (0..12).map(|i| i as f32 * 0.25 - 1.0).collect()).expect("x");
    let negative = Tensor::from_vec(&[4, 3], (0..12).map(|i| 1.0 - i as f32 * 0.3).collect()).expect("x");
    differential_fed(&case, Some([positive.clone(), negative.clone()]));
    differential_fed(&case, Some([negative, positive]));
}

/// Runs `case` with replica r fed `x[r]` where replica 1 passes a bound
/// that replica 0 keeps: the simulator fails, PJRT's device check fails
/// the run naming replica 1 and `wants`, and with `--no-device-checks`
/// PJRT gives XLA's unchecked result (so the check is what stopped it).
fn refused_on_both_backends(case: &Case, x: [Tensor; 2], wants: &str) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(format!("{}.opg", case.name));
    std::fs::write(&path, source(case)).expect("writes the case");
    let (tagged, lowered) = prepare(path.to_str().expect("utf-8"), "1x2", 1);
    let graph = &tagged.graphs[0];
    let [x0, x1] = x;
    let feeds = vec![("x0:0".to_string(), x0), ("x1:0".to_string(), x1)];
    let fetches = default_fetches(&lowered.module);
    let sim = driver::run(&lowered.module, &feeds, &fetches, &driver::RunConfig::default(), &mut |_, _| {});
    let sim = sim.err().unwrap_or_else(|| panic!("{}: the simulator ran it", case.name)).to_string();
    assert!(sim.contains("replica_1"), "{}: the simulator fails on replica 1: {sim}", case.name);
    let config = support::one_step(&feeds, Some(&tagged));
    let err = match backend::run(graph, &lowered.assignment, &config) {
        Ok(_) => panic!("{}: PJRT ran it with device checks (the simulator said: {sim})", case.name),
        Err(e) => format!("{e}"),
    };
    for part in ["device check failed", "replica 1", wants] {
        assert!(err.contains(part), "{}: the error should say {part:?}: {err}", case.name);
    }
    let unchecked = backend::RunConfig { no_device_checks: true, ..support::one_step(&feeds, Some(&tagged)) };
    if let Err(e) = backend::run(graph, &lowered.assignment, &unchecked) {
        panic!("{}: without device checks XLA runs it unchecked, but: {e:?}", case.name);
    }
}

/// A `[4, 3]` tensor of `v`.
fn filled(v: f32) -> Tensor {
    Tensor::from_vec(&[4, 3], vec![v; 12]).expect("x")
}

/// `GatherV2` at an index computed on the device (the sum of `x`, cast):
/// 2 on replica 0, 6 (outside `[0, 4)`) on replica 1. XLA would clamp it
/// to row 3; the simulator and the device check refuse it.
#[test]
fn a_gather_index_out_of_range_fails_on_both_backends() {
    let case = Case {
        name: "gather_out_of_range",
        body: "%ax = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}
            %s = Sum(%x, %ax) {T = f32, Tidx = i32}
            %i = Cast(%s) {SrcT = f32, DstT = i32}
            %a0 = Const() {dtype = i32, value = tensor(i32, []) [0]}
            %g = GatherV2(%x, %i, %a0) {Taxis = i32, Tindices = i32, Tparams = f32, batch_dims = 0}",
        returns: "%g",
        functions: "",
    };
    refused_on_both_backends(&case, [filled(1.0 / 6.0), filled(0.5)], "GatherV2 on axis 0");
}

/// A loop pushes `n` elements (the sum of `x`, cast: 2 on replica 0, 3 on
/// replica 1) onto a list of capacity 2 (`max_num_elements`): replica 1's
/// third push passes the capacity, where XLA would overwrite the last row.
#[test]
fn a_push_past_a_lists_capacity_fails_on_both_backends() {
    let case = Case {
        name: "push_past_capacity",
        body: "%shape = Const() {dtype = i32, value = tensor(i32, [2]) [4, 3]}
            %two = Const() {dtype = i32, value = tensor(i32, []) [2]}
            %e = EmptyTensorList(%shape, %two) {element_dtype = f32, shape_type = i32}
            %ax = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}
            %s = Sum(%x, %ax) {T = f32, Tidx = i32}
            %n = Cast(%s) {SrcT = f32, DstT = i32}
            %w = StatelessWhile(%n, %x, %e) {T = [i32, f32, variant], body = func \"push_n\", cond = func \"positive\", parallel_iterations = 10}
            %len = TensorListLength(%w:2)",
        returns: "%len",
        functions: PUSH_WHILE_POSITIVE,
    };
    refused_on_both_backends(&case, [filled(1.0 / 6.0), filled(0.25)], "a push onto a full list");
}

/// `OptionalGetValue` of the Optional a `StatelessIf` returns: the branch
/// replica 0 takes keeps a value, the one replica 1 takes keeps none.
/// XLA would read zeros; the simulator and the device check refuse it.
#[test]
fn reading_an_empty_optional_fails_on_both_backends() {
    let case = Case {
        name: "empty_optional",
        body: "%ax = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}
            %sum = Sum(%x, %ax) {T = f32, Tidx = i32}
            %zero = Const() {dtype = f32, value = tensor(f32, []) [0.0]}
            %p = Greater(%sum, %zero) {T = f32}
            %f = StatelessIf(%p, %x) {Tcond = bool, Tin = [f32], Tout = [f32, variant], then_branch = func \"keep_mul\", else_branch = func \"case_none\"}
            %v = OptionalGetValue(%f:1) {output_shapes = [shape[4, 3]], output_types = [f32]}",
        returns: "%v",
        functions: CONDS,
    };
    refused_on_both_backends(&case, [filled(0.5), filled(-0.5)], "the Optional is empty");
}
