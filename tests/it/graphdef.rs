//! GraphDef import and export: round trips of every fixture in
//! `tests/fixtures/tf-graphs/`, of every attribute kind, of a synthetic
//! transformer, and diagnostics for broken input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use prost::Message;
use tpu_rewrite::ir::{self, Module};
use tpu_rewrite::syntax::Span;
use tpu_rewrite::tf::export::{export_errors, to_graphdef, to_pb, to_pbtxt};
use tpu_rewrite::tf::pbtxt::{parse_graphdef_text, TextGraphDef};
use tpu_rewrite::tf::pbtxt_print::print_graphdef;
use tpu_rewrite::tf::proto::{
    graph_debug_info, ArgDef, AttrValue, Dim, ExperimentalDebugInfo, FullTypeAttr, FullTypeDef, FunctionDef,
    FunctionDefLibrary, GradientDef, GraphDebugInfo, GraphDef, ListValue, NameAttrList, NodeDef, OpDef, TensorProto,
    TensorShapeProto, Value, VersionDef,
};
use tpu_rewrite::tf::synth::{transformer_graphdef, TransformerConfig};
use tpu_rewrite::tf::{decode_pb, format_for_path, graph_attr, import_graphdef, GraphDefFormat, ImportError};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs")
}

/// Every fixture stem that has both a `.pbtxt` and a `.pb`.
fn fixtures() -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut entries: Vec<_> =
        std::fs::read_dir(fixture_dir()).expect("fixture dir").flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.extension().and_then(|e| e.to_str()) != Some("pbtxt") {
            continue;
        }
        let pb = path.with_extension("pb");
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        let text = std::fs::read(&path).expect("read pbtxt");
        let binary = std::fs::read(&pb).expect("every .pbtxt fixture has its .pb");
        out.push((stem, text, binary));
    }
    assert!(out.len() >= 2, "fixtures are copied into tests/fixtures/tf-graphs");
    out
}

fn import(bytes: &[u8], format: GraphDefFormat) -> Module {
    let (module, errors) = import_graphdef(bytes, format).expect("imports");
    assert!(errors.is_empty(), "import problems: {errors:?}");
    module
}

fn main_graph(module: &Module) -> &ir::Graph {
    module.graph("main").expect("the imported graph is @main")
}

fn parse_text(bytes: &[u8]) -> TextGraphDef {
    parse_graphdef_text(bytes).expect("parses as text")
}

#[test]
fn pbtxt_round_trips_through_the_ir() {
    for (name, text, _) in fixtures() {
        let original = parse_text(&text);
        let module = import(&text, GraphDefFormat::Text);
        let again = parse_text(to_pbtxt(main_graph(&module)).expect("exports").as_bytes());
        assert_eq!(original.graph, again.graph, "{name}: pbtxt -> IR -> pbtxt");
        assert!(export_errors(main_graph(&module)).is_empty());
    }
}

#[test]
fn pb_round_trips_through_the_ir() {
    for (name, _, binary) in fixtures() {
        let original = decode_pb(&binary).expect("decodes");
        let module = import(&binary, GraphDefFormat::Binary);
        let again = decode_pb(&to_pb(main_graph(&module)).expect("exports")).expect("decodes");
        assert_eq!(original, again, "{name}: pb -> IR -> pb");
    }
}

#[test]
fn pbtxt_exports_as_the_matching_pb() {
    for (name, text, binary) in fixtures() {
        let module = import(&text, GraphDefFormat::Text);
        let exported = decode_pb(&to_pb(main_graph(&module)).expect("exports")).expect("decodes");
        assert_eq!(exported, decode_pb(&binary).expect("decodes"), "{name}: pbtxt -> IR -> pb vs .pb");
        // The text parser alone already agrees with the binary decoder.
        assert_eq!(parse_text(&text).graph, decode_pb(&binary).expect("decodes"), "{name}: parsers agree");
    }
}

#[test]
fn pbtxt_and_pb_import_to_equal_ir() {
    for (name, text, binary) in fixtures() {
        let a = import(&text, GraphDefFormat::Text);
        let b = import(&binary, GraphDefFormat::Binary);
        assert!(a == b, "{name}: {:?}", ir::eq::first_difference(main_graph(&a), main_graph(&b)));
    }
}

