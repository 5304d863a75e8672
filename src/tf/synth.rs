//! Synthetic transformer-like GraphDefs in the shape `tpu.replicate` gives.
//!
//! [`transformer_graphdef`] follows the pattern of the TensorFlow-made
//! fixtures: per-replica `Placeholder`s fanned in by `TPUReplicatedInput`, a
//! `cluster/pivot` and `TPUReplicateMetadata`, input identities, a body whose
//! every op carries `_tpu_replicate = "cluster"` (parameters as `Const`s with
//! a control input from the metadata), a loss, gradient-style backward ops
//! under `gradients/`, a `CrossReplicaSum` SGD step for every parameter, and
//! each updated parameter fanned out through an output identity,
//! `TPUReplicatedOutput` and per-replica `output_<i>_shard_<r>` identities.
//!
//! Each layer is attention (Q/K/V projections, `Einsum` scores, `Softmax`,
//! `Einsum` context, output projection, residual), a layer norm (`Mean`,
//! `SquaredDifference`, `Rsqrt`) and a ReLU feed-forward block. The backward
//! ops mirror the forward ones (`MatMul` with transposes, `Einsum`,
//! `ReluGrad`, `RsqrtGrad`, softmax gradient, `AddN`); they are shaped
//! correctly but only approximate the true gradient of the layer norm.
//! The graph is deterministic; parameters are splat constants.

use std::collections::BTreeMap;

use super::proto::{AttrValue, Dim, GraphDef, NodeDef, TensorProto, TensorShapeProto, Value, VersionDef};

/// Sizes of the synthetic transformer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransformerConfig {
    /// Number of replicas (`num_replicas`).
    pub replicas: usize,
    /// Batch size per replica.
    pub batch: i64,
    /// Sequence length.
    pub seq: i64,
    /// Model width.
    pub d_model: i64,
    /// Feed-forward width.
    pub d_ff: i64,
}

impl Default for TransformerConfig {
    fn default() -> Self {
        TransformerConfig { replicas: 8, batch: 2, seq: 8, d_model: 16, d_ff: 32 }
    }
}

const DT_FLOAT: i32 = 1;
const DT_INT32: i32 = 3;
const CLUSTER: &str = "cluster";
const PARAMS: [&str; 6] = ["wq", "wk", "wv", "wo", "w1", "w2"];

/// The number of layers that makes a graph of about `nodes` nodes.
pub fn layers_for_nodes(nodes: usize, config: &TransformerConfig) -> usize {
    let one = transformer_graphdef(1, config).node.len();
    let two = transformer_graphdef(2, config).node.len();
    let per_layer = two.saturating_sub(one).max(1);
    (nodes.saturating_sub(one) / per_layer + 1).max(1)
}

/// A replicated training step of a `layers`-layer transformer.
pub fn transformer_graphdef(layers: usize, config: &TransformerConfig) -> GraphDef {
    let mut b = Builder { nodes: Vec::new(), cfg: config.clone() };
    b.build(layers);
    GraphDef {
        node: b.nodes,
        versions: Some(VersionDef { producer: 2474, ..VersionDef::default() }),
        ..GraphDef::default()
    }
}

fn value(v: Value) -> AttrValue {
    AttrValue { value: Some(v) }
}

fn s(text: &str) -> AttrValue {
    value(Value::S(text.as_bytes().to_vec()))
}

fn i(v: i64) -> AttrValue {
    value(Value::I(v))
}

fn b(v: bool) -> AttrValue {
    value(Value::B(v))
}

fn ty(t: i32) -> AttrValue {
    value(Value::Type(t))
}

fn shape_proto(dims: &[i64]) -> TensorShapeProto {
    TensorShapeProto { dim: dims.iter().map(|&size| Dim { size, name: String::new() }).collect(), unknown_rank: false }
}

fn empty_list() -> AttrValue {
    value(Value::List(Box::default()))
}

/// Where an op stands relative to the replicated cluster.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Cluster,
    Host,
}

struct Builder {
    nodes: Vec<NodeDef>,
    cfg: TransformerConfig,
}

