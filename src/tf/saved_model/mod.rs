//! SavedModel in: a directory written by `tf.saved_model.save` (or its
//! `saved_model.pb`) as a module whose `@main` graph is one function of it,
//! with the values of the variables that function captures.
//!
//! Meaning. `saved_model.pb` holds a `MetaGraphDef`: a GraphDef whose
//! library has every traced function, the signatures, and the object graph
//! (`SavedObjectGraph`), whose nodes are the saved Python objects: the
//! root, its attributes, variables, functions. A function object lists its
//! concrete functions; each concrete function lists the object-graph nodes
//! it captures (`bound_inputs`), which are its last inputs, in order. The
//! variables' values are in the tensor-bundle checkpoint
//! `variables/variables` ([`crate::tf::bundle`]), whose own object graph
//! (the `_CHECKPOINTABLE_OBJECT_GRAPH` entry) numbers the objects as the
//! SavedModel does and gives each variable's checkpoint key.
//!
//! [`load`] picks a function ([`FunctionChoice`]: a signature key, or the
//! path of a `tf.function` attribute such as `train_step`; by default the
//! `serving_default` signature), rebuilds its body as a graph
//! ([`flatten`]), names each captured input after its variable (the name
//! the user gave it, e.g. `sequential/dense/kernel`), makes it a variable
//! handle ([`super::captures`]) and reads its value, checking the dtype and
//! shape against the object graph. Every failure is a [`SavedModelError`].

pub mod error;
pub mod flatten;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use prost::Message;

pub use error::SavedModelError;

use super::bundle::{self, Entry};
use super::captures::{import_captured_variables, KnownVariable};
use super::error::ImportError;
use super::proto::{saved_object, MetaGraphDef, SavedModel, SavedObjectGraph, TensorShapeProto, TrackableObjectGraph};
use crate::ir::{DType, Module, TensorLit};

/// The checkpoint key of the serialized object graph.
pub const OBJECT_GRAPH_KEY: &str = "_CHECKPOINTABLE_OBJECT_GRAPH";
/// The signature a SavedModel serves by default.
pub const DEFAULT_SIGNATURE: &str = "serving_default";
/// The file of a SavedModel directory that holds the graph.
pub const SAVED_MODEL_FILE: &str = "saved_model.pb";

/// A variable the chosen function captures.
#[derive(Clone, Debug, PartialEq)]
pub struct CapturedVariable {
    /// The handle's name in the graph: the variable's name.
    pub name: String,
    /// Its key in the SavedModel's checkpoint.
    pub checkpoint_key: Option<String>,
    /// Its value in the checkpoint.
    pub value: TensorLit,
}

/// A SavedModel function as a module.
#[derive(Debug)]
pub struct Imported {
    /// The module: `@main` is the function's graph.
    pub module: Module,
    /// Problems found while converting the graph (as for a GraphDef).
    pub warnings: Vec<ImportError>,
    /// The function's captured variables and their checkpoint.
    pub captured: Captured,
}

/// What a loaded SavedModel function carries besides its graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Captured {
    /// The function chosen, as the user names it.
    pub function: String,
    /// The captured variables, in input order.
    pub variables: Vec<CapturedVariable>,
    /// Every entry of the SavedModel's checkpoint (the object graph
    /// included), so that a checkpoint written back has the same keys.
    pub checkpoint: BTreeMap<String, Entry>,
}

/// The SavedModel directory `path` names: itself when it holds
/// `saved_model.pb`, its parent when it is that file; else `None`.
pub fn saved_model_dir(path: &Path) -> Option<PathBuf> {
    if path.is_dir() {
        return Some(path.to_path_buf());
    }
    if path.file_name().is_some_and(|n| n == SAVED_MODEL_FILE) {
        return Some(path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf));
    }
    None
}

/// The names a SavedModel's functions go by.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FunctionChoice {
    /// Signature keys (`serving_default`, ...).
    pub signatures: Vec<String>,
    /// Paths of function attributes of the saved objects (`train_step`,
    /// `model.call`), each with its object-graph node.
    pub functions: Vec<(String, i32)>,
}

impl FunctionChoice {
    /// Every name, for help texts.
    pub fn describe(&self) -> String {
        let mut names: Vec<String> = self.signatures.iter().map(|s| format!("{s} (signature)")).collect();
        names.extend(self.functions.iter().map(|(f, _)| f.clone()));
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }
}

/// The signature keys and function attributes of `meta`.
pub fn function_choice(meta: &MetaGraphDef) -> FunctionChoice {
    let mut choice = FunctionChoice {
        signatures: meta.signature_def.keys().filter(|k| !k.starts_with("__")).cloned().collect(),
        functions: Vec::new(),
    };
    let Some(objects) = &meta.object_graph_def else { return choice };
    // Breadth first from the root, public attributes only, each object once.
    let mut seen = HashSet::from([0]);
    let mut queue = VecDeque::from([(0i32, String::new())]);
    while let Some((id, path)) = queue.pop_front() {
        let Some(object) = objects.nodes.get(id as usize) else { continue };
        for child in &object.children {
            if child.local_name.starts_with('_') || (id == 0 && child.local_name == "signatures") {
                continue;
            }
            let child_path =
                if path.is_empty() { child.local_name.clone() } else { format!("{path}.{}", child.local_name) };
            if !seen.insert(child.node_id) {
                continue;
            }
            match objects.nodes.get(child.node_id as usize).and_then(|o| o.kind.as_ref()) {
                Some(saved_object::Kind::Function(_)) => choice.functions.push((child_path, child.node_id)),
                Some(saved_object::Kind::UserObject(_)) => queue.push_back((child.node_id, child_path)),
                _ => {}
            }
        }
    }
    choice
}

