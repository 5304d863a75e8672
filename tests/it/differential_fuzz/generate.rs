//! The generator of the differential fuzzer: random well-typed `.opg`
//! graphs of the ops both backends run, drawn from `arbitrary`'s bytes
//! (so that proptest shrinks a failure), and their text.

use std::fmt::Write as _;

use arbitrary::Unstructured;

/// How an op's two results are compared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Class {
    /// Bit for bit (NaNs of any payload equal, `0.0 == -0.0`).
    Exact,
    /// Within `1e-6 + rel·|want|`, NaN and infinities matching.
    Approx(f64),
}

/// Shapes a value takes; every pair broadcasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    Matrix,
    Row,
    Scalar,
}

impl Shape {
    pub(super) fn dims(self) -> &'static [usize] {
        match self {
            Shape::Matrix => &[2, 3],
            Shape::Row => &[3],
            Shape::Scalar => &[],
        }
    }

    pub(super) fn broadcast(self, other: Shape) -> Shape {
        match (self, other) {
            (Shape::Matrix, _) | (_, Shape::Matrix) => Shape::Matrix,
            (Shape::Row, _) | (_, Shape::Row) => Shape::Row,
            _ => Shape::Scalar,
        }
    }
}

pub(super) const UNARY: &[(&str, Class)] = &[
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

pub(super) const BINARY: &[(&str, Class)] = &[
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

pub(super) const REDUCTIONS: &[(&str, Class)] = &[
    ("Sum", Class::Approx(1e-5)),
    ("Mean", Class::Approx(1e-5)),
    ("Prod", Class::Approx(1e-5)),
    ("Max", Class::Exact),
    ("Min", Class::Exact),
];

/// One value of a generated graph.
#[derive(Clone, Debug)]
pub(super) struct Value {
    pub(super) name: String,
    pub(super) shape: Shape,
    /// An `i32` value (else `f32`).
    pub(super) int: bool,
}

/// One op of a generated graph: its line of `.opg` and how to check it.
#[derive(Clone, Debug)]
pub(super) struct Op {
    pub(super) name: String,
    pub(super) op: &'static str,
    /// Value operands (constants of axes and groups are not listed).
    pub(super) operands: Vec<String>,
    /// Constants appended to the operands when the kernel is checked
    /// (a reduction's axes, a gather's indices and axis).
    pub(super) consts: Vec<String>,
    pub(super) class: Class,
    /// Its result is the sum over replicas of its operand.
    pub(super) cross_replica: bool,
    /// A control-flow op: its line with operands `%in0`, `%in1`, ...
    /// and the functions it calls, checked by running it alone on the
    /// simulator ([`control_flow_on_simulator`]).
    pub(super) control: Option<Control>,
}

/// A `StatelessIf` or `StatelessWhile` of a generated graph.
#[derive(Clone, Debug)]
pub(super) struct Control {
    /// The op's line, its operands renamed `%in0`, `%in1`, ...
    pub(super) line: String,
    /// The `.opg` text of the functions it calls.
    pub(super) functions: String,
    /// The dtype and shape of each operand, as a placeholder declares them.
    pub(super) inputs: Vec<(&'static str, &'static [usize])>,
}

/// A generated graph.
#[derive(Debug)]
pub(super) struct Case {
    pub(super) replicas: usize,
    /// Per-replica feeds of `%x` and `%y` (f32 `[2, 3]`).
    pub(super) feeds: Vec<[Vec<f32>; 2]>,
    pub(super) body: String,
    pub(super) ops: Vec<Op>,
    /// Every name the body returns, in order.
    pub(super) returns: Vec<String>,
    /// The functions the body's control flow calls.
    pub(super) functions: String,
}

/// A float from the pool of ordinary and special values.
pub(super) fn float(u: &mut Unstructured) -> arbitrary::Result<f32> {
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
pub(super) fn text(v: f32) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:e}")
    }
}

/// Only the ops both backends have are generated.
pub(super) fn runs_on_both(op: &str) -> bool {
    tpu_rewrite::exec::has_kernel(op) && tpu_rewrite::xla::stablehlo::lowering_of(op).is_some()
}

/// An `i32` from a pool of ordinary values and the extremes.
pub(super) fn int(u: &mut Unstructured) -> arbitrary::Result<i32> {
    const SPECIAL: &[i32] =
        &[0, 1, -1, 2, -2, 7, 65536, -65536, i32::MAX, i32::MIN, i32::MAX - 1, i32::MIN + 1, 46341, -46341];
    Ok(match u.int_in_range(0..=3)? {
        0..=1 => SPECIAL[u.choose_index(SPECIAL.len())?],
        _ => i32::from(u.int_in_range(-1000i16..=1000)?),
    })
}

/// Integer ops: (op, unary).
pub(super) const INT_OPS: &[(&str, bool)] = &[
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
pub(super) fn constant(
    u: &mut Unstructured,
    name: &str,
    int_valued: bool,
    nonzero: bool,
) -> arbitrary::Result<(String, Shape)> {
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

pub(super) fn generate(u: &mut Unstructured) -> arbitrary::Result<Case> {
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
pub(super) const BODY_OPS: &[(&str, bool)] = &[
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
pub(super) const CONTROL: Class = Class::Approx(1e-4);

/// A second operand for a branch or a loop: a float value of `shape`, or a
/// scalar, so the body keeps the first operand's shape.
pub(super) fn partner(u: &mut Unstructured, floats: &[Value], shape: Shape) -> arbitrary::Result<Value> {
    let fit: Vec<&Value> = floats.iter().filter(|v| v.shape == shape || v.shape == Shape::Scalar).collect();
    Ok(fit[u.choose_index(fit.len())?].clone())
}

/// The `.opg` line of `op` on `%a` (and `%b`) into `%o`.
pub(super) fn body_line(op: &str) -> String {
    let binary = BODY_OPS.iter().any(|&(o, b)| o == op && b);
    if binary {
        format!("%o = {op}(%a, %b) {{T = f32}}")
    } else {
        format!("%o = {op}(%a) {{T = f32}}")
    }
}

/// A branch function `name(a, b) -> op(a[, b])`.
pub(super) fn branch(name: &str, op: &str) -> String {
    format!(
        "graph @{name} (role = \"function\") {{\n  %a = _Arg() {{T = f32, index = 0}}\n  %b = _Arg() {{T = f32, index = 1}}\n  {}\n  %r = _Retval(%o) {{T = f32, index = 0}}\n}}\n",
        body_line(op)
    )
}

/// A loop's body `(n, a, b) -> (n - 1, op(a[, b]), b)` and its condition `n > 0`.
pub(super) fn loop_functions(name: &str, op: &str) -> String {
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

/// The case's `.opg` text.
pub(super) fn source(case: &Case) -> String {
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
