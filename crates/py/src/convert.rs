//! Tensors to NumPy arrays and back.
//!
//! Each dtype maps to one NumPy dtype both ways: f32/f64 → float32/float64,
//! f16 → float16, bf16 → `ml_dtypes.bfloat16` (imported by the package
//! before any array crosses), i8/u8/i16/u16/i32/i64/u32/u64 → int8/uint8/
//! int16/uint16/int32/int64/uint32/uint64, bool
//! → bool_, c64/c128 → complex64/complex128, string → an object array of
//! `bytes`. A tensor becomes an array
//! without a copy when the run holds its only reference (the array takes
//! over the buffer); a fed array is copied once into the tensor, from its
//! buffer when it is contiguous. Resource and variant tensors have no
//! array form and are refused.

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use numpy::{Element as NpElement, PyArray, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tpu_rewrite::exec::Element;
use tpu_rewrite::Tensor;

use crate::error::{Failure, PyLayerError};

/// The array of a tensor; `None` for a resource or variant.
pub fn tensor_to_py(py: Python<'_>, tensor: Tensor) -> PyResult<Option<Bound<'_, PyAny>>> {
    fn array<T: NpElement + Clone>(py: Python<'_>, a: ndarray::ArcArray<T, IxDyn>) -> Bound<'_, PyAny> {
        PyArray::from_owned_array(py, a.into_owned()).into_any()
    }
    Ok(Some(match tensor {
        Tensor::F32(a) => array(py, a),
        Tensor::F64(a) => array(py, a),
        Tensor::I32(a) => array(py, a),
        Tensor::I64(a) => array(py, a),
        Tensor::Bool(a) => array(py, a),
        Tensor::BF16(a) => array(py, a),
        Tensor::F16(a) => array(py, a),
        Tensor::I8(a) => array(py, a),
        Tensor::U8(a) => array(py, a),
        Tensor::I16(a) => array(py, a),
        Tensor::U16(a) => array(py, a),
        Tensor::U32(a) => array(py, a),
        Tensor::U64(a) => array(py, a),
        Tensor::C64(a) => array(py, a),
        Tensor::C128(a) => array(py, a),
        Tensor::Str(a) => {
            let items: Vec<Py<PyAny>> = a.iter().map(|s| PyBytes::new(py, s).into_any().unbind()).collect();
            let flat = PyArray::from_vec(py, items);
            flat.reshape(a.shape())?.into_any()
        }
        Tensor::Resource(_) | Tensor::Variant(_) => return Ok(None),
    }))
}

/// Copies an array of element `T` into a tensor, if `value` is one.
fn try_array<T: NpElement + Element>(value: &Bound<'_, PyAny>) -> Option<Tensor> {
    let array = value.cast::<PyArrayDyn<T>>().ok()?;
    let readonly = array.readonly();
    let owned: ArrayD<T> = match readonly.as_slice() {
        Ok(slice) => ArrayD::from_shape_vec(IxDyn(readonly.shape()), slice.to_vec()).ok()?,
        Err(_) => readonly.as_array().to_owned(),
    };
    Some(Tensor::from_array(owned))
}

/// A tensor from a NumPy array (any other value is first given to
/// `numpy.asarray`).
pub fn tensor_from_py(name: &str, value: &Bound<'_, PyAny>) -> Result<Tensor, Failure> {
    let py = value.py();
    let fail = |message: String| Failure::of(PyLayerError::Feed { name: name.to_string(), message });
    let numpy = py.import("numpy").map_err(Failure::Python)?;
    let array = numpy.call_method1("asarray", (value,)).map_err(Failure::Python)?;
    let found = try_array::<f32>(&array)
        .or_else(|| try_array::<f64>(&array))
        .or_else(|| try_array::<i32>(&array))
        .or_else(|| try_array::<i64>(&array))
        .or_else(|| try_array::<bool>(&array))
        .or_else(|| try_array::<f16>(&array))
        .or_else(|| try_array::<bf16>(&array))
        .or_else(|| try_array::<i8>(&array))
        .or_else(|| try_array::<u8>(&array))
        .or_else(|| try_array::<i16>(&array))
        .or_else(|| try_array::<u16>(&array))
        .or_else(|| try_array::<u32>(&array))
        .or_else(|| try_array::<u64>(&array))
        .or_else(|| try_array::<numpy::Complex32>(&array))
        .or_else(|| try_array::<numpy::Complex64>(&array));
    if let Some(tensor) = found {
        return Ok(tensor);
    }
    let dtype = array.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_default();
    if dtype.starts_with("|S") || dtype == "object" {
        let flat = array.call_method0("ravel").and_then(|f| f.call_method0("tolist")).map_err(Failure::Python)?;
        let items: Vec<Vec<u8>> = flat.extract().map_err(|_| fail("a string feed holds bytes".into()))?;
        let shape: Vec<usize> = array.getattr("shape").and_then(|s| s.extract()).map_err(Failure::Python)?;
        return Tensor::from_vec(&shape, items).map_err(|e| fail(e.to_string()));
    }
    Err(fail(format!("arrays of dtype {dtype} have no tensor dtype")))
}
