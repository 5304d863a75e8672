//! The LevelDB table format, as TensorFlow's tensor-bundle index uses it:
//! an immutable sorted map from byte-string keys to byte-string values.
//!
//! Layout. Data blocks, then a (here empty) metaindex block, then an index
//! block, then a 48-byte footer. A block is a run of entries, each
//! `varint shared | varint unshared | varint value_len | key suffix |
//! value` (the key shares `shared` bytes with the previous key), then the
//! restart offsets (`u32` each, where an entry stores its whole key), then
//! their count (`u32`). Every block is followed by a 5-byte trailer: the
//! compression type (0: none) and the masked CRC32C of the block and that
//! byte. The index block maps, for each data block, a key at least its last
//! key to the block's handle (`varint offset | varint size`). The footer
//! holds the metaindex and index handles, zero padding to 40 bytes, and the
//! magic number `0xdb4775248b80fb57` (little-endian).
//!
//! Invariants. The reader checks every bound, every checksum and the key
//! order, and returns an error (never panics) on any byte string; the
//! writer's output reads back to its input. Integers are little-endian.

use std::fmt;

/// The magic number that ends a table.
const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// The footer's size: two handles padded to 40 bytes, then the magic.
const FOOTER: usize = 48;
/// The block trailer: compression type and masked CRC32C.
const TRAILER: usize = 5;
/// Entries between two restart points, as LevelDB writes them.
const RESTART_INTERVAL: usize = 16;
/// The size after which the writer starts a new data block.
const BLOCK_SIZE: usize = 4096;

/// One key and its value.
pub type Row = (Vec<u8>, Vec<u8>);

/// A problem in a table, at byte `offset` of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableError {
    /// Where in the file the problem is.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.reason)
    }
}

fn fail<T>(offset: usize, reason: impl Into<String>) -> Result<T, TableError> {
    Err(TableError { offset: offset as u64, reason: reason.into() })
}

/// LevelDB's checksum mask: stored CRCs are rotated and offset so that a
/// CRC of data holding CRCs is not degenerate.
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// The inverse of [`mask_crc`].
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(0xa282_ead8).rotate_left(15)
}

/// Reads a varint (at most 64 bits) at `*at` of `bytes`, advancing `*at`.
pub fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Appends `value` as a varint.
pub fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// A block's place in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Handle {
    offset: u64,
    size: u64,
}

fn read_handle(bytes: &[u8], at: &mut usize) -> Option<Handle> {
    Some(Handle { offset: read_varint(bytes, at)?, size: read_varint(bytes, at)? })
}

fn write_handle(out: &mut Vec<u8>, handle: Handle) {
    write_varint(out, handle.offset);
    write_varint(out, handle.size);
}

/// The contents of the block at `handle`, its trailer checked.
fn block<'a>(file: &'a [u8], handle: Handle, what: &str) -> Result<&'a [u8], TableError> {
    let start = handle.offset as usize;
    let end = usize::try_from(handle.offset.saturating_add(handle.size)).unwrap_or(usize::MAX);
    let Some(with_trailer) = end.checked_add(TRAILER).and_then(|e| file.get(start..e)) else {
        return fail(
            start,
            format!(
                "the {what} block ({} bytes at {start}) runs past the end of the {}-byte file",
                handle.size,
                file.len()
            ),
        );
    };
    let (contents, trailer) = with_trailer.split_at(with_trailer.len() - TRAILER);
    let stored = read_u32(trailer, 1).unwrap_or(0);
    let actual = crc32c::crc32c_append(crc32c::crc32c(contents), &trailer[..1]);
    if unmask_crc(stored) != actual {
        return fail(end, format!("the {what} block's checksum does not match its bytes"));
    }
    match trailer[0] {
        0 => Ok(contents),
        1 => fail(end, format!("the {what} block is Snappy-compressed, which is not supported")),
        other => fail(end, format!("the {what} block has unknown compression type {other}")),
    }
}

