//! This process's CPU time (user + system, all threads), from `/proc/self/stat`, for
//! stating what a benchmark figure cost (e.g. the spinning of `PS_SPIN_US`).

use std::time::Duration;

/// Clock ticks per second of `/proc/*/stat` times (`USER_HZ`, 100 on Linux).
const USER_HZ: u64 = 100;

/// User + system CPU time used so far by this process, or None off Linux.
pub fn process_cpu() -> Option<Duration> {
    parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// utime + stime from the text of a `/proc/PID/stat` file (fields 14 and 15; the
/// command name in parentheses may hold spaces).
fn parse_stat(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11); // field 3 is the first after ')'
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / USER_HZ))
}

/// CPU used over a stretch of wall time, as a percentage of one core.
pub fn percent_of_a_core(cpu: Duration, wall: Duration) -> f64 {
    if wall.is_zero() {
        return 0.0;
    }
    100.0 * cpu.as_secs_f64() / wall.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_user_and_system_ticks_past_a_name_with_spaces() {
        let stat = "42 (psrs (a b)) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0";
        assert_eq!(parse_stat(stat), Some(Duration::from_millis(3000)));
        assert_eq!(parse_stat("garbage"), None);
        assert!(process_cpu().is_some());
        assert_eq!(
            percent_of_a_core(Duration::from_millis(500), Duration::from_secs(1)),
            50.0
        );
    }
}
