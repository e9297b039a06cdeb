//! The stored form of the task queues: bincode, then gzip (the seed's gob + gzip).
//! Decoding is bounded, so corrupt or hostile bytes give an error, never a huge
//! allocation or a panic.

use super::error::MasterError;
use super::queues::TaskQueues;
use bincode::Options;
use std::io::{Read, Write};

/// Largest decompressed state accepted.
const MAX_STATE: u64 = 1 << 30;

fn codec() -> impl Options {
    bincode::DefaultOptions::new().with_limit(MAX_STATE)
}

/// Serializes the queues (bincode, then gzip, as the seed's gob + gzip). Fails only
/// if the state exceeds the 1 GiB limit that [`decode_queues`] would refuse.
pub fn encode_queues(q: &TaskQueues) -> Result<Vec<u8>, MasterError> {
    let raw = codec()
        .serialize(q)
        .map_err(|e| MasterError::Corrupt(format!("cannot serialize the task queues: {e}")))?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).map_err(|e| MasterError::Corrupt(e.to_string()))?;
    gz.finish().map_err(|e| MasterError::Corrupt(e.to_string()))
}

/// Reads queues written by [`encode_queues`]. Corrupt bytes (bad gzip, bad bincode,
/// trailing garbage, over 1 GiB) are an error saying the stored queues are corrupt.
pub fn decode_queues(bytes: &[u8]) -> Result<TaskQueues, MasterError> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(MAX_STATE)
        .read_to_end(&mut raw)
        .map_err(|e| MasterError::Corrupt(format!("the stored task queues are corrupt: {e}")))?;
    codec()
        .reject_trailing_bytes()
        .deserialize(&raw)
        .map_err(|e| MasterError::Corrupt(format!("the stored task queues are corrupt: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let q = TaskQueues {
            epoch: 2,
            total_done: 7,
            ..Default::default()
        };
        let bytes = encode_queues(&q).unwrap();
        assert_eq!(decode_queues(&bytes).unwrap(), q);
        for bad in [&b""[..], b"garbage", &bytes[..bytes.len() - 3]] {
            let e = decode_queues(bad).unwrap_err();
            assert!(matches!(e, super::MasterError::Corrupt(_)), "{e:?}");
            assert!(e.to_string().contains("stored task queues are corrupt"), "{e}");
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&[0xff; 64]).unwrap();
        assert!(decode_queues(&gz.finish().unwrap()).is_err(), "valid gzip, bad content");
    }
}
