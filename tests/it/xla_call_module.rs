//! `XlaCallModule` raised into an IR function (`passes::xla_call_module`),
//! on the simulator and on PJRT, against TensorFlow's numbers for the same
//! module (`tests/tf/ops_xla_call_module.py`, case `mlp`), and what the
//! family's modules are raised to.
//!
//! The decoded module is built here by hand, operation for operation as
//! `jax.export` wrote the `mlp` case's module (MLIR's generic form of it is
//! in the comments), so the raise is tested apart from the bytecode reader.

use std::collections::HashMap;

use serde_json::Value;
use tpu_rewrite::exec::Tensor;
use tpu_rewrite::ir::functions::XLA_CALL_MODULE_ATTR;
use tpu_rewrite::ir::{parse_module, AttrValue};
use tpu_rewrite::passes::xla_call_module::{raise_xla_call_modules, read_module};
use tpu_rewrite::syntax::mlir::{
    Attribute, Block, DenseValues, Dim, ElementType, Function, Module, NamedAttribute, Operation, Region, TensorType,
    Type, Value as MValue, ValueId, Visibility,
};

use crate::support::corpus::{assert_close, read_json, tensor_of};
use crate::support::op_cases::run_on_both;
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

fn f32s(dims: &[i64]) -> Type {
    Type::Tensor(TensorType {
        dims: Some(dims.iter().map(|&d| Dim::Static(d)).collect()),
        element: ElementType::F32,
        bounds: Vec::new(),
    })
}

fn named(name: &str, value: Attribute) -> NamedAttribute {
    NamedAttribute { name: name.into(), value }
}

fn i64s(values: &[i64]) -> Attribute {
    Attribute::DenseArray { element: ElementType::Signless(64), values: DenseValues::Int(values.to_vec()) }
}

fn integers(values: &[i64]) -> Attribute {
    let ty = Type::Element(ElementType::Signless(64));
    Attribute::Array(values.iter().map(|&v| Attribute::Integer { value: i128::from(v), ty: ty.clone() }).collect())
}

/// `%r = name(operands) {attributes} (regions) : -> dims` with one f32 result.
fn op(name: &str, operands: &[u32], r: u32, dims: &[i64], attributes: Vec<NamedAttribute>) -> Operation {
    Operation {
        name: name.into(),
        operands: operands.iter().map(|&v| ValueId(v)).collect(),
        results: vec![MValue { id: ValueId(r), ty: f32s(dims) }],
        attributes,
        regions: Vec::new(),
    }
}

fn ret(name: &str, operands: &[u32]) -> Operation {
    Operation {
        name: name.into(),
        operands: operands.iter().map(|&v| ValueId(v)).collect(),
        results: Vec::new(),
        attributes: Vec::new(),
        regions: Vec::new(),
    }
}

fn block(args: &[(u32, &[i64])], operations: Vec<Operation>) -> Block {
    Block { arguments: args.iter().map(|&(id, dims)| MValue { id: ValueId(id), ty: f32s(dims) }).collect(), operations }
}

fn function(name: &str, args: &[(u32, &[i64])], results: &[&[i64]], operations: Vec<Operation>) -> Function {
    Function {
        name: name.into(),
        visibility: if name == "main" { Visibility::Public } else { Visibility::Private },
        inputs: args.iter().map(|&(_, d)| f32s(d)).collect(),
        results: results.iter().map(|d| f32s(d)).collect(),
        arg_attributes: Vec::new(),
        result_attributes: Vec::new(),
        body: Region { blocks: vec![block(args, operations)] },
    }
}

fn dot(a: u32, b: u32, r: u32, dims: &[i64]) -> Operation {
    let numbers = Attribute::Struct {
        kind: "dot".into(),
        fields: vec![
            named("lhs_contracting_dimensions", integers(&[1])),
            named("rhs_contracting_dimensions", integers(&[0])),
        ],
    };
    op("stablehlo.dot_general", &[a, b], r, dims, vec![named("dot_dimension_numbers", numbers)])
}

fn broadcast(x: u32, r: u32, map: &[i64], dims: &[i64]) -> Operation {
    op("stablehlo.broadcast_in_dim", &[x], r, dims, vec![named("broadcast_dimensions", i64s(map))])
}

fn scalar(r: u32, value: f64) -> Operation {
    let ty = TensorType { dims: Some(Vec::new()), element: ElementType::F32, bounds: Vec::new() };
    let value = Attribute::DenseElements { ty, values: DenseValues::Float(vec![value]), splat: true };
    op("stablehlo.constant", &[], r, &[], vec![named("value", value)])
}

