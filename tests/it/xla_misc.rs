//! TensorFlow's collectives of XLA programs with several replicas, on the
//! simulator and on PJRT (`tests/strategy/xla_collectives.opg`, four
//! replicas): `XlaReplicaId`, `XlaAllReduce` over two groups and over all
//! (Add, Max, Mean, Mul), `XlaReduceScatter` and `CollectiveReduceV2`.
//!
//! `CollectiveReduceV2` is checked against TensorFlow's own values, made
//! across four logical CPU devices by `tests/tf/collectives_xla_misc.py`.
//! The others against their definitions applied to the feeds here (the
//! replica index; a sum, maximum, mean or product over each replica's group;
//! block `r` of the sum for replica `r` of a reduce-scatter): TensorFlow
//! 2.21 compiles them only into XLA programs of several replicas, which it
//! does not run on CPU devices (compiling `XlaReplicaId` for XLA:CPU aborts
//! the process).

use crate::support::corpus::{read_json, tensor_of};
use crate::support::lowering::{default_fetches, prepare};
use crate::support::pjrt as support;

use tpu_rewrite::exec::{driver, Tensor};
use tpu_rewrite::xla::backend;

const PATH: &str = "tests/strategy/xla_collectives.opg";
const REPLICAS: usize = 4;

/// Replica `r`'s float and int feeds.
fn x(r: usize) -> Vec<f32> {
    let r = r as f32;
    vec![r + 1.0, -r, 0.5 * r, 2.0 - r * r]
}

fn n(r: usize) -> Vec<i32> {
    vec![r as i32 + 1, 3 - 2 * r as i32]
}

/// TensorFlow's value of `CollectiveReduceV2` output `name` on replica `r`.
fn tensorflow(name: &str, r: usize) -> Tensor {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/collectives/xla_misc.json");
    let doc = read_json(&path);
    assert_eq!(doc["tensorflow"], "2.21.0", "made by another TensorFlow");
    tensor_of(&doc["cases"][name][r])
}

/// Each output of each replica: TensorFlow's for `CollectiveReduceV2`, else by the definitions.
fn expected(r: usize) -> Vec<Tensor> {
    let group: Vec<usize> = if r.is_multiple_of(2) { vec![0, 2] } else { vec![1, 3] };
    let fold = |members: &[usize], f: &dyn Fn(f32, f32) -> f32| -> Vec<f32> {
        (0..4).map(|i| members[1..].iter().fold(x(members[0])[i], |a, &m| f(a, x(m)[i]))).collect()
    };
    let all: Vec<usize> = (0..REPLICAS).collect();
    let sum_all = fold(&all, &|a, b| a + b);
    let mean: Vec<f32> = sum_all.iter().map(|s| s / REPLICAS as f32).collect();
    let prod: Vec<i32> = (0..2).map(|i| group.iter().map(|&m| n(m)[i]).product()).collect();
    vec![
        Tensor::scalar(r as i32),
        Tensor::vector(fold(&group, &|a, b| a + b)),
        Tensor::vector(fold(&group, &f32::max)),
        Tensor::vector(mean),
        Tensor::vector(prod),
        Tensor::vector(vec![sum_all[r]]),
        tensorflow("cmean", r),
        tensorflow("cmin", r),
    ]
}

fn feeds() -> Vec<(String, Tensor)> {
    let mut feeds = Vec::new();
    for r in 0..REPLICAS {
        feeds.push((format!("x{r}:0"), Tensor::vector(x(r))));
        feeds.push((format!("n{r}:0"), Tensor::vector(n(r))));
    }
    feeds
}

/// `got` equals `want` (floats to a few units in the last place: the sums may run in another order).
fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!((got.dtype(), got.shape()), (want.dtype(), want.shape()), "{what}: {got:?} vs {want:?}");
    match (got.to_vec::<f32>(), want.to_vec::<f32>()) {
        (Some(g), Some(w)) => {
            for (a, b) in g.iter().zip(&w) {
                assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{what}: {g:?}, want {w:?}");
            }
        }
        _ => assert_eq!(got, want, "{what}"),
    }
}

#[test]
fn tensorflow_collectives_give_each_replica_its_group_values_on_both_backends() {
    let (tagged, lowered) = prepare(PATH, "1x4", 1);
    let fetches = default_fetches(&lowered.module);
    assert_eq!(fetches.len(), 8 * REPLICAS, "{fetches:?}");
    let feeds = feeds();
    let sim = driver::run(&lowered.module, &feeds, &fetches, &driver::RunConfig::default(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("the simulator: {e}"));
    let pjrt = backend::run(&tagged.graphs[0], &lowered.assignment, &support::one_step(&feeds, Some(&tagged)))
        .unwrap_or_else(|e| panic!("PJRT: {e}"));
    for (backend, fetched) in [("simulator", &sim.fetched), ("PJRT", &pjrt.run.fetched)] {
        for r in 0..REPLICAS {
            for (i, want) in expected(r).iter().enumerate() {
                let name = format!("output_{i}_shard_{r}:0");
                let got = fetched.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{backend}: no {name}"));
                assert_close(&got.1, want, &format!("{backend} {name}"));
            }
        }
    }
}
