//! Inputs and outputs in every format: choosing how to read an input
//! (`--input-format`, the extension, a sniff of the bytes), loading it, and
//! writing a module as text, JSON, DOT or GraphDefs (one per program for a
//! lowered module). Nothing a format cannot hold is dropped: it is an error.

use std::process::ExitCode;
use std::sync::Arc;

use clap::ValueEnum as _;

use super::diagnostics::AnyDiagnostic;
use super::io::InputPath;
use super::source::WindowedSource;
use super::{report, EmitFormat, InputFormat, Loaded};
use crate::ir::Module;
use crate::progress::Progress;
use crate::tf::{self, GraphDefFormat};

/// How an input's format was decided, for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FormatSource {
    /// `--input-format`.
    Flag,
    /// The file's extension.
    Extension,
    /// Sniffed from the first bytes of standard input.
    Sniffed,
    /// Nothing said otherwise: `.opg`.
    Default,
}

/// The format of an input: `--input-format`, else the extension (`.pbtxt`,
/// `.pb`, `.opg`), else for standard input a sniff of the bytes (a binary
/// GraphDef, or text starting with `node {`, `library {`, `versions {`),
/// else `.opg`.
fn decide_format(input: &InputPath, flag: Option<InputFormat>, bytes: &[u8]) -> (InputFormat, FormatSource) {
    if let Some(format) = flag {
        return (format, FormatSource::Flag);
    }
    if let InputPath::File(p) = input {
        match tf::format_for_path(p) {
            Some(GraphDefFormat::Text) => return (InputFormat::Pbtxt, FormatSource::Extension),
            Some(GraphDefFormat::Binary) => return (InputFormat::Pb, FormatSource::Extension),
            None if p.extension().is_some_and(|e| e == "opg") => return (InputFormat::Opg, FormatSource::Extension),
            None => {}
        }
    }
    let looks_like_opg = bytes.trim_ascii_start().starts_with(b"graph") || bytes.trim_ascii_start().starts_with(b"//");
    if matches!(input, InputPath::Stdin) || !looks_like_opg {
        match tf::sniff_format(bytes) {
            Some(GraphDefFormat::Text) if !looks_like_opg => return (InputFormat::Pbtxt, FormatSource::Sniffed),
            Some(GraphDefFormat::Binary) if !looks_like_opg && !bytes.is_empty() => {
                return (InputFormat::Pb, FormatSource::Sniffed)
            }
            _ => {}
        }
    }
    (InputFormat::Opg, FormatSource::Default)
}

/// Loads `.opg`, a GraphDef or a SavedModel's serving function, then the op types: each one that nobody knows is a
/// warning, or with `strict` an error (`None` after reporting it).
pub fn load_checking_ops(
    input: &InputPath,
    flag: Option<InputFormat>,
    progress: &dyn Progress,
    strict: bool,
) -> Option<Loaded> {
    load_function(input, flag, None, progress, strict)
}

/// Loads `input`, where a SavedModel input (a directory, or a file named
/// `saved_model.pb`) loads its function `function` (default: the serving
/// signature; `function` on any other input is a usage error), then checks
/// the op types as [`load_checking_ops`] does.
pub fn load_function(
    input: &InputPath,
    flag: Option<InputFormat>,
    function: Option<&str>,
    progress: &dyn Progress,
    strict: bool,
) -> Option<Loaded> {
    let loaded = load_source(input, flag, function, progress)?;
    let also_known =
        |op: &str| crate::exec::kernels::has_kernel(op) || crate::xla::stablehlo::lowering_of(op).is_some();
    let unknown: Vec<AnyDiagnostic> =
        crate::ir::known_ops::unknown_op_types(&loaded.module, &also_known, strict, loaded.source.text())
            .into_iter()
            .map(|e| Box::new(e) as AnyDiagnostic)
            .collect();
    if report(unknown, &loaded.source) {
        return None;
    }
    Some(loaded)
}

