//! Static shapes: the shape of a value when the graph alone (attributes
//! and constants, no run) fixes every dimension.
//!
//! Meaning: [`static_shapes`] visits the nodes in a topological order and
//! gives an op's output 0 a shape when its rule knows the op and every
//! operand shape and constant operand that rule reads is known. Sources:
//! a fully known `_output_shapes` entry (any output), a `Placeholder`'s
//! `shape`, a `Const`'s value, and a variable read (the `shape` of the
//! `VarHandleOp` it reads). Rules: unary and gradient ops that keep their
//! operand's shape, elementwise binaries with NumPy broadcasting, `MatMul`,
//! `BatchMatMul*`, `Einsum` without ellipses, and `Reshape`, `Transpose`,
//! `Tile`, `Fill`, `ExpandDims`, `Squeeze` and the reductions with constant
//! shape operands. Anything else, or any unknown or dynamic dimension, has
//! no static shape.
//!
//! Invariant: a shape given is the shape the op produces at run time for
//! every valid input (the rules follow TensorFlow's shape functions); a
//! value with no static shape is `None`, never a guess. Cost: linear in
//! the nodes and edges visited, plus the constants read.
//!
//! [`rules`] is the other half: the per-op type rules (dtype and shape of
//! every output from the operands' types and the constant operands) that
//! the StableHLO emitter uses to type a device program without running it.

pub mod rules;

use rustc_hash::FxHashMap;

use super::graph::{Graph, Input, NodeId};
use super::types::{AttrValue, DType};

/// The static shapes of a graph's values (see the module docs).
#[derive(Debug, Default)]
pub struct StaticShapes {
    shapes: FxHashMap<(NodeId, u32), Vec<i64>>,
}

impl StaticShapes {
    /// The static shape of `value`, if known.
    pub fn of(&self, value: Input) -> Option<&[i64]> {
        self.shapes.get(&(value.src, value.output.unwrap_or(0))).map(Vec::as_slice)
    }

    /// The element count of `value`, if its shape is known.
    pub fn elements(&self, value: Input) -> Option<u64> {
        self.of(value)?.iter().try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
    }
}

/// Unary ops (and gradient ops whose output has operand 0's shape).
const SAME_AS_OPERAND_0: &[&str] = &[
    "Abs",
    "AddN",
    "BiasAdd",
    "Cast",
    "Ceil",
    "CrossReplicaSum",
    "Elu",
    "EluGrad",
    "Erf",
    "Exp",
    "Floor",
    "Identity",
    "LeakyRelu",
    "Log",
    "Log1p",
    "LogSoftmax",
    "Neg",
    "OnesLike",
    "PreventGradient",
    "Reciprocal",
    "Relu",
    "Relu6",
    "Relu6Grad",
    "ReluGrad",
    "Round",
    "Rsqrt",
    "RsqrtGrad",
    "Sigmoid",
    "SigmoidGrad",
    "Sign",
    "Snapshot",
    "Softmax",
    "Softplus",
    "Sqrt",
    "SqrtGrad",
    "Square",
    "StopGradient",
    "Tanh",
    "TanhGrad",
    "TPUReplicatedInput",
    "ZerosLike",
];

/// Elementwise binaries: the NumPy broadcast of the two operand shapes.
const BROADCASTING: &[&str] = &[
    "Add",
    "AddV2",
    "Div",
    "DivNoNan",
    "FloorDiv",
    "FloorMod",
    "Maximum",
    "Minimum",
    "Mul",
    "MulNoNan",
    "Pow",
    "RealDiv",
    "SquaredDifference",
    "Sub",
];

/// Reductions over constant axes (operand 1), keeping them when `keep_dims`.
const REDUCTIONS: &[&str] = &["All", "Any", "Max", "Mean", "Min", "Prod", "Sum"];

/// The static shapes of `graph`'s values; `order` lists its nodes with every
/// node after its operands (nodes missing from it get no shape).
pub fn static_shapes(graph: &Graph, order: &[NodeId]) -> StaticShapes {
    let mut out = StaticShapes::default();
    for &id in order {
        let node = graph.node(id);
        if let Some(AttrValue::List(entries)) = node.attrs.get("_output_shapes") {
            for (k, entry) in entries.iter().enumerate() {
                let dims = entry.as_shape().and_then(|s| s.dims.clone());
                if let (Some(dims), Ok(k)) = (dims, u32::try_from(k)) {
                    if dims.iter().all(|&d| d >= 0) {
                        out.shapes.insert((id, k), dims);
                    }
                }
            }
        }
        if out.shapes.contains_key(&(id, 0)) {
            continue;
        }
        if let Some(shape) = infer(graph, id, &out).filter(|s| s.iter().all(|&d| d >= 0)) {
            out.shapes.insert((id, 0), shape);
        }
    }
    out
}

