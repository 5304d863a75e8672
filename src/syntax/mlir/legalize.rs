//! VHLO operations mapped back to StableHLO: names (`vhlo.add_v1` to
//! `stablehlo.add`, `vhlo.func_v1` to a [`Function`], `vhlo.return_v1` to
//! `func.return` in a function body and `stablehlo.return` elsewhere) and
//! attributes, as StableHLO's own VHLO-to-StableHLO legalization does:
//! VHLO spells every attribute out, so defaults are removed again; flat
//! dimension fields are gathered into one structured attribute (`dot`,
//! `conv`, `gather`, `scatter`, `channel_handle`); `i64` tensors become
//! dense arrays where StableHLO declares arrays.
//!
//! Structured attributes are [`Attribute::Struct`]s: integer lists are
//! `array<i64>` [`Attribute::DenseArray`]s and single integers `i64`
//! [`Attribute::Integer`]s, fields named as StableHLO's textual form names
//! them.

use super::bytecode::{Container, RawBlock, RawOp, RawProperties, RawRegion};
use super::error::MlirError;
use super::vhlo::{i64_attr, Decoder};
use super::vhlo_ops;
use super::{
    Attribute, Block, DenseValues, ElementType, Function, Module, NamedAttribute, Operation, Region, Type, Value,
    Visibility,
};

/// Builds the module from the top-level operations (one `builtin.module`).
pub(super) fn module(d: &mut Decoder<'_, '_>, top: Vec<RawOp<'_>>) -> Result<Module, MlirError> {
    let c = d.c;
    let mut top = top.into_iter();
    let (Some(op), None) = (top.next(), top.next()) else {
        return Err(MlirError::malformed(c.ir.offset(), "expected exactly one top-level builtin.module"));
    };
    if op_name(c, &op) != ("builtin", "module") {
        let (dialect, name) = op_name(c, &op);
        return Err(MlirError::unsupported(
            op.offset,
            format!("a top-level `{dialect}.{name}`"),
            "the artifact holds one builtin.module",
        ));
    }
    let attributes = op_attributes(d, &op)?;
    let [region] = <[RawRegion; 1]>::try_from(op.regions)
        .map_err(|_| MlirError::malformed(op.offset, "builtin.module has one region"))?;
    let mut functions = Vec::new();
    for block in region.blocks {
        if !block.arguments.is_empty() {
            return Err(MlirError::malformed(op.offset, "the module body has arguments"));
        }
        for f in block.ops {
            functions.push(function(d, f)?);
        }
    }
    Ok(Module { functions, attributes })
}

fn op_name<'a>(c: &Container<'a>, op: &RawOp<'_>) -> (&'a str, &'a str) {
    let n = &c.op_names[op.name];
    (c.dialects[n.dialect], n.name)
}

/// An operation's attribute dictionary and properties, merged.
fn op_attributes(d: &mut Decoder<'_, '_>, op: &RawOp<'_>) -> Result<Vec<NamedAttribute>, MlirError> {
    let mut attrs = match op.attrs {
        Some(i) => match d.attr(i, op.offset)? {
            Attribute::Dictionary(v) => v,
            other => return Err(MlirError::malformed(op.offset, format!("an operation's attributes are {other:?}"))),
        },
        None => Vec::new(),
    };
    match &op.properties {
        None => {}
        Some(RawProperties::Attribute(i)) => match d.attr(*i, op.offset)? {
            Attribute::Dictionary(v) => attrs.extend(v),
            other => return Err(MlirError::malformed(op.offset, format!("an operation's properties are {other:?}"))),
        },
        Some(RawProperties::Native(blob)) => {
            let (dialect, name) = op_name(d.c, op);
            // builtin.module's properties are its optional symbol name and
            // visibility; a VHLO operation's are its attributes in
            // declaration order, each required.
            let (names, optional): (&[&str], bool) = match (dialect, name) {
                ("builtin", "module") => (&["sym_name", "sym_visibility"], true),
                ("vhlo", name) => match vhlo_ops::properties(name) {
                    Some(names) => (names, false),
                    None => {
                        return Err(MlirError::unsupported(
                            op.offset,
                            format!("the operation `vhlo.{name}`"),
                            "it is not in the VHLO operation set this reader knows",
                        ))
                    }
                },
                _ => {
                    return Err(MlirError::unsupported(
                        op.offset,
                        format!("natively encoded properties of `{dialect}.{name}`"),
                        "only builtin.module and VHLO operations are read",
                    ))
                }
            };
            let mut r = *blob;
            for prop in names {
                let at = r.offset();
                let (i, present) =
                    if optional { r.varint_flag("a property")? } else { (r.varint("a property")?, true) };
                if present {
                    attrs.push(NamedAttribute { name: (*prop).into(), value: d.attr(i, at)? });
                }
            }
            if !r.is_empty() {
                return Err(MlirError::malformed(
                    r.offset(),
                    format!("trailing bytes in the properties of `{dialect}.{name}`"),
                ));
            }
        }
    }
    Ok(attrs)
}