/// The entries of a block (at byte `base` of the file), keys in order.
fn entries(contents: &[u8], base: usize) -> Result<Vec<Row>, TableError> {
    let here = |at: usize| base + at;
    let Some(count) = contents.len().checked_sub(4).and_then(|at| read_u32(contents, at)) else {
        return fail(base, "a block is shorter than its restart count");
    };
    let Some(limit) = (count as usize).checked_mul(4).and_then(|n| contents.len().checked_sub(4 + n)) else {
        return fail(here(contents.len()), format!("a block claims {count} restart points, more than fit in it"));
    };
    let mut out: Vec<Row> = Vec::new();
    let mut key: Vec<u8> = Vec::new();
    let mut at = 0;
    while at < limit {
        let start = at;
        let lengths = (|| {
            let shared = read_varint(contents, &mut at)? as usize;
            let unshared = read_varint(contents, &mut at)? as usize;
            let value = read_varint(contents, &mut at)? as usize;
            Some((shared, unshared, value))
        })();
        let Some((shared, unshared, value_len)) = lengths.filter(|_| at <= limit) else {
            return fail(here(start), "an entry's lengths are cut off");
        };
        if shared > key.len() {
            return fail(here(start), format!("an entry shares {shared} bytes with a {}-byte key", key.len()));
        }
        let Some(value_end) = at.checked_add(unshared).and_then(|k| k.checked_add(value_len)).filter(|&e| e <= limit)
        else {
            return fail(here(start), "an entry runs past the end of its block");
        };
        key.truncate(shared);
        key.extend_from_slice(&contents[at..at + unshared]);
        let value = contents[at + unshared..value_end].to_vec();
        if out.last().is_some_and(|(previous, _)| *previous >= key) {
            return fail(here(start), "the keys are not in increasing order");
        }
        out.push((key.clone(), value));
        at = value_end;
    }
    Ok(out)
}

/// Every entry of the table in `file`, in key order.
pub fn read_table(file: &[u8]) -> Result<Vec<Row>, TableError> {
    let Some(footer_at) = file.len().checked_sub(FOOTER) else {
        return fail(0, format!("the file is {} bytes, shorter than a table's {FOOTER}-byte footer", file.len()));
    };
    let footer = &file[footer_at..];
    let magic = u64::from(read_u32(footer, 40).unwrap_or(0)) | (u64::from(read_u32(footer, 44).unwrap_or(0)) << 32);
    if magic != MAGIC {
        return fail(footer_at + 40, "no table magic number at the end (the file is truncated or not an index)");
    }
    let mut at = 0;
    let handles = read_handle(footer, &mut at).and_then(|meta| Some((meta, read_handle(footer, &mut at)?)));
    let Some((_, index)) = handles.filter(|_| at <= 40) else {
        return fail(footer_at, "the footer's block handles do not decode");
    };
    let index_base = index.offset as usize;
    let mut out: Vec<Row> = Vec::new();
    for (_, value) in entries(block(file, index, "index")?, index_base)? {
        let mut at = 0;
        let Some(handle) = read_handle(&value, &mut at) else {
            return fail(index_base, "an index entry's block handle does not decode");
        };
        let data = block(file, handle, "data")?;
        for (key, value) in entries(data, handle.offset as usize)? {
            if out.last().is_some_and(|(previous, _)| *previous >= key) {
                return fail(handle.offset as usize, "the keys are not in increasing order across blocks");
            }
            out.push((key, value));
        }
    }
    Ok(out)
}

/// Builds one block's contents.
#[derive(Default)]
struct BlockBuilder {
    bytes: Vec<u8>,
    restarts: Vec<u32>,
    last: Vec<u8>,
    count: usize,
}

impl BlockBuilder {
    fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.count.is_multiple_of(RESTART_INTERVAL) {
            self.restarts.push(self.bytes.len() as u32);
            0
        } else {
            self.last.iter().zip(key).take_while(|(a, b)| a == b).count()
        };
        write_varint(&mut self.bytes, shared as u64);
        write_varint(&mut self.bytes, (key.len() - shared) as u64);
        write_varint(&mut self.bytes, value.len() as u64);
        self.bytes.extend_from_slice(&key[shared..]);
        self.bytes.extend_from_slice(value);
        self.last = key.to_vec();
        self.count += 1;
    }

    fn finish(mut self) -> Vec<u8> {
        if self.restarts.is_empty() {
            self.restarts.push(0);
        }
        for r in &self.restarts {
            self.bytes.extend_from_slice(&r.to_le_bytes());
        }
        self.bytes.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.bytes
    }
}

