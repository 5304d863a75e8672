//! MLIR's bytecode container: sections, the string table, dialect and
//! operation names, the attribute/type table, properties and the IR section.
//!
//! This layer knows no dialect. It splits the file into its sections, finds
//! each attribute and type entry's bytes (decoded lazily by
//! [`super::vhlo`]) and reads the IR into a [`RawOp`] tree whose operands and
//! results are already numbered as [`ValueId`]s. Invariants:
//! - every count and length read from the file is checked against the bytes
//!   left before anything is allocated for it, so memory stays proportional
//!   to the input;
//! - nesting is bounded ([`MAX_DEPTH`] regions, [`MAX_ATTR_DEPTH`] attributes), so a hostile
//!   file cannot overflow the stack;
//! - value numbers restart at 0 in each function and are unique in it (also
//!   across the isolated regions nested in it); an operand must be defined
//!   before it is used.

use super::error::MlirError;
use super::ValueId;

/// The newest bytecode version read (MLIR's `kNativePropertiesODSSegmentSize`).
pub(super) const MAX_VERSION: u64 = 6;

/// The deepest nesting of regions accepted.
pub(super) const MAX_DEPTH: usize = 64;

/// The deepest nesting of attributes and types accepted (StableHLO's are a
/// few levels deep: a dictionary of arrays of dictionaries).
pub(super) const MAX_ATTR_DEPTH: usize = 32;

const MAGIC: &[u8] = b"ML\xefR";

/// Section ids.
const STRING: u8 = 0;
const DIALECT: u8 = 1;
const ATTR_TYPE: u8 = 2;
const ATTR_TYPE_OFFSET: u8 = 3;
const IR: u8 = 4;
const RESOURCE: u8 = 5;
const RESOURCE_OFFSET: u8 = 6;
const DIALECT_VERSIONS: u8 = 7;
const PROPERTIES: u8 = 8;
const NUM_SECTIONS: u8 = 9;

/// Operation encoding mask bits.
const HAS_ATTRS: u8 = 0x01;
const HAS_RESULTS: u8 = 0x02;
const HAS_OPERANDS: u8 = 0x04;
const HAS_SUCCESSORS: u8 = 0x08;
const HAS_REGIONS: u8 = 0x10;
const HAS_USE_LIST_ORDERS: u8 = 0x20;
const HAS_PROPERTIES: u8 = 0x40;