#[test]
fn imported_ir_round_trips_through_opg_text() {
    for (name, text, _) in fixtures() {
        let module = import(&text, GraphDefFormat::Text);
        let printed = tpu_rewrite::emit::print_module(&module);
        let (parsed, _) = ir::parse_module(printed.as_bytes()).expect("the printed module parses");
        assert!(parsed == module, "{name}: {:?}", ir::eq::first_difference(main_graph(&parsed), main_graph(&module)));
    }
}

#[test]
fn import_keeps_every_node_field() {
    let text = std::fs::read(fixture_dir().join("mlp_r4.pbtxt")).expect("fixture");
    let original = parse_text(&text).graph;
    let module = import(&text, GraphDefFormat::Text);
    let g = main_graph(&module);
    let order = g.nodes_in_order();
    assert_eq!(order.len(), original.node.len());
    for (id, def) in order.iter().zip(&original.node) {
        let node = g.node(*id);
        assert_eq!(&*node.name, def.name);
        assert_eq!(&*node.op, def.op);
        assert_eq!(node.device.as_deref().unwrap_or(""), def.device);
        assert_eq!(node.attrs.len(), def.attr.len(), "{}", def.name);
        let inputs: Vec<String> = g
            .inputs(*id)
            .iter()
            .map(|i| {
                let src = &g.node(i.src).name;
                match i.output {
                    None => format!("^{src}"),
                    Some(0) => src.to_string(),
                    Some(k) => format!("{src}:{k}"),
                }
            })
            .collect();
        assert_eq!(inputs, def.input, "{}", def.name);
        assert!(!node.span.is_detached(), "text nodes carry spans");
    }
    assert_eq!(g.attrs.get_int(graph_attr::PRODUCER), Some(2474));
    let metadata = g.find("TPUReplicateMetadata").expect("metadata node");
    assert_eq!(g.node(metadata).attrs.get_int("num_replicas"), Some(4));
    assert_eq!(g.node(metadata).attrs.get("padding_map"), Some(&ir::AttrValue::List(Vec::new())));
}

fn av(v: Value) -> AttrValue {
    AttrValue { value: Some(v) }
}

fn shape(dims: &[i64]) -> TensorShapeProto {
    TensorShapeProto { dim: dims.iter().map(|&size| Dim { size, name: String::new() }).collect(), unknown_rank: false }
}

fn tensor(dtype: i32, dims: &[i64], fill: impl FnOnce(&mut TensorProto)) -> AttrValue {
    let mut t = TensorProto { dtype, tensor_shape: Some(shape(dims)), ..TensorProto::default() };
    fill(&mut t);
    av(Value::Tensor(Box::new(t)))
}

