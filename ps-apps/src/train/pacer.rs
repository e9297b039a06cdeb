//! How often the scheduler logs a `progress:` line: the first finished task, then at
//! most one line every `every_ms`, and always the line that completes the job, so a
//! log file gets a line every few seconds rather than one per task. Pure: the time is
//! passed in.

/// Decides which progress updates become log lines.
#[derive(Clone, Debug)]
pub struct Pacer {
    every_ms: u64,
    last_ms: Option<u64>,
}

impl Pacer {
    /// At most one line every `every_ms` milliseconds (0: every update).
    pub fn new(every_ms: u64) -> Pacer {
        Pacer {
            every_ms,
            last_ms: None,
        }
    }

    /// Whether the update at `now_ms` is logged (`last`: it completes the job).
    pub fn due(&mut self, now_ms: u64, last: bool) -> bool {
        let due = last || self.last_ms.is_none_or(|t| now_ms.saturating_sub(t) >= self.every_ms);
        if due {
            self.last_ms = Some(now_ms);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_plus_the_last() {
        let mut p = Pacer::new(5_000);
        // 450 tasks over 45 s, one every 100 ms: the first, one per 5 s, and the last
        let lines = (0..450u64).filter(|&i| p.due(i * 100, i == 449)).count();
        assert_eq!(lines, 1 + 8 + 1);
        let mut every = Pacer::new(0);
        assert_eq!((0..10u64).filter(|&i| every.due(i, false)).count(), 10);
    }
}
