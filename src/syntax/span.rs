//! Byte spans into the source text.
//!
//! A [`Span`] is a half-open byte range `start..end` into the text a module
//! was parsed from. Spans are `u32` to keep the IR small: a source file is
//! limited to 4 GiB, which the parser checks before it starts.

use serde::{Deserialize, Serialize};

/// A half-open byte range into the source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Span {
    /// First byte of the range.
    pub start: u32,
    /// One past the last byte of the range.
    pub end: u32,
}

impl Span {
    /// A span for a node that has no source text (created by a pass).
    pub const DETACHED: Span = Span { start: 0, end: 0 };

    /// Builds a span from `usize` offsets, saturating at `u32::MAX`.
    pub fn new(start: usize, end: usize) -> Span {
        let clamp = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Span { start: clamp(start), end: clamp(end.max(start)) }
    }

    /// True for spans that point at no source text.
    pub fn is_detached(&self) -> bool {
        self.start == 0 && self.end == 0
    }

    /// The smallest span that covers both.
    pub fn join(self, other: Span) -> Span {
        if self.is_detached() {
            return other;
        }
        if other.is_detached() {
            return self;
        }
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// True when the span covers no bytes.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

impl From<Span> for miette::SourceSpan {
    fn from(span: Span) -> Self {
        miette::SourceSpan::new((span.start as usize).into(), span.len())
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}
