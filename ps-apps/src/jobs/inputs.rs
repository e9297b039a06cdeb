//! The inputs and outputs of an inference job run by a Python runner, without the
//! runner: examples as the float32 matrix a TorchScript model is given (sparse ones
//! densified), logits as predictions, and outputs as CSV fields.

use super::error::JobsError;
use super::wire::Prediction;
use crate::recordio::{Example, Features};

/// The examples as a row-major float32 matrix `[examples, width]`: dense examples as
/// they are (each must be `width` long), sparse ones densified (every index below
/// `width`). `width` is `dim`, else the first dense example's length. Examples that do
/// not fit that width are [`JobsError::BadData`].
pub fn densify(examples: &[Example], dim: Option<usize>) -> Result<(Vec<f32>, usize), JobsError> {
    let width = match (dim, examples.first().map(|e| &e.features)) {
        (Some(d), _) => d,
        (None, Some(Features::Dense(v))) => v.len(),
        (None, Some(Features::Sparse { .. })) => {
            return Err(JobsError::BadData(
                "sparse examples: give the model's input width (--dim)".into(),
            ))
        }
        (None, None) => 0,
    };
    let mut x = vec![0f32; examples.len() * width];
    for (i, e) in examples.iter().enumerate() {
        let row = &mut x[i * width..(i + 1) * width];
        match &e.features {
            Features::Dense(v) if v.len() == width => row.copy_from_slice(v),
            Features::Dense(v) => {
                return Err(JobsError::BadData(format!(
                    "an example of {} features, the model takes {width}",
                    v.len()
                )))
            }
            Features::Sparse { idx, val } => {
                for (&j, &v) in idx.iter().zip(val) {
                    let slot = row.get_mut(j as usize).ok_or_else(|| {
                        JobsError::BadData(format!("a sparse example with feature {j}, the model takes {width}"))
                    })?;
                    *slot = v;
                }
            }
        }
    }
    Ok((x, width))
}

/// Each row's most likely class and its softmax probability, with the example's label.
pub fn predictions(logits: &[f32], classes: usize, labels: &[f32]) -> Vec<Prediction> {
    logits
        .chunks_exact(classes)
        .zip(labels)
        .map(|(row, &label)| {
            let (class, max) = row
                .iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
            let sum: f64 = row.iter().map(|&v| f64::from(v - max).exp()).sum();
            Prediction {
                class: class as u32,
                prob: (1.0 / sum) as f32,
                label,
            }
        })
        .collect()
}

/// One CSV field: as it is, or quoted (quotes doubled) if it holds a comma, a quote or
/// a line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(f: Features) -> Example {
        Example {
            label: 1.0,
            features: f,
        }
    }

    #[test]
    fn examples_become_a_dense_matrix() {
        let dense = [ex(Features::Dense(vec![1.0, 2.0])), ex(Features::Dense(vec![3.0, 4.0]))];
        assert_eq!(densify(&dense, None).unwrap(), (vec![1.0, 2.0, 3.0, 4.0], 2));
        assert!(densify(&dense, Some(3)).unwrap_err().to_string().contains("2 features"));
        let sparse = [ex(Features::Sparse {
            idx: vec![0, 3],
            val: vec![5.0, 6.0],
        })];
        assert_eq!(densify(&sparse, Some(4)).unwrap().0, vec![5.0, 0.0, 0.0, 6.0]);
        assert!(densify(&sparse, Some(3)).unwrap_err().to_string().contains("feature 3"));
        assert!(densify(&sparse, None).unwrap_err().to_string().contains("--dim"));
    }

    #[test]
    fn logits_become_classes_and_softmax_probabilities() {
        let p = predictions(&[0.0, 2.0, 1.0, 5.0, 5.0, -1.0], 3, &[1.0, f32::NAN]);
        assert_eq!(p[0].class, 1);
        let want = 2f64.exp() / (1.0 + 2f64.exp() + 1f64.exp());
        assert!((f64::from(p[0].prob) - want).abs() < 1e-6, "{}", p[0].prob);
        assert_eq!(p[1].class, 0, "ties go to the first class");
        assert!(p[1].label.is_nan());
        // large logits do not overflow
        let p = predictions(&[1000.0, 0.0], 2, &[0.0]);
        assert_eq!((p[0].class, p[0].prob), (0, 1.0));
    }

    #[test]
    fn fields_are_quoted_when_needed() {
        assert_eq!(csv_field("cat"), "cat");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
