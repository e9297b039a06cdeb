//! The identity a node's sending (DEALER) sockets carry, which is how the receiving
//! ROUTER socket knows the sender: ps-lite reads the sender id from an identity
//! `ps<id>` and takes anything else for a node without an id. psrs gives a ps-lite
//! peer exactly that, and a psrs peer `ps<id>:<incarnation in hex>`, which psrs reads
//! the same id from: unique per process, so two processes holding one id at a time (a
//! standby scheduler, a replacement while the process it replaces is cut off) never
//! present the same identity to one socket. A ROUTER takes only one peer per identity.

use crate::node::EMPTY_ID;
use crate::van::transport::PeerKind;

/// The identity of node `id` (process `incarnation`) towards a peer of `kind`; None
/// while the node has no id (the ROUTER then makes up one, which reads as no sender).
pub fn identity(id: i32, incarnation: u64, kind: PeerKind) -> Option<Vec<u8>> {
    if id == EMPTY_ID || id < 0 {
        return None;
    }
    Some(match kind {
        PeerKind::PsLite => format!("ps{id}").into_bytes(),
        PeerKind::Psrs => format!("ps{id}:{incarnation:x}").into_bytes(),
    })
}

/// The node id an identity names: `ps` and decimal digits, optionally followed by `:`
/// and anything (psrs's incarnation); [`EMPTY_ID`] for any other identity (libzmq's
/// own, which start with a zero byte, or digits that overflow).
pub fn sender_of(identity: &[u8]) -> i32 {
    let Some(rest) = identity.strip_prefix(b"ps") else {
        return EMPTY_ID;
    };
    let end = rest.iter().position(|&b| b == b':').unwrap_or(rest.len());
    let digits = &rest[..end];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return EMPTY_ID;
    }
    digits
        .iter()
        .try_fold(0i32, |acc, &d| acc.checked_mul(10)?.checked_add(i32::from(d - b'0')))
        .unwrap_or(EMPTY_ID)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ps_lite_peers_see_ps_id_and_psrs_peers_the_incarnation_too() {
        assert_eq!(identity(9, 0xab, PeerKind::PsLite).unwrap(), b"ps9");
        assert_eq!(identity(1, 0xab, PeerKind::Psrs).unwrap(), b"ps1:ab");
        assert_eq!(identity(EMPTY_ID, 1, PeerKind::Psrs), None);
    }

    #[test]
    fn the_id_is_read_back_from_either_form_and_anything_else_is_no_sender() {
        assert_eq!(sender_of(b"ps9"), 9);
        assert_eq!(sender_of(b"ps12:deadbeef"), 12);
        assert_eq!(sender_of(b"ps1:"), 1);
        for bad in [
            &b""[..],
            b"ps",
            b"ps:1",
            b"px9",
            b"ps9x",
            b"\0\x80\0\0\x01",
            b"ps99999999999",
        ] {
            assert_eq!(sender_of(bad), EMPTY_ID, "{bad:?}");
        }
    }
}
