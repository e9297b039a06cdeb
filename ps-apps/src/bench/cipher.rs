//! The cipher's own speed on one core: AES-128-GCM, the suite psrs's TLS links
//! negotiate, from the same `ring` code rustls runs, sealing and opening 16 KiB records
//! (the TLS 1.3 record size) in a buffer that stays in cache. A TLS link cannot move
//! bytes faster than one core seals them on the sending side and opens them on the
//! receiving side; with the plaintext link's own cost per byte on top, this bounds what
//! TLS can reach against plaintext (`scripts/bench-tls.sh` prints it beside its
//! figures).

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use std::time::{Duration, Instant};

/// Plaintext bytes per record.
pub const RECORD: usize = 16 * 1024;

/// What one core's AES-128-GCM did.
#[derive(Clone, Copy, Debug)]
pub struct CipherFigure {
    /// Plaintext gigabits per second sealed.
    pub seal_gbps: f64,
    /// Plaintext gigabits per second opened (tags checked).
    pub open_gbps: f64,
}

fn nonce(i: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&i.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

/// Times sealing 16 KiB records for `each`, then sealing and opening them again (a
/// record opened in place is plaintext again, ready for the next seal: no copy is
/// timed); the open rate is what the second loop took beyond the seals.
pub fn measure(each: Duration) -> CipherFigure {
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &[7u8; 16]).expect("a 16-byte key"));
    let aad = [23u8, 3, 3, 0x40, 0x11];
    let mut record = vec![1u8; RECORD + 16];
    let mut run = |open: bool| {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < each {
            for _ in 0..64 {
                let (body, tag_room) = record.split_at_mut(RECORD);
                let tag = key
                    .seal_in_place_separate_tag(nonce(n), Aad::from(aad), body)
                    .expect("sealed");
                if open {
                    tag_room.copy_from_slice(tag.as_ref());
                    key.open_in_place(nonce(n), Aad::from(aad), &mut record)
                        .expect("the tag matches");
                }
                n += 1;
            }
        }
        start.elapsed().as_secs_f64() / n as f64
    };
    let seal_s = run(false);
    let both_s = run(true);
    let gbps = |secs: f64| RECORD as f64 * 8.0 / secs / 1e9;
    CipherFigure {
        seal_gbps: gbps(seal_s),
        open_gbps: gbps((both_s - seal_s).max(seal_s / 100.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_are_measured() {
        let f = measure(Duration::from_millis(20));
        assert!(f.seal_gbps > 0.0 && f.open_gbps > 0.0, "{f:?}");
    }
}
