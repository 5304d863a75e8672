//! Differential fuzzing of the simulator against XLA.
//!
//! A generator (`arbitrary` over proptest's bytes, so failures shrink)
//! makes random well-typed graphs: chains of the elementwise, broadcasting,
//! reduction, select and collective ops that both backends run, and small
//! control flow (a `StatelessIf` whose branches are one op each, a
//! `StatelessWhile` that applies one op 0 to 3 times), over 1 to
//! 8 replicas, fed and seeded with values that include NaN, ±inf,
//! denormals, ±0 and the extremes of f32. Each graph runs on XLA through
//! the pinned PJRT CPU plugin, returning every value it makes. Then each
//! op is checked on its own: the simulator's kernel is run on the very
//! inputs XLA gave that op, and its result must equal XLA's (exactly for
//! exact ops, within the op class's tolerance otherwise). Checking op by
//! op keeps one backend's last-ulp difference from being amplified by the
//! ops after it into a false finding. A control-flow op is checked the
//! same way, run alone on the simulator (with its functions) on XLA's
//! operands. The whole graph also runs on the simulator, which must
//! succeed.
//!
//! Known semantic differences are pinned in [`KNOWN`], each with why; a
//! mismatch outside them fails with the graph's text. `cargo test` runs
//! [`DEFAULT_CASES`] graphs from a fixed seed (about a minute);
//! `TPU_REWRITE_FUZZ_CASES=N TPU_REWRITE_FUZZ_SEED=S cargo test --release
//! --test it differential_fuzz::` runs a longer search (docs/robustness.md).

use crate::support::lowering;
use crate::support::pjrt as support;

use std::fmt::Write as _;

use arbitrary::Unstructured;
use lowering::{default_fetches, prepare};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use tpu_rewrite::exec::{driver, run_kernel, Tensor};
use tpu_rewrite::xla::backend;

/// Graphs per `cargo test` run.
const DEFAULT_CASES: u32 = 48;

/// How an op's two results are compared.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Class {
    /// Bit for bit (NaNs of any payload equal, `0.0 == -0.0`).
    Exact,
    /// Within `1e-6 + rel·|want|`, NaN and infinities matching.
    Approx(f64),
}

/// Shapes a value takes; every pair broadcasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Matrix,
    Row,
    Scalar,
}

impl Shape {
    fn dims(self) -> &'static [usize] {
        match self {
            Shape::Matrix => &[2, 3],
            Shape::Row => &[3],
            Shape::Scalar => &[],
        }
    }

    fn broadcast(self, other: Shape) -> Shape {
        match (self, other) {
            (Shape::Matrix, _) | (_, Shape::Matrix) => Shape::Matrix,
            (Shape::Row, _) | (_, Shape::Row) => Shape::Row,
            _ => Shape::Scalar,
        }
    }
}

const UNARY: &[(&str, Class)] = &[
    ("Abs", Class::Exact),
    ("Neg", Class::Exact),
    ("Floor", Class::Exact),
    ("Ceil", Class::Exact),
    ("Round", Class::Exact),
    ("Sign", Class::Exact),
    ("Relu", Class::Exact),
    ("Relu6", Class::Exact),
    ("Square", Class::Approx(1e-6)),
    ("Exp", Class::Approx(1e-5)),
    ("Expm1", Class::Approx(1e-5)),
    ("Log", Class::Approx(1e-5)),
    ("Log1p", Class::Approx(1e-5)),
    ("Sqrt", Class::Approx(1e-6)),
    ("Rsqrt", Class::Approx(1e-5)),
    ("Reciprocal", Class::Approx(1e-6)),
    ("Tanh", Class::Approx(1e-5)),
    ("Sigmoid", Class::Approx(1e-5)),
    ("Elu", Class::Approx(1e-5)),
    ("Selu", Class::Approx(1e-5)),
    ("Softplus", Class::Approx(1e-5)),
    ("Softsign", Class::Approx(1e-6)),
    ("Erf", Class::Approx(1e-5)),
    ("Erfc", Class::Approx(1e-4)),
    ("Sin", Class::Approx(1e-5)),
    ("Cos", Class::Approx(1e-5)),
];

const BINARY: &[(&str, Class)] = &[
    ("AddV2", Class::Approx(1e-6)),
    ("Sub", Class::Approx(1e-6)),
    ("Mul", Class::Approx(1e-6)),
    ("RealDiv", Class::Approx(1e-6)),
    ("Maximum", Class::Exact),
    ("Minimum", Class::Exact),
    ("Pow", Class::Approx(1e-5)),
    ("SquaredDifference", Class::Approx(1e-6)),
    ("FloorDiv", Class::Approx(1e-6)),
    ("FloorMod", Class::Approx(1e-5)),
    ("Atan2", Class::Approx(1e-5)),
    ("DivNoNan", Class::Approx(1e-6)),
];

const REDUCTIONS: &[(&str, Class)] = &[
    ("Sum", Class::Approx(1e-5)),
    ("Mean", Class::Approx(1e-5)),
    ("Prod", Class::Approx(1e-5)),
    ("Max", Class::Exact),
    ("Min", Class::Exact),
];

/// A mismatch both backends are known to have, and why it is accepted.
struct Known {
    op: &'static str,
    /// True for the inputs and results the difference covers.
    applies: fn(inputs: &[f64], want: f64, got: f64) -> bool,
    /// Only where operand `.0` of the op is made by one of the ops `.1` in
    /// the graph: an XLA rewrite of the pair.
    operand_from: Option<(usize, &'static [&'static str])>,
    why: &'static str,
}

/// Max/Min reductions and Maximum/Minimum: the simulator returns NaN when an operand is NaN.
const NAN_DROPPED: fn(&[f64], f64, f64) -> bool = |_, want, got| want.is_nan() && !got.is_nan();
const NAN_DROPPED_WHY: &str = "a NaN operand of max/min: the simulator propagates it, as TensorFlow's CPU kernels do; \
     XLA:CPU's fast min/max may drop it, as TensorFlow's own XLA path (jit_compile) does \
     (checked with TF 2.21: reduce_max([4.47, nan]) is nan on CPU and 4.47 under jit_compile)";

