//! IDunno's fair-time scheduler as pure functions: how many of the `n` workers
//! each running job gets.
//!
//! - **Local** mode: job i gets `n·S_i / ΣS_j` workers, `S_i` its measured seconds per
//!   query, rounded to whole workers by largest remainder (ties to the earlier job), and
//!   every job at least one worker while there are enough.
//! - **Global** mode: counts `C_1..C_m` (`ΣC_i = n`) minimizing the largest pairwise
//!   difference of the expected query rates `qps_i = Q_i / (e_i + S_i·R_i/C_i)` (`Q_i`
//!   queries in all, `e_i` seconds elapsed, `R_i` queries remaining). For a fixed floor
//!   `L` (a rate every job must reach) a dynamic programme over jobs × workers used
//!   (O(m·n²)) finds the smallest possible largest rate; the floors tried are the rates
//!   some job reaches with some count, so the result is the exact optimum
//!   (O(m·n) floors, each O(m·n²)).
//!
//! Each mode also has its real-valued ideal ([`local_ideal`], [`global_ideal`]: the
//! shares that make the jobs' rates equal), which [`super::share::TimeShare`] follows
//! over time with whole workers.

/// What global mode knows of a job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobLoad {
    /// Queries in all (`Q_i`).
    pub total: f64,
    /// Seconds since the job started (`e_i`).
    pub elapsed_s: f64,
    /// Seconds per query (`S_i`).
    pub s_per_query: f64,
    /// Queries not finished yet (`R_i`).
    pub remaining: f64,
}

impl JobLoad {
    /// The expected query rate with `c` workers: `Q / (e + S·R/c)`; with no worker and
    /// work remaining it is 0.
    pub fn qps(&self, c: usize) -> f64 {
        if self.remaining <= 0.0 {
            return if self.elapsed_s > 0.0 {
                self.total / self.elapsed_s
            } else {
                0.0
            };
        }
        if c == 0 {
            return 0.0;
        }
        let t = self.elapsed_s + self.s_per_query * self.remaining / c as f64;
        if t > 0.0 {
            self.total / t
        } else {
            0.0
        }
    }
}

/// `s_per_query` with non-positive or non-finite figures replaced by the mean of the
/// others (1 if none is known).
fn filled(s_per_query: &[f64]) -> Vec<f64> {
    let known: Vec<f64> = s_per_query
        .iter()
        .copied()
        .filter(|s| s.is_finite() && *s > 0.0)
        .collect();
    let fill = if known.is_empty() {
        1.0
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    s_per_query
        .iter()
        .map(|&x| if x.is_finite() && x > 0.0 { x } else { fill })
        .collect()
}

/// Local mode's real-valued ideal: `n·S_i/ΣS_j` workers for job i (unknown `S_i` as in
/// [`local`]).
pub fn local_ideal(s_per_query: &[f64], n: usize) -> Vec<f64> {
    let s = filled(s_per_query);
    let total: f64 = s.iter().sum();
    s.iter().map(|x| n as f64 * x / total).collect()
}

/// Local mode: `n·S_i/ΣS_j` rounded by largest remainder, at least one worker per job
/// while `n ≥ m` (the extra one is taken from the job with the most). Non-positive or
/// non-finite `S_i` count as the mean of the others (1 if none is known).
pub fn local(s_per_query: &[f64], n: usize) -> Vec<usize> {
    let m = s_per_query.len();
    if m == 0 {
        return Vec::new();
    }
    let s = filled(s_per_query);
    let total: f64 = s.iter().sum();
    let shares: Vec<f64> = s.iter().map(|x| n as f64 * x / total).collect();
    let mut c: Vec<usize> = shares.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..m).collect();
    // largest remainder first; ties to the earlier job
    order.sort_by(|&a, &b| {
        let (ra, rb) = (shares[a] - shares[a].floor(), shares[b] - shares[b].floor());
        rb.partial_cmp(&ra).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
    });
    let mut left = n - c.iter().sum::<usize>().min(n);
    for &i in order.iter().cycle().take(m * 2) {
        if left == 0 {
            break;
        }
        c[i] += 1;
        left -= 1;
    }
    if n >= m {
        while let Some(z) = c.iter().position(|&x| x == 0) {
            let big = (0..m).max_by_key(|&i| (c[i], std::cmp::Reverse(i))).expect("m > 0");
            c[big] -= 1;
            c[z] += 1;
        }
    }
    c
}

