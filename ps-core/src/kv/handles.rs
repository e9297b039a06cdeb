//! Ready-made server handles: a sum store and an SGD store.

use super::pairs::KVPairs;
use super::server::{KVMeta, KVResponder, ReqHandle};
use bytemuck::Pod;
use std::collections::HashMap;
use std::ops::{AddAssign, Mul, SubAssign};

/// Answers pushes and pulls from a map key → values, combining a push into the stored
/// values with `apply(stored, pushed)`; a pull returns the stored values (zeros for an
/// unknown key, with the requested length when lens are given, else one value).
fn store_handle<V: Pod + Send + Sync>(
    mut apply: impl FnMut(&mut V, V) + Send + 'static,
) -> ReqHandle<V> {
    let mut store: HashMap<u64, Vec<V>> = HashMap::new();
    Box::new(move |meta: &KVMeta, req: KVPairs<V>, resp: &KVResponder| {
        let n = req.keys.len();
        let per = if req.lens.is_empty() && n > 0 {
            req.vals.len() / n
        } else {
            0
        };
        if meta.push {
            let mut off = 0;
            for (i, k) in req.keys.iter().enumerate() {
                let len = if req.lens.is_empty() {
                    per
                } else {
                    req.lens[i] as usize
                };
                let vals = &req.vals[off..off + len];
                off += len;
                let slot = store.entry(*k).or_insert_with(|| vec![V::zeroed(); len]);
                if slot.len() != len {
                    slot.resize(len, V::zeroed());
                }
                for (s, v) in slot.iter_mut().zip(vals) {
                    apply(s, *v);
                }
            }
        }
        let res = if meta.pull {
            let mut vals = Vec::new();
            let mut lens = Vec::with_capacity(n);
            for (i, k) in req.keys.iter().enumerate() {
                let want = if !req.lens.is_empty() {
                    Some(req.lens[i] as usize)
                } else {
                    None
                };
                match store.get(k) {
                    Some(v) => {
                        vals.extend_from_slice(v);
                        lens.push(v.len() as i32);
                    }
                    None => {
                        let len = want.unwrap_or(1);
                        vals.extend(std::iter::repeat_n(V::zeroed(), len));
                        lens.push(len as i32);
                    }
                }
            }
            let uniform = lens.windows(2).all(|w| w[0] == w[1]);
            KVPairs::new(
                req.keys.to_vec(),
                vals,
                if uniform { Vec::new() } else { lens },
            )
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
