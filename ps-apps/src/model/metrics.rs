//! Evaluation metrics on a held-out set: accuracy, log-loss, AUC (binary, ties
//! counted one half), and confusion counts (multi-class matrix and binary
//! true/false positives/negatives).

/// Fraction of predicted classes equal to their labels (0 for no examples).
///
/// # Panics
/// If `pred` and `labels` differ in length.
pub fn accuracy(pred: &[usize], labels: &[usize]) -> f64 {
    assert_eq!(pred.len(), labels.len(), "one prediction per label");
    if pred.is_empty() {
        return 0.0;
    }
    pred.iter().zip(labels).filter(|(p, l)| p == l).count() as f64 / pred.len() as f64
}

/// Smallest probability a log-loss term uses, so a confident mistake costs
/// `-ln(1e-12) ≈ 27.6` rather than infinity.
pub const MIN_PROBABILITY: f64 = 1e-12;

/// Mean negative log-probability of the true class, `-ln probs[i][labels[i]]` (a
/// label beyond the vector counts as probability 0; probabilities are clamped below
/// at [`MIN_PROBABILITY`]). 0 for no examples.
///
/// # Panics
/// If `probs` and `labels` differ in length.
pub fn log_loss(probs: &[Vec<f32>], labels: &[usize]) -> f64 {
    assert_eq!(probs.len(), labels.len(), "one distribution per label");
    if probs.is_empty() {
        return 0.0;
    }
    let term = |p: &Vec<f32>, l: usize| -(f64::from(p.get(l).copied().unwrap_or(0.0)).max(MIN_PROBABILITY)).ln();
    probs.iter().zip(labels).map(|(p, &l)| term(p, l)).sum::<f64>() / probs.len() as f64
}

/// Binary log-loss of positive-class probabilities `p` against `labels`
/// (`-ln p` for a positive, `-ln(1 - p)` for a negative, clamped as in
/// [`log_loss`]). 0 for no examples.
///
/// # Panics
/// If `p` and `labels` differ in length.
pub fn binary_log_loss(p: &[f32], labels: &[bool]) -> f64 {
    assert_eq!(p.len(), labels.len(), "one probability per label");
    if p.is_empty() {
        return 0.0;
    }
    let term = |p: f64, y: bool| -(if y { p } else { 1.0 - p }).max(MIN_PROBABILITY).ln();
    p.iter().zip(labels).map(|(&p, &y)| term(f64::from(p), y)).sum::<f64>() / p.len() as f64
}

/// Area under the ROC curve of `scores` (higher = more likely positive) for binary
/// `labels`: the probability that a random positive scores above a random negative,
/// a tie counting one half (the Mann–Whitney statistic with mid-ranks). 0.5 when
/// either class is absent (undefined). NaN scores sort above every number.
///
/// # Panics
/// If `scores` and `labels` differ in length.
pub fn auc(scores: &[f32], labels: &[bool]) -> f64 {
    assert_eq!(scores.len(), labels.len(), "one score per label");
    let pos = labels.iter().filter(|&&l| l).count() as f64;
    let neg = labels.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        return 0.5;
    }
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    // sum of the mid-ranks (1-based) of the positives
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && scores[idx[j + 1]].total_cmp(&scores[idx[i]]).is_eq() {
            j += 1;
        }
        let mid = (i + j) as f64 / 2.0 + 1.0;
        rank_sum += idx[i..=j].iter().filter(|&&k| labels[k]).count() as f64 * mid;
        i = j + 1;
    }
    (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg)
}

/// Counts of (true class, predicted class) pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfusionMatrix {
    /// Number of classes (rows and columns).
    pub classes: usize,
    /// Row-major counts: `counts[actual * classes + predicted]`.
    pub counts: Vec<u64>,
}

impl ConfusionMatrix {
    /// Counts `pred` against `labels`. The matrix has `classes` rows, or more if a
    /// label or prediction is larger (it never drops an example).
    ///
    /// # Panics
    /// If `pred` and `labels` differ in length.
    pub fn new(pred: &[usize], labels: &[usize], classes: usize) -> ConfusionMatrix {
        assert_eq!(pred.len(), labels.len(), "one prediction per label");
        let classes = pred.iter().chain(labels).map(|&c| c + 1).fold(classes, usize::max);
        let mut counts = vec![0; classes * classes];
        for (&p, &l) in pred.iter().zip(labels) {
            counts[l * classes + p] += 1;
        }
        ConfusionMatrix { classes, counts }
    }

    /// Examples of class `actual` predicted as `predicted` (0 outside the matrix).
    pub fn get(&self, actual: usize, predicted: usize) -> u64 {
        if actual < self.classes && predicted < self.classes {
            self.counts[actual * self.classes + predicted]
        } else {
            0
        }
    }

    /// All examples.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Examples on the diagonal (predicted right).
    pub fn correct(&self) -> u64 {
        (0..self.classes).map(|c| self.get(c, c)).sum()
    }

