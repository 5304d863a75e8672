//! `tpu_rewrite._native`: the tpu-rewrite library as a Python extension
//! module (PyO3). The package `tpu_rewrite` (python/tpu_rewrite/) wraps it
//! with the public functions, docstrings and type stubs.
//!
//! Every call is the library's own pipeline: load (`.opg`, GraphDef text
//! or binary), rewrite, lower, emit StableHLO, run on the simulator or on
//! PJRT. Each releases the GIL while it works, and turns a Rust panic into
//! a `tpu_rewrite.Error` (code `tpu_rewrite::py::panic`) instead of
//! unwinding into the interpreter. Errors of the library become
//! `tpu_rewrite.Error` with the report the CLI prints (module `error`).

mod convert;
mod error;
mod graph;
mod lowered;
mod run;

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;

use error::{panic_message, Failure, PyLayerError};

/// Runs `work` with the GIL released and a panic caught; a failure
/// becomes the Python exception it stands for.
pub(crate) fn without_gil<T: Send>(py: Python<'_>, work: impl FnOnce() -> Result<T, Failure> + Send) -> PyResult<T> {
    let result = py.detach(|| {
        catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|payload| {
            Err(Failure::of(PyLayerError::Panic { message: panic_message(payload.as_ref()) }))
        })
    });
    result.map_err(|failure| failure.into_py(py))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<graph::Module>()?;
    m.add_class::<lowered::Lowered>()?;
    m.add_function(wrap_pyfunction!(graph::load_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(graph::load_path, m)?)?;
    m.add_function(wrap_pyfunction!(graph::rewrite, m)?)?;
    m.add_function(wrap_pyfunction!(lowered::lower, m)?)?;
    m.add_function(wrap_pyfunction!(run::run_lowered, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