fn call(callee: &str, x: u32, r: u32, dims: &[i64]) -> Operation {
    op("func.call", &[x], r, dims, vec![named("callee", Attribute::SymbolRef(callee.into()))])
}

/// `stablehlo.reduce` over dimension 1 with a body of one `body` op.
fn reduce(x: u32, init: u32, r: u32, dims: &[i64], body: &str, (a, b, c): (u32, u32, u32)) -> Operation {
    let mut o = op("stablehlo.reduce", &[x, init], r, dims, vec![named("dimensions", i64s(&[1]))]);
    let region =
        block(&[(a, &[]), (b, &[])], vec![op(body, &[a, b], c, &[], Vec::new()), ret("stablehlo.return", &[c])]);
    o.regions.push(Region { blocks: vec![region] });
    o
}

/// The `mlp` case's module: `log_softmax(relu(x @ w1 + b1) @ w2 + b2)`.
fn mlp_module() -> Module {
    let main = function(
        "main",
        &[(6, &[4, 3]), (7, &[3, 5]), (8, &[5]), (9, &[5, 2]), (10, &[2])],
        &[&[4, 2], &[4, 2]],
        vec![
            dot(6, 7, 19, &[4, 5]),
            broadcast(8, 20, &[1], &[1, 5]),
            broadcast(20, 21, &[0, 1], &[4, 5]),
            op("stablehlo.add", &[19, 21], 22, &[4, 5], Vec::new()),
            call("relu", 22, 23, &[4, 5]),
            dot(23, 9, 24, &[4, 2]),
            broadcast(10, 25, &[1], &[1, 2]),
            broadcast(25, 26, &[0, 1], &[4, 2]),
            op("stablehlo.add", &[24, 26], 27, &[4, 2], Vec::new()),
            call("log_softmax", 27, 28, &[4, 2]),
            ret("func.return", &[27, 28]),
        ],
    );
    let relu = function(
        "relu",
        &[(5, &[4, 5])],
        &[&[4, 5]],
        vec![
            scalar(16, 0.0),
            broadcast(16, 17, &[], &[4, 5]),
            op("stablehlo.maximum", &[5, 17], 18, &[4, 5], Vec::new()),
            ret("func.return", &[18]),
        ],
    );
    let log_softmax = function(
        "log_softmax",
        &[(0, &[4, 2])],
        &[&[4, 2]],
        vec![
            scalar(1, 0.0),
            scalar(2, f64::NEG_INFINITY),
            reduce(0, 2, 3, &[4], "stablehlo.maximum", (30, 31, 32)),
            broadcast(2, 4, &[], &[4]),
            op("stablehlo.maximum", &[4, 3], 5, &[4], Vec::new()),
            broadcast(5, 6, &[0], &[4, 1]),
            broadcast(6, 7, &[0, 1], &[4, 2]),
            op("stablehlo.subtract", &[0, 7], 8, &[4, 2], Vec::new()),
            op("stablehlo.exponential", &[8], 9, &[4, 2], Vec::new()),
            reduce(9, 1, 10, &[4], "stablehlo.add", (33, 34, 35)),
            broadcast(10, 11, &[0], &[4, 1]),
            op("stablehlo.log", &[11], 12, &[4, 1], Vec::new()),
            broadcast(12, 13, &[0, 1], &[4, 2]),
            op("stablehlo.subtract", &[8, 13], 14, &[4, 2], Vec::new()),
            ret("func.return", &[14]),
        ],
    );
    Module { functions: vec![main, relu, log_softmax], attributes: Vec::new() }
}

const GRAPH: &str = r#"
graph @main {
  %mlp__args_0 = Placeholder() {dtype = f32, shape = shape[4, 3]}
  %mlp__args_1 = Placeholder() {dtype = f32, shape = shape[3, 5]}
  %mlp__args_2 = Placeholder() {dtype = f32, shape = shape[5]}
  %mlp__args_3 = Placeholder() {dtype = f32, shape = shape[5, 2]}
  %mlp__args_4 = Placeholder() {dtype = f32, shape = shape[2]}
  %mlp__op = XlaCallModule(%mlp__args_0, %mlp__args_1, %mlp__args_2, %mlp__args_3, %mlp__args_4) {Tin = [f32, f32, f32, f32, f32], Tout = [f32, f32], Sout = [shape[4, 2], shape[4, 2]], version = 10, module = "decoded by the test", platforms = ["CPU"], has_token_input_output = false}
  %mlp__out_0 = Identity(%mlp__op) {T = f32}
  %mlp__out_1 = Identity(%mlp__op:1) {T = f32}
}
"#;

/// The `mlp` case of the family's JSON.
fn mlp_case() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/ops/xla_call_module.json");
    let doc = read_json(&path);
    let cases = doc["cases"].as_array().expect("cases");
    cases.iter().find(|c| c["name"] == "mlp").expect("the mlp case").clone()
}

