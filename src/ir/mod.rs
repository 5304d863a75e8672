//! The IR: graphs of ops on petgraph, with attributes, regions and a verifier.
//!
//! [`from_ast::build`] turns an AST into a [`Module`]; [`verify::verify`]
//! checks one. [`parse_module`] does both after parsing.

pub mod attrs;
pub mod eq;
pub mod error;
pub mod from_ast;
pub mod functions;
pub mod graph;
pub mod known_ops;
pub mod ops;
pub mod shapes;
pub mod sharding;
pub mod suggest;
pub mod tf_xla_ops;
pub mod types;
pub mod verify;
pub mod walk;
pub mod xla_proto;

pub use attrs::AttrMap;

/// The most replicas a computation may have (the largest TPU pods have a
/// few thousand cores). A larger count is refused before anything is built
/// per replica, so a hostile `num_replicas` cannot exhaust memory.
pub const MAX_REPLICAS: i64 = 65_536;

pub use error::IrError;
pub use graph::{Edge, EdgeKind, Graph, Input, Module, Node, NodeId, NodeKind, Region, RegionId, RegionKind, ValueRef};
pub use types::{AttrKind, AttrValue, DType, Shape, TensorData, TensorLit};

use crate::syntax::SyntaxError;

/// Parses, builds and verifies `.opg` source bytes.
///
/// Returns the module with the IR problems (possibly empty), or the syntax
/// error that stopped parsing.
pub fn parse_module(source: &[u8]) -> Result<(Module, Vec<IrError>), SyntaxError> {
    let text = crate::syntax::check_text(source)?;
    // Reserve once instead of growing: statements are lines, operands `%`s.
    let lines = memchr::memchr_iter(b'\n', source).count() + 1;
    let percents = memchr::memchr_iter(b'%', source).count();
    let builder = from_ast::ModuleBuilder::new(lines, percents.saturating_sub(lines));
    let header = crate::syntax::parse_into(text, &builder)?;
    let (mut module, mut errors) = builder.finish();
    module.header = header.into_iter().map(str::to_string).collect();
    // The builder already reported attribute kinds with precise spans.
    let reported: Vec<(String, String)> = errors
        .iter()
        .filter_map(|e| match e {
            IrError::AttrType { op, key, .. } => Some((op.clone(), key.clone())),
            _ => None,
        })
        .collect();
    errors.extend(verify::verify(&module).into_iter().filter(|e| match e {
        IrError::AttrType { op, key, .. } => !reported.iter().any(|(o, k)| o == op && k == key),
        _ => true,
    }));
    Ok((module, errors))
}