/// A read position in the artifact; offsets in errors are absolute.
#[derive(Clone, Copy)]
pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor over `bytes`, which start at absolute offset `base`.
    pub(super) fn new(bytes: &'a [u8], base: usize) -> Cursor<'a> {
        Cursor { bytes, pos: 0, base }
    }

    /// The absolute offset of the next byte.
    pub(super) fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes left.
    pub(super) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub(super) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub(super) fn byte(&mut self, what: &str) -> Result<u8, MlirError> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| MlirError::truncated(self.offset(), what))?;
        self.pos += 1;
        Ok(b)
    }

    /// `n` bytes, checked against what is left.
    pub(super) fn take(&mut self, n: u64, what: &str) -> Result<Cursor<'a>, MlirError> {
        let start = self.offset();
        let n = usize::try_from(n).ok().filter(|n| *n <= self.remaining()).ok_or_else(|| {
            MlirError::truncated(start, format!("{what} ({n} bytes announced, {} left)", self.remaining()))
        })?;
        let sub = Cursor { bytes: &self.bytes[self.pos..self.pos + n], pos: 0, base: start };
        self.pos += n;
        Ok(sub)
    }

    /// The unread bytes.
    pub(super) fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    /// A prefix varint: the count of trailing zero bits of the first byte is
    /// the number of further bytes; a zero first byte means eight more.
    pub(super) fn varint(&mut self, what: &str) -> Result<u64, MlirError> {
        let first = self.byte(what)?;
        if first & 1 == 1 {
            return Ok(u64::from(first >> 1));
        }
        let extra = if first == 0 { 8 } else { first.trailing_zeros() as usize };
        let mut le = [0u8; 9];
        le[0] = first;
        let tail = self.take(extra as u64, what)?;
        le[1..=extra].copy_from_slice(tail.bytes);
        if first == 0 {
            return Ok(u64::from_le_bytes(le[1..9].try_into().expect("eight bytes")));
        }
        let value = u64::from_le_bytes(le[..8].try_into().expect("eight bytes"));
        Ok(value >> (extra + 1))
    }

    /// A zigzag-encoded signed varint.
    pub(super) fn svarint(&mut self, what: &str) -> Result<i64, MlirError> {
        let v = self.varint(what)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// A varint whose low bit is a flag.
    pub(super) fn varint_flag(&mut self, what: &str) -> Result<(u64, bool), MlirError> {
        let v = self.varint(what)?;
        Ok((v >> 1, v & 1 == 1))
    }

    /// A count of items that each take at least one byte, so a count larger
    /// than the bytes left is rejected before anything is allocated.
    pub(super) fn count(&mut self, what: &str) -> Result<usize, MlirError> {
        let at = self.offset();
        let n = self.varint(what)?;
        usize::try_from(n).ok().filter(|n| *n <= self.remaining()).ok_or_else(|| {
            MlirError::malformed(at, format!("{what}: a count of {n} with only {} bytes left", self.remaining()))
        })
    }

    /// A NUL-terminated string, without its NUL.
    pub(super) fn cstr(&mut self, what: &str) -> Result<&'a [u8], MlirError> {
        let rest = self.rest();
        let end = rest.iter().position(|b| *b == 0).ok_or_else(|| MlirError::truncated(self.offset(), what))?;
        self.pos += end + 1;
        Ok(&rest[..end])
    }

    /// A section header and its contents: `(id, data)`.
    pub(super) fn section(&mut self) -> Result<(u8, Cursor<'a>), MlirError> {
        let at = self.offset();
        let id_and_align = self.byte("a section header")?;
        let len = self.varint("a section length")?;
        let id = id_and_align & 0x7f;
        if id >= NUM_SECTIONS {
            return Err(MlirError::malformed(at, format!("unknown section id {id}")));
        }
        if id_and_align & 0x80 != 0 {
            let align_at = self.offset();
            let align = self.varint("a section alignment")?;
            if !align.is_power_of_two() || align > 1 << 16 {
                return Err(MlirError::malformed(align_at, format!("section alignment {align} is not a power of two")));
            }
            while !self.offset().is_multiple_of(align as usize) {
                let pad_at = self.offset();
                if self.byte("section padding")? != 0xcb {
                    return Err(MlirError::malformed(pad_at, "expected the padding byte 0xCB"));
                }
            }
        }
        let data = self.take(len, "a section")?;
        Ok((id, data))
    }
}

/// One attribute or type entry: its dialect and its undecoded bytes.
#[derive(Clone, Copy)]
pub(super) struct Entry<'a> {
    /// Index into [`Container::dialects`].
    pub dialect: usize,
    /// Whether the dialect's own encoding is used (else it is assembly text).
    pub custom: bool,
    /// The bytes.
    pub data: Cursor<'a>,
}

/// An operation name: dialect index, name without the dialect, and whether
/// it was registered when written (bytecode 5 and later).
pub(super) struct OpName<'a> {
    pub dialect: usize,
    pub name: &'a str,
    pub registered: Option<bool>,
}

/// The sections of an artifact, split and indexed.
pub(super) struct Container<'a> {
    pub version: u64,
    pub strings: Vec<&'a [u8]>,
    pub dialects: Vec<&'a str>,
    pub op_names: Vec<OpName<'a>>,
    pub attrs: Vec<Entry<'a>>,
    pub types: Vec<Entry<'a>>,
    /// Each operation's native properties blob.
    pub properties: Vec<Cursor<'a>>,
    /// The IR section.
    pub ir: Cursor<'a>,
}

