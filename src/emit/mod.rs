//! Emitters: the canonical text printer, JSON and Graphviz DOT.

pub mod graphdef;
pub mod text;

pub use text::print_module;
