//! Streaming parse events.
//!
//! The grammar does not build one big tree: it hands each statement to a
//! [`Sink`] as soon as it is reduced, with `*_begin` / `*_end` events around
//! graphs and regions. The IR builder consumes the events directly, so a
//! million-op file never exists as an AST; [`TreeSink`] rebuilds the AST
//! for callers that want one.
//!
//! Events arrive in source order. Methods take `&self` because lalrpop
//! passes grammar parameters by value; implementations use a `RefCell`.

use std::borrow::Cow;
use std::cell::RefCell;

use super::ast::*;
use super::span::Span;

/// Receives the statements of a module in source order.
pub trait Sink<'s> {
    /// `graph @name (attrs) {` has been read; `start` is the offset of `graph`.
    fn graph_begin(&self, name: Cow<'s, str>, name_span: Span, attrs: Vec<Attr<'s>>, start: usize);
    /// The `}` closing the current graph ends at `end`.
    fn graph_end(&self, end: usize);
    /// An op statement.
    fn op(&self, op: OpStmt<'s>);
    /// A gradients statement.
    fn gradients(&self, gradients: Gradients<'s>);
    /// `replicate (attrs) (inputs) {` has been read.
    fn replicate_begin(&self, attrs: Vec<Attr<'s>>, inputs: Vec<ReplicateInput<'s>>, keyword_span: Span, start: usize);
    /// `outside_compilation (attrs) {` has been read.
    fn outside_compilation_begin(&self, attrs: Vec<Attr<'s>>, keyword_span: Span, start: usize);
    /// A `return` statement, last in a replicate body.
    fn ret(&self, ret: Return<'s>);
    /// The `}` closing the current region ends at `end`.
    fn region_end(&self, end: usize);
}

enum Open<'s> {
    Graph(Graph<'s>),
    Replicate(Replicate<'s>),
    OutsideCompilation(OutsideCompilation<'s>),
}

/// A sink that builds the AST.
#[derive(Default)]
pub struct TreeSink<'s> {
    state: RefCell<(Vec<Graph<'s>>, Vec<Open<'s>>)>,
}

impl<'s> TreeSink<'s> {
    /// The graphs built so far.
    pub fn finish(self) -> Vec<Graph<'s>> {
        self.state.into_inner().0
    }

    fn push(&self, stmt: Stmt<'s>) {
        let mut state = self.state.borrow_mut();
        match state.1.last_mut() {
            Some(Open::Graph(g)) => g.body.push(stmt),
            Some(Open::Replicate(r)) => r.body.push(stmt),
            Some(Open::OutsideCompilation(o)) => o.body.push(stmt),
            None => {}
        }
    }
}

impl<'s> Sink<'s> for TreeSink<'s> {
    fn graph_begin(&self, name: Cow<'s, str>, name_span: Span, attrs: Vec<Attr<'s>>, start: usize) {
        let graph = Graph { name, name_span, attrs, body: Vec::new(), span: Span::new(start, start) };
        self.state.borrow_mut().1.push(Open::Graph(graph));
    }

    fn graph_end(&self, end: usize) {
        let mut state = self.state.borrow_mut();
        if let Some(Open::Graph(mut g)) = state.1.pop() {
            g.span = Span::new(g.span.start as usize, end);
            state.0.push(g);
        }
    }

    fn op(&self, op: OpStmt<'s>) {
        self.push(Stmt::Op(op));
    }

    fn gradients(&self, gradients: Gradients<'s>) {
        self.push(Stmt::Gradients(gradients));
    }

    fn replicate_begin(&self, attrs: Vec<Attr<'s>>, inputs: Vec<ReplicateInput<'s>>, keyword_span: Span, start: usize) {
        let r = Replicate { attrs, inputs, body: Vec::new(), keyword_span, span: Span::new(start, start) };
        self.state.borrow_mut().1.push(Open::Replicate(r));
    }

    fn outside_compilation_begin(&self, attrs: Vec<Attr<'s>>, keyword_span: Span, start: usize) {
        let o = OutsideCompilation { attrs, body: Vec::new(), keyword_span, span: Span::new(start, start) };
        self.state.borrow_mut().1.push(Open::OutsideCompilation(o));
    }

    fn ret(&self, ret: Return<'s>) {
        self.push(Stmt::Return(ret));
    }

    fn region_end(&self, end: usize) {
        let closed = self.state.borrow_mut().1.pop();
        match closed {
            Some(Open::Replicate(mut r)) => {
                r.span = Span::new(r.span.start as usize, end);
                self.push(Stmt::Replicate(r));
            }
            Some(Open::OutsideCompilation(mut o)) => {
                o.span = Span::new(o.span.start as usize, end);
                self.push(Stmt::OutsideCompilation(o));
            }
            Some(open @ Open::Graph(_)) => self.state.borrow_mut().1.push(open),
            None => {}
        }
    }
}

/// Replays an AST into a sink, in source order.
pub fn replay<'s>(module: Module<'s>, sink: &dyn Sink<'s>) {
    fn stmts<'s>(body: Vec<Stmt<'s>>, sink: &dyn Sink<'s>) {
        for stmt in body {
            match stmt {
                Stmt::Op(op) => sink.op(op),
                Stmt::Gradients(g) => sink.gradients(g),
                Stmt::Return(r) => sink.ret(r),
                Stmt::Replicate(r) => {
                    sink.replicate_begin(r.attrs, r.inputs, r.keyword_span, r.span.start as usize);
                    stmts(r.body, sink);
                    sink.region_end(r.span.end as usize);
                }
                Stmt::OutsideCompilation(o) => {
                    sink.outside_compilation_begin(o.attrs, o.keyword_span, o.span.start as usize);
                    stmts(o.body, sink);
                    sink.region_end(o.span.end as usize);
                }
            }
        }
    }
    for g in module.graphs {
        let end = g.span.end as usize;
        sink.graph_begin(g.name, g.name_span, g.attrs, g.span.start as usize);
        stmts(g.body, sink);
        sink.graph_end(end);
    }
}
