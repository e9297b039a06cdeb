//! `KVPairs<V>`: sorted keys with their values, optionally with a value length per
//! key; validated, sliced across servers by key range, and packed into data frames.

use super::error::KvError;
use super::range::KeyRange;
use super::sarray::SArray;
use bytemuck::Pod;
use bytes::Bytes;

/// Keys (sorted, unique) and values. Without `lens`, every key has
/// `vals.len() / keys.len()` values; with `lens`, key i has `lens[i]` values.
#[derive(Clone, Debug, PartialEq)]
pub struct KVPairs<V: Pod> {
    /// Sorted, unique keys.
    pub keys: SArray<u64>,
    /// Values of all keys, concatenated in key order.
    pub vals: SArray<V>,
    /// Values per key (empty = equal lengths).
    pub lens: SArray<i32>,
}

impl<V: Pod + Send + Sync> Default for KVPairs<V> {
    fn default() -> Self {
        KVPairs {
            keys: SArray::empty(),
            vals: SArray::empty(),
            lens: SArray::empty(),
        }
    }
}

impl<V: Pod + Send + Sync> KVPairs<V> {
    /// Pairs from owned vectors (no copies).
    pub fn new(keys: Vec<u64>, vals: Vec<V>, lens: Vec<i32>) -> KVPairs<V> {
        KVPairs {
            keys: keys.into(),
            vals: vals.into(),
            lens: lens.into(),
        }
    }

    /// Checks that keys are sorted and unique and that the values fit.
    pub fn validate(&self, has_vals: bool) -> Result<(), KvError> {
        let keys: &[u64] = &self.keys;
        // branch-free pass first (vectorizes); locate the culprit only on failure
        let ascending = keys.len() < 2
            || keys[..keys.len() - 1]
                .iter()
                .zip(&keys[1..])
                .fold(true, |ok, (a, b)| ok & (a < b));
        if !ascending {
            let i = keys.windows(2).position(|w| w[1] <= w[0]).unwrap_or(0);
            return Err(KvError::Unsorted(i + 1));
        }
        if !self.lens.is_empty() {
            if self.lens.len() != self.keys.len() {
                return Err(KvError::BadLength(format!(
                    "{} lens for {} keys",
                    self.lens.len(),
                    self.keys.len()
                )));
            }
            if self.lens.iter().any(|&l| l < 0) {
                return Err(KvError::BadLength("negative length".into()));
            }
            let total: i64 = self.lens.iter().map(|&l| l as i64).sum();
            if has_vals && total != self.vals.len() as i64 {
                return Err(KvError::BadLength(format!(
                    "lens add up to {total} but there are {} values",
                    self.vals.len()
                )));
            }
        } else if has_vals {
            let (k, v) = (self.keys.len(), self.vals.len());
            if (k == 0 && v != 0) || (k != 0 && v % k != 0) {
                return Err(KvError::BadLength(format!("{v} values for {k} keys")));
            }
        }
        Ok(())
    }

    /// Checks only that the values fit the keys and lengths (not the key order).
    pub fn validate_counts(&self) -> Result<(), KvError> {
        let (k, v) = (self.keys.len(), self.vals.len());
        if self.lens.is_empty() {
            if (k == 0 && v != 0) || (k != 0 && v % k != 0) {
                return Err(KvError::BadLength(format!("{v} values for {k} keys")));
            }
        } else {
            let total: i64 = self.lens.iter().map(|&l| l as i64).sum();
            if self.lens.len() != k || total != v as i64 || self.lens.iter().any(|&l| l < 0) {
                return Err(KvError::BadLength(format!("lens do not fit {k} keys and {v} values")));
            }
        }
        Ok(())
    }

    /// Offset of key i's first value (`n = keys.len()` gives the total).
    fn val_offset(&self, i: usize) -> usize {
        if self.lens.is_empty() {
            let per = if self.keys.is_empty() {
                0
            } else {
                self.vals.len() / self.keys.len()
            };
            i * per
        } else {
            self.lens[..i].iter().map(|&l| l as usize).sum()
        }
    }

    /// Splits into one part per range (ranges sorted and disjoint), sharing storage.
    /// Parts for ranges holding no key are empty.
    pub fn slice(&self, ranges: &[KeyRange], has_vals: bool) -> Vec<KVPairs<V>> {
        let mut out = Vec::with_capacity(ranges.len());
        let mut start = 0;
        let mut voff = 0;
        for r in ranges {
            let end = start + self.keys[start..].partition_point(|&k| r.contains(k) || k < r.begin);
            let vend = if has_vals { self.val_offset(end) } else { 0 };
            out.push(KVPairs {
                keys: self.keys.slice(start, end),
                vals: if has_vals {
                    self.vals.slice(voff, vend)
                } else {
                    SArray::empty()
                },
                lens: if self.lens.is_empty() {
                    SArray::empty()
                } else {
                    self.lens.slice(start, end)
                },
            });
            start = end;
            voff = vend;
        }
        out
    }

