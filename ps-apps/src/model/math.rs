//! Numeric kernels shared by the models: dot product, axpy, a numerically stable
//! softmax (log-sum-exp), the logistic function and softplus, and views of an
//! example's features and label as the dense models need them.

use crate::recordio::Features;
use std::borrow::Cow;

/// The features as exactly `dim` dense values: dense features are truncated or padded
/// with zeros, sparse ones are scattered (indices `>= dim` are dropped).
pub(crate) fn dense_view(f: &Features, dim: usize) -> Cow<'_, [f32]> {
    match f {
        Features::Dense(v) if v.len() == dim => Cow::Borrowed(v),
        Features::Dense(v) => {
            let mut x = v.clone();
            x.resize(dim, 0.0);
            Cow::Owned(x)
        }
        Features::Sparse { idx, val } => {
            let mut x = vec![0.0; dim];
            for (&i, &v) in idx.iter().zip(val) {
                if let Some(slot) = x.get_mut(i as usize) {
                    *slot = v;
                }
            }
            Cow::Owned(x)
        }
    }
}

/// `a · b` over the shorter of the two, with eight accumulators so it vectorizes.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `y += a * x` (over the shorter of the two).
pub(crate) fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

/// Turns logits `z` into probabilities in place and returns the log-sum-exp of the
/// logits, computed stably (shifted by the maximum).
pub(crate) fn softmax_in_place(z: &mut [f32]) -> f32 {
    let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !m.is_finite() {
        // diverged parameters: the mass goes evenly to the +inf logits, or to every
        // class if there are none (all -inf or NaN); the infinite result shows it
        let top = |v: f32| if m == f32::INFINITY { v == m } else { true };
        let n = z.iter().filter(|&&v| top(v)).count().max(1) as f32;
        z.iter_mut().for_each(|v| *v = if top(*v) { 1.0 / n } else { 0.0 });
        return m;
    }
    let mut s = 0.0f32;
    for v in z.iter_mut() {
        *v = (*v - m).exp();
        s += *v;
    }
    z.iter_mut().for_each(|v| *v /= s);
    m + s.ln()
}

/// The logistic function `1 / (1 + e^-z)`, without overflow for large `|z|`.
pub(crate) fn sigmoid(z: f32) -> f32 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// `ln(1 + e^z)`, without overflow for large `|z|`.
pub(crate) fn softplus(z: f32) -> f32 {
    z.max(0.0) + (-z.abs()).exp().ln_1p()
}

/// Index of the largest value (the first one on ties; 0 for an empty slice).
pub(crate) fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// The class index of a multi-class label: the label rounded down, clamped into
/// `0..classes` (negative or NaN labels are class 0).
pub(crate) fn class_of(label: f32, classes: usize) -> usize {
    (label.max(0.0) as usize).min(classes.saturating_sub(1))
}

/// The 0/1 target of a binary label: 1 for a positive label (`1`, `+1`), else 0
/// (`0`, `-1`).
pub(crate) fn binary_target(label: f32) -> f32 {
    if label > 0.0 {
        1.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_softmax_and_logistic() {
        let mut z = vec![1000.0, 1001.0];
        let lse = softmax_in_place(&mut z);
        let e = std::f32::consts::E;
        assert!((z[0] - 1.0 / (1.0 + e)).abs() < 1e-6 && (z[1] - e / (1.0 + e)).abs() < 1e-6);
        assert!((lse - (1000.0 + (1.0 + e).ln())).abs() < 1e-3);
        let mut inf = vec![f32::INFINITY, 0.0, f32::INFINITY];
        assert_eq!(softmax_in_place(&mut inf), f32::INFINITY);
        assert_eq!(inf, vec![0.5, 0.0, 0.5]);
        let mut none = vec![f32::NEG_INFINITY; 4];
        assert_eq!(softmax_in_place(&mut none), f32::NEG_INFINITY);
        assert_eq!(none, vec![0.25; 4]);
        assert_eq!(sigmoid(-200.0), 0.0);
        assert_eq!(sigmoid(200.0), 1.0);
        assert!((sigmoid(0.0) - 0.5).abs() < 1e-7);
        assert!((softplus(100.0) - 100.0).abs() < 1e-5);
        assert!(softplus(-100.0) > 0.0 && softplus(-100.0) < 1e-40);
        assert!((softplus(0.0) - 2f32.ln()).abs() < 1e-7);
    }

    #[test]
    fn kernels_and_views() {
        let a: Vec<f32> = (0..19).map(|i| i as f32).collect();
        assert_eq!(dot(&a, &a), (0..19).map(|i| (i * i) as f32).sum::<f32>());
        let mut y = vec![1.0, 1.0];
        axpy(2.0, &[1.0, 3.0], &mut y);
        assert_eq!(y, vec![3.0, 7.0]);
        assert_eq!(argmax(&[0.1, 0.7, 0.7]), 1);
        assert_eq!((class_of(-1.0, 3), class_of(2.0, 3), class_of(9.0, 3)), (0, 2, 2));
        assert_eq!(
            (binary_target(-1.0), binary_target(0.0), binary_target(1.0)),
            (0.0, 0.0, 1.0)
        );
        let s = Features::Sparse {
            idx: vec![0, 2, 7],
            val: vec![1.0, 2.0, 3.0],
        };
        assert_eq!(&*dense_view(&s, 3), &[1.0, 0.0, 2.0]);
        assert_eq!(&*dense_view(&Features::Dense(vec![1.0]), 2), &[1.0, 0.0]);
    }
}
