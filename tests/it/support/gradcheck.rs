//! The finite-difference gradient check that `tests/it/gradient_numerics.rs`
//! runs per op: case building (placeholders, the op, a weighted scalar
//! loss, a `gradients` call), the executor run and the comparison with
//! central differences on random inputs.

pub use proptest::prelude::*;
pub use proptest::test_runner::{Config, TestCaseError, TestRunner};
pub use rand::{Rng, SeedableRng};
pub use rand_chacha::ChaCha8Rng;
pub use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig, Tensor};
pub use tpu_rewrite::ir::{parse_module, DType};
pub use tpu_rewrite::passes::gradients::{expand_gradients, GradientsConfig};
pub use tpu_rewrite::passes::PassError;

/// The largest relative error allowed between analytic and numeric gradients.
pub const TOLERANCE: f64 = 1e-3;
/// Below this magnitude, errors are measured absolutely (relative to this floor).
pub const FLOOR: f64 = 1e-3;
/// Random inputs tried per case.
pub const CASES: u32 = 8;

/// Where an input's values are drawn from (each maps a uniform draw in [-1, 1)).
#[derive(Clone, Copy, Debug)]
pub enum Domain {
    /// [-2, 2).
    Any,
    /// [0.5, 2.5): for logarithms and denominators.
    Positive,
    /// [-1.2, -0.2] or [0.2, 1.2]: away from the kink of Relu.
    AwayFromZero,
    /// Near integers (parity 0) or half-integers (parity 1), within 0.05: two inputs of different
    /// parity never get closer than 0.4, away from the kink of Maximum and Minimum.
    Lattice(u8),
}

impl Domain {
    pub fn map(self, u: f64) -> f64 {
        match self {
            Domain::Any => 2.0 * u,
            Domain::Positive => 1.5 + u,
            Domain::AwayFromZero => u.signum() * (0.2 + u.abs()),
            Domain::Lattice(parity) => {
                let scaled = 4.0 * u;
                let k = scaled.floor();
                k + f64::from(parity) * 0.5 + (scaled - k - 0.5) * 0.1
            }
        }
    }
}

/// A placeholder of a case.
#[derive(Clone, Debug)]
pub struct Input {
    pub name: &'static str,
    pub shape: Vec<usize>,
    pub domain: Domain,
}

pub fn input(name: &'static str, shape: &[usize]) -> Input {
    Input { name, shape: shape.to_vec(), domain: Domain::Any }
}

pub fn input_in(name: &'static str, shape: &[usize], domain: Domain) -> Input {
    Input { name, shape: shape.to_vec(), domain }
}

/// How many times the loss is differentiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    First,
    Second,
}

/// One finite-difference case.
pub struct Case {
    pub name: &'static str,
    /// Differentiated placeholders, in the order of the gradients call's xs.
    pub inputs: Vec<Input>,
    /// Statements computing `%out` from the placeholders (f64 unless the case casts).
    pub forward: String,
    pub out_shape: Vec<usize>,
    pub order: Order,
    /// The central-difference step.
    pub step: f64,
}

pub fn case(name: &'static str, inputs: Vec<Input>, forward: impl Into<String>, out_shape: &[usize]) -> Case {
    Case { name, inputs, forward: forward.into(), out_shape: out_shape.to_vec(), order: Order::First, step: 1e-5 }
}

impl Case {
    pub fn second_order(mut self) -> Case {
        self.order = Order::Second;
        self
    }

    pub fn step(mut self, step: f64) -> Case {
        self.step = step;
        self
    }
}

/// A `shape[...]` attribute value.
pub fn shape_attr(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("shape[{}]", dims.join(", "))
}

/// Pseudo-random weights for `shape`, in [-1, -0.1] or [0.1, 1], with three decimals.
pub fn weight_values(shape: &[usize], rng: &mut ChaCha8Rng) -> Vec<f64> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|_| {
            let v: f64 = rng.random_range(0.1..1.0);
            let sign = if rng.random_bool(0.5) { -1.0 } else { 1.0 };
            (sign * v * 1000.0).round() / 1000.0
        })
        .collect()
}

