//! Kernels of XLA's custom calls, `XlaCustomCall` and `XlaCustomCallV2`,
//! and of the channel ops `XlaSend` and `XlaRecv`.
//!
//! A custom call names a target that the XLA backend links in; the
//! simulator runs the targets of [`TARGETS`], the ones TensorFlow's XLA
//! bridge itself emits and XLA's CPU backend runs: the sharding
//! annotations `Sharding`, `SPMDFullToShardShape` and
//! `SPMDShardToFullShape` (which a one-device program passes through
//! unchanged; on several devices XLA's partitioner consumes them, so a
//! result of another shape is refused) and `TopK` (the `k` largest values
//! along the last dimension and their `i32` indices, `k` read from the
//! declared result shape). Any other target is refused with a diagnostic
//! naming it and the known ones. Results must be of the declared
//! (`dtype`/`shape`, or `result_dtypes`/`result_shapes`) types.
//!
//! `XlaSend` and `XlaRecv` pass a value through the channel `tensor_name`.
//! [`crate::passes::xla_ext`] writes the channel as a data edge from the
//! sent value to the recv, so `XlaRecv` gives its operand (of the declared
//! dtype and shape) and `XlaSend` does nothing; an unpaired recv is refused
//! naming its `tensor_name`.

use super::arg;
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, AttrValue, DType};

/// A target's kernel: the op, its operands and the declared result types.
type Target = fn(&str, &[Tensor], &[(DType, Vec<usize>)]) -> Result<Vec<Tensor>, KernelError>;

/// The custom-call targets the simulator runs, sorted by name.
pub const TARGETS: &[(&str, Target)] = &[
    ("SPMDFullToShardShape", pass_through),
    ("SPMDShardToFullShape", pass_through),
    ("Sharding", pass_through),
    ("TopK", top_k),
];

/// Runs `op` if it is a custom call; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    Some(match op {
        "XlaCustomCall" | "XlaCustomCallV2" => custom_call(op, attrs, inputs),
        "XlaSend" => arg(op, inputs, 0).map(|_| Vec::new()),
        "XlaRecv" => recv(op, attrs, inputs),
        _ => return None,
    })
}

/// `XlaRecv(sent) {tensor_name, dtype, shape}`: the value its `XlaSend` sent.
fn recv(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let name = attrs.get_str("tensor_name").unwrap_or_default();
    let Some(sent) = inputs.first() else {
        return Err(KernelError::invalid(
            op,
            format!("no XlaSend was paired with tensor_name `{name}` (the XlaSend/XlaRecv channel pass pairs them)"),
        ));
    };
    let want = result_types_of(op, attrs, "dtype", "shape")?;
    if sent.dtype() != want.0 || sent.shape() != want.1.as_slice() {
        return Err(KernelError::invalid(
            op,
            format!(
                "tensor_name `{name}` carries {}{:?}, but the XlaRecv declares {}{:?}",
                sent.dtype(),
                sent.shape(),
                want.0,
                want.1
            ),
        ));
    }
    Ok(vec![sent.clone()])
}

/// The names of [`TARGETS`], for messages.
pub fn target_names() -> String {
    TARGETS.iter().map(|(name, _)| format!("`{name}`")).collect::<Vec<_>>().join(", ")
}

fn custom_call(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let target_key = if op == "XlaCustomCall" { "target_name" } else { "call_target_name" };
    let target = attrs
        .get_str(target_key)
        .ok_or_else(|| KernelError::invalid(op, format!("missing string attribute `{target_key}`")))?;
    let Some(&(_, kernel)) = TARGETS.iter().find(|(name, _)| *name == target) else {
        return Err(KernelError::UnknownCustomCallTarget {
            op: op.to_string(),
            target: target.to_string(),
            known: target_names(),
        });
    };
    let types = result_types(op, attrs)?;
    let results = kernel(op, inputs, &types)?;
    for (k, (t, (dtype, shape))) in results.iter().zip(&types).enumerate() {
        if t.dtype() != *dtype || t.shape() != shape.as_slice() {
            return Err(KernelError::invalid(
                op,
                format!(
                    "target `{target}` gives result {k} as {}{:?}, but the op declares {dtype}{shape:?}",
                    t.dtype(),
                    t.shape()
                ),
            ));
        }
    }
    Ok(results)
}

/// The declared result types: `dtype`/`shape` (one result) or `result_dtypes`/`result_shapes`.
fn result_types(op: &str, attrs: &AttrMap) -> Result<Vec<(DType, Vec<usize>)>, KernelError> {
    let shape_of = |v: &AttrValue, what: &str| -> Result<Vec<usize>, KernelError> {
        let dims = v.as_shape().and_then(|s| s.dims.as_ref());
        let dims = dims.ok_or_else(|| KernelError::invalid(op, format!("{what} is not a shape of known rank")))?;
        dims.iter()
            .map(|&d| usize::try_from(d).map_err(|_| KernelError::invalid(op, format!("{what} has dimension {d}"))))
            .collect()
    };
    if op == "XlaCustomCall" {
        return Ok(vec![result_types_of(op, attrs, "dtype", "shape")?]);
    }
    let list = |key: &str| {
        attrs
            .get(key)
            .and_then(AttrValue::as_list)
            .ok_or_else(|| KernelError::invalid(op, format!("missing list attribute `{key}`")))
    };
    let (dtypes, shapes) = (list("result_dtypes")?, list("result_shapes")?);
    if dtypes.len() != shapes.len() {
        return Err(KernelError::invalid(
            op,
            format!("{} `result_dtypes` but {} `result_shapes`", dtypes.len(), shapes.len()),
        ));
    }
    dtypes
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(i, (t, s))| {
            let t = t
                .as_type()
                .ok_or_else(|| KernelError::invalid(op, format!("`result_dtypes` item {i} is not a type")))?;
            Ok((t, shape_of(s, &format!("`result_shapes` item {i}"))?))
        })
        .collect()
}

