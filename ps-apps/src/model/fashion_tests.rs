//! Training on Fashion-MNIST in one process (no network): minibatch SGD with the
//! models and optimizer of this module, reading the IDX files through the RecordIO
//! converter. Skipped, with a message, when the dataset is not installed
//! (`apt-get install dataset-fashion-mnist`).

use super::math::argmax;
use super::*;
use crate::model::metrics;
use crate::recordio::{convert_idx, read_all, Compressor, Example, Features};
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

const DATA: &str = "/usr/share/datasets/fashion-mnist";

/// (train, test) examples, loaded once per test binary; fails the test (never passes it
/// silently) when Fashion-MNIST is not installed.
fn dataset() -> &'static (Vec<Example>, Vec<Example>) {
    static DATA_SET: OnceLock<Option<(Vec<Example>, Vec<Example>)>> = OnceLock::new();
    DATA_SET
        .get_or_init(|| {
            let dir = Path::new(DATA);
            let files =
                ["train", "t10k"].map(|s| [format!("{s}-images-idx3-ubyte.gz"), format!("{s}-labels-idx1-ubyte.gz")]);
            if !files.iter().flatten().all(|f| dir.join(f).exists()) {
                return None;
            }
            let t = Instant::now();
            let tmp = tempfile::tempdir().expect("a temporary directory");
            let load = |split: &str| -> Vec<Example> {
                let out = tmp.path().join(format!("{split}.rio"));
                convert_idx(
                    &dir.join(format!("{split}-images-idx3-ubyte.gz")),
                    &dir.join(format!("{split}-labels-idx1-ubyte.gz")),
                    &out,
                    10_000,
                    Compressor::None,
                    &mut |_, _| {},
                )
                .expect("Fashion-MNIST converts");
                let records = read_all(&out).expect("the converted file reads back");
                records
                    .iter()
                    .map(|r| Example::decode(r).expect("a valid example"))
                    .collect()
            };
            let sets = (load("train"), load("t10k"));
            eprintln!("Fashion-MNIST loaded in {:.1} s", t.elapsed().as_secs_f64());
            Some(sets)
        })
        .as_ref()
        .unwrap_or_else(|| {
            panic!(
                "Fashion-MNIST is not in {DATA}: apt-get install dataset-fashion-mnist (scripts/install-deps.sh does)"
            )
        })
}

/// The heavy tests take both cores each: run them one at a time.
fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// How to train.
#[derive(Clone, Copy, Debug)]
struct Plan {
    sgd: Sgd,
    batch: usize,
    epochs: u32,
    /// Learning-rate decay per epoch ([`Sgd::decayed`]).
    decay: f32,
}

/// Test-set accuracy of `params`.
fn test_accuracy(m: &impl FlatModel, params: &[f32], test: &[Example]) -> f64 {
    let pred: Vec<usize> = m.predict_batch(params, test).iter().map(|p| argmax(p)).collect();
    let labels: Vec<usize> = test.iter().map(|e| e.label as usize).collect();
    metrics::accuracy(&pred, &labels)
}

/// Trains on `train` from `init_params(seed)` with minibatch SGD; returns the
/// parameters and the accuracy on `test` after each epoch.
fn train(m: &impl FlatModel, plan: Plan, seed: u64, train: &[Example], test: &[Example]) -> (Vec<f32>, Vec<f64>) {
    let t = Instant::now();
    let mut data = train.to_vec();
    let mut params = m.init_params(seed);
    let mut state = vec![0.0; plan.sgd.state_len(params.len())];
    let mut accuracies = Vec::new();
    for epoch in 0..plan.epochs {
        let sgd = plan.sgd.decayed(plan.decay, epoch);
        shuffle(&mut data, seed.wrapping_add(u64::from(epoch)));
        let mut loss = 0.0f64;
        for batch in data.chunks(plan.batch) {
            let (l, g) = m.loss_and_grad(&params, batch);
            loss += f64::from(l) * batch.len() as f64;
            sgd.step(&mut params, &g, &mut state);
        }
        let acc = test_accuracy(m, &params, test);
        eprintln!(
            "epoch {}: train loss {:.4}, test accuracy {acc:.4} ({:.1} s)",
            epoch + 1,
            loss / data.len() as f64,
            t.elapsed().as_secs_f64()
        );
        accuracies.push(acc);
    }
    (params, accuracies)
}

const DIM: usize = 784;
const CLASSES: usize = 10;

/// About 10 s in the test profile (0.1 s per epoch in release).
#[test]
fn softmax_regression_reaches_84_percent() {
    let (tr, te) = dataset();
    let _x = exclusive();
    let plan = Plan {
        sgd: Sgd::new(0.05).with_momentum(0.9),
        batch: 128,
        epochs: 20,
        decay: 0.85,
    };
    let m = SoftmaxRegression {
        dim: DIM,
        classes: CLASSES,
    };
    let (_, acc) = train(&m, plan, 1, tr, te);
    let last = *acc.last().unwrap();
    assert!(last >= 0.84, "softmax test accuracy {last:.4} < 0.84 ({plan:?})");
}