fn take(attrs: &mut Vec<NamedAttribute>, name: &str) -> Option<Attribute> {
    let i = attrs.iter().position(|a| a.name == name)?;
    Some(attrs.remove(i).value)
}

fn function(d: &mut Decoder<'_, '_>, op: RawOp<'_>) -> Result<Function, MlirError> {
    let at = op.offset;
    let (dialect, name) = op_name(d.c, &op);
    if (dialect, name) != ("vhlo", "func_v1") {
        return Err(MlirError::unsupported(
            at,
            format!("`{dialect}.{name}` in the module body"),
            "the module holds functions",
        ));
    }
    let mut attrs = op_attributes(d, &op)?;
    let bad = |what: &str| MlirError::malformed(at, format!("func.func's {what}"));
    let name = match take(&mut attrs, "sym_name") {
        Some(Attribute::String(s)) => String::from_utf8(s).map_err(|_| bad("name is not UTF-8"))?,
        other => return Err(bad(&format!("sym_name is {other:?} (attributes {attrs:?})"))),
    };
    let visibility = match take(&mut attrs, "sym_visibility") {
        None => Visibility::Public,
        Some(Attribute::String(s)) if s.is_empty() || s == b"public" => Visibility::Public,
        Some(Attribute::String(s)) if s == b"private" => Visibility::Private,
        Some(other) => {
            return Err(MlirError::unsupported(
                at,
                format!("the symbol visibility {other:?}"),
                "public and private are read",
            ))
        }
    };
    let (inputs, results) = match take(&mut attrs, "function_type") {
        Some(Attribute::Type(Type::Function { inputs, results })) => (inputs, results),
        _ => return Err(bad("function_type is missing")),
    };
    let mut dictionaries = |key: &str| -> Result<Vec<Vec<NamedAttribute>>, MlirError> {
        match take(&mut attrs, key) {
            None => Ok(Vec::new()),
            Some(Attribute::Array(items)) => items
                .into_iter()
                .map(|a| match a {
                    Attribute::Dictionary(v) => Ok(v),
                    _ => Err(bad(&format!("{key} holds a non-dictionary"))),
                })
                .collect(),
            Some(_) => Err(bad(&format!("{key} is not an array"))),
        }
    };
    let arg_attributes = dictionaries("arg_attrs")?;
    let result_attributes = dictionaries("res_attrs")?;
    if let Some(extra) = attrs.first() {
        return Err(MlirError::unsupported(
            at,
            format!("the attribute `{}` on func.func", extra.name),
            "the tree keeps a function's symbol, visibility, signature and argument/result attributes",
        ));
    }
    let [region] = <[RawRegion; 1]>::try_from(op.regions).map_err(|_| bad("body is not one region"))?;
    let body = region_of(d, region, Parent::Function)?;
    Ok(Function { name, visibility, inputs, results, arg_attributes, result_attributes, body })
}

#[derive(Clone, Copy, PartialEq)]
enum Parent {
    Function,
    Operation,
}

fn region_of(d: &mut Decoder<'_, '_>, region: RawRegion<'_>, parent: Parent) -> Result<Region, MlirError> {
    let mut blocks = Vec::with_capacity(region.blocks.len());
    for RawBlock { arguments, ops } in region.blocks {
        let mut args = Vec::with_capacity(arguments.len());
        for (ty, id) in arguments {
            args.push(Value { id, ty: d.ty(ty, 0)? });
        }
        let mut operations = Vec::with_capacity(ops.len());
        for op in ops {
            operations.push(operation(d, op, parent)?);
        }
        blocks.push(Block { arguments: args, operations });
    }
    Ok(Region { blocks })
}