impl Builder {
    fn add(&mut self, name: &str, op: &str, inputs: &[&str], attrs: Vec<(&str, AttrValue)>, place: Place) -> String {
        let mut attr: BTreeMap<String, AttrValue> = attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        if place == Place::Cluster {
            attr.insert("_tpu_replicate".to_string(), s(CLUSTER));
        }
        self.nodes.push(NodeDef {
            name: name.to_string(),
            op: op.to_string(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            attr,
            ..NodeDef::default()
        });
        name.to_string()
    }

    /// A float op `name = op(inputs)` in the cluster with `T = float`.
    fn f(&mut self, name: &str, op: &str, inputs: &[&str]) -> String {
        self.add(name, op, inputs, vec![("T", ty(DT_FLOAT))], Place::Cluster)
    }

    fn matmul(&mut self, name: &str, a: &str, b_: &str, transpose_a: bool, transpose_b: bool) -> String {
        let attrs = vec![
            ("T", ty(DT_FLOAT)),
            ("transpose_a", b(transpose_a)),
            ("transpose_b", b(transpose_b)),
            ("grad_a", b(false)),
            ("grad_b", b(false)),
        ];
        self.add(name, "MatMul", &[a, b_], attrs, Place::Cluster)
    }

    fn einsum(&mut self, name: &str, a: &str, b_: &str, equation: &str) -> String {
        let attrs = vec![("T", ty(DT_FLOAT)), ("N", i(2)), ("equation", s(equation))];
        self.add(name, "Einsum", &[a, b_], attrs, Place::Cluster)
    }

    fn tensor_const(&mut self, name: &str, tensor: TensorProto, dtype: i32) -> String {
        let attrs = vec![("value", value(Value::Tensor(Box::new(tensor)))), ("dtype", ty(dtype))];
        self.add(name, "Const", &["^TPUReplicateMetadata"], attrs, Place::Cluster)
    }

    fn f32_const(&mut self, name: &str, dims: &[i64], v: f32) -> String {
        let tensor = TensorProto {
            dtype: DT_FLOAT,
            tensor_shape: Some(shape_proto(dims)),
            float_val: vec![v],
            ..TensorProto::default()
        };
        self.tensor_const(name, tensor, DT_FLOAT)
    }

    fn i32_const(&mut self, name: &str, values: &[i32]) -> String {
        let dims: &[i64] = if values.len() == 1 { &[] } else { &[values.len() as i64] };
        let mut tensor =
            TensorProto { dtype: DT_INT32, tensor_shape: Some(shape_proto(dims)), ..TensorProto::default() };
        if values.len() == 1 {
            tensor.int_val = values.to_vec();
        } else {
            tensor.tensor_content = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        }
        self.tensor_const(name, tensor, DT_INT32)
    }

    fn reshape(&mut self, name: &str, x: &str, dims: &[i32]) -> String {
        let shape = self.i32_const(&format!("{name}/shape"), dims);
        self.add(name, "Reshape", &[x, &shape], vec![("T", ty(DT_FLOAT)), ("Tshape", ty(DT_INT32))], Place::Cluster)
    }

    fn reduce(&mut self, name: &str, op: &str, x: &str, axes: &[i32], keep_dims: bool) -> String {
        let axes = self.i32_const(&format!("{name}/reduction_indices"), axes);
        let attrs = vec![("T", ty(DT_FLOAT)), ("Tidx", ty(DT_INT32)), ("keep_dims", b(keep_dims))];
        self.add(name, op, &[x, &axes], attrs, Place::Cluster)
    }

    fn build(&mut self, layers: usize) {
        let c = self.cfg.clone();
        let replicas = c.replicas;
        let tokens = c.batch * c.seq;
        let dims = [tokens, c.d_model];
        let tshape = [c.batch as i32, c.seq as i32, c.d_model as i32];
        let flat = [tokens as i32, c.d_model as i32];

        // Per-replica feeds and their fan-in.
        for (prefix, index) in [("x", 0), ("y", 1)] {
            let mut names = Vec::with_capacity(replicas);
            for r in 0..replicas {
                let attrs = vec![("dtype", ty(DT_FLOAT)), ("shape", value(Value::Shape(shape_proto(&dims))))];
                names.push(self.add(&format!("{prefix}{r}"), "Placeholder", &[], attrs, Place::Host));
            }
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let attrs = vec![
                ("N", i(replicas as i64)),
                ("T", ty(DT_FLOAT)),
                ("index", i(-1)),
                ("is_mirrored_variable", b(false)),
                ("is_packed", b(false)),
            ];
            self.add(&format!("input{index}"), "TPUReplicatedInput", &refs, attrs, Place::Host);
        }
        self.add("cluster/pivot", "NoOp", &[], vec![("_pivot_for_cluster", s(CLUSTER))], Place::Host);
        let metadata = vec![
            ("num_replicas", i(replicas as i64)),
            ("num_cores_per_replica", i(1)),
            ("use_tpu", b(true)),
            ("use_spmd_for_xla_partitioning", b(true)),
            ("use_shardy_partitioner", b(false)),
            ("allow_soft_placement", b(false)),
            ("tpu_compile_options_proto", s("")),
            ("topology", s("")),
            ("step_marker_location", s("STEP_MARK_AT_ENTRY")),
            ("padding_map", empty_list()),
            ("host_compute_core", empty_list()),
            ("device_assignment", empty_list()),
            ("computation_shape", empty_list()),
            ("_has_manual_control_dependencies", b(true)),
        ];
        self.add("TPUReplicateMetadata", "TPUReplicateMetadata", &["^cluster/pivot"], metadata, Place::Cluster);
        let mut inputs = Vec::new();
        for index in 0..2 {
            let attrs = vec![("T", ty(DT_FLOAT)), ("_tpu_input_identity", b(true))];
            let src = format!("input{index}");
            let name = format!("replicated_input_{index}");
            inputs.push(self.add(&name, "Identity", &[&src, "^TPUReplicateMetadata"], attrs, Place::Cluster));
        }

        // Forward.
        let mut x = inputs[0].clone();
        let mut saved = Vec::with_capacity(layers);
        for l in 0..layers {
            let p = format!("layer_{l}");
            let wq = self.f32_const(&format!("{p}/wq"), &[c.d_model, c.d_model], 0.02);
            let wk = self.f32_const(&format!("{p}/wk"), &[c.d_model, c.d_model], 0.02);
            let wv = self.f32_const(&format!("{p}/wv"), &[c.d_model, c.d_model], 0.02);
            let wo = self.f32_const(&format!("{p}/wo"), &[c.d_model, c.d_model], 0.02);
            let w1 = self.f32_const(&format!("{p}/w1"), &[c.d_model, c.d_ff], 0.01);
            let w2 = self.f32_const(&format!("{p}/w2"), &[c.d_ff, c.d_model], 0.01);
            let q = self.matmul(&format!("{p}/q"), &x, &wq, false, false);
            let k = self.matmul(&format!("{p}/k"), &x, &wk, false, false);
            let v = self.matmul(&format!("{p}/v"), &x, &wv, false, false);
            let q3 = self.reshape(&format!("{p}/q3"), &q, &tshape);
            let k3 = self.reshape(&format!("{p}/k3"), &k, &tshape);
            let v3 = self.reshape(&format!("{p}/v3"), &v, &tshape);
            let scores = self.einsum(&format!("{p}/scores"), &q3, &k3, "bqd,bkd->bqk");
            let scale = self.f32_const(&format!("{p}/scale/y"), &[], 1.0 / (c.d_model as f32).sqrt());
            let scaled = self.f(&format!("{p}/scale"), "Mul", &[&scores, &scale]);
            let probs =
                self.add(&format!("{p}/Softmax"), "Softmax", &[&scaled], vec![("T", ty(DT_FLOAT))], Place::Cluster);
            let ctx = self.einsum(&format!("{p}/context"), &probs, &v3, "bqk,bkd->bqd");
            let ctx2 = self.reshape(&format!("{p}/context2"), &ctx, &flat);
            let attn = self.matmul(&format!("{p}/attn"), &ctx2, &wo, false, false);
            let res1 = self.f(&format!("{p}/residual"), "AddV2", &[&x, &attn]);
            let mean = self.reduce(&format!("{p}/ln/mean"), "Mean", &res1, &[1], true);
            let sqd = self.f(&format!("{p}/ln/SquaredDifference"), "SquaredDifference", &[&res1, &mean]);
            let var = self.reduce(&format!("{p}/ln/variance"), "Mean", &sqd, &[1], true);
            let eps = self.f32_const(&format!("{p}/ln/add/y"), &[], 1e-5);
            let var_eps = self.f(&format!("{p}/ln/add"), "AddV2", &[&var, &eps]);
            let rs = self.f(&format!("{p}/ln/Rsqrt"), "Rsqrt", &[&var_eps]);
            let centered = self.f(&format!("{p}/ln/sub"), "Sub", &[&res1, &mean]);
            let ln = self.f(&format!("{p}/ln/mul"), "Mul", &[&centered, &rs]);
            let h = self.matmul(&format!("{p}/ff/h"), &ln, &w1, false, false);
            let r = self.f(&format!("{p}/ff/Relu"), "Relu", &[&h]);
            let f = self.matmul(&format!("{p}/ff/out"), &r, &w2, false, false);
            let out = self.f(&format!("{p}/out"), "AddV2", &[&ln, &f]);
            saved.push(Saved { x, q3, k3, v3, probs, ctx2, centered, rs, ln, r, params: [wq, wk, wv, wo, w1, w2] });
            x = out;
        }
        let diff = self.f("loss/SquaredDifference", "SquaredDifference", &[&x, &inputs[1]]);
        let loss = self.reduce("loss", "Mean", &diff, &[0, 1], false);

        // Backward.
        let shape = self.i32_const("gradients/Shape", &[]);
        let one = self.f32_const("gradients/grad_ys_0/Const", &[], 1.0);
        let seed = self.add(
            "gradients/grad_ys_0",
            "Fill",
            &[&shape, &one],
            vec![("T", ty(DT_FLOAT)), ("index_type", ty(DT_INT32))],
            Place::Cluster,
        );
        let seed2 = self.reshape("gradients/loss_grad/Reshape", &seed, &[1, 1]);
        let multiples = self.i32_const("gradients/loss_grad/multiples", &flat);
        let tiled = self.add(
            "gradients/loss_grad/Tile",
            "Tile",
            &[&seed2, &multiples],
            vec![("T", ty(DT_FLOAT)), ("Tmultiples", ty(DT_INT32))],
            Place::Cluster,
        );
        let count = self.f32_const("gradients/loss_grad/Const", &[], (tokens * c.d_model) as f32);
        let dmean = self.f("gradients/loss_grad/truediv", "RealDiv", &[&tiled, &count]);
        let two = self.f32_const("gradients/loss/SquaredDifference_grad/scalar", &[], 2.0);
        let sub = self.f("gradients/loss/SquaredDifference_grad/sub", "Sub", &[&x, &inputs[1]]);
        let scaled = self.f("gradients/loss/SquaredDifference_grad/Mul", "Mul", &[&two, &sub]);
        let mut dout = self.f("gradients/loss/SquaredDifference_grad/Mul_1", "Mul", &[&scaled, &dmean]);
        let mut grads: Vec<(usize, [String; 6])> = Vec::with_capacity(layers);
        for l in (0..layers).rev() {
            let s_ = &saved[l];
            let p = format!("gradients/layer_{l}");
            let [wq, wk, wv, wo, w1, w2] = &s_.params;
            let dw2 = self.matmul(&format!("{p}/ff/out_grad/MatMul_1"), &s_.r, &dout, true, false);
            let dr = self.matmul(&format!("{p}/ff/out_grad/MatMul"), &dout, w2, false, true);
            let dh = self.add(
                &format!("{p}/ff/Relu_grad/ReluGrad"),
                "ReluGrad",
                &[&dr, &s_.r],
                vec![("T", ty(DT_FLOAT))],
                Place::Cluster,
            );
            let dw1 = self.matmul(&format!("{p}/ff/h_grad/MatMul_1"), &s_.ln, &dh, true, false);
            let dln_ff = self.matmul(&format!("{p}/ff/h_grad/MatMul"), &dh, w1, false, true);
            let dln = self.add_n(&format!("{p}/ln/mul_grad/AddN"), &[&dout, &dln_ff]);
            let dcentered = self.f(&format!("{p}/ln/mul_grad/Mul"), "Mul", &[&dln, &s_.rs]);
            let t1 = self.f(&format!("{p}/ln/mul_grad/Mul_1"), "Mul", &[&dln, &s_.centered]);
            let drs = self.reduce(&format!("{p}/ln/mul_grad/Sum"), "Sum", &t1, &[1], true);
            let dvar = self.f(&format!("{p}/ln/Rsqrt_grad/RsqrtGrad"), "RsqrtGrad", &[&s_.rs, &drs]);
            let width = self.f32_const(&format!("{p}/ln/variance_grad/Const"), &[], c.d_model as f32);
            let dsq = self.f(&format!("{p}/ln/variance_grad/truediv"), "RealDiv", &[&dvar, &width]);
            let two = self.f32_const(&format!("{p}/ln/SquaredDifference_grad/scalar"), &[], 2.0);
            let twice = self.f(&format!("{p}/ln/SquaredDifference_grad/Mul"), "Mul", &[&two, &s_.centered]);
            let dres_b = self.f(&format!("{p}/ln/SquaredDifference_grad/Mul_1"), "Mul", &[&twice, &dsq]);
            let dres1 = self.add_n(&format!("{p}/residual_grad/AddN"), &[&dcentered, &dres_b]);
            let dwo = self.matmul(&format!("{p}/attn_grad/MatMul_1"), &s_.ctx2, &dres1, true, false);
            let dctx2 = self.matmul(&format!("{p}/attn_grad/MatMul"), &dres1, wo, false, true);
            let dctx = self.reshape(&format!("{p}/context2_grad/Reshape"), &dctx2, &tshape);
            let dprobs = self.einsum(&format!("{p}/context_grad/Einsum"), &dctx, &s_.v3, "bqd,bkd->bqk");
            let dv3 = self.einsum(&format!("{p}/context_grad/Einsum_1"), &s_.probs, &dctx, "bqk,bqd->bkd");
            let t = self.f(&format!("{p}/Softmax_grad/mul"), "Mul", &[&dprobs, &s_.probs]);
            let sum = self.reduce(&format!("{p}/Softmax_grad/Sum"), "Sum", &t, &[2], true);
            let u = self.f(&format!("{p}/Softmax_grad/sub"), "Sub", &[&dprobs, &sum]);
            let dscaled = self.f(&format!("{p}/Softmax_grad/mul_1"), "Mul", &[&u, &s_.probs]);
            let scale = format!("layer_{l}/scale/y");
            let dscores = self.f(&format!("{p}/scale_grad/Mul"), "Mul", &[&dscaled, &scale]);
            let dq3 = self.einsum(&format!("{p}/scores_grad/Einsum"), &dscores, &s_.k3, "bqk,bkd->bqd");
            let dk3 = self.einsum(&format!("{p}/scores_grad/Einsum_1"), &dscores, &s_.q3, "bqk,bqd->bkd");
            let dq = self.reshape(&format!("{p}/q3_grad/Reshape"), &dq3, &flat);
            let dk = self.reshape(&format!("{p}/k3_grad/Reshape"), &dk3, &flat);
            let dv = self.reshape(&format!("{p}/v3_grad/Reshape"), &dv3, &flat);
            let dwq = self.matmul(&format!("{p}/q_grad/MatMul_1"), &s_.x, &dq, true, false);
            let dwk = self.matmul(&format!("{p}/k_grad/MatMul_1"), &s_.x, &dk, true, false);
            let dwv = self.matmul(&format!("{p}/v_grad/MatMul_1"), &s_.x, &dv, true, false);
            let dxq = self.matmul(&format!("{p}/q_grad/MatMul"), &dq, wq, false, true);
            let dxk = self.matmul(&format!("{p}/k_grad/MatMul"), &dk, wk, false, true);
            let dxv = self.matmul(&format!("{p}/v_grad/MatMul"), &dv, wv, false, true);
            dout = self.add_n(&format!("{p}/x_grad/AddN"), &[&dres1, &dxq, &dxk, &dxv]);
            grads.push((l, [dwq, dwk, dwv, dwo, dw1, dw2]));
        }
        grads.reverse();

        // SGD step with gradients averaged over replicas, then the outputs.
        let group: Vec<i32> = (0..replicas as i32).collect();
        let mut results = vec![loss];
        for (l, layer_grads) in &grads {
            for (k, grad) in layer_grads.iter().enumerate() {
                let p = format!("update/layer_{l}/{}", PARAMS[k]);
                let ga = self.tensor_const(
                    &format!("{p}/CrossReplicaSum/group_assignment"),
                    TensorProto {
                        dtype: DT_INT32,
                        tensor_shape: Some(shape_proto(&[1, replicas as i64])),
                        tensor_content: group.iter().flat_map(|v| v.to_le_bytes()).collect(),
                        ..TensorProto::default()
                    },
                    DT_INT32,
                );
                let summed = self.f(&format!("{p}/CrossReplicaSum"), "CrossReplicaSum", &[grad, &ga]);
                let n = self.f32_const(&format!("{p}/truediv/y"), &[], replicas as f32);
                let mean = self.f(&format!("{p}/truediv"), "RealDiv", &[&summed, &n]);
                let lr = self.f32_const(&format!("{p}/mul/x"), &[], 0.1);
                let step = self.f(&format!("{p}/mul"), "Mul", &[&lr, &mean]);
                let param = saved[*l].params[k].clone();
                results.push(self.f(&format!("{p}/sub"), "Sub", &[&param, &step]));
            }
        }
        self.add(
            "NoOp",
            "NoOp",
            &["^cluster/pivot"],
            vec![("_has_manual_control_dependencies", b(true))],
            Place::Cluster,
        );
        let mut identities = Vec::with_capacity(results.len());
        for (k, result) in results.iter().enumerate() {
            let name = if k == 0 { "Identity".to_string() } else { format!("Identity_{k}") };
            let attrs = vec![("T", ty(DT_FLOAT)), ("_tpu_output_identity", b(true))];
            self.add(&name, "Identity", &[result], attrs, Place::Cluster);
            if let Some(node) = self.nodes.last_mut() {
                node.device = "/device:TPU_REPLICATED_CORE:0".to_string();
            }
            identities.push(name);
        }
        self.add(
            "TPUCompilationResult",
            "TPUCompilationResult",
            &["^TPUReplicateMetadata"],
            vec![("_tpu_compilation_status", s(CLUSTER))],
            Place::Host,
        );
        for (k, identity) in identities.iter().enumerate() {
            let out = format!("output{k}");
            let attrs = vec![("T", ty(DT_FLOAT)), ("num_replicas", i(replicas as i64))];
            self.add(&out, "TPUReplicatedOutput", &[identity], attrs, Place::Host);
            for r in 0..replicas {
                let src = if r == 0 { out.clone() } else { format!("{out}:{r}") };
                let name = format!("output_{k}_shard_{r}");
                self.add(&name, "Identity", &[&src, "^NoOp"], vec![("T", ty(DT_FLOAT))], Place::Host);
            }
        }
    }

    fn add_n(&mut self, name: &str, inputs: &[&str]) -> String {
        let attrs = vec![("T", ty(DT_FLOAT)), ("N", i(inputs.len() as i64))];
        self.add(name, "AddN", inputs, attrs, Place::Cluster)
    }
}

/// Forward values a layer's backward pass reads.
struct Saved {
    x: String,
    q3: String,
    k3: String,
    v3: String,
    probs: String,
    ctx2: String,
    centered: String,
    rs: String,
    ln: String,
    r: String,
    params: [String; 6],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_names_an_earlier_node() {
        let g = transformer_graphdef(2, &TransformerConfig::default());
        let mut seen = std::collections::HashSet::new();
        for node in &g.node {
            for input in &node.input {
                let name = input.trim_start_matches('^');
                let name = name.rsplit_once(':').map_or(name, |(n, _)| n);
                assert!(seen.contains(name), "{} reads {input} before it exists", node.name);
            }
            assert!(seen.insert(node.name.as_str()), "duplicate {}", node.name);
        }
    }

    #[test]
    fn layer_count_scales_to_the_requested_size() {
        let cfg = TransformerConfig::default();
        let layers = layers_for_nodes(10_000, &cfg);
        let nodes = transformer_graphdef(layers, &cfg).node.len();
        assert!((9_000..11_500).contains(&nodes), "{nodes} nodes for {layers} layers");
    }
}