/// A quotient whose divisor is itself a quotient: one result is 0, ±inf or
/// NaN where the other is not, or NaN where the other is 0 or ±inf (a
/// quotient that underflowed to 0 makes `0 / 0` on one side only).
const QUOTIENT_REWRITTEN: fn(&[f64], f64, f64) -> bool = |inputs, want, got| {
    let degenerate = |v: f64| v == 0.0 || !v.is_finite();
    inputs.len() == 2 && (degenerate(want) != degenerate(got) || want.is_nan() != got.is_nan())
};
const QUOTIENT_REWRITTEN_WHY: &str = "a divisor that is itself a quotient: XLA's algebraic simplifier \
     rewrites a / (b / c) into (a * c) / b, a / (1 / b) into a * b and (y / x) / (y / x) so that no \
     quotient is rounded on the way, so an intermediate over- or underflows where the IEEE quotient of \
     the rounded operands does not, or the other way round (TF 2.21, tests/tf/known_differences.py: \
     f32max / (f32max / -1.53) is -1.53 on CPU and -inf under jit_compile; (y / x) / (y / x) with \
     y = -1e30, x = 1e-30 is NaN on CPU and 1 under jit_compile; RealDiv, DivNoNan and float FloorDiv \
     divide alike, Reciprocal is 1 / a, and Softsign is a quotient)";

/// A divisor that is a quotient (`Softsign` is `x / (1 + |x|)`).
const QUOTIENT: Option<(usize, &[&str])> = Some((1, &["RealDiv", "Reciprocal", "Softsign"]));

/// A reduction whose result over- or underflows on one side or both: the
/// order in which the backends add (or multiply) decides between NaN, ±inf
/// and a finite value.
const ORDER_DEPENDENT: fn(&[f64], f64, f64) -> bool = |_, want, got| !(want.is_finite() && got.is_finite());
const ORDER_DEPENDENT_WHY: &str = "a reduction that overflows: adding (or multiplying) huge values in a \
     different order gives +inf, -inf, NaN or a finite value; the simulator adds in index order, \
     XLA:CPU in its own (vectorised) order";

const KNOWN: &[Known] = &[
    Known { op: "Sum", applies: ORDER_DEPENDENT, operand_from: None, why: ORDER_DEPENDENT_WHY },
    Known { op: "Mean", applies: ORDER_DEPENDENT, operand_from: None, why: ORDER_DEPENDENT_WHY },
    Known { op: "Prod", applies: ORDER_DEPENDENT, operand_from: None, why: ORDER_DEPENDENT_WHY },
    Known {
        op: "Log",
        applies: |_, want, got| want != got,
        operand_from: Some((0, &["Exp", "Pow", "Sqrt", "Rsqrt"])),
        why: "log of an exp or a power: XLA's algebraic simplifier rewrites log(exp(x)) into x, \
              log(pow(a, b)) into b * log(a) and log(rsqrt(a)) into -0.5 * log(a), so an exp or power \
              that under- or overflowed (or met -0 or a subnormal) gives another value than the log of \
              the rounded power (TF 2.21, tests/tf/known_differences.py: log(exp(f32 lowest)) is -inf \
              on CPU and -3.4e38 under jit_compile; log(rsqrt(-0)) is NaN on CPU and inf under \
              jit_compile)",
    },
    Known { op: "RealDiv", applies: QUOTIENT_REWRITTEN, operand_from: QUOTIENT, why: QUOTIENT_REWRITTEN_WHY },
    Known { op: "DivNoNan", applies: QUOTIENT_REWRITTEN, operand_from: QUOTIENT, why: QUOTIENT_REWRITTEN_WHY },
    Known { op: "FloorDiv", applies: QUOTIENT_REWRITTEN, operand_from: QUOTIENT, why: QUOTIENT_REWRITTEN_WHY },
    Known {
        op: "Reciprocal",
        applies: |_, want, got| {
            let degenerate = |v: f64| v == 0.0 || !v.is_finite();
            degenerate(want) != degenerate(got)
        },
        operand_from: Some((0, &["RealDiv", "Reciprocal", "Softsign"])),
        why: QUOTIENT_REWRITTEN_WHY,
    },
    Known {
        op: "Softsign",
        applies: |_, want, got| {
            let degenerate = |v: f64| v == 0.0 || !v.is_finite();
            degenerate(want) != degenerate(got) || want.is_nan() != got.is_nan()
        },
        operand_from: Some((0, &["RealDiv", "Reciprocal", "Softsign"])),
        why: "softsign of a quotient: Softsign is x / (1 + |x|), and XLA's simplifier rewrites \
              (y / v) / d into y / (v * d), so a quotient that overflowed to ±inf gives ±0 instead of \
              inf / inf = NaN (TF 2.21, tests/tf/known_differences.py: softsign(-1e30 / 1e-30) is NaN \
              on CPU and -0 under jit_compile)",
    },
    Known {
        op: "FloorDiv",
        applies: |inputs, want, got| {
            // The exact quotient is an integer (to f32's precision) and
            // the results are that integer and the one below it.
            let (Some(&a), Some(&b)) = (inputs.first(), inputs.get(1)) else { return false };
            let q = a / b;
            let r = q.round();
            q.is_finite()
                && (q - r).abs() <= q.abs() * 2f64.powi(-22)
                && (want - got).abs() == 1.0
                && want.max(got) == r
        },
        operand_from: None,
        why: "a float FloorDiv whose quotient is an integer, by a divisor XLA knows at compile time: the \
              pinned plugin's XLA multiplies by the rounded reciprocal (x / c becomes x * (1 / c)), so \
              -3.703125 / -3.703125 is 0.99999994 and its floor 0, where the simulator gives 1. \
              TensorFlow 2.21 gives 1 on CPU and under jit_compile: this differs from TensorFlow's own XLA \
              path too (not fixed: see docs/robustness.md)",
    },
    Known { op: "Max", applies: NAN_DROPPED, operand_from: None, why: NAN_DROPPED_WHY },
    Known { op: "Min", applies: NAN_DROPPED, operand_from: None, why: NAN_DROPPED_WHY },
    Known { op: "Maximum", applies: NAN_DROPPED, operand_from: None, why: NAN_DROPPED_WHY },
    Known { op: "Minimum", applies: NAN_DROPPED, operand_from: None, why: NAN_DROPPED_WHY },
    Known {
        op: "*",
        applies: |inputs, want, got| {
            let subnormal = |v: f64| v != 0.0 && v.abs() < f64::from(f32::MIN_POSITIVE);
            inputs.iter().any(|&v| subnormal(v)) || subnormal(want) || subnormal(got)
        },
        operand_from: None,
        why: "subnormal operands or results: both backends flush denormals to zero in arithmetic, as \
          TensorFlow's CPU kernels do, but the simulator's bit-level library routines (fmod, for \
          FloorMod) still see a subnormal operand, as TensorFlow's do, where XLA:CPU flushes it first",
    },
];

