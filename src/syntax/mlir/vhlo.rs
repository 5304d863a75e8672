//! Attribute and type entries of the bytecode, decoded into the tree's
//! [`Attribute`] and [`Type`]: VHLO's own encodings (StableHLO's
//! `VhloBytecode.cpp` codes) and the builtin dialect's (locations excepted,
//! which the tree does not keep).
//!
//! VHLO attributes map one to one onto StableHLO's here; the per-operation
//! rewrites (dimension numbers, default values, dense arrays) are in
//! [`super::legalize`], the scalars and dense data in [`super::dense`].
//! Entries are decoded on first use and memoised.
//! Invariants: nesting is bounded by [`MAX_ATTR_DEPTH`]; dense data is checked
//! against its type before it is decoded; anything not decoded is refused by
//! name, never skipped.

use super::bytecode::{Container, Cursor, Entry, MAX_ATTR_DEPTH};
use super::dense::{dense_values, read_blob, read_float, read_integer};
use super::error::MlirError;
use super::{Attribute, DenseValues, Dim, ElementType, NamedAttribute, TensorType, Type};

/// The element count MLIR uses for `?` in a shape.
const DYNAMIC: i64 = i64::MIN;

/// Decodes attribute and type entries on demand.
pub(super) struct Decoder<'c, 'a> {
    pub c: &'c Container<'a>,
    attrs: Vec<Option<Attribute>>,
    types: Vec<Option<Option<Type>>>,
    depth: usize,
}

/// VHLO's `none` type (only in `dot_general`'s algorithm fields) decodes to
/// `None`; as a `TypeV1Attr` it becomes [`Attribute::Unit`], which
/// [`super::legalize`] removes with the rest of an unset algorithm.
type MaybeType = Option<Type>;

impl<'c, 'a> Decoder<'c, 'a> {
    pub(super) fn new(c: &'c Container<'a>) -> Decoder<'c, 'a> {
        Decoder { c, attrs: vec![None; c.attrs.len()], types: vec![None; c.types.len()], depth: 0 }
    }

    /// The attribute at index `i` (checked by the IR reader).
    pub(super) fn attr(&mut self, i: u64, at: usize) -> Result<Attribute, MlirError> {
        let idx = usize::try_from(i)
            .ok()
            .filter(|i| *i < self.attrs.len())
            .ok_or_else(|| MlirError::malformed(at, format!("attribute index {i} out of range")))?;
        if let Some(a) = &self.attrs[idx] {
            return Ok(a.clone());
        }
        let entry = self.c.attrs[idx];
        let a = self.nested(entry.data.offset(), |d| d.decode_attr(entry))?;
        self.attrs[idx] = Some(a.clone());
        Ok(a)
    }

    /// The type at index `i`; `None` for VHLO's `none`.
    pub(super) fn maybe_type(&mut self, i: u64, at: usize) -> Result<MaybeType, MlirError> {
        let idx = usize::try_from(i)
            .ok()
            .filter(|i| *i < self.types.len())
            .ok_or_else(|| MlirError::malformed(at, format!("type index {i} out of range")))?;
        if let Some(t) = &self.types[idx] {
            return Ok(t.clone());
        }
        let entry = self.c.types[idx];
        let t = self.nested(entry.data.offset(), |d| d.decode_type(entry))?;
        self.types[idx] = Some(t.clone());
        Ok(t)
    }

    /// The type at index `i`, which must not be `none`.
    pub(super) fn ty(&mut self, i: u64, at: usize) -> Result<Type, MlirError> {
        self.maybe_type(i, at)?.ok_or_else(|| {
            MlirError::unsupported(at, "the `none` type here", "none is used only in dot_general's algorithm")
        })
    }

