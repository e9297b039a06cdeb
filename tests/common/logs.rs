//! Reading what a cluster's processes logged, by time: the Unix time (ms) of a log
//! line, the intervals in which a scheduler candidate acted (its `acting as the active
//! scheduler ... since T` and `not acting ... since T` lines), and the master's
//! progress (`progress: N/M tasks`) as points in time.
#![allow(dead_code)]

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix ms (the clock the log lines use).
pub fn unix_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The Unix time (ms) of a log line `[2026-11-24T09:42:03.728Z role LEVEL target] ...`.
pub fn line_ms(line: &str) -> Option<u64> {
    let stamp = line.strip_prefix('[')?.split(' ').next()?;
    let (date, clock) = stamp.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let mut c = clock.split(':');
    let (h, min) = (c.next()?.parse::<i64>().ok()?, c.next()?.parse::<i64>().ok()?);
    let sec: f64 = c.next()?.parse().ok()?;
    let ms = (days_from_civil(y, m, day) * 86_400 + h * 3600 + min * 60) * 1000 + (sec * 1000.0).round() as i64;
    u64::try_from(ms).ok()
}

/// The Unix time (ms) of the last timed line of `log`.
pub fn last_line_ms(log: &str) -> Option<u64> {
    log.lines().rev().find_map(line_ms)
}

/// One spell in which a scheduler acted: under `term`, from `from` to `to` (Unix ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acting {
    /// The term it acted under.
    pub term: u64,
    /// When it started acting.
    pub from: u64,
    /// When it stopped (`end` of [`acting`] if it never logged so).
    pub to: u64,
}

fn since(line: &str) -> Option<u64> {
    line.split(" since ").nth(1)?.split(' ').next()?.parse().ok()
}

fn term_of(line: &str) -> Option<u64> {
    line.split("under term ").nth(1)?.split(' ').next()?.parse().ok()
}

/// The spells in which the scheduler that wrote `log` acted; one still open at the
/// end of the log lasts until `end` (Unix ms: when the process ended or was looked at).
pub fn acting(log: &str, end: u64) -> Vec<Acting> {
    let mut out = Vec::new();
    let mut open: Option<(u64, u64)> = None;
    for line in log.lines() {
        if line.contains("acting as the active scheduler under term ") {
            if let (Some(term), Some(from)) = (term_of(line), since(line)) {
                open.get_or_insert((term, from));
            }
        } else if line.contains("] not acting under term ") {
            if let (Some((term, from)), Some(to)) = (open, since(line)) {
                out.push(Acting { term, from, to });
                open = None;
            }
        }
    }
    if let Some((term, from)) = open {
        out.push(Acting { term, from, to: end });
    }
    out
}

/// The first overlap of two schedulers' spells: `spells[i]` are scheduler `i`'s.
pub fn overlap(spells: &[Vec<Acting>]) -> Option<String> {
    for (i, a) in spells.iter().enumerate() {
        for (j, b) in spells.iter().enumerate().skip(i + 1) {
            for x in a {
                for y in b {
                    if x.from < y.to && y.from < x.to {
                        return Some(format!(
                            "scheduler {i} acted under term {} from {} to {} and scheduler {j} under term {} from {} to {} (Unix ms)",
                            x.term, x.from, x.to, y.term, y.from, y.to
                        ));
                    }
                }
            }
        }
    }
    None
}

/// The master's progress in `log`: (Unix ms, tasks done) of every `progress: N/M` line.
pub fn progress(log: &str) -> Vec<(u64, usize)> {
    log.lines()
        .filter_map(|l| {
            let n = l.split("progress: ").nth(1)?.split('/').next()?.parse().ok()?;
            Some((line_ms(l)?, n))
        })
        .collect()
}
