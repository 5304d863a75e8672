//! The abstract syntax tree of an `.opg` module.
//!
//! The AST borrows from the source text (`'s`), so building it costs little
//! more than the token stream. Literals are already decoded (escapes,
//! integers), except float literals, which keep their text so that the IR
//! can parse them straight to `f32` or `f64` without double rounding.
//! Every item carries its [`Span`].

use std::borrow::Cow;

use super::span::Span;

/// A whole file: one or more graphs.
#[derive(Debug, Clone, PartialEq)]
pub struct Module<'s> {
    /// The `//` comment lines at the top of the file, kept by the printer.
    pub header: Vec<&'s str>,
    /// The graphs, in source order.
    pub graphs: Vec<Graph<'s>>,
}

/// `graph @name (attrs) { body }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph<'s> {
    /// The graph's name, without `@`.
    pub name: Cow<'s, str>,
    /// Where the name is written.
    pub name_span: Span,
    /// The graph's attributes.
    pub attrs: Vec<Attr<'s>>,
    /// The statements of the graph, in source order.
    pub body: Vec<Stmt<'s>>,
    /// The whole graph.
    pub span: Span,
}

/// A statement of a graph or region body.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt<'s> {
    /// An op node.
    Op(OpStmt<'s>),
    /// A replicate region.
    Replicate(Replicate<'s>),
    /// An outside_compilation block.
    OutsideCompilation(OutsideCompilation<'s>),
    /// A gradients statement.
    Gradients(Gradients<'s>),
    /// The `return` of a replicate region.
    Return(Return<'s>),
}

/// A node name with its span, e.g. `%gradients/MatMul_grad/MatMul`.
#[derive(Debug, Clone, PartialEq)]
pub struct Name<'s> {
    /// The name without `%`, unquoted.
    pub text: Cow<'s, str>,
    /// Where the name is written, `%` included.
    pub span: Span,
}

/// `%name = OpType(inputs) on "device" {attrs}`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpStmt<'s> {
    /// The node's name.
    pub name: Name<'s>,
    /// The op type, such as `MatMul`.
    pub op_type: &'s str,
    /// Where the op type is written.
    pub op_type_span: Span,
    /// The operands, data and control, in source order.
    pub inputs: Vec<InputRef<'s>>,
    /// The device string after `on`, decoded, with its span.
    pub device: Option<(Cow<'s, str>, Span)>,
    /// The attributes.
    pub attrs: Vec<Attr<'s>>,
    /// The whole statement.
    pub span: Span,
}

/// An operand: `%a`, `%a:1`, or a control input `^%a`.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRef<'s> {
    /// Whether the operand is a control input (`^`).
    pub control: bool,
    /// The producer's name.
    pub name: Name<'s>,
    /// The output index after `:`, if written.
    pub output: Option<u32>,
    /// The whole operand.
    pub span: Span,
}

/// `key = value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Attr<'s> {
    /// The attribute's name.
    pub key: Cow<'s, str>,
    /// Where the name is written.
    pub key_span: Span,
    /// The attribute's value.
    pub value: Value<'s>,
    /// The whole `key = value`.
    pub span: Span,
}

/// A dtype as written: a name such as `f32`, or `dtype(N)`.
#[derive(Debug, Clone, PartialEq)]
pub enum DTypeRef<'s> {
    /// A dtype name such as `f32`, with its span.
    Named(&'s str, Span),
    /// `dtype(N)`: a TensorFlow `DataType` number, with its span.
    Number(i64, Span),
}

/// The values of a tensor literal.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorBody<'s> {
    /// `[v0, v1, ...]`, the repeated `*_val` fields of a TensorProto.
    Values(Vec<Value<'s>>),
    /// `bytes "..."`, the raw `tensor_content`.
    Bytes(Cow<'s, [u8]>, Span),
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'s> {
    /// A string literal, escapes decoded, as bytes.
    Str(Cow<'s, [u8]>, Span),
    /// An integer literal.
    Int(i64, Span),
    /// The literal's text: `1.5`, `-2e-3`, `-inf`.
    Float(&'s str, Span),
    /// `true` or `false`.
    Bool(bool, Span),
    /// A bare identifier: a dtype name, or `inf` / `nan` in a float context.
    Ident(&'s str, Span),
    /// `dtype(N)`: a dtype by its TensorFlow `DataType` number.
    DTypeNumber(i64, Span),
    /// `shape[2, ?, 3]`; `None` is `shape[*]` (unknown rank).
    Shape(Option<Vec<i64>>, Span),
    /// `tensor(dtype, [dims]) body`: a tensor literal.
    Tensor {
        /// The element type.
        dtype: DTypeRef<'s>,
        /// The size of each dimension.
        shape: Vec<i64>,
        /// The values or raw content.
        body: TensorBody<'s>,
        /// The whole literal.
        span: Span,
    },
    /// `[v0, v1, ...]`: a list of values.
    List(Vec<Value<'s>>, Span),
    /// `func "name" {attrs}`: a function reference.
    Func {
        /// The function's name.
        name: Cow<'s, str>,
        /// The attributes the function is instantiated with.
        attrs: Vec<Attr<'s>>,
        /// The whole reference.
        span: Span,
    },
    /// `placeholder "name"`: a reference to an enclosing function's attribute.
    Placeholder(Cow<'s, str>, Span),
}

impl Value<'_> {
    /// The span of the value.
    pub fn span(&self) -> Span {
        match self {
            Value::Str(_, s)
            | Value::Int(_, s)
            | Value::Float(_, s)
            | Value::Bool(_, s)
            | Value::Ident(_, s)
            | Value::DTypeNumber(_, s)
            | Value::Shape(_, s)
            | Value::List(_, s)
            | Value::Placeholder(_, s) => *s,
            Value::Tensor { span, .. } | Value::Func { span, .. } => *span,
        }
    }
}

/// One computation input of a replicate region: `%a = [%x0, %x1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicateInput<'s> {
    /// The region input's name, used inside the region.
    pub name: Name<'s>,
    /// One operand per replica, in replica order.
    pub operands: Vec<InputRef<'s>>,
    /// The whole input.
    pub span: Span,
}

/// `replicate (attrs) (inputs) { body return ... }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Replicate<'s> {
    /// The region's attributes, such as `num_replicas`.
    pub attrs: Vec<Attr<'s>>,
    /// The computation inputs.
    pub inputs: Vec<ReplicateInput<'s>>,
    /// The statements of the region, its `return` included.
    pub body: Vec<Stmt<'s>>,
    /// Where `replicate` is written.
    pub keyword_span: Span,
    /// The whole region.
    pub span: Span,
}

/// `outside_compilation (attrs) { body }`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutsideCompilation<'s> {
    /// The block's attributes.
    pub attrs: Vec<Attr<'s>>,
    /// The statements of the block.
    pub body: Vec<Stmt<'s>>,
    /// Where `outside_compilation` is written.
    pub keyword_span: Span,
    /// The whole block.
    pub span: Span,
}

/// `%g = gradients(ys = [...], xs = [...], grad_ys = [...])`.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradients<'s> {
    /// The name of the node that holds the gradients.
    pub name: Name<'s>,
    /// The values to differentiate.
    pub ys: Vec<InputRef<'s>>,
    /// The values to differentiate with respect to; output `i` is the gradient for `xs[i]`.
    pub xs: Vec<InputRef<'s>>,
    /// Initial gradients, one per y; `None` means ones.
    pub grad_ys: Option<Vec<InputRef<'s>>>,
    /// The whole statement.
    pub span: Span,
}

/// `return %a, %b:1, ^%c` at the end of a replicate body.
#[derive(Debug, Clone, PartialEq)]
pub struct Return<'s> {
    /// The region's outputs, in order.
    pub values: Vec<InputRef<'s>>,
    /// The whole statement.
    pub span: Span,
}
