//! Sealed records: the encrypted framing of a TCP link after a sealed handshake.
//!
//! A record is a u32 LE length `n` then `n` bytes: the AES-256-GCM ciphertext of at
//! most [`MAX_RECORD`] plaintext bytes followed by its 16-byte tag. The nonce is the
//! record's sequence number on the link (96 bits: 4 zero bytes, then u64 LE), the
//! associated data its length prefix, and the key is the handshake's session key
//! (fresh per connection), so a record cannot be reordered, replayed, cut or moved
//! to another connection without failing to open.
//!
//! The cipher is `ring`'s AES-256-GCM (AES-NI / VAES and carry-less multiply where
//! the CPU has them, constant-time software otherwise). A portable ChaCha20-Poly1305
//! would be the bottleneck of an encrypted link (0.22-0.36x of plaintext at 64 KB-1 MB
//! in a release build; `ring`'s ChaCha20-Poly1305 assembly ~0.3x at 1 MB; AES-256-GCM
//! ~0.5x).

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

/// Most plaintext bytes in one record.
pub const MAX_RECORD: usize = 1 << 18;
/// Bytes a record adds to its plaintext (length prefix and tag).
pub const OVERHEAD: usize = 4 + TAG;
const TAG: usize = 16;

fn nonce(n: u64) -> Nonce {
    let mut b = [0u8; 12];
    b[4..].copy_from_slice(&n.to_le_bytes());
    // unique: the sequence number of a record under a key used for one link only
    Nonce::assume_unique_for_key(b)
}

fn cipher(key: &[u8; 32]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte AES-256 key"))
}

/// Seals the records one side sends.
pub struct Sealer {
    cipher: LessSafeKey,
    seq: u64,
}

impl Sealer {
    /// A sealer with the session key.
    pub fn new(key: &[u8; 32]) -> Sealer {
        Sealer {
            cipher: cipher(key),
            seq: 0,
        }
    }

    /// Seals `buf` in place into one record. On entry `buf` holds 4 placeholder bytes
    /// then at most [`MAX_RECORD`] plaintext bytes; on return it is the whole record.
    pub fn seal(&mut self, buf: &mut Vec<u8>) {
        let plain = buf.len() - 4;
        assert!(plain <= MAX_RECORD, "record of {plain} bytes");
        let len = ((plain + TAG) as u32).to_le_bytes();
        buf[..4].copy_from_slice(&len);
        let tag = self
            .cipher
            .seal_in_place_separate_tag(nonce(self.seq), Aad::from(len), &mut buf[4..])
            .expect("a record is far below the cipher's limit");
        self.seq += 1;
        buf.extend_from_slice(tag.as_ref());
    }
}

/// Opens the records the other side sent, in order.
pub struct Opener {
    cipher: LessSafeKey,
    seq: u64,
}

/// A record that is not one: too long, too short, or failing authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealError(pub String);

impl Opener {
    /// An opener with the session key.
    pub fn new(key: &[u8; 32]) -> Opener {
        Opener {
            cipher: cipher(key),
            seq: 0,
        }
    }

    /// Checks a record's length prefix; returns the bytes that follow it.
    pub fn body_len(prefix: [u8; 4]) -> Result<usize, SealError> {
        let n = u32::from_le_bytes(prefix) as usize;
        if !(TAG..=MAX_RECORD + TAG).contains(&n) {
            return Err(SealError(format!("a sealed record of {n} bytes")));
        }
        Ok(n)
    }

    /// Opens a record body (after its prefix `prefix`) in place; returns the plaintext
    /// length (the first bytes of `body`).
    pub fn open(&mut self, prefix: [u8; 4], body: &mut [u8]) -> Result<usize, SealError> {
        let n = Opener::body_len(prefix)?;
        if body.len() != n {
            return Err(SealError("a sealed record of the wrong length".into()));
        }
        self.cipher
            .open_in_place(nonce(self.seq), Aad::from(prefix), body)
            .map_err(|_| SealError("a sealed record failed authentication (tampered, replayed or wrong key)".into()))?;
        self.seq += 1;
        Ok(n - TAG)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(s: &mut Sealer, text: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 4];
        b.extend_from_slice(text);
        s.seal(&mut b);
        b
    }

    fn open(o: &mut Opener, rec: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut body = rec[4..].to_vec();
        let n = o.open(rec[..4].try_into().unwrap(), &mut body)?;
        Ok(body[..n].to_vec())
    }

    #[test]
    fn records_round_trip_in_order_only() {
        let (mut s, mut o) = (Sealer::new(&[1; 32]), Opener::new(&[1; 32]));
        let (a, b) = (record(&mut s, b"hello"), record(&mut s, b""));
        assert_eq!(a.len(), 5 + OVERHEAD);
        assert_ne!(&a[4..9], b"hello");
        assert_eq!(open(&mut o, &a).unwrap(), b"hello");
        // a replayed record fails: the sequence moved on
        assert!(open(&mut o, &a).is_err());
        let mut o2 = Opener::new(&[1; 32]);
        assert!(open(&mut o2, &b).is_err(), "out of order");
    }

    #[test]
    fn tampering_and_wrong_keys_fail() {
        let mut s = Sealer::new(&[1; 32]);
        let mut a = record(&mut s, b"secret values");
        assert!(open(&mut Opener::new(&[2; 32]), &a).is_err());
        a[7] ^= 1;
        assert!(open(&mut Opener::new(&[1; 32]), &a).is_err());
        assert!(Opener::body_len([0, 0, 0, 0]).is_err());
        assert!(Opener::body_len(u32::MAX.to_le_bytes()).is_err());
    }
}