/// How many `StatelessIf` and `StatelessWhile` ops were checked.
static CONTROL_CHECKED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// How often each known difference was met, for the run's report.
static KNOWN_SEEN: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

fn note_known(known: &Known) {
    let index = KNOWN.iter().position(|k| std::ptr::eq(k, known)).unwrap_or(0);
    let mut seen = KNOWN_SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    seen.resize(KNOWN.len(), 0);
    seen[index] += 1;
}

/// One value of a generated graph.
#[derive(Clone, Debug)]
struct Value {
    name: String,
    shape: Shape,
    /// An `i32` value (else `f32`).
    int: bool,
}

/// One op of a generated graph: its line of `.opg` and how to check it.
#[derive(Clone, Debug)]
struct Op {
    name: String,
    op: &'static str,
    /// Value operands (constants of axes and groups are not listed).
    operands: Vec<String>,
    /// Constants appended to the operands when the kernel is checked
    /// (a reduction's axes, a gather's indices and axis).
    consts: Vec<String>,
    class: Class,
    /// Its result is the sum over replicas of its operand.
    cross_replica: bool,
    /// A control-flow op: its line with operands `%in0`, `%in1`, ...
    /// and the functions it calls, checked by running it alone on the
    /// simulator ([`control_flow_on_simulator`]).
    control: Option<Control>,
}

/// A `StatelessIf` or `StatelessWhile` of a generated graph.
#[derive(Clone, Debug)]
struct Control {
    /// The op's line, its operands renamed `%in0`, `%in1`, ...
    line: String,
    /// The `.opg` text of the functions it calls.
    functions: String,
    /// The dtype and shape of each operand, as a placeholder declares them.
    inputs: Vec<(&'static str, &'static [usize])>,
}

/// A generated graph.
#[derive(Debug)]
struct Case {
    replicas: usize,
    /// Per-replica feeds of `%x` and `%y` (f32 `[2, 3]`).
    feeds: Vec<[Vec<f32>; 2]>,
    body: String,
    ops: Vec<Op>,
    /// Every name the body returns, in order.
    returns: Vec<String>,
    /// The functions the body's control flow calls.
    functions: String,
}

/// A float from the pool of ordinary and special values.
fn float(u: &mut Unstructured) -> arbitrary::Result<f32> {
    const SPECIAL: &[f32] = &[
        0.0,
        -0.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        1e30,
        -1e30,
        0.5,
        -0.5,
        1.0,
        -1.0,
        2.5,
    ];
    Ok(match u.int_in_range(0..=9)? {
        0..=1 => SPECIAL[u.choose_index(SPECIAL.len())?],
        _ => f32::from(u.int_in_range(-300i16..=300)?) / 64.0,
    })
}

/// The `.opg` text of a float.
fn text(v: f32) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:e}")
    }
}

/// Only the ops both backends have are generated.
fn runs_on_both(op: &str) -> bool {
    tpu_rewrite::exec::has_kernel(op) && tpu_rewrite::xla::stablehlo::lowering_of(op).is_some()
}

/// An `i32` from a pool of ordinary values and the extremes.
fn int(u: &mut Unstructured) -> arbitrary::Result<i32> {
    const SPECIAL: &[i32] =
        &[0, 1, -1, 2, -2, 7, 65536, -65536, i32::MAX, i32::MIN, i32::MAX - 1, i32::MIN + 1, 46341, -46341];
    Ok(match u.int_in_range(0..=3)? {
        0..=1 => SPECIAL[u.choose_index(SPECIAL.len())?],
        _ => i32::from(u.int_in_range(-1000i16..=1000)?),
    })
}

/// Integer ops: (op, unary).
const INT_OPS: &[(&str, bool)] = &[
    ("Abs", true),
    ("Neg", true),
    ("Square", true),
    ("Sign", true),
    ("AddV2", false),
    ("Sub", false),
    ("Mul", false),
    ("Maximum", false),
    ("Minimum", false),
    ("FloorDiv", false),
    ("FloorMod", false),
];

/// A constant of a random shape, of `i32` or `f32`, as a line of `.opg`;
/// `nonzero` replaces integer zeros by 1 (a divisor).
fn constant(u: &mut Unstructured, name: &str, int_valued: bool, nonzero: bool) -> arbitrary::Result<(String, Shape)> {
    let shape = [Shape::Matrix, Shape::Row, Shape::Scalar][u.choose_index(3)?];
    let n: usize = shape.dims().iter().product();
    let items: Vec<String> = if int_valued {
        (0..n).map(|_| int(u).map(|v| if nonzero && v == 0 { 1 } else { v }.to_string())).collect::<Result<_, _>>()?
    } else {
        (0..n).map(|_| float(u).map(text)).collect::<Result<_, _>>()?
    };
    let dims: Vec<String> = shape.dims().iter().map(usize::to_string).collect();
    let dtype = if int_valued { "i32" } else { "f32" };
    let line = format!(
        "%{name} = Const() {{dtype = {dtype}, value = tensor({dtype}, [{}]) [{}]}}\n",
        dims.join(", "),
        items.join(", ")
    );
    Ok((line, shape))
}

