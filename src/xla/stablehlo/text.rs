//! MLIR text for StableHLO: tensor types, constants, and a builder context
//! that appends one op per call in MLIR's generic form.
//!
//! Every op is printed as `%n = "stablehlo.op"(%a, %b) {attrs} : (types) ->
//! type`, which every StableHLO version parses the same way. SSA names are
//! `%v<n>`, fresh per module (regions included), so a region never shadows
//! an outer value. A composite value (a TensorList: its buffer and its
//! size) is several SSA values: its name is their names and its type
//! their types, each joined by `, `, so it prints as its leaves in every
//! operand and type list, and crosses `stablehlo.while`/`if`/`case` and
//! `func.call` as those leaves (StableHLO has no tuple loop values). Constants are printed as raw little-endian hex
//! (`dense<"0x...">`), exact for every value. Cost: linear in the text.

use std::fmt::Write;

use crate::exec::Tensor;
use crate::ir::DType;

/// A tensor type: element type and static shape; or a composite of
/// several tensor types (`parts`, with `dtype` `variant`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ty {
    /// The element type.
    pub dtype: DType,
    /// The size of each dimension, outermost first.
    pub shape: Vec<usize>,
    /// A composite's leaf types (empty for a tensor).
    pub parts: Vec<Ty>,
}

impl Ty {
    /// The type of `t` (a TensorList's: see [`super::lists::list_type`]).
    pub fn of(t: &Tensor) -> Ty {
        use crate::exec::variant::Variant;
        match t.as_variant() {
            Some(Variant::List(l)) => return super::lists::list_type(l),
            // An Optional: its flag, then its components (none known for an empty one).
            Some(Variant::Optional(v)) => {
                let mut parts = vec![Ty::scalar(DType::Bool)];
                parts.extend(v.iter().flatten().map(Ty::of));
                return Ty::composite(parts);
            }
            None => {}
        }
        Ty { dtype: t.dtype(), shape: t.shape().to_vec(), parts: Vec::new() }
    }

    /// A tensor of `dtype` and `shape`.
    pub fn new(dtype: DType, shape: Vec<usize>) -> Ty {
        // A quantized dtype is its plain integer type on the device.
        Ty { dtype: dtype.plain(), shape, parts: Vec::new() }
    }

    /// A composite of `parts`.
    pub fn composite(parts: Vec<Ty>) -> Ty {
        Ty { dtype: DType::Variant, shape: Vec::new(), parts }
    }

    /// Whether this is an Optional's type: a composite led by a scalar
    /// `i1` flag (a TensorList's buffer has at least one dimension).
    pub fn is_optional(&self) -> bool {
        self.parts.first().is_some_and(|p| p.dtype == DType::Bool && p.shape.is_empty() && p.parts.is_empty())
    }

    /// The tensor types this type prints as: itself, or a composite's parts.
    pub fn leaves(&self) -> Vec<Ty> {
        if self.parts.is_empty() {
            vec![self.clone()]
        } else {
            self.parts.iter().flat_map(Ty::leaves).collect()
        }
    }

    /// A scalar of `dtype`.
    pub fn scalar(dtype: DType) -> Ty {
        Ty::new(dtype, Vec::new())
    }

    /// This type with another element type.
    pub fn with_dtype(&self, dtype: DType) -> Ty {
        Ty::new(dtype, self.shape.clone())
    }

    /// This type with another shape.
    pub fn with_shape(&self, shape: Vec<usize>) -> Ty {
        Ty::new(self.dtype, shape)
    }

    /// Elements in the tensor.
    pub fn count(&self) -> usize {
        self.shape.iter().product()
    }

    /// `tensor<2x3xf32>`; a composite: its leaves, joined by `, `.
    pub fn mlir(&self) -> String {
        if !self.parts.is_empty() {
            return self.leaves().iter().map(Ty::mlir).collect::<Vec<_>>().join(", ");
        }
        let mut s = String::from("tensor<");
        for d in &self.shape {
            let _ = write!(s, "{d}x");
        }
        s.push_str(element(self.dtype));
        s.push('>');
        s
    }
}

