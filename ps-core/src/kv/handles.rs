//! Ready-made server handles: a sum store and an SGD store.

use super::pairs::KVPairs;
use super::replication::RangeCopy;
use super::request::{KVMeta, KVResponder, ReqHandle};
use super::store::SortedStore;
use super::store_copy::StoreCopy;
use bytemuck::Pod;
use parking_lot::Mutex;
use std::ops::{AddAssign, Mul, SubAssign};
use std::sync::Arc;

/// Answers pushes and pulls from a [`SortedStore`], combining a push into the stored
/// values with `apply(stored, pushed)`; a pull returns the stored values (zeros for an
/// unknown key: the requested length when lens are given, else one value).
fn store_handle<V: Pod + Send + Sync>(
    store: Arc<Mutex<SortedStore<V>>>,
    mut apply: impl FnMut(&mut V, V) + Send + 'static,
) -> ReqHandle<V> {
    Box::new(move |meta: &KVMeta, req: KVPairs<V>, resp: &KVResponder| {
        let mut store = store.lock();
        if meta.push {
            store.push(&req.keys, &req.vals, &req.lens, &mut apply);
        }
        let res = if meta.pull {
            let want = |i: usize| if req.lens.is_empty() { 1 } else { req.lens[i] as usize };
            let (vals, lens) = store.pull(&req.keys, want);
            let uniform = lens.is_empty() || lens.windows(2).all(|w| w[0] == w[1]);
            KVPairs {
                keys: req.keys.clone(),
                vals: vals.into(),
                lens: if uniform { Vec::new().into() } else { lens.into() },
            }
        } else {
            KVPairs::default()
        };
        drop(store);
        if let Err(e) = resp.response(meta, &res) {
            log::warn!("response to {} not sent: {e}", meta.sender);
        }
    })
}

/// A handle that adds every pushed value into its key's stored values.
pub fn sum_handle<V: Pod + Send + Sync + AddAssign>() -> ReqHandle<V> {
    sum_handle_with_copy().0
}

/// [`sum_handle`] and the copier of its key ranges (for a replacement server with
/// `PS_REPLICAS`, see [`super::server::KVServer::with_copy`]), over one store.
pub fn sum_handle_with_copy<V: Pod + Send + Sync + AddAssign>() -> (ReqHandle<V>, Box<dyn RangeCopy>) {
    let store = Arc::new(Mutex::new(SortedStore::<V>::new()));
    let copy = Box::new(StoreCopy(Arc::clone(&store)));
    (store_handle(store, |s: &mut V, v| *s += v), copy)
}

/// A handle that treats pushed values as gradients: `stored -= lr * pushed`.
pub fn sgd_handle<V: Pod + Send + Sync + SubAssign + Mul<Output = V>>(lr: V) -> ReqHandle<V> {
    store_handle(Arc::new(Mutex::new(SortedStore::new())), move |s: &mut V, g| {
        *s -= lr * g
    })
}