impl<'a> Container<'a> {
    /// Splits `bytes` into sections and reads the tables.
    pub(super) fn parse(bytes: &'a [u8]) -> Result<Container<'a>, MlirError> {
        if !bytes.starts_with(MAGIC) {
            return Err(MlirError::NotBytecode { span: super::error::at(0) });
        }
        let mut r = Cursor::new(bytes, 0);
        r.take(MAGIC.len() as u64, "the magic")?;
        let version_at = r.offset();
        let version = r.varint("the bytecode version")?;
        if version > MAX_VERSION {
            return Err(MlirError::Version { version, max: MAX_VERSION, span: super::error::at(version_at) });
        }
        r.cstr("the producer string")?;
        let mut sections: [Option<Cursor<'a>>; NUM_SECTIONS as usize] = [None; NUM_SECTIONS as usize];
        while !r.is_empty() {
            let at = r.offset();
            let (id, data) = r.section()?;
            if sections[id as usize].replace(data).is_some() {
                return Err(MlirError::malformed(at, format!("section {id} appears twice")));
            }
        }
        let end = bytes.len();
        let required = |id: u8, name: &str| {
            sections[id as usize].ok_or_else(|| MlirError::truncated(end, format!("the {name} section (missing)")))
        };
        let string_section = required(STRING, "string")?;
        let dialect_section = required(DIALECT, "dialect")?;
        let attr_section = required(ATTR_TYPE, "attribute/type")?;
        let offset_section = required(ATTR_TYPE_OFFSET, "attribute/type offset")?;
        let ir = required(IR, "IR")?;
        let _ = (RESOURCE, RESOURCE_OFFSET, DIALECT_VERSIONS);
        let strings = parse_strings(string_section)?;
        let (dialects, op_names) = parse_dialects(dialect_section, &strings, version)?;
        let (attrs, types) = parse_attr_type_offsets(offset_section, attr_section, dialects.len())?;
        let properties = match sections[PROPERTIES as usize] {
            Some(section) => parse_properties(section)?,
            None => Vec::new(),
        };
        Ok(Container { version, strings, dialects, op_names, attrs, types, properties, ir })
    }

    /// The string at the index read from `r`.
    pub(super) fn string(&self, r: &mut Cursor<'a>, what: &str) -> Result<&'a [u8], MlirError> {
        let at = r.offset();
        let i = r.varint(what)?;
        self.string_at(i, at)
    }

    pub(super) fn string_at(&self, i: u64, at: usize) -> Result<&'a [u8], MlirError> {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.strings.get(i).copied())
            .ok_or_else(|| MlirError::malformed(at, format!("string index {i} out of range")))
    }
}

fn utf8<'a>(bytes: &'a [u8], at: usize, what: &str) -> Result<&'a str, MlirError> {
    std::str::from_utf8(bytes).map_err(|_| MlirError::malformed(at, format!("{what} is not UTF-8")))
}

/// The string section: a count, the sizes in reverse order, then the
/// NUL-terminated strings in order.
fn parse_strings(mut r: Cursor<'_>) -> Result<Vec<&[u8]>, MlirError> {
    let n = r.count("the string count")?;
    let mut sizes = Vec::with_capacity(n);
    for _ in 0..n {
        sizes.push(r.varint("a string size")?);
    }
    let data = r.rest();
    let data_at = r.offset();
    let mut end = data.len();
    let mut strings = vec![&data[..0]; n];
    for (slot, size) in strings.iter_mut().rev().zip(&sizes) {
        let size = usize::try_from(*size).ok().filter(|s| *s >= 1 && *s <= end).ok_or_else(|| {
            MlirError::malformed(data_at + end, format!("a string of {size} bytes does not fit the string section"))
        })?;
        let start = end - size;
        if data[end - 1] != 0 {
            return Err(MlirError::malformed(data_at + end - 1, "a string does not end with NUL"));
        }
        *slot = &data[start..end - 1];
        end = start;
    }
    if end != 0 {
        return Err(MlirError::malformed(data_at, "unexpected bytes between the string sizes and their data"));
    }
    Ok(strings)
}

type Dialects<'a> = (Vec<&'a str>, Vec<OpName<'a>>);

