//! Summing per-example losses and gradients over a minibatch, split into chunks that
//! run on the rayon pool when the batch is worth it.

use super::flat::BatchStats;
use crate::recordio::Example;
use rayon::prelude::*;

/// At most this many chunks per batch. A constant, not the pool size, so that the
/// floating-point summation order (and so the result) is the same on every machine.
const MAX_CHUNKS: usize = 16;

/// A chunk should hold at least this many floating-point operations...
const MIN_CHUNK_FLOPS: usize = 1 << 18;

/// ...and at least this many times the gradient length, so that zeroing and summing
/// per-chunk gradients stays a small fraction of the work.
const MIN_CHUNK_GRAD_FACTOR: usize = 32;

/// How many chunks to split `n` examples of `flops` operations each into, for a
/// gradient of `grad_len` values.
fn num_chunks(n: usize, flops: usize, grad_len: usize) -> usize {
    let per_chunk = MIN_CHUNK_FLOPS.max(MIN_CHUNK_GRAD_FACTOR * grad_len);
    let min_examples = per_chunk.div_ceil(flops.max(1)).max(1);
    (n / min_examples).clamp(1, MAX_CHUNKS)
}

/// Runs `per_example(example, grad_sum) -> (loss, correct)` over `batch`, where the
/// closure adds the example's gradient into `grad_sum` (`grad_len` values), and
/// returns the means. `flops` estimates one example's cost, to decide whether to
/// split the batch.
pub(crate) fn accumulate<F>(batch: &[Example], grad_len: usize, flops: usize, per_example: F) -> BatchStats
where
    F: Fn(&Example, &mut [f32]) -> (f32, bool) + Sync,
{
    let run = |part: &[Example]| {
        let mut grad = vec![0.0f32; grad_len];
        let (mut loss, mut correct) = (0.0f64, 0usize);
        for e in part {
            let (l, c) = per_example(e, &mut grad);
            loss += f64::from(l);
            correct += usize::from(c);
        }
        (loss, correct, grad)
    };
    let chunks = num_chunks(batch.len(), flops, grad_len);
    let (loss, correct, mut grad) = if chunks <= 1 {
        run(batch)
    } else {
        let size = batch.len().div_ceil(chunks);
        let parts: Vec<_> = batch.par_chunks(size).map(run).collect();
        // summed in chunk order: deterministic
        let mut parts = parts.into_iter();
        let first = parts.next().expect("a non-empty batch has a chunk");
        parts.fold(first, |(l, c, mut g), (l2, c2, g2)| {
            g.iter_mut().zip(&g2).for_each(|(a, b)| *a += b);
            (l + l2, c + c2, g)
        })
    };
    let n = batch.len().max(1);
    let inv = 1.0 / n as f32;
    grad.iter_mut().for_each(|g| *g *= inv);
    BatchStats {
        loss: (loss / n as f64) as f32,
        correct,
        grad,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recordio::Features;

    #[test]
    fn chunking_is_bounded_and_parallel_sums_match() {
        assert_eq!(num_chunks(0, 10, 10), 1);
        assert_eq!(num_chunks(1_000_000, 1 << 20, 10), MAX_CHUNKS);
        assert_eq!(num_chunks(64, 1000, 100_000), 1);
        let batch: Vec<Example> = (0..5000)
            .map(|i| Example {
                label: i as f32,
                features: Features::Dense(vec![]),
            })
            .collect();
        let f = |e: &Example, g: &mut [f32]| {
            g[0] += e.label;
            g[1] += 1.0;
            (e.label, (e.label as usize) & 1 == 0)
        };
        let serial = accumulate(&batch, 2, 1, f);
        let parallel = accumulate(&batch, 2, 1 << 20, f);
        assert_eq!(serial.correct, 2500);
        assert_eq!(parallel.correct, 2500);
        assert!((serial.loss - 2499.5).abs() < 1e-3 && (parallel.loss - 2499.5).abs() < 1e-3);
        assert_eq!(parallel.grad[1], 1.0);
        assert!((parallel.grad[0] - serial.grad[0]).abs() < 1e-2);
        assert_eq!(
            accumulate(&[], 3, 1, f),
            BatchStats {
                loss: 0.0,
                correct: 0,
                grad: vec![0.0; 3]
            }
        );
    }
}
