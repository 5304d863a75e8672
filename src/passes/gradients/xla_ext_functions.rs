//! `SymbolicGradient`: TensorFlow's op that runs the gradient of a function.
//!
//! A `SymbolicGradient` names a function `f` of the module; its operands are `f`'s arguments, then
//! one gradient per result of `f`; its results are the gradients of `f`'s arguments. This pass makes
//! that gradient as a function of the module with the IR's own gradient machinery
//! ([`Library::gradient_function`], as a call's gradient does) and names it in the node's
//! [`SYMBOLIC_GRADIENT_ATTR`], which the simulator and the StableHLO lowering then call like any
//! `PartitionedCall`: it takes every operand and gives every result. TensorFlow's kernel also
//! differentiates integer arguments and results (as numbers); the IR's gradients flow through
//! floating-point values only, so a function with an integer argument or result is refused with a
//! diagnostic rather than given zeros.
//!
//! Invariants: a node already naming its gradient function is left alone, so the pass may run more
//! than once (the pipeline's gradients pass and a plain run both run it); functions are made once
//! per `f`. Cost: one walk over the nodes of the module, plus the gradient functions made.

use super::library::{is_differentiable, signature, Library, LibraryState, Slot};
use super::GradientsConfig;
use crate::ir::functions::SYMBOLIC_GRADIENT_ATTR;
use crate::ir::types::FuncRef;
use crate::ir::{AttrMap, AttrValue, Module, NodeId};
use crate::passes::error::PassError;

/// The op this file expands.
const OP: &str = "SymbolicGradient";

