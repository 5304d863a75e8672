//! TensorFlow's tensor-bundle checkpoint format: `PREFIX.index` and
//! `PREFIX.data-NNNNN-of-MMMMM`, as `tf.train.Checkpoint` and SavedModels
//! (`variables/variables`) store variables.
//!
//! The index is a LevelDB-format table ([`table`]) from checkpoint keys to
//! `BundleEntryProto`s; the empty key holds the `BundleHeaderProto` (shard
//! count, byte order). An entry names its shard, byte range, dtype, shape
//! and the masked CRC32C of its bytes. A numeric tensor's bytes are its
//! values, little-endian and row-major; a string tensor's are the lengths
//! (varints), a masked CRC32C of them, then the strings.
//!
//! Invariants. [`read_bundle`] checks every entry's range against its shard
//! and its checksum, and returns located errors (file, key, bytes), never
//! panics. [`encode_bundle`] writes one shard, and what it writes reads
//! back to the same entries. Partitioned (sliced) variables and big-endian
//! bundles are refused.

pub mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use prost::Message;

use super::proto::{
    bundle_header_proto::Endianness, BundleEntryProto, BundleHeaderProto, TensorShapeProto, VersionDef,
};
use super::saved_model::SavedModelError;
use crate::ir::{DType, TensorData, TensorLit};

/// The most bytes one shard may have: shards are read whole.
const MAX_SHARD_BYTES: u64 = 1 << 34;

/// One tensor of a bundle: its dtype, shape and stored bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The tensor's dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<i64>,
    /// Its bytes as stored in the shard.
    pub bytes: Vec<u8>,
}

impl Entry {
    /// The entry of a numeric tensor literal; `None` for dtypes without a
    /// fixed width (strings, resources, variants).
    pub fn from_literal(lit: &TensorLit) -> Option<Entry> {
        let width = width(lit.dtype)?;
        let count: usize = lit.shape.iter().map(|&d| usize::try_from(d).ok()).product::<Option<usize>>()?;
        let mut bytes = Vec::with_capacity(count * width);
        let expand = |bytes: &mut Vec<u8>, n: usize, value: &[u8]| {
            // A literal with one value fills its whole shape.
            for _ in 0..if n == 1 { count } else { 1 } {
                bytes.extend_from_slice(value);
            }
        };
        macro_rules! put {
            ($values:expr, $conv:expr) => {{
                let n = $values.len();
                if n != count && n != 1 && count != 0 {
                    return None;
                }
                for v in $values {
                    expand(&mut bytes, n, &$conv(v));
                }
            }};
        }
        match (&lit.data, lit.dtype) {
            (TensorData::Content(b), _) => bytes.extend_from_slice(b),
            (TensorData::Float(v), _) => put!(v, |x: &f32| x.to_le_bytes().to_vec()),
            (TensorData::Double(v), _) => put!(v, |x: &f64| x.to_le_bytes().to_vec()),
            (TensorData::Half(v), _) => put!(v, |x: &i32| (*x as u16).to_le_bytes().to_vec()),
            (TensorData::Int64(v), _) => put!(v, |x: &i64| x.to_le_bytes().to_vec()),
            (TensorData::Uint32(v), _) => put!(v, |x: &u32| x.to_le_bytes().to_vec()),
            (TensorData::Uint64(v), _) => put!(v, |x: &u64| x.to_le_bytes().to_vec()),
            (TensorData::Bool(v), _) => put!(v, |x: &bool| vec![u8::from(*x)]),
            (TensorData::Int(v), DType::I8 | DType::U8) => put!(v, |x: &i32| vec![*x as u8]),
            (TensorData::Int(v), DType::I16 | DType::U16) => put!(v, |x: &i32| (*x as u16).to_le_bytes().to_vec()),
            (TensorData::Int(v), _) => put!(v, |x: &i32| x.to_le_bytes().to_vec()),
            (TensorData::Str(_), _) => return None,
        }
        (bytes.len() == count * width).then(|| Entry { dtype: lit.dtype, shape: lit.shape.clone(), bytes })
    }

    /// The entry as a tensor literal (raw little-endian content); `None`
    /// for dtypes without a fixed width.
    pub fn to_literal(&self) -> Option<TensorLit> {
        width(self.dtype)?;
        Some(TensorLit { dtype: self.dtype, shape: self.shape.clone(), data: TensorData::Content(self.bytes.clone()) })
    }

