//! The executor: tensors, kernels, collectives and the device mesh.
//!
//! - [`Tensor`]: n-dimensional arrays (f32, f64, bf16, f16, i8, u8, i32,
//!   i64, bool, string, resource handles, variants) on ndarray, cheap to
//!   clone.
//! - [`run_kernel`]: the pure ops; [`missing_kernels`] lists the op types
//!   of a module the executor cannot run.
//! - [`Mesh`]: runs a lowered module, one worker thread per graph (device
//!   program), with `_Send`/`_Recv` channels, collectives and per-device
//!   variable stores that persist across steps.
//! - [`data`]: tensors to and from JSON and `.npy`.
//! - [`limits`]: the tensor-size limit every data-sized allocation checks.

// Errors name the graph, device, node and op of a failure; they are built
// only on cold paths, so their size does not matter.
#![allow(clippy::result_large_err)]

mod collective;
pub mod data;
pub mod driver;
mod error;
pub mod input;
pub mod kernels;
pub mod limits;
pub mod memory;
mod mesh;
pub mod outputs;
pub mod preflight;
mod tensor;
pub mod variant;

pub use data::{read_npy, read_npy_file, tensor_from_json, tensor_to_json, write_npy, write_npy_file};
pub use error::{ExecError, KernelError, KernelProblem};
pub use input::{split_batch, split_per_host};
pub use kernels::{
    check_kernels, has_kernel, kernel_problems, missing_kernels, run_kernel, run_kernel_without_effects,
};
pub use mesh::{Feeds, Fetch, Mesh, MeshConfig};
pub use outputs::{group_outputs, output_reduce_ops, OutputValue, ReduceOp};
pub use tensor::{Element, ResourceHandle, Tensor};