#[test]
fn a_raised_mlp_gives_tensorflows_numbers_on_both_backends() {
    let (mut module, errors) = parse_module(GRAPH.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let tree = mlp_module();
    let problems = raise_xla_call_modules(&mut module, &|_| Ok(tree.clone()));
    assert!(problems.is_empty(), "{problems:?}");
    // Raised once: a second run adds no function.
    let functions = module.graphs.len();
    assert!(raise_xla_call_modules(&mut module, &|_| Err("not asked again".into())).is_empty());
    assert_eq!(module.graphs.len(), functions);
    let case = mlp_case();
    let feeds: Vec<(String, Tensor)> =
        case["feeds"].as_object().expect("feeds").iter().map(|(n, v)| (format!("{n}:0"), tensor_of(v))).collect();
    let fetches = vec!["mlp__out_0:0".to_string(), "mlp__out_1:0".to_string()];
    let (sim, pjrt) = run_on_both("xla_call_module mlp", &module, &fetches, &feeds);
    for (backend, got, want) in [("simulator", sim, "outputs"), ("PJRT", pjrt, "xla")] {
        let got: HashMap<String, Tensor> = got.into_iter().collect();
        for (name, value) in case[want].as_object().expect("expected values") {
            let label = format!("{backend}: {name}");
            assert_close(&label, &got[&format!("{name}:0")], &tensor_of(value), 1e-5);
        }
    }
}

/// The ops of the functions `graph` names (through function attributes),
/// `graph`'s own included, each function once.
fn ops_reached(module: &tpu_rewrite::ir::Module, graph: &str, seen: &mut Vec<String>) -> Vec<String> {
    if seen.iter().any(|s| s == graph) {
        return Vec::new();
    }
    seen.push(graph.to_string());
    let g = module.graphs.iter().find(|g| &*g.name == graph).unwrap_or_else(|| panic!("no function {graph}"));
    let mut ops = Vec::new();
    for id in g.node_ids() {
        let node = g.node(id);
        ops.push(node.op.to_string());
        for (_, value) in node.attrs.iter() {
            if let AttrValue::Func(f) = value {
                ops.extend(ops_reached(module, &f.name, seen));
            }
        }
    }
    ops
}

/// The family's modules as `jax.export` wrote them, raised by the reader
/// and the raise: the ops each case's function is made of.
fn raised_family_ops(case: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/ops/xla_call_module.pbtxt");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (mut module, errors) = import_graphdef(&bytes, GraphDefFormat::Text).expect("imports");
    assert!(errors.is_empty(), "{errors:?}");
    let problems = raise_xla_call_modules(&mut module, &read_module);
    assert!(problems.is_empty(), "{problems:?}");
    let name = format!("{case}__op");
    let mut nodes = module.graphs.iter().flat_map(|g| g.node_ids().map(move |id| g.node(id)));
    let node = nodes.find(|n| *n.name == *name).expect("the case's node");
    let Some(AttrValue::Func(f)) = node.attrs.get(XLA_CALL_MODULE_ATTR) else { panic!("{case} was not raised") };
    ops_reached(&module, &f.name, &mut Vec::new())
}

/// `jnp.sum`, `jnp.max`, `jnp.all`, ... are reduces whose body is one
/// elementwise op: they become TensorFlow's reductions, not reducer calls
/// per element (`XlaVariadicReduceV2`); the family test checks their
/// numbers. The arg-max's two-operand reduce stays variadic.
#[test]
fn plain_reductions_become_tensorflows_reductions() {
    let ops = raised_family_ops("plain_reductions");
    for want in ["Sum", "Prod", "Max", "Min", "All", "Any", "AddV2", "Maximum", "Minimum"] {
        assert!(ops.iter().any(|o| o == want), "no {want} in {ops:?}");
    }
    assert!(!ops.iter().any(|o| o == "XlaVariadicReduceV2"), "{ops:?}");
    let argmax = raised_family_ops("reduce_argmax");
    assert_eq!(argmax.iter().filter(|o| *o == "XlaVariadicReduceV2").count(), 1, "{argmax:?}");
}

/// Gathers and scatters with batching dimensions become plain `XlaGather`
/// and `XlaScatter`s whose indices carry an iota per batching dimension.
#[test]
fn batching_dimensions_become_iotas_of_the_indices() {
    let ops = raised_family_ops("batched_gather");
    for want in ["XlaGather", "XlaScatter", "Range", "ConcatV2"] {
        assert!(ops.iter().any(|o| o == want), "no {want} in {ops:?}");
    }
}