    /// The elements of a string entry; `None` when it is not one or its
    /// bytes do not decode.
    pub fn strings(&self) -> Option<Vec<Vec<u8>>> {
        if self.dtype != DType::Str {
            return None;
        }
        let (lengths, mut at) = string_lengths(&self.bytes, element_count(&self.shape)?)?;
        let mut out = Vec::with_capacity(lengths.len());
        for len in lengths {
            out.push(self.bytes.get(at..at.checked_add(len)?)?.to_vec());
            at += len;
        }
        (at == self.bytes.len()).then_some(out)
    }

    /// A human description: dtype and shape.
    pub fn describe(&self) -> String {
        describe(self.dtype, &self.shape)
    }
}

/// The lengths of a string tensor's `count` elements and where the
/// strings start, after the lengths' masked CRC32C (checked).
fn string_lengths(bytes: &[u8], count: usize) -> Option<(Vec<usize>, usize)> {
    let mut at = 0;
    let mut lengths = Vec::with_capacity(count.min(1 << 20));
    for _ in 0..count {
        lengths.push(usize::try_from(table::read_varint(bytes, &mut at)?).ok()?);
    }
    let stored = u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?);
    if table::unmask_crc(stored) != length_crc(&lengths) {
        return None;
    }
    Some((lengths, at + 4))
}

/// The CRC32C of string lengths as the bundle checks them: each length as
/// a little-endian `u32` (a `u64` past `u32::MAX`), not as its varint.
fn length_crc(lengths: &[usize]) -> u32 {
    lengths.iter().fold(0, |crc, &len| match u32::try_from(len) {
        Ok(small) => crc32c::crc32c_append(crc, &small.to_le_bytes()),
        Err(_) => crc32c::crc32c_append(crc, &(len as u64).to_le_bytes()),
    })
}

/// The CRC32C an entry's checksum covers: its bytes for a numeric tensor;
/// for strings, the lengths as [`length_crc`] counts them, their masked
/// checksum, then the strings. `None` when string bytes do not decode.
fn entry_crc(dtype: DType, shape: &[i64], bytes: &[u8]) -> Option<u32> {
    if dtype != DType::Str {
        return Some(crc32c::crc32c(bytes));
    }
    let (lengths, start) = string_lengths(bytes, element_count(shape)?)?;
    let crc = length_crc(&lengths);
    let crc = crc32c::crc32c_append(crc, &table::mask_crc(crc).to_le_bytes());
    Some(crc32c::crc32c_append(crc, &bytes[start..]))
}

/// `f32[4, 8]`.
pub fn describe(dtype: DType, shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("{dtype}[{}]", dims.join(", "))
}

/// The bytes of one element of `dtype`, for fixed-width dtypes.
fn width(dtype: DType) -> Option<usize> {
    Some(match dtype {
        DType::I8 | DType::U8 | DType::Bool => 1,
        DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
        DType::F32 | DType::I32 | DType::U32 => 4,
        DType::F64 | DType::I64 | DType::U64 | DType::C64 => 8,
        DType::C128 => 16,
        _ => return None,
    })
}

fn element_count(shape: &[i64]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
}

/// The data shard `shard` of `num_shards` of the bundle at `prefix`.
pub fn shard_path(prefix: &Path, shard: i32, num_shards: i32) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(format!(".data-{shard:05}-of-{num_shards:05}"));
    PathBuf::from(name)
}

/// The index file of the bundle at `prefix`.
pub fn index_path(prefix: &Path) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(".index");
    PathBuf::from(name)
}

/// Reads the bundle at `prefix` (`PREFIX.index` and its shards): every
/// entry but the header, by key, each checked against its checksum.
pub fn read_bundle(prefix: &Path) -> Result<BTreeMap<String, Entry>, SavedModelError> {
    let index_file = index_path(prefix);
    let shown = index_file.display().to_string();
    let index =
        std::fs::read(&index_file).map_err(|e| SavedModelError::Read { file: shown.clone(), reason: e.to_string() })?;
    decode_bundle(&index, &shown, |shard, num_shards| {
        let path = shard_path(prefix, shard, num_shards);
        let shown = path.display().to_string();
        let bytes = match std::fs::metadata(&path) {
            Ok(m) if m.len() > MAX_SHARD_BYTES => {
                Err(format!("has {} bytes, more than the {MAX_SHARD_BYTES} read", m.len()))
            }
            _ => std::fs::read(&path).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => "is missing".to_string(),
                _ => format!("cannot be read ({e})"),
            }),
        };
        (shown, bytes)
    })
}

