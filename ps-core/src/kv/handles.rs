//! Ready-made server handles: a sum store and an SGD store.

use super::pairs::KVPairs;
use super::server::{KVMeta, KVResponder, ReqHandle};
use super::store::SortedStore;
use bytemuck::Pod;
use std::ops::{AddAssign, Mul, SubAssign};

/// Answers pushes and pulls from a [`SortedStore`], combining a push into the stored
/// values with `apply(stored, pushed)`; a pull returns the stored values (zeros for an
/// unknown key: the requested length when lens are given, else one value).
fn store_handle<V: Pod + Send + Sync>(mut apply: impl FnMut(&mut V, V) + Send + 'static) -> ReqHandle<V> {
    let mut store = SortedStore::<V>::new();
    Box::new(move |meta: &KVMeta, req: KVPairs<V>, resp: &KVResponder| {
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
        if let Err(e) = resp.response(meta, &res) {
            log::warn!("response to {} not sent: {e}", meta.sender);
        }
    })
}

/// A handle that adds every pushed value into its key's stored values.
pub fn sum_handle<V: Pod + Send + Sync + AddAssign>() -> ReqHandle<V> {
    store_handle(|s: &mut V, v| *s += v)
}

/// A handle that treats pushed values as gradients: `stored -= lr * pushed`.
pub fn sgd_handle<V: Pod + Send + Sync + SubAssign + Mul<Output = V>>(lr: V) -> ReqHandle<V> {
    store_handle(move |s: &mut V, g| *s -= lr * g)
}
