//! Emitters: the canonical text printer, JSON and Graphviz DOT.

pub mod dot;
pub mod json;
pub mod text;

pub use text::print_module;