fn generate(u: &mut Unstructured) -> arbitrary::Result<Case> {
    let replicas = [1usize, 2, 3, 4, 8][u.choose_index(5)?];
    let mut feeds = Vec::new();
    for _ in 0..replicas {
        let mut pair = [Vec::new(), Vec::new()];
        for input in &mut pair {
            for _ in 0..6 {
                input.push(float(u)?);
            }
        }
        feeds.push(pair);
    }
    let mut values = vec![
        Value { name: "x".into(), shape: Shape::Matrix, int: false },
        Value { name: "y".into(), shape: Shape::Matrix, int: false },
    ];
    let mut body = String::new();
    let mut ops = Vec::new();
    let mut returns = Vec::new();
    let mut case_functions = String::new();
    let count = u.int_in_range(1..=10)?;
    // An op of the table on values of one kind.
    let simple = |name: String, op: &'static str, operands: Vec<String>, class: Class| Op {
        name,
        op,
        operands,
        class,
        cross_replica: false,
        consts: Vec::new(),
        control: None,
    };
    for i in 0..count {
        let name = format!("v{i}");
        let floats: Vec<Value> = values.iter().filter(|v| !v.int).cloned().collect();
        let pick = |u: &mut Unstructured, values: &[Value]| -> arbitrary::Result<Value> {
            Ok(values[u.choose_index(values.len())?].clone())
        };
        match u.int_in_range(0..=14)? {
            // A constant of a random shape.
            0 => {
                let (line, shape) = constant(u, &name, false, false)?;
                body.push_str(&line);
                values.push(Value { name, shape, int: false });
                continue;
            }
            1..=3 => {
                let (op, class) = UNARY[u.choose_index(UNARY.len())?];
                if !runs_on_both(op) {
                    continue;
                }
                let a = pick(u, &floats)?;
                let _ = writeln!(body, "%{name} = {op}(%{}) {{T = f32}}", a.name);
                ops.push(simple(name.clone(), op, vec![a.name], class));
                values.push(Value { name, shape: a.shape, int: false });
            }
            4..=6 => {
                let (op, class) = BINARY[u.choose_index(BINARY.len())?];
                if !runs_on_both(op) {
                    continue;
                }
                let (a, b) = (pick(u, &floats)?, pick(u, &floats)?);
                let _ = writeln!(body, "%{name} = {op}(%{}, %{}) {{T = f32}}", a.name, b.name);
                ops.push(simple(name.clone(), op, vec![a.name, b.name], class));
                values.push(Value { name, shape: a.shape.broadcast(b.shape), int: false });
            }
            7 => {
                let (op, class) = REDUCTIONS[u.choose_index(REDUCTIONS.len())?];
                let a = pick(u, &floats)?;
                let (axes, shape) = match (a.shape, u.arbitrary::<bool>()?) {
                    (Shape::Scalar, _) => continue,
                    (Shape::Matrix, true) => ("[1]) [0]", Shape::Row),
                    (Shape::Matrix, false) => ("[2]) [0, 1]", Shape::Scalar),
                    (Shape::Row, _) => ("[1]) [0]", Shape::Scalar),
                };
                let _ = writeln!(body, "%{name}_axes = Const() {{dtype = i32, value = tensor(i32, {axes}}}");
                let _ = writeln!(
                    body,
                    "%{name} = {op}(%{}, %{name}_axes) {{T = f32, Tidx = i32, keep_dims = false}}",
                    a.name
                );
                let mut op = simple(name.clone(), op, vec![a.name], class);
                op.consts = vec![format!("{name}_axes")];
                ops.push(op);
                values.push(Value { name, shape, int: false });
            }
            8 => {
                let (a, b) = (pick(u, &floats)?, pick(u, &floats)?);
                if !runs_on_both("SelectV2") {
                    continue;
                }
                let _ = writeln!(body, "%{name}_p = Greater(%{}, %{}) {{T = f32}}", a.name, b.name);
                let _ = writeln!(body, "%{name} = SelectV2(%{name}_p, %{}, %{}) {{T = f32}}", a.name, b.name);
                let shape = a.shape.broadcast(b.shape);
                ops.push(simple(name.clone(), "SelectV2", vec![a.name, b.name], Class::Exact));
                values.push(Value { name, shape, int: false });
            }
            // A gather at indices in range (XLA clamps, the simulator
            // refuses, out of range: see the device checks).
            9 => {
                let a = pick(u, &floats)?;
                let (axis, size) = match (a.shape, u.arbitrary::<bool>()?) {
                    (Shape::Scalar, _) => continue,
                    (Shape::Matrix, true) => (0, 2),
                    (Shape::Matrix, false) => (1, 3),
                    (Shape::Row, _) => (0, 3),
                };
                let indices: Vec<String> =
                    (0..size).map(|_| u.int_in_range(0..=size - 1).map(|v| v.to_string())).collect::<Result<_, _>>()?;
                let _ = writeln!(
                    body,
                    "%{name}_idx = Const() {{dtype = i32, value = tensor(i32, [{size}]) [{}]}}",
                    indices.join(", ")
                );
                let _ = writeln!(body, "%{name}_axis = Const() {{dtype = i32, value = tensor(i32, []) [{axis}]}}");
                let _ = writeln!(
                    body,
                    "%{name} = GatherV2(%{}, %{name}_idx, %{name}_axis) {{Taxis = i32, Tindices = i32, Tparams = f32, batch_dims = 0}}",
                    a.name
                );
                let mut op = simple(name.clone(), "GatherV2", vec![a.name], Class::Exact);
                op.consts = vec![format!("{name}_idx"), format!("{name}_axis")];
                ops.push(op);
                values.push(Value { name, shape: a.shape, int: false });
            }
            // Integer ops on integer constants with the extremes (wrapping
            // arithmetic, division by zero and by -1).
            10..=11 => {
                let (op, unary) = INT_OPS[u.choose_index(INT_OPS.len())?];
                if !runs_on_both(op) {
                    continue;
                }
                let mut ints: Vec<Value> = values.iter().filter(|v| v.int).cloned().collect();
                while ints.len() < 2 || u.ratio(1, 4)? {
                    let c = format!("{name}_c{}", ints.len());
                    let (line, shape) = constant(u, &c, true, false)?;
                    body.push_str(&line);
                    let v = Value { name: c, shape, int: true };
                    values.push(v.clone());
                    ints.push(v);
                    if ints.len() > 4 {
                        break;
                    }
                }
                let a = pick(u, &ints)?;
                let (operands, shape) = if unary {
                    let _ = writeln!(body, "%{name} = {op}(%{}) {{T = i32}}", a.name);
                    (vec![a.name], a.shape)
                } else {
                    // Integer division by zero is an error in TensorFlow and
                    // the simulator and -1 on XLA: divisors are constants
                    // without zeros (by -1 stays in).
                    let b = if matches!(op, "FloorDiv" | "FloorMod") {
                        let d = format!("{name}_d");
                        let (line, shape) = constant(u, &d, true, true)?;
                        body.push_str(&line);
                        Value { name: d, shape, int: true }
                    } else {
                        pick(u, &ints)?
                    };
                    let _ = writeln!(body, "%{name} = {op}(%{}, %{}) {{T = i32}}", a.name, b.name);
                    (vec![a.name, b.name.clone()], a.shape.broadcast(b.shape))
                };
                ops.push(simple(name.clone(), op, operands, Class::Exact));
                values.push(Value { name, shape, int: true });
            }
            // A StatelessIf whose branches are one op each.
            13 => {
                let a = pick(u, &floats)?;
                let b = partner(u, &floats, a.shape)?;
                let (then_op, _) = BODY_OPS[u.choose_index(BODY_OPS.len())?];
                let (else_op, _) = BODY_OPS[u.choose_index(BODY_OPS.len())?];
                if !runs_on_both(then_op) || !runs_on_both(else_op) || !runs_on_both("StatelessIf") {
                    continue;
                }
                // The predicate: the sum of `a` is positive.
                let rank = a.shape.dims().len();
                let sum = if rank == 0 {
                    a.name.clone()
                } else {
                    let axes: Vec<String> = (0..rank).map(|d| d.to_string()).collect();
                    let _ = writeln!(
                        body,
                        "%{name}_ax = Const() {{dtype = i32, value = tensor(i32, [{rank}]) [{}]}}",
                        axes.join(", ")
                    );
                    let _ = writeln!(
                        body,
                        "%{name}_s = Sum(%{}, %{name}_ax) {{T = f32, Tidx = i32, keep_dims = false}}",
                        a.name
                    );
                    format!("{name}_s")
                };
                let _ = writeln!(body, "%{name}_zero = Const() {{dtype = f32, value = tensor(f32, []) [0.0]}}");
                let _ = writeln!(body, "%{name}_p = Greater(%{sum}, %{name}_zero) {{T = f32}}");
                let attrs = format!(
                    "{{Tcond = bool, Tin = [f32, f32], Tout = [f32], then_branch = func \"{name}_then\", else_branch = func \"{name}_else\"}}"
                );
                let _ = writeln!(body, "%{name} = StatelessIf(%{name}_p, %{}, %{}) {attrs}", a.name, b.name);
                let mut functions = branch(&format!("{name}_then"), then_op);
                functions.push_str(&branch(&format!("{name}_else"), else_op));
                case_functions.push_str(&functions);
                let mut op = simple(name.clone(), "StatelessIf", vec![format!("{name}_p"), a.name, b.name], CONTROL);
                op.control = Some(Control {
                    line: format!("%{name} = StatelessIf(%in0, %in1, %in2) {attrs}"),
                    functions,
                    inputs: vec![("bool", &[]), ("f32", a.shape.dims()), ("f32", b.shape.dims())],
                });
                ops.push(op);
                values.push(Value { name, shape: a.shape, int: false });
            }
            // A StatelessWhile that applies one op 0 to 3 times.
            14 => {
                let a = pick(u, &floats)?;
                let b = partner(u, &floats, a.shape)?;
                let (step, _) = BODY_OPS[u.choose_index(BODY_OPS.len())?];
                if !runs_on_both(step) || !runs_on_both("StatelessWhile") {
                    continue;
                }
                let trips = u.int_in_range(0..=3)?;
                let _ = writeln!(body, "%{name}_n = Const() {{dtype = i32, value = tensor(i32, []) [{trips}]}}");
                let attrs = format!(
                    "{{T = [i32, f32, f32], body = func \"{name}_body\", cond = func \"{name}_cond\", parallel_iterations = 10}}"
                );
                let _ = writeln!(body, "%{name} = StatelessWhile(%{name}_n, %{}, %{}) {attrs}", a.name, b.name);
                let functions = loop_functions(&name, step);
                case_functions.push_str(&functions);
                // The loop's second result is the value it stepped.
                let stepped = format!("{name}_v");
                let _ = writeln!(body, "%{stepped} = Identity(%{name}:1) {{T = f32}}");
                let mut op = simple(stepped.clone(), "StatelessWhile", vec![a.name, b.name], CONTROL);
                op.consts = vec![format!("{name}_n")];
                op.control = Some(Control {
                    line: format!("%{name} = StatelessWhile(%in2, %in0, %in1) {attrs}"),
                    functions,
                    inputs: vec![("f32", a.shape.dims()), ("f32", b.shape.dims()), ("i32", &[])],
                });
                ops.push(op);
                values.push(Value { name: stepped.clone(), shape: a.shape, int: false });
                returns.push(stepped);
            }
            _ => {
                let a = pick(u, &floats)?;
                let groups: Vec<String> = (0..replicas).map(|r| r.to_string()).collect();
                let _ = writeln!(
                    body,
                    "%{name}_groups = Const() {{dtype = i32, value = tensor(i32, [1, {replicas}]) [{}]}}",
                    groups.join(", ")
                );
                let _ = writeln!(body, "%{name} = CrossReplicaSum(%{}, %{name}_groups) {{T = f32}}", a.name);
                ops.push(Op {
                    name: name.clone(),
                    op: "CrossReplicaSum",
                    operands: vec![a.name],
                    class: Class::Approx(1e-5),
                    cross_replica: true,
                    consts: Vec::new(),
                    control: None,
                });
                values.push(Value { name, shape: a.shape, int: false });
            }
        }
        returns.push(format!("v{i}"));
    }
    if returns.is_empty() {
        let _ = writeln!(body, "%v_last = Neg(%x) {{T = f32}}");
        ops.push(simple("v_last".into(), "Neg", vec!["x".into()], Class::Exact));
        returns.push("v_last".into());
    }
    // Every operand of a checked op is returned too, so its XLA value is known.
    for op in &ops {
        for operand in &op.operands {
            if operand != "x" && operand != "y" && !returns.contains(operand) {
                returns.push(operand.clone());
            }
        }
    }
    Ok(Case { replicas, feeds, body, ops, returns, functions: case_functions })
}