/// The dialect section: dialect names (with optional version blobs), then
/// operation names grouped by dialect.
fn parse_dialects<'a>(mut r: Cursor<'a>, strings: &[&'a [u8]], version: u64) -> Result<Dialects<'a>, MlirError> {
    let string_at = |i: u64, at: usize| -> Result<&'a str, MlirError> {
        let s = usize::try_from(i)
            .ok()
            .and_then(|i| strings.get(i).copied())
            .ok_or_else(|| MlirError::malformed(at, format!("string index {i} out of range")))?;
        utf8(s, at, "a dialect or operation name")
    };
    let n = r.count("the dialect count")?;
    let mut dialects = Vec::with_capacity(n);
    for _ in 0..n {
        let at = r.offset();
        if version < 1 {
            let i = r.varint("a dialect name")?;
            dialects.push(string_at(i, at)?);
            continue;
        }
        let (i, has_version) = r.varint_flag("a dialect name")?;
        dialects.push(string_at(i, at)?);
        if has_version {
            let (id, _) = r.section()?;
            if id != DIALECT_VERSIONS {
                return Err(MlirError::malformed(at, "expected a dialect version section"));
            }
        }
    }
    if version >= 4 {
        r.varint("the operation name count")?;
    }
    let mut op_names = Vec::new();
    while !r.is_empty() {
        let at = r.offset();
        let dialect = r.varint("a dialect index")?;
        let dialect = usize::try_from(dialect)
            .ok()
            .filter(|d| *d < dialects.len())
            .ok_or_else(|| MlirError::malformed(at, format!("dialect index {dialect} out of range")))?;
        let count = r.count("an operation name count")?;
        for _ in 0..count {
            let at = r.offset();
            let (i, registered) = if version < 5 {
                (r.varint("an operation name")?, None)
            } else {
                let (i, flag) = r.varint_flag("an operation name")?;
                (i, Some(flag))
            };
            op_names.push(OpName { dialect, name: string_at(i, at)?, registered });
        }
    }
    Ok((dialects, op_names))
}

type AttrsTypes<'a> = (Vec<Entry<'a>>, Vec<Entry<'a>>);

/// The attribute/type offset section: the counts, then per dialect group
/// each entry's size with its custom-encoding flag.
fn parse_attr_type_offsets<'a>(
    mut r: Cursor<'a>,
    mut data: Cursor<'a>,
    num_dialects: usize,
) -> Result<AttrsTypes<'a>, MlirError> {
    let num_attrs = r.count("the attribute count")?;
    let num_types = r.count("the type count")?;
    let mut read = |n: usize, r: &mut Cursor<'a>| -> Result<Vec<Entry<'a>>, MlirError> {
        let mut entries = Vec::with_capacity(n);
        while entries.len() < n {
            let at = r.offset();
            let dialect = r.varint("a dialect index")?;
            let dialect = usize::try_from(dialect)
                .ok()
                .filter(|d| *d < num_dialects)
                .ok_or_else(|| MlirError::malformed(at, format!("dialect index {dialect} out of range")))?;
            let count = r.count("an entry count")?;
            if count > n - entries.len() {
                return Err(MlirError::malformed(at, "more attribute or type entries than announced"));
            }
            for _ in 0..count {
                let (size, custom) = r.varint_flag("an entry size")?;
                let entry = data.take(size, "an attribute or type entry")?;
                entries.push(Entry { dialect, custom, data: entry });
            }
        }
        Ok(entries)
    };
    let attrs = read(num_attrs, &mut r)?;
    let types = read(num_types, &mut r)?;
    if !r.is_empty() {
        return Err(MlirError::malformed(r.offset(), "trailing bytes in the attribute/type offset section"));
    }
    Ok((attrs, types))
}

/// The properties section: a count, then that many size-prefixed blobs.
fn parse_properties(mut r: Cursor<'_>) -> Result<Vec<Cursor<'_>>, MlirError> {
    if r.is_empty() {
        return Ok(Vec::new());
    }
    let n = r.count("the properties count")?;
    let mut blobs = Vec::with_capacity(n);
    for _ in 0..n {
        let size = r.varint("a properties size")?;
        blobs.push(r.take(size, "a properties blob")?);
    }
    if !r.is_empty() {
        return Err(MlirError::malformed(r.offset(), "trailing bytes in the properties section"));
    }
    Ok(blobs)
}

/// An operation's properties, as encoded.
pub(super) enum RawProperties<'a> {
    /// Written by the operation's own bytecode interface.
    Native(Cursor<'a>),
    /// An unregistered operation's properties, as one attribute.
    Attribute(u64),
}

/// An operation as read from the IR section, before its dialect is decoded.
pub(super) struct RawOp<'a> {
    /// Where the operation starts.
    pub offset: usize,
    /// Index into [`Container::op_names`].
    pub name: usize,
    /// The attribute dictionary's index.
    pub attrs: Option<u64>,
    pub properties: Option<RawProperties<'a>>,
    /// Result type indices with their value numbers.
    pub results: Vec<(u64, ValueId)>,
    pub operands: Vec<ValueId>,
    pub regions: Vec<RawRegion<'a>>,
}

