//! `.opg` import → rewrite → lower → one step on the mesh for small graphs
//! (bounded tensors and waits; see `tpu_rewrite::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tpu_rewrite::harness::{check, Execute, Format};

fuzz_target!(|data: &[u8]| {
    check(data, Format::Opg, Execute::IfSmall);
});
