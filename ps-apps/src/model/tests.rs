use super::*;
use crate::recordio::Features;

fn numeric_check(model: Model, batch: &[Example], keys: Option<&[u64]>, params: Vec<f32>) {
    let (_, _, g) = model.loss_and_grad(&params, keys, batch);
    let eps = 1e-2f32;
    for i in (0..params.len()).step_by((params.len() / 23).max(1)) {
        let mut p = params.clone();
        p[i] += eps;
        let up = model.loss_and_grad(&p, keys, batch).0;
        p[i] -= 2.0 * eps;
        let down = model.loss_and_grad(&p, keys, batch).0;
        let num = (up - down) / (2.0 * eps);
        assert!(
            (num - g[i]).abs() < 2e-2 + 0.05 * num.abs(),
            "param {i}: numeric {num} analytic {}",
            g[i]
        );
    }
}

fn dense_batch(dim: usize, classes: usize) -> Vec<Example> {
    (0..6)
        .map(|i| Example {
            label: (i % classes) as f32,
            features: Features::Dense((0..dim).map(|j| ((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.3).collect()),
        })
        .collect()
}

#[test]
fn softmax_gradient_matches_finite_differences() {
    let m = Model::Softmax { dim: 5, classes: 3 };
    let p: Vec<f32> = (0..m.num_params()).map(|i| (i as f32 * 0.37).sin() * 0.5).collect();
    numeric_check(m, &dense_batch(5, 3), None, p);
}

#[test]
fn mlp_gradient_matches_finite_differences() {
    let m = Model::Mlp {
        dim: 4,
        hidden: 6,
        classes: 3,
    };
    numeric_check(m, &dense_batch(4, 3), None, m.init(7));
}

#[test]
fn logreg_gradient_on_touched_keys() {
    let m = Model::LogReg { dim: 10 };
    let batch = vec![
        Example {
            label: 1.0,
            features: Features::Sparse {
                idx: vec![1, 4],
                val: vec![1.0, 0.5],
            },
        },
        Example {
            label: 0.0,
            features: Features::Sparse {
                idx: vec![4, 9],
                val: vec![2.0, -1.0],
            },
        },
    ];
    let keys = m.keys(&batch).unwrap();
    assert_eq!(keys, vec![1, 4, 9, 10]);
    let p = vec![0.3, -0.2, 0.1, 0.05];
    numeric_check(m, &batch, Some(&keys), p);
}

#[test]
fn training_a_separable_problem_reaches_full_accuracy() {
    let m = Model::Softmax { dim: 2, classes: 2 };
    let batch: Vec<Example> = (0..40)
        .map(|i| {
            let y = i % 2;
            let x = if y == 0 {
                vec![-1.0, (i as f32) / 40.0]
            } else {
                vec![1.0, (i as f32) / 40.0]
            };
            Example {
                label: y as f32,
                features: Features::Dense(x),
            }
        })
        .collect();
    let mut p = m.init(1);
    for _ in 0..50 {
        let (_, _, g) = m.loss_and_grad(&p, None, &batch);
        p.iter_mut().zip(&g).for_each(|(w, g)| *w -= 0.5 * g);
    }
    let (loss, correct, _) = m.loss_and_grad(&p, None, &batch);
    assert_eq!(correct, 40);
    assert!(loss < 0.1, "{loss}");
}

#[test]
fn save_and_load_round_trip_and_detect_corruption() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("m.bin");
    let m = Model::Mlp {
        dim: 3,
        hidden: 2,
        classes: 2,
    };
    let p = m.init(3);
    save(&f, &m, &p).unwrap();
    assert_eq!(load(&f).unwrap(), (m, p));
    let mut b = std::fs::read(&f).unwrap();
    let n = b.len();
    b[n - 1] ^= 1;
    std::fs::write(&f, &b).unwrap();
    assert!(load(&f).unwrap_err().contains("CRC"));
    std::fs::write(&f, b"junk").unwrap();
    assert!(load(&f).unwrap_err().contains("not a psrs model"));
}
