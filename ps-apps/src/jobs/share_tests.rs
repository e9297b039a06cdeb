//! The split over time, driven with injected time: the average split meets the ideal
//! one, a noisy ideal near a whole split moves nobody, large changes jump at once.

use super::*;

fn shares(v: &[f64]) -> BTreeMap<u32, f64> {
    v.iter().enumerate().map(|(i, &x)| (i as u32 + 1, x)).collect()
}

/// Largest-remainder rounding (what a fair-time mode hands over as its whole split).
fn round(ideal: &BTreeMap<u32, f64>, n: usize) -> BTreeMap<u32, usize> {
    let s: Vec<f64> = ideal.values().copied().collect();
    let c = crate::jobs::fairtime::local(&s, n);
    ideal.keys().copied().zip(c).collect()
}

/// Runs `secs` seconds of reallocations every `step_ms`, with the ideal `at(t_ms)`;
/// returns each step's split (job 1's workers first) and the number of moves.
fn run(
    ts: &mut TimeShare<u32>,
    secs: u64,
    step_ms: u64,
    n: usize,
    at: impl Fn(u64) -> Vec<f64>,
) -> (Vec<Vec<usize>>, usize) {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut moves = 0;
    let mut t = 0;
    while t <= secs * 1000 {
        let ideal = shares(&at(t));
        let c: Vec<usize> = ts.update(t, &ideal, n, || round(&ideal, n)).values().copied().collect();
        if out.last().is_some_and(|p| p != &c) {
            moves += 1;
        }
        out.push(c);
        t += step_ms;
    }
    (out, moves)
}

fn mean(v: &[Vec<usize>], job: usize) -> f64 {
    v.iter().map(|c| c[job] as f64).sum::<f64>() / v.len() as f64
}

#[test]
fn a_split_between_whole_ones_alternates_them_in_proportion() {
    let mut ts = TimeShare::new(2.0);
    let (splits, moves) = run(&mut ts, 1000, 1000, 10, |_| vec![4.6, 5.4]);
    assert!(
        splits.iter().all(|c| c == &[5, 5] || c == &[4, 6]),
        "only the two nearest splits"
    );
    let a = mean(&splits, 0);
    assert!((a - 4.6).abs() < 0.02, "job 1 averages {a} workers");
    let at55 = splits.iter().filter(|c| c == &&[5, 5]).count() as f64 / splits.len() as f64;
    assert!((at55 - 0.6).abs() < 0.03, "5 / 5 {at55} of the time");
    // one period is 2H / 0.4 + 2H / 0.6 = 16.7 s: two moves each
    assert!((100..=130).contains(&moves), "{moves} moves in 1000 s");
    // over any 30 s window job 1 is off its ideal by at most 2H worker-seconds
    for w in splits.windows(30) {
        let off = w.iter().map(|c| c[0] as f64 - 4.6).sum::<f64>();
        assert!(off.abs() <= 2.0 * 2.0 + 1.0, "{off} worker-seconds in a window");
    }
    // a larger hysteresis: the same average, fewer moves
    let mut slow = TimeShare::new(6.0);
    let (splits, fewer) = run(&mut slow, 1000, 1000, 10, |_| vec![4.6, 5.4]);
    assert!((mean(&splits, 0) - 4.6).abs() < 0.05);
    assert!(fewer * 2 < moves, "{fewer} vs {moves}");
}

/// An estimate of job 1's share wobbling ±0.2 worker around `center` (of 10).
fn wobble(center: f64) -> impl Fn(u64) -> Vec<f64> {
    move |t: u64| {
        let x = center + 0.2 * ((t as f64 / 1000.0) * 0.9).sin() * ((t as f64 / 1000.0) * 0.37).cos();
        vec![x, 10.0 - x]
    }
}

#[test]
fn an_ideal_wobbling_around_a_whole_split_moves_nobody() {
    // ±0.2 worker around 5 / 5 (a 10 s rate window's noise)
    let wobble = wobble(5.0);
    let mut ts = TimeShare::new(2.0);
    let (splits, moves) = run(&mut ts, 600, 2000, 10, wobble);
    assert_eq!(moves, 0, "{:?}", &splits[..10]);
    assert!(splits.iter().all(|c| c == &[5, 5]));
}

#[test]
fn an_ideal_wobbling_around_the_middle_alternates_slowly_instead_of_flapping() {
    // ±0.2 around 4.5 / 5.5, halfway between 5 / 5 and 4 / 6
    let wobble = wobble(4.5);
    let mut ts = TimeShare::new(2.0);
    let (splits, moves) = run(&mut ts, 600, 2000, 10, &wobble);
    assert!((mean(&splits, 0) - 4.5).abs() < 0.05, "{}", mean(&splits, 0));
    // each split is held at least 2H / 0.7 s (the fastest a credit can cross 2H)
    let mut run_len = 1;
    for w in splits.windows(2) {
        if w[0] == w[1] {
            run_len += 1;
        } else {
            assert!(run_len >= 3, "a split held for only {run_len} samples of 2 s");
            run_len = 1;
        }
    }
    // rounding each estimate afresh flaps at every crossing of the middle
    let mut flaps = 0;
    let mut last = None;
    for k in 0..=300u64 {
        let ideal = shares(&wobble(k * 2000));
        let c = round(&ideal, 10);
        if last.as_ref().is_some_and(|l| l != &c) {
            flaps += 1;
        }
        last = Some(c);
    }
    assert!(
        flaps > moves * 2,
        "plain rounding moved {flaps} times, the time share {moves}"
    );
}

#[test]
fn a_large_change_a_new_job_or_a_lost_worker_jumps_at_once() {
    let mut ts = TimeShare::new(2.0);
    let ideal = shares(&[5.0, 5.0]);
    assert_eq!(ts.update(0, &ideal, 10, || round(&ideal, 10)), [(1, 5), (2, 5)].into());
    // the costs change: 2.6 / 7.4 is outside 5 / 5's floor and ceiling
    let ideal = shares(&[2.6, 7.4]);
    assert_eq!(
        ts.update(1000, &ideal, 10, || round(&ideal, 10)),
        [(1, 3), (2, 7)].into()
    );
    // a third job
    let ideal = shares(&[2.0, 5.0, 3.0]);
    assert_eq!(
        ts.update(2000, &ideal, 10, || round(&ideal, 10)),
        [(1, 2), (2, 5), (3, 3)].into()
    );
    // a worker died: 9 workers
    let ideal = shares(&[1.8, 4.5, 2.7]);
    let c = ts.update(3000, &ideal, 9, || round(&ideal, 9));
    assert_eq!(c.values().sum::<usize>(), 9);
    // the whole split is asked for only when needed
    let c2 = ts.update(4000, &ideal, 9, || panic!("the present split fits"));
    assert_eq!(c, c2);
}

#[test]
fn three_jobs_get_their_shares_on_average() {
    let mut ts = TimeShare::new(2.0);
    let want = [2.5, 3.3, 4.2];
    let (splits, _) = run(&mut ts, 2000, 1000, 10, |_| want.to_vec());
    for (j, w) in want.iter().enumerate() {
        let m = mean(&splits, j);
        assert!((m - w).abs() < 0.05, "job {} averages {m}, ideal {w}", j + 1);
    }
    assert!(splits
        .iter()
        .all(|c| c.iter().sum::<usize>() == 10 && c.iter().all(|&x| x >= 1)));
    // credits stay within ±2H
    for j in 1..=3 {
        assert!(ts.credit(j).abs() <= 4.0 + 1e-9);
    }
}