/// A SavedModel's function, or `.opg` / a GraphDef; op types unchecked.
fn load_source(
    input: &InputPath,
    flag: Option<InputFormat>,
    function: Option<&str>,
    progress: &dyn Progress,
) -> Option<Loaded> {
    let saved_model = match input {
        InputPath::File(path) if flag.is_none() => tf::saved_model::saved_model_dir(path),
        _ => None,
    };
    if let Some(dir) = saved_model {
        return load_saved_model(input, &dir, function, progress);
    }
    if function.is_some() {
        super::fail_with(
            super::error::CliError::usage(format!(
                "--function picks a function of a SavedModel (a directory, or its saved_model.pb); {} is not one",
                input.display_name()
            )),
            2,
        );
        return None;
    }
    load_unchecked(input, flag, progress)
}

/// Loads `.opg` or a GraphDef without looking at its op types.
fn load_unchecked(input: &InputPath, flag: Option<InputFormat>, progress: &dyn Progress) -> Option<Loaded> {
    let name = input.display_name();
    progress.phase("reading", 1);
    let bytes = super::read_input(input)?;
    let (format, how) = decide_format(input, flag, &bytes);
    let graphdef = match format {
        InputFormat::Pbtxt => GraphDefFormat::Text,
        InputFormat::Pb => GraphDefFormat::Binary,
        InputFormat::Opg => {
            progress.phase("parsing", 1);
            return super::load_bytes(name, bytes, how_note(how, format));
        }
    };
    let mismatch = mismatch_note(graphdef, &bytes);
    let imported = tf::import_graphdef_observed(&bytes, graphdef, progress);
    // Binary input has no text to point into; show spans against nothing.
    let source_bytes = if graphdef == GraphDefFormat::Text { bytes } else { Vec::new() };
    let source = Arc::new(WindowedSource::from_vec(name, source_bytes));
    match imported {
        Ok((module, errors)) => {
            let diags: Vec<AnyDiagnostic> = errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect();
            if report(diags, &source) {
                return None;
            }
            Some(Loaded { module, source, format, saved_model: None })
        }
        Err(e) => {
            report(vec![Box::new(e)], &source);
            if let Some(note) = how_note(how, format).or(mismatch) {
                eprintln!("note: {note}");
            }
            None
        }
    }
}

/// Loads function `function` of the SavedModel in `dir`, printing the
/// diagnostics; `None` when there is an error.
fn load_saved_model(
    input: &InputPath,
    dir: &std::path::Path,
    function: Option<&str>,
    progress: &dyn Progress,
) -> Option<Loaded> {
    progress.phase("reading", 1);
    let source = Arc::new(WindowedSource::from_vec(input.display_name(), Vec::new()));
    match tf::saved_model::load(dir, function) {
        Ok(imported) => {
            let diags: Vec<AnyDiagnostic> =
                imported.warnings.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect();
            if report(diags, &source) {
                return None;
            }
            Some(Loaded {
                module: imported.module,
                source,
                format: InputFormat::Pb,
                saved_model: Some(imported.captured),
            })
        }
        Err(e) => {
            report(vec![Box::new(e)], &source);
            None
        }
    }
}

/// When the bytes look like the other GraphDef encoding than the one they
/// are read as, says so: binary bytes (not UTF-8, or with control
/// characters) read as text, or text read as binary.
fn mismatch_note(reading_as: GraphDefFormat, bytes: &[u8]) -> Option<String> {
    let head = &bytes[..bytes.len().min(512)];
    // A multi-byte character cut at the window's end is still text.
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
        Err(_) => return (reading_as == GraphDefFormat::Text).then(binary_note),
    };
    let control = text.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'));
    match reading_as {
        GraphDefFormat::Text if control => Some(binary_note()),
        GraphDefFormat::Binary if !control && tf::sniff_format(bytes) == Some(GraphDefFormat::Text) => Some(
            "the input looks like protobuf text, not binary: read it with `--input-format pbtxt` (or name it `.pbtxt`)"
                .to_string(),
        ),
        _ => None,
    }
}

