//! A pull's answers from several servers, put back in key order without an
//! intermediate copy: the values go straight into the caller's array.

use bytemuck::Pod;
use ps_core::kv::{KvError, ServerReply};

/// The servers' answers to one pull, sorted by server rank (= key order).
pub struct Pulled<V: Pod> {
    replies: Vec<ServerReply<V>>,
}

impl<V: Pod + Send + Sync> Pulled<V> {
    /// Checks that the answers hold exactly `nkeys` keys.
    pub fn new(replies: Vec<ServerReply<V>>, nkeys: usize) -> Result<Pulled<V>, KvError> {
        let got: usize = replies.iter().map(|r| r.data.keys.len()).sum();
        if got != nkeys {
            return Err(KvError::BadLength(format!("asked for {nkeys} keys, got {got} back")));
        }
        Ok(Pulled { replies })
    }

    /// Values in all.
    pub fn num_vals(&self) -> usize {
        self.replies.iter().map(|r| r.data.vals.len()).sum()
    }

    /// Values per key, in key order.
    pub fn lens(&self) -> Vec<i32> {
        let mut out = Vec::new();
        for r in &self.replies {
            let d = &r.data;
            if d.lens.is_empty() {
                let per = if d.keys.is_empty() {
                    0
                } else {
                    d.vals.len() / d.keys.len()
                };
                out.extend(std::iter::repeat_n(per as i32, d.keys.len()));
            } else {
                out.extend_from_slice(&d.lens);
            }
        }
        out
    }

    /// Copies the values into `dst` (exactly [`Pulled::num_vals`] long).
    pub fn copy_into(&self, dst: &mut [V]) {
        let mut at = 0;
        for r in &self.replies {
            let v = &r.data.vals;
            dst[at..at + v.len()].copy_from_slice(v);
            at += v.len();
        }
    }

    /// Appends the values to `dst`.
    pub fn extend_into(&self, dst: &mut Vec<V>) {
        for r in &self.replies {
            dst.extend_from_slice(&r.data.vals);
        }
    }
}