/// Decodes a bundle from its index bytes (named `index_file` in errors),
/// reading shard `i` of `n` with `read_shard(i, n)`, which gives the
/// shard's name and bytes or why it cannot be read. Each shard is read once.
pub fn decode_bundle(
    index: &[u8],
    index_file: &str,
    mut read_shard: impl FnMut(i32, i32) -> (String, Result<Vec<u8>, String>),
) -> Result<BTreeMap<String, Entry>, SavedModelError> {
    let damaged = |detail: String| SavedModelError::Index { file: index_file.to_string(), detail };
    let rows = table::read_table(index).map_err(|e| damaged(format!("({e})")))?;
    let entry_error = |key: &str, reason: String| SavedModelError::Entry {
        file: index_file.to_string(),
        key: key.to_string(),
        reason,
    };
    let mut rows = rows.into_iter();
    let header = match rows.next() {
        Some((key, value)) if key.is_empty() => BundleHeaderProto::decode(value.as_slice())
            .map_err(|e| damaged(format!("(its header does not decode: {e})")))?,
        _ => return Err(damaged("(it has no header entry under the empty key)".into())),
    };
    if header.endianness != Endianness::Little as i32 {
        return Err(damaged("(the bundle is big-endian, which is not supported)".into()));
    }
    let num_shards = header.num_shards;
    let mut shards: BTreeMap<i32, (String, Result<Vec<u8>, String>)> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (key, value) in rows {
        let key = String::from_utf8_lossy(&key).into_owned();
        let entry = BundleEntryProto::decode(value.as_slice())
            .map_err(|e| entry_error(&key, format!("its BundleEntryProto does not decode: {e}")))?;
        if !entry.slices.is_empty() {
            return Err(entry_error(&key, "it is a slice of a partitioned variable, which is not supported".into()));
        }
        if entry.shard_id < 0 || entry.shard_id >= num_shards.max(1) {
            return Err(entry_error(&key, format!("it names shard {} of {num_shards}", entry.shard_id)));
        }
        let shape =
            shape_of(entry.shape.as_ref()).ok_or_else(|| entry_error(&key, "its shape is not fully known".into()))?;
        let dtype = DType::from_number(entry.dtype);
        let (start, size) = (entry.offset, entry.size);
        if start < 0 || size < 0 {
            return Err(entry_error(&key, format!("it has a negative offset or size ({start}, {size})")));
        }
        let end = start.saturating_add(size) as u64;
        let (file, bytes) =
            shards.entry(entry.shard_id).or_insert_with(|| read_shard(entry.shard_id, num_shards.max(1)));
        let shard_error = |reason: String| SavedModelError::Shard {
            file: file.clone(),
            key: key.clone(),
            start: start as u64,
            end,
            reason,
        };
        let data = match bytes {
            Err(reason) => return Err(shard_error(reason.clone())),
            Ok(b) => {
                b.get(start as usize..end as usize).ok_or_else(|| shard_error(format!("has {} bytes", b.len())))?
            }
        };
        if entry_crc(dtype, &shape, data) != Some(table::unmask_crc(entry.crc32c)) {
            return Err(SavedModelError::Checksum { file: file.clone(), key, start: start as u64, end });
        }
        if let Some(width) = width(dtype) {
            let expected = element_count(&shape).and_then(|n| n.checked_mul(width));
            if expected != Some(data.len()) {
                return Err(entry_error(
                    &key,
                    format!(
                        "{} needs {} bytes, but it has {}",
                        describe(dtype, &shape),
                        expected.unwrap_or(usize::MAX),
                        data.len()
                    ),
                ));
            }
        }
        out.insert(key, Entry { dtype, shape, bytes: data.to_vec() });
    }
    Ok(out)
}

/// The dims of a fully known shape.
fn shape_of(shape: Option<&TensorShapeProto>) -> Option<Vec<i64>> {
    let Some(shape) = shape else { return Some(Vec::new()) };
    if shape.unknown_rank {
        return None;
    }
    shape.dim.iter().map(|d| (d.size >= 0).then_some(d.size)).collect()
}

