//! A tensor bundle (checkpoint): the input is a 4-byte little-endian
//! length, the index file of that length, then the data shard. Decoding
//! gives entries or a diagnostic, never a panic; a shard the index asks
//! for beyond the first is missing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tpu_rewrite::tf::bundle;

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<4>() else { return };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (index, shard) = rest.split_at(len);
    let _ = bundle::decode_bundle(index, "variables.index", |i, _| {
        let name = format!("variables.data-{i:05}");
        if i == 0 {
            (name, Ok(shard.to_vec()))
        } else {
            (name, Err("no such shard".into()))
        }
    });
});