/// Ops a branch or a loop body applies: `(op, binary)`. Each is applied
/// to the first operand (and the second, when binary); none changes the
/// shape of the first, and none amplifies a last-ulp difference much over
/// three trips of a loop. `Maximum`, `Minimum` and `Relu6` are left out:
/// XLA:CPU's min/max may drop a NaN (pinned per op, outside functions),
/// and inside a loop body it does so for `Relu6` too (seed 14).
const BODY_OPS: &[(&str, bool)] = &[
    ("Abs", false),
    ("Neg", false),
    ("Floor", false),
    ("Tanh", false),
    ("Sigmoid", false),
    ("Softsign", false),
    ("Square", false),
    ("AddV2", true),
    ("Sub", true),
    ("Mul", true),
    ("SquaredDifference", true),
];

/// Tolerance of a control-flow op: its body's ops, up to three times.
const CONTROL: Class = Class::Approx(1e-4);

/// A second operand for a branch or a loop: a float value of `shape`, or a
/// scalar, so the body keeps the first operand's shape.
fn partner(u: &mut Unstructured, floats: &[Value], shape: Shape) -> arbitrary::Result<Value> {
    let fit: Vec<&Value> = floats.iter().filter(|v| v.shape == shape || v.shape == Shape::Scalar).collect();
    Ok(fit[u.choose_index(fit.len())?].clone())
}