/// The index and single data shard (`.data-00000-of-00001`) of a bundle
/// holding `entries`, keyed as given.
pub fn encode_bundle(entries: &BTreeMap<String, Entry>) -> Result<(Vec<u8>, Vec<u8>), SavedModelError> {
    let header = BundleHeaderProto {
        num_shards: 1,
        endianness: Endianness::Little as i32,
        version: Some(VersionDef { producer: 1, ..Default::default() }),
    };
    let mut rows: Vec<(Vec<u8>, Vec<u8>)> = vec![(Vec::new(), header.encode_to_vec())];
    let mut data = Vec::new();
    for (key, entry) in entries {
        if key.is_empty() {
            return Err(SavedModelError::Write { reason: "a checkpoint key is empty (the header's key)".into() });
        }
        let shape = TensorShapeProto {
            dim: entry.shape.iter().map(|&size| super::proto::Dim { size, ..Default::default() }).collect(),
            ..Default::default()
        };
        let proto = BundleEntryProto {
            dtype: entry.dtype.number(),
            shape: Some(shape),
            shard_id: 0,
            offset: data.len() as i64,
            size: entry.bytes.len() as i64,
            crc32c: table::mask_crc(entry_crc(entry.dtype, &entry.shape, &entry.bytes).ok_or_else(|| {
                SavedModelError::Write { reason: format!("the string tensor `{key}` does not decode") }
            })?),
            slices: Vec::new(),
        };
        data.extend_from_slice(&entry.bytes);
        rows.push((key.as_bytes().to_vec(), proto.encode_to_vec()));
    }
    // BTreeMap order is byte order of the keys, after the empty header key.
    let index = table::write_table(&rows)
        .ok_or_else(|| SavedModelError::Write { reason: "the checkpoint keys are not distinct".into() })?;
    Ok((index, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BTreeMap<String, Entry> {
        let kernel =
            TensorLit { dtype: DType::F32, shape: vec![2, 2], data: TensorData::Float(vec![1.0, -2.5, 3.0, 0.0]) };
        let step = TensorLit { dtype: DType::I64, shape: vec![], data: TensorData::Int64(vec![7]) };
        BTreeMap::from([
            ("model/kernel/.ATTRIBUTES/VARIABLE_VALUE".to_string(), Entry::from_literal(&kernel).expect("numeric")),
            ("optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE".to_string(), Entry::from_literal(&step).expect("numeric")),
        ])
    }

    fn decode(index: &[u8], data: &[u8]) -> Result<BTreeMap<String, Entry>, SavedModelError> {
        decode_bundle(index, "t.index", |_, _| ("t.data-00000-of-00001".into(), Ok(data.to_vec())))
    }

    #[test]
    fn a_bundle_reads_back_what_was_written() {
        let entries = sample();
        let (index, data) = encode_bundle(&entries).expect("encodes");
        assert_eq!(decode(&index, &data).expect("decodes"), entries);
        let kernel = &entries["model/kernel/.ATTRIBUTES/VARIABLE_VALUE"];
        assert_eq!(kernel.bytes[4..8], (-2.5f32).to_le_bytes());
    }

    #[test]
    fn a_short_shard_and_a_bad_checksum_are_located() {
        let (index, mut data) = encode_bundle(&sample()).expect("encodes");
        let short = decode(&index, &data[..10]).expect_err("short");
        assert!(
            matches!(short, SavedModelError::Shard { ref key, .. } if key.starts_with("model/kernel")),
            "{short:?}"
        );
        data[17] ^= 1;
        let bad = decode(&index, &data).expect_err("corrupt");
        assert!(matches!(bad, SavedModelError::Checksum { start: 16, end: 24, .. }), "{bad:?}");
    }

    #[test]
    fn a_missing_shard_is_named() {
        let (index, _) = encode_bundle(&sample()).expect("encodes");
        let err = decode_bundle(&index, "t.index", |_, _| ("t.data-00000-of-00001".into(), Err("is missing".into())))
            .expect_err("missing");
        assert!(err.to_string().contains("t.data-00000-of-00001") && err.to_string().contains("is missing"), "{err}");
    }
}