/// About 20 s in the test profile (1 s per epoch in release).
#[test]
fn mlp_reaches_87_percent() {
    let (tr, te) = dataset();
    let _x = exclusive();
    let plan = Plan {
        sgd: Sgd::new(0.02).with_momentum(0.9),
        batch: 64,
        epochs: 8,
        decay: 0.8,
    };
    let m = Mlp {
        dim: DIM,
        hidden: 128,
        classes: CLASSES,
    };
    let (params, acc) = train(&m, plan, 1, tr, te);
    let last = *acc.last().unwrap();
    assert!(last >= 0.87, "MLP test accuracy {last:.4} < 0.87 ({plan:?})");
    // the trained model survives a model file
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("mlp.model");
    let spec = Model::Mlp {
        dim: DIM,
        hidden: 128,
        classes: CLASSES,
    };
    save(&f, &spec, &params).unwrap();
    let (loaded, p) = load(&f).unwrap();
    assert_eq!(test_accuracy(&loaded, &p, te), last);
}

/// Footwear (sandal, sneaker, ankle boot) against the rest, as sparse examples (the
/// non-zero pixels), trained the way a worker and servers do it: the worker works on
/// the touched keys only and the update is applied to those keys only.
#[test]
fn sparse_logistic_regression_separates_footwear() {
    let (tr, te) = dataset();
    let _x = exclusive();
    let sparse = |set: &[Example]| -> Vec<Example> {
        set.iter()
            .map(|e| {
                let Features::Dense(x) = &e.features else {
                    unreachable!("IDX images are dense")
                };
                let nz: Vec<u32> = (0..x.len() as u32).filter(|&i| x[i as usize] != 0.0).collect();
                Example {
                    label: if [5.0, 7.0, 9.0].contains(&e.label) { 1.0 } else { -1.0 },
                    features: Features::Sparse {
                        val: nz.iter().map(|&i| x[i as usize]).collect(),
                        idx: nz,
                    },
                }
            })
            .collect()
    };
    let (mut tr, te) = (sparse(&tr[..20_000]), sparse(te));
    let m = LogisticRegression { dim: DIM };
    let sgd = Sgd::new(0.5).with_momentum(0.5);
    let mut params = m.init_params(0);
    let mut velocity = vec![0.0; sgd.state_len(params.len())];
    shuffle(&mut tr, 3);
    let mut exchanged = 0;
    for batch in tr.chunks(32) {
        let keys = m.touched_keys(batch);
        exchanged += keys.len();
        let pulled: Vec<f32> = keys.iter().map(|&k| params[k as usize]).collect();
        let (_, grad) = m.loss_and_grad_on_keys(&pulled, &keys, batch);
        let idx: Vec<usize> = keys.iter().map(|&k| k as usize).collect();
        sgd.step_sparse(&mut params, &idx, &grad, &mut velocity);
    }
    let batches = tr.len().div_ceil(32);
    let share = exchanged as f64 / (batches * params.len()) as f64;
    eprintln!(
        "footwear: a minibatch exchanged {:.0}% of the keys on average",
        100.0 * share
    );
    assert!(share < 1.0);
    let p: Vec<f32> = m.predict_batch(&params, &te).iter().map(|d| d[1]).collect();
    let y: Vec<bool> = te.iter().map(|e| e.label > 0.0).collect();
    let auc = metrics::auc(&p, &y);
    let counts = metrics::BinaryCounts::at_threshold(&p, &y, 0.5);
    eprintln!("footwear: AUC {auc:.4}, accuracy {:.4}, {counts:?}", counts.accuracy());
    assert!(auc > 0.995 && counts.accuracy() > 0.99, "AUC {auc}, {counts:?}");
}

/// Hyperparameter search: `PSRS_SWEEP="model:lr:momentum:batch:epochs:decay;..."`
/// with model `softmax` or `mlp<hidden>`; prints the test accuracy after every
/// epoch. Run as `PSRS_SWEEP=mlp128:0.02:0.9:64:8:0.8 cargo test --release -p ps-apps
/// --lib -- model::fashion_tests::sweep --ignored --nocapture`.
#[test]
#[ignore = "a tool: run with --release --ignored and PSRS_SWEEP set"]
fn sweep() {
    let (tr, te) = dataset();
    let spec = std::env::var("PSRS_SWEEP").unwrap_or_default();
    for run in spec.split(';').filter(|s| !s.is_empty()) {
        let f: Vec<&str> = run.split(':').collect();
        let num = |i: usize| f[i].parse::<f32>().expect("a number");
        let plan = Plan {
            sgd: Sgd::new(num(1)).with_momentum(num(2)),
            batch: num(3) as usize,
            epochs: num(4) as u32,
            decay: num(5),
        };
        eprintln!("== {run}");
        let t = Instant::now();
        if let Some(h) = f[0].strip_prefix("mlp") {
            let hidden = h.parse().expect("mlp<hidden>");
            let m = Mlp {
                dim: DIM,
                hidden,
                classes: CLASSES,
            };
            train(&m, plan, 1, tr, te);
        } else {
            train(
                &SoftmaxRegression {
                    dim: DIM,
                    classes: CLASSES,
                },
                plan,
                1,
                tr,
                te,
            );
        }
        eprintln!("== {run}: {:.1} s", t.elapsed().as_secs_f64());
    }
}