    /// Concatenates parts (in key order) into one set; a single part is returned as is.
    pub fn concat(mut parts: Vec<KVPairs<V>>) -> KVPairs<V> {
        parts.retain(|p| !p.keys.is_empty());
        if parts.len() <= 1 {
            return parts.pop().unwrap_or_default();
        }
        let mut keys = Vec::new();
        let mut vals = Vec::new();
        let mut lens = Vec::new();
        let with_lens = parts.iter().any(|p| !p.lens.is_empty());
        for p in &parts {
            keys.extend_from_slice(&p.keys);
            vals.extend_from_slice(&p.vals);
            if with_lens {
                if p.lens.is_empty() {
                    let per = (p.vals.len() / p.keys.len().max(1)) as i32;
                    lens.extend(std::iter::repeat_n(per, p.keys.len()));
                } else {
                    lens.extend_from_slice(&p.lens);
                }
            }
        }
        KVPairs::new(keys, vals, lens)
    }

    /// The data frames: keys, values and, if present, lengths.
    pub fn to_frames(&self) -> Vec<Bytes> {
        let mut f = vec![self.keys.bytes().clone(), self.vals.bytes().clone()];
        if !self.lens.is_empty() {
            f.push(self.lens.bytes().clone());
        }
        f
    }

    /// Reads frames written by [`KVPairs::to_frames`] (missing frames are empty); a
    /// frame that does not decode is [`KvError::BadFrame`].
    pub fn from_frames(frames: &[Bytes]) -> Result<KVPairs<V>, KvError> {
        let bad_frame = |e: KvError| KvError::BadFrame(e.to_string());
        let get = |i: usize| frames.get(i).cloned().unwrap_or_default();
        if frames.len() > 3 {
            return Err(KvError::BadFrame(format!(
                "{} frames, at most 3 expected",
                frames.len()
            )));
        }
        Ok(KVPairs {
            keys: SArray::from_bytes(get(0)).map_err(bad_frame)?,
            vals: SArray::from_bytes(get(1)).map_err(bad_frame)?,
            lens: SArray::from_bytes(get(2)).map_err(bad_frame)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::range::server_key_ranges;

    #[test]
    fn validation() {
        assert!(KVPairs::<f32>::new(vec![1, 2, 5], vec![0.0; 6], vec![])
            .validate(true)
            .is_ok());
        assert_eq!(
            KVPairs::<f32>::new(vec![1, 1], vec![0.0; 2], vec![]).validate(true),
            Err(KvError::Unsorted(1))
        );
        assert_eq!(
            KVPairs::<f32>::new(vec![3, 2], vec![], vec![]).validate(false),
            Err(KvError::Unsorted(1))
        );
        assert!(KVPairs::<f32>::new(vec![1, 2], vec![0.0; 3], vec![])
            .validate(true)
            .is_err());
        assert!(KVPairs::<f32>::new(vec![1, 2], vec![0.0; 3], vec![1, 2])
            .validate(true)
            .is_ok());
        assert!(KVPairs::<f32>::new(vec![1, 2], vec![0.0; 3], vec![1])
            .validate(true)
            .is_err());
        assert!(KVPairs::<f32>::new(vec![1, 2], vec![0.0; 3], vec![-1, 4])
            .validate(true)
            .is_err());
        assert!(KVPairs::<f32>::new(vec![], vec![], vec![]).validate(true).is_ok());
        assert!(KVPairs::<f32>::new(vec![], vec![1.0], vec![]).validate(true).is_err());
        let msg = KvError::Unsorted(3).to_string();
        assert!(msg.contains("sorted"), "{msg}");
    }

    #[test]
    fn slices_by_range_and_concats_back() {
        let r = server_key_ranges(3);
        let keys = vec![0, 5, r[1].begin, r[1].begin + 1, u64::MAX];
        let p = KVPairs::<f32>::new(keys.clone(), vec![1., 2., 3., 4., 5., 6., 7., 8., 9., 10.], vec![]);
        let parts = p.slice(&r, true);
        assert_eq!(parts.iter().map(|p| p.keys.len()).collect::<Vec<_>>(), vec![2, 2, 1]);
        assert_eq!(&parts[1].vals[..], &[5., 6., 7., 8.]);
        assert_eq!(&parts[2].vals[..], &[9., 10.]);
        assert_eq!(KVPairs::concat(parts), p);

        let uneven = KVPairs::<f32>::new(vec![1, r[2].begin], vec![1., 2., 3.], vec![1, 2]);
        let parts = uneven.slice(&r, true);
        assert!(parts[1].keys.is_empty());
        assert_eq!((&parts[2].vals[..], &parts[2].lens[..]), (&[2., 3.][..], &[2][..]));
        assert_eq!(KVPairs::concat(parts), uneven);
    }

    #[test]
    fn frames_round_trip() {
        let p = KVPairs::<f64>::new(vec![1, 9], vec![0.5, 1.5, 2.5], vec![1, 2]);
        assert_eq!(KVPairs::<f64>::from_frames(&p.to_frames()).unwrap(), p);
        assert!(KVPairs::<f64>::from_frames(&[Bytes::from_static(b"abc")]).is_err());
    }
}
