//! ps-lite's message signature. ps-lite's resender (its `PS_RESEND`) acknowledges
//! every message but ACK and TERMINATE with an ACK carrying this signature, resends a
//! message whose ACK does not come, and stops the process after 10 resends. With
//! `PS_RESEND` on, a psrs node acknowledges a ps-lite process's messages by it, and
//! tracks the data messages it sends one under it.

/// The signature of a message of application `app_id` from node `sender` to node
/// `recver` with `timestamp`, a request or not, as ps-lite computes it: the app's low
/// 16 bits, the ids' low 8 bits each, then the timestamp and the request bit (the
/// timestamp sign-extended, as C++ converts the `int` it is shifted in).
pub fn pslite_signature(app_id: i32, sender: i32, recver: i32, timestamp: i32, request: bool) -> u64 {
    let low = i64::from(timestamp.wrapping_shl(1) | i32::from(request)) as u64;
    (u64::from(app_id as u16) << 48) | (u64::from(sender as u8) << 40) | (u64::from(recver as u8) << 32) | low
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ps_lites_layout() {
        assert_eq!(pslite_signature(0, 9, 8, 5, true), (9 << 40) | (8 << 32) | 11);
        assert_eq!(
            pslite_signature(1, 9, 8, 5, false),
            (1 << 48) | (9 << 40) | (8 << 32) | 10
        );
        // ids and apps are cut to their low bits, as ps-lite's uint8_t/uint16_t do
        assert_eq!(
            pslite_signature(0x1_0002, 265, 8, 0, false),
            (2 << 48) | (9 << 40) | (8 << 32)
        );
        // a negative timestamp fills the high bits
        assert_eq!(pslite_signature(0, 9, 8, -1, true), u64::MAX);
    }
}
