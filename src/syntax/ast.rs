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
    pub graphs: Vec<Graph<'s>>,
}

/// `graph @name (attrs) { body }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph<'s> {
    pub name: Cow<'s, str>,
    pub name_span: Span,
    pub attrs: Vec<Attr<'s>>,
    pub body: Vec<Stmt<'s>>,
    pub span: Span,
}

/// A statement of a graph or region body.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt<'s> {
    Op(OpStmt<'s>),
    Replicate(Replicate<'s>),
    OutsideCompilation(OutsideCompilation<'s>),
    Gradients(Gradients<'s>),
    Return(Return<'s>),
}

/// A node name with its span, e.g. `%gradients/MatMul_grad/MatMul`.
#[derive(Debug, Clone, PartialEq)]
pub struct Name<'s> {
    pub text: Cow<'s, str>,
    pub span: Span,
}

/// `%name = OpType(inputs) on "device" {attrs}`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpStmt<'s> {
    pub name: Name<'s>,
    pub op_type: &'s str,
    pub op_type_span: Span,
    pub inputs: Vec<InputRef<'s>>,
    pub device: Option<(Cow<'s, str>, Span)>,
    pub attrs: Vec<Attr<'s>>,
    pub span: Span,
}

/// An operand: `%a`, `%a:1`, or a control input `^%a`.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRef<'s> {
    pub control: bool,
    pub name: Name<'s>,
    pub output: Option<u32>,
    pub span: Span,
}

/// `key = value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Attr<'s> {
    pub key: Cow<'s, str>,
    pub key_span: Span,
    pub value: Value<'s>,
    pub span: Span,
}

/// A dtype as written: a name such as `f32`, or `dtype(N)`.
#[derive(Debug, Clone, PartialEq)]
pub enum DTypeRef<'s> {
    Named(&'s str, Span),
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
    Str(Cow<'s, [u8]>, Span),
    Int(i64, Span),
    /// The literal's text: `1.5`, `-2e-3`, `-inf`.
    Float(&'s str, Span),
    Bool(bool, Span),
    /// A bare identifier: a dtype name, or `inf` / `nan` in a float context.
    Ident(&'s str, Span),
    DTypeNumber(i64, Span),
    /// `shape[2, ?, 3]`; `None` is `shape[*]` (unknown rank).
    Shape(Option<Vec<i64>>, Span),
    Tensor {
        dtype: DTypeRef<'s>,
        shape: Vec<i64>,
        body: TensorBody<'s>,
        span: Span,
    },
    List(Vec<Value<'s>>, Span),
    Func {
        name: Cow<'s, str>,
        attrs: Vec<Attr<'s>>,
        span: Span,
    },
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
    pub name: Name<'s>,
    pub operands: Vec<InputRef<'s>>,
    pub span: Span,
}

/// `replicate (attrs) (inputs) { body return ... }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Replicate<'s> {
    pub attrs: Vec<Attr<'s>>,
    pub inputs: Vec<ReplicateInput<'s>>,
    pub body: Vec<Stmt<'s>>,
    pub keyword_span: Span,
    pub span: Span,
}

/// `outside_compilation (attrs) { body }`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutsideCompilation<'s> {
    pub attrs: Vec<Attr<'s>>,
    pub body: Vec<Stmt<'s>>,
    pub keyword_span: Span,
    pub span: Span,
}

/// `%g = gradients(ys = [...], xs = [...], grad_ys = [...])`.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradients<'s> {
    pub name: Name<'s>,
    pub ys: Vec<InputRef<'s>>,
    pub xs: Vec<InputRef<'s>>,
    pub grad_ys: Option<Vec<InputRef<'s>>>,
    pub span: Span,
}

/// `return %a, %b:1, ^%c` at the end of a replicate body.
#[derive(Debug, Clone, PartialEq)]
pub struct Return<'s> {
    pub values: Vec<InputRef<'s>>,
    pub span: Span,
}
