//! A replacement server catching up (pure). A server that took over a dead server's
//! id holds the same ranges as the dead one, but empty. For each of them it asks the
//! range's first live holder (its *source*) for a copy. The source, under the lock it
//! applies pushes under, takes the copy (the range's state and the request ids it
//! applied) and from that moment forwards every push of the range to the newcomer
//! too ([`Joiners`]). Forwards reaching the newcomer before the copy are buffered and
//! applied after it; the copied request ids make a push that is both in the copy and
//! forwarded count once. When every range is copied the newcomer announces it has
//! rejoined and becomes a holder again (primary of its own range): the cluster is back
//! to k copies. Until then every node treats it as not serving.
//!
//! Time is injected (milliseconds); `F` is a buffered forward.

use super::holders::Holders;
use std::collections::{BTreeMap, BTreeSet};

/// A copy to ask for: range `range` from server rank `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fetch {
    /// The key range (server rank) to copy.
    pub range: usize,
    /// The rank to copy it from.
    pub from: usize,
}

/// Ask a source again after this long without its copy (a lost request, a busy
/// source).
pub const FETCH_RETRY_MS: u64 = 5_000;

enum Phase<F> {
    Fetching {
        from: usize,
        asked_ms: u64,
        buffered: Vec<F>,
    },
    Copied,
    /// Every other holder is dead: nothing to copy from.
    Lost,
}

/// The newcomer's side: which ranges are still being copied, from whom.
pub struct CatchUp<F> {
    holders: Holders,
    me: usize,
    ranges: BTreeMap<usize, Phase<F>>,
    announced: bool,
}

impl<F> CatchUp<F> {
    /// Starts catching up every range `me` holds; `unavailable` are the ranks dead or
    /// themselves catching up. Returns the copies to ask for.
    pub fn new(holders: Holders, me: usize, unavailable: &BTreeSet<usize>, now_ms: u64) -> (CatchUp<F>, Vec<Fetch>) {
        let mut c = CatchUp {
            holders,
            me,
            ranges: holders.ranges_of(me).into_iter().map(|r| (r, Phase::Lost)).collect(),
            announced: false,
        };
        let fetches = c.reassign(unavailable, now_ms, |_| true);
        (c, fetches)
    }

    fn source(&self, range: usize, unavailable: &BTreeSet<usize>) -> Option<usize> {
        self.holders
            .live_holders(range, unavailable)
            .into_iter()
            .find(|&r| r != self.me)
    }

    /// Picks a source for every range `pick` selects that is not copied yet.
    fn reassign(&mut self, unavailable: &BTreeSet<usize>, now_ms: u64, pick: impl Fn(usize) -> bool) -> Vec<Fetch> {
        let ranges: Vec<usize> = self.ranges.keys().copied().filter(|&r| pick(r)).collect();
        let mut out = Vec::new();
        for range in ranges {
            let src = self.source(range, unavailable);
            let phase = self.ranges.get_mut(&range).expect("listed above");
            if matches!(phase, Phase::Copied) {
                continue;
            }
            let buffered = match std::mem::replace(phase, Phase::Lost) {
                Phase::Fetching { buffered, .. } => buffered,
                _ => Vec::new(),
            };
            if let Some(from) = src {
                *phase = Phase::Fetching {
                    from,
                    asked_ms: now_ms,
                    buffered,
                };
                out.push(Fetch { range, from });
            }
        }
        out
    }

    /// A forward of `range` arrived: `Some` if it is to be applied now, `None` if it
    /// was buffered until the range's copy is in.
    pub fn on_forward(&mut self, range: usize, f: F) -> Option<F> {
        match self.ranges.get_mut(&range) {
            Some(Phase::Fetching { buffered, .. }) => {
                buffered.push(f);
                None
            }
            _ => Some(f),
        }
    }

    /// True if the copy of `range` from `from` is the one awaited.
    pub fn expects(&self, range: usize, from: usize) -> bool {
        matches!(self.ranges.get(&range), Some(Phase::Fetching { from: f, .. }) if *f == from)
    }

    /// The copy of `range` from `from` arrived: `Some(buffered forwards)`, to apply
    /// after installing the copy; `None` if it is not the copy being waited for (a
    /// duplicate, or from a source given up): drop it.
    pub fn on_copy(&mut self, range: usize, from: usize) -> Option<Vec<F>> {
        let phase = self.ranges.get_mut(&range)?;
        match phase {
            Phase::Fetching { from: f, .. } if *f == from => match std::mem::replace(phase, Phase::Copied) {
                Phase::Fetching { buffered, .. } => Some(buffered),
                _ => None,
            },
            _ => None,
        }
    }

    /// Ranks became unavailable: ranges whose source is among them are asked of the
    /// next live holder.
    pub fn on_dead(&mut self, unavailable: &BTreeSet<usize>, now_ms: u64) -> Vec<Fetch> {
        let lost: BTreeSet<usize> = self
            .ranges
            .iter()
            .filter(|(_, p)| matches!(p, Phase::Fetching { from, .. } if unavailable.contains(from)))
            .map(|(&r, _)| r)
            .collect();
        self.reassign(unavailable, now_ms, |r| lost.contains(&r))
    }

