//! Embedding rows as float16 on the wire (a table declared with `fp16_wire`): a row of
//! `dim` values travels as `dim.div_ceil(2)` 4-byte words, each holding two IEEE
//! half-precision values (the row's value `2i` in the low 16 bits, `2i + 1` in the
//! high 16; a zero pads an odd row), so a message of a `KVWorker<f32>` carries it.
//! Lookups are answered, and row gradients pushed, this way: half the bytes, at the
//! cost of float16's precision (11 significant bits) and range (6e-8 to 65504).

use half::f16;

/// Words of one row of `dim` values.
pub fn words(dim: usize) -> usize {
    dim.div_ceil(2)
}

/// Appends the rows `rows` (`dim` values each) to `out` as float16 pairs.
pub fn pack(rows: &[f32], dim: usize, out: &mut Vec<f32>) {
    for row in rows.chunks_exact(dim) {
        for pair in row.chunks(2) {
            let lo = f16::from_f32(pair[0]).to_bits() as u32;
            let hi = pair.get(1).map_or(0, |&v| f16::from_f32(v).to_bits() as u32);
            out.push(f32::from_bits(lo | hi << 16));
        }
    }
}

/// The rows packed by [`pack`] (`words(dim)` words each) into `out` (`dim` values
/// each); false if the counts do not match.
pub fn unpack(packed: &[f32], dim: usize, out: &mut [f32]) -> bool {
    let w = words(dim);
    if dim == 0 || !packed.len().is_multiple_of(w) || packed.len() / w * dim != out.len() {
        return false;
    }
    for (src, row) in packed.chunks_exact(w).zip(out.chunks_exact_mut(dim)) {
        for (i, v) in row.iter_mut().enumerate() {
            let bits = src[i / 2].to_bits() >> (16 * (i % 2));
            *v = f16::from_bits(bits as u16).to_f32();
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_at_half_precision() {
        let rows = [1.0f32, -0.5, 3.3, 1e-3, 70000.0, 0.1];
        for dim in [1, 2, 3, 6] {
            let mut packed = Vec::new();
            pack(&rows, dim, &mut packed);
            assert_eq!(packed.len(), rows.len() / dim * words(dim));
            let mut back = vec![0.0; rows.len()];
            assert!(unpack(&packed, dim, &mut back));
            for (a, b) in rows.iter().zip(&back) {
                if a.abs() > 65504.0 {
                    assert!(b.is_infinite(), "{a} overflows float16");
                } else {
                    assert!((a - b).abs() <= a.abs() / 1024.0, "{a} -> {b}");
                }
            }
            assert_eq!(back[0], 1.0);
            assert!(
                !unpack(&packed, dim, &mut back[..rows.len() - dim]),
                "a count that does not match"
            );
        }
    }
}
