//! A node's view of the voters' processes: which process (incarnation) it holds for
//! each voter id, from the node tables it took. An id outlives its process (a
//! replacement takes a dead node's id), so a candidate whose state is older than a
//! node's may count, for an id, a process the node knows was replaced. A node's vote
//! carries its view, and the candidate counts no id its view disagrees on
//! ([`super::Candidacy::on_vote`]); a node's heartbeats carry the view's
//! [`fingerprint`], and the active scheduler counts a replacement only once a majority
//! of the settled voters hold the table naming it ([`super::Candidacy::on_view`]).
//! Together: any majority a candidate could gather shares a node with that majority,
//! whose vote names the replacement, so the replaced process is never counted on one
//! side while its replacement counts on the other, however long the partition.

use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The process (incarnation) held for each voter id.
pub type View = BTreeMap<i32, u64>;

/// The view of `voters` through `holder` (the process held for an id, if known).
pub fn view_of(voters: &BTreeSet<i32>, holder: impl Fn(i32) -> Option<u64>) -> View {
    voters
        .iter()
        .filter_map(|&id| holder(id).map(|inc| (id, inc)))
        .collect()
}

/// A fingerprint of `view`: equal views have equal fingerprints on every build (the
/// first 8 bytes of a SHA-256 over the pairs in id order), and a fingerprint is
/// never 0, which a heartbeat carrying none reports.
pub fn fingerprint(view: &View) -> u64 {
    let mut h = Sha256::new();
    for (id, inc) in view {
        h.update(id.to_le_bytes());
        h.update(inc.to_le_bytes());
    }
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_le_bytes(b).max(1)
}

/// `view` as a vote carries it.
pub fn encode(view: &View) -> Bytes {
    Bytes::from(bincode::serialize(view).unwrap_or_default())
}

/// The view a vote carries (`None` when the frame is missing or malformed: such a
/// vote names no replacement).
pub fn decode(frame: Option<&Bytes>) -> Option<View> {
    bincode::deserialize(frame?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_round_trips_and_its_fingerprint_names_it() {
        let voters: BTreeSet<i32> = [8, 9, 10].into();
        let v = view_of(&voters, |id| (id != 9).then_some(id as u64 * 100));
        assert_eq!(v, View::from([(8, 800), (10, 1000)]));
        assert_eq!(decode(Some(&encode(&v))), Some(v.clone()));
        assert_eq!(decode(Some(&Bytes::from_static(b"\xff"))), None);
        assert_eq!(decode(None), None);
        let mut w = v.clone();
        assert_eq!(fingerprint(&v), fingerprint(&w));
        w.insert(10, 1001);
        assert_ne!(fingerprint(&v), fingerprint(&w), "another process for an id");
        assert_ne!(fingerprint(&View::new()), 0);
    }
}
