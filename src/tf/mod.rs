//! TensorFlow interop: GraphDef (`.pbtxt` text and `.pb` binary) ↔ IR.
//!
//! [`import_graphdef`] decodes the bytes (binary with `prost` over our own
//! message declarations in [`proto`], text with the parser in [`pbtxt`]) and
//! converts the GraphDef into a module with one graph `@main` ([`to_ir`]).
//! [`export`] writes a graph back as a GraphDef; [`synth`] builds
//! large transformer-like GraphDefs for benchmarks and tests.

pub mod error;
pub mod export;
pub mod pbtxt;
pub mod pbtxt_print;
pub mod proto;
pub mod synth;
pub mod to_ir;

use crate::progress::{NoProgress, Progress};
use std::path::Path;

use prost::Message;

pub use error::ImportError;
pub use proto::GraphDef;
pub use to_ir::{graph_attr, DEBUG_INFO_ATTR, FULL_TYPE_ATTR, GRAPH_NAME};

use crate::ir::Module;

/// The two encodings of a GraphDef.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GraphDefFormat {
    /// Protobuf text format (`.pbtxt`), as `str(graph_def)` writes it.
    Text,
    /// Binary protobuf (`.pb`), as `SerializeToString()` writes it.
    Binary,
}

/// The format a file's extension names: `.pbtxt` is text, `.pb` binary.
pub fn format_for_path(path: impl AsRef<Path>) -> Option<GraphDefFormat> {
    match path.as_ref().extension()?.to_str()? {
        "pbtxt" => Some(GraphDefFormat::Text),
        "pb" => Some(GraphDefFormat::Binary),
        _ => None,
    }
}

/// Imports a GraphDef into a module with one graph named `main`.
///
/// Returns the module with the problems found while converting it (unknown
/// inputs, duplicate names, dropped values; possibly empty), or the error
/// that stopped decoding.
pub fn import_graphdef(bytes: &[u8], format: GraphDefFormat) -> Result<(Module, Vec<ImportError>), ImportError> {
    import_graphdef_observed(bytes, format, &NoProgress)
}

/// [`import_graphdef`], reporting progress (decoding, then converting nodes).
pub fn import_graphdef_observed(
    bytes: &[u8],
    format: GraphDefFormat,
    progress: &dyn Progress,
) -> Result<(Module, Vec<ImportError>), ImportError> {
    progress.phase("decoding", 1);
    Ok(match format {
        GraphDefFormat::Binary => {
            let graph = decode_pb(bytes)?;
            progress.advance(1);
            to_ir::graphdef_to_module_observed(graph, pbtxt::OpaqueText::default(), None, progress)
        }
        GraphDefFormat::Text => {
            let parsed = pbtxt::parse_graphdef_text(bytes)?;
            progress.advance(1);
            to_ir::graphdef_to_module_observed(parsed.graph, parsed.opaque, Some(parsed.spans), progress)
        }
    })
}

/// Decodes a binary GraphDef.
pub fn decode_pb(bytes: &[u8]) -> Result<GraphDef, ImportError> {
    GraphDef::decode(bytes).map_err(|e| ImportError::Decode { reason: e.to_string() })
}