/// The MLIR element type of a dtype the device holds (others print as
/// `none`; [`super::emit_module`] refuses them before any text is built).
pub fn element(dtype: DType) -> &'static str {
    match dtype.plain() {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::Bool => "i1",
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        DType::I8 => "i8",
        DType::U8 => "ui8",
        DType::I16 => "i16",
        DType::U16 => "ui16",
        DType::U32 => "ui32",
        DType::U64 => "ui64",
        DType::C64 => "complex<f32>",
        DType::C128 => "complex<f64>",
        _ => "none",
    }
}

/// True for the dtypes a device program can hold: the fixed-width numeric
/// dtypes and bool (quantized ones as their plain integers).
pub fn device_dtype(dtype: DType) -> bool {
    dtype.size_bytes().is_some()
}

/// True for the floating-point dtypes a device program can hold.
pub fn float_dtype(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64 | DType::BF16 | DType::F16)
}

/// An SSA value and its type.
#[derive(Clone, Debug, PartialEq)]
pub struct Val {
    /// The SSA name, `%` included.
    pub name: String,
    /// The value's type.
    pub ty: Ty,
}

impl Val {
    /// A composite value of `parts`.
    pub fn composite(parts: &[Val]) -> Val {
        Val {
            name: parts.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", "),
            ty: Ty::composite(parts.iter().map(|v| v.ty.clone()).collect()),
        }
    }

    /// A composite's parts (a tensor value has none).
    pub fn parts(&self) -> Vec<Val> {
        let names: Vec<&str> = self.name.split(", ").collect();
        let mut at = 0;
        let mut out = Vec::with_capacity(self.ty.parts.len());
        for ty in &self.ty.parts {
            let n = ty.leaves().len();
            out.push(Val { name: names.get(at..at + n).unwrap_or_default().join(", "), ty: ty.clone() });
            at += n;
        }
        out
    }

    /// Values of `types` named `{r}#{i}` for the leaves of a multi-result
    /// op `r` (or `r` itself when there is a single leaf).
    pub fn results(r: &str, types: &[Ty]) -> Vec<Val> {
        let total: usize = types.iter().map(|t| t.leaves().len()).sum();
        let mut at = 0;
        let mut out = Vec::with_capacity(types.len());
        for ty in types {
            let n = ty.leaves().len();
            let name = if total == 1 {
                r.to_string()
            } else {
                (at..at + n).map(|i| format!("{r}#{i}")).collect::<Vec<_>>().join(", ")
            };
            out.push(Val { name, ty: ty.clone() });
            at += n;
        }
        out
    }

    /// Fresh block-argument values of `types`, and their `%a: type` list.
    pub fn params(c: &mut Ctx, types: &[Ty]) -> (Vec<Val>, String) {
        let mut decls = Vec::new();
        let mut out = Vec::with_capacity(types.len());
        for ty in types {
            let names: Vec<String> = ty.leaves().iter().map(|_| c.fresh()).collect();
            for (n, t) in names.iter().zip(ty.leaves()) {
                decls.push(format!("{n}: {}", t.mlir()));
            }
            out.push(Val { name: names.join(", "), ty: ty.clone() });
        }
        (out, decls.join(", "))
    }
}

/// The number of leaves (SSA values) of `types`.
pub fn leaf_count(types: &[Ty]) -> usize {
    types.iter().map(|t| t.leaves().len()).sum()
}

/// The text being built and the SSA counter.
#[derive(Debug, Default)]
pub struct Ctx {
    /// The module text written so far.
    pub text: String,
    next: usize,
    /// Indentation of the current block.
    pub indent: usize,
    /// The logical core of the ops being printed: each gets
    /// `mhlo.sharding = "{maximal device=k}"` (model parallelism).
    pub sharding: Option<u32>,
    /// The values whose size along one axis depends on values: by SSA
    /// name, a padded buffer's axis and its true size (an i32 scalar).
    pub dynamic: std::collections::HashMap<String, Dynamic>,
}

/// The true size of a padded buffer along `axis` (docs/xla.md, "Ops whose
/// output size depends on values").
#[derive(Clone, Debug)]
pub struct Dynamic {
    /// The padded axis.
    pub axis: usize,
    /// The number of its leading entries that hold values (i32 scalar).
    pub size: Val,
}

/// Comparison directions of `stablehlo.compare`.
#[derive(Clone, Copy, Debug)]
pub enum Cmp {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
}

