//! StableHLO modules as TensorFlow's `XlaCallModule` carries them.
//!
//! jax2tf and `jax.export` serialize a StableHLO module into the `module`
//! attribute of an `XlaCallModule` node, as a StableHLO portable artifact:
//! MLIR bytecode of the versioned VHLO dialect. This module holds the
//! decoded form, shared by the reader (bytecode and VHLO to this tree) and by
//! the pass that turns a module into an IR function.
//!
//! The tree is MLIR's generic form after VHLO has been mapped back to
//! StableHLO: an [`Operation`] has its dialect-qualified name
//! (`stablehlo.add`, `func.return`), operands, typed results, named
//! attributes and regions. Invariants:
//! - every [`ValueId`] is defined once in its [`Function`] (block arguments
//!   and operation results share one numbering) before it is used, except
//!   in graph regions, which StableHLO does not have;
//! - operation names are StableHLO's, `func.*` or `builtin.*`, never
//!   `vhlo.*_vN`;
//! - dense element data is decoded into [`DenseValues`]; a splat keeps one
//!   value and [`Attribute::DenseElements::splat`] is set, so a large
//!   constant of zeros costs one element.

use std::fmt;

mod bytecode;
mod dense;
mod error;
mod legalize;
mod print;
mod vhlo;
mod vhlo_ops;

pub use error::MlirError;

/// Decodes a StableHLO portable artifact (MLIR bytecode of the VHLO
/// dialect, as jax.export writes it) into a [`Module`] with StableHLO
/// names. Never panics: malformed, truncated or unsupported input is an
/// [`MlirError`] at the byte offset concerned.
pub fn read_portable_artifact(bytes: &[u8]) -> Result<Module, MlirError> {
    let container = bytecode::Container::parse(bytes)?;
    let top = bytecode::read_ir(&container)?;
    let mut decoder = vhlo::Decoder::new(&container);
    legalize::module(&mut decoder, top)
}

/// A decoded module: its functions in file order and the module's own
/// attributes (for example `mhlo.num_replicas`).
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    /// The `func.func`s, in file order.
    pub functions: Vec<Function>,
    /// The module operation's own attributes.
    pub attributes: Vec<NamedAttribute>,
}

impl Module {
    /// The function named `name` (without `@`).
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }
}

/// A `func.func`: its symbol, visibility, signature and body.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// The symbol, without `@`.
    pub name: String,
    /// Whether callers outside the module see it.
    pub visibility: Visibility,
    /// The argument types.
    pub inputs: Vec<Type>,
    /// The result types.
    pub results: Vec<Type>,
    /// Per-argument attribute dictionaries (`jax.buffer_donor`, shardings),
    /// empty when the function has none.
    pub arg_attributes: Vec<Vec<NamedAttribute>>,
    /// Per-result attribute dictionaries, empty when there are none.
    pub result_attributes: Vec<Vec<NamedAttribute>>,
    /// The body; its entry block's arguments are the function's inputs.
    pub body: Region,
}

/// Whether a function may be called from outside the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visibility {
    /// `public`: the default, callable from outside.
    Public,
    /// `private`: called only inside the module.
    Private,
}

/// A region: the body of a function or of a `while`, `reduce`, `case`, ...
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Region {
    /// Its blocks; StableHLO regions have one.
    pub blocks: Vec<Block>,
}

/// A block: its arguments and its operations, the terminator last.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Block {
    /// The block arguments.
    pub arguments: Vec<Value>,
    /// The operations in order.
    pub operations: Vec<Operation>,
}

/// One SSA value number, unique within its function. Displays as `%N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// A defined value with its type.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// Its number.
    pub id: ValueId,
    /// Its type.
    pub ty: Type,
}

/// An operation in MLIR's generic form.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    /// Dialect-qualified name, e.g. `stablehlo.dot_general`.
    pub name: String,
    /// The values it uses, in order.
    pub operands: Vec<ValueId>,
    /// The values it defines, in order.
    pub results: Vec<Value>,
    /// Its attributes, in the order of the file.
    pub attributes: Vec<NamedAttribute>,
    /// Its regions (a `while` has two).
    pub regions: Vec<Region>,
}

impl Operation {
    /// The attribute named `name`, if present.
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name).map(|a| &a.value)
    }
}

/// An attribute with its name.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedAttribute {
    /// The name, e.g. `comparison_direction`.
    pub name: String,
    /// The value.
    pub value: Attribute,
}