/// A GraphDef that uses every attribute kind and every kept field.
fn every_kind_graphdef() -> GraphDef {
    let mut attr = BTreeMap::new();
    attr.insert("s".to_string(), av(Value::S(b"text".to_vec())));
    attr.insert("bytes".to_string(), av(Value::S(vec![0, 159, 255, b'\'', b'"', b'\\', b'\n'])));
    attr.insert("empty_s".to_string(), av(Value::S(Vec::new())));
    attr.insert("i".to_string(), av(Value::I(-7)));
    attr.insert("f".to_string(), av(Value::F(1e-5)));
    attr.insert("f_inf".to_string(), av(Value::F(f32::NEG_INFINITY)));
    attr.insert("b".to_string(), av(Value::B(false)));
    attr.insert("type".to_string(), av(Value::Type(9)));
    attr.insert("type_ref".to_string(), av(Value::Type(101)));
    attr.insert("shape".to_string(), av(Value::Shape(shape(&[-1, 3]))));
    attr.insert("scalar_shape".to_string(), av(Value::Shape(shape(&[]))));
    attr.insert("unknown_rank".to_string(), av(Value::Shape(TensorShapeProto { dim: Vec::new(), unknown_rank: true })));
    attr.insert("placeholder".to_string(), av(Value::Placeholder("T".to_string())));
    let mut func_attr = BTreeMap::new();
    func_attr.insert("T".to_string(), av(Value::Type(1)));
    func_attr.insert("n".to_string(), av(Value::I(3)));
    attr.insert(
        "func".to_string(),
        av(Value::Func(NameAttrList { name: "body".to_string(), attr: func_attr.clone() })),
    );
    attr.insert("empty_list".to_string(), av(Value::List(Box::default())));
    attr.insert(
        "list".to_string(),
        av(Value::List(Box::new(ListValue {
            s: vec![b"a".to_vec(), vec![200]],
            i: vec![1, -2],
            f: vec![0.5, 2.0],
            b: vec![true],
            r#type: vec![1, 3],
            shape: vec![shape(&[2]), TensorShapeProto { dim: Vec::new(), unknown_rank: true }],
            tensor: vec![TensorProto {
                dtype: 3,
                tensor_shape: Some(shape(&[2])),
                int_val: vec![4, 5],
                ..TensorProto::default()
            }],
            func: vec![NameAttrList { name: "g".to_string(), attr: func_attr }],
        }))),
    );
    attr.insert("t_content".to_string(), tensor(1, &[2], |t| t.tensor_content = vec![0, 0, 128, 63, 0, 0, 0, 64]));
    attr.insert("t_float".to_string(), tensor(1, &[3], |t| t.float_val = vec![1.5]));
    attr.insert("t_double".to_string(), tensor(2, &[2], |t| t.double_val = vec![0.1, -2.0]));
    attr.insert("t_half".to_string(), tensor(19, &[1], |t| t.half_val = vec![15360]));
    attr.insert("t_int".to_string(), tensor(3, &[], |t| t.int_val = vec![42]));
    attr.insert("t_int64".to_string(), tensor(9, &[2], |t| t.int64_val = vec![i64::MIN, i64::MAX]));
    attr.insert("t_uint32".to_string(), tensor(22, &[1], |t| t.uint32_val = vec![u32::MAX]));
    attr.insert("t_uint64".to_string(), tensor(23, &[1], |t| t.uint64_val = vec![u64::MAX]));
    attr.insert("t_bool".to_string(), tensor(10, &[2], |t| t.bool_val = vec![true, false]));
    attr.insert("t_string".to_string(), tensor(7, &[2], |t| t.string_val = vec![b"x".to_vec(), vec![0, 1]]));
    attr.insert("t_scomplex".to_string(), tensor(8, &[1], |t| t.scomplex_val = vec![1.0, -1.0]));
    attr.insert("t_dcomplex".to_string(), tensor(18, &[1], |t| t.dcomplex_val = vec![2.0, 0.5]));
    attr.insert("t_zeros".to_string(), tensor(1, &[4], |_| {}));
    let rich = NodeDef {
        name: "rich".to_string(),
        op: "Custom".to_string(),
        input: vec!["a".to_string(), "a:1".to_string(), "^b".to_string()],
        device: "/device:CPU:0".to_string(),
        attr,
        experimental_debug_info: Some(ExperimentalDebugInfo {
            original_node_names: vec!["orig".to_string()],
            original_func_names: vec!["fn".to_string()],
        }),
        experimental_type: Some(FullTypeDef {
            type_id: 3,
            args: vec![FullTypeDef { type_id: 1000, args: Vec::new(), attr: Some(FullTypeAttr::S("T".to_string())) }],
            attr: Some(FullTypeAttr::I(4)),
        }),
    };
    let node = |name: &str| NodeDef { name: name.to_string(), op: "Placeholder".to_string(), ..NodeDef::default() };
    GraphDef {
        // "rich" reads "b", defined after it: GraphDefs are unordered.
        node: vec![node("a"), rich, node("b")],
        library: None,
        version: 17,
        versions: Some(VersionDef { producer: 1, min_consumer: 2, bad_consumers: vec![3, 4] }),
        debug_info: None,
    }
}