/// The reductions the builders use.
#[derive(Clone, Copy, Debug)]
pub enum Reducer {
    /// Sum.
    Add,
    /// Maximum.
    Max,
    Min,
    Mul,
    And,
    Or,
}

impl Reducer {
    /// The scalar op of the reduction.
    fn op(self) -> &'static str {
        match self {
            Reducer::Add => "stablehlo.add",
            Reducer::Max => "stablehlo.maximum",
            Reducer::Min => "stablehlo.minimum",
            Reducer::Mul => "stablehlo.multiply",
            Reducer::And => "stablehlo.and",
            Reducer::Or => "stablehlo.or",
        }
    }

    /// The identity of the reduction in `dtype`.
    pub fn identity(self, dtype: DType) -> f64 {
        match (self, dtype) {
            (Reducer::Add | Reducer::Or, _) => 0.0,
            (Reducer::Mul | Reducer::And, _) => 1.0,
            (Reducer::Max, DType::I32) => f64::from(i32::MIN),
            (Reducer::Max, DType::I64) => i64::MIN as f64,
            (Reducer::Max, DType::I8) => f64::from(i8::MIN),
            (Reducer::Max, DType::U8 | DType::Bool) => 0.0,
            (Reducer::Min, DType::I32) => f64::from(i32::MAX),
            (Reducer::Min, DType::I64) => i64::MAX as f64,
            (Reducer::Min, DType::I8) => f64::from(i8::MAX),
            (Reducer::Min, DType::U8) => f64::from(u8::MAX),
            (Reducer::Min, DType::Bool) => 1.0,
            (Reducer::Min, _) => f64::INFINITY,
            (Reducer::Max, _) => f64::NEG_INFINITY,
        }
    }
}

impl Ctx {
    /// A fresh SSA name.
    pub fn fresh(&mut self) -> String {
        self.next += 1;
        format!("%v{}", self.next)
    }

