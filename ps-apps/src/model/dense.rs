//! Softmax regression and the MLP on dense features.

use crate::recordio::{Example, Features};

fn dense(e: &Example, dim: usize) -> std::borrow::Cow<'_, [f32]> {
    match &e.features {
        Features::Dense(v) if v.len() == dim => std::borrow::Cow::Borrowed(v),
        Features::Dense(v) => {
            let mut x = v.clone();
            x.resize(dim, 0.0);
            std::borrow::Cow::Owned(x)
        }
        Features::Sparse { idx, val } => {
            let mut x = vec![0.0; dim];
            for (&i, &v) in idx.iter().zip(val) {
                if (i as usize) < dim {
                    x[i as usize] = v;
                }
            }
            std::borrow::Cow::Owned(x)
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // four accumulators so the loop vectorizes
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + ra.iter().zip(rb).map(|(x, y)| x * y).sum::<f32>()
}

fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

/// Softmax of `z` in place (stable); returns log-sum-exp.
fn softmax(z: &mut [f32]) -> f32 {
    let m = z.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let s: f32 = z.iter().map(|v| (v - m).exp()).sum();
    let lse = m + s.ln();
    for v in z.iter_mut() {
        *v = (*v - lse).exp();
    }
    lse
}

fn label(e: &Example, classes: usize) -> usize {
    (e.label.max(0.0) as usize).min(classes - 1)
}

fn argmax(p: &[f32]) -> usize {
    p.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b })
        .0
}

/// Logits turned probabilities, and the input.
pub fn softmax_forward<'a>(
    p: &[f32],
    dim: usize,
    classes: usize,
    e: &'a Example,
) -> (std::borrow::Cow<'a, [f32]>, Vec<f32>) {
    let x = dense(e, dim);
    let (w, b) = p.split_at(classes * dim);
    let mut z: Vec<f32> = (0..classes)
        .map(|c| dot(&w[c * dim..(c + 1) * dim], &x) + b[c])
        .collect();
    softmax(&mut z);
    (x, z)
}

/// Mean cross-entropy, correct count and gradient over `batch`.
pub fn softmax_grad(p: &[f32], dim: usize, classes: usize, batch: &[Example]) -> (f32, usize, Vec<f32>) {
    let mut g = vec![0.0; p.len()];
    let (mut loss, mut correct) = (0.0f32, 0);
    for e in batch {
        let (x, prob) = softmax_forward(p, dim, classes, e);
        let y = label(e, classes);
        loss -= prob[y].max(1e-12).ln();
        correct += usize::from(argmax(&prob) == y);
        let (gw, gb) = g.split_at_mut(classes * dim);
        for c in 0..classes {
            let d = prob[c] - if c == y { 1.0 } else { 0.0 };
            axpy(d, &x, &mut gw[c * dim..(c + 1) * dim]);
            gb[c] += d;
        }
    }
    let n = batch.len().max(1) as f32;
    g.iter_mut().for_each(|v| *v /= n);
    (loss / n, correct, g)
}

struct Mlp<'a> {
    w1: &'a [f32],
    b1: &'a [f32],
    w2: &'a [f32],
    b2: &'a [f32],
}

fn split(p: &[f32], dim: usize, hidden: usize, classes: usize) -> Mlp<'_> {
    let (w1, rest) = p.split_at(hidden * dim);
    let (b1, rest) = rest.split_at(hidden);
    let (w2, b2) = rest.split_at(classes * hidden);
    Mlp { w1, b1, w2, b2 }
}

/// Input, hidden activations and output probabilities.
pub fn mlp_forward<'a>(
    p: &[f32],
    dim: usize,
    hidden: usize,
    classes: usize,
    e: &'a Example,
) -> (std::borrow::Cow<'a, [f32]>, Vec<f32>, Vec<f32>) {
    let m = split(p, dim, hidden, classes);
    let x = dense(e, dim);
    let h: Vec<f32> = (0..hidden)
        .map(|j| (dot(&m.w1[j * dim..(j + 1) * dim], &x) + m.b1[j]).max(0.0))
        .collect();
    let mut z: Vec<f32> = (0..classes)
        .map(|c| dot(&m.w2[c * hidden..(c + 1) * hidden], &h) + m.b2[c])
        .collect();
    softmax(&mut z);
    (x, h, z)
}

/// Mean cross-entropy, correct count and gradient over `batch`.
pub fn mlp_grad(p: &[f32], dim: usize, hidden: usize, classes: usize, batch: &[Example]) -> (f32, usize, Vec<f32>) {
    let mut g = vec![0.0; p.len()];
    let (mut loss, mut correct) = (0.0f32, 0);
    let m = split(p, dim, hidden, classes);
    for e in batch {
        let (x, h, prob) = mlp_forward(p, dim, hidden, classes, e);
        let y = label(e, classes);
        loss -= prob[y].max(1e-12).ln();
        correct += usize::from(argmax(&prob) == y);
        let (gw1, rest) = g.split_at_mut(hidden * dim);
        let (gb1, rest) = rest.split_at_mut(hidden);
        let (gw2, gb2) = rest.split_at_mut(classes * hidden);
        let mut dh = vec![0.0f32; hidden];
        for c in 0..classes {
            let d = prob[c] - if c == y { 1.0 } else { 0.0 };
            axpy(d, &h, &mut gw2[c * hidden..(c + 1) * hidden]);
            gb2[c] += d;
            axpy(d, &m.w2[c * hidden..(c + 1) * hidden], &mut dh);
        }
        for j in 0..hidden {
            if h[j] > 0.0 {
                axpy(dh[j], &x, &mut gw1[j * dim..(j + 1) * dim]);
                gb1[j] += dh[j];
            }
        }
    }
    let n = batch.len().max(1) as f32;
    g.iter_mut().for_each(|v| *v /= n);
    (loss / n, correct, g)
}

/// He-initialised MLP weights (deterministic in `seed`), zero biases.
pub fn init_mlp(dim: usize, hidden: usize, classes: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1;
    let mut uniform = move || {
        // xorshift64*
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        ((s.wrapping_mul(2685821657736338717) >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    let mut p = Vec::with_capacity(hidden * dim + hidden + classes * hidden + classes);
    let a1 = (6.0 / dim as f32).sqrt();
    p.extend((0..hidden * dim).map(|_| uniform() * a1));
    p.extend(std::iter::repeat_n(0.0, hidden));
    let a2 = (6.0 / hidden as f32).sqrt();
    p.extend((0..classes * hidden).map(|_| uniform() * a2));
    p.extend(std::iter::repeat_n(0.0, classes));
    p
}