fn operation(d: &mut Decoder<'_, '_>, op: RawOp<'_>, parent: Parent) -> Result<Operation, MlirError> {
    let at = op.offset;
    let (dialect, raw_name) = op_name(d.c, &op);
    if dialect != "vhlo" {
        return Err(MlirError::unsupported(
            at,
            format!("the operation `{dialect}.{raw_name}`"),
            "function bodies hold VHLO operations",
        ));
    }
    let base = strip_version(raw_name).ok_or_else(|| {
        MlirError::unsupported(at, format!("the operation `vhlo.{raw_name}`"), "VHLO names end in `_vN`")
    })?;
    let name = match base {
        "return" if parent == Parent::Function => "func.return".to_string(),
        "call" => "func.call".to_string(),
        "func" => {
            return Err(MlirError::unsupported(
                at,
                "a func.func nested in an operation",
                "functions live in the module body",
            ))
        }
        other => format!("stablehlo.{other}"),
    };
    let attrs = op_attributes(d, &op)?;
    let attributes = legalize_attributes(base, attrs, at)?;
    let mut results = Vec::with_capacity(op.results.len());
    for (ty, id) in op.results {
        results.push(Value { id, ty: d.ty(ty, at)? });
    }
    let mut regions = Vec::with_capacity(op.regions.len());
    for region in op.regions {
        regions.push(region_of(d, region, Parent::Operation)?);
    }
    Ok(Operation { name, operands: op.operands, results, attributes, regions })
}

/// `add_v1` to `add`.
fn strip_version(name: &str) -> Option<&str> {
    let (base, version) = name.rsplit_once("_v")?;
    (!version.is_empty() && version.bytes().all(|b| b.is_ascii_digit())).then_some(base)
}

/// The longest splat dimension list expanded (a tensor's rank is far less).
const MAX_LIST: usize = 1 << 16;

fn int_list(a: &Attribute) -> Option<Vec<i64>> {
    match a {
        Attribute::DenseElements { ty, values: DenseValues::Int(v), splat } => {
            let n = ty.dims.as_ref()?.iter().try_fold(1usize, |n, d| match d {
                super::Dim::Static(s) => n.checked_mul(usize::try_from(*s).ok()?),
                super::Dim::Dynamic => None,
            })?;
            // Dimension lists are short; a splat claiming more is refused
            // rather than expanded.
            Some(if *splat { vec![*v.first()?; (n <= MAX_LIST).then_some(n)?] } else { v.clone() })
        }
        Attribute::DenseArray { values: DenseValues::Int(v), .. } => Some(v.clone()),
        _ => None,
    }
}

fn i64_array(v: Vec<i64>) -> Attribute {
    Attribute::DenseArray { element: ElementType::Signless(64), values: DenseValues::Int(v) }
}

fn int_value(a: &Attribute) -> Option<i64> {
    match a {
        Attribute::Integer { value, .. } => i64::try_from(*value).ok(),
        _ => None,
    }
}

/// Whether `a` is a splat dense tensor of `v` (as StableHLO's default check).
fn is_splat_of(a: Option<&Attribute>, v: f64) -> bool {
    match a {
        Some(Attribute::DenseElements { values, splat: true, .. }) => match values {
            DenseValues::Int(x) => x.first().is_some_and(|x| *x as f64 == v),
            DenseValues::Bool(x) => x.first().is_some_and(|x| f64::from(u8::from(*x)) == v),
            _ => false,
        },
        _ => false,
    }
}

fn find<'v>(attrs: &'v [NamedAttribute], name: &str) -> Option<&'v Attribute> {
    attrs.iter().find(|a| a.name == name).map(|a| &a.value)
}