/// Output 0's shape by the op's rule, from the shapes known so far.
fn infer(graph: &Graph, id: NodeId, known: &StaticShapes) -> Option<Vec<i64>> {
    let node = graph.node(id);
    let inputs = graph.data_inputs(id);
    let shape = |k: usize| inputs.get(k).and_then(|&i| known.of(i)).map(<[i64]>::to_vec);
    let constant = |k: usize| inputs.get(k).and_then(|&i| const_ints(graph, i));
    let flag = |name: &str| node.attrs.get(name).and_then(AttrValue::as_bool).unwrap_or(false);
    match &*node.op {
        "Placeholder" => node.attrs.get("shape")?.as_shape()?.dims.clone(),
        "Const" => Some(node.attrs.get("value")?.as_tensor()?.shape.clone()),
        "ReadVariableOp" => variable_shape(graph, *inputs.first()?),
        op if SAME_AS_OPERAND_0.contains(&op) => shape(0),
        op if BROADCASTING.contains(&op) => broadcast(&shape(0)?, &shape(1)?),
        "MatMul" => {
            let (a, b) = (shape(0)?, shape(1)?);
            let (m, ka) = pick(&a, flag("transpose_a"))?;
            let (kb, n) = pick(&b, flag("transpose_b"))?;
            (ka == kb).then(|| vec![m, n])
        }
        "BatchMatMul" | "BatchMatMulV2" | "BatchMatMulV3" => {
            let (a, b) = (shape(0)?, shape(1)?);
            if a.len() < 2 || b.len() < 2 {
                return None;
            }
            let (m, ka) = pick(&a[a.len() - 2..], flag("adj_x"))?;
            let (kb, n) = pick(&b[b.len() - 2..], flag("adj_y"))?;
            if ka != kb {
                return None;
            }
            let mut dims = broadcast(&a[..a.len() - 2], &b[..b.len() - 2])?;
            dims.extend([m, n]);
            Some(dims)
        }
        "Einsum" => {
            let equation = node.attrs.get_str("equation")?;
            let shapes: Option<Vec<Vec<i64>>> = (0..inputs.len()).map(shape).collect();
            einsum(equation, &shapes?)
        }
        "Reshape" => reshape(shape(0).as_deref(), &constant(1)?),
        "Transpose" => {
            let (x, perm) = (shape(0)?, constant(1)?);
            (perm.len() == x.len())
                .then(|| perm.iter().map(|&p| usize::try_from(p).ok().and_then(|p| x.get(p).copied())).collect())?
        }
        "Tile" => {
            let (x, multiples) = (shape(0)?, constant(1)?);
            if multiples.len() != x.len() {
                return None;
            }
            x.iter().zip(&multiples).map(|(d, m)| d.checked_mul(*m)).collect()
        }
        "Fill" => constant(0),
        "AllGather" => {
            let (mut x, groups) = (shape(0)?, shape(1)?);
            let [_, size] = groups[..] else { return None };
            *x.first_mut()? *= size;
            Some(x)
        }
        "ExpandDims" => {
            let (mut x, axis) = (shape(0)?, *constant(1)?.first()?);
            let at = normalize_axis(axis, x.len() + 1)?;
            x.insert(at, 1);
            Some(x)
        }
        "Squeeze" => {
            let x = shape(0)?;
            let axes: Vec<usize> = match node.attrs.get("squeeze_dims").and_then(AttrValue::as_list) {
                Some(list) if !list.is_empty() => {
                    list.iter().map(|a| normalize_axis(a.as_int()?, x.len())).collect::<Option<_>>()?
                }
                _ => (0..x.len()).filter(|&d| x[d] == 1).collect(),
            };
            Some(x.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &v)| v).collect())
        }
        op if REDUCTIONS.contains(&op) => {
            let x = shape(0)?;
            let axes: Vec<usize> = constant(1)?.iter().map(|&a| normalize_axis(a, x.len())).collect::<Option<_>>()?;
            let keep = flag("keep_dims");
            Some(
                x.iter()
                    .enumerate()
                    .filter_map(|(d, &v)| match (axes.contains(&d), keep) {
                        (true, true) => Some(1),
                        (true, false) => None,
                        (false, _) => Some(v),
                    })
                    .collect(),
            )
        }
        _ => None,
    }
}

/// `(rows, columns)` of a matrix shape, transposed when asked.
fn pick(matrix: &[i64], transposed: bool) -> Option<(i64, i64)> {
    match (matrix, transposed) {
        ([r, c], false) => Some((*r, *c)),
        ([r, c], true) => Some((*c, *r)),
        _ => None,
    }
}

