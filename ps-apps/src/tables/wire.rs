//! The KV commands (message heads) and answer statuses of the parameter tables, and
//! the declaration's values: the encoded [`super::spec::ModelSpec`] carried as raw
//! 4-byte words (a length word, then the bytes), then the dense block's initial
//! values.

use super::error::TablesError;
pub use crate::train::kv_exchange::{CMD_IDLE, STATUS_REJECTED};

/// Push: worker 0 declares the model (spec and its initial block) to a range. A range
/// that holds the same model already keeps its values; another model is refused.
pub const CMD_DECLARE: i32 = 20;
/// Push: a worker checks its model against the declared one (spec only).
pub const CMD_JOIN: i32 = 21;
/// Push: a step's gradients (the dense block and rows), tagged with the version.
pub const CMD_STEP: i32 = 22;
/// Pull: the dense block, now (version 0) or after version `v` (version `v + 1`).
pub const CMD_DENSE: i32 = 23;
/// Pull: rows of one table, now.
pub const CMD_ROWS: i32 = 24;
/// Pull: a page of a table's stored rows, for an export: the request's version is
/// [`dump_cursor`] (the table and the slot to start from); the answer's keys are the
/// row ids, its values the rows, its version the slot to go on from
/// ([`DUMP_END`] after the last page).
pub const CMD_DUMP: i32 = 25;

/// The version of an answer to [`CMD_DUMP`] that sent the last page.
pub const DUMP_END: u64 = u64::MAX;

/// Rows in one page of [`CMD_DUMP`] at most.
pub const DUMP_PAGE_ROWS: usize = 1 << 18;

/// The version of a [`CMD_DUMP`] request: table `table` from slot `from`.
pub fn dump_cursor(table: usize, from: u64) -> u64 {
    (table as u64) << 40 | from
}

/// The table and slot of [`dump_cursor`].
pub fn dump_position(cursor: u64) -> (usize, usize) {
    ((cursor >> 40) as usize, (cursor & ((1 << 40) - 1)) as usize)
}

/// A join before the model was declared: ask again.
pub const STATUS_NOT_YET: i32 = 2;
/// This server holds no model (a replacement with nothing to restore): declare it again.
pub const STATUS_UNDECLARED: i32 = 3;

/// The values of a declaration: `spec`'s bytes, then `block` (empty for a join).
pub fn encode_declaration(spec: &[u8], block: &[f32]) -> Vec<f32> {
    let words = spec.len().div_ceil(4);
    let mut bytes = vec![0u8; words * 4];
    bytes[..spec.len()].copy_from_slice(spec);
    let mut out = Vec::with_capacity(1 + words + block.len());
    out.push(f32::from_bits(spec.len() as u32));
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|w| f32::from_bits(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))),
    );
    out.extend_from_slice(block);
    out
}

/// The spec bytes and block values of a declaration's values;
/// [`TablesError::Malformed`] if they are cut short.
pub fn decode_declaration(vals: &[f32]) -> Result<(Vec<u8>, &[f32]), TablesError> {
    let len = vals
        .first()
        .ok_or_else(|| TablesError::Malformed("an empty declaration".into()))?
        .to_bits() as usize;
    let words = len.div_ceil(4);
    let spec = vals
        .get(1..1 + words)
        .ok_or_else(|| TablesError::Malformed(format!("a declaration of {len} bytes in {} values", vals.len())))?;
    let mut bytes: Vec<u8> = spec.iter().flat_map(|w| w.to_bits().to_le_bytes()).collect();
    bytes.truncate(len);
    Ok((bytes, &vals[1 + words..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_round_trip_and_short_ones_are_refused() {
        // bit patterns that are NaNs as floats survive (values are never computed on)
        let spec = [0xffu8, 0xff, 0xc0, 0x7f, 1, 2, 3];
        let v = encode_declaration(&spec, &[1.5, 2.5]);
        let (s, b) = decode_declaration(&v).unwrap();
        assert_eq!((&s[..], b), (&spec[..], &[1.5, 2.5][..]));
        assert!(matches!(decode_declaration(&[]), Err(TablesError::Malformed(_))));
        assert!(decode_declaration(&v[..2]).is_err());
        let empty = encode_declaration(&[], &[]);
        let (s, b) = decode_declaration(&empty).unwrap();
        assert!(s.is_empty() && b.is_empty());
    }
}
