//! The executor: tensors, kernels, collectives and the device mesh.
