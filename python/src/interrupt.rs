//! Waiting on the network without the GIL, in short slices, checking for Ctrl-C (and
//! any other pending signal handler) between them.

use pyo3::prelude::*;
use std::time::Duration;

/// One slice of waiting.
pub const SLICE: Duration = Duration::from_millis(50);

/// Calls `poll` with the GIL released until it returns `Some`; runs Python's signal
/// handlers between calls, so Ctrl-C raises `KeyboardInterrupt` here. `poll` should
/// block at most about [`SLICE`].
pub fn wait_for<T: Send>(py: Python<'_>, mut poll: impl FnMut() -> Option<T> + Send) -> PyResult<T> {
    loop {
        if let Some(v) = py.detach(&mut poll) {
            return Ok(v);
        }
        py.check_signals()?;
    }
}

/// Runs `f` (which may block for long) on its own thread and waits for it
/// interruptibly. After Ctrl-C the thread goes on in the background.
pub fn run_blocking<T: Send + 'static>(
    py: Python<'_>,
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| crate::errors::cluster_err(format!("cannot start a thread: {e}")))?;
    wait_for(py, || match rx.recv_timeout(SLICE) {
        Ok(v) => Some(Ok(v)),
        Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Some(Err(())),
    })?
    .map_err(|_| crate::errors::cluster_err(format!("{name} panicked")))
}
