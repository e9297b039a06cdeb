//! The initial value of an embedding row: normal(0, std), a pure function of the
//! table's seed and the row id. A row is stored from its first update only; before
//! that every server (the primary, a replica, a replacement) answers the same values
//! without storing anything.

use super::keys::mix64;

/// Writes row `id`'s initial values into `out` (normal with mean 0 and deviation `std`).
pub fn initial_row(seed: u64, id: u64, std: f32, out: &mut [f32]) {
    if std == 0.0 {
        out.fill(0.0);
        return;
    }
    let mut state = mix64(seed ^ mix64(id));
    let mut next_unit = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        // 53 random bits in (0, 1]
        ((mix64(state) >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    };
    for pair in out.chunks_mut(2) {
        // Box-Muller: two normals from two uniforms
        let (u1, u2) = (next_unit(), next_unit());
        let r = (-2.0 * u1.ln()).sqrt() * std as f64;
        let a = std::f64::consts::TAU * u2;
        pair[0] = (r * a.cos()) as f32;
        if let Some(second) = pair.get_mut(1) {
            *second = (r * a.sin()) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_reproducible_and_normal() {
        let mut a = vec![0.0; 15];
        let mut b = vec![0.0; 15];
        initial_row(7, 42, 0.5, &mut a);
        initial_row(7, 42, 0.5, &mut b);
        assert_eq!(a, b);
        initial_row(7, 43, 0.5, &mut b);
        assert_ne!(a, b, "another row");
        initial_row(8, 42, 0.5, &mut b);
        assert_ne!(a, b, "another table seed");
        let n = 20_000;
        let mut all = Vec::with_capacity(n * 16);
        let mut row = vec![0.0; 16];
        for id in 0..n as u64 {
            initial_row(1, id, 0.1, &mut row);
            all.extend_from_slice(&row);
        }
        let mean = all.iter().map(|&x| x as f64).sum::<f64>() / all.len() as f64;
        let var = all.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / all.len() as f64;
        assert!(mean.abs() < 0.002, "mean {mean}");
        assert!((var.sqrt() - 0.1).abs() < 0.002, "std {}", var.sqrt());
        initial_row(1, 5, 0.0, &mut row);
        assert!(row.iter().all(|&x| x == 0.0));
    }
}
