//! `.pbtxt` import → rewrite → lower: any input gives diagnostics, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tpu_rewrite::harness::{check, Execute, Format};

fuzz_target!(|data: &[u8]| {
    check(data, Format::Pbtxt, Execute::No);
});
