//! The command-line interface (clap).
//!
//! Exit codes: 0 on success, 1 when the input has errors (diagnostics on
//! stderr), 2 for usage errors. Outputs named with `-o` or `--write` are
//! written atomically.
//!
//! This module belongs to the `tpu-rewrite` binary (`src/main.rs` declares
//! it), not to the library: it reaches the library through the binary's
//! crate root, which re-exports the library's modules.

#[macro_use]
pub mod console;
mod backends;
mod checkpoint;
pub mod coverage;
pub mod error;
mod feeds;
mod formats;
pub mod gen;
pub mod io;
pub mod ops;
mod pipeline;
mod plain;
pub mod progress;
pub mod reference;
mod run;
mod validate;

use crate::diagnostics;
use crate::diagnostics::source;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::ir::{IrError, Module};
use diagnostics::{render, AnyDiagnostic, Style};
use error::CliError;
use io::{write_output, InputPath};
use source::WindowedSource;

/// tpu-rewrite: parse, rewrite, lower and run TPU-style replicated op graphs.
#[derive(Debug, Parser)]
#[command(name = "tpu-rewrite", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Pass the XLA plugin's own logging through (quiet by default).
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

/// Output formats of `emit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EmitFormat {
    /// Canonical `.opg` text.
    Text,
    /// JSON (schema in README.md).
    Json,
    /// Graphviz DOT.
    Dot,
    /// TensorFlow GraphDef, protobuf text.
    Pbtxt,
    /// TensorFlow GraphDef, binary protobuf.
    Pb,
    /// Each cluster's device program as a StableHLO module (docs/xla.md).
    Stablehlo,
}

impl EmitFormat {
    /// `--format` when given, else the format `-o`'s extension names
    /// (`.opg`, `.json`, `.dot`, `.pbtxt`, `.pb`, `.mlir`), else text.
    pub fn resolve(format: Option<EmitFormat>, output: Option<&std::path::Path>) -> EmitFormat {
        let by_extension = || match output?.extension()?.to_str()? {
            "opg" => Some(EmitFormat::Text),
            "json" => Some(EmitFormat::Json),
            "dot" | "gv" => Some(EmitFormat::Dot),
            "pbtxt" => Some(EmitFormat::Pbtxt),
            "pb" => Some(EmitFormat::Pb),
            "mlir" => Some(EmitFormat::Stablehlo),
            _ => None,
        };
        format.or_else(by_extension).unwrap_or(EmitFormat::Text)
    }
}

/// Output formats of a graph (`emit`, `gen`, `rewrite`): [`EmitFormat`]
/// without StableHLO, which only `lower` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Canonical `.opg` text.
    Text,
    /// JSON (schema in README.md).
    Json,
    /// Graphviz DOT.
    Dot,
    /// TensorFlow GraphDef, protobuf text.
    Pbtxt,
    /// TensorFlow GraphDef, binary protobuf.
    Pb,
}

impl From<GraphFormat> for EmitFormat {
    fn from(format: GraphFormat) -> EmitFormat {
        match format {
            GraphFormat::Text => EmitFormat::Text,
            GraphFormat::Json => EmitFormat::Json,
            GraphFormat::Dot => EmitFormat::Dot,
            GraphFormat::Pbtxt => EmitFormat::Pbtxt,
            GraphFormat::Pb => EmitFormat::Pb,
        }
    }
}

/// The output format of a command that writes a graph: `--format`, else
/// `-o`'s extension; a `.mlir` output (StableHLO, which only `lower`
/// writes) is a usage error.
fn graph_format(
    format: Option<GraphFormat>,
    output: Option<&std::path::Path>,
    command: &str,
) -> Result<EmitFormat, ExitCode> {
    match EmitFormat::resolve(format.map(EmitFormat::from), output) {
        EmitFormat::Stablehlo => Err(fail_with(
            CliError::usage(format!(
                "`{command}` writes a graph (text, json, dot, pbtxt or pb), not StableHLO: `lower --format stablehlo` writes the device program"
            )),
            2,
        )),
        format => Ok(format),
    }
}

/// The synthetic models `gen` can write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GenModel {
    /// Dense layers with a `gradients` statement, as `.opg`.
    Mlp,
    /// Transformer layers already tagged by tpu.replicate, as a GraphDef.
    Transformer,
}

/// How to read an input file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    /// `.opg` text.
    Opg,
    /// TensorFlow GraphDef, protobuf text.
    Pbtxt,
    /// TensorFlow GraphDef, binary protobuf.
    Pb,
}