/// A library with a While loop's condition and body, a gradient and every
/// map kind of `FunctionDef`, and debug info with every map kind.
fn while_library() -> (FunctionDefLibrary, GraphDebugInfo) {
    let arg = |name: &str| ArgDef { name: name.to_string(), r#type: 3, ..ArgDef::default() };
    let node = |name: &str, op: &str, input: &[&str]| NodeDef {
        name: name.to_string(),
        op: op.to_string(),
        input: input.iter().map(|s| s.to_string()).collect(),
        attr: BTreeMap::from([("T".to_string(), AttrValue { value: Some(Value::Type(3)) })]),
        ..NodeDef::default()
    };
    let cond = FunctionDef {
        signature: Some(OpDef {
            name: "while_cond".to_string(),
            input_arg: vec![arg("i")],
            output_arg: vec![ArgDef { name: "ok".to_string(), r#type: 10, ..ArgDef::default() }],
            ..OpDef::default()
        }),
        node_def: vec![node("limit", "Const", &[]), node("less", "Less", &["i", "limit:output:0"])],
        ret: BTreeMap::from([("ok".to_string(), "less:z:0".to_string())]),
        ..FunctionDef::default()
    };
    let body = FunctionDef {
        signature: Some(OpDef {
            name: "while_body".to_string(),
            input_arg: vec![arg("i")],
            output_arg: vec![arg("next")],
            control_output: vec!["step".to_string()],
            is_stateful: true,
            ..OpDef::default()
        }),
        node_def: vec![node("one", "Const", &[]), node("add", "AddV2", &["i", "one:output:0", "^one"])],
        ret: BTreeMap::from([("next".to_string(), "add:z:0".to_string())]),
        attr: BTreeMap::from([("_noinline".to_string(), AttrValue { value: Some(Value::B(true)) })]),
        control_ret: BTreeMap::from([("step".to_string(), "add".to_string())]),
        arg_attr: BTreeMap::from([(
            0,
            tpu_rewrite::tf::proto::function_def::ArgAttrs {
                attr: BTreeMap::from([("_user".to_string(), AttrValue { value: Some(Value::S(b"x\n".to_vec())) })]),
            },
        )]),
        resource_arg_unique_id: BTreeMap::from([(0, 7)]),
    };
    let library = FunctionDefLibrary {
        function: vec![cond, body],
        gradient: vec![GradientDef { function_name: "while_body".to_string(), gradient_func: "grad".to_string() }],
        registered_gradients: Vec::new(),
    };
    let frame = graph_debug_info::FileLineCol {
        file_index: Some(0),
        line: Some(12),
        col: Some(0),
        func: Some("train_step".to_string()),
        code: None,
    };
    let trace = graph_debug_info::StackTrace { file_line_cols: vec![frame.clone()], frame_id: vec![1] };
    let debug_info = GraphDebugInfo {
        files: vec!["model.py".to_string()],
        traces: BTreeMap::from([("rich".to_string(), trace.clone())]),
        frames_by_id: BTreeMap::from([(1, frame)]),
        name_to_trace_id: BTreeMap::from([("rich".to_string(), u64::MAX)]),
        traces_by_id: BTreeMap::from([(u64::MAX, trace)]),
    };
    (library, debug_info)
}

/// [`every_kind_graphdef`] with a `While` over [`while_library`].
fn graphdef_with_library() -> GraphDef {
    let mut graph_def = every_kind_graphdef();
    let func = |name: &str| AttrValue {
        value: Some(Value::Func(NameAttrList { name: name.to_string(), ..Default::default() })),
    };
    graph_def.node.push(NodeDef {
        name: "loop".to_string(),
        op: "While".to_string(),
        input: vec!["a".to_string()],
        attr: BTreeMap::from([("cond".to_string(), func("while_cond")), ("body".to_string(), func("while_body"))]),
        ..NodeDef::default()
    });
    let (library, debug_info) = while_library();
    graph_def.library = Some(library);
    graph_def.debug_info = Some(debug_info);
    graph_def
}

#[test]
fn every_attr_kind_round_trips_as_pb() {
    let original = graphdef_with_library();
    let bytes = original.encode_to_vec();
    let (module, errors) = import_graphdef(&bytes, GraphDefFormat::Binary).expect("imports");
    assert!(errors.is_empty(), "{errors:?}");
    let g = main_graph(&module);
    assert_eq!(to_graphdef(g).expect("exports"), original);
    assert_eq!(to_pb(g).expect("exports"), bytes, "pb -> IR -> pb is byte-identical");
    // The text export holds the library too.
    assert_eq!(parse_text(to_pbtxt(g).expect("exports").as_bytes()).graph, original);
}

#[test]
fn every_attr_kind_round_trips_as_pbtxt() {
    let original = graphdef_with_library();
    let text = print_graphdef(&original);
    let parsed = parse_text(text.as_bytes());
    assert_eq!(parsed.graph, original);
    let module = import(text.as_bytes(), GraphDefFormat::Text);
    let g = main_graph(&module);
    assert_eq!(tpu_rewrite::tf::library(g).expect("decodes"), original.library);
    assert_eq!(to_pbtxt(g).expect("exports"), text, "pbtxt -> IR -> pbtxt is identical");
    assert_eq!(decode_pb(&to_pb(g).expect("exports")).expect("decodes"), original);
}

#[test]
fn library_round_trips_through_both_formats() {
    let original = graphdef_with_library();
    // pb -> pbtxt -> pb, each step through the IR, is byte-identical.
    let pb = original.encode_to_vec();
    let as_text = to_pbtxt(main_graph(&import(&pb, GraphDefFormat::Binary))).expect("exports");
    assert!(as_text.contains("name: \"while_body\""), "the body is printed:\n{as_text}");
    let back = to_pb(main_graph(&import(as_text.as_bytes(), GraphDefFormat::Text))).expect("exports");
    assert_eq!(back, pb, "pb -> pbtxt -> pb");
    // pbtxt -> pb -> pbtxt is identical after canonical formatting: a
    // hand-written layout (one line, `<>`, `:` before `{`, lists) prints as
    // the canonical text.
    let loose = "node { name: 'a' op: 'Placeholder' } library < function: { signature { name: 'while_body' \
                 input_arg { name: 'i' type: DT_INT32 } } ret: [{ key: 'next' value: 'i' }] \
                 arg_attr { key: 3 value { attr { key: 'k' value { i: 1 } } } } } >";
    let canonical = to_pbtxt(main_graph(&import(loose.as_bytes(), GraphDefFormat::Text))).expect("exports");
    let pb = to_pb(main_graph(&import(canonical.as_bytes(), GraphDefFormat::Text))).expect("exports");
    let again = to_pbtxt(main_graph(&import(&pb, GraphDefFormat::Binary))).expect("exports");
    assert_eq!(again, canonical, "pbtxt -> pb -> pbtxt");
    assert!(canonical.contains("  function {\n    signature {\n      name: \"while_body\"\n"), "{canonical}");
}

/// The function graphs of an imported module, as the CLI exports them.
fn function_graphs(module: &Module) -> Vec<&ir::Graph> {
    module.graphs.iter().filter(|g| ir::functions::is_function(g)).collect()
}

#[test]
fn an_edited_library_function_is_written_back_and_the_others_keep_their_bytes() {
    let original = graphdef_with_library();
    let mut module = import(&original.encode_to_vec(), GraphDefFormat::Binary);
    // Unchanged, every FunctionDef keeps its imported bytes.
    let unchanged =
        tpu_rewrite::tf::to_graphdef_with_functions(main_graph(&module), &function_graphs(&module)).expect("exports");
    assert_eq!(unchanged, original);
    // Edit the loop body: its constant gains an attribute.
    let body = module.graphs.iter_mut().find(|g| &*g.name == "while_body").expect("the body is a graph");
    let one = body.find("one").expect("the body holds `one`");
    body.node_mut(one).attrs.insert("_edited", ir::AttrValue::Bool(true));
    let edited =
        tpu_rewrite::tf::to_graphdef_with_functions(main_graph(&module), &function_graphs(&module)).expect("exports");
    let library = edited.library.expect("a library");
    let names: Vec<&str> = library.function.iter().map(|f| f.signature.as_ref().unwrap().name.as_str()).collect();
    assert_eq!(names, ["while_cond", "while_body"], "the body keeps its place and is not added twice");
    let original_library = original.library.expect("a library");
    assert_eq!(library.function[0], original_library.function[0], "the condition keeps its bytes");
    let node = library.function[1].node_def.iter().find(|n| n.name == "one").expect("`one` is exported");
    assert_eq!(node.attr.get("_edited"), Some(&av(Value::B(true))), "the edit is written back");
    assert_eq!(library.gradient, original_library.gradient, "the gradient map is kept");
}

#[test]
fn what_a_graphdef_cannot_hold_is_an_error() {
    let src = b"graph @main {\n  %a = Placeholder() {dtype = f32, nested = [[1, 2], [3]]}\n}\n";
    let (module, errors) = tpu_rewrite::ir::parse_module(src).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let errors = export_errors(main_graph(&module));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().all(|e| matches!(e, ImportError::NotRepresentable { node, .. } if node == "a")));
    assert!(to_pb(main_graph(&module)).is_err());
    assert!(to_pbtxt(main_graph(&module)).is_err());

    let src = b"graph @main {\n  %x = Placeholder() {dtype = f32}\n  replicate (num_replicas = 2) (%i = [%x, %x]) {\n    %y = Identity(%i) {T = f32}\n  }\n}\n";
    let (module, errors) = tpu_rewrite::ir::parse_module(src).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let errors = export_errors(main_graph(&module));
    assert!(errors.iter().any(|e| matches!(e, ImportError::NotFlat { .. })), "{errors:?}");
}

#[test]
fn attr_values_map_onto_ir_kinds() {
    let bytes = every_kind_graphdef().encode_to_vec();
    let module = import(&bytes, GraphDefFormat::Binary);
    let g = main_graph(&module);
    let rich = g.node(g.find("rich").expect("node"));
    use ir::AttrValue as A;
    assert_eq!(rich.attrs.get("s"), Some(&A::Str("text".into())));
    assert!(matches!(rich.attrs.get("bytes"), Some(A::Bytes(_))));
    assert_eq!(rich.attrs.get("type"), Some(&A::Type(ir::DType::I64)));
    assert_eq!(rich.attrs.get("shape"), Some(&A::Shape(ir::Shape::known(vec![-1, 3]))));
    assert_eq!(rich.attrs.get("unknown_rank"), Some(&A::Shape(ir::Shape::unknown())));
    let list = rich.attrs.get("list").and_then(A::as_list).expect("list");
    let kinds: Vec<_> = list.iter().map(A::kind).collect();
    use ir::AttrKind as K;
    assert_eq!(
        kinds,
        [
            K::Str,
            K::Str,
            K::Int,
            K::Int,
            K::Float,
            K::Float,
            K::Bool,
            K::Type,
            K::Type,
            K::Shape,
            K::Shape,
            K::Tensor,
            K::Func
        ]
    );
    let t = rich.attrs.get("t_content").and_then(A::as_tensor).expect("tensor");
    assert_eq!(t.to_f64_vec(), Some(vec![1.0, 2.0]));
    let t = rich.attrs.get("t_float").and_then(A::as_tensor).expect("tensor");
    assert_eq!(t.data, ir::TensorData::Float(vec![1.5]));
    assert_eq!(t.to_f64_vec(), Some(vec![1.5, 1.5, 1.5]));
    let inputs = g.inputs(g.find("rich").expect("node"));
    assert_eq!(inputs.iter().map(|i| i.output).collect::<Vec<_>>(), [Some(0), Some(1), None]);
}

#[test]
fn broken_inputs_are_reported_with_spans() {
    let text = b"node { name: \"a\" op: \"X\" }\nnode { name: \"b\" op: \"Y\" input: \"^a\" input: \"a\" input: \"nope:1\" input: \"a:x\" }\nnode { name: \"a\" op: \"Z\" }\n";
    let (module, errors) = import_graphdef(text, GraphDefFormat::Text).expect("parses");
    let src = std::str::from_utf8(text).expect("utf8");
    let at = |needle: &str| {
        let start = src.find(needle).expect("needle");
        Span::new(start, start + needle.len())
    };
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert!(errors
        .contains(&ImportError::DuplicateNode { name: "a".to_string(), span: at("node { name: \"a\" op: \"Z\" }") }));
    let data_after_control = at("\"a\" input: \"nope");
    assert!(errors.contains(&ImportError::DataAfterControl {
        node: "b".to_string(),
        input: "a".to_string(),
        span: Span::new(data_after_control.start as usize, data_after_control.start as usize + 3),
    }));
    assert!(errors.contains(&ImportError::UnknownInput {
        node: "b".to_string(),
        input: "nope:1".to_string(),
        name: "nope".to_string(),
        span: at("\"nope:1\""),
    }));
    assert!(errors.contains(&ImportError::MalformedInput {
        node: "b".to_string(),
        input: "a:x".to_string(),
        span: at("\"a:x\""),
    }));
    assert_eq!(module.node_count(), 2);
}

#[test]
fn syntax_errors_stop_the_import() {
    for (text, expected) in [
        (&b"node { name: \"a\" "[..], "expected a field name or `}`"),
        (b"node { name: 3 }", "expected a string"),
        (b"node { attr { key: \"k\" value { type: DT_NOPE } } }", "unknown DataType value `DT_NOPE`"),
        (b"node { attr { key: \"k\" value { i: 99999999999999999999 } } }", "invalid i64 value"),
        (b"node { name: \"\\xff\" }", "field `name` must be UTF-8 text"),
        (b"nodes {}", "`GraphDef` has no field `nodes`"),
        (b"node { $ }", "invalid character"),
    ] {
        let err = import_graphdef(text, GraphDefFormat::Text).expect_err("fails");
        assert!(err.to_string().starts_with(expected), "{err} vs {expected}");
    }
    let err = import_graphdef(b"\xff\xff\xff", GraphDefFormat::Binary).expect_err("fails");
    assert!(matches!(err, ImportError::Decode { .. }));
}

#[test]
fn formats_follow_the_extension() {
    assert_eq!(format_for_path("g.pbtxt"), Some(GraphDefFormat::Text));
    assert_eq!(format_for_path("dir/g.pb"), Some(GraphDefFormat::Binary));
    assert_eq!(format_for_path("g.opg"), None);
    assert_eq!(format_for_path("pb"), None);
}

#[test]
fn synthetic_transformer_round_trips() {
    let config = TransformerConfig { replicas: 4, ..TransformerConfig::default() };
    let graph_def = transformer_graphdef(3, &config);
    let bytes = graph_def.encode_to_vec();
    let module = import(&bytes, GraphDefFormat::Binary);
    let g = main_graph(&module);
    assert_eq!(g.node_count(), graph_def.node.len());
    assert_eq!(to_graphdef(g).expect("exports"), graph_def);
    let text = print_graphdef(&graph_def);
    let from_text = import(text.as_bytes(), GraphDefFormat::Text);
    assert!(from_text == module);
    let tagged = g.node_ids().filter(|&id| g.node(id).attrs.get_str("_tpu_replicate") == Some("cluster")).count();
    assert!(tagged > graph_def.node.len() / 2, "most ops are in the cluster");
}

mod no_panics {
    use proptest::prelude::*;
    use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = import_graphdef(&bytes, GraphDefFormat::Binary);
            let _ = import_graphdef(&bytes, GraphDefFormat::Text);
        }

        #[test]
        fn mangled_text_never_panics(cut in 0usize..2000, junk in "[{}:\"\\\\<>\\[\\],a-z0-9 .-]{0,12}") {
            let text = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tf-graphs/mlp_r4.pbtxt"))
                .expect("fixture");
            let cut = cut.min(text.len());
            let mut mangled = text[..cut].to_vec();
            mangled.extend_from_slice(junk.as_bytes());
            mangled.extend_from_slice(&text[cut..]);
            let _ = import_graphdef(&mangled, GraphDefFormat::Text);
        }
    }
}

#[test]
fn every_attr_kind_round_trips_through_opg_text() {
    // `.opg` integers are i64 and its complex tensors are raw bytes only.
    let mut graph_def = every_kind_graphdef();
    let rich = &mut graph_def.node[1].attr;
    rich.remove("t_scomplex");
    rich.remove("t_dcomplex");
    rich.insert("t_uint64".to_string(), tensor(23, &[1], |t| t.uint64_val = vec![1 << 40]));
    let module = import(&graph_def.encode_to_vec(), GraphDefFormat::Binary);
    let printed = tpu_rewrite::emit::print_module(&module);
    let (parsed, _) = ir::parse_module(printed.as_bytes()).expect("the printed module parses");
    assert!(parsed == module, "{:?}", ir::eq::first_difference(main_graph(&parsed), main_graph(&module)));
}
