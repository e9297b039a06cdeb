//! A fault of the simulated network or processes, or the end of one: what the
//! agenda carries. The world schedules them; [`crate::faults`] draws and applies them.

/// A fault, or the end of one.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Time to draw the next fault.
    Next,
    /// Cut the slots into these sides.
    Partition(Vec<u32>),
    /// The partition and any lossiness end.
    Heal,
    /// Links lose, duplicate and delay messages with these probabilities.
    Lossy {
        /// Loss.
        loss: f64,
        /// Duplication.
        dup: f64,
        /// Long detours (reordering).
        slow: f64,
    },
    /// The process in this slot crashes.
    Crash(usize),
    /// A new process starts in this slot (if it is down).
    Restart(usize),
    /// The fault window is over: heal and restart everything.
    End,
}
