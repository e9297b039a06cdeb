//! Tests of a model's range on a server.

use super::*;
use crate::tables::optim::Optimizer;
use crate::tables::spec::tests::spec;
use crate::train::versions::Mode;

/// The spec's model on 2 servers, range `r`, rule `mode`, 2 workers.
fn shard(mode: Mode, r: usize) -> (TableShard, KeySpace) {
    let mut s = spec();
    s.mode = mode;
    s.dense_optimizer = Optimizer::Sgd {
        lr: 1.0,
        momentum: 0.0,
        weight_decay: 0.0,
    };
    s.tables[0].optimizer = Optimizer::Sgd {
        lr: 0.5,
        momentum: 0.0,
        weight_decay: 0.0,
    };
    let block = dense_block(s.dense_len(), 2, r);
    let init: Vec<f32> = block.map(|i| i as f32).collect();
    (TableShard::new(s, r, 2, init, 2).unwrap(), KeySpace::new(2).unwrap())
}

/// A row id of table 0 held by range `r`.
fn row_on(space: &KeySpace, r: usize, skip: usize) -> u64 {
    (0..).filter(|&id| space.row_server(0, id) == r).nth(skip).unwrap()
}

const SYNC: Mode = Mode::Sync {
    grads_per_version: usize::MAX,
    timeout_ms: 0,
};

#[test]
fn dense_blocks_cover_the_parameters() {
    assert_eq!((dense_block(9, 2, 0), dense_block(9, 2, 1)), (0..5, 5..9));
    let (s, _) = shard(SYNC, 1);
    assert_eq!(s.dense(), &[5.0, 6.0, 7.0, 8.0]);
    let mut sp = spec();
    sp.tables.clear();
    let err = TableShard::new(sp, 0, 2, vec![0.0; 4], 1).unwrap_err();
    assert!(matches!(err, TablesError::Misfit(_)));
    assert_eq!(
        err.to_string(),
        "server 0's block of the dense parameters holds 5 values, 4 were sent"
    );
}

#[test]
fn sync_applies_the_mean_of_both_workers_to_the_block_and_the_rows() {
    let (mut s, ks) = shard(SYNC, 0);
    let (a, b) = (row_on(&ks, 0, 0), row_on(&ks, 0, 1));
    let (ka, kb) = (ks.row_key(0, a), ks.row_key(0, b));
    let keys_a = [ka.min(kb), ka.max(kb)];
    let before = s.rows(&ks, &keys_a).unwrap();
    // worker 9: the block and both rows
    let mut keys = vec![ks.dense_key(0)];
    keys.extend(keys_a);
    let mut vals = vec![1.0; 5];
    vals.extend([2.0; 4]);
    vals.extend([4.0; 4]);
    let out = s.push(&ks, 9, 0, &keys, &[5, 4, 4], &vals, 0).unwrap();
    assert_eq!(out, PushOutcome::Accepted { applied: false });
    assert!(s.rule.pull_must_wait(Some(0)));
    assert_eq!(s.stored_rows(), vec![0], "nothing applied yet");
    // worker 11: the block only
    let out = s.push(&ks, 11, 0, &keys[..1], &[], &[3.0; 5], 1).unwrap();
    assert_eq!(out, PushOutcome::Accepted { applied: true });
    assert_eq!(s.version(), 1);
    // mean block gradient 2, lr 1
    assert_eq!(s.dense(), &[-2.0, -1.0, 0.0, 1.0, 2.0]);
    // the rows' mean gradients are 1 and 2 (one worker of two), lr 0.5
    let after = s.rows(&ks, &keys_a).unwrap();
    for i in 0..4 {
        assert!((after[i] - (before[i] - 0.5)).abs() < 1e-6);
        assert!((after[4 + i] - (before[4 + i] - 1.0)).abs() < 1e-6);
    }
    assert_eq!(s.stored_rows(), vec![2]);
}

#[test]
fn async_applies_each_push_at_once() {
    let (mut s, ks) = shard(Mode::Async, 1);
    let k = ks.dense_key(1);
    for w in [9, 11, 9] {
        let out = s.push(&ks, w, 0, &[k], &[], &[1.0; 4], 0).unwrap();
        assert_eq!(out, PushOutcome::Accepted { applied: true });
    }
    assert_eq!((s.version(), s.dense()), (3, &[2.0, 3.0, 4.0, 5.0][..]));
}