/// The attributes of the StableHLO operation `op` (its name without dialect)
/// from its VHLO attributes.
fn legalize_attributes(op: &str, mut attrs: Vec<NamedAttribute>, at: usize) -> Result<Vec<NamedAttribute>, MlirError> {
    remove_defaults(op, &mut attrs);
    let mut out = implode(op, &mut attrs, at)?;
    for NamedAttribute { name, value } in attrs {
        let bad = || MlirError::malformed(at, format!("`{name}` of stablehlo.{op} has an unexpected form"));
        let converted = match (op, name.as_str()) {
            (
                "all_gather"
                | "all_reduce"
                | "all_to_all"
                | "collective_permute"
                | "reduce_scatter"
                | "collective_broadcast"
                | "collective_reduce",
                "channel_id",
            ) => {
                let handle = int_value(&value).ok_or_else(bad)?;
                out.push(NamedAttribute { name: "channel_handle".into(), value: channel_handle(handle, 0) });
                continue;
            }
            (_, "use_global_device_ids" | "has_dynamic_root")
                if matches!(
                    op,
                    "all_gather"
                        | "all_reduce"
                        | "all_to_all"
                        | "collective_permute"
                        | "reduce_scatter"
                        | "collective_broadcast"
                        | "collective_reduce"
                ) =>
            {
                match value {
                    Attribute::Bool(false) => continue,
                    Attribute::Bool(true) => Attribute::Unit,
                    _ => return Err(bad()),
                }
            }
            ("custom_call", "called_computations") => match value {
                Attribute::Array(items) => {
                    Attribute::Array(items.into_iter().map(symbol).collect::<Option<_>>().ok_or_else(bad)?)
                }
                _ => return Err(bad()),
            },
            ("composite", "decomposition") | ("call", "callee") => symbol(value).ok_or_else(bad)?,
            ("fft", "fft_length")
            | ("broadcast", "broadcast_sizes")
            | ("dynamic_slice", "slice_sizes")
            | ("reverse", "dimensions")
            | ("transpose", "permutation")
            | ("pad", "edge_padding_low" | "edge_padding_high" | "interior_padding")
            | ("slice", "start_indices" | "limit_indices" | "strides")
            | ("broadcast_in_dim", "broadcast_dimensions")
            | (
                "dynamic_broadcast_in_dim",
                "broadcast_dimensions" | "known_expanding_dimensions" | "known_nonexpanding_dimensions",
            )
            | ("select_and_scatter", "window_dimensions" | "window_strides")
            | ("reduce_window", "window_dimensions" | "window_strides" | "base_dilations" | "window_dilations")
            | ("map" | "reduce", "dimensions")
            | ("gather", "slice_sizes")
            | ("convolution" | "dynamic_conv", "lhs_dilation" | "rhs_dilation" | "window_strides") => {
                i64_array(int_list(&value).ok_or_else(bad)?)
            }
            ("convolution" | "dynamic_conv", "window_reversal") => match value {
                Attribute::DenseElements { ty, values: DenseValues::Bool(v), splat } => {
                    let n = match ty.dims.as_deref() {
                        Some([super::Dim::Static(n)]) => usize::try_from(*n).map_err(|_| bad())?,
                        _ => return Err(bad()),
                    };
                    let v = if splat && n <= MAX_LIST {
                        vec![*v.first().ok_or_else(bad)?; n]
                    } else if splat {
                        return Err(bad());
                    } else {
                        v
                    };
                    Attribute::DenseArray { element: ElementType::I1, values: DenseValues::Bool(v) }
                }
                _ => return Err(bad()),
            },
            _ => value,
        };
        out.push(NamedAttribute { name, value: converted });
    }
    Ok(out)
}

fn symbol(a: Attribute) -> Option<Attribute> {
    match a {
        Attribute::String(s) => Some(Attribute::SymbolRef(String::from_utf8(s).ok()?)),
        _ => None,
    }
}

fn channel_handle(handle: i64, kind: i64) -> Attribute {
    Attribute::Struct {
        kind: "channel_handle".into(),
        fields: vec![
            NamedAttribute { name: "handle".into(), value: i64_attr(handle) },
            NamedAttribute { name: "type".into(), value: i64_attr(kind) },
        ],
    }
}