/// The type an op declares with a type attribute and a shape attribute.
fn result_types_of(op: &str, attrs: &AttrMap, dtype: &str, shape: &str) -> Result<(DType, Vec<usize>), KernelError> {
    let t = attrs.get(dtype).and_then(AttrValue::as_type);
    let t = t.ok_or_else(|| KernelError::invalid(op, format!("missing type attribute `{dtype}`")))?;
    let dims = attrs.get(shape).and_then(AttrValue::as_shape).and_then(|s| s.dims.as_ref());
    let dims = dims.ok_or_else(|| KernelError::invalid(op, format!("`{shape}` is not a shape of known rank")))?;
    let dims = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| KernelError::invalid(op, format!("`{shape}` has dimension {d}"))))
        .collect::<Result<_, _>>()?;
    Ok((t, dims))
}

/// `Sharding`, `SPMDFullToShardShape`, `SPMDShardToFullShape`: the operand, on one device.
fn pass_through(op: &str, inputs: &[Tensor], types: &[(DType, Vec<usize>)]) -> Result<Vec<Tensor>, KernelError> {
    let x = arg(op, inputs, 0)?;
    if inputs.len() != 1 || types.len() != 1 {
        return Err(KernelError::invalid(op, "a sharding target takes one operand and gives one result"));
    }
    if types[0].1 != x.shape() {
        return Err(KernelError::invalid(
            op,
            format!(
                "a sharding target gives shape {:?} from {:?}: that needs a partitioned program over several devices",
                types[0].1,
                x.shape()
            ),
        ));
    }
    Ok(vec![x.clone()])
}

/// `TopK`: the declared `k` (the last dimension of the results) largest values along the last
/// dimension, and their `i32` indices.
fn top_k(op: &str, inputs: &[Tensor], types: &[(DType, Vec<usize>)]) -> Result<Vec<Tensor>, KernelError> {
    let x = arg(op, inputs, 0)?;
    let [(_, values), (index_type, _)] = types else {
        return Err(KernelError::invalid(op, "`TopK` gives two results, the values and their indices"));
    };
    let k = *values.last().ok_or_else(|| KernelError::invalid(op, "`TopK` needs results of rank 1 or more"))?;
    super::index::top_k(op, x, &Tensor::scalar(k as i64), *index_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::kernels::run_kernel;
    use crate::ir::types::Shape;

    fn v1(target: &str, shape: &[i64]) -> AttrMap {
        let mut attrs = AttrMap::new();
        attrs.insert("target_name", AttrValue::str(target));
        attrs.insert("dtype", AttrValue::Type(DType::F32));
        attrs.insert("shape", AttrValue::Shape(Shape::known(shape.to_vec())));
        attrs
    }

    #[test]
    fn targets_are_sorted() {
        assert!(TARGETS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn an_unknown_target_is_refused_naming_the_known_ones() {
        let x = Tensor::vector(vec![1.0f32, 2.0]);
        let err = run_kernel("XlaCustomCall", &v1("MyKernel", &[2]), &[x]).unwrap_err();
        let shown = format!("{err} {}", miette::Diagnostic::help(&err).map(|h| h.to_string()).unwrap_or_default());
        assert!(shown.contains("`MyKernel`") && shown.contains("`TopK`") && shown.contains("`Sharding`"), "{shown}");
    }

    #[test]
    fn a_recv_gives_the_sent_value_or_names_its_channel() {
        let mut attrs = AttrMap::new();
        attrs.insert("tensor_name", AttrValue::str("chan"));
        attrs.insert("dtype", AttrValue::Type(DType::F32));
        attrs.insert("shape", AttrValue::Shape(Shape::known(vec![2])));
        let x = Tensor::vector(vec![1.0f32, -2.0]);
        assert_eq!(run_kernel("XlaRecv", &attrs, std::slice::from_ref(&x)).unwrap(), vec![x]);
        let err = run_kernel("XlaRecv", &attrs, &[]).unwrap_err();
        assert!(err.to_string().contains("tensor_name `chan`"), "{err}");
        let wrong = Tensor::vector(vec![1.0f32, 2.0, 3.0]);
        assert!(run_kernel("XlaRecv", &attrs, &[wrong]).is_err());
    }

    #[test]
    fn a_sharding_that_changes_the_shape_is_refused() {
        let x = Tensor::vector(vec![1.0f32, 2.0]);
        let err = run_kernel("XlaCustomCall", &v1("SPMDFullToShardShape", &[1]), &[x]).unwrap_err();
        assert!(err.to_string().contains("several devices"), "{err}");
    }
}