pub(super) struct RawRegion<'a> {
    pub blocks: Vec<RawBlock<'a>>,
}

pub(super) struct RawBlock<'a> {
    /// Argument type indices with their value numbers.
    pub arguments: Vec<(u64, ValueId)>,
    pub ops: Vec<RawOp<'a>>,
}

/// The values visible while reading one isolated-from-above region.
struct Scope {
    /// Slots for values; regions reserve theirs on entry.
    values: Vec<Option<ValueId>>,
    /// The next slot of each region being read.
    next: Vec<usize>,
    /// The next value number.
    counter: u32,
}

/// Reads the IR section into the top-level operations.
pub(super) fn read_ir<'a>(c: &Container<'a>) -> Result<Vec<RawOp<'a>>, MlirError> {
    let mut reader = IrReader { c, scopes: vec![Scope { values: Vec::new(), next: vec![0], counter: 0 }] };
    let mut r = c.ir;
    let block = reader.block(&mut r, 0)?;
    if !block.arguments.is_empty() {
        return Err(MlirError::malformed(c.ir.offset(), "the top-level block has arguments"));
    }
    if !r.is_empty() {
        return Err(MlirError::malformed(r.offset(), "trailing bytes in the IR section"));
    }
    Ok(block.ops)
}

struct IrReader<'c, 'a> {
    c: &'c Container<'a>,
    scopes: Vec<Scope>,
}

