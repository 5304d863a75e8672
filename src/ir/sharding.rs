//! XLA sharding annotations: the serialized `xla.OpSharding` that
//! `XlaSharding`'s `sharding` and the SPMD shape ops' `manual_sharding`
//! attributes carry, decoded into what the kernels, type rules and the
//! StableHLO lowering need.
//!
//! Meaning: a sharding says how a value is laid out over devices:
//! replicated on all, held by one (`maximal`), cut into tiles (a device
//! grid of `tile_assignment_dimensions`, possibly with a trailing
//! dimension of replicas), or manual (each device holds its own part).
//! [`Sharding::hlo_text`] is the form XLA parses in `mhlo.sharding`;
//! [`Sharding::shard_shape`] the shape of one tile of a full shape, as
//! tf2xla's `XlaSpmdFullToShardShape` computes it. Invariant: a decoded
//! sharding has a known type and, when tiled, a non-empty grid of
//! positive sizes. Cost: proportional to the serialized bytes.

use prost::Message;

/// The fields of `xla.OpSharding` these ops read (prost skips the others).
#[derive(Clone, PartialEq, Message)]
struct OpShardingProto {
    #[prost(int32, tag = "1")]
    r#type: i32,
    #[prost(int64, repeated, tag = "3")]
    tile_assignment_dimensions: Vec<i64>,
    #[prost(int64, repeated, tag = "4")]
    tile_assignment_devices: Vec<i64>,
    #[prost(message, repeated, tag = "5")]
    tuple_shardings: Vec<OpShardingProto>,
    #[prost(bool, tag = "6")]
    replicate_on_last_tile_dim: bool,
    #[prost(int32, repeated, tag = "8")]
    last_tile_dims: Vec<i32>,
    #[prost(int64, repeated, tag = "9")]
    iota_reshape_dims: Vec<i64>,
    #[prost(int32, repeated, tag = "10")]
    iota_transpose_perm: Vec<i32>,
}

/// A decoded sharding of one (non-tuple) value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sharding {
    /// Every device holds the whole value.
    Replicated,
    /// One device holds the whole value.
    Maximal {
        /// The device.
        device: i64,
    },
    /// Each device holds its own part; the partitioner leaves it alone.
    Manual,
    /// Tiles over a device grid.
    Tiled {
        /// The grid: one size per data dimension, then the trailing
        /// dimensions of `trailing`.
        grid: Vec<i64>,
        /// The devices of the grid in row-major order, or empty when
        /// `iota` gives them.
        devices: Vec<i64>,
        /// An iota device list: reshape dimensions and transpose.
        iota: Option<(Vec<i64>, Vec<i32>)>,
        /// The trailing grid dimensions that are not data dimensions:
        /// `REPLICATED` (0) or `MANUAL` (4) subgroups.
        trailing: Vec<i32>,
    },
}