/// A type, as far as StableHLO uses them.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// A ranked or unranked tensor.
    Tensor(TensorType),
    /// A bare element type (the type of an integer or float attribute).
    Element(ElementType),
    /// `!stablehlo.token`.
    Token,
    /// `tuple<...>`.
    Tuple(Vec<Type>),
    /// A function type, as in a `func.func`'s `function_type`.
    Function {
        /// The argument types.
        inputs: Vec<Type>,
        /// The result types.
        results: Vec<Type>,
    },
}

/// A tensor type: its shape, element type and dimension bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorType {
    /// `None` for an unranked tensor (`tensor<*xf32>`).
    pub dims: Option<Vec<Dim>>,
    /// The element type.
    pub element: ElementType,
    /// Bounds of dynamic dimensions (`#stablehlo.bounds<...>`), one per
    /// dimension, `None` where a dimension has no bound; empty when the type
    /// has no bounds encoding.
    pub bounds: Vec<Option<i64>>,
}

/// One dimension of a tensor type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A known size.
    Static(i64),
    /// `?`.
    Dynamic,
}

/// Element types. Integers carry their width; `I1` is StableHLO's `pred`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElementType {
    /// `i1`.
    I1,
    /// `si8`..`si64`.
    Signed(u32),
    /// `ui8`..`ui64`.
    Unsigned(u32),
    /// Signless integers (`i32`), which StableHLO treats as signed.
    Signless(u32),
    /// `index`.
    Index,
    /// `f16`.
    F16,
    /// `bf16`.
    BF16,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// The 8-bit float formats, by MLIR's name (`f8E4M3FN`, ...).
    F8(String),
    /// `complex<f32>` and `complex<f64>`.
    Complex(Box<ElementType>),
}

/// Attribute values. StableHLO's structured attributes (dot, convolution,
/// gather and scatter dimension numbers, precision, ...) are
/// [`Attribute::Struct`]s named as in the textual form (`dot`, `conv`,
/// `gather`, `scatter`, ...) with their fields by their textual names.
#[derive(Clone, Debug, PartialEq)]
pub enum Attribute {
    /// `unit`.
    Unit,
    /// `true` or `false`.
    Bool(bool),
    /// An integer of the given type.
    Integer {
        /// The value.
        value: i128,
        /// Its type.
        ty: Type,
    },
    /// A float of the given type.
    Float {
        /// The value.
        value: f64,
        /// Its type.
        ty: Type,
    },
    /// A string; bytes, since MLIR strings need not be UTF-8.
    String(Vec<u8>),
    /// A type used as a value.
    Type(Type),
    /// `[...]`.
    Array(Vec<Attribute>),
    /// `{...}`.
    Dictionary(Vec<NamedAttribute>),
    /// `array<i64: ...>` and its kin.
    DenseArray {
        /// The element type.
        element: ElementType,
        /// The values.
        values: DenseValues,
    },
    /// `dense<...> : tensor<...>`.
    DenseElements {
        /// The tensor type.
        ty: TensorType,
        /// The values in row-major order, one when `splat`.
        values: DenseValues,
        /// Whether one value fills the tensor.
        splat: bool,
    },
    /// `@name` (or a nested reference, joined with `::`).
    SymbolRef(String),
    /// An enumerated value such as `#stablehlo<comparison_direction GT>`:
    /// `kind` is `comparison_direction`, `value` is `GT`.
    Enum {
        /// The enumeration, e.g. `comparison_direction`.
        kind: String,
        /// The case, e.g. `GT`.
        value: String,
    },
    /// A structured attribute with named fields.
    Struct {
        /// The attribute's name, e.g. `dot`.
        kind: String,
        /// Its fields by name.
        fields: Vec<NamedAttribute>,
    },
}

/// Decoded element data, widened to the Rust type of its family.
#[derive(Clone, Debug, PartialEq)]
pub enum DenseValues {
    /// `i1`.
    Bool(Vec<bool>),
    /// Signed and signless integers.
    Int(Vec<i64>),
    /// Unsigned integers.
    UInt(Vec<u64>),
    /// Floats of every width.
    Float(Vec<f64>),
    /// Real and imaginary parts interleaved.
    Complex(Vec<f64>),
}

impl DenseValues {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            DenseValues::Bool(v) => v.len(),
            DenseValues::Int(v) => v.len(),
            DenseValues::UInt(v) => v.len(),
            DenseValues::Float(v) => v.len(),
            DenseValues::Complex(v) => v.len() / 2,
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