/// Reads `saved_model.pb` of `dir`: its one MetaGraphDef (the `serve` one
/// when it has several).
pub fn read_meta_graph(dir: &Path) -> Result<MetaGraphDef, SavedModelError> {
    let file = dir.join(SAVED_MODEL_FILE);
    let shown = file.display().to_string();
    let bytes =
        std::fs::read(&file).map_err(|e| SavedModelError::Read { file: shown.clone(), reason: e.to_string() })?;
    let decode = |reason: String| SavedModelError::Decode { file: shown.clone(), reason };
    let saved = SavedModel::decode(bytes.as_slice()).map_err(|e| decode(e.to_string()))?;
    let count = saved.meta_graphs.len();
    let mut metas = saved.meta_graphs.into_iter();
    match count {
        0 => Err(decode("it holds no MetaGraphDef".into())),
        1 => metas.next().ok_or_else(|| decode("it holds no MetaGraphDef".into())),
        _ => metas
            .find(|m| m.meta_info_def.as_ref().is_some_and(|i| i.tags.iter().any(|t| t == "serve")))
            .ok_or_else(|| decode(format!("it holds {count} MetaGraphDefs and none is tagged `serve`"))),
    }
}

/// The concrete function `name` (or the default) stands for.
fn concrete_function(
    meta: &MetaGraphDef,
    objects: &SavedObjectGraph,
    name: Option<&str>,
) -> Result<(String, String), SavedModelError> {
    let choice = function_choice(meta);
    let available = choice.describe();
    let wanted = match name {
        Some(n) => n.to_string(),
        None if choice.signatures.iter().any(|s| s == DEFAULT_SIGNATURE) => DEFAULT_SIGNATURE.to_string(),
        None => return Err(SavedModelError::ChooseFunction { available }),
    };
    let traces = |node: i32| -> Vec<String> {
        match objects.nodes.get(node as usize).and_then(|o| o.kind.as_ref()) {
            Some(saved_object::Kind::Function(f)) => f.concrete_functions.clone(),
            Some(saved_object::Kind::BareConcreteFunction(f)) => vec![f.concrete_function_name.clone()],
            _ => Vec::new(),
        }
    };
    let node = if let Some((_, node)) = choice.functions.iter().find(|(f, _)| *f == wanted) {
        Some(*node)
    } else if choice.signatures.contains(&wanted) {
        // Signatures are the children of the root's `signatures` object.
        let root = objects.nodes.first();
        let signatures = root.and_then(|r| r.children.iter().find(|c| c.local_name == "signatures"));
        signatures
            .and_then(|s| objects.nodes.get(s.node_id as usize))
            .and_then(|s| s.children.iter().find(|c| c.local_name == wanted))
            .map(|c| c.node_id)
    } else {
        return Err(SavedModelError::NoFunction { name: wanted, available });
    };
    let function_error = |reason: String| SavedModelError::Function { function: wanted.clone(), reason };
    let traced = node.map(traces).unwrap_or_default();
    match traced.as_slice() {
        [one] => Ok((wanted.clone(), one.clone())),
        [] => Err(function_error("the SavedModel holds no traced (concrete) function for it".into())),
        many => Err(function_error(format!(
            "it was traced {} times ({}); give the tf.function an input_signature so that it has one trace",
            many.len(),
            many.join(", ")
        ))),
    }
}

/// Dims of a shape proto; `None` when not fully known.
fn dims(shape: Option<&TensorShapeProto>) -> Option<Vec<i64>> {
    let shape = shape?;
    if shape.unknown_rank {
        return None;
    }
    shape.dim.iter().map(|d| (d.size >= 0).then_some(d.size)).collect()
}