/// An f64 constant named `name` of `shape` holding [`weight_values`].
pub fn weights(name: &str, shape: &[usize], rng: &mut ChaCha8Rng) -> String {
    let values: Vec<String> = weight_values(shape, rng).iter().map(|v| format!("{v:.3}")).collect();
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("  %{name} = Const() {{dtype = f64, value = tensor(f64, [{}]) [{}]}}\n", dims.join(", "), values.join(", "))
}

/// Statements making `%{name} = Sum(%{of} * W)` over every axis of `shape`.
pub fn weighted_sum(name: &str, of: &str, shape: &[usize], rng: &mut ChaCha8Rng) -> String {
    let mut text = weights(&format!("{name}_w"), shape, rng);
    text += &format!("  %{name}_prod = Mul({of}, %{name}_w) {{T = f64}}\n");
    if shape.is_empty() {
        text += &format!("  %{name} = Identity(%{name}_prod) {{T = f64}}\n");
    } else {
        let axes: Vec<String> = (0..shape.len()).map(|a| a.to_string()).collect();
        text += &format!(
            "  %{name}_axes = Const() {{dtype = i32, value = tensor(i32, [{}]) [{}]}}\n",
            shape.len(),
            axes.join(", ")
        );
        text += &format!("  %{name} = Sum(%{name}_prod, %{name}_axes) {{T = f64, keep_dims = false}}\n");
    }
    text
}

/// A stable seed for a case's weights.
pub fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The source of the case's graph: placeholders, forward, loss (`%objective`), the gradients
/// call(s), and `%grad_<i>` reading the gradient of input i.
pub fn source(case: &Case) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed_of(case.name));
    let mut text = String::from("graph @main {\n");
    for i in &case.inputs {
        text += &format!("  %{} = Placeholder() {{dtype = f64, shape = {}}}\n", i.name, shape_attr(&i.shape));
    }
    for line in case.forward.lines() {
        text += &format!("  {}\n", line.trim());
    }
    text += &weighted_sum("loss", "%out", &case.out_shape, &mut rng);
    let xs: Vec<String> = case.inputs.iter().map(|i| format!("%{}", i.name)).collect();
    let xs = xs.join(", ");
    text += &format!("  %grads = gradients(ys = [%loss], xs = [{xs}])\n");
    let last = match case.order {
        Order::First => "grads",
        Order::Second => {
            // Differentiate a weighted sum of the first input's gradient once more.
            text += &weighted_sum("loss2", "%grads:0", &case.inputs[0].shape, &mut rng);
            text += &format!("  %grads2 = gradients(ys = [%loss2], xs = [{xs}])\n");
            "grads2"
        }
    };
    let objective = if case.order == Order::First { "loss" } else { "loss2" };
    text += &format!("  %objective = Identity(%{objective}) {{T = f64}}\n");
    for i in 0..case.inputs.len() {
        text += &format!("  %grad_{i} = Identity(%{last}:{i}) {{T = f64}}\n");
    }
    text + "}\n"
}

/// Parses the case, expands its gradients and builds a one-graph mesh.
pub fn mesh_of(case: &Case) -> Mesh {
    let text = source(case);
    let (mut module, ir_errors) =
        parse_module(text.as_bytes()).unwrap_or_else(|e| panic!("case {} parses: {e:?}\n{text}", case.name));
    assert!(ir_errors.is_empty(), "case {} is valid IR: {ir_errors:?}\n{text}", case.name);
    for graph in &mut module.graphs {
        let errors = expand_gradients(graph, &GradientsConfig::default());
        // A second derivative may vanish (d²(a·b)/da² = 0): the second call then warns that its x
        // is unconnected and yields zeros, which the finite differences check like any gradient.
        let errors: Vec<_> = errors
            .into_iter()
            .filter(|e| !matches!(e, PassError::UnconnectedGradient { call, .. } if call == "grads2"))
            .collect();
        assert!(errors.is_empty(), "case {}: gradients expand cleanly: {errors:?}", case.name);
    }
    Mesh::new(&module, MeshConfig::default())
        .unwrap_or_else(|e| panic!("case {}: the expanded graph runs: {e}\n{text}", case.name))
}