fn binary_note() -> String {
    "the input looks like a binary GraphDef, not text: read it with `--input-format pb` (or name it `.pb`)".to_string()
}

/// [`load_checking_ops`], then the IR verifier on an imported GraphDef (`.opg` is
/// verified as it is parsed), for the commands that run no pass and so no
/// verifier of their own (`check`, `fmt`, `emit`). Every problem is
/// reported; `None` when there is one.
pub fn load_verified(input: &InputPath, flag: Option<InputFormat>, progress: &dyn Progress) -> Option<Loaded> {
    load_verified_strict(input, flag, progress, false)
}

/// [`load_verified`]; with `strict`, an unknown op type is an error.
pub fn load_verified_strict(
    input: &InputPath,
    flag: Option<InputFormat>,
    progress: &dyn Progress,
    strict: bool,
) -> Option<Loaded> {
    let loaded = load_checking_ops(input, flag, progress, strict)?;
    if loaded.format == InputFormat::Opg {
        return Some(loaded);
    }
    let text = loaded.source.text();
    let errors: Vec<AnyDiagnostic> = crate::ir::verify::verify(&loaded.module)
        .into_iter()
        .map(|e| Box::new(narrow_attr_span(e, text)) as AnyDiagnostic)
        .collect();
    if report(errors, &loaded.source) {
        return None;
    }
    Some(loaded)
}

/// An attribute-kind error of a `.pbtxt` node labels the node, which may
/// be dozens of lines; this narrows it to the attribute's `value { ... }`
/// in `text`, the node's source, when it can be found there. Other errors,
/// and nodes without text (binary input, nodes made by a pass), are kept.
pub(super) fn narrow_attr_span(error: crate::ir::IrError, text: &str) -> crate::ir::IrError {
    let crate::ir::IrError::AttrType { op, key, expected, found, span } = error else { return error };
    let (start, end) = (span.start as usize, span.end as usize);
    let narrowed = text.get(start..end).and_then(|node| {
        let entry = [format!("key: \"{key}\""), format!("key:\"{key}\"")].iter().find_map(|k| node.find(k.as_str()))?;
        let value = entry + node[entry..].find("value")?;
        let open = value + node[value..].find('{')?;
        let mut depth = 0usize;
        let close = node[open..].char_indices().find_map(|(i, c)| {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(open + i + 1)
        })?;
        Some(crate::syntax::Span::new(start + value, start + close))
    });
    crate::ir::IrError::AttrType { op, key, expected, found, span: narrowed.unwrap_or(span) }
}

/// Why the input was read as `format`, when the user did not say it.
fn how_note(how: FormatSource, format: InputFormat) -> Option<String> {
    let name = format.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
    match how {
        FormatSource::Flag | FormatSource::Extension => None,
        FormatSource::Sniffed => Some(format!(
            "standard input was read as `{name}` because of its first bytes; say `--input-format` to choose"
        )),
        FormatSource::Default => Some(format!(
            "the input was read as `{name}` (no `.pbtxt`/`.pb` extension, and it does not start like a GraphDef); \
             say `--input-format` to choose"
        )),
    }
}