/// The `.opg` line of `op` on `%a` (and `%b`) into `%o`.
fn body_line(op: &str) -> String {
    let binary = BODY_OPS.iter().any(|&(o, b)| o == op && b);
    if binary {
        format!("%o = {op}(%a, %b) {{T = f32}}")
    } else {
        format!("%o = {op}(%a) {{T = f32}}")
    }
}

/// A branch function `name(a, b) -> op(a[, b])`.
fn branch(name: &str, op: &str) -> String {
    format!(
        "graph @{name} (role = \"function\") {{\n  %a = _Arg() {{T = f32, index = 0}}\n  %b = _Arg() {{T = f32, index = 1}}\n  {}\n  %r = _Retval(%o) {{T = f32, index = 0}}\n}}\n",
        body_line(op)
    )
}

/// A loop's body `(n, a, b) -> (n - 1, op(a[, b]), b)` and its condition `n > 0`.
fn loop_functions(name: &str, op: &str) -> String {
    format!(
        "graph @{name}_body (role = \"function\") {{
  %n = _Arg() {{T = i32, index = 0}}
  %a = _Arg() {{T = f32, index = 1}}
  %b = _Arg() {{T = f32, index = 2}}
  %one = Const() {{dtype = i32, value = tensor(i32, []) [1]}}
  %n2 = Sub(%n, %one) {{T = i32}}
  {}
  %r0 = _Retval(%n2) {{T = i32, index = 0}}
  %r1 = _Retval(%o) {{T = f32, index = 1}}
  %r2 = _Retval(%b) {{T = f32, index = 2}}
}}
graph @{name}_cond (role = \"function\") {{
  %n = _Arg() {{T = i32, index = 0}}
  %a = _Arg() {{T = f32, index = 1}}
  %b = _Arg() {{T = f32, index = 2}}
  %z = Const() {{dtype = i32, value = tensor(i32, []) [0]}}
  %p = Greater(%n, %z) {{T = i32}}
  %r = _Retval(%p) {{T = bool, index = 0}}
}}
",
        body_line(op)
    )
}

/// Runs a control-flow op alone on the simulator, its operands fed with
/// `inputs` (XLA's values), and returns its first float result.
fn control_flow_on_simulator(name: &str, control: &Control, inputs: &[Tensor]) -> Result<Tensor, String> {
    let mut text = String::from("graph @main {\n");
    let mut binds = Vec::new();
    for (k, (dtype, dims)) in control.inputs.iter().enumerate() {
        let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
        let _ = writeln!(text, "  %p{k} = Placeholder() {{dtype = {dtype}, shape = shape[{}]}}", dims.join(", "));
        binds.push(format!("%in{k} = [%p{k}]"));
    }
    let _ = writeln!(text, "  replicate (num_replicas = 1) ({}) {{", binds.join(", "));
    let _ = writeln!(text, "    {}", control.line);
    let out = match name.strip_suffix("_v") {
        Some(looped) if control.line.contains("StatelessWhile") => format!("%{looped}:1"),
        _ => format!("%{name}"),
    };
    let _ = writeln!(text, "    return {out}\n  }}\n}}");
    text.push_str(&control.functions);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("control.opg");
    std::fs::write(&path, &text).map_err(|e| e.to_string())?;
    let (_, lowered) = prepare(path.to_str().ok_or("path")?, "1x1", 1);
    let feeds: Vec<(String, Tensor)> = inputs.iter().enumerate().map(|(k, t)| (format!("p{k}:0"), t.clone())).collect();
    let fetches = default_fetches(&lowered.module);
    let run = driver::run(&lowered.module, &feeds, &fetches, &driver::RunConfig::default(), &mut |_, _| {})
        .map_err(|e| e.to_string())?;
    run.fetched.into_iter().next().map(|(_, t)| t).ok_or_else(|| "the simulator fetched nothing".into())
}