pub fn feeds(case: &Case, values: &[Vec<f64>]) -> Feeds {
    let mut feeds = Feeds::new();
    for (input, v) in case.inputs.iter().zip(values) {
        let t = Tensor::from_vec(&input.shape, v.clone()).expect("values fill the shape");
        feeds.insert("main", input.name, t);
    }
    feeds
}

pub fn scalar_f64(t: &Tensor) -> f64 {
    assert_eq!(t.dtype(), DType::F64, "the objective is f64");
    t.to_vec::<f64>().and_then(|v| v.first().copied()).expect("the objective is a scalar")
}

/// The relative error of `analytic` against `numeric`, floored at [`FLOOR`].
pub fn relative_error(analytic: f64, numeric: f64) -> f64 {
    (analytic - numeric).abs() / analytic.abs().max(numeric.abs()).max(FLOOR)
}

/// Compares the executor's gradients with central differences at `values`.
pub fn compare(case: &Case, mesh: &Mesh, values: &[Vec<f64>]) -> Result<(), TestCaseError> {
    let fetches: Vec<Fetch> = (0..case.inputs.len()).map(|i| Fetch::new("main", format!("grad_{i}"))).collect();
    let analytic = mesh.run_step(&feeds(case, values), &fetches).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let objective = [Fetch::new("main", "objective")];
    for (i, input) in case.inputs.iter().enumerate() {
        let grad = &analytic[i];
        prop_assert_eq!(grad.shape(), input.shape.as_slice(), "gradient of `{}` has its shape", input.name);
        let grad = grad.to_vec::<f64>().ok_or_else(|| TestCaseError::fail("the gradient is f64"))?;
        for (j, &a) in grad.iter().enumerate() {
            let at = |delta: f64| -> Result<f64, TestCaseError> {
                let mut moved = values.to_vec();
                moved[i][j] += delta;
                let out = mesh.run_step(&feeds(case, &moved), &objective);
                Ok(scalar_f64(&out.map_err(|e| TestCaseError::fail(e.to_string()))?[0]))
            };
            let numeric = (at(case.step)? - at(-case.step)?) / (2.0 * case.step);
            let err = relative_error(a, numeric);
            prop_assert!(
                err < TOLERANCE,
                "{}: d/d{}[{}]: analytic {} vs numeric {} (relative error {:.2e}) at {:?}",
                case.name,
                input.name,
                j,
                a,
                numeric,
                err,
                values
            );
        }
    }
    Ok(())
}

/// Runs the finite-difference check of `case` on random inputs.
pub fn check(case: Case) {
    let mesh = mesh_of(&case);
    let sizes: Vec<usize> = case.inputs.iter().map(|i| i.shape.iter().product()).collect();
    let strategy = sizes.iter().map(|&n| prop::collection::vec(-1.0f64..1.0, n)).collect::<Vec<_>>();
    let mut runner = TestRunner::new(Config { cases: CASES, failure_persistence: None, ..Config::default() });
    let result = runner.run(&strategy, |draws| {
        let values: Vec<Vec<f64>> =
            draws.iter().zip(&case.inputs).map(|(d, input)| d.iter().map(|&u| input.domain.map(u)).collect()).collect();
        compare(&case, &mesh, &values)
    });
    if let Err(e) = result {
        panic!("{}: {e}\ngraph:\n{}", case.name, source(&case));
    }
}

/// `%out = <op>(%a, %b) {T = f64}`.
pub fn binary(op: &str) -> String {
    format!("%out = {op}(%a, %b) {{T = f64}}")
}

/// `%out = <op>(%a) {T = f64}`.
pub fn unary(op: &str) -> String {
    format!("%out = {op}(%a) {{T = f64}}")
}

pub fn i32_const(name: &str, shape: &[usize], values: &[i32]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let values: Vec<String> = values.iter().map(i32::to_string).collect();
    format!("%{name} = Const() {{dtype = i32, value = tensor(i32, [{}]) [{}]}}\n", dims.join(", "), values.join(", "))
}