#[test]
fn bounded_rejects_gradients_older_than_the_staleness_and_changes_nothing() {
    let (mut s, ks) = shard(Mode::Bounded { staleness: 1 }, 1);
    let k = ks.dense_key(1);
    let row = ks.row_key(0, row_on(&ks, 1, 0));
    for (w, v) in [(9, 0), (11, 0)] {
        let out = s.push(&ks, w, v, &[k], &[], &[1.0; 4], 0).unwrap();
        assert_eq!(out, PushOutcome::Accepted { applied: true });
    }
    // computed on version 0, two versions ago: too stale, neither block nor row touched
    let out = s.push(&ks, 9, 0, &[k, row], &[4, 4], &[1.0; 8], 0).unwrap();
    assert_eq!(out, PushOutcome::Rejected { current: 2 });
    assert_eq!((s.version(), s.dense()), (2, &[3.0, 4.0, 5.0, 6.0][..]));
    assert_eq!(s.stored_rows(), vec![0]);
    // one version old: within the bound
    let out = s.push(&ks, 9, 1, &[k, row], &[4, 4], &[1.0; 8], 0).unwrap();
    assert_eq!(out, PushOutcome::Accepted { applied: true });
    assert_eq!((s.version(), s.dense()), (3, &[2.0, 3.0, 4.0, 5.0][..]));
    assert_eq!(s.stored_rows(), vec![1]);
}