/// Names the gradient function of every `SymbolicGradient` of `module` that names none yet,
/// appending the functions made to the module. Returns the errors with the graph each was found in;
/// a node whose function cannot be made keeps no gradient function (running it is refused).
pub fn expand_symbolic_gradients(module: &mut Module, config: &GradientsConfig) -> Vec<(String, PassError)> {
    let todo: Vec<(usize, NodeId)> = module
        .graphs
        .iter()
        .enumerate()
        .flat_map(|(i, g)| {
            g.node_ids()
                .filter(move |&id| {
                    let node = g.node(id);
                    &*node.op == OP && !node.attrs.contains_key(SYMBOLIC_GRADIENT_ATTR)
                })
                .map(move |id| (i, id))
        })
        .collect();
    if todo.is_empty() {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut state = LibraryState::new(&module.graphs);
    let mut made: Vec<(usize, NodeId, String)> = Vec::new();
    let mut by_function: Vec<(String, String)> = Vec::new();
    for (i, id) in todo {
        let graph = &module.graphs[i];
        let node = graph.node(id);
        let f = match node.attrs.get("f") {
            Some(AttrValue::Func(f)) => f.name.clone(),
            _ => String::new(),
        };
        let error = |reason: String| PassError::SymbolicGradient {
            node: node.name.to_string(),
            function: f.clone(),
            reason,
            span: node.span,
        };
        if f.is_empty() {
            found.push((graph.name.clone(), error("`f` names no function".into())));
            continue;
        }
        if let Some((_, name)) = by_function.iter().find(|(g, _)| *g == f) {
            made.push((i, id, name.clone()));
            continue;
        }
        let mut errors = Vec::new();
        let mut lib = Library { graphs: &module.graphs, state: &mut state, config: config.clone() };
        match gradient_of(&mut lib, &f, &mut errors) {
            Ok(name) => {
                by_function.push((f.clone(), name.clone()));
                made.push((i, id, name));
            }
            Err(reason) => found.push((graph.name.clone(), error(reason))),
        }
        found.extend(errors.into_iter().map(|e| (graph.name.clone(), e)));
    }
    for (i, id, name) in made {
        let attr = AttrValue::Func(Box::new(FuncRef { name, attrs: AttrMap::new() }));
        module.graphs[i].node_mut(id).attrs.insert(SYMBOLIC_GRADIENT_ATTR, attr);
    }
    module.graphs.append(&mut state.added);
    found
}

/// Makes the function a `SymbolicGradient` of `f` runs; returns its name.
fn gradient_of(lib: &mut Library<'_>, f: &str, errors: &mut Vec<PassError>) -> Result<String, String> {
    let function = lib.function(f).ok_or_else(|| format!("the module has no function `{f}`"))?;
    let (fargs, frets) = signature(function)?;
    // TensorFlow's kernel differentiates integer values too (a `Cast` to an integer passes the
    // gradient on); the IR's gradients flow through floats only, so such a function is refused.
    let not_float = |what: &str, slots: &[Slot]| {
        slots.iter().position(|s| !is_differentiable(s.dtype)).map(|i| {
            format!(
                "{what} {i} of `{f}` is {}: TensorFlow differentiates it as a number, the IR's gradients flow through floating-point values only",
                slots[i].dtype
            )
        })
    };
    if let Some(reason) = not_float("argument", &fargs).or_else(|| not_float("result", &frets)) {
        return Err(reason);
    }
    let args: Vec<usize> = (0..fargs.len()).collect();
    let results: Vec<usize> = (0..frets.len()).collect();
    lib.gradient_function(f, &args, &results, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{parse_module, DType};

    fn module(text: &str) -> Module {
        let (m, errors) = parse_module(text.as_bytes()).expect("parses");
        assert!(errors.is_empty(), "{errors:?}");
        m
    }

    const F: &str = r#"
graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[3]}
  %w = Placeholder() {dtype = f32, shape = shape[3]}
  %d = Placeholder() {dtype = f32, shape = shape[3]}
  %g = SymbolicGradient(%x, %w, %d) {Tin = [f32, f32, f32], Tout = [f32, f32], f = func "sq"}
}
graph @sq (role = "function") {
  %a = _Arg() {T = f32, index = 0}
  %k = _Arg() {T = f32, index = 1}
  %y = Mul(%a, %k) {T = f32}
  %r = _Retval(%y) {T = f32, index = 0}
}
"#;

    #[test]
    fn names_a_gradient_function_taking_every_operand() {
        let mut m = module(F);
        let errors = expand_symbolic_gradients(&mut m, &GradientsConfig::default());
        assert!(errors.is_empty(), "{errors:?}");
        let main = &m.graphs[0];
        let g = main.node(main.node_ids().find(|&id| &*main.node(id).op == OP).unwrap());
        let Some(AttrValue::Func(f)) = g.attrs.get(SYMBOLIC_GRADIENT_ATTR) else { panic!("no gradient function") };
        let made = m.graph(&f.name).expect("the function is in the module");
        let sig = crate::ir::functions::signature(made).unwrap();
        assert_eq!(sig.args, vec![Some(DType::F32); 3]);
        assert_eq!(sig.rets, vec![Some(DType::F32); 2]);
        let mut check = Vec::new();
        crate::ir::functions::check_calls(&m, &mut check);
        assert!(check.is_empty(), "{check:?}");
        // Running the pass again changes nothing.
        let graphs = m.graphs.len();
        assert!(expand_symbolic_gradients(&mut m, &GradientsConfig::default()).is_empty());
        assert_eq!(m.graphs.len(), graphs);
    }

    #[test]
    fn an_integer_argument_is_refused() {
        let text = F
            .replace(
                "%k = _Arg() {T = f32, index = 1}\n  %y = Mul(%a, %k) {T = f32}",
                "%k = _Arg() {T = i32, index = 1}\n  %y = Identity(%a) {T = f32}",
            )
            .replace("Tin = [f32, f32, f32]", "Tin = [f32, i32, f32]")
            .replace("Tout = [f32, f32]", "Tout = [f32, i32]")
            .replace("%w = Placeholder() {dtype = f32", "%w = Placeholder() {dtype = i32");
        let mut m = module(&text);
        let errors = expand_symbolic_gradients(&mut m, &GradientsConfig::default());
        assert_eq!(errors.len(), 1, "{errors:?}");
        let shown = errors[0].1.to_string();
        assert!(shown.contains("argument 1 of `sq` is i32"), "{shown}");
    }

    #[test]
    fn a_missing_function_is_a_diagnostic() {
        // The verifier reports the unknown function; the pass refuses the node as well.
        let text = F.replace("func \"sq\"", "func \"nope\"").replace("graph @sq", "graph @other");
        let (mut m, _) = parse_module(text.as_bytes()).expect("parses");
        let errors = expand_symbolic_gradients(&mut m, &GradientsConfig::default());
        assert_eq!(errors.len(), 1, "{errors:?}");
        let text = errors[0].1.to_string();
        assert!(text.contains("`nope`") && text.contains("SymbolicGradient `%g`"), "{text}");
    }

    #[test]
    fn check_calls_measures_an_unexpanded_node_against_f() {
        let text = F.replace("%g = SymbolicGradient(%x, %w, %d)", "%g = SymbolicGradient(%x, %w)");
        let (_, errors) = parse_module(text.as_bytes()).expect("parses");
        assert_eq!(errors.len(), 1, "{errors:?}");
        let shown = format!("{:?}", errors[0]);
        assert!(shown.contains("it passes 2 operand(s); the gradient of `f` takes 3"), "{shown}");
    }
}