/// For floor `floor`: counts summing to `n` with every rate at least `floor` and the
/// largest rate as small as possible, by a DP over jobs × workers used (O(m·n²)).
/// Returns the counts and their largest rate, or None if the floor is out of reach.
fn best_with_floor(jobs: &[JobLoad], n: usize, floor: f64) -> Option<(Vec<usize>, f64)> {
    let m = jobs.len();
    const NONE: f64 = f64::INFINITY;
    // best[i][k]: the smallest largest rate of jobs 0..i using k workers
    let mut best = vec![vec![NONE; n + 1]; m + 1];
    let mut choice = vec![vec![0usize; n + 1]; m + 1];
    best[0][0] = f64::NEG_INFINITY;
    for (i, job) in jobs.iter().enumerate() {
        for k in 0..=n {
            for c in 0..=k {
                let prev = best[i][k - c];
                if prev == NONE {
                    continue;
                }
                let q = job.qps(c);
                if q < floor {
                    continue;
                }
                let v = prev.max(q);
                if v < best[i + 1][k] {
                    best[i + 1][k] = v;
                    choice[i + 1][k] = c;
                }
            }
        }
    }
    if best[m][n] == NONE {
        return None;
    }
    let mut out = vec![0; m];
    let mut k = n;
    for i in (1..=m).rev() {
        out[i - 1] = choice[i][k];
        k -= choice[i][k];
    }
    Some((out, best[m][n]))
}

/// Global mode: the counts (summing to `n`) minimizing the largest difference between
/// two jobs' expected query rates; among equal spreads, the higher floor, then the
/// first found. Deterministic.
pub fn global(jobs: &[JobLoad], n: usize) -> Vec<usize> {
    let m = jobs.len();
    if m == 0 {
        return Vec::new();
    }
    let mut floors: Vec<f64> = jobs.iter().flat_map(|j| (0..=n).map(move |c| j.qps(c))).collect();
    floors.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    floors.dedup();
    let mut best: Option<(f64, f64, Vec<usize>)> = None;
    for &floor in &floors {
        let Some((c, top)) = best_with_floor(jobs, n, floor) else {
            continue;
        };
        let low = (0..m).map(|i| jobs[i].qps(c[i])).fold(f64::INFINITY, f64::min);
        let spread = top - low;
        let better = match &best {
            None => true,
            Some((s, l, _)) => spread < s - 1e-12 || ((spread - s).abs() <= 1e-12 && low > *l),
        };
        if better {
            best = Some((spread, low, c));
        }
    }
    best.map(|b| b.2).unwrap_or_else(|| vec![0; m])
}

/// Global mode's real-valued ideal: counts `C_i ≥ 0` summing to `n` (real numbers)
/// under which every job with queries left has the same expected rate
/// `Q_i / (e_i + S_i·R_i/C_i)`; a job with none left gets 0 (its rate no longer
/// depends on workers). Found by bisection on the common rate: job i needs
/// `C_i(q) = S_i·R_i / (Q_i/q − e_i)` workers for rate q, increasing in q.
pub fn global_ideal(jobs: &[JobLoad], n: usize) -> Vec<f64> {
    let live: Vec<usize> = (0..jobs.len())
        .filter(|&i| jobs[i].remaining > 0.0 && jobs[i].total > 0.0)
        .collect();
    let mut out = vec![0.0; jobs.len()];
    if live.is_empty() || n == 0 {
        return out;
    }
    let need = |i: usize, q: f64| -> f64 {
        let j = &jobs[i];
        let s = if j.s_per_query.is_finite() && j.s_per_query > 0.0 {
            j.s_per_query
        } else {
            1.0
        };
        let denom = j.total / q - j.elapsed_s.max(0.0);
        if denom <= 0.0 {
            f64::INFINITY
        } else {
            s * j.remaining / denom
        }
    };
    let sum = |q: f64| live.iter().map(|&i| need(i, q)).sum::<f64>();
    // the rate every job reaches with all n workers is above the answer
    let mut hi = live.iter().map(|&i| jobs[i].qps(n)).fold(f64::INFINITY, f64::min);
    let mut lo = 0.0;
    if !(hi.is_finite() && hi > 0.0) {
        hi = 1.0;
        while sum(hi) < n as f64 && hi < 1e12 {
            hi *= 2.0;
        }
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if sum(mid) < n as f64 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    for &i in &live {
        out[i] = need(i, lo);
    }
    // rounding in the bisection: scale to exactly n
    let total: f64 = out.iter().sum();
    if total > 0.0 && total.is_finite() {
        for x in &mut out {
            *x *= n as f64 / total;
        }
    }
    out
}

/// The largest pairwise difference of the rates of `counts` (for reports and tests).
pub fn spread(jobs: &[JobLoad], counts: &[usize]) -> f64 {
    let q: Vec<f64> = jobs.iter().zip(counts).map(|(j, &c)| j.qps(c)).collect();
    let hi = q.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lo = q.iter().copied().fold(f64::INFINITY, f64::min);
    if q.is_empty() {
        0.0
    } else {
        hi - lo
    }
}

#[cfg(test)]
#[path = "fairtime_tests.rs"]
mod tests;
