//! Idle notices for the parameter tables: while a worker waits for a task (the master
//! answered "wait" or "no more tasks"), every `Tables` of this process tells its
//! servers that this worker holds no task, so sync versions do not wait for its
//! gradients (as `psrs train`'s workers do). `TaskClient` calls [`notify`].

use parking_lot::Mutex;
use std::sync::Weak;

/// Something that sends idle notices.
pub trait Idle: Send {
    /// Tells the servers this worker holds no task (once per idle spell).
    fn idle(&mut self);
}

static REGISTERED: Mutex<Vec<Weak<Mutex<dyn Idle>>>> = Mutex::new(Vec::new());

/// Registers `who` for [`notify`] (until it is dropped).
pub fn register(who: Weak<Mutex<dyn Idle>>) {
    let mut r = REGISTERED.lock();
    r.retain(|w| w.strong_count() > 0);
    r.push(who);
}

/// Sends every live registrant's idle notice.
pub fn notify() {
    let live: Vec<_> = REGISTERED.lock().iter().filter_map(Weak::upgrade).collect();
    for who in live {
        who.lock().idle();
    }
}
