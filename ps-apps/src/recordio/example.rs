//! A training example as stored in a record.

use bincode::Options;
use serde::{Deserialize, Serialize};

/// Feature values of an example.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Features {
    /// Every feature, in order.
    Dense(Vec<f32>),
    /// Only the non-zero features: sorted indices and their values.
    Sparse {
        /// Feature indices (sorted, 0-based).
        idx: Vec<u32>,
        /// Their values.
        val: Vec<f32>,
    },
}

/// One labelled example.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// The label: a class number, or 0/1 for binary tasks.
    pub label: f32,
    /// The features.
    pub features: Features,
}

/// Largest encoded example accepted.
const MAX_EXAMPLE: u64 = 64 << 20;

/// A record that is not an encoded [`Example`]: what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed example record: {0}")]
pub struct MalformedExample(pub String);

impl Example {
    /// The record bytes of this example (bincode with varint integers).
    pub fn encode(&self) -> Vec<u8> {
        bincode::DefaultOptions::new()
            .serialize(self)
            .expect("examples always serialize")
    }

    /// Decodes a record (bincode, bounded to 64 MiB, no trailing bytes); a malformed
    /// one, or sparse indices and values of different lengths, is an error, never a
    /// panic.
    pub fn decode(bytes: &[u8]) -> Result<Example, MalformedExample> {
        let e: Example = bincode::DefaultOptions::new()
            .with_limit(MAX_EXAMPLE)
            .reject_trailing_bytes()
            .deserialize(bytes)
            .map_err(|e| MalformedExample(e.to_string()))?;
        if let Features::Sparse { idx, val } = &e.features {
            if idx.len() != val.len() {
                return Err(MalformedExample("sparse indices and values differ in length".into()));
            }
        }
        Ok(e)
    }

    /// One past the largest feature index.
    pub fn dim(&self) -> usize {
        match &self.features {
            Features::Dense(v) => v.len(),
            Features::Sparse { idx, .. } => idx.iter().max().map_or(0, |&m| m as usize + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let e = Example {
            label: 3.0,
            features: Features::Sparse {
                idx: vec![1, 5],
                val: vec![0.5, 2.0],
            },
        };
        assert_eq!(Example::decode(&e.encode()).unwrap(), e);
        assert_eq!(e.dim(), 6);
        assert!(Example::decode(b"\xff\xff\xff\xff\xff\xff").is_err());
        let bad = Example {
            label: 1.0,
            features: Features::Sparse {
                idx: vec![1],
                val: vec![],
            },
        };
        assert!(Example::decode(&bad.encode()).is_err());
    }

    proptest::proptest! {
        #[test]
        fn random_records_decode_or_err(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            if let Ok(e) = Example::decode(&bytes) {
                proptest::prop_assert_eq!(Example::decode(&e.encode()).unwrap().encode(), e.encode());
            }
        }
    }
}