impl<'a> IrReader<'_, 'a> {
    fn scope(&mut self) -> &mut Scope {
        self.scopes.last_mut().expect("a scope is always open")
    }

    fn define(&mut self, at: usize) -> Result<ValueId, MlirError> {
        let scope = self.scope();
        let slot = *scope.next.last().expect("a region is always open");
        if slot >= scope.values.len() {
            return Err(MlirError::malformed(at, "more values defined than the region announced"));
        }
        let id = ValueId(scope.counter);
        scope.counter += 1;
        scope.values[slot] = Some(id);
        *scope.next.last_mut().expect("a region is always open") += 1;
        Ok(id)
    }

    fn operand(&mut self, r: &mut Cursor<'a>) -> Result<ValueId, MlirError> {
        let at = r.offset();
        let i = r.varint("an operand")?;
        match usize::try_from(i).ok().and_then(|i| self.scope().values.get(i).copied()) {
            Some(Some(id)) => Ok(id),
            Some(None) => Err(MlirError::unsupported(
                at,
                format!("a use of value #{i} before its definition"),
                "StableHLO regions have one block in dominance order, so operands are defined before use",
            )),
            None => Err(MlirError::malformed(at, format!("value index {i} out of range"))),
        }
    }

    fn type_index(&self, r: &mut Cursor<'a>) -> Result<u64, MlirError> {
        let at = r.offset();
        let i = r.varint("a type index")?;
        if i >= self.c.types.len() as u64 {
            return Err(MlirError::malformed(at, format!("type index {i} out of range")));
        }
        Ok(i)
    }

    fn attr_index(&self, r: &mut Cursor<'a>) -> Result<u64, MlirError> {
        let at = r.offset();
        let i = r.varint("an attribute index")?;
        if i >= self.c.attrs.len() as u64 {
            return Err(MlirError::malformed(at, format!("attribute index {i} out of range")));
        }
        Ok(i)
    }

    /// Skips a use-list order record: it orders uses, which the tree does
    /// not keep, and does not change what the program computes.
    fn use_list_orders(&self, r: &mut Cursor<'a>, values: usize) -> Result<(), MlirError> {
        let n = if values > 1 { r.count("a use-list count")? } else { 1 };
        for _ in 0..n {
            if values > 1 {
                r.varint("a use-list value index")?;
            }
            let (len, _) = r.varint_flag("a use-list length")?;
            let len = usize::try_from(len)
                .ok()
                .filter(|l| *l <= r.remaining())
                .ok_or_else(|| MlirError::truncated(r.offset(), "a use-list order"))?;
            for _ in 0..len {
                r.varint("a use-list index")?;
            }
        }
        Ok(())
    }

    fn block(&mut self, r: &mut Cursor<'a>, depth: usize) -> Result<RawBlock<'a>, MlirError> {
        let (num_ops, has_args) = r.varint_flag("a block header")?;
        let mut arguments = Vec::new();
        if has_args {
            let n = r.count("a block argument count")?;
            arguments.reserve(n);
            for _ in 0..n {
                let at = r.offset();
                let ty = if self.c.version >= 4 {
                    let (ty, has_loc) = r.varint_flag("a block argument")?;
                    if ty >= self.c.types.len() as u64 {
                        return Err(MlirError::malformed(at, format!("type index {ty} out of range")));
                    }
                    if has_loc {
                        self.attr_index(r)?;
                    }
                    ty
                } else {
                    let ty = self.type_index(r)?;
                    self.attr_index(r)?;
                    ty
                };
                arguments.push((ty, self.define(at)?));
            }
            if self.c.version >= 3 && r.byte("a use-list flag")? != 0 {
                self.use_list_orders(r, n)?;
            }
        }
        let num_ops = usize::try_from(num_ops)
            .ok()
            .filter(|n| *n <= r.remaining())
            .ok_or_else(|| MlirError::malformed(r.offset(), format!("{num_ops} operations announced")))?;
        let mut ops = Vec::with_capacity(num_ops);
        for _ in 0..num_ops {
            ops.push(self.op(r, depth)?);
        }
        Ok(RawBlock { arguments, ops })
    }

    fn region(&mut self, r: &mut Cursor<'a>, depth: usize) -> Result<RawRegion<'a>, MlirError> {
        let num_blocks = r.count("a block count")?;
        if num_blocks == 0 {
            return Ok(RawRegion { blocks: Vec::new() });
        }
        let at = r.offset();
        let num_values = r.varint("a region's value count")?;
        let num_values = usize::try_from(num_values)
            .ok()
            .filter(|n| *n <= r.remaining())
            .ok_or_else(|| MlirError::malformed(at, format!("{num_values} values announced")))?;
        let scope = self.scope();
        let start = scope.values.len();
        scope.next.push(start);
        scope.values.resize(start + num_values, None);
        let mut blocks = Vec::with_capacity(num_blocks);
        for _ in 0..num_blocks {
            blocks.push(self.block(r, depth)?);
        }
        let scope = self.scope();
        scope.values.truncate(start);
        scope.next.pop();
        Ok(RawRegion { blocks })
    }

    fn op(&mut self, r: &mut Cursor<'a>, depth: usize) -> Result<RawOp<'a>, MlirError> {
        let offset = r.offset();
        if depth > MAX_DEPTH {
            return Err(MlirError::unsupported(
                offset,
                format!("regions nested deeper than {MAX_DEPTH}"),
                "flatten it",
            ));
        }
        let name = r.varint("an operation name index")?;
        let name = usize::try_from(name)
            .ok()
            .filter(|n| *n < self.c.op_names.len())
            .ok_or_else(|| MlirError::malformed(offset, format!("operation name index {name} out of range")))?;
        let mask = r.byte("an operation mask")?;
        self.attr_index(r)?; // The location, which the tree does not keep.
        let attrs = if mask & HAS_ATTRS != 0 { Some(self.attr_index(r)?) } else { None };
        let properties = if mask & HAS_PROPERTIES != 0 {
            let at = r.offset();
            match self.c.op_names[name].registered {
                Some(true) => {
                    let i = r.varint("a properties index")?;
                    let blob = usize::try_from(i)
                        .ok()
                        .and_then(|i| self.c.properties.get(i).copied())
                        .ok_or_else(|| MlirError::malformed(at, format!("properties index {i} out of range")))?;
                    Some(RawProperties::Native(blob))
                }
                Some(false) => Some(RawProperties::Attribute(self.attr_index(r)?)),
                None => return Err(MlirError::malformed(at, "properties in bytecode older than version 5")),
            }
        } else {
            None
        };
        let mut result_types = Vec::new();
        if mask & HAS_RESULTS != 0 {
            let n = r.count("a result count")?;
            result_types.reserve(n);
            for _ in 0..n {
                result_types.push(self.type_index(r)?);
            }
        }
        let mut operands = Vec::new();
        if mask & HAS_OPERANDS != 0 {
            let n = r.count("an operand count")?;
            operands.reserve(n);
            for _ in 0..n {
                operands.push(self.operand(r)?);
            }
        }
        if mask & HAS_SUCCESSORS != 0 {
            return Err(MlirError::unsupported(
                offset,
                "an operation with block successors",
                "StableHLO has no branches between blocks",
            ));
        }
        if self.c.version >= 3 && mask & HAS_USE_LIST_ORDERS != 0 {
            self.use_list_orders(r, result_types.len())?;
        }
        let (num_regions, isolated) =
            if mask & HAS_REGIONS != 0 { r.varint_flag("a region count")? } else { (0, false) };
        let mut results = Vec::with_capacity(result_types.len());
        for ty in result_types {
            results.push((ty, self.define(offset)?));
        }
        let num_regions = usize::try_from(num_regions)
            .ok()
            .filter(|n| *n <= r.remaining())
            .ok_or_else(|| MlirError::malformed(offset, format!("{num_regions} regions announced")))?;
        let mut regions = Vec::with_capacity(num_regions);
        if num_regions > 0 {
            if isolated {
                let mut nested = if self.c.version >= 2 {
                    let at = r.offset();
                    let (id, data) = r.section()?;
                    if id != IR {
                        return Err(MlirError::malformed(at, "expected an IR section for an isolated region"));
                    }
                    Some(data)
                } else {
                    None
                };
                // Numbers restart in each function (an isolated region of an
                // operation in the module body) and continue in the isolated
                // regions nested in a function, so they stay unique in it.
                let counter = if depth <= 1 { 0 } else { self.scope().counter };
                self.scopes.push(Scope { values: Vec::new(), next: Vec::new(), counter });
                let reader = nested.as_mut().unwrap_or(r);
                for _ in 0..num_regions {
                    regions.push(self.region(reader, depth + 1)?);
                }
                if let Some(rest) = nested.filter(|n| !n.is_empty()) {
                    return Err(MlirError::malformed(rest.offset(), "trailing bytes in an isolated region"));
                }
                let counter = self.scopes.pop().map_or(0, |s| s.counter);
                if depth > 1 {
                    self.scope().counter = counter;
                }
            } else {
                for _ in 0..num_regions {
                    regions.push(self.region(r, depth + 1)?);
                }
            }
        }
        Ok(RawOp { offset, name, attrs, properties, results, operands, regions })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MLIR's prefix varint, written independently of the reader: the
    /// number of extra bytes as trailing zeros of the first byte.
    fn encode(v: u64) -> Vec<u8> {
        for extra in 0..8u32 {
            let bits = 7 * (extra + 1);
            if bits < 64 && v < 1u64 << bits {
                let tagged = ((u128::from(v) << 1 | 1) << extra) as u64;
                return tagged.to_le_bytes()[..=extra as usize].to_vec();
            }
        }
        let mut out = vec![0];
        out.extend_from_slice(&v.to_le_bytes());
        out
    }

    #[test]
    fn varints_of_every_length_read_back() {
        for v in [0, 1, 63, 127, 128, 300, 1 << 20, (1 << 49) - 1, 1 << 49, 1 << 56, u64::MAX - 1, u64::MAX] {
            let bytes = encode(v);
            let mut r = Cursor::new(&bytes, 0);
            assert_eq!(r.varint("test").unwrap(), v, "{bytes:?}");
            assert!(r.is_empty());
        }
        let mut r = Cursor::new(&[0x03], 0);
        assert_eq!(r.svarint("test").unwrap(), -1);
    }

    #[test]
    fn a_varint_cut_short_is_truncated_at_its_offset() {
        let bytes = encode(1 << 30);
        let mut r = Cursor::new(&bytes[..2], 10);
        match r.varint("a length") {
            Err(MlirError::Truncated { span, .. }) => assert_eq!(span.start, 11),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn counts_larger_than_the_bytes_left_are_refused_before_allocating() {
        let mut bytes = encode(1 << 40);
        bytes.extend_from_slice(&[1, 1, 1]);
        let mut r = Cursor::new(&bytes, 0);
        assert!(matches!(r.count("items"), Err(MlirError::Malformed { .. })));
    }
}