/// The case's `.opg` text.
fn source(case: &Case) -> String {
    let mut text = String::from("graph @main {\n");
    for input in ["x", "y"] {
        for r in 0..case.replicas {
            let _ = writeln!(text, "  %{input}{r} = Placeholder() {{dtype = f32, shape = shape[2, 3]}}");
        }
    }
    let bind = |input: &str| (0..case.replicas).map(|r| format!("%{input}{r}")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        text,
        "  replicate (num_replicas = {}) (%x = [{}], %y = [{}]) {{",
        case.replicas,
        bind("x"),
        bind("y")
    );
    for line in case.body.lines() {
        let _ = writeln!(text, "    {line}");
    }
    let returns: Vec<String> = case.returns.iter().map(|r| format!("%{r}")).collect();
    let _ = writeln!(text, "    return {}\n  }}\n}}", returns.join(", "));
    text.push_str(&case.functions);
    text
}

/// Why `got` (XLA) differs from `want` (the simulator's kernel), if it does.
fn differs(
    op: &Op,
    inputs: &[Tensor],
    got: &Tensor,
    want: &Tensor,
    made_by: &dyn Fn(usize, &[&str]) -> bool,
) -> Option<String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Some(format!("{} {:?} vs {} {:?}", got.dtype(), got.shape(), want.dtype(), want.shape()));
    }
    let (g, _) = support::values(got);
    let (w, _) = support::values(want);
    let operand_values: Vec<Vec<f64>> = inputs.iter().map(|t| support::values(t).0).collect();
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let same = match op.class {
            _ if a.is_nan() || b.is_nan() => a.is_nan() && b.is_nan(),
            Class::Exact => a == b,
            Class::Approx(rel) => a == b || (a.is_finite() && b.is_finite() && (a - b).abs() <= 1e-6 + rel * b.abs()),
        };
        if same {
            continue;
        }
        // The operands at this element, broadcast as NumPy does.
        let at: Vec<f64> =
            operand_values.iter().map(|v| if v.len() == g.len() { v[i] } else { v[i % v.len().max(1)] }).collect();
        let known = KNOWN.iter().find(|k| {
            (k.op == "*" || k.op == op.op)
                && k.operand_from.is_none_or(|(i, by)| made_by(i, by))
                && (k.applies)(&at, b, a)
        });
        if let Some(known) = known {
            note_known(known);
            continue;
        }
        return Some(format!("[{i}] of {:?}: xla {a:e} vs simulator {b:e} (operands {at:?})", want.shape()));
    }
    None
}

/// Runs one case; `Err` describes each finding.
fn check(case: &Case) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("case.opg");
    std::fs::write(&path, source(case)).map_err(|e| e.to_string())?;
    let (tagged, lowered) = prepare(path.to_str().ok_or("path")?, &format!("1x{}", case.replicas), 1);
    let graph = &tagged.graphs[0];
    let mut feeds = Vec::new();
    for (r, pair) in case.feeds.iter().enumerate() {
        for (input, values) in ["x", "y"].iter().zip(pair) {
            let t = Tensor::from_vec(&[2, 3], values.clone()).map_err(|e| e.to_string())?;
            feeds.push((format!("{input}{r}:0"), t));
        }
    }
    let fetches = default_fetches(&lowered.module);
    let config = support::one_step(&feeds, Some(&tagged));
    let xla = backend::run(graph, &lowered.assignment, &config).map_err(|e| format!("xla failed: {e:?}"))?.run;
    driver::run(&lowered.module, &feeds, &fetches, &driver::RunConfig::default(), &mut |_, _| {})
        .map_err(|e| format!("the simulator failed on the whole graph: {e}"))?;
    // XLA's value of `name` on replica `r`.
    let value = |name: &str, r: usize| -> Result<Tensor, String> {
        if let Some(k) = ["x", "y"].iter().position(|n| *n == name) {
            return Tensor::from_vec(&[2, 3], case.feeds[r][k].clone()).map_err(|e| e.to_string());
        }
        let i = case.returns.iter().position(|n| n == name).ok_or_else(|| format!("%{name} is not returned"))?;
        let key = format!("output_{i}_shard_{r}:0");
        xla.fetched.iter().find(|(n, _)| *n == key).map(|(_, t)| t.clone()).ok_or_else(|| format!("xla has no {key}"))
    };
    let mut findings = Vec::new();
    for op in &case.ops {
        for r in 0..case.replicas {
            let got = value(&op.name, r)?;
            let inputs: Vec<Tensor> = op.operands.iter().map(|o| value(o, r)).collect::<Result<_, _>>()?;
            let node = graph.find(&op.name).map(|id| graph.node(id)).ok_or_else(|| format!("no node %{}", op.name))?;
            let want = if op.cross_replica {
                let all: Vec<Tensor> =
                    (0..case.replicas).map(|q| value(&op.operands[0], q)).collect::<Result<_, _>>()?;
                all.into_iter().reduce(|a, b| run_kernel("AddV2", &node.attrs, &[a, b]).expect("sums").remove(0))
            } else if let Some(control) = &op.control {
                let mut all = inputs.clone();
                for c in &op.consts {
                    all.push(const_of(graph, c)?);
                }
                CONTROL_CHECKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                match control_flow_on_simulator(&op.name, control, &all) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        findings.push(format!("%{} = {} on replica {r}: the simulator failed: {e}", op.name, op.op));
                        None
                    }
                }
            } else {
                let mut kernel_inputs = inputs.clone();
                for c in &op.consts {
                    kernel_inputs.push(const_of(graph, c)?);
                }
                if op.op == "SelectV2" {
                    let p = run_kernel("Greater", &node.attrs, &inputs).map_err(|e| e.to_string())?;
                    kernel_inputs =
                        vec![p.into_iter().next().ok_or("Greater gave nothing")?, inputs[0].clone(), inputs[1].clone()];
                }
                match run_kernel(op.op, &node.attrs, &kernel_inputs) {
                    Ok(mut outs) => Some(outs.remove(0)),
                    Err(e) => {
                        findings.push(format!(
                            "%{} = {} on replica {r}: the simulator refuses what XLA computes: {e}",
                            op.name, op.op
                        ));
                        None
                    }
                }
            };
            if let Some(want) = want {
                let made_by = |i: usize, by: &[&str]| {
                    op.operands.get(i).is_some_and(|d| case.ops.iter().any(|o| &o.name == d && by.contains(&o.op)))
                };
                if let Some(d) = differs(op, &inputs, &got, &want, &made_by) {
                    findings.push(format!("%{} = {} on replica {r}: {d}", op.name, op.op));
                }
            }
        }
    }
    if findings.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n--- graph ---\n{}", findings.join("\n"), source(case)))
    }
}