/// Removes the attributes VHLO spells out at their default values.
fn remove_defaults(op: &str, attrs: &mut Vec<NamedAttribute>) {
    let is =
        |attrs: &[NamedAttribute], name: &str, test: &dyn Fn(&Attribute) -> bool| find(attrs, name).is_some_and(test);
    let false_ = |a: &Attribute| *a == Attribute::Bool(false);
    let empty_array = |a: &Attribute| matches!(a, Attribute::Array(v) if v.is_empty());
    let empty_dict = |a: &Attribute| matches!(a, Attribute::Dictionary(v) if v.is_empty());
    let empty_string = |a: &Attribute| matches!(a, Attribute::String(v) if v.is_empty());
    let empty_tensor = |a: &Attribute| matches!(a, Attribute::DenseElements { values, .. } if values.is_empty());
    let int = |v: i64| move |a: &Attribute| int_value(a) == Some(v);
    let all_default_precision = |a: &Attribute| match a {
        Attribute::Array(v) => v.iter().all(|p| matches!(p, Attribute::Enum { value, .. } if value == "DEFAULT")),
        _ => false,
    };
    let mut drop = Vec::new();
    let mut check = |name: &'static str, test: &dyn Fn(&Attribute) -> bool| {
        if is(attrs, name, test) {
            drop.push(name);
        }
    };
    match op {
        "all_gather" | "all_reduce" | "reduce_scatter" | "collective_reduce" => {
            check("channel_id", &int(0));
            check("use_global_device_ids", &false_);
            check("has_dynamic_root", &false_);
        }
        "all_to_all" | "collective_permute" => check("channel_id", &int(0)),
        "collective_broadcast" => {
            check("channel_id", &int(0));
            check("has_dynamic_root", &false_);
        }
        "cholesky" => check("lower", &false_),
        "compare" => check("compare_type", &|a| matches!(a, Attribute::Enum { value, .. } if value == "NOTYPE")),
        "composite" => {
            check("version", &int(0));
            check("composite_attributes", &empty_dict);
        }
        "convolution" | "dynamic_conv" => {
            check("window_strides", &|a| is_splat_of(Some(a), 1.0));
            if op == "convolution" {
                check("padding", &|a| is_splat_of(Some(a), 0.0));
            }
            check("lhs_dilation", &|a| is_splat_of(Some(a), 1.0));
            check("rhs_dilation", &|a| is_splat_of(Some(a), 1.0));
            check("window_reversal", &|a| is_splat_of(Some(a), 0.0));
            check("precision_config", &all_default_precision);
        }
        "custom_call" => {
            check("has_side_effect", &false_);
            check("backend_config", &|a| empty_string(a) || empty_dict(a));
            check("api_version", &int(1));
            check("called_computations", &empty_array);
            let layouts = |a: &Attribute| empty_array(a) && is(attrs, "result_layouts", &empty_array);
            check("operand_layouts", &layouts);
            check("result_layouts", &|a| empty_array(a) && is(attrs, "operand_layouts", &empty_array));
            check("output_operand_aliases", &empty_array);
            check("result_tilings", &empty_array);
        }
        "dot_general" | "dot" => check("precision_config", &all_default_precision),
        "dynamic_broadcast_in_dim" => {
            check("known_expanding_dimensions", &empty_tensor);
            check("known_nonexpanding_dimensions", &empty_tensor);
        }
        "gather" | "dynamic_gather" => check("indices_are_sorted", &false_),
        "infeed" => {
            check("infeed_config", &empty_string);
            check("layout", &empty_array);
        }
        "outfeed" => check("outfeed_config", &empty_string),
        "recv" | "send" => {
            check("is_host_transfer", &false_);
            check("source_target_pairs", &empty_tensor);
        }
        "reduce_window" => {
            check("window_strides", &|a| is_splat_of(Some(a), 1.0));
            check("base_dilations", &|a| is_splat_of(Some(a), 1.0));
            check("window_dilations", &|a| is_splat_of(Some(a), 1.0));
            check("padding", &|a| is_splat_of(Some(a), 0.0));
        }
        "scatter" => {
            check("indices_are_sorted", &false_);
            check("unique_indices", &false_);
        }
        "select_and_scatter" => {
            check("window_strides", &|a| is_splat_of(Some(a), 1.0));
            check("padding", &|a| is_splat_of(Some(a), 0.0));
        }
        "sort" => {
            check("dimension", &int(-1));
            check("is_stable", &false_);
        }
        "cbrt"
        | "cosine"
        | "exponential"
        | "exponential_minus_one"
        | "log"
        | "log_plus_one"
        | "logistic"
        | "rsqrt"
        | "sine"
        | "sqrt"
        | "tan"
        | "tanh" => check("result_accuracy", &default_accuracy),
        _ => {}
    }
    attrs.retain(|a| !drop.contains(&a.name.as_str()));
}

fn default_accuracy(a: &Attribute) -> bool {
    let Attribute::Struct { kind, fields } = a else { return false };
    kind == "result_accuracy"
        && fields.iter().all(|f| match (&f.name[..], &f.value) {
            ("atol" | "rtol", Attribute::Float { value, .. }) => *value == 0.0,
            ("ulps", v) => int_value(v) == Some(0),
            ("mode", Attribute::Enum { value, .. }) => value == "DEFAULT",
            _ => false,
        })
}