    /// Appends one line (or a multi-line op with regions) at the current
    /// indentation, with the current sharding on an op definition.
    pub fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.text.push_str("  ");
        }
        match self.sharding {
            Some(k) if text.starts_with('%') && text.contains(" = \"stablehlo.") => {
                // The op's own type follows its last ` : (`; its attributes, if any, end just before.
                let at = text.rfind(" : (").unwrap_or(text.len());
                let attr = format!("mhlo.sharding = \"{{maximal device={k}}}\"");
                if text[..at].ends_with('}') {
                    self.text.push_str(&text[..at - 1]);
                    self.text.push_str(&format!(", {attr}}}"));
                } else {
                    self.text.push_str(&text[..at]);
                    self.text.push_str(&format!(" {{{attr}}}"));
                }
                self.text.push_str(&text[at..]);
            }
            _ => self.text.push_str(text),
        }
        self.text.push('\n');
    }

    /// `%r = "name"(operands) {attrs} : (operand types) -> result`.
    pub fn op(&mut self, name: &str, operands: &[&Val], attrs: &str, result: Ty) -> Val {
        let r = self.fresh();
        let names: Vec<&str> = operands.iter().map(|v| v.name.as_str()).collect();
        let types: Vec<String> = operands.iter().map(|v| v.ty.mlir()).collect();
        let attrs = if attrs.is_empty() { String::new() } else { format!(" {{{attrs}}}") };
        self.line(&format!(
            "{r} = \"{name}\"({}){attrs} : ({}) -> {}",
            names.join(", "),
            types.join(", "),
            result.mlir()
        ));
        Val { name: r, ty: result }
    }

    /// An op with regions and any number of results: `%r:n = "name"(operands)
    /// ({regions}) {attrs} : (types) -> (results)`; returns `%r#i` (or `%r`
    /// for one result).
    pub fn op_regions(
        &mut self,
        name: &str,
        operands: &[&Val],
        regions: &[String],
        attrs: &str,
        results: &[Ty],
    ) -> Vec<Val> {
        let r = self.fresh();
        let names: Vec<&str> = operands.iter().map(|v| v.name.as_str()).collect();
        let types: Vec<String> = operands.iter().map(|v| v.ty.mlir()).collect();
        let outs: Vec<String> = results.iter().map(Ty::mlir).collect();
        let regions: Vec<String> =
            regions.iter().map(|g| self.indent_block(g.trim_start_matches('(').trim_end_matches(')'))).collect();
        let regions = if regions.is_empty() { String::new() } else { format!(" ({})", regions.join(", ")) };
        let attrs = if attrs.is_empty() { String::new() } else { format!(" {{{attrs}}}") };
        let n = leaf_count(results);
        let (lhs, result_types) =
            if n == 1 { (r.clone(), outs[0].clone()) } else { (format!("{r}:{n}"), format!("({})", outs.join(", "))) };
        self.line(&format!(
            "{lhs} = \"{name}\"({}){regions}{attrs} : ({}) -> {result_types}",
            names.join(", "),
            types.join(", ")
        ));
        Val::results(&r, results)
    }

    /// A region `(a, b) -> body` over scalars of `dtype`, where `body`
    /// appends ops to a scratch context given the two arguments and returns
    /// the value to yield.
    pub fn region(&mut self, dtype: DType, body: impl FnOnce(&mut Ctx, &Val, &Val) -> Val) -> String {
        let t = Ty::scalar(dtype);
        let a = Val { name: self.fresh(), ty: t.clone() };
        let b = Val { name: self.fresh(), ty: t.clone() };
        let mut inner =
            Ctx { text: String::new(), next: self.next, indent: 1, sharding: None, dynamic: Default::default() };
        let out = body(&mut inner, &a, &b);
        self.next = inner.next;
        format!(
            "({{\n^bb0({}: {}, {}: {}):\n{}  \"stablehlo.return\"({}) : ({}) -> ()\n}})",
            a.name,
            t.mlir(),
            b.name,
            t.mlir(),
            inner.text,
            out.name,
            out.ty.mlir()
        )
    }

    /// A constant holding `t` (bool tensors go through an i32 constant).
    pub fn constant(&mut self, t: &Tensor) -> Val {
        let ty = Ty::of(t);
        if let Tensor::Bool(a) = t {
            let ints = Tensor::from_vec(&ty.shape, a.iter().map(|&b| i32::from(b)).collect())
                .unwrap_or_else(|_| Tensor::scalar(0i32));
            let i = self.constant(&ints);
            let zero = self.splat(&ty.with_dtype(DType::I32), 0.0);
            return self.compare(&i, &zero, Cmp::Ne);
        }
        let mut hex = String::with_capacity(2 + ty.count() * 8);
        hex.push_str("0x");
        let mut push = |bytes: &[u8]| {
            for b in bytes {
                let _ = write!(hex, "{b:02X}");
            }
        };
        match t {
            Tensor::F32(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::F64(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::I32(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::I64(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::BF16(a) => a.iter().for_each(|v| push(&v.to_bits().to_le_bytes())),
            Tensor::F16(a) => a.iter().for_each(|v| push(&v.to_bits().to_le_bytes())),
            Tensor::I8(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::U8(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::I16(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::U16(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::U32(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::U64(a) => a.iter().for_each(|v| push(&v.to_le_bytes())),
            Tensor::C64(a) => a.iter().for_each(|v| {
                push(&v.re.to_le_bytes());
                push(&v.im.to_le_bytes())
            }),
            Tensor::C128(a) => a.iter().for_each(|v| {
                push(&v.re.to_le_bytes());
                push(&v.im.to_le_bytes())
            }),
            _ => {}
        }
        let r = self.fresh();
        let mlir = ty.mlir();
        self.line(&format!("{r} = \"stablehlo.constant\"() {{value = dense<\"{hex}\"> : {mlir}}} : () -> {mlir}"));
        Val { name: r, ty }
    }

    /// A tensor of type `ty` with every element `value`.
    pub fn splat(&mut self, ty: &Ty, value: f64) -> Val {
        let literal = match ty.dtype {
            // Bit patterns: exact, and valid for infinities.
            DType::F32 => format!("0x{:08X}", (value as f32).to_bits()),
            DType::F64 => format!("0x{:016X}", value.to_bits()),
            DType::BF16 => format!("0x{:04X}", half::bf16::from_f64(value).to_bits()),
            DType::F16 => format!("0x{:04X}", half::f16::from_f64(value).to_bits()),
            DType::Bool => (value != 0.0).to_string(),
            // One element's bytes, (real, imaginary): a splat of `value + 0i`.
            DType::C64 => format!("\"0x{:08X}00000000\"", (value as f32).to_bits().swap_bytes()),
            DType::C128 => format!("\"0x{:016X}0000000000000000\"", value.to_bits().swap_bytes()),
            _ => format!("{}", value as i64),
        };
        let r = self.fresh();
        let mlir = ty.mlir();
        self.line(&format!("{r} = \"stablehlo.constant\"() {{value = dense<{literal}> : {mlir}}} : () -> {mlir}"));
        Val { name: r, ty: ty.clone() }
    }

    /// Broadcasts `v` NumPy-style (trailing dimensions aligned) to `shape`.
    pub fn broadcast_to(&mut self, v: &Val, shape: &[usize]) -> Val {
        if v.ty.shape == shape {
            return v.clone();
        }
        let offset = shape.len() - v.ty.shape.len();
        let dims: Vec<String> = (0..v.ty.shape.len()).map(|i| (i + offset).to_string()).collect();
        // Size-1 dimensions that grow go through a reshape that drops them.
        let keep: Vec<usize> =
            (0..v.ty.shape.len()).filter(|&i| v.ty.shape[i] == shape[i + offset] || v.ty.shape[i] != 1).collect();
        if keep.len() != v.ty.shape.len() {
            let squeezed = self.reshape(v, keep.iter().map(|&i| v.ty.shape[i]).collect());
            let dims: Vec<String> = keep.iter().map(|&i| (i + offset).to_string()).collect();
            return self.op(
                "stablehlo.broadcast_in_dim",
                &[&squeezed],
                &format!("broadcast_dimensions = array<i64{}>", list(&dims)),
                v.ty.with_shape(shape.to_vec()),
            );
        }
        self.op(
            "stablehlo.broadcast_in_dim",
            &[v],
            &format!("broadcast_dimensions = array<i64{}>", list(&dims)),
            v.ty.with_shape(shape.to_vec()),
        )
    }

    /// `stablehlo.reshape` to `shape` (no-op when equal).
    pub fn reshape(&mut self, v: &Val, shape: Vec<usize>) -> Val {
        if v.ty.shape == shape {
            return v.clone();
        }
        let ty = v.ty.with_shape(shape);
        self.op("stablehlo.reshape", &[v], "", ty)
    }

    /// `stablehlo.convert` to `dtype` (no-op when equal); to bool is `!= 0`.
    pub fn convert(&mut self, v: &Val, dtype: DType) -> Val {
        if v.ty.dtype == dtype {
            return v.clone();
        }
        if dtype == DType::Bool {
            let zero = self.splat(&v.ty, 0.0);
            return self.compare(v, &zero, Cmp::Ne);
        }
        // XLA may keep a narrowing float convert at the wider precision
        // (excess precision); rounding explicitly keeps the simulator's numbers.
        let bits = match dtype {
            DType::BF16 => Some((8, 7)),
            DType::F16 => Some((5, 10)),
            _ => None,
        };
        let v = match bits {
            Some((e, m)) if float_dtype(v.ty.dtype) => self.op(
                "stablehlo.reduce_precision",
                &[v],
                &format!("exponent_bits = {e} : i32, mantissa_bits = {m} : i32"),
                v.ty.clone(),
            ),
            _ => v.clone(),
        };
        let ty = v.ty.with_dtype(dtype);
        self.op("stablehlo.convert", &[&v], "", ty)
    }

    /// An elementwise op on same-shaped operands, result typed as operand 0.
    pub fn elementwise(&mut self, name: &str, operands: &[&Val]) -> Val {
        let ty = operands[0].ty.clone();
        self.op(&format!("stablehlo.{name}"), operands, "", ty)
    }

    /// `stablehlo.compare`.
    pub fn compare(&mut self, a: &Val, b: &Val, cmp: Cmp) -> Val {
        let dir = match cmp {
            Cmp::Eq => "EQ",
            Cmp::Ne => "NE",
            Cmp::Lt => "LT",
            Cmp::Le => "LE",
            Cmp::Gt => "GT",
            Cmp::Ge => "GE",
        };
        let kind = match a.ty.dtype {
            d if float_dtype(d) || matches!(d, DType::C64 | DType::C128) => "FLOAT",
            DType::Bool | DType::U8 => "UNSIGNED",
            _ => "SIGNED",
        };
        let ty = a.ty.with_dtype(DType::Bool);
        self.op(
            "stablehlo.compare",
            &[a, b],
            &format!(
                "comparison_direction = #stablehlo<comparison_direction {dir}>, compare_type = #stablehlo<comparison_type {kind}>"
            ),
            ty,
        )
    }

    /// `stablehlo.select(pred, on_true, on_false)`.
    pub fn select(&mut self, pred: &Val, on_true: &Val, on_false: &Val) -> Val {
        let ty = on_true.ty.clone();
        self.op("stablehlo.select", &[pred, on_true, on_false], "", ty)
    }

    /// The computation region `(a, b) -> a <op> b` over scalars of `dtype`.
    pub fn reducer_region(&mut self, dtype: DType, reducer: Reducer) -> String {
        let scalar = Ty::scalar(dtype);
        let (a, b) = (self.fresh(), self.fresh());
        let s = self.fresh();
        let t = scalar.mlir();
        let op = reducer.op();
        format!(
            "({{\n^bb0({a}: {t}, {b}: {t}):\n  {s} = \"{op}\"({a}, {b}) : ({t}, {t}) -> {t}\n  \"stablehlo.return\"({s}) : ({t}) -> ()\n}})"
        )
    }

    /// Reduces `v` over `dims` (sorted, distinct).
    pub fn reduce(&mut self, v: &Val, dims: &[usize], reducer: Reducer) -> Val {
        if dims.is_empty() {
            return v.clone();
        }
        let init = self.splat(&Ty::scalar(v.ty.dtype), reducer.identity(v.ty.dtype));
        let region = self.reducer_region(v.ty.dtype, reducer);
        let shape: Vec<usize> = (0..v.ty.shape.len()).filter(|d| !dims.contains(d)).map(|d| v.ty.shape[d]).collect();
        let ty = v.ty.with_shape(shape);
        let r = self.fresh();
        let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        let region = self.indent_block(&region);
        self.line(&format!(
            "{r} = \"stablehlo.reduce\"({}, {}) {region} {{dimensions = array<i64{}>}} : ({}, {}) -> {}",
            v.name,
            init.name,
            list(&dims),
            v.ty.mlir(),
            init.ty.mlir(),
            ty.mlir()
        ));
        Val { name: r, ty }
    }

    /// `stablehlo.all_reduce` (sum) over `groups` of replicas.
    pub fn all_reduce_sum(&mut self, v: &Val, groups: &[Vec<i64>]) -> Val {
        self.all_reduce_sums(&[v], groups).remove(0)
    }

    /// One `stablehlo.all_reduce` (sum) over `groups` for all of `values`,
    /// which share an element type. XLA:CPU's all-reduce meets the other
    /// replicas once per operand, while a concatenation copies every value
    /// into and out of the packing buffer, so the two are mixed by size:
    /// values of at most [`PACK_ELEMENTS`] elements are flattened and
    /// concatenated into one buffer, and larger values are operands of
    /// their own in the same variadic all-reduce (each read and written in
    /// place). The replicas then meet once for all the small values (the
    /// biases and normalisation scales of a model, which are most of its
    /// tensors and little of its bytes) and once per large one. Each
    /// element is still summed on its own, so the results equal one
    /// [`all_reduce_sum`](Self::all_reduce_sum) per value. Under a maximal
    /// sharding (model parallelism) it is one op per value.
    pub fn all_reduce_sum_many(&mut self, values: &[&Val], groups: &[Vec<i64>]) -> Vec<Val> {
        if self.sharding.is_some() {
            return values.iter().map(|v| self.all_reduce_sum(v, groups)).collect();
        }
        if !groups.is_empty() && groups.iter().all(|g| g.len() <= 1) {
            return self.all_reduce_sums(values, groups);
        }
        let small: Vec<&Val> = values.iter().copied().filter(|v| v.ty.count() <= PACK_ELEMENTS).collect();
        let [first, _, ..] = small[..] else { return self.all_reduce_sums(values, groups) };
        let dtype = first.ty.dtype;
        let flat: Vec<Val> = small.iter().map(|v| self.reshape(v, vec![v.ty.count()])).collect();
        let total: usize = flat.iter().map(|v| v.ty.count()).sum();
        let refs: Vec<&Val> = flat.iter().collect();
        let buffer = self.op("stablehlo.concatenate", &refs, "dimension = 0 : i64", Ty::new(dtype, vec![total]));
        let mut operands: Vec<&Val> = vec![&buffer];
        operands.extend(values.iter().copied().filter(|v| v.ty.count() > PACK_ELEMENTS));
        let sums = self.all_reduce_sums(&operands, groups);
        let Some((summed, large)) = sums.split_first() else { return sums };
        let mut large = large.iter().cloned();
        let mut out = Vec::with_capacity(values.len());
        let mut start = 0;
        for v in values {
            if v.ty.count() > PACK_ELEMENTS {
                out.extend(large.next());
                continue;
            }
            let limit = start + v.ty.count();
            let piece = self.op(
                "stablehlo.slice",
                &[summed],
                &format!(
                    "start_indices = array<i64: {start}>, limit_indices = array<i64: {limit}>, strides = array<i64: 1>"
                ),
                Ty::new(dtype, vec![limit - start]),
            );
            out.push(self.reshape(&piece, v.ty.shape.clone()));
            start = limit;
        }
        out
    }

    /// The variadic `stablehlo.all_reduce` (sum) of `values` over `groups`.
    /// Groups of one replica each (a program replicated once) sum nothing:
    /// each value is its own sum, and no op is emitted. XLA:CPU keeps such
    /// an all-reduce, which copies its operands and makes each filter
    /// gradient a transposed copy in the layout the all-reduce asks for.
    fn all_reduce_sums(&mut self, values: &[&Val], groups: &[Vec<i64>]) -> Vec<Val> {
        if !groups.is_empty() && groups.iter().all(|g| g.len() <= 1) {
            return values.iter().map(|v| (*v).clone()).collect();
        }
        let Some(first) = values.first() else { return Vec::new() };
        let region = self.reducer_region(first.ty.dtype, Reducer::Add);
        let width = groups.first().map_or(0, Vec::len);
        let rows: Vec<String> = groups
            .iter()
            .map(|g| format!("[{}]", g.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")))
            .collect();
        let attrs = format!("replica_groups = dense<[{}]> : tensor<{}x{}xi64>", rows.join(", "), groups.len(), width);
        let types: Vec<Ty> = values.iter().map(|v| v.ty.clone()).collect();
        self.op_regions("stablehlo.all_reduce", values, &[region], &attrs, &types)
    }

    /// The replica id as a scalar of `dtype`.
    pub fn replica_id(&mut self, dtype: DType) -> Val {
        let r = self.fresh();
        self.line(&format!("{r} = \"stablehlo.replica_id\"() : () -> tensor<ui32>"));
        let converted = self.fresh();
        let ty = Ty::scalar(dtype);
        self.line(&format!("{converted} = \"stablehlo.convert\"({r}) : (tensor<ui32>) -> {}", ty.mlir()));
        Val { name: converted, ty }
    }

    /// A scratch context for a region's body (indent 1, no sharding) that
    /// continues this one's SSA numbering.
    pub fn scratch(&self) -> Ctx {
        Ctx { text: String::new(), next: self.next, indent: 1, sharding: None, dynamic: Default::default() }
    }

    /// Continues the SSA numbering after a scratch context's names.
    pub fn resume(&mut self, inner: &Ctx) {
        self.next = self.next.max(inner.next);
    }

    /// Indents the inner lines of a region text to the current level.
    pub fn indent_block(&self, block: &str) -> String {
        let pad = "  ".repeat(self.indent);
        block.lines().enumerate().map(|(i, l)| if i == 0 { l.to_string() } else { format!("\n{pad}{l}") }).collect()
    }
}

/// The largest value (in elements) that [`Ctx::all_reduce_sum_many`]
/// packs into a shared buffer: 64 KiB of f32, whose copy in and out costs
/// about what one more meeting of the replicas costs on XLA:CPU.
pub const PACK_ELEMENTS: usize = 16 * 1024;

/// `: a, b` for `array<i64: a, b>`, empty for no elements.
pub fn list(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(": {}", items.join(", "))
    }
}
