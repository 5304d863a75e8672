//! Errors and warnings of the GraphDef importer and exporter.
//!
//! One enum for the layer, codes `tpu_rewrite::import::*` (exporting shares
//! it: what a GraphDef cannot hold is an error of the same layer). Spans are byte
//! ranges into the `.pbtxt` text; errors about a binary `.pb` carry
//! [`Span::DETACHED`] because the binary decoder keeps no offsets.
//! Syntax and decoding errors stop the import; the others are collected.

use miette::Diagnostic;
use thiserror::Error;

use crate::syntax::Span;

impl ImportError {
    /// A binary decoding error, with help that fits its reason: input that
    /// ends inside a field is truncated; anything else may not be binary.
    pub fn decode(reason: impl Into<String>) -> ImportError {
        let reason = reason.into();
        let truncated = ["underflow", "unexpected end", "truncated", "EOF"].iter().any(|w| reason.contains(w));
        let help = if truncated {
            "the input ends inside a field: the file is cut short (an interrupted copy or download?), or not a \
             binary GraphDef"
        } else {
            "a binary GraphDef is expected here; a text GraphDef is read with `--input-format pbtxt` (or a `.pbtxt` \
             name)"
        };
        ImportError::Decode { reason, help: help.to_string() }
    }
}

/// An error or warning about a GraphDef.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum ImportError {
    /// The input is larger than the 4 GiB that spans can address.
    #[error("the input is {size} bytes; at most 4 GiB are supported")]
    #[diagnostic(code(tpu_rewrite::import::too_large))]
    TooLarge {
        /// The input size in bytes.
        size: usize,
    },

    /// The binary protobuf does not decode as a GraphDef.
    #[error("not a binary GraphDef: {reason}")]
    #[diagnostic(code(tpu_rewrite::import::decode), help("{help}"))]
    Decode {
        /// The decoder's reason.
        reason: String,
        /// What the reason suggests (see [`ImportError::decode`]).
        help: String,
    },

    /// A token the text format does not allow at this place.
    #[error("expected {expected}, found {found}")]
    #[diagnostic(code(tpu_rewrite::import::unexpected_token))]
    UnexpectedToken {
        /// What the grammar allows here.
        expected: String,
        /// What the text has.
        found: String,
        /// The offending text.
        #[label("expected {expected}")]
        span: Span,
    },

    /// A byte that starts no token of the text format.
    #[error("invalid character in protobuf text")]
    #[diagnostic(code(tpu_rewrite::import::invalid_character))]
    InvalidCharacter {
        /// The offending text.
        #[label("not valid here")]
        span: Span,
    },

    /// A string literal without its closing quote.
    #[error("unterminated string literal")]
    #[diagnostic(code(tpu_rewrite::import::unterminated_string), help("strings end on the same line they start"))]
    UnterminatedString {
        /// The offending text.
        #[label("this string has no closing quote")]
        span: Span,
    },

    /// A malformed escape sequence inside a string literal.
    #[error("invalid escape sequence in a string")]
    #[diagnostic(
        code(tpu_rewrite::import::invalid_escape),
        help(
            "escapes are \\n \\r \\t \\\\ \\' \\\" \\a \\b \\f \\v \\? \\ooo (octal), \\xNN, \\uNNNN and \\UNNNNNNNN"
        )
    )]
    InvalidEscape {
        /// The offending text.
        #[label("here")]
        span: Span,
    },

    /// A field name the message type does not have.
    #[error("`{message}` has no field `{field}`")]
    #[diagnostic(code(tpu_rewrite::import::unknown_field), help("known fields: {known}"))]
    UnknownField {
        /// The message type, or what went wrong.
        message: &'static str,
        /// The field name.
        field: String,
        /// The message type's field names.
        known: &'static str,
        /// The offending text.
        #[label("unknown field")]
        span: Span,
    },

    /// A number that does not parse or does not fit the field's type.
    #[error("invalid {kind} value `{text}`")]
    #[diagnostic(code(tpu_rewrite::import::invalid_number))]
    InvalidNumber {
        /// The number type.
        kind: &'static str,
        /// The text as written.
        text: String,
        /// The offending text.
        #[label("not a valid {kind}")]
        span: Span,
    },

    /// An enum value name the enum does not have.
    #[error("unknown {enum_name} value `{value}`")]
    #[diagnostic(code(tpu_rewrite::import::unknown_enum_value), help("{help}"))]
    UnknownEnumValue {
        /// The enum type.
        enum_name: &'static str,
        /// The value as written.
        value: String,
        /// The closest name ("did you mean"), else the names there are.
        help: String,
        /// The offending text.
        #[label("not a {enum_name}")]
        span: Span,
    },

    /// A `string` field (not `bytes`) whose value is not UTF-8.
    #[error("field `{field}` must be UTF-8 text")]
    #[diagnostic(code(tpu_rewrite::import::invalid_utf8))]
    InvalidUtf8 {
        /// The field name.
        field: &'static str,
        /// The offending text.
        #[label("not UTF-8 after unescaping")]
        span: Span,
    },

    /// Messages nested deeper than the parser allows.
    #[error("messages nested deeper than {limit} levels")]
    #[diagnostic(code(tpu_rewrite::import::nesting_too_deep))]
    NestingTooDeep {
        /// The nesting limit.
        limit: usize,
        /// The offending text.
        #[label("too deep here")]
        span: Span,
    },

    /// Two nodes share a name; the second one is dropped.
    #[error("duplicate node name `{name}`")]
    #[diagnostic(code(tpu_rewrite::import::duplicate_node), help("node names are unique within a GraphDef"))]
    DuplicateNode {
        /// The name.
        name: String,
        /// The offending text.
        #[label("defined again here")]
        span: Span,
    },

    /// An input names a node the GraphDef does not have; the input is dropped.
    #[error("node `{node}` has input `{input}`, but no node is named `{name}`")]
    #[diagnostic(code(tpu_rewrite::import::unknown_input))]
    UnknownInput {
        /// The node's name.
        node: String,
        /// The input string as written.
        input: String,
        /// The name.
        name: String,
        /// The offending text.
        #[label("no such node")]
        span: Span,
    },

    /// A malformed part of a function of the library: an input that names
    /// no argument or node, an unknown output argument, a name used twice,
    /// an output argument without a `ret` entry. It is dropped.
    #[error("function `{function}`: `{node}`: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::import::function_body),
        help("inside a function an input is `arg`, `node:output_arg:index` or `^node`")
    )]
    FunctionBody {
        /// The function's name.
        function: String,
        /// The node or argument.
        node: String,
        /// What is wrong.
        reason: String,
        /// The library (function bodies carry no spans).
        #[label("here")]
        span: Span,
    },

    /// An input string that is not `name`, `name:k` or `^name`; it is dropped.
    #[error("node `{node}` has malformed input `{input}`")]
    #[diagnostic(
        code(tpu_rewrite::import::malformed_input),
        help("inputs are `name` (output 0), `name:k` (output k) or `^name` (control)")
    )]
    MalformedInput {
        /// The node's name.
        node: String,
        /// The input string as written.
        input: String,
        /// The offending text.
        #[label("malformed")]
        span: Span,
    },

    /// A data input written after a control input. The IR keeps data inputs
    /// before control inputs, so the export moves it.
    #[error("node `{node}` has data input `{input}` after a control input")]
    #[diagnostic(
        code(tpu_rewrite::import::data_after_control),
        severity(Warning),
        help("TensorFlow lists data inputs first; the export will too")
    )]
    DataAfterControl {
        /// The node's name.
        node: String,
        /// The input string as written.
        input: String,
        /// The offending text.
        #[label("after a `^` input")]
        span: Span,
    },

    /// A shape with a dimension below -1 (-1 is unknown), or a tensor with a
    /// negative dimension.
    #[error("node `{node}`: {what} has dimension {dim}")]
    #[diagnostic(
        code(tpu_rewrite::import::negative_dim),
        help("dimensions are sizes >= 0; a shape attribute may use -1 for an unknown one")
    )]
    NegativeDim {
        /// The node whose shape or tensor it is.
        node: String,
        /// Which shape or tensor.
        what: String,
        /// The negative dimension.
        dim: i64,
        /// The node.
        #[label("in this node")]
        span: Span,
    },

    /// A part of a value the IR cannot hold; it is dropped.
    #[error("node `{node}`: {what} is not supported and is dropped")]
    #[diagnostic(code(tpu_rewrite::import::unsupported_value), severity(Warning))]
    UnsupportedValue {
        /// The node's name.
        node: String,
        /// What is dropped or cannot be written.
        what: String,
        /// The offending text.
        #[label("here")]
        span: Span,
    },

    /// prost-reflect's text format parser rejected the function library or
    /// the debug info (the parts of a GraphDef it reads).
    #[error("{message}")]
    #[diagnostic(code(tpu_rewrite::import::text_format))]
    TextFormat {
        /// prost-reflect's message.
        message: String,
        /// Its label for the offending text.
        label: String,
        /// prost-reflect's help, when it has one.
        #[help]
        help: Option<String>,
        /// The offending text.
        #[label("{label}")]
        span: Span,
    },

    /// An attribute value a GraphDef cannot hold (a list inside a list, a
    /// placeholder inside a list); exporting it would drop it.
    #[error("node `{node}`: {what} cannot be written to a GraphDef")]
    #[diagnostic(
        code(tpu_rewrite::import::not_representable),
        help("GraphDef attribute lists hold scalars, shapes, tensors and functions only")
    )]
    NotRepresentable {
        /// The node's name.
        node: String,
        /// What cannot be written.
        what: String,
        /// The node.
        #[label("here")]
        span: Span,
    },

    /// A node a GraphDef cannot hold: the graph still has regions or
    /// gradients calls, which the rewrite passes turn into plain ops.
    #[error("node `{node}` is a {kind}, which a GraphDef cannot hold")]
    #[diagnostic(
        code(tpu_rewrite::import::not_flat),
        help("run the rewrite passes (`tpu-rewrite rewrite`) before exporting a GraphDef")
    )]
    NotFlat {
        /// The node's name.
        node: String,
        /// The number type.
        kind: &'static str,
        /// The offending text.
        #[label("here")]
        span: Span,
    },

    /// A broken internal invariant: a bug in tpu-rewrite, not in the input.
    #[error("internal error (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::import::internal), help("please report this with the input that caused it"))]
    Internal {
        /// The message type, or what went wrong.
        message: String,
        /// The offending text.
        #[label("while handling this")]
        span: Span,
    },
}

impl ImportError {
    /// Converts prost-reflect's text format error about text that starts at
    /// byte `offset` of the whole input into an error located in the input.
    pub fn from_text_format(e: &prost_reflect::text_format::ParseError, offset: usize) -> Self {
        use miette::Diagnostic as _;
        let first = e.labels().and_then(|mut labels| labels.next());
        let (span, label) = match first {
            Some(l) => {
                (Span::new(offset + l.offset(), offset + l.offset() + l.len()), l.label().unwrap_or("here").to_string())
            }
            None => (Span::new(offset, offset), "here".to_string()),
        };
        ImportError::TextFormat { message: e.to_string(), label, help: e.help().map(|h| h.to_string()), span }
    }
}