/// The NumPy broadcast of two shapes; `None` when they do not broadcast.
fn broadcast(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[i64], k: usize| if k < rank - s.len() { 1 } else { s[k - (rank - s.len())] };
    (0..rank)
        .map(|k| match (dim(a, k), dim(b, k)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// An axis in `[-rank, rank)` as an index.
fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let rank = i64::try_from(rank).ok()?;
    let at = if axis < 0 { axis + rank } else { axis };
    (0..rank).contains(&at).then_some(at as usize)
}

/// `Reshape`'s result: `target` with a `-1` filled in from the operand's
/// element count.
fn reshape(x: Option<&[i64]>, target: &[i64]) -> Option<Vec<i64>> {
    let unknown = target.iter().filter(|&&d| d == -1).count();
    match unknown {
        0 => Some(target.to_vec()),
        1 => {
            let total = x?.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d))?;
            let rest = target.iter().filter(|&&d| d != -1).try_fold(1i64, |acc, &d| acc.checked_mul(d))?;
            if rest <= 0 || total % rest != 0 {
                return None;
            }
            Some(target.iter().map(|&d| if d == -1 { total / rest } else { d }).collect())
        }
        _ => None,
    }
}

/// `Einsum`'s result for an explicit equation (`ab,bc->ac`; no ellipsis).
fn einsum(equation: &str, shapes: &[Vec<i64>]) -> Option<Vec<i64>> {
    let (lhs, out) = equation.split_once("->")?;
    let terms: Vec<&str> = lhs.split(',').map(str::trim).collect();
    if terms.len() != shapes.len() || equation.contains('.') {
        return None;
    }
    let mut size: FxHashMap<char, i64> = FxHashMap::default();
    for (term, shape) in terms.iter().zip(shapes) {
        if term.chars().count() != shape.len() {
            return None;
        }
        for (label, &d) in term.chars().zip(shape) {
            if *size.entry(label).or_insert(d) != d {
                return None;
            }
        }
    }
    out.trim().chars().map(|label| size.get(&label).copied()).collect()
}

/// The integer values of a constant operand (through `Identity`s).
fn const_ints(graph: &Graph, value: Input) -> Option<Vec<i64>> {
    let mut current = value;
    for _ in 0..16 {
        let node = graph.node(current.src);
        match &*node.op {
            "Const" => {
                let t = node.attrs.get("value")?.as_tensor()?;
                if !matches!(t.dtype, DType::I32 | DType::I64) || t.num_elements() > 1 << 16 {
                    return None;
                }
                return t.to_f64_vec()?.into_iter().map(|v| Some(v as i64)).collect();
            }
            "Identity" => current = *graph.data_inputs(current.src).first()?,
            _ => return None,
        }
    }
    None
}

/// The `shape` of the `VarHandleOp` a handle comes from (through
/// `Identity` and `TPUReplicatedInput`).
fn variable_shape(graph: &Graph, handle: Input) -> Option<Vec<i64>> {
    let mut current = handle;
    for _ in 0..16 {
        let node = graph.node(current.src);
        match &*node.op {
            "VarHandleOp" => return node.attrs.get("shape")?.as_shape()?.dims.clone(),
            "Identity" | "TPUReplicatedInput" => current = *graph.data_inputs(current.src).first()?,
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[4, 1, 3], &[5, 1]), Some(vec![4, 5, 3]));
        assert_eq!(broadcast(&[], &[2, 2]), Some(vec![2, 2]));
        assert_eq!(broadcast(&[3], &[4]), None);
    }

    #[test]
    fn reshape_fills_one_unknown_dimension() {
        assert_eq!(reshape(Some(&[4, 6]), &[-1, 3]), Some(vec![8, 3]));
        assert_eq!(reshape(None, &[2, 3]), Some(vec![2, 3]));
        assert_eq!(reshape(Some(&[5]), &[-1, 3]), None);
        assert_eq!(reshape(Some(&[6]), &[-1, -1]), None);
        // Sizes past i64 are no static shape, not an overflow.
        assert_eq!(reshape(Some(&[1 << 40, 1 << 40]), &[-1, 2]), None);
    }

    #[test]
    fn einsum_reads_labels() {
        assert_eq!(einsum("bij,bjk->bik", &[vec![2, 3, 4], vec![2, 4, 5]]), Some(vec![2, 3, 5]));
        assert_eq!(einsum("ij->ji", &[vec![2, 3]]), Some(vec![3, 2]));
        assert_eq!(einsum("ij,jk->ik", &[vec![2, 3], vec![4, 5]]), None);
        assert_eq!(einsum("...ij->...ji", &[vec![2, 3]]), None);
    }
}
