//! Rate-limited log lines: refused messages of one kind are logged at most `burst`
//! times per interval, and the first line after an interval with lines held back says
//! how many, so a peer sending forgeries in a loop cannot flood the log. Pure (time
//! passed in).

use std::collections::HashMap;

/// One kind's interval: when it started, lines logged and held back in it.
#[derive(Clone, Copy, Debug)]
struct Window {
    start: u64,
    logged: u32,
    held: u64,
}

/// The lines of each kind logged lately.
#[derive(Clone, Debug)]
pub struct LogLimit {
    every_ms: u64,
    burst: u32,
    kinds: HashMap<&'static str, Window>,
}

impl LogLimit {
    /// At most `burst` lines of a kind every `every_ms`.
    pub fn new(every_ms: u64, burst: u32) -> LogLimit {
        LogLimit {
            every_ms,
            burst: burst.max(1),
            kinds: HashMap::new(),
        }
    }

    /// A line of `kind` at `now_ms`: `Some(n)` if it may be logged (`n` lines of the
    /// kind were held back in the interval before), None if it is held back.
    pub fn allow(&mut self, kind: &'static str, now_ms: u64) -> Option<u64> {
        let w = self.kinds.entry(kind).or_insert(Window {
            start: now_ms,
            logged: 0,
            held: 0,
        });
        let mut before = 0;
        if now_ms.saturating_sub(w.start) >= self.every_ms {
            before = w.held;
            *w = Window {
                start: now_ms,
                logged: 0,
                held: 0,
            };
        }
        if w.logged < self.burst {
            w.logged += 1;
            Some(before)
        } else {
            w.held += 1;
            None
        }
    }
}
