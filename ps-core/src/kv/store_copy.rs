//! A [`SortedStore`]'s key range as a [`RangeCopy`]: the keys, value counts and
//! values of the range, bincode-encoded (bounded decode, checked before anything is
//! changed).

use super::error::KvError;
use super::range::KeyRange;
use super::replication::RangeCopy;
use super::store::SortedStore;
use bincode::Options;
use bytemuck::Pod;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::Arc;

/// Largest copy accepted.
const MAX_COPY_BYTES: u64 = 16 << 30;

type Wire = (Vec<u64>, Vec<i32>, Vec<u8>);

/// A decoded copy: keys, value counts, values.
type Decoded<V> = (Vec<u64>, Vec<i32>, Vec<V>);

fn codec() -> impl Options {
    bincode::DefaultOptions::new()
        .with_limit(MAX_COPY_BYTES)
        .reject_trailing_bytes()
}

/// Copies key ranges of a shared store.
pub(crate) struct StoreCopy<V: Pod>(pub(crate) Arc<Mutex<SortedStore<V>>>);

/// Decodes a copy of `range`, checking keys (sorted, inside the range) and counts;
/// [`KvError::BadCopy`] when they do not fit.
fn decode<V: Pod>(range: KeyRange, data: &[u8]) -> Result<Decoded<V>, KvError> {
    let (keys, lens, raw): Wire = codec()
        .deserialize(data)
        .map_err(|e| KvError::BadCopy(format!("malformed copy: {e}")))?;
    if lens.len() != keys.len() || lens.iter().any(|&l| l < 0) {
        return Err(KvError::BadCopy("copy: value counts do not match the keys".into()));
    }
    if keys.windows(2).any(|w| w[0] >= w[1]) || keys.iter().any(|&k| !range.contains(k)) {
        return Err(KvError::BadCopy(format!("copy: keys unsorted or outside {range}")));
    }
    let total: usize = lens.iter().map(|&l| l as usize).sum();
    if raw.len() != total * std::mem::size_of::<V>() {
        return Err(KvError::BadCopy("copy: value bytes do not match the counts".into()));
    }
    let vals = bytemuck::pod_collect_to_vec::<u8, V>(&raw);
    Ok((keys, lens, vals))
}

impl<V: Pod + Send + Sync> RangeCopy for StoreCopy<V> {
    fn snapshot(&mut self, _range: usize, keys: KeyRange) -> Bytes {
        let (k, l, v) = self.0.lock().export(keys);
        let wire: Wire = (k, l, bytemuck::cast_slice(&v).to_vec());
        Bytes::from(codec().serialize(&wire).expect("a copy always serializes"))
    }

    fn restore(&mut self, _range: usize, keys: KeyRange, data: &[u8]) -> Result<(), KvError> {
        let (k, l, v) = decode::<V>(keys, data)?;
        self.0.lock().push(&k, &v, &l, |s, x| *s = x);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_round_trips_and_garbage_changes_nothing() {
        let src = Arc::new(Mutex::new(SortedStore::<f32>::new()));
        src.lock()
            .push(&[1, 5, 9, 20], &[1.0, 2.0, 2.5, 3.0, 4.0], &[1, 2, 1, 1], |s, x| {
                *s += x
            });
        let range = KeyRange { begin: 5, end: 10 };
        let data = StoreCopy(Arc::clone(&src)).snapshot(0, range);
        let dst = Arc::new(Mutex::new(SortedStore::<f32>::new()));
        let mut copy = StoreCopy(Arc::clone(&dst));
        copy.restore(0, range, &data).unwrap();
        assert_eq!(
            dst.lock().export(KeyRange { begin: 0, end: 100 }),
            (vec![5, 9], vec![2, 1], vec![2.0, 2.5, 3.0])
        );
        // a copy of another range, or garbage, is refused
        assert!(matches!(
            copy.restore(0, KeyRange { begin: 0, end: 5 }, &data),
            Err(KvError::BadCopy(_))
        ));
        assert!(copy.restore(0, range, b"\x07garbage").is_err());
        assert_eq!(dst.lock().len(), 2);
    }
}
