//! Variant values: the `DT_VARIANT` scalars TensorFlow's functional
//! control flow passes around.
//!
//! A [`TensorList`] is what `tf.while_loop` accumulators and `TensorArray`s
//! are made of (`TensorListReserve`, `TensorListPushBack`, ...); an
//! `Optional` is what the gradient of a `tf.cond` keeps its branch
//! intermediates in. Both are immutable values: an op that "changes" a
//! list returns a new one, sharing the element tensors (cheap clones).

use super::tensor::Tensor;
use crate::ir::DType;

/// A variant scalar.
#[derive(Clone, Debug, PartialEq)]
pub enum Variant {
    /// A list of tensors of one dtype.
    List(TensorList),
    /// An optional tuple of tensors (`OptionalFromValue` / `OptionalNone`).
    Optional(Option<Vec<Tensor>>),
}

/// A TensorFlow `TensorList`: elements of one dtype and a (partially
/// known) element shape; a reserved slot not yet set is `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorList {
    /// The dtype of every element.
    pub element_dtype: DType,
    /// The element shape, `None` when its rank is unknown; `-1` marks an
    /// unknown dimension.
    pub element_shape: Option<Vec<i64>>,
    /// The elements, in order.
    pub items: Vec<Option<Tensor>>,
    /// The most elements the list may hold (`EmptyTensorList`'s
    /// `max_num_elements`), `None` when unbounded. A push onto a full list
    /// fails, as in TensorFlow. The StableHLO lowering sizes the list's
    /// buffer by it.
    pub max_num_elements: Option<usize>,
    /// For a TensorArray's gradient array (`TensorArrayGradV3`), the
    /// gradient source it was made for; `None` for every other list.
    pub gradient_source: Option<String>,
}