/// Gradient colocation cluster naming.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GradientPolicyArg {
    /// The seed's rule: `C.uid`, then `C.uid.uid2` for a gradient of a gradient.
    Nested,
    /// TensorFlow 2.x: the root cluster plus the latest uid.
    Flat,
}

/// Whether independent `CrossReplicaSum`s are fused into one all-reduce
/// (the optional `fuse-all-reduce` pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FusionArg {
    /// On for `--backend pjrt` and `--format stablehlo`, off otherwise.
    Auto,
    /// Always (also for graph outputs and the simulator).
    On,
    /// Never, unless `--passes` names `fuse-all-reduce`.
    Off,
}

/// Options shared by commands that rewrite.
#[derive(Debug, Clone, clap::Args)]
pub struct RewriteArgs {
    /// Run only these passes (comma-separated, in pipeline order; `help` lists them).
    #[arg(long)]
    pub passes: Option<String>,
    /// Print the module (to stderr) after every pass.
    #[arg(long)]
    pub print_after_all: bool,
    /// Print the module (to stderr) after this pass (repeatable, or comma-separated).
    #[arg(long, value_name = "PASS", value_delimiter = ',')]
    pub print_after: Vec<String>,
    /// Print the module (to stderr) before this pass (repeatable, or comma-separated).
    #[arg(long, value_name = "PASS", value_delimiter = ',')]
    pub print_before: Vec<String>,
    /// How gradient ops colocated with outside-compilation ops are clustered.
    #[arg(long, value_enum, default_value_t = GradientPolicyArg::Nested)]
    pub gradient_cluster_policy: GradientPolicyArg,
    /// Run the IR verifier after every pass, not just after the last one
    /// (slower; names the pass that broke the graph).
    #[arg(long)]
    pub verify_each_pass: bool,
    /// After the passes, rewrite TF1 control flow (Switch/Merge/Enter/Exit/
    /// NextIteration/LoopCond) into functional While/If ops with their
    /// functions (docs/functionalize.md). Always done for `--format
    /// stablehlo` and `--backend pjrt`.
    #[arg(long)]
    pub functionalize: bool,
    /// Fuse independent CrossReplicaSums of a cluster into one all-reduce
    /// (up to 30 MiB each, as XLA's combiner does). `auto`: on for
    /// `--backend pjrt` and `--format stablehlo`, where it saves one
    /// rendezvous of every replica per sum; off otherwise. Each element is
    /// still summed on its own.
    #[arg(long, value_enum, default_value_t = FusionArg::Auto)]
    pub all_reduce_fusion: FusionArg,
    /// For a SavedModel input (a directory, or its `saved_model.pb`): the
    /// function to load, a signature key or a `tf.function` attribute of
    /// the saved object such as `train_step` (default: the
    /// `serving_default` signature; an unknown name lists them).
    #[arg(long, value_name = "NAME")]
    pub function: Option<String>,
}

