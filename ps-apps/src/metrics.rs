//! Evaluation metrics: accuracy, log-loss, AUC.

/// Fraction of predictions equal to their labels.
pub fn accuracy(pred: &[usize], labels: &[usize]) -> f64 {
    if pred.is_empty() {
        return 0.0;
    }
    pred.iter().zip(labels).filter(|(p, l)| p == l).count() as f64 / pred.len() as f64
}

/// Mean negative log-probability of the true class (`probs[i][labels[i]]`).
pub fn log_loss(probs: &[Vec<f32>], labels: &[usize]) -> f64 {
    if probs.is_empty() {
        return 0.0;
    }
    probs
        .iter()
        .zip(labels)
        .map(|(p, &l)| -(p.get(l).copied().unwrap_or(0.0).max(1e-12) as f64).ln())
        .sum::<f64>()
        / probs.len() as f64
}

/// Area under the ROC curve of scores for binary labels (ties count one half).
pub fn auc(scores: &[f32], labels: &[bool]) -> f64 {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let (pos, neg) = labels
        .iter()
        .fold((0f64, 0f64), |(p, n), &l| if l { (p + 1.0, n) } else { (p, n + 1.0) });
    if pos == 0.0 || neg == 0.0 {
        return 0.5;
    }
    // sum of the (tie-averaged) ranks of the positives
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && scores[idx[j + 1]] == scores[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        rank_sum += (i..=j).filter(|&k| labels[idx[k]]).count() as f64 * avg;
        i = j + 1;
    }
    (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_values() {
        assert_eq!(accuracy(&[1, 2, 3, 3], &[1, 2, 0, 3]), 0.75);
        let l = log_loss(&[vec![0.5, 0.5], vec![0.9, 0.1]], &[0, 0]);
        assert!((l - (0.5f64.ln() + 0.9f64.ln()) / -2.0).abs() < 1e-6);
        assert_eq!(auc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]), 0.75);
        assert_eq!(auc(&[0.5, 0.5], &[false, true]), 0.5);
        assert_eq!(auc(&[0.1, 0.9], &[false, true]), 1.0);
    }
}