/// The value of constant `%name`, read from the graph.
fn const_of(graph: &tpu_rewrite::ir::Graph, name: &str) -> Result<Tensor, String> {
    let node = graph.find(name).map(|id| graph.node(id)).ok_or_else(|| format!("no constant %{name}"))?;
    run_kernel("Const", &node.attrs, &[])
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .ok_or_else(|| "no value".into())
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

#[test]
fn the_simulator_and_xla_agree_on_random_graphs() {
    let cases = env_u64("TPU_REWRITE_FUZZ_CASES", u64::from(DEFAULT_CASES)) as u32;
    let seed = env_u64("TPU_REWRITE_FUZZ_SEED", 0);
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    // Shrinking the generator's bytes changes the whole graph, and each try
    // compiles with XLA: the first failing graph is reported as it is.
    let config = Config { cases, failure_persistence: None, max_shrink_iters: 0, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    let strategy = proptest::collection::vec(proptest::arbitrary::any::<u8>(), 64..512);
    let start = std::time::Instant::now();
    let tried = std::sync::atomic::AtomicU32::new(0);
    let result = runner.run(&strategy, |bytes| {
        let case = generate(&mut Unstructured::new(&bytes)).map_err(|e| TestCaseError::reject(e.to_string()))?;
        tried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        check(&case).map_err(TestCaseError::fail)
    });
    let tried = tried.into_inner();
    let control = CONTROL_CHECKED.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "differential fuzz: {tried} of {cases} graphs from seed {seed} in {:.1} s ({control} If/While checks)",
        start.elapsed().as_secs_f64()
    );
    let seen = KNOWN_SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    for (known, count) in KNOWN.iter().zip(seen) {
        if count > 0 {
            eprintln!("  known difference met {count} times ({}): {}", known.op, known.why);
        }
    }
    match result {
        Ok(()) => {}
        Err(proptest::test_runner::TestError::Fail(reason, _)) => panic!("the backends disagree:\n{reason}"),
        Err(e) => panic!("{e}"),
    }
    // The default run's graphs include control flow, so it is tested.
    assert!(tried < DEFAULT_CASES || control > 0, "{tried} graphs and no If or While among them");
}

/// The pinned differences are TensorFlow's own: `tests/tf/known_differences.py`
/// computed each on TensorFlow's CPU kernels and under `jit_compile`
/// (XLA). The two columns differ, and the simulator's kernels give the
/// CPU column bit for bit.
#[test]
fn the_pinned_differences_are_tensorflows() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/known_differences.json");
    let text = std::fs::read_to_string(&path).expect("tests/tf/known_differences.json (run the script beside it)");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let column = |case: &str, column: &str| -> f32 {
        let v = json[case][column][0].as_str().unwrap_or_else(|| panic!("{case}: no {column} value"));
        v.parse::<f64>().unwrap_or_else(|e| panic!("{case}: {v}: {e}")) as f32
    };
    let attrs = tpu_rewrite::ir::AttrMap::default();
    let k = |op: &str, inputs: &[Tensor]| -> Tensor {
        run_kernel(op, &attrs, inputs).unwrap_or_else(|e| panic!("{op}: {e}")).remove(0)
    };
    let scalar = |t: Tensor| -> f32 { t.to_vec::<f32>().expect("f32")[0] };
    let v = |x: f32| Tensor::vector(vec![x]);
    let same = |a: f32, b: f32| (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits();
    let cases: [(&str, f32); 7] = [
        ("softsign(y/x), x=1e-30, y=-1e30", scalar(k("Softsign", &[k("RealDiv", &[v(-1e30), v(1e-30)])]))),
        ("log(rsqrt(a)), a=-0", scalar(k("Log", &[k("Rsqrt", &[v(-0.0)])]))),
        ("log(exp(a)), a=f32 lowest", scalar(k("Log", &[k("Exp", &[v(f32::MIN)])]))),
        (
            "a/(a/c), a=f32max, c=-1.5312499",
            scalar(k("RealDiv", &[v(f32::MAX), k("RealDiv", &[v(f32::MAX), v(-1.5312499)])])),
        ),
        (
            "(exp(a)/b)/(1/b), a=0.5, b=3e38",
            scalar(k("RealDiv", &[k("RealDiv", &[k("Exp", &[v(0.5)]), v(3e38)]), k("RealDiv", &[v(1.0), v(3e38)])])),
        ),
        (
            "div_no_nan(y/x, y/x), x=1e-30, y=-1e30",
            scalar(k("DivNoNan", &[k("RealDiv", &[v(-1e30), v(1e-30)]), k("RealDiv", &[v(-1e30), v(1e-30)])])),
        ),
        (
            "reduce_max([4.47, nan])",
            scalar(k("Max", &[Tensor::vector(vec![4.47f32, f32::NAN]), Tensor::vector(vec![0i32])])),
        ),
    ];
    for (case, simulator) in cases {
        let (cpu, jit) = (column(case, "cpu"), column(case, "jit_compile"));
        assert!(!same(cpu, jit), "{case}: TensorFlow gives {cpu} on both paths; nothing to pin");
        assert!(same(simulator, cpu), "{case}: the simulator gives {simulator}, TensorFlow's CPU kernels {cpu}");
    }
}