/// Appends a block with its trailer (no compression) and gives its handle.
fn append_block(file: &mut Vec<u8>, contents: &[u8]) -> Handle {
    let handle = Handle { offset: file.len() as u64, size: contents.len() as u64 };
    file.extend_from_slice(contents);
    file.push(0);
    let crc = crc32c::crc32c_append(crc32c::crc32c(contents), &[0]);
    file.extend_from_slice(&mask_crc(crc).to_le_bytes());
    handle
}

/// A table holding `entries`, whose keys must be strictly increasing
/// (byte order); `None` when they are not.
pub fn write_table<K: AsRef<[u8]>, V: AsRef<[u8]>>(entries: &[(K, V)]) -> Option<Vec<u8>> {
    if entries.windows(2).any(|w| w[0].0.as_ref() >= w[1].0.as_ref()) {
        return None;
    }
    let mut file = Vec::new();
    let mut index = BlockBuilder::default();
    let mut data = BlockBuilder::default();
    let flush = |file: &mut Vec<u8>, data: BlockBuilder, index: &mut BlockBuilder| {
        let last = data.last.clone();
        let handle = append_block(file, &data.finish());
        let mut encoded = Vec::new();
        write_handle(&mut encoded, handle);
        // The block's last key separates it from the next one.
        index.add(&last, &encoded);
    };
    for (key, value) in entries {
        data.add(key.as_ref(), value.as_ref());
        if data.bytes.len() >= BLOCK_SIZE {
            flush(&mut file, std::mem::take(&mut data), &mut index);
        }
    }
    if data.count > 0 {
        flush(&mut file, data, &mut index);
    }
    let meta = append_block(&mut file, &BlockBuilder::default().finish());
    let index = append_block(&mut file, &index.finish());
    let mut footer = Vec::with_capacity(FOOTER);
    write_handle(&mut footer, meta);
    write_handle(&mut footer, index);
    footer.resize(40, 0);
    footer.extend_from_slice(&MAGIC.to_le_bytes());
    file.extend_from_slice(&footer);
    Some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_reads_back_what_was_written() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> =
            (0..500u32).map(|i| (format!("key/{i:05}").into_bytes(), vec![i as u8; (i % 37) as usize])).collect();
        let file = write_table(&entries).expect("sorted keys");
        assert_eq!(read_table(&file).expect("a valid table"), entries);
        // Several data blocks were written, so the index has several entries.
        assert!(file.len() > 2 * BLOCK_SIZE);
    }

    #[test]
    fn an_empty_table_reads_back() {
        let file = write_table::<&[u8], &[u8]>(&[]).expect("no keys");
        assert_eq!(read_table(&file).expect("a valid table"), Vec::<(Vec<u8>, Vec<u8>)>::new());
    }

    #[test]
    fn unsorted_keys_are_refused() {
        assert!(write_table(&[("b", "1"), ("a", "2")]).is_none());
    }

    #[test]
    fn a_flipped_byte_fails_the_checksum() {
        let mut file = write_table(&[("a", "one"), ("b", "two")]).expect("sorted keys");
        file[3] ^= 0x40;
        let err = read_table(&file).expect_err("corrupt");
        assert!(err.reason.contains("checksum"), "{err}");
    }

    #[test]
    fn a_truncated_table_says_so() {
        let file = write_table(&[("a", "one")]).expect("sorted keys");
        let err = read_table(&file[..file.len() - 3]).expect_err("truncated");
        assert!(err.reason.contains("truncated"), "{err}");
    }

    #[test]
    fn the_mask_inverts() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(unmask_crc(mask_crc(crc)), crc);
        }
    }
}