#[test]
fn a_malformed_push_changes_nothing() {
    let (mut s, ks) = shard(SYNC, 0);
    let dk = ks.dense_key(0);
    let mine = ks.row_key(0, row_on(&ks, 0, 0));
    // in range 0, but the row hashes to server 1
    let theirs = dk + 1 + row_on(&ks, 1, 0);
    // keys, lengths, values, what the refusal says
    type Case = (Vec<u64>, Vec<i32>, Vec<f32>, &'static str);
    let cases: Vec<Case> = vec![
        (vec![dk], vec![], vec![1.0; 4], "key"),
        (vec![dk, mine], vec![5, 4], vec![1.0; 8], "fewer"),
        (vec![dk, mine], vec![5, 3], vec![1.0; 8], "3 values, 4 expected"),
        (vec![dk, mine], vec![], vec![1.0; 9], "lengths"),
        (vec![theirs], vec![4], vec![1.0; 4], "belongs to server 1"),
        (
            vec![ks.row_key(1, (0..).find(|&id| ks.row_server(1, id) == 0).unwrap())],
            vec![4],
            vec![1.0; 4],
            "not declared",
        ),
        (vec![dk], vec![5], vec![1.0; 6], "lengths add up"),
    ];
    for (keys, lens, vals, why) in cases {
        let err = s.push(&ks, 9, 0, &keys, &lens, &vals, 0).unwrap_err().to_string();
        assert!(err.contains(why), "{err} (wanted {why})");
    }
    // none of them counted worker 9 for version 0
    s.push(&ks, 9, 0, &[dk], &[], &[1.0; 5], 0).unwrap();
    s.push(&ks, 11, 0, &[dk], &[], &[1.0; 5], 0).unwrap();
    assert_eq!(s.version(), 1);
    assert_eq!(s.dense(), &[-1.0, 0.0, 1.0, 2.0, 3.0]);
    let huge = spec().tables[0].rows;
    let past = (huge..).find(|&id| id < 1 << 40 && ks.row_server(0, id) == 0).unwrap();
    let err = s.rows(&ks, &[ks.row_key(0, past)]).unwrap_err().to_string();
    assert!(err.contains("not below num_embeddings"), "{err}");
    assert!(s.rows(&ks, &[dk]).unwrap_err().to_string().contains("dense block"));
}

#[test]
fn optimizer_state_survives_a_copy() {
    // Adam on both: a copy taken midway (as a checkpoint or a replica's copy) trains on
    // exactly like the original
    let mut sp = spec();
    sp.mode = Mode::Async;
    sp.dense_optimizer = Optimizer::Adam {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
    };
    sp.tables[0].optimizer = sp.dense_optimizer;
    let ks = KeySpace::new(1).unwrap();
    let mut a = TableShard::new(sp, 0, 1, vec![0.5; 9], 1).unwrap();
    let rk = ks.row_key(0, 77);
    let keys = [ks.dense_key(0), rk];
    let step = |s: &mut TableShard, i: usize| {
        let g: Vec<f32> = (0..13).map(|j| ((i * 7 + j) % 5) as f32 - 2.0).collect();
        s.push(&ks, 9, 0, &keys, &[9, 4], &g, 0).unwrap();
    };
    for i in 0..3 {
        step(&mut a, i);
    }
    let bytes = bincode::serialize(&a).unwrap();
    let mut b: TableShard = bincode::deserialize(&bytes).unwrap();
    let mut fresh = TableShard::new(a.spec().clone(), 0, 1, a.dense().to_vec(), 1).unwrap();
    for i in 3..6 {
        step(&mut a, i);
        step(&mut b, i);
    }
    assert_eq!(a.dense(), b.dense());
    assert_eq!(a.rows(&ks, &[rk]).unwrap(), b.rows(&ks, &[rk]).unwrap());
    assert_eq!(a.version(), 6);
    // without the moments (a shard started over from the values) it would differ
    for i in 3..6 {
        step(&mut fresh, i);
    }
    assert_ne!(a.dense(), fresh.dense());
}

#[test]
fn fp16_tables_take_and_answer_rows_as_float16_pairs_and_dump_their_rows() {
    let mut sp = spec();
    sp.mode = Mode::Async;
    sp.tables[0].fp16_wire = true;
    sp.tables[0].optimizer = Optimizer::Sgd {
        lr: 1.0,
        momentum: 0.0,
        weight_decay: 0.0,
    };
    let ks = KeySpace::new(1).unwrap();
    let mut s = TableShard::new(sp, 0, 1, vec![0.0; 9], 1).unwrap();
    let (r1, r2) = (ks.row_key(0, 5), ks.row_key(0, 9));
    let before = s.rows(&ks, &[r1, r2]).unwrap();
    // a row of 4 travels as 2 words: 4 words for two rows after the block of 9
    let mut vals = vec![0.0; 9];
    crate::tables::halves::pack(&[0.5, -0.25, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0], 4, &mut vals);
    let err = s.push(&ks, 9, 0, &[ks.dense_key(0), r1, r2], &[9, 4, 4], &vals, 0);
    assert!(err.unwrap_err().to_string().contains("4 values, 2 expected"));
    s.push(&ks, 9, 0, &[ks.dense_key(0), r1, r2], &[9, 2, 2], &vals, 0)
        .unwrap();
    let after = s.rows(&ks, &[r1, r2]).unwrap();
    let want: Vec<f32> = before
        .iter()
        .zip([0.5, -0.25, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0])
        .map(|(b, g)| b - g)
        .collect();
    assert_eq!(after, want);
    // answered as float16 pairs: the stored values at half precision
    let wire = s.rows_wire(&ks, &[r1, r2]).unwrap();
    let mut back = vec![0.0; 8];
    assert!(crate::tables::halves::unpack(&wire, 4, &mut back));
    for (a, b) in after.iter().zip(&back) {
        assert!((a - b).abs() <= a.abs() / 1024.0 + 1e-7, "{a} {b}");
    }
    // the stored rows, page by page
    let (ids, rows, next) = s.dump(0, 0, 1).unwrap();
    assert_eq!((ids.len(), rows.len(), next), (1, 4, Some(1)));
    let (ids2, _, next) = s.dump(0, 1, 10).unwrap();
    assert_eq!(next, None);
    let mut all = [ids[0], ids2[0]];
    all.sort_unstable();
    assert_eq!(all, [5, 9]);
    assert!(s.dump(3, 0, 1).is_err(), "no table 3");
}

#[test]
fn a_backup_follows_its_primarys_versions_rows_included() {
    let mode = Mode::Sync {
        grads_per_version: 2,
        timeout_ms: 100,
    };
    let (mut primary, ks) = shard(mode, 0);
    let (mut backup, _) = shard(mode, 0);
    let row = ks.row_key(0, row_on(&ks, 0, 0));
    let keys = [ks.dense_key(0), row];
    let mut now = 0;
    for round in 0..12u64 {
        // one worker only every third round: the primary applies it on its timeout
        let workers: &[i32] = if round % 3 == 0 { &[9] } else { &[9, 11] };
        let mut forwards = Vec::new();
        for &w in workers {
            let v = primary.version();
            let mut vals = vec![w as f32 * 0.1; 5];
            vals.extend([round as f32 * 0.01 + 0.5; 4]);
            let out = primary.push(&ks, w, v, &keys, &[5, 4], &vals, now).unwrap();
            let answer = PrimaryAnswer {
                taken: matches!(out, PushOutcome::Accepted { .. }),
                version: primary.version(),
            };
            forwards.push((w, v, vals, answer));
            now += 5;
        }
        now += 150;
        primary.tick(now);
        // the backup hears of them later, its own clock past any timeout
        for (w, v, vals, a) in forwards {
            backup.follow(&ks, w, v, (&keys, &[5, 4], &vals), a, now + 500).unwrap();
        }
    }
    // the primary applied the last version on its tick; the backup at the next push,
    // which did not come: its pending version settles the same
    assert!(backup.version() + 1 >= primary.version());
    while backup.rule.collected() > 0 || backup.version() < primary.version() {
        backup.apply_now();
    }
    assert_eq!(backup.version(), primary.version());
    assert_eq!(backup.dense(), primary.dense());
    assert_eq!(backup.rows(&ks, &[row]).unwrap(), primary.rows(&ks, &[row]).unwrap());
}