/// Renders a module in an output format. A GraphDef holds one flat graph;
/// anything it cannot hold is an error, never dropped.
pub fn emit_bytes(module: &Module, format: EmitFormat) -> Result<Vec<u8>, Vec<AnyDiagnostic>> {
    Ok(match format {
        EmitFormat::Text => match crate::emit::text::print_module_checked(module) {
            Ok(text) => text.into_bytes(),
            Err(e) => return Err(vec![Box::new(e)]),
        },
        EmitFormat::Json => crate::emit::json::to_json_string(module).into_bytes(),
        EmitFormat::Dot => crate::emit::dot::to_dot(module).into_bytes(),
        EmitFormat::Stablehlo => {
            return Err(vec![Box::new(super::error::CliError::usage(
                "--format stablehlo is an output of `lower` (the device programs), not of a module",
            ))])
        }
        EmitFormat::Pbtxt | EmitFormat::Pb => {
            // Functions travel in the graph's `library`, not as graphs of the GraphDef.
            use crate::ir::functions::is_function;
            let graphs: Vec<&crate::ir::Graph> = module.graphs.iter().filter(|g| !is_function(g)).collect();
            let [graph] = graphs.as_slice() else {
                // Labelled at the second graph, the first that does not fit.
                let span = graphs.get(1).map(|g| g.span).filter(|s| *s != crate::syntax::Span::DETACHED);
                return Err(vec![Box::new(super::error::CliError::GraphDefGraphs { graphs: graphs.len(), span })]);
            };
            let functions: Vec<&crate::ir::Graph> = module.graphs.iter().filter(|g| is_function(g)).collect();
            let boxed = |errors: Vec<tf::ImportError>| {
                errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect::<Vec<_>>()
            };
            let graph_def = tf::to_graphdef_with_functions(graph, &functions).map_err(boxed)?;
            if format == EmitFormat::Pbtxt {
                tf::pbtxt_print::print_graphdef(&graph_def).into_bytes()
            } else {
                prost::Message::encode_to_vec(&graph_def)
            }
        }
    })
}

/// Writes one GraphDef per lowered program (the host and each device) into
/// the directory `dir`, as `<program>.pbtxt` or `<program>.pb`, each with
/// the module's functions in its library; a GraphDef holds one graph, so
/// several programs need a directory.
pub(super) fn write_programs(
    lowered: &Module,
    text: bool,
    dir: Option<&std::path::Path>,
    source: &Arc<WindowedSource>,
) -> ExitCode {
    let Some(dir) = dir.filter(|d| *d != std::path::Path::new("-")) else {
        let message = format!(
            "the lowered module has {} programs and a GraphDef holds one: give a directory with `-o DIR` \
             to get one GraphDef per program",
            lowered.graphs.len()
        );
        return super::fail_with(super::error::CliError::usage(message), 2);
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        return super::fail(super::error::CliError::Write { path: dir.display().to_string(), reason: e.to_string() });
    }
    let extension = if text { "pbtxt" } else { "pb" };
    // Functions (the bodies of functional control flow) travel in each
    // program's library, as TensorFlow keeps them, not as files of their own.
    use crate::ir::functions::is_function;
    let functions: Vec<&crate::ir::Graph> = lowered.graphs.iter().filter(|g| is_function(g)).collect();
    for graph in lowered.graphs.iter().filter(|g| !is_function(g)) {
        let bytes = match tf::to_graphdef_with_functions(graph, &functions) {
            Ok(graph_def) if text => tf::pbtxt_print::print_graphdef(&graph_def).into_bytes(),
            Ok(graph_def) => prost::Message::encode_to_vec(&graph_def),
            Err(errors) => {
                report(errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect(), source);
                return ExitCode::from(1);
            }
        };
        let file = format!("{}.{extension}", graph.name.replace(['/', '\\', ':'], "_"));
        if let Err(e) = super::io::write_file(&dir.join(&file), &bytes) {
            return super::fail(e);
        }
    }
    ExitCode::SUCCESS
}

/// Writes `loaded`'s module in `format` to `output` (or standard output)
/// and gives the exit code. The process exits next, so the module and the
/// bytes are left to the OS instead of being freed node by node.
pub(super) fn emit_and_exit(loaded: super::Loaded, format: EmitFormat, output: Option<&std::path::Path>) -> ExitCode {
    let code = match emit_bytes(&loaded.module, format) {
        Ok(bytes) => {
            let code = super::finish(super::io::write_output(output, &bytes));
            std::mem::forget(bytes);
            code
        }
        Err(errors) => {
            report(errors, &loaded.source);
            ExitCode::from(1)
        }
    };
    std::mem::forget(loaded);
    code
}
