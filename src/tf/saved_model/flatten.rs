//! A function of a GraphDef library as a graph of its own: what
//! `concrete_function.graph.as_graph_def()` gives, rebuilt from the
//! `FunctionDef` a SavedModel stores.
//!
//! Input argument `i` becomes a `Placeholder` (its dtype, and its shape
//! from `_output_shapes` when the SavedModel recorded one), named as
//! `renames` says or as the argument; body nodes keep their names, their
//! inputs rewritten from `node:output_arg:k` to `node:index`; each output
//! argument becomes an `Identity` of the tensor it returns, waiting (control
//! inputs) for the function's control outputs, so a run that fetches the
//! outputs also runs the updates. The functions of the library the body
//! uses travel along; the others (the saver's, other traces) are left out.

use std::collections::{BTreeSet, HashMap};

use super::super::functions::output_index;
use super::super::proto::{attr_value, AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, NodeDef, VersionDef};

/// The graph of `function`, with `library`; input argument `a` is named
/// `renames[a]` when given (made unique among the body's names). Returns
/// the graph and each input argument's node name; `Err` says what does
/// not convert.
pub fn function_as_graph(
    function: &FunctionDef,
    library: Option<FunctionDefLibrary>,
    versions: Option<VersionDef>,
    renames: &HashMap<String, String>,
) -> Result<(GraphDef, HashMap<String, String>), String> {
    let signature = function.signature.clone().unwrap_or_default();
    let ops: HashMap<&str, &str> = function.node_def.iter().map(|n| (n.name.as_str(), n.op.as_str())).collect();
    let mut taken: BTreeSet<String> = function.node_def.iter().map(|n| n.name.clone()).collect();
    let mut args: HashMap<String, String> = HashMap::new();
    let mut nodes =
        Vec::with_capacity(function.node_def.len() + signature.input_arg.len() + signature.output_arg.len());
    for (i, arg) in signature.input_arg.iter().enumerate() {
        let wanted = renames.get(&arg.name).unwrap_or(&arg.name);
        let name = unique(&mut taken, wanted);
        let mut attr = std::collections::BTreeMap::new();
        attr.insert("dtype".to_string(), AttrValue { value: Some(attr_value::Value::Type(arg.r#type)) });
        let shape =
            function.arg_attr.get(&(i as u32)).and_then(|a| a.attr.get("_output_shapes")).and_then(|v| {
                match &v.value {
                    Some(attr_value::Value::List(list)) => list.shape.first().cloned(),
                    _ => None,
                }
            });
        if let Some(shape) = shape {
            attr.insert("shape".to_string(), AttrValue { value: Some(attr_value::Value::Shape(shape)) });
        }
        nodes.push(NodeDef { name: name.clone(), op: "Placeholder".into(), attr, ..Default::default() });
        args.insert(arg.name.clone(), name);
    }
    let rewrite = |input: &str| -> Result<String, String> {
        if let Some(node) = input.strip_prefix('^') {
            return Ok(format!("^{}", args.get(node).map_or(node, String::as_str)));
        }
        let mut parts = input.split(':');
        let node = parts.next().unwrap_or_default();
        match (parts.next(), parts.next(), parts.next()) {
            (None, _, _) => Ok(args.get(node).cloned().unwrap_or_else(|| node.to_string())),
            (Some(out), Some(k), None) => {
                let op = ops.get(node).ok_or_else(|| format!("input `{input}` names no node of the body"))?;
                let k: u32 = k.parse().map_err(|_| format!("input `{input}` has no tensor index"))?;
                let index = output_index(op, out, k)?;
                Ok(if index == 0 { node.to_string() } else { format!("{node}:{index}") })
            }
            _ => Err(format!("input `{input}` is not `arg`, `node:output:k` or `^node`")),
        }
    };
    for def in &function.node_def {
        let mut def = def.clone();
        def.input = def.input.iter().map(|i| rewrite(i)).collect::<Result<_, _>>()?;
        nodes.push(def);
    }
    let waits: Vec<String> = function.control_ret.values().map(|n| format!("^{n}")).collect();
    for arg in &signature.output_arg {
        let returned = function.ret.get(&arg.name).ok_or_else(|| format!("output `{}` returns nothing", arg.name))?;
        let mut input = vec![rewrite(returned)?];
        input.extend(waits.iter().cloned());
        let mut attr = std::collections::BTreeMap::new();
        attr.insert("T".to_string(), AttrValue { value: Some(attr_value::Value::Type(arg.r#type)) });
        let name = unique(&mut taken, &arg.name);
        nodes.push(NodeDef { name, op: "Identity".into(), input, attr, ..Default::default() });
    }
    let library = library.map(|l| reachable(l, &nodes)).filter(|l| !l.function.is_empty());
    Ok((GraphDef { node: nodes, library, versions, ..Default::default() }, args))
}

/// The functions of `library` that `nodes` use, directly (as their op or
/// in a function attribute) or through other functions; a SavedModel's
/// library also holds every other traced function and the saver's.
fn reachable(library: FunctionDefLibrary, nodes: &[NodeDef]) -> FunctionDefLibrary {
    let by_name: HashMap<&str, &FunctionDef> =
        library.function.iter().filter_map(|f| Some((f.signature.as_ref()?.name.as_str(), f))).collect();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut stack: Vec<String> = nodes.iter().flat_map(referenced).collect();
    while let Some(name) = stack.pop() {
        let Some(f) = by_name.get(name.as_str()) else { continue };
        if used.insert(name) {
            stack.extend(f.node_def.iter().flat_map(referenced));
        }
    }
    FunctionDefLibrary {
        function: library
            .function
            .iter()
            .filter(|f| f.signature.as_ref().is_some_and(|s| used.contains(&s.name)))
            .cloned()
            .collect(),
        ..Default::default()
    }
}

/// The function names a node refers to: its op, and its function attributes.
fn referenced(node: &NodeDef) -> Vec<String> {
    let mut out = vec![node.op.clone()];
    for value in node.attr.values() {
        match &value.value {
            Some(attr_value::Value::Func(f)) => out.push(f.name.clone()),
            Some(attr_value::Value::List(list)) => out.extend(list.func.iter().map(|f| f.name.clone())),
            _ => {}
        }
    }
    out
}

/// `wanted`, or `wanted_1`, `wanted_2`, ... when taken; marks it taken.
fn unique(taken: &mut BTreeSet<String>, wanted: &str) -> String {
    let mut name = wanted.to_string();
    let mut n = 0;
    while taken.contains(&name) {
        n += 1;
        name = format!("{wanted}_{n}");
    }
    taken.insert(name.clone());
    name
}