    fn nested<T>(&mut self, at: usize, f: impl FnOnce(&mut Self) -> Result<T, MlirError>) -> Result<T, MlirError> {
        if self.depth >= MAX_ATTR_DEPTH {
            return Err(MlirError::malformed(
                at,
                format!("attributes or types nested deeper than {MAX_ATTR_DEPTH} (or a cycle)"),
            ));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn read_attr(&mut self, r: &mut Cursor<'a>) -> Result<Attribute, MlirError> {
        let at = r.offset();
        let i = r.varint("an attribute reference")?;
        self.attr(i, at)
    }

    fn read_type(&mut self, r: &mut Cursor<'a>) -> Result<Type, MlirError> {
        let at = r.offset();
        let i = r.varint("a type reference")?;
        self.ty(i, at)
    }

    fn read_maybe_type(&mut self, r: &mut Cursor<'a>) -> Result<MaybeType, MlirError> {
        let at = r.offset();
        let i = r.varint("a type reference")?;
        self.maybe_type(i, at)
    }

    fn read_types(&mut self, r: &mut Cursor<'a>) -> Result<Vec<Type>, MlirError> {
        let n = r.count("a type list")?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.read_type(r)?);
        }
        Ok(v)
    }

    fn read_attrs(&mut self, r: &mut Cursor<'a>) -> Result<Vec<Attribute>, MlirError> {
        let n = r.count("an attribute list")?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.read_attr(r)?);
        }
        Ok(v)
    }

    fn read_named(&mut self, r: &mut Cursor<'a>) -> Result<Vec<NamedAttribute>, MlirError> {
        let n = r.count("a dictionary")?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.offset();
            let name = match self.read_attr(r)? {
                Attribute::String(s) => {
                    String::from_utf8(s).map_err(|_| MlirError::malformed(at, "an attribute name is not UTF-8"))?
                }
                other => return Err(MlirError::malformed(at, format!("an attribute name is not a string: {other:?}"))),
            };
            let value = self.read_attr(r)?;
            v.push(NamedAttribute { name, value });
        }
        Ok(v)
    }

    fn read_string(&mut self, r: &mut Cursor<'a>) -> Result<Vec<u8>, MlirError> {
        Ok(self.c.string(r, "a string reference")?.to_vec())
    }

    fn read_svarints(&mut self, r: &mut Cursor<'a>) -> Result<Vec<i64>, MlirError> {
        let n = r.count("an integer list")?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(r.svarint("an integer")?);
        }
        Ok(v)
    }

    fn decode_attr(&mut self, entry: Entry<'a>) -> Result<Attribute, MlirError> {
        let mut r = entry.data;
        let at = r.offset();
        let dialect = self.c.dialects[entry.dialect];
        if !entry.custom {
            let text = r.cstr("an attribute's assembly text")?;
            return Err(MlirError::unsupported(
                at,
                format!("the attribute `{}` (in assembly form)", String::from_utf8_lossy(text)),
                "only attributes with a bytecode encoding are decoded",
            ));
        }
        let code = r.varint("an attribute code")?;
        let attr = match dialect {
            "vhlo" => self.vhlo_attr(code, &mut r, at)?,
            "builtin" => self.builtin_attr(code, &mut r, at)?,
            other => {
                return Err(MlirError::unsupported(
                    at,
                    format!("an attribute of the `{other}` dialect"),
                    "StableHLO artifacts use vhlo and builtin",
                ))
            }
        };
        if !r.is_empty() {
            return Err(MlirError::malformed(r.offset(), "trailing bytes after an attribute"));
        }
        Ok(attr)
    }

    fn decode_type(&mut self, entry: Entry<'a>) -> Result<MaybeType, MlirError> {
        let mut r = entry.data;
        let at = r.offset();
        let dialect = self.c.dialects[entry.dialect];
        if !entry.custom {
            let text = r.cstr("a type's assembly text")?;
            return Err(MlirError::unsupported(
                at,
                format!("the type `{}` (in assembly form)", String::from_utf8_lossy(text)),
                "only types with a bytecode encoding are decoded",
            ));
        }
        let code = r.varint("a type code")?;
        let ty = match dialect {
            "vhlo" => self.vhlo_type(code, &mut r, at)?,
            "builtin" => self.builtin_type(code, &mut r, at)?,
            other => {
                return Err(MlirError::unsupported(
                    at,
                    format!("a type of the `{other}` dialect"),
                    "StableHLO artifacts use vhlo and builtin",
                ))
            }
        };
        if !r.is_empty() {
            return Err(MlirError::malformed(r.offset(), "trailing bytes after a type"));
        }
        Ok(ty)
    }

    fn vhlo_attr(&mut self, code: u64, r: &mut Cursor<'a>, at: usize) -> Result<Attribute, MlirError> {
        let enumeration = |r: &mut Cursor<'a>, kind: &str, cases: &[&str]| -> Result<Attribute, MlirError> {
            let v = r.varint("an enumeration value")?;
            let value = usize::try_from(v)
                .ok()
                .and_then(|v| cases.get(v))
                .filter(|c| !c.is_empty())
                .ok_or_else(|| MlirError::malformed(at, format!("{v} is no {kind}")))?;
            Ok(Attribute::Enum { kind: kind.into(), value: (*value).into() })
        };
        Ok(match code {
            1 => Attribute::Array(self.read_attrs(r)?),
            2 => Attribute::Bool(r.varint("a boolean")? != 0),
            3 => enumeration(r, "comparison_direction", &["EQ", "NE", "GE", "GT", "LE", "LT"])?,
            4 => enumeration(r, "comparison_type", &["NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"])?,
            5 => {
                // StableHLO prints the custom-call API version as an i32.
                let v = r.varint("an API version")?;
                if v > 4 {
                    return Err(MlirError::malformed(at, format!("{v} is no custom_call_api_version")));
                }
                Attribute::Integer { value: i128::from(v), ty: Type::Element(ElementType::Signless(32)) }
            }
            6 => Attribute::Dictionary(self.read_named(r)?),
            7 => enumeration(r, "fft_type", &["FFT", "IFFT", "RFFT", "IRFFT"])?,
            8 => {
                let ty = self.read_type(r)?;
                let value = read_float(r, element_of(&ty, at)?, at)?;
                Attribute::Float { value, ty }
            }
            9 => {
                let ty = self.read_type(r)?;
                let value = read_integer(r, element_of(&ty, at)?, at)?;
                Attribute::Integer { value, ty }
            }
            10 => {
                let output_tuple_indices = self.read_svarints(r)?;
                let operand_index = r.svarint("an operand index")?;
                let operand_tuple_indices = self.read_svarints(r)?;
                let list = |v: Vec<i64>| Attribute::DenseArray {
                    element: ElementType::Signless(64),
                    values: DenseValues::Int(v),
                };
                Attribute::Struct {
                    kind: "output_operand_alias".into(),
                    fields: vec![
                        named("output_tuple_indices", list(output_tuple_indices)),
                        named("operand_index", i64_attr(operand_index)),
                        named("operand_tuple_indices", list(operand_tuple_indices)),
                    ],
                }
            }
            11 => enumeration(r, "precision", &["DEFAULT", "HIGH", "HIGHEST"])?,
            12 => enumeration(r, "rng_algorithm", &["DEFAULT", "THREE_FRY", "PHILOX"])?,
            13 => enumeration(r, "rng_distribution", &["", "UNIFORM", "NORMAL"])?,
            14 => Attribute::String(self.read_string(r)?),
            15 => {
                let ty = match self.read_type(r)? {
                    Type::Tensor(t) => t,
                    other => return Err(MlirError::malformed(at, format!("a tensor attribute of type {other:?}"))),
                };
                let blob = read_blob(r)?;
                let (values, splat) = dense_values(&ty, blob, at)?;
                Attribute::DenseElements { ty, values, splat }
            }
            16 => enumeration(r, "transpose", &["TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])?,
            17 => match self.read_maybe_type(r)? {
                Some(t) => Attribute::Type(t),
                None => Attribute::Unit,
            },
            18 => {
                let bounds = self.read_svarints(r)?;
                Attribute::Struct {
                    kind: "bounds".into(),
                    fields: vec![named(
                        "bounds",
                        Attribute::DenseArray { element: ElementType::Signless(64), values: DenseValues::Int(bounds) },
                    )],
                }
            }
            19 => enumeration(r, "result_accuracy_mode", &["DEFAULT", "HIGHEST", "TOLERANCE"])?,
            20 => {
                let f64_ty = Type::Element(ElementType::F64);
                let atol = read_float(r, &ElementType::F64, at)?;
                let rtol = read_float(r, &ElementType::F64, at)?;
                let ulps = r.svarint("ulps")?;
                let mode = self.read_attr(r)?;
                Attribute::Struct {
                    kind: "result_accuracy".into(),
                    fields: vec![
                        named("atol", Attribute::Float { value: atol, ty: f64_ty.clone() }),
                        named("rtol", Attribute::Float { value: rtol, ty: f64_ty }),
                        named("ulps", i64_attr(ulps)),
                        named("mode", mode),
                    ],
                }
            }
            21..=25 => {
                let name =
                    ["sub_axis_info", "axis_ref", "replica_group_mesh_axes", "mesh_axis", "mesh"][code as usize - 21];
                return Err(MlirError::unsupported(
                    at,
                    format!("the VHLO attribute `{name}`"),
                    "mesh-based replica groups are not read yet",
                ));
            }
            _ => {
                return Err(MlirError::unsupported(
                    at,
                    format!("VHLO attribute code {code}"),
                    "it is newer than this reader",
                ))
            }
        })
    }

    fn builtin_attr(&mut self, code: u64, r: &mut Cursor<'a>, at: usize) -> Result<Attribute, MlirError> {
        Ok(match code {
            0 => Attribute::Array(self.read_attrs(r)?),
            1 => Attribute::Dictionary(self.read_named(r)?),
            2 => Attribute::String(self.read_string(r)?),
            3 => {
                let s = self.read_string(r)?;
                self.read_type(r)?;
                Attribute::String(s)
            }
            4 | 5 => {
                let mut path = match self.read_attr(r)? {
                    Attribute::String(s) => String::from_utf8_lossy(&s).into_owned(),
                    other => return Err(MlirError::malformed(at, format!("a symbol name is not a string: {other:?}"))),
                };
                if code == 5 {
                    for nested in self.read_attrs(r)? {
                        match nested {
                            Attribute::SymbolRef(s) => {
                                path.push_str("::@");
                                path.push_str(&s);
                            }
                            other => return Err(MlirError::malformed(at, format!("a nested symbol is {other:?}"))),
                        }
                    }
                }
                Attribute::SymbolRef(path)
            }
            6 => Attribute::Type(self.read_type(r)?),
            7 => Attribute::Unit,
            8 => {
                let ty = self.read_type(r)?;
                let element = element_of(&ty, at)?;
                let value = read_integer(r, element, at)?;
                if *element == ElementType::I1 {
                    Attribute::Bool(value != 0)
                } else {
                    Attribute::Integer { value, ty }
                }
            }
            9 => {
                let ty = self.read_type(r)?;
                let value = read_float(r, element_of(&ty, at)?, at)?;
                Attribute::Float { value, ty }
            }
            17 => {
                let element = match self.read_type(r)? {
                    Type::Element(e) => e,
                    other => return Err(MlirError::malformed(at, format!("a dense array of {other:?}"))),
                };
                let size = r.varint("a dense array size")?;
                let blob = read_blob(r)?;
                let dims = vec![Dim::Static(
                    i64::try_from(size).map_err(|_| MlirError::malformed(at, "dense array too large"))?,
                )];
                let ty = TensorType { dims: Some(dims), element: element.clone(), bounds: Vec::new() };
                let (values, splat) = dense_values(&ty, blob, at)?;
                if splat && size != 1 {
                    return Err(MlirError::malformed(at, "a dense array's data does not match its size"));
                }
                Attribute::DenseArray { element, values }
            }
            18 => {
                let ty = match self.read_type(r)? {
                    Type::Tensor(t) => t,
                    other => {
                        return Err(MlirError::unsupported(
                            at,
                            format!("dense elements of type {other:?}"),
                            "only tensors are decoded",
                        ))
                    }
                };
                let blob = read_blob(r)?;
                let (values, splat) = dense_values(&ty, blob, at)?;
                Attribute::DenseElements { ty, values, splat }
            }
            _ => {
                let names = [
                    "array",
                    "dictionary",
                    "string",
                    "string",
                    "symbol",
                    "symbol",
                    "type",
                    "unit",
                    "integer",
                    "float",
                    "CallSiteLoc",
                    "FileLineColLoc",
                    "FusedLoc",
                    "FusedLoc",
                    "NameLoc",
                    "UnknownLoc",
                    "dense_resource",
                    "array",
                    "dense",
                    "dense string elements",
                    "sparse elements",
                    "distinct",
                ];
                let name = names.get(code as usize).copied().unwrap_or("unknown");
                return Err(MlirError::unsupported(
                    at,
                    format!("the builtin attribute `{name}` (code {code})"),
                    "it has no StableHLO meaning here",
                ));
            }
        })
    }

    fn vhlo_type(&mut self, code: u64, r: &mut Cursor<'a>, at: usize) -> Result<MaybeType, MlirError> {
        use ElementType as E;
        let el = |e: ElementType| Ok(Some(Type::Element(e)));
        match code {
            0 => el(E::I1),
            1 => {
                let inner = self.read_type(r)?;
                el(E::Complex(Box::new(element_of(&inner, at)?.clone())))
            }
            2 => el(E::BF16),
            3 => el(E::F16),
            4 => el(E::F32),
            5 => el(E::F64),
            6 => el(E::F8("f8E4M3FN".into())),
            7 => el(E::F8("f8E5M2".into())),
            8 => {
                let inputs = self.read_types(r)?;
                let results = self.read_types(r)?;
                Ok(Some(Type::Function { inputs, results }))
            }
            9 => el(E::Index),
            10..=14 => el(E::Signless([4, 8, 16, 32, 64][code as usize - 10])),
            15..=19 => el(E::Unsigned([4, 8, 16, 32, 64][code as usize - 15])),
            31 => el(E::Signless(2)),
            32 => el(E::Unsigned(2)),
            20 | 21 => {
                let encoding = if code == 21 { Some(self.read_attr(r)?) } else { None };
                let shape = self.read_svarints(r)?;
                let element = self.read_type(r)?;
                Ok(Some(Type::Tensor(tensor(shape, element, encoding, at)?)))
            }
            22 => Ok(Some(Type::Token)),
            23 => Ok(Some(Type::Tuple(self.read_types(r)?))),
            25 => {
                let element = self.read_type(r)?;
                Ok(Some(Type::Tensor(TensorType {
                    dims: None,
                    element: element_of(&element, at)?.clone(),
                    bounds: Vec::new(),
                })))
            }
            27 => el(E::F8("f8E4M3FNUZ".into())),
            28 => el(E::F8("f8E5M2FNUZ".into())),
            29 => el(E::F8("f8E4M3B11FNUZ".into())),
            33 => Ok(None),
            35 => el(E::F8("f8E4M3".into())),
            36 => el(E::F8("f8E3M4".into())),
            40 => el(E::F8("f8E8M0FNU".into())),
            _ => {
                let name = match code {
                    24 => "uniform_quant",
                    26 => "witness",
                    30 => "uniform_quant (per axis)",
                    34 => "tf32",
                    37 => "f4E2M1FN",
                    38 => "f6E2M3FN",
                    39 => "f6E3M2FN",
                    41 => "ranked buffer",
                    42 => "future",
                    _ => "unknown",
                };
                Err(MlirError::unsupported(
                    at,
                    format!("the VHLO type `{name}` (code {code})"),
                    "the tree has no such type yet",
                ))
            }
        }
    }

    fn builtin_type(&mut self, code: u64, r: &mut Cursor<'a>, at: usize) -> Result<MaybeType, MlirError> {
        use ElementType as E;
        let el = |e: ElementType| Ok(Some(Type::Element(e)));
        match code {
            0 => {
                let v = r.varint("an integer type")?;
                let width = u32::try_from(v >> 2).ok().filter(|w| (1..=64).contains(w)).ok_or_else(|| {
                    MlirError::unsupported(
                        at,
                        format!("an integer type of {} bits", v >> 2),
                        "widths 1 to 64 are decoded",
                    )
                })?;
                match (v & 3, width) {
                    (0, 1) => el(E::I1),
                    (0, w) => el(E::Signless(w)),
                    (1, w) => el(E::Signed(w)),
                    (2, w) => el(E::Unsigned(w)),
                    _ => Err(MlirError::malformed(at, "an integer type with signedness 3")),
                }
            }
            1 => el(E::Index),
            2 => {
                let inputs = self.read_types(r)?;
                let results = self.read_types(r)?;
                Ok(Some(Type::Function { inputs, results }))
            }
            3 => el(E::BF16),
            4 => el(E::F16),
            5 => el(E::F32),
            6 => el(E::F64),
            9 => {
                let inner = self.read_type(r)?;
                el(E::Complex(Box::new(element_of(&inner, at)?.clone())))
            }
            12 => Ok(None),
            13 | 14 => {
                let encoding = if code == 14 { Some(self.read_attr(r)?) } else { None };
                let shape = self.read_svarints(r)?;
                let element = self.read_type(r)?;
                Ok(Some(Type::Tensor(tensor(shape, element, encoding, at)?)))
            }
            15 => Ok(Some(Type::Tuple(self.read_types(r)?))),
            18 => {
                let element = self.read_type(r)?;
                Ok(Some(Type::Tensor(TensorType {
                    dims: None,
                    element: element_of(&element, at)?.clone(),
                    bounds: Vec::new(),
                })))
            }
            _ => {
                let names = [
                    "integer", "index", "function", "bf16", "f16", "f32", "f64", "f80", "f128", "complex", "memref",
                    "memref", "none", "tensor", "tensor", "tuple", "memref", "memref", "tensor", "vector", "vector",
                ];
                let name = names.get(code as usize).copied().unwrap_or("unknown");
                Err(MlirError::unsupported(
                    at,
                    format!("the builtin type `{name}` (code {code})"),
                    "StableHLO does not use it",
                ))
            }
        }
    }
}

