//! The benchmark's server handle.

use bytemuck::Pod;
use ps_core::kv::{KVMeta, KVPairs, KVResponder, ReqHandle, SArray};
use std::collections::HashMap;

/// Stores the first value pushed for each key (zero-copy), acknowledges every push,
/// and answers pulls with the stored values (zeros if never pushed, sized by `lens`).
pub fn empty_handle<V: Pod + Send + Sync>() -> ReqHandle<V> {
    let mut store: HashMap<u64, SArray<V>> = HashMap::new();
    Box::new(move |meta: &KVMeta, req: KVPairs<V>, resp: &KVResponder| {
        if meta.push && req.keys.len() == 1 {
            store.entry(req.keys[0]).or_insert_with(|| req.vals.clone());
        } else if meta.push {
            let per = req.vals.len() / req.keys.len().max(1);
            for (i, k) in req.keys.iter().enumerate() {
                store
                    .entry(*k)
                    .or_insert_with(|| req.vals.slice(i * per, (i + 1) * per));
            }
        }
        let res = if !meta.pull {
            KVPairs::default()
        } else if req.keys.len() == 1 {
            let vals = store
                .get(&req.keys[0])
                .cloned()
                .unwrap_or_else(|| SArray::from_vec(vec![V::zeroed(); 1]));
            KVPairs {
                keys: req.keys.clone(),
                vals,
                lens: SArray::empty(),
            }
        } else {
            let mut vals = Vec::with_capacity(req.keys.len());
            for k in req.keys.iter() {
                match store.get(k) {
                    Some(v) => vals.extend_from_slice(v),
                    None => vals.push(V::zeroed()),
                }
            }
            KVPairs {
                keys: req.keys.clone(),
                vals: vals.into(),
                lens: SArray::empty(),
            }
        };
        if let Err(e) = resp.response(meta, &res) {
            log::warn!("bench response failed: {e}");
        }
    })
}

/// Answers every pull with `port` for each key asked, and acknowledges pushes: how
/// `psrs bench --compare-raw` tells workers where the server's raw-socket floor listens.
pub fn port_handle(port: u16) -> ReqHandle<u64> {
    Box::new(move |meta: &KVMeta, req: KVPairs<u64>, resp: &KVResponder| {
        let res = if meta.pull {
            KVPairs {
                keys: req.keys.clone(),
                vals: vec![port as u64; req.keys.len()].into(),
                lens: SArray::empty(),
            }
        } else {
            KVPairs::default()
        };
        if let Err(e) = resp.response(meta, &res) {
            log::warn!("bench response failed: {e}");
        }
    })
}