/// Loads function `function` (default: the serving signature) of the
/// SavedModel at `path` (its directory or `saved_model.pb`).
pub fn load(path: &Path, function: Option<&str>) -> Result<Imported, SavedModelError> {
    let dir = saved_model_dir(path).unwrap_or_else(|| path.to_path_buf());
    let meta = read_meta_graph(&dir)?;
    let shown = dir.join(SAVED_MODEL_FILE).display().to_string();
    let decode = |reason: &str| SavedModelError::Decode { file: shown.clone(), reason: reason.to_string() };
    let objects = meta.object_graph_def.clone().ok_or_else(|| decode("it has no object graph (a TF1 SavedModel)"))?;
    let (chosen, concrete) = concrete_function(&meta, &objects, function)?;
    let function_error = |reason: String| SavedModelError::Function { function: chosen.clone(), reason };
    let graph_def = meta.graph_def.clone().unwrap_or_default();
    let library = graph_def.library.clone().unwrap_or_default();
    let body =
        library.function.iter().find(|f| f.signature.as_ref().is_some_and(|s| s.name == concrete)).ok_or_else(
            || function_error(format!("its concrete function `{concrete}` is not in the graph's library")),
        )?;
    let bound: Vec<i32> = objects.concrete_functions.get(&concrete).map(|c| c.bound_inputs.clone()).unwrap_or_default();
    let inputs = body.signature.as_ref().map(|s| s.input_arg.clone()).unwrap_or_default();
    let Some(first_captured) = inputs.len().checked_sub(bound.len()) else {
        return Err(function_error(format!("it captures {} objects but has {} inputs", bound.len(), inputs.len())));
    };

    // Each captured input names a variable of the object graph.
    // (input argument, variable name, dtype, shape if known, object node).
    type Declared = (String, String, DType, Option<Vec<i64>>, i32);
    let mut declared: Vec<Declared> = Vec::new();
    let mut names_used: HashSet<String> = HashSet::new();
    for (arg, &node) in inputs[first_captured..].iter().zip(&bound) {
        let variable = match objects.nodes.get(node as usize).and_then(|o| o.kind.as_ref()) {
            Some(saved_object::Kind::Variable(v)) => v,
            _ => {
                return Err(function_error(format!(
                    "its captured input `{}` is object {node}, which is not a variable; only captured variables are supported",
                    arg.name
                )))
            }
        };
        let mut name = variable.name.clone();
        if name.is_empty() || !names_used.insert(name.clone()) {
            name = format!("{}_object_{node}", if name.is_empty() { "variable" } else { &name });
            names_used.insert(name.clone());
        }
        declared.push((
            arg.name.clone(),
            name,
            DType::from_number(variable.dtype),
            dims(variable.shape.as_ref()),
            node,
        ));
    }

    // Their values, from the checkpoint.
    let prefix = dir.join("variables").join("variables");
    let needs_checkpoint = !declared.is_empty() || bundle::index_path(&prefix).exists();
    let entries = if needs_checkpoint { bundle::read_bundle(&prefix)? } else { BTreeMap::new() };
    let index_file = bundle::index_path(&prefix).display().to_string();
    let trackable = match entries.get(OBJECT_GRAPH_KEY) {
        Some(entry) => {
            let bad = |reason: &str| SavedModelError::Entry {
                file: index_file.clone(),
                key: OBJECT_GRAPH_KEY.to_string(),
                reason: reason.to_string(),
            };
            let strings = entry.strings().ok_or_else(|| bad("it is not a string tensor that decodes"))?;
            let bytes = strings.first().ok_or_else(|| bad("it is empty"))?;
            Some(
                TrackableObjectGraph::decode(bytes.as_slice())
                    .map_err(|e| bad(&format!("not a TrackableObjectGraph: {e}")))?,
            )
        }
        None => None,
    };
    let mut variables = Vec::with_capacity(declared.len());
    let mut renames = HashMap::new();
    for (arg, name, dtype, shape, node) in &declared {
        let key = trackable
            .as_ref()
            .and_then(|t| t.nodes.get(*node as usize))
            .and_then(|n| n.attributes.iter().find(|a| a.name == "VARIABLE_VALUE"))
            .map(|a| a.checkpoint_key.clone());
        let Some(entry) = key.as_ref().and_then(|k| entries.get(k)) else {
            return Err(SavedModelError::MissingValue {
                variable: name.clone(),
                key: key.map(|k| format!(" (key `{k}`)")).unwrap_or_default(),
            });
        };
        let key = key.unwrap_or_default();
        let declared_text = bundle::describe(*dtype, shape.as_deref().unwrap_or(entry.shape.as_slice()));
        let value =
            entry.to_literal().filter(|_| entry.dtype == *dtype && shape.as_ref().is_none_or(|s| *s == entry.shape));
        let Some(value) = value else {
            return Err(SavedModelError::Mismatch {
                variable: name.clone(),
                key,
                found: entry.describe(),
                declared: declared_text,
            });
        };
        renames.insert(arg.clone(), name.clone());
        variables.push(CapturedVariable { name: name.clone(), checkpoint_key: Some(key), value });
    }

    let (graph, arg_nodes) =
        flatten::function_as_graph(body, graph_def.library, graph_def.versions, &renames).map_err(function_error)?;
    // The handles' names, after any renaming to keep them unique.
    for (v, (arg, ..)) in variables.iter_mut().zip(&declared) {
        if let Some(node) = arg_nodes.get(arg) {
            v.name.clone_from(node);
        }
    }
    let (mut module, warnings) = super::to_ir::graphdef_to_module(graph, None);
    let known: HashMap<String, KnownVariable> = variables
        .iter()
        .map(|v| (v.name.clone(), KnownVariable { dtype: v.value.dtype, shape: v.value.shape.clone() }))
        .collect();
    if let Some(main) = module.graphs.first_mut() {
        import_captured_variables(main, &known);
    }
    Ok(Imported { module, warnings, captured: Captured { function: chosen, variables, checkpoint: entries } })
}
