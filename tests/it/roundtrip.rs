//! Property tests: the printer round-trips generated graphs, and the parser
//! survives arbitrary input without panicking.

use proptest::prelude::*;
use tpu_rewrite::emit::print_module;
use tpu_rewrite::ir;

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9_]{0,6}",
        "[a-z]{1,4}/[A-Za-z_]{1,6}(/[a-z0-9]{1,3})?",
        "[a-z]{1,3}[ !#$é\"\\\\]{1,3}[a-z]{0,2}",
    ]
}

fn float_lit() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<f32>().prop_map(|f| if f.is_nan() { "nan".to_string() } else { format!("{f:?}") }),
        Just("inf".to_string()),
        Just("-inf".to_string()),
    ]
}

fn string_lit() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<u8>(), 0..12).prop_map(|bytes| {
        let mut s = String::from("\"");
        for b in bytes {
            s.push_str(&format!("\\x{b:02x}"));
        }
        s.push('"');
        s
    })
}

fn scalar_value() -> impl Strategy<Value = String> {
    prop_oneof![
        string_lit(),
        any::<i64>().prop_map(|i| i.to_string()),
        float_lit(),
        any::<bool>().prop_map(|b| b.to_string()),
        prop::sample::select(vec!["f32", "f64", "i32", "i64", "bool", "string", "resource", "dtype(101)"])
            .prop_map(str::to_string),
        prop::collection::vec(prop_oneof![Just(-1i64), 0i64..100], 0..4).prop_map(|dims| {
            let dims: Vec<String> = dims.iter().map(|d| if *d < 0 { "?".to_string() } else { d.to_string() }).collect();
            format!("shape[{}]", dims.join(", "))
        }),
        Just("shape[*]".to_string()),
        prop::collection::vec(float_lit(), 0..5).prop_map(|v| format!("tensor(f32, [{}]) [{}]", v.len(), v.join(", "))),
        prop::collection::vec(any::<i32>(), 1..5).prop_map(|v| {
            let items: Vec<String> = v.iter().map(i32::to_string).collect();
            format!("tensor(i32, [{}]) [{}]", v.len(), items.join(", "))
        }),
        prop::collection::vec(any::<u8>(), 0..8).prop_map(|b| {
            let hex: String = b.iter().map(|x| format!("\\x{x:02x}")).collect();
            format!("tensor(f32, [{}]) bytes \"{hex}\"", b.len() / 4)
        }),
        (name(), any::<i32>()).prop_map(|(n, i)| format!("func \"{}\" {{n = {i}}}", n.replace(['"', '\\'], "_"))),
    ]
}

fn value() -> impl Strategy<Value = String> {
    scalar_value().prop_recursive(2, 8, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(|items| format!("[{}]", items.join(", ")))
    })
}

