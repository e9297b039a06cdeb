//! Which process runs, and at what simulated time: set by the world around every step
//! on the thread that runs it, so that the processes' own log lines can say whose
//! they are (`psrs simulate --log`, `PS_SIM_DEBUG`).

use std::cell::Cell;

thread_local! {
    static AT: Cell<Option<(u64, usize)>> = const { Cell::new(None) };
}

/// The step at simulated time `now_ms` of the process in `slot` starts on this thread.
pub fn enter(now_ms: u64, slot: usize) {
    AT.with(|a| a.set(Some((now_ms, slot))));
}

/// The step is over.
pub fn leave() {
    AT.with(|a| a.set(None));
}

/// The simulated time and slot of the step running on this thread, if any.
pub fn current() -> Option<(u64, usize)> {
    AT.with(|a| a.get())
}
