//! JSON output (serde). The schema is documented in README.md.
//!
//! ```text
//! { "graphs": [ { "name", "attrs": {key: Value}, "regions": [Region], "nodes": [Node] } ] }
//! Node   = { "name", "kind": "op" | "region_input" | "gradients", "op", "inputs": ["a", "a:1", "^c"],
//!            "device"?: string, "attrs": {key: Value}, "region"?: int }
//! Region = { "id", "kind": "replicate" | "outside_compilation", "parent"?: int, "attrs": {...},
//!            "inputs"?: [name], "outputs"?: ["a", "^c"] }
//! Value  = {"s": string} | {"bytes": [int]} | {"i": int} | {"f": number|"nan"|"inf"|"-inf"} | {"b": bool}
//!        | {"type": "f32"} | {"shape": [int] | null} | {"tensor": {"dtype", "shape", <data>}}
//!        | {"list": [Value]} | {"func": {"name", "attrs"}} | {"placeholder": string}
//! ```
//! Nodes appear in text order; `-1` in a shape is an unknown dim.

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::ir::graph::{Graph, Module, NodeKind, RegionKind};
use crate::ir::types::{AttrValue, TensorData};
use crate::ir::AttrMap;

fn float(f: f64) -> Value {
    if f.is_nan() {
        json!("nan")
    } else if f.is_infinite() {
        json!(if f > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(f)
    }
}

/// An attribute value as JSON.
pub fn value_to_json(v: &AttrValue) -> Value {
    match v {
        AttrValue::Str(s) => json!({ "s": s }),
        AttrValue::Bytes(b) => json!({ "bytes": b }),
        AttrValue::Int(i) => json!({ "i": i }),
        AttrValue::Float(f) => json!({ "f": float(*f as f64) }),
        AttrValue::Bool(b) => json!({ "b": b }),
        AttrValue::Type(t) => json!({ "type": t.to_string() }),
        AttrValue::Shape(s) => json!({ "shape": s.dims }),
        AttrValue::Tensor(t) => {
            let data = match &t.data {
                TensorData::Content(b) => json!({ "content": b }),
                TensorData::Float(v) => json!({ "float_val": v.iter().map(|x| float(*x as f64)).collect::<Vec<_>>() }),
                TensorData::Double(v) => json!({ "double_val": v.iter().map(|x| float(*x)).collect::<Vec<_>>() }),
                TensorData::Half(v) => json!({ "half_val": v }),
                TensorData::Int(v) => json!({ "int_val": v }),
                TensorData::Int64(v) => json!({ "int64_val": v }),
                TensorData::Uint32(v) => json!({ "uint32_val": v }),
                TensorData::Uint64(v) => json!({ "uint64_val": v }),
                TensorData::Bool(v) => json!({ "bool_val": v }),
                TensorData::Str(v) => {
                    json!({ "string_val": v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect::<Vec<_>>() })
                }
            };
            let mut obj = Map::new();
            obj.insert("dtype".into(), json!(t.dtype.to_string()));
            obj.insert("shape".into(), json!(t.shape));
            if let Value::Object(d) = data {
                obj.extend(d);
            }
            json!({ "tensor": obj })
        }
        AttrValue::List(items) => json!({ "list": items.iter().map(value_to_json).collect::<Vec<_>>() }),
        AttrValue::Func(f) => json!({ "func": { "name": f.name, "attrs": attrs_to_json(&f.attrs) } }),
        AttrValue::Placeholder(p) => json!({ "placeholder": p }),
    }
}

fn attrs_to_json(attrs: &AttrMap) -> Value {
    Value::Object(attrs.iter().map(|(k, v)| (k.to_string(), value_to_json(v))).collect())
}

#[derive(Serialize)]
struct JsonModule {
    graphs: Vec<Value>,
}

fn graph_to_json(g: &Graph) -> Value {
    let regions: Vec<Value> = g
        .regions
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut obj = Map::new();
            obj.insert("id".into(), json!(i));
            match &r.kind {
                RegionKind::Replicate { inputs, outputs } => {
                    obj.insert("kind".into(), json!("replicate"));
                    obj.insert(
                        "inputs".into(),
                        json!(inputs.iter().map(|n| g.node(*n).name.to_string()).collect::<Vec<_>>()),
                    );
                    obj.insert("outputs".into(), json!(outputs.iter().map(|v| g.value_name(v)).collect::<Vec<_>>()));
                }
                RegionKind::OutsideCompilation => {
                    obj.insert("kind".into(), json!("outside_compilation"));
                }
            }
            if let Some(p) = r.parent {
                obj.insert("parent".into(), json!(p.0));
            }
            obj.insert("attrs".into(), attrs_to_json(&r.attrs));
            Value::Object(obj)
        })
        .collect();
    let nodes: Vec<Value> = g
        .nodes_in_order()
        .into_iter()
        .map(|id| {
            let n = g.node(id);
            let mut obj = Map::new();
            obj.insert("name".into(), json!(&*n.name));
            let kind = match n.kind {
                NodeKind::Op => "op",
                NodeKind::RegionInput { .. } => "region_input",
                NodeKind::Gradients { .. } => "gradients",
            };
            obj.insert("kind".into(), json!(kind));
            obj.insert("op".into(), json!(&*n.op));
            let inputs: Vec<String> = g
                .inputs(id)
                .iter()
                .map(|i| g.value_name(&crate::ir::ValueRef { node: i.src, output: i.output, span: i.span }))
                .collect();
            obj.insert("inputs".into(), json!(inputs));
            if let Some(d) = &n.device {
                obj.insert("device".into(), json!(&**d));
            }
            obj.insert("attrs".into(), attrs_to_json(&n.attrs));
            if let Some(r) = n.region {
                obj.insert("region".into(), json!(r.0));
            }
            if let NodeKind::Gradients { num_ys, num_xs, has_grad_ys } = n.kind {
                obj.insert("gradients".into(), json!({"num_ys": num_ys, "num_xs": num_xs, "has_grad_ys": has_grad_ys}));
            }
            Value::Object(obj)
        })
        .collect();
    json!({ "name": g.name, "attrs": attrs_to_json(&g.attrs), "regions": regions, "nodes": nodes })
}

/// The module as a JSON value.
pub fn to_json(module: &Module) -> Value {
    serde_json::to_value(JsonModule { graphs: module.graphs.iter().map(graph_to_json).collect() })
        .unwrap_or(Value::Null)
}

/// The module as pretty-printed JSON text.
pub fn to_json_string(module: &Module) -> String {
    let mut s = serde_json::to_string_pretty(&to_json(module)).unwrap_or_default();
    s.push('\n');
    s
}