impl Sharding {
    /// Decodes a serialized `xla.OpSharding`; an error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Sharding, String> {
        let p = OpShardingProto::decode(bytes).map_err(|e| format!("not a serialized xla.OpSharding: {e}"))?;
        match p.r#type {
            0 => Ok(Sharding::Replicated),
            1 => match p.tile_assignment_devices.as_slice() {
                [device] => Ok(Sharding::Maximal { device: *device }),
                other => Err(format!("a maximal sharding names one device, this one {}", other.len())),
            },
            2 => Err(format!("a tuple sharding (of {} values) annotates no single tensor", p.tuple_shardings.len())),
            3 => {
                let grid = p.tile_assignment_dimensions;
                if grid.is_empty() || grid.iter().any(|&d| d < 1) {
                    return Err(format!("a tiled sharding needs a grid of positive sizes, got {grid:?}"));
                }
                let mut trailing = p.last_tile_dims;
                if p.replicate_on_last_tile_dim && trailing.is_empty() {
                    trailing.push(0);
                }
                let count: i64 = grid.iter().product();
                let iota = (!p.iota_reshape_dims.is_empty()).then_some((p.iota_reshape_dims, p.iota_transpose_perm));
                if iota.is_none() && p.tile_assignment_devices.len() as i64 != count {
                    return Err(format!(
                        "a grid of {count} tiles needs {count} devices, the sharding lists {}",
                        p.tile_assignment_devices.len()
                    ));
                }
                Ok(Sharding::Tiled { grid, devices: p.tile_assignment_devices, iota, trailing })
            }
            4 => Ok(Sharding::Manual),
            other => Err(format!("sharding type {other} is not one XLA partitions by")),
        }
    }

    /// Decodes the sharding attribute `key` (a string or byte string).
    pub fn of_attr(attrs: &super::AttrMap, key: &str) -> Result<Sharding, String> {
        match attrs.get(key) {
            Some(super::AttrValue::Str(s)) => Sharding::decode(s.as_bytes()),
            Some(super::AttrValue::Bytes(b)) => Sharding::decode(b),
            Some(other) => Err(format!("`{key}` must be a serialized xla.OpSharding, got {}", other.kind())),
            None => Err(format!("missing attribute `{key}` (a serialized xla.OpSharding)")),
        }
    }

    /// The sharding as XLA's HLO text (`{replicated}`, `{maximal device=0}`,
    /// `{devices=[2,1]0,1}`, `{manual}`), as `mhlo.sharding` carries it.
    pub fn hlo_text(&self) -> String {
        let join = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        match self {
            Sharding::Replicated => "{replicated}".into(),
            Sharding::Maximal { device } => format!("{{maximal device={device}}}"),
            Sharding::Manual => "{manual}".into(),
            Sharding::Tiled { grid, devices, iota, trailing } => {
                let list = match iota {
                    Some((dims, perm)) if perm.is_empty() => format!("<=[{}]", join(dims)),
                    Some((dims, perm)) => {
                        let perm: Vec<i64> = perm.iter().map(|&p| i64::from(p)).collect();
                        format!("<=[{}]T({})", join(dims), join(&perm))
                    }
                    None => join(devices),
                };
                let tail = match trailing.as_slice() {
                    [] => String::new(),
                    [0] => " last_tile_dim_replicate".into(),
                    kinds => {
                        let names: Vec<&str> =
                            kinds.iter().map(|&k| if k == 4 { "manual" } else { "replicated" }).collect();
                        format!(" last_tile_dims={{{}}}", names.join(", "))
                    }
                };
                format!("{{devices=[{}]{list}{tail}}}", join(grid))
            }
        }
    }

    /// The shape of one device's part of a value of shape `full`: each
    /// data dimension (only `dim` when it is `Some`) divided by its tile
    /// count, rounded up. Untiled shardings keep `full`.
    pub fn shard_shape(&self, full: &[usize], dim: Option<usize>) -> Result<Vec<usize>, String> {
        let Sharding::Tiled { grid, trailing, .. } = self else { return Ok(full.to_vec()) };
        let data = grid.len().saturating_sub(trailing.len());
        if data != full.len() {
            return Err(format!("a tile grid of {data} data dimensions cannot cut a value of rank {}", full.len()));
        }
        let mut out = full.to_vec();
        for (i, (d, &tiles)) in out.iter_mut().zip(grid).enumerate() {
            if dim.is_none_or(|k| k == i) {
                let tiles = tiles as usize;
                *d = d.div_ceil(tiles);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_shardings_tensorflow_serializes() {
        // Bytes as TensorFlow's `xla_sharding.Sharding` serializes them.
        assert_eq!(Sharding::decode(b"").unwrap(), Sharding::Replicated);
        assert_eq!(Sharding::decode(b"\x08\x04").unwrap(), Sharding::Manual);
        let one = Sharding::decode(b"\x08\x01\x1a\x01\x01\"\x01\x00").unwrap();
        assert_eq!(one.hlo_text(), "{maximal device=0}");
        let tiled = Sharding::decode(b"\x08\x03\x1a\x02\x02\x01\"\x02\x00\x01").unwrap();
        assert_eq!(tiled.hlo_text(), "{devices=[2,1]0,1}");
        assert_eq!(tiled.shard_shape(&[5, 3], None).unwrap(), vec![3, 3]);
        assert_eq!(tiled.shard_shape(&[5, 3], Some(1)).unwrap(), vec![5, 3]);
        assert!(tiled.shard_shape(&[5], None).unwrap_err().contains("rank 1"));
        assert!(Sharding::decode(b"\x08\x03\x1a\x01\x02").unwrap_err().contains("needs 2 devices"));
        assert!(Sharding::decode(b"\xff").is_err());
    }
}