/// Gathers the flat VHLO fields of structured StableHLO attributes.
fn implode(op: &str, attrs: &mut Vec<NamedAttribute>, at: usize) -> Result<Vec<NamedAttribute>, MlirError> {
    let (target, kind, fields): (&str, &str, &[(&str, bool)]) = match op {
        "convolution" | "dynamic_conv" => (
            "dimension_numbers",
            "conv",
            &[
                ("input_batch_dimension", false),
                ("input_feature_dimension", false),
                ("input_spatial_dimensions", true),
                ("kernel_input_feature_dimension", false),
                ("kernel_output_feature_dimension", false),
                ("kernel_spatial_dimensions", true),
                ("output_batch_dimension", false),
                ("output_feature_dimension", false),
                ("output_spatial_dimensions", true),
            ],
        ),
        "dot_general" => (
            "dot_dimension_numbers",
            "dot",
            &[
                ("lhs_batching_dimensions", true),
                ("rhs_batching_dimensions", true),
                ("lhs_contracting_dimensions", true),
                ("rhs_contracting_dimensions", true),
            ],
        ),
        "gather" | "dynamic_gather" => (
            "dimension_numbers",
            "gather",
            &[
                ("offset_dims", true),
                ("collapsed_slice_dims", true),
                ("operand_batching_dims", true),
                ("start_indices_batching_dims", true),
                ("start_index_map", true),
                ("index_vector_dim", false),
            ],
        ),
        "scatter" => (
            "scatter_dimension_numbers",
            "scatter",
            &[
                ("update_window_dims", true),
                ("inserted_window_dims", true),
                ("input_batching_dims", true),
                ("scatter_indices_batching_dims", true),
                ("scatter_dims_to_operand_dims", true),
                ("index_vector_dim", false),
            ],
        ),
        "send" | "recv" => {
            let missing = || MlirError::malformed(at, format!("stablehlo.{op} lacks its channel"));
            let id = take(attrs, "channel_id").as_ref().and_then(int_value).ok_or_else(missing)?;
            let ty = take(attrs, "channel_type").as_ref().and_then(int_value).ok_or_else(missing)?;
            return Ok(vec![NamedAttribute { name: "channel_handle".into(), value: channel_handle(id, ty) }]);
        }
        _ => return Ok(Vec::new()),
    };
    let mut out = Vec::with_capacity(fields.len());
    for (field, is_list) in fields {
        let value =
            take(attrs, field).ok_or_else(|| MlirError::malformed(at, format!("stablehlo.{op} lacks `{field}`")))?;
        let bad = || MlirError::malformed(at, format!("`{field}` of stablehlo.{op} is {value:?}"));
        let value = if *is_list {
            i64_array(int_list(&value).ok_or_else(bad)?)
        } else {
            i64_attr(int_value(&value).ok_or_else(bad)?)
        };
        out.push(NamedAttribute { name: (*field).into(), value });
    }
    let mut result =
        vec![NamedAttribute { name: target.into(), value: Attribute::Struct { kind: kind.into(), fields: out } }];
    if op == "dot_general" {
        result.extend(dot_algorithm(attrs, at)?);
    }
    Ok(result)
}

/// `dot_general`'s algorithm: absent when every field is `none`.
fn dot_algorithm(attrs: &mut Vec<NamedAttribute>, at: usize) -> Result<Option<NamedAttribute>, MlirError> {
    const FIELDS: [&str; 7] = [
        "lhs_precision_type",
        "rhs_precision_type",
        "accumulation_type",
        "lhs_component_count",
        "rhs_component_count",
        "num_primitive_operations",
        "allow_imprecise_accumulation",
    ];
    let values: Vec<Option<Attribute>> = FIELDS.iter().map(|f| take(attrs, f)).collect();
    if values.iter().all(|v| v.is_none() || v == &Some(Attribute::Unit)) {
        return Ok(None);
    }
    let mut fields = Vec::with_capacity(FIELDS.len());
    for (name, value) in FIELDS.iter().zip(values) {
        let value = value
            .filter(|v| *v != Attribute::Unit)
            .ok_or_else(|| MlirError::malformed(at, format!("dot_general's algorithm lacks `{name}`")))?;
        fields.push(NamedAttribute { name: (*name).into(), value });
    }
    Ok(Some(NamedAttribute {
        name: "algorithm".into(),
        value: Attribute::Struct { kind: "dot_algorithm".into(), fields },
    }))
}