fn named(name: &str, value: Attribute) -> NamedAttribute {
    NamedAttribute { name: name.into(), value }
}

/// An `i64` integer attribute.
pub(super) fn i64_attr(value: i64) -> Attribute {
    Attribute::Integer { value: i128::from(value), ty: Type::Element(ElementType::Signless(64)) }
}

fn element_of(ty: &Type, at: usize) -> Result<&ElementType, MlirError> {
    match ty {
        Type::Element(e) => Ok(e),
        other => Err(MlirError::malformed(at, format!("expected an element type, found {other:?}"))),
    }
}

/// A tensor type from its shape, element type and optional encoding (VHLO's
/// type extensions hold the bounds of dynamic dimensions).
fn tensor(shape: Vec<i64>, element: Type, encoding: Option<Attribute>, at: usize) -> Result<TensorType, MlirError> {
    let element = element_of(&element, at)?.clone();
    let dims = shape
        .iter()
        .map(|d| match *d {
            DYNAMIC => Ok(Dim::Dynamic),
            d if d >= 0 => Ok(Dim::Static(d)),
            d => Err(MlirError::malformed(at, format!("a tensor dimension of {d}"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let bounds = match encoding {
        None => Vec::new(),
        Some(Attribute::Struct { kind, fields }) if kind == "bounds" => {
            match fields.into_iter().next().map(|f| f.value) {
                Some(Attribute::DenseArray { values: DenseValues::Int(b), .. }) if b.len() == dims.len() => {
                    b.into_iter().map(|b| (b != DYNAMIC).then_some(b)).collect()
                }
                _ => return Err(MlirError::malformed(at, "tensor bounds do not match the rank")),
            }
        }
        Some(other) => {
            return Err(MlirError::unsupported(
                at,
                format!("the tensor encoding {other:?}"),
                "only StableHLO bounds are decoded",
            ))
        }
    };
    Ok(TensorType { dims: Some(dims), element, bounds })
}
