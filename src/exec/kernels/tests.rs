//! Unit tests of the kernel dispatch ([`super::run_kernel`]) and the
//! module checks.

use super::*;
use crate::ir::{AttrValue, TensorData, TensorLit};

#[test]
fn const_reads_its_literal() {
    let mut attrs = AttrMap::new();
    attrs.insert("dtype", AttrValue::Type(DType::I32));
    attrs.insert(
        "value",
        AttrValue::Tensor(std::sync::Arc::new(TensorLit {
            dtype: DType::I32,
            shape: vec![3],
            data: TensorData::Int(vec![1, 2, 3]),
        })),
    );
    let out = run_kernel("Const", &attrs, &[]).unwrap();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![1, 2, 3]);
}

#[test]
fn pass_through_ops() {
    let x = Tensor::vector(vec![1.0f32, 2.0]);
    let y = Tensor::scalar(3i64);
    let none = AttrMap::new();
    for op in ["Identity", "StopGradient", "Snapshot"] {
        assert_eq!(run_kernel(op, &none, std::slice::from_ref(&x)).unwrap(), vec![x.clone()]);
    }
    assert_eq!(run_kernel("IdentityN", &none, &[x.clone(), y.clone()]).unwrap(), vec![x, y]);
    assert!(run_kernel("NoOp", &none, &[]).unwrap().is_empty());
    assert!(run_kernel("TPUReplicateMetadata", &none, &[]).unwrap().is_empty());
    assert_eq!(run_kernel("TPUCompilationResult", &none, &[]).unwrap(), vec![Tensor::scalar(Vec::<u8>::new())]);
}

#[test]
fn the_device_and_float_only_lists_are_sorted_and_known() {
    for (name, list) in [("DEVICE_OPS", DEVICE_OPS), ("FLOAT_ONLY", FLOAT_ONLY)] {
        let mut sorted = list.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, list, "{name} is sorted, each op once");
    }
    for op in FLOAT_ONLY {
        assert!(PURE_OPS.contains(op), "float-only {op} is a pure kernel");
    }
}

#[test]
fn every_registered_pure_op_has_a_kernel() {
    let mut sorted = PURE_OPS.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, PURE_OPS, "PURE_OPS is sorted, each op once");
    for op in PURE_OPS {
        // Without inputs every kernel answers (most with an error); none falls through or panics.
        match run_kernel(op, &AttrMap::new(), &[]) {
            Err(KernelError::NoKernel { .. }) => panic!("{op} is registered but has no kernel"),
            Err(KernelError::Panic { message, .. }) => panic!("{op} panicked: {message}"),
            _ => {}
        }
    }
}

#[test]
fn unknown_op_names_itself() {
    let err = run_kernel("Frobnicate", &AttrMap::new(), &[]).unwrap_err();
    assert_eq!(err, KernelError::NoKernel { op: "Frobnicate".into() });
    assert!(err.to_string().contains("Frobnicate"));
}

#[test]
fn device_ops_need_the_mesh() {
    let err = run_kernel("_Recv", &AttrMap::new(), &[]).unwrap_err();
    assert!(matches!(err, KernelError::NeedsDevice { .. }));
}

#[test]
fn missing_input_is_an_error_not_a_panic() {
    let err = run_kernel("Add", &AttrMap::new(), &[Tensor::scalar(1.0f32)]).unwrap_err();
    assert!(err.to_string().starts_with("Add:"), "{err}");
}

#[test]
fn tpu_replicated_output_repeats_its_input() {
    let mut attrs = AttrMap::new();
    attrs.insert("num_replicas", AttrValue::Int(3));
    let out = run_kernel("TPUReplicatedOutput", &attrs, &[Tensor::scalar(2.5f32)]).unwrap();
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|t| t == &Tensor::scalar(2.5f32)));
}

#[test]
fn cross_replica_sum_of_single_groups_is_identity() {
    let x = Tensor::vector(vec![1.0f32, 2.0]);
    let groups = Tensor::from_vec(&[2, 1], vec![0i32, 1]).unwrap();
    assert_eq!(run_kernel("CrossReplicaSum", &AttrMap::new(), &[x.clone(), groups]).unwrap(), vec![x.clone()]);
    let pair = Tensor::from_vec(&[1, 2], vec![0i32, 1]).unwrap();
    assert!(run_kernel("CrossReplicaSum", &AttrMap::new(), &[x, pair]).is_err());
}