/// Options shared by commands that lower.
#[derive(Debug, Clone, clap::Args)]
pub struct LowerArgs {
    /// The TPU topology, HOSTSxCORES_PER_HOST.
    #[arg(long, default_value = "1x8")]
    pub topology: String,
    /// Number of replicas (default: the graph's own).
    #[arg(long)]
    pub num_replicas: Option<u32>,
    /// Logical cores per replica (default: the graph's own).
    #[arg(long)]
    pub cores_per_replica: Option<u32>,
    /// An explicit device assignment: `task:core` per logical core, `,` between cores, `;` between replicas.
    #[arg(long)]
    pub device_assignment: Option<String>,
    /// Device iterations per run before returning to the host (at least 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub steps_per_run: u32,
    /// Print how long each phase took (load, each pass, lowering; on PJRT
    /// also plugin load, StableHLO emit, XLA compile, transfers and execute)
    /// to stderr.
    #[arg(long)]
    pub time_passes: bool,
    /// How a StableHLO device program reaches its outside-compilation ops:
    /// a host callback (custom_call, XLA FFI), host send/recv (TPU/GPU,
    /// untested), or one module per stage. Default: callback for `lower`
    /// and for a CPU plugin; stages for other plugins (docs/xla.md).
    #[arg(long, value_enum)]
    pub host_transfer: Option<crate::xla::stablehlo::HostTransfer>,
    /// Replicate a single-device training step N ways (data parallel): batch
    /// inputs are global batches split along dimension 0, gradients and the
    /// loss are averaged over the replicas, variables are mirrored (docs/tf2.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub data_parallel: Option<u32>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Parse and verify files; exit 1 if any has an error.
    Check {
        /// Files to check (`-` for standard input).
        #[arg(required = true)]
        files: Vec<String>,
        /// Input format (default: by extension, or sniffed on standard input).
        #[arg(long, value_enum)]
        input_format: Option<InputFormat>,
        /// Make an unknown op type (one neither TensorFlow 2.21 nor
        /// tpu-rewrite registers) an error instead of a warning.
        #[arg(long)]
        strict: bool,
    },
    /// Print a file in canonical form, in its own format (`.opg`, `.pbtxt` or `.pb`).
    Fmt {
        /// The file (`-` for standard input).
        file: String,
        /// Input format (default: by extension, or sniffed on standard input).
        #[arg(long, value_enum)]
        input_format: Option<InputFormat>,
        /// Rewrite the file in place.
        #[arg(long, conflicts_with = "output")]
        write: bool,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Print a file as text, JSON, DOT or a GraphDef.
    Emit {
        /// The file (`-` for standard input).
        file: String,
        /// Input format (default: by extension; `.pbtxt`/`.pb` are GraphDefs).
        #[arg(long, value_enum)]
        input_format: Option<InputFormat>,
        /// Output format (default: by the extension of `-o`, else text).
        #[arg(long, value_enum)]
        format: Option<GraphFormat>,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Run the rewrite passes and print the tagged graph.
    Rewrite {
        /// The file (`-` for standard input).
        file: String,
        /// Input format (default: by extension).
        #[arg(long, value_enum)]
        input_format: Option<InputFormat>,
        #[command(flatten)]
        rewrite: RewriteArgs,
        /// Print a per-pass timing table (to stderr).
        #[arg(long)]
        time_passes: bool,
        /// Output format of the rewritten graph (`pbtxt`/`pb`: a GraphDef, as
        /// TensorFlow's tpu.replicate tags it; default: by the extension of
        /// `-o`, else text).
        #[arg(long, value_enum)]
        format: Option<GraphFormat>,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Rewrite and lower to one program per device; print the lowered module.
    Lower {
        /// The file (`-` for standard input).
        file: String,
        /// Input format (default: by extension).
        #[arg(long, value_enum)]
        input_format: Option<InputFormat>,
        #[command(flatten)]
        rewrite: RewriteArgs,
        #[command(flatten)]
        lower: LowerArgs,
        /// Output format of the lowered module (`pbtxt`/`pb`: one GraphDef per
        /// program, into the directory `-o` names; default: by the extension
        /// of `-o`, else text).
        #[arg(long, value_enum)]
        format: Option<EmitFormat>,
        /// Print the strategy facts of the device assignment instead of the programs.
        #[arg(long)]
        describe: bool,
        /// Print one program per replica and logical core, with the replica
        /// bound, instead of the SPMD programs (a view for reading).
        #[arg(long)]
        expand: bool,
        /// With --describe: the global batch size for the per-replica batch sizes.
        #[arg(long)]
        global_batch_size: Option<u64>,
        /// For a plain graph (no replicate cluster): the tensors its step
        /// computes, `node:output` (or `^node` to run an op), as `run
        /// --fetch` takes them; the ops no fetch needs are left out
        /// (default: every sink of the graph).
        #[arg(long = "fetch", value_name = "TENSOR")]
        fetch: Vec<String>,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Rewrite, lower and execute on a mesh of simulated devices.
    Run(Box<run::RunArgs>),
    /// List the rewrite passes in pipeline order, each with its meaning.
    Passes,
    /// List the supported ops with their dtypes and backends.
    Ops {
        /// Print a Markdown table (as docs/ops.md holds it).
        #[arg(long)]
        markdown: bool,
        /// Print the coverage of TensorFlow's XLA op set: each op's kernel,
        /// gradient and lowering, or what it lacks, and the covered/total count.
        #[arg(long, conflicts_with = "markdown")]
        coverage: bool,
    },
    /// Print the command-line reference as Markdown (docs/cli-reference.md).
    CliReference,
    /// Generate a synthetic training-step graph for benchmarks.
    Gen {
        /// Approximate number of ops.
        #[arg(long, default_value_t = 1000)]
        ops: usize,
        /// Which model: an MLP in `.opg`, or a transformer as TensorFlow's
        /// tpu.replicate would tag it (a GraphDef).
        #[arg(long, value_enum, default_value_t = GenModel::Mlp)]
        model: GenModel,
        /// Output format (default: by the extension of `-o`, else text); a
        /// transformer is written as a GraphDef (`pbtxt` or `pb`).
        #[arg(long, value_enum)]
        format: Option<GraphFormat>,
        /// Number of replicas of the replicate region.
        #[arg(long, default_value_t = 8)]
        replicas: usize,
        /// Random seed; the same seed gives the same graph.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

/// Runs the CLI on the process arguments.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    run(cli)
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    crate::xla::stderr::set_verbose(cli.verbose);
    match cli.command {
        Command::Check { files, input_format, strict } => check(&files, input_format, strict),
        Command::Fmt { file, input_format, write, output } => {
            let input = InputPath::parse(&file);
            let Some(loaded) = formats::load_verified(&input, input_format, &progress::DelayedBar::new()) else {
                return ExitCode::from(1);
            };
            let format = match loaded.format {
                InputFormat::Opg => EmitFormat::Text,
                InputFormat::Pbtxt => EmitFormat::Pbtxt,
                InputFormat::Pb => EmitFormat::Pb,
            };
            let text = match formats::emit_bytes(&loaded.module, format) {
                Ok(bytes) => bytes,
                Err(errors) => {
                    report(errors, &loaded.source);
                    return ExitCode::from(1);
                }
            };
            let target = if write {
                match &input {
                    InputPath::File(p) => Some(p.clone()),
                    InputPath::Stdin => {
                        return fail_with(CliError::usage("--write needs a file, not standard input"), 2);
                    }
                }
            } else {
                output
            };
            let code = finish(write_output(target.as_deref(), &text));
            // The process exits next: leave the module and its text to the OS.
            std::mem::forget((loaded, text));
            code
        }
        Command::Emit { file, input_format, format, output } => {
            let format = match graph_format(format, output.as_deref(), "emit") {
                Ok(f) => f,
                Err(code) => return code,
            };
            let input = InputPath::parse(&file);
            let bar = progress::DelayedBar::new();
            let Some(loaded) = formats::load_verified(&input, input_format, &bar) else { return ExitCode::from(1) };
            drop(bar);
            formats::emit_and_exit(loaded, format, output.as_deref())
        }
        Command::Rewrite { file, input_format, rewrite, time_passes, format, output } => {
            let format = match graph_format(format, output.as_deref(), "rewrite") {
                Ok(f) => f,
                Err(code) => return code,
            };
            pipeline::rewrite_command(&file, input_format, &rewrite, time_passes, format, output)
        }
        Command::Lower {
            file,
            input_format,
            rewrite,
            lower,
            format,
            describe,
            expand,
            global_batch_size,
            fetch,
            output,
        } => {
            let format = EmitFormat::resolve(format, output.as_deref());
            let describe = describe.then_some(global_batch_size);
            let view = if expand { pipeline::LoweredView::Expanded } else { pipeline::LoweredView::Spmd };
            let what = pipeline::LowerInput { file: &file, format: input_format, fetch: &fetch };
            pipeline::lower_command(&what, &rewrite, &lower, (format, view), describe, output)
        }
        Command::Run(args) => run::run_command(*args),
        Command::CliReference => finish(write_output(None, reference::markdown().as_bytes())),
        Command::Passes => finish(write_output(None, crate::passes::pass_list().as_bytes())),
        Command::Ops { markdown, coverage } => {
            let text = match (markdown, coverage) {
                (_, true) => coverage::plain_table(),
                (true, false) => ops::markdown_table() + &coverage::markdown_section(),
                (false, false) => ops::plain_table(),
            };
            finish(write_output(None, text.as_bytes()))
        }
        Command::Gen { ops, model, format, replicas, seed, output } => {
            if replicas == 0 {
                return fail_with(CliError::usage("--replicas must be at least 1"), 2);
            }
            let format = match graph_format(format, output.as_deref(), "gen") {
                Ok(f) => f,
                Err(code) => return code,
            };
            let config = gen::GenConfig { ops, replicas, seed, ..gen::GenConfig::default() };
            match gen::generate_as(model, format, &config) {
                Ok(bytes) => finish(write_output(output.as_deref(), &bytes)),
                Err(message) => fail_with(CliError::usage(message), 2),
            }
        }
    }
}

/// Exit code for an output write: 0, or 1 with its diagnostic.
fn finish(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// Prints a command-line error (no source to point into); exit code 1.
pub fn fail(error: CliError) -> ExitCode {
    fail_with(error, 1)
}

/// Prints a command-line error with the given exit code.
pub(crate) fn fail_with(error: CliError, code: u8) -> ExitCode {
    let source = Arc::new(WindowedSource::new("", b""));
    errprint!("{}", render(Box::new(error), &source, Style::Terminal).text);
    ExitCode::from(code)
}

/// A parsed and verified input with its source for later diagnostics.
pub struct Loaded {
    /// The module (a GraphDef imports as one graph `@main`).
    pub module: Module,
    /// The input text, for diagnostics (empty for a binary GraphDef).
    pub source: Arc<WindowedSource>,
    /// The format the input was read as.
    pub format: InputFormat,
    /// For a SavedModel: the function's captured variables and checkpoint.
    pub saved_model: Option<crate::tf::saved_model::Captured>,
}

/// The most diagnostics printed for one input; the rest are counted.
const MAX_SHOWN: usize = 50;

/// What makes two diagnostics the same: code, message and labelled spans.
fn identity_of(d: &AnyDiagnostic) -> (String, String, Vec<(usize, usize)>) {
    let code = d.code().map(|c| c.to_string()).unwrap_or_default();
    let spans = d.labels().map(|l| l.map(|l| (l.offset(), l.len())).collect()).unwrap_or_default();
    (code, d.to_string(), spans)
}

/// Prints diagnostics, each distinct one once (a rewrite-made op that
/// stands for a user's op may repeat its error); returns true if any is an
/// error.
pub fn report(diagnostics: Vec<AnyDiagnostic>, source: &Arc<WindowedSource>) -> bool {
    let mut any_error = false;
    let mut seen = std::collections::HashSet::new();
    let diagnostics: Vec<AnyDiagnostic> = diagnostics.into_iter().filter(|d| seen.insert(identity_of(d))).collect();
    let total = diagnostics.len();
    for (i, d) in diagnostics.into_iter().enumerate() {
        let is_error = d.severity().unwrap_or(miette::Severity::Error) == miette::Severity::Error;
        any_error |= is_error;
        if i < MAX_SHOWN {
            errprint!("{}", render(d, source, Style::Terminal).text);
        }
    }
    if total > MAX_SHOWN {
        errln!("… and {} more diagnostics", total - MAX_SHOWN);
    }
    any_error
}

/// Reads an input, printing the error if it cannot be read.
fn read_input(input: &InputPath) -> Option<Vec<u8>> {
    input
        .read()
        .map_err(|e| {
            fail(CliError::Read { path: input.display_name(), reason: e.to_string() });
        })
        .ok()
}

/// Parses and verifies `.opg` bytes read from `name`, printing diagnostics
/// (and `note` after a syntax error: how the format was chosen).
/// Returns `None` (after printing) when the input has errors.
fn load_bytes(name: String, bytes: Vec<u8>, note: Option<String>) -> Option<Loaded> {
    let parsed = parse_and_verify(&bytes);
    // The module does not borrow the text, so the bytes move into the source.
    let source = Arc::new(WindowedSource::from_vec(name, bytes));
    let (module, errors) = match parsed {
        Ok(parsed) => parsed,
        Err(diag) => {
            report(vec![diag], &source);
            if let Some(note) = note {
                eprintln!("note: {note}");
            }
            return None;
        }
    };
    let diags: Vec<AnyDiagnostic> = errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect();
    if report(diags, &source) {
        return None;
    }
    Some(Loaded { module, source, format: InputFormat::Opg, saved_model: None })
}

/// Parses and verifies `.opg` bytes; a syntax error comes back as the `Err`.
pub fn parse_and_verify(bytes: &[u8]) -> Result<(Module, Vec<IrError>), AnyDiagnostic> {
    crate::ir::parse_module(bytes).map_err(|e| Box::new(e) as AnyDiagnostic)
}

fn check(files: &[String], format: Option<InputFormat>, strict: bool) -> ExitCode {
    let mut failed = false;
    for file in files {
        let input = InputPath::parse(file);
        match formats::load_verified_strict(&input, format, &progress::DelayedBar::new(), strict) {
            Some(loaded) => {
                let nodes = loaded.module.node_count();
                errln!("{}: ok ({} graph(s), {nodes} node(s))", input.display_name(), loaded.module.graphs.len());
                // The process is about to exit: skip freeing a possibly huge module.
                std::mem::forget(loaded);
            }
            None => failed = true,
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
