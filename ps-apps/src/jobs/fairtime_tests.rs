use super::*;
use proptest::prelude::*;

fn fresh(s: f64, q: f64) -> JobLoad {
    JobLoad {
        total: q,
        elapsed_s: 0.0,
        s_per_query: s,
        remaining: q,
    }
}

#[test]
fn the_seeds_example_local() {
    // ResNet50 2.56 s/query, ALBERT 1.88 s/query, 10 workers: 5.77 / 4.23 -> 6 / 4
    let share: f64 = 10.0 * 2.56 / (2.56 + 1.88);
    assert!((share - 5.77).abs() < 0.005, "{share}");
    assert_eq!(local(&[2.56, 1.88], 10), vec![6, 4]);
    assert_eq!(local(&[1.88, 2.56], 10), vec![4, 6]);
}

#[test]
fn the_seeds_example_global() {
    // both fresh with the same number of queries: rates C/S balance at 6 / 4
    let jobs = [fresh(2.56, 1000.0), fresh(1.88, 1000.0)];
    assert_eq!(global(&jobs, 10), vec![6, 4]);
    let gap = spread(&jobs, &[6, 4]) / jobs[0].qps(6).max(jobs[1].qps(4));
    assert!(gap < 0.1, "relative rate gap {gap}");
}

#[test]
fn local_rounding_and_minimum() {
    assert_eq!(local(&[], 5), Vec::<usize>::new());
    assert_eq!(local(&[1.0, 1.0, 1.0], 10), vec![4, 3, 3], "ties to the earlier job");
    assert_eq!(local(&[100.0, 1.0], 4), vec![3, 1], "every job keeps one worker");
    assert_eq!(local(&[1.0, 1.0, 1.0], 2), vec![1, 1, 0], "fewer workers than jobs");
    assert_eq!(
        local(&[f64::NAN, 2.0, 0.0], 6),
        vec![2, 2, 2],
        "unknown rates take the mean"
    );
    assert_eq!(local(&[3.0], 0), vec![0]);
}

#[test]
fn global_accounts_for_elapsed_and_remaining() {
    // job 0 is nearly done at about 10 queries/s whatever it gets; the fresh job
    // reaches that with 9 workers (rate C / S)
    let done_soon = JobLoad {
        total: 1000.0,
        elapsed_s: 100.0,
        s_per_query: 1.0,
        remaining: 1.0,
    };
    let c = global(&[done_soon, fresh(1.0, 100.0)], 10);
    assert_eq!(c, vec![1, 9]);
    assert_eq!(global(&[], 4), Vec::<usize>::new());
    assert_eq!(global(&[fresh(1.0, 10.0)], 3), vec![3]);
}

fn brute(jobs: &[JobLoad], n: usize) -> f64 {
    fn rec(jobs: &[JobLoad], n: usize, acc: &mut Vec<usize>, best: &mut f64) {
        if acc.len() == jobs.len() - 1 {
            acc.push(n);
            *best = best.min(spread(jobs, acc));
            acc.pop();
            return;
        }
        for c in 0..=n {
            acc.push(c);
            rec(jobs, n - c, acc, best);
            acc.pop();
        }
    }
    let mut best = f64::INFINITY;
    rec(jobs, n, &mut Vec::new(), &mut best);
    best
}

proptest! {
    #[test]
    fn global_is_optimal(
        raw in prop::collection::vec((1u32..50, 0u32..30, 1u32..40, 0u32..50), 1..4),
        n in 0usize..9,
    ) {
        let jobs: Vec<JobLoad> = raw
            .iter()
            .map(|&(q, e, s, r)| JobLoad {
                total: q as f64 + r as f64,
                elapsed_s: e as f64,
                s_per_query: s as f64 / 10.0,
                remaining: r as f64,
            })
            .collect();
        let c = global(&jobs, n);
        prop_assert_eq!(c.iter().sum::<usize>(), n);
        prop_assert!((spread(&jobs, &c) - brute(&jobs, n)).abs() < 1e-9);
    }

    #[test]
    fn local_sums_to_n(s in prop::collection::vec(0.01f64..10.0, 1..6), n in 0usize..40) {
        let c = local(&s, n);
        prop_assert_eq!(c.iter().sum::<usize>(), n);
        for (i, &x) in c.iter().enumerate() {
            let share = n as f64 * s[i] / s.iter().sum::<f64>();
            if n >= s.len() {
                prop_assert!(x >= 1);
            }
            prop_assert!((x as f64 - share).abs() < 1.0 + s.len() as f64, "{} vs {}", x, share);
        }
    }
}

#[test]
fn the_real_valued_ideals() {
    let l = local_ideal(&[2.56, 1.88], 10);
    assert!((l[0] - 5.766).abs() < 0.001 && (l[1] - 4.234).abs() < 0.001, "{l:?}");
    assert_eq!(local_ideal(&[f64::NAN, 2.0], 4), vec![2.0, 2.0]);
    // fresh jobs: rates C/S equal, so the ideal is local mode's
    let g = global_ideal(&[fresh(2.56, 1000.0), fresh(1.88, 1000.0)], 10);
    assert!((g[0] - l[0]).abs() < 1e-6 && (g[1] - l[1]).abs() < 1e-6, "{g:?}");
    // older jobs: the one that had its queries early needs fewer workers now, and the
    // expected rates under the ideal are equal
    let jobs = [
        JobLoad {
            total: 1000.0,
            elapsed_s: 300.0,
            s_per_query: 2.0,
            remaining: 400.0,
        },
        JobLoad {
            total: 1000.0,
            elapsed_s: 60.0,
            s_per_query: 2.0,
            remaining: 900.0,
        },
    ];
    let g = global_ideal(&jobs, 10);
    assert!((g.iter().sum::<f64>() - 10.0).abs() < 1e-9, "{g:?}");
    let rate = |j: &JobLoad, c: f64| j.total / (j.elapsed_s + j.s_per_query * j.remaining / c);
    assert!((rate(&jobs[0], g[0]) - rate(&jobs[1], g[1])).abs() < 1e-6, "{g:?}");
    // a job with nothing left needs no worker
    let done = JobLoad {
        remaining: 0.0,
        ..jobs[0]
    };
    assert_eq!(global_ideal(&[done, jobs[1]], 10), vec![0.0, 10.0]);
    assert_eq!(global_ideal(&[], 10), Vec::<f64>::new());
}
