//! Unit tests across the models: gradients against finite differences, the key-subset
//! API, numerical stability, parallel batches, and model files.

use super::learner::Learner;
use super::*;
use crate::recordio::{Example, Features};

/// Central finite differences of the mean loss against the analytic gradient, for
/// every parameter.
fn check_gradient(m: &impl FlatModel, params: &[f32], batch: &[Example]) {
    let (_, g) = m.loss_and_grad(params, batch);
    assert_eq!(g.len(), params.len());
    let eps = 1e-3f32;
    for i in 0..params.len() {
        let mut p = params.to_vec();
        p[i] += eps;
        let up = m.loss_and_grad(&p, batch).0;
        p[i] -= 2.0 * eps;
        let down = m.loss_and_grad(&p, batch).0;
        let num = (up - down) / (2.0 * eps);
        assert!(
            (num - g[i]).abs() < 2e-3 + 0.02 * num.abs(),
            "param {i}: numeric {num}, analytic {}",
            g[i]
        );
    }
}

fn dense_batch(dim: usize, classes: usize) -> Vec<Example> {
    let mut b: Vec<Example> = (0..6)
        .map(|i| Example {
            label: (i % classes) as f32,
            features: Features::Dense((0..dim).map(|j| ((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.3).collect()),
        })
        .collect();
    // dense models also take sparse features
    b.push(Example {
        label: 1.0,
        features: Features::Sparse {
            idx: vec![0, dim as u32 - 1],
            val: vec![0.7, -0.4],
        },
    });
    b
}

fn sparse_batch() -> Vec<Example> {
    let ex = |label: f32, idx: Vec<u32>, val: Vec<f32>| Example {
        label,
        features: Features::Sparse { idx, val },
    };
    vec![
        ex(1.0, vec![1, 4], vec![1.0, 0.5]),
        ex(-1.0, vec![4, 9], vec![2.0, -1.0]),
        ex(0.0, vec![2], vec![0.3]),
        ex(1.0, vec![9, 12], vec![1.5, 7.0]), // 12 is beyond dim: ignored
    ]
}

#[test]
fn softmax_gradient_matches_finite_differences() {
    let m = SoftmaxRegression { dim: 5, classes: 3 };
    let p: Vec<f32> = (0..m.num_params()).map(|i| (i as f32 * 0.37).sin() * 0.5).collect();
    check_gradient(&m, &p, &dense_batch(5, 3));
}

#[test]
fn mlp_gradient_matches_finite_differences() {
    let m = Mlp {
        dim: 4,
        hidden: 6,
        classes: 3,
    };
    let mut p = m.init_params(7);
    // non-zero biases, so every path of the backward pass is exercised
    for (i, v) in p[24..30].iter_mut().enumerate() {
        *v = 0.1 * i as f32 - 0.2;
    }
    check_gradient(&m, &p, &dense_batch(4, 3));
}

#[test]
fn logreg_gradient_matches_finite_differences() {
    let m = LogisticRegression { dim: 10 };
    let p: Vec<f32> = (0..m.num_params()).map(|i| (i as f32 * 0.7).cos() * 0.4).collect();
    check_gradient(&m, &p, &sparse_batch());
}

#[test]
fn logreg_works_on_touched_keys_only() {
    let m = LogisticRegression { dim: 10 };
    let batch = sparse_batch();
    let keys = m.touched_keys(&batch);
    assert_eq!(keys, vec![1, 2, 4, 9, 10]);
    let full: Vec<f32> = (0..11).map(|i| i as f32 * 0.1 - 0.5).collect();
    let values: Vec<f32> = keys.iter().map(|&k| full[k as usize]).collect();
    let on_keys = m.batch_stats_on_keys(&values, &keys, &batch);
    let whole = m.batch_stats(&full, &batch);
    assert_eq!(on_keys.loss, whole.loss);
    assert_eq!(on_keys.correct, whole.correct);
    let gathered: Vec<f32> = keys.iter().map(|&k| whole.grad[k as usize]).collect();
    assert_eq!(on_keys.grad, gathered);
    // untouched parameters have zero gradient
    for k in [0, 3, 5, 6, 7, 8] {
        assert_eq!(whole.grad[k], 0.0);
    }
    // the worker's loop sees the same through Model
    let model = Model::LogReg { dim: 10 };
    assert_eq!(model.keys(&batch), Some(keys.clone()));
    let (loss, correct, grad) = Learner::loss_and_grad(&model, &values, Some(&keys), &batch);
    assert_eq!((loss, correct, grad), (whole.loss, whole.correct, gathered));
}

#[test]
fn dense_models_touch_every_key() {
    let m = Model::Softmax { dim: 3, classes: 2 };
    let batch = dense_batch(3, 2);
    assert_eq!(m.touched_keys(&batch), (0..8).collect::<Vec<u64>>());
    assert_eq!(m.keys(&batch), None);
    let p: Vec<f32> = (0..8).map(|i| i as f32 * 0.1).collect();
    let keys: Vec<u64> = (0..8).collect();
    assert_eq!(m.batch_stats_on_keys(&p, &keys, &batch), m.batch_stats(&p, &batch));
    // a subset: the provided method scatters and gathers
    let sub = m.batch_stats_on_keys(&p[2..5], &[2, 3, 4], &batch);
    let mut q = vec![0.0; 8];
    q[2..5].copy_from_slice(&p[2..5]);
    let full = m.batch_stats(&q, &batch);
    assert_eq!(sub.grad, full.grad[2..5].to_vec());
}

#[test]
fn labels_zero_one_and_plus_minus_one_agree() {
    let m = LogisticRegression { dim: 3 };
    let p = vec![0.5, -0.25, 1.0, 0.1];
    let mk = |label: f32| Example {
        label,
        features: Features::Dense(vec![1.0, 2.0, -1.0]),
    };
    assert_eq!(m.batch_stats(&p, &[mk(0.0)]), m.batch_stats(&p, &[mk(-1.0)]));
    assert_eq!(m.batch_stats(&p, &[mk(1.0)]).correct, 0); // z = -1.0 + 0.1 < 0
}

#[test]
fn extreme_logits_stay_finite() {
    let m = SoftmaxRegression { dim: 2, classes: 3 };
    let p = vec![1e4, 0.0, -1e4, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    let e = Example {
        label: 1.0,
        features: Features::Dense(vec![1.0, 1.0]),
    };
    let (loss, g) = m.loss_and_grad(&p, std::slice::from_ref(&e));
    // z = [1e4, -1e4, 0]: loss = logsumexp(z) - z[1] = 2e4
    assert!((loss - 2e4).abs() < 1.0, "{loss}");
    assert!(g.iter().all(|v| v.is_finite()));
    let l = LogisticRegression { dim: 1 };
    let e = Example {
        label: 0.0,
        features: Features::Dense(vec![1.0]),
    };
    let (loss, g) = l.loss_and_grad(&[1000.0, 0.0], &[e]);
    assert!((loss - 1000.0).abs() < 1e-3 && g == vec![1.0, 1.0], "{loss} {g:?}");
}

#[test]
fn predictions_are_distributions() {
    let models = [
        Model::Softmax { dim: 4, classes: 3 },
        Model::Mlp {
            dim: 4,
            hidden: 5,
            classes: 3,
        },
        Model::LogReg { dim: 4 },
    ];
    for m in models {
        let p = m.init(1);
        assert_eq!(p.len(), m.num_params());
        for e in dense_batch(4, 3) {
            let out = FlatModel::predict(&m, &p, &e.features);
            assert_eq!(out.len(), m.num_outputs());
            assert!((out.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            assert_eq!(out, m.predict(&p, &e));
        }
        assert_eq!(m.predict_batch(&p, &dense_batch(4, 3)).len(), 7);
    }
}

#[test]
fn initialisation_is_deterministic_in_the_seed() {
    let m = Mlp {
        dim: 30,
        hidden: 20,
        classes: 4,
    };
    assert_eq!(m.init_params(5), m.init_params(5));
    assert_ne!(m.init_params(5), m.init_params(6));
    let p = m.init_params(5);
    let w1 = &p[..600];
    let bound = (6.0f32 / 30.0).sqrt();
    assert!(w1.iter().all(|v| v.abs() <= bound) && w1.iter().any(|v| v.abs() > bound * 0.9));
    assert!(p[600..620].iter().all(|&b| b == 0.0));
    assert_eq!(SoftmaxRegression { dim: 3, classes: 2 }.init_params(1), vec![0.0; 8]);
}

#[test]
fn large_batches_split_across_threads_give_the_mean() {
    let m = Mlp {
        dim: 20,
        hidden: 16,
        classes: 3,
    };
    let p = m.init_params(2);
    let batch: Vec<Example> = (0..600)
        .map(|i| Example {
            label: (i % 3) as f32,
            features: Features::Dense((0..20).map(|j| ((i * 31 + j * 7) % 13) as f32 / 13.0).collect()),
        })
        .collect();
    let whole = m.batch_stats(&p, &batch);
    // the mean of per-example results, computed one at a time
    let mut loss = 0.0f64;
    let mut grad = vec![0.0f64; p.len()];
    let mut correct = 0;
    for e in &batch {
        let s = m.batch_stats(&p, std::slice::from_ref(e));
        loss += f64::from(s.loss);
        correct += s.correct;
        grad.iter_mut().zip(&s.grad).for_each(|(a, &b)| *a += f64::from(b));
    }
    assert_eq!(whole.correct, correct);
    assert!((f64::from(whole.loss) - loss / 600.0).abs() < 1e-4);
    for (a, b) in whole.grad.iter().zip(&grad) {
        assert!((f64::from(*a) - b / 600.0).abs() < 1e-4);
    }
    assert_eq!(m.batch_stats(&p, &batch), whole, "deterministic");
}

#[test]
fn training_a_separable_problem_reaches_full_accuracy() {
    let m = SoftmaxRegression { dim: 2, classes: 2 };
    let batch: Vec<Example> = (0..40)
        .map(|i| Example {
            label: (i % 2) as f32,
            features: Features::Dense(vec![if i % 2 == 0 { -1.0 } else { 1.0 }, i as f32 / 40.0]),
        })
        .collect();
    let mut p = m.init_params(1);
    let sgd = Sgd::new(0.5).with_momentum(0.5);
    let mut v = vec![0.0; sgd.state_len(p.len())];
    for _ in 0..50 {
        let (_, g) = m.loss_and_grad(&p, &batch);
        sgd.step(&mut p, &g, &mut v);
    }
    let s = m.batch_stats(&p, &batch);
    assert_eq!(s.correct, 40);
    assert!(s.loss < 0.1, "{}", s.loss);
}

#[test]
fn empty_batch_is_zero_loss_and_gradient() {
    let m = Model::Mlp {
        dim: 3,
        hidden: 2,
        classes: 2,
    };
    let s = m.batch_stats(&m.init(0), &[]);
    assert_eq!((s.loss, s.correct, s.grad), (0.0, 0, vec![0.0; m.num_params()]));
}

#[test]
fn model_validation_and_names() {
    assert!(Model::Softmax { dim: 784, classes: 10 }.validate().is_ok());
    assert!(Model::Softmax { dim: 0, classes: 10 }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("dimension"));
    assert!(Model::Softmax { dim: 3, classes: 1 }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("two classes"));
    let no_hidden = Model::Mlp {
        dim: 3,
        hidden: 0,
        classes: 2,
    };
    assert!(no_hidden.validate().unwrap_err().to_string().contains("hidden"));
    assert!(Model::LogReg { dim: usize::MAX }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("2^32"));
    let mlp = Model::Mlp {
        dim: 784,
        hidden: 128,
        classes: 10,
    };
    assert_eq!(mlp.name(), "mlp(784→128→10)");
    assert_eq!(mlp.num_params(), 784 * 128 + 128 + 128 * 10 + 10);
    assert!(Model::LogReg { dim: 5 }.is_sparse() && !mlp.is_sparse());
}

mod files {
    use super::*;
    use std::path::Path;

    fn mlp() -> (Model, Vec<f32>) {
        let m = Model::Mlp {
            dim: 3,
            hidden: 2,
            classes: 2,
        };
        let p = m.init(3);
        (m, p)
    }

    #[test]
    fn save_and_load_round_trip() {
        let d = tempfile::tempdir().unwrap();
        for (m, p) in [mlp(), (Model::LogReg { dim: 4 }, vec![1.0, -2.0, 0.5, 0.0, 3.0])] {
            let f = d.path().join("m.bin");
            save(&f, &m, &p).unwrap();
            assert_eq!(load(&f).unwrap(), (m, p));
        }
    }

    #[test]
    fn damaged_files_are_clear_errors() {
        let (m, p) = mlp();
        let good = encode(&m, &p);
        let at = Path::new("m.bin");
        let err = |b: &[u8]| decode(at, b).unwrap_err();

        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(matches!(err(&flipped), ModelFileError::Corrupt { .. }));
        assert!(err(&flipped)
            .to_string()
            .contains("m.bin: corrupt psrs model file (CRC mismatch)"));

        assert!(matches!(err(&good[..good.len() - 3]), ModelFileError::Truncated { .. }));
        assert!(matches!(err(&good[..10]), ModelFileError::Truncated { .. }));
        assert!(matches!(err(b"junk"), ModelFileError::NotAModelFile { .. }));
        assert!(err(b"").to_string().contains("not a psrs model file"));

        let mut v2 = good.clone();
        v2[8] = 2;
        assert!(err(&v2).to_string().contains("format version 2"));

        // a well-formed file whose content is inconsistent
        let body = bincode::DefaultOptions::new().serialize(&(m, vec![1.0f32; 3])).unwrap();
        assert!(err(&with_body(&body))
            .to_string()
            .contains("3 parameters for mlp(3→2→2)"));
        let bad_model = Model::Softmax { dim: 2, classes: 0 };
        let body = bincode::DefaultOptions::new()
            .serialize(&(bad_model, Vec::<f32>::new()))
            .unwrap();
        assert!(err(&with_body(&body)).to_string().contains("two classes"));
        assert!(matches!(err(&with_body(&[7, 7, 7])), ModelFileError::Malformed { .. }));

        let missing = load(Path::new("/nonexistent/m.bin")).unwrap_err();
        assert!(matches!(missing, ModelFileError::Io { .. }));
        assert!(missing.to_string().starts_with("/nonexistent/m.bin: "));
    }

    #[test]
    fn random_damage_never_panics() {
        let (m, p) = mlp();
        let good = encode(&m, &p);
        let mut s = 0x1234_5678u64;
        for _ in 0..2000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let mut b = good.clone();
            let i = (s % b.len() as u64) as usize;
            b[i] = (s >> 32) as u8;
            let b = &b[..b.len() - ((s >> 40) % 3) as usize];
            let _ = decode(Path::new("x"), b);
            // and with the checksum recomputed, so the body decoder sees the damage
            let _ = decode(Path::new("x"), &with_body(&b[24.min(b.len())..]));
        }
    }

    use bincode::Options;

    /// A valid header around `body`.
    fn with_body(body: &[u8]) -> Vec<u8> {
        let mut out = b"PSRSMODL".to_vec();
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
        out.extend_from_slice(body);
        out
    }
}
