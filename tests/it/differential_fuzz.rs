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
//! [`DEFAULT_CASES`] graphs from a fixed seed (seconds);
//! `TPU_REWRITE_FUZZ_CASES=N TPU_REWRITE_FUZZ_SEED=S cargo test --release
//! --test it differential_fuzz::` runs a longer search (docs/robustness.md).

mod generate;

use crate::support::lowering;
use crate::support::pjrt as support;

use std::fmt::Write as _;

use arbitrary::Unstructured;
use generate::{generate, source, Case, Class, Control, Op};
use lowering::{default_fetches, prepare};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use tpu_rewrite::exec::{driver, run_kernel, Tensor};
use tpu_rewrite::xla::backend;

/// Graphs per `cargo test` run.
const DEFAULT_CASES: u32 = 48;

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