    /// Of the examples of class `c`, the fraction predicted `c` (0 if there are none).
    pub fn recall(&self, c: usize) -> f64 {
        let row: u64 = (0..self.classes).map(|p| self.get(c, p)).sum();
        ratio(self.get(c, c), row)
    }

    /// Of the examples predicted `c`, the fraction that are `c` (0 if there are none).
    pub fn precision(&self, c: usize) -> f64 {
        let col: u64 = (0..self.classes).map(|a| self.get(a, c)).sum();
        ratio(self.get(c, c), col)
    }
}

/// True/false positives/negatives of a binary classifier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BinaryCounts {
    /// Positives predicted positive.
    pub tp: u64,
    /// Negatives predicted positive.
    pub fp: u64,
    /// Negatives predicted negative.
    pub tn: u64,
    /// Positives predicted negative.
    pub fn_: u64,
}

impl BinaryCounts {
    /// Counts `scores` against `labels`, predicting positive when `score >= threshold`.
    ///
    /// # Panics
    /// If `scores` and `labels` differ in length.
    pub fn at_threshold(scores: &[f32], labels: &[bool], threshold: f32) -> BinaryCounts {
        assert_eq!(scores.len(), labels.len(), "one score per label");
        let mut c = BinaryCounts::default();
        for (&s, &y) in scores.iter().zip(labels) {
            match (s >= threshold, y) {
                (true, true) => c.tp += 1,
                (true, false) => c.fp += 1,
                (false, false) => c.tn += 1,
                (false, true) => c.fn_ += 1,
            }
        }
        c
    }

    /// `tp / (tp + fp)` (0 when nothing was predicted positive).
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }

    /// `tp / (tp + fn)` (0 when there are no positives).
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }

    /// `(tp + tn) / total` (0 for no examples).
    pub fn accuracy(&self) -> f64 {
        ratio(self.tp + self.tn, self.tp + self.fp + self.tn + self.fn_)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accuracy_and_log_loss() {
        assert_eq!(accuracy(&[1, 2, 3, 3], &[1, 2, 0, 3]), 0.75);
        assert_eq!(accuracy(&[], &[]), 0.0);
        let l = log_loss(&[vec![0.5, 0.5], vec![0.9, 0.1]], &[0, 0]);
        assert!((l - (0.5f64.ln() + 0.9f64.ln()) / -2.0).abs() < 1e-6);
        // a zero probability (or a label beyond the vector) costs -ln(1e-12)
        let l = log_loss(&[vec![1.0, 0.0], vec![1.0]], &[1, 1]);
        assert!((l - 12.0 * 10f64.ln()).abs() < 1e-9);
        let b = binary_log_loss(&[0.8, 0.25], &[true, false]);
        assert!((b - (0.8f64.ln() + 0.75f64.ln()) / -2.0).abs() < 1e-6);
    }

    #[test]
    fn auc_hand_computed() {
        // pairs (pos, neg): (0.35, 0.1) 1, (0.35, 0.4) 0, (0.8, 0.1) 1, (0.8, 0.4) 1
        assert_eq!(auc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]), 0.75);
        // with a tie: (0.4, 0.1) 1, (0.4, 0.4) 0.5, (0.8, 0.1) 1, (0.8, 0.4) 1
        assert_eq!(auc(&[0.1, 0.4, 0.4, 0.8], &[false, true, false, true]), 0.875);
        assert_eq!(auc(&[0.5, 0.5], &[false, true]), 0.5);
        assert_eq!(auc(&[0.3; 6], &[true, false, true, false, false, true]), 0.5);
        assert_eq!(auc(&[0.1, 0.9], &[false, true]), 1.0);
        assert_eq!(auc(&[0.9, 0.1], &[false, true]), 0.0);
        assert_eq!(auc(&[0.9, 0.1], &[true, true]), 0.5);
        // the order of the input does not matter
        assert_eq!(auc(&[0.8, 0.4, 0.1, 0.4], &[true, false, false, true]), 0.875);
    }

    #[test]
    fn confusion_counts() {
        let m = ConfusionMatrix::new(&[0, 1, 1, 2, 2, 0], &[0, 1, 2, 2, 0, 0], 3);
        assert_eq!(m.counts, vec![2, 0, 1, 0, 1, 0, 0, 1, 1]);
        assert_eq!((m.total(), m.correct()), (6, 4));
        assert_eq!((m.get(2, 1), m.get(5, 5)), (1, 0));
        assert_eq!(m.recall(0), 2.0 / 3.0);
        assert_eq!(m.precision(1), 0.5);
        assert_eq!(ConfusionMatrix::new(&[4], &[0], 2).classes, 5);

        let c = BinaryCounts::at_threshold(&[0.9, 0.6, 0.5, 0.4, 0.1], &[true, false, true, true, false], 0.5);
        assert_eq!(
            c,
            BinaryCounts {
                tp: 2,
                fp: 1,
                tn: 1,
                fn_: 1
            }
        );
        assert_eq!((c.precision(), c.recall(), c.accuracy()), (2.0 / 3.0, 2.0 / 3.0, 0.6));
        assert_eq!(BinaryCounts::default().precision(), 0.0);
    }
}