fn quote(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_./->".contains(c));
    if plain {
        format!("%{name}")
    } else {
        format!("%\"{}\"", name.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

#[derive(Debug, Clone)]
struct OpSpec {
    op: String,
    attrs: Vec<(String, String)>,
    inputs: Vec<(usize, u32, bool)>,
    device: Option<String>,
    region: u8,
}

fn op_spec() -> impl Strategy<Value = OpSpec> {
    (
        prop::sample::select(vec!["CustomOp", "Frob", "_Internal", "Zap"]).prop_map(str::to_string),
        prop::collection::vec(("[a-z_][a-z0-9_]{0,5}", value()), 0..4),
        prop::collection::vec((any::<prop::sample::Index>(), 0u32..3, any::<bool>()), 0..4),
        prop::option::of(prop::sample::select(vec![
            "/job:worker/replica:0/task:0/device:TPU:3",
            "TPU_REPLICATED_CORE:0",
        ]))
        .prop_map(|d| d.map(str::to_string)),
        0u8..3,
    )
        .prop_map(|(op, attrs, inputs, device, region)| OpSpec {
            op,
            attrs,
            inputs: inputs.into_iter().map(|(i, o, c)| (i.index(usize::MAX), o, c)).collect(),
            device,
            region,
        })
}

/// Renders a graph whose operands refer only to earlier ops (so it is acyclic).
fn render(names: &[String], ops: &[OpSpec], replicas: usize) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut unique = Vec::new();
    for n in names {
        if seen.insert(n.clone()) {
            unique.push(n.clone());
        }
    }
    let mut out = String::from("graph @g {\n");
    let mut open_region = 0u8;
    let mut defined: Vec<usize> = Vec::new();
    for (i, (name, spec)) in unique.iter().zip(ops).enumerate() {
        // Region 1 opens a replicate block over the ops that follow; 0 closes it.
        if spec.region == 1 && open_region == 0 && i > 0 {
            let operands: Vec<String> = (0..replicas).map(|_| quote(&unique[0])).collect();
            out.push_str(&format!(
                "replicate (num_replicas = {replicas}) (%region_in{i} = [{}]) {{\n",
                operands.join(", ")
            ));
            open_region = 1;
        } else if spec.region == 2 && open_region == 1 {
            out.push_str("}\n");
            open_region = 0;
            // Ops inside the closed region may not be used outside it.
            defined.clear();
        }
        let mut inputs = Vec::new();
        for &(idx, output, control) in &spec.inputs {
            if defined.is_empty() {
                break;
            }
            let src = &unique[defined[idx % defined.len()]];
            inputs.push(if control {
                format!("^{}", quote(src))
            } else if output == 0 {
                quote(src)
            } else {
                format!("{}:{output}", quote(src))
            });
        }
        let mut attrs: Vec<String> = Vec::new();
        let mut keys = std::collections::HashSet::new();
        for (k, v) in &spec.attrs {
            if keys.insert(k.clone()) {
                attrs.push(format!("{k} = {v}"));
            }
        }
        out.push_str(&format!("{} = {}({})", quote(name), spec.op, inputs.join(", ")));
        if let Some(d) = &spec.device {
            out.push_str(&format!(" on \"{d}\""));
        }
        if !attrs.is_empty() {
            out.push_str(&format!(" {{{}}}", attrs.join(", ")));
        }
        out.push('\n');
        if open_region == 0 {
            defined.push(i);
        }
    }
    if open_region == 1 {
        out.push_str("}\n");
    }
    out.push_str("}\n");
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn print_then_parse_is_identity(
        names in prop::collection::vec(name(), 1..24),
        ops in prop::collection::vec(op_spec(), 24),
        replicas in 1usize..4,
    ) {
        let text = render(&names, &ops, replicas);
        let (module, errors) = ir::parse_module(text.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e:?}\n{text}")))?;
        prop_assert!(errors.is_empty(), "{errors:?}\n{text}");
        let printed = print_module(&module);
        let (again, errors) = ir::parse_module(printed.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e:?}\n{printed}")))?;
        prop_assert!(errors.is_empty(), "{errors:?}\n{printed}");
        prop_assert_eq!(ir::eq::first_difference(&module.graphs[0], &again.graphs[0]), None, "{}", printed);
        prop_assert!(module == again);
        prop_assert_eq!(print_module(&again), printed);
    }

    /// Random bytes never panic the parser, builder or verifier.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = ir::parse_module(&bytes);
    }

    /// Token soup: plausible pieces in random order never panic, and whatever
    /// parses cleanly round-trips.
    #[test]
    fn token_soup_never_panics(pieces in prop::collection::vec(prop::sample::select(vec![
        "graph", "@g", "@\"g q\"", "{", "}", "(", ")", "[", "]", "%a", "%b", "%\"q\"", "=", ",", ":", "1", "-2", "1.5", "^",
        "replicate", "outside_compilation", "gradients", "return", "ys", "xs", "grad_ys", "on", "\"s\"",
        "Relu", "f32", "shape", "tensor", "bytes", "?", "*", "func", "placeholder", "dtype", "num_replicas",
        "true", "\n", " ", "//c\n", "\"\\x4", "\"\\q\"", "%", "@", "\u{0}", "\u{ff}",
    ]), 0..64)) {
        let text: String = pieces.concat();
        if let Ok((module, errors)) = ir::parse_module(text.as_bytes()) {
            if errors.is_empty() {
                let printed = print_module(&module);
                let (again, errors) = ir::parse_module(printed.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                prop_assert!(errors.is_empty());
                prop_assert!(module == again, "{}", printed);
            }
        }
    }
}

/// A graph name outside the plain characters (TF2 function names such as
/// `__inference_step 12` from a SavedModel) prints quoted and parses back.
#[test]
fn a_quoted_graph_name_round_trips() {
    let text = "graph @\"__inference_step 12\" {\n  %x = Placeholder() {dtype = f32, shape = shape[2]}\n}\n";
    let (module, errors) = ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(&*module.graphs[0].name, "__inference_step 12");
    let printed = print_module(&module);
    assert!(printed.starts_with("graph @\"__inference_step 12\" {"), "{printed}");
    let (again, errors) = ir::parse_module(printed.as_bytes()).expect("parses back");
    assert!(errors.is_empty(), "{errors:?}");
    assert!(module == again, "{printed}");
}