    /// Copies asked more than [`FETCH_RETRY_MS`] ago, asked again.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Fetch> {
        let mut out = Vec::new();
        for (&range, p) in self.ranges.iter_mut() {
            if let Phase::Fetching { from, asked_ms, .. } = p {
                if now_ms.saturating_sub(*asked_ms) >= FETCH_RETRY_MS {
                    *asked_ms = now_ms;
                    out.push(Fetch { range, from: *from });
                }
            }
        }
        out
    }

    /// True once `range` is copied (or is not one of this server's ranges).
    pub fn copied(&self, range: usize) -> bool {
        self.ranges.get(&range).is_none_or(|p| matches!(p, Phase::Copied))
    }

    /// True once every range is copied.
    pub fn done(&self) -> bool {
        self.ranges.values().all(|p| matches!(p, Phase::Copied))
    }

    /// Ranges no live holder can give.
    pub fn lost(&self) -> Vec<usize> {
        self.ranges
            .iter()
            .filter(|(_, p)| matches!(p, Phase::Lost))
            .map(|(&r, _)| r)
            .collect()
    }

    /// True exactly once, when every range is copied: time to announce the rejoin.
    pub fn take_rejoin(&mut self) -> bool {
        if self.announced || !self.done() {
            return false;
        }
        self.announced = true;
        true
    }
}

/// After a newcomer announced its rejoin, its sources keep relaying forwards to it
/// this long: a primary that has not heard the announcement yet still forwards to the
/// source only.
pub const RELAY_GRACE_MS: u64 = 10_000;

/// The source's side: per range, the newcomers it gave a copy to (from the copy until
/// they die). Every push of the range this server applies from then on reaches them:
/// as primary it forwards them the push with the other live holders
/// ([`Joiners::targets`]); as a backup it relays them the forwards it applies
/// ([`Joiners::relay_targets`]). The relay closes the gap of k >= 2: a push the
/// range's primary applied (or had in flight to this source) after the copy was taken
/// reaches the newcomer through the source even when the primary is not the source
/// (its view of who is dead was different) or does not yet know the newcomer.
#[derive(Default)]
pub struct Joiners {
    by_range: BTreeMap<usize, BTreeSet<usize>>,
    /// When each newcomer's rejoin was heard.
    rejoined: BTreeMap<usize, u64>,
    /// The process (incarnation) of each newcomer.
    process: BTreeMap<usize, u64>,
}

impl Joiners {
    /// `rank`, process `incarnation`, took a copy of `range`: forward it that range's
    /// pushes from now on.
    pub fn add(&mut self, range: usize, rank: usize, incarnation: u64) {
        self.by_range.entry(range).or_default().insert(rank);
        self.rejoined.remove(&rank);
        self.process.insert(rank, incarnation);
    }

    /// The ranks of `declared` (declared dead, or left) whose process is dead:
    /// all but those whose newcomer, a copy of this server's, is another process than
    /// the one declared dead (`dead_process` of a rank: the incarnation declared dead
    /// if the last process heard of under its id was). A newcomer's copy request can
    /// overtake the table that revives its id: until that table comes its id is still
    /// among the dead, yet its acknowledgements are to be waited for.
    pub fn dead(&self, declared: &BTreeSet<usize>, dead_process: impl Fn(usize) -> Option<u64>) -> BTreeSet<usize> {
        declared
            .iter()
            .copied()
            .filter(|&r| match self.process.get(&r) {
                Some(&inc) => dead_process(r) == Some(inc),
                None => true,
            })
            .collect()
    }

    /// Where a push of `range` is forwarded: `others` (the range's live holders but
    /// this one) and the newcomers, once each, never `me`.
    pub fn targets(&self, range: usize, me: usize, others: Vec<usize>) -> Vec<usize> {
        let mut out = others;
        for &r in self.by_range.get(&range).into_iter().flatten() {
            if r != me && !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }

    /// Where a forward of `range` from rank `from`, applied here, is relayed: the
    /// newcomers of the range but `from` and `me`, until [`RELAY_GRACE_MS`] after
    /// their rejoin (by then every primary forwards to them itself).
    pub fn relay_targets(&self, range: usize, me: usize, from: usize, now_ms: u64) -> Vec<usize> {
        self.by_range
            .get(&range)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&r| r != me && r != from)
            .filter(|r| {
                self.rejoined
                    .get(r)
                    .is_none_or(|&t| now_ms.saturating_sub(t) < RELAY_GRACE_MS)
            })
            .collect()
    }

    /// Newcomer `rank` announced at `now_ms` that it holds its ranges again.
    pub fn rejoined(&mut self, rank: usize, now_ms: u64) {
        self.rejoined.entry(rank).or_insert(now_ms);
    }

    /// Forgets newcomers that died (a later one copies again).
    pub fn forget(&mut self, dead: &BTreeSet<usize>) {
        for set in self.by_range.values_mut() {
            set.retain(|r| !dead.contains(r));
        }
        self.by_range.retain(|_, s| !s.is_empty());
        self.rejoined.retain(|r, _| !dead.contains(r));
        self.process.retain(|r, _| !dead.contains(r));
    }
}

#[cfg(test)]
#[path = "catchup_tests.rs"]
mod tests;
