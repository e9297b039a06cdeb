//! The invariants, checked after every step:
//! - at most one scheduler acts in any term, and once a term acted no older term acts
//!   again (no two schedulers' acts overlap in time); after the heal, at most one new
//!   term starts acting (leadership changes at most once);
//! - every push a worker saw answered is in every serving copy of its key range, and
//!   each copy's value is exactly the sum of the pushes it applied, each once;
//! - a scheduler's master ticker never fails (one that is not active leaves its
//!   queues alone);
//! - the master's current pass holds each of its tasks exactly once (todo, pending,
//!   done or failed): none lost, none twice;
//! - after the faults stop, the job finishes with every task done once (or given up)
//!   and every node holding the active scheduler's node table.

use crate::server::PushKey;
use crate::world::{App, Effects, Proc, World};
use ps_core::kv::replication::Holders;
use ps_core::node::{id_to_rank, server_rank_to_id};
use std::collections::{BTreeMap, BTreeSet};

/// A broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// When (simulated ms).
    pub at_ms: u64,
    /// What.
    pub what: String,
}

/// What the invariants remember between steps.
#[derive(Default)]
pub struct Checker {
    /// The process that acted in each term: (slot, incarnation).
    owners: BTreeMap<u64, (usize, u64)>,
    /// The newest term that acted: (term, when, slot).
    newest: Option<(u64, u64, usize)>,
    /// Every push a worker saw answered, with its value.
    acked: BTreeMap<PushKey, i64>,
    /// Every range had a serving copy once (the cluster formed).
    formed: bool,
    /// Every task the master told a worker it counted from its attempt.
    counted: BTreeSet<u64>,
    /// `PS_HEARTBEAT_TIMEOUT` of the run (ms).
    timeout_ms: u64,
    /// Why the run went beyond the fault model the invariants assume, if it did.
    pub beyond: Option<String>,
    /// When the faults ended and the network healed, once it did.
    healed_at: Option<u64>,
    /// Terms that first acted after the heal, with the slot that acted.
    after_heal: Vec<(u64, usize)>,
}

fn fail<T>(at_ms: u64, what: String) -> Result<T, Violation> {
    Err(Violation { at_ms, what })
}

impl Checker {
    /// The invariants of a run whose heartbeat timeout is `timeout_ms`.
    pub fn new(timeout_ms: u64) -> Checker {
        Checker {
            timeout_ms,
            ..Checker::default()
        }
    }

    /// The faults ended at `now`: the network healed and every process runs.
    pub fn healed(&mut self, now: u64) {
        self.healed_at = Some(now);
    }

    /// Takes what a step did.
    pub fn on_effects(&mut self, fx: Effects, now: u64) -> Result<(), Violation> {
        for (slot, inc, act) in fx.acts {
            match self.owners.get(&act.term) {
                Some(&(s, i)) if (s, i) != (slot, inc) => {
                    return fail(
                        now,
                        format!(
                            "two schedulers acted in term {}: slot {s} and slot {slot} ({})",
                            act.term, act.what
                        ),
                    )
                }
                Some(_) => {}
                None => {
                    self.owners.insert(act.term, (slot, inc));
                    if self.healed_at.is_some() {
                        // leadership changes at most once after the heal: a term
                        // acting for the first time is a change
                        self.after_heal.push((act.term, slot));
                        if self.after_heal.len() > 1 {
                            return fail(
                                now,
                                format!(
                                    "more than one election was won after the heal at {} ms (leadership changed twice): (term, slot) {:?}",
                                    self.healed_at.unwrap_or(0),
                                    self.after_heal
                                ),
                            );
                        }
                    }
                }
            }
            match self.newest {
                Some((t, at, s)) if act.term < t => {
                    return fail(
                        now,
                        format!(
                            "scheduler slot {slot} acted in term {} ({}) after slot {s} acted in the newer term {t} at {at} ms",
                            act.term, act.what
                        ),
                    )
                }
                Some((t, _, _)) if act.term == t => {}
                _ => self.newest = Some((act.term, now, slot)),
            }
        }
        for (key, v) in fx.acked {
            self.acked.insert(key, v);
        }
        for (slot, since) in fx.declared {
            // silence from before a scheduler acted (it could not hear) is no death
            match since {
                Some(t) if now > t + self.timeout_ms => {}
                _ => {
                    return fail(
                        now,
                        format!(
                            "scheduler slot {slot} declared nodes dead {} ms after it started acting (heartbeat timeout {} ms)",
                            since.map_or("-".to_string(), |t| (now - t).to_string()),
                            self.timeout_ms
                        ),
                    )
                }
            }
        }
        if let Some((slot, why)) = fx.tick_failures.first() {
            // only the active scheduler times its tasks out: the queues of one that is
            // not are the replicated state it may resume from, not its to change
            return fail(now, format!("scheduler slot {slot}'s master ticker failed: {why}"));
        }
        for task in fx.counted {
            if !self.counted.insert(task) {
                return fail(now, format!("task {task} was counted for two attempts"));
            }
        }
        Ok(())
    }

    /// The state invariants at `w.now`.
    pub fn check(&mut self, w: &World) -> Result<(), Violation> {
        self.check_servers(w)?;
        self.check_queues(w)
    }

    fn check_servers(&mut self, w: &World) -> Result<(), Violation> {
        let now = w.now;
        let ring = Holders::new(w.cfg.servers, w.cfg.replicas);
        // the newest scheduler state (the candidate holding the highest sequence) says
        // which servers were declared dead (they are evicted when they hear it) and
        // which process holds each id
        let table = w.newest_table();
        let (dead, holders): (BTreeSet<i32>, BTreeMap<i32, u64>) = match &table {
            Some(m) => (
                m.dead().clone(),
                m.table().into_iter().map(|n| (n.id, n.incarnation)).collect(),
            ),
            None => (BTreeSet::new(), BTreeMap::new()),
        };
        let mut by_range: BTreeMap<i32, Vec<(PushKey, i64)>> = BTreeMap::new();
        for (k, v) in &self.acked {
            by_range.entry(k.4).or_default().push((*k, *v));
        }
        // copies held by a running process that is not copying them any more
        let mut live_copies: BTreeMap<usize, usize> = (0..w.cfg.servers).map(|r| (r, 0)).collect();
        for s in &w.slots {
            let Some(Proc {
                app: App::Server(x), ..
            }) = &s.proc
            else {
                continue;
            };
            let x = x.lock();
            let sums = x.sums();
            if let Some(e) = &sums.double_apply {
                return fail(now, e.clone());
            }
            let Some(rank) = x.rank() else { continue };
            if !x.catching_up() {
                for r in ring.ranges_of(rank) {
                    *live_copies.entry(r).or_default() += 1;
                }
            }
            for (r, st) in &sums.ranges {
                let sum: i64 = st.applied.values().sum();
                if sum != st.value {
                    return fail(
                        now,
                        format!(
                            "server {rank}'s copy of range {r} is {} but its pushes sum to {sum}",
                            st.value
                        ),
                    );
                }
            }
            let id = server_rank_to_id(rank);
            let serving = !x.catching_up()
                && !dead.contains(&id)
                && holders.get(&id).is_none_or(|&inc| inc == x.node.me().incarnation);
            if !serving {
                continue;
            }
            for r in ring.ranges_of(rank) {
                let st = sums.ranges.get(&r);
                for (k, v) in by_range.get(&(r as i32)).into_iter().flatten() {
                    if st.and_then(|st| st.applied.get(k)) != Some(v) {
                        return fail(
                            now,
                            format!(
                                "push {k:?} of {v} was answered to worker {}, but server {rank}'s copy of range {r} does not hold it",
                                k.0
                            ),
                        );
                    }
                }
            }
            let _ = id_to_rank(id);
        }
        let uncovered: Vec<usize> = live_copies.iter().filter(|(_, &n)| n == 0).map(|(&r, _)| r).collect();
        if uncovered.is_empty() {
            self.formed = true;
        } else if self.formed && self.beyond.is_none() {
            // more than `replicas` copies of a range were out at once: its pushes may be
            // lost by design, which the sums invariant does not cover
            self.beyond = Some(format!("at {now} ms no running server held ranges {uncovered:?}"));
        }
        Ok(())
    }

    fn check_queues(&self, w: &World) -> Result<(), Violation> {
        for s in &w.slots {
            let Some(Proc { app: App::Sched(x), .. }) = &s.proc else {
                continue;
            };
            let x = x.lock();
            let Some(c) = &x.coordinator else { continue };
            let m = c.master();
            let q = m.queues();
            if q.dataset.is_none() {
                continue;
            }
            let n = q.template.len() as u64;
            let mut seen = BTreeSet::new();
            let ids = q
                .todo
                .iter()
                .chain(q.pending.values())
                .chain(q.done.iter())
                .chain(q.failed.iter())
                .map(|e| e.task.id);
            for id in ids {
                if !seen.insert(id) {
                    return fail(
                        w.now,
                        format!("task {id} is twice in the master's queues (slot {})", x.slot),
                    );
                }
            }
            let want: BTreeSet<u64> = (q.epoch * n..(q.epoch + 1) * n).collect();
            if seen != want {
                let lost: Vec<_> = want.difference(&seen).collect();
                let extra: Vec<_> = seen.difference(&want).collect();
                return fail(
                    w.now,
                    format!(
                        "the master of slot {} lost tasks {lost:?} of pass {} (foreign: {extra:?})",
                        x.slot,
                        q.epoch + 1
                    ),
                );
            }
        }
        Ok(())
    }

    /// After the faults: true once the job finished everywhere; an error if it
    /// finished wrongly (tasks not each done once, tables that disagree).
    pub fn finished(&self, w: &World) -> Result<bool, Violation> {
        if (0..w.slots.len()).any(|s| !w.up(s)) {
            return Ok(false);
        }
        let Some(slot) = w.active() else { return Ok(false) };
        let Some(a) = w.scheduler(slot) else { return Ok(false) };
        let a = a.lock();
        let Some(c) = &a.coordinator else { return Ok(false) };
        let m = c.master();
        if !a.finished() || !m.complete() {
            return Ok(false);
        }
        for s in &w.slots {
            let done = match &s.proc {
                Some(Proc {
                    app: App::Server(x), ..
                }) => x.lock().finished(),
                Some(Proc {
                    app: App::Worker(x), ..
                }) => x.lock().finished(),
                _ => true,
            };
            if !done {
                return Ok(false);
            }
        }
        let q = m.queues();
        let total = w.cfg.tasks as u64 * w.cfg.passes;
        if q.total_done + q.given_up.len() as u64 != total {
            return fail(
                w.now,
                format!(
                    "the job finished with {} tasks done and {} given up, not {total}",
                    q.total_done,
                    q.given_up.len()
                ),
            );
        }
        // the workers were told of each task counted once at most (a worker that
        // crashed may not have heard its last answer)
        if self.counted.len() as u64 > total {
            return fail(
                w.now,
                format!(
                    "the workers were told of {} tasks counted, more than {total}",
                    self.counted.len()
                ),
            );
        }
        let table: BTreeMap<i32, u64> = w.slots[slot]
            .proc
            .as_ref()
            .map(|p| p.po.nodes().into_iter().map(|n| (n.id, n.incarnation)).collect())
            .unwrap_or_default();
        for s in &w.slots {
            let (who, t) = match &s.proc {
                Some(
                    p @ Proc {
                        app: App::Server(_) | App::Worker(_),
                        ..
                    },
                ) => (p.po.van().my_node().id, p.po.nodes()),
                _ => continue,
            };
            let mine: BTreeMap<i32, u64> = t.iter().map(|n| (n.id, n.incarnation)).collect();
            if mine != table {
                return fail(
                    w.now,
                    format!("the job finished, but node {who}'s table {mine:?} differs from the scheduler's {table:?}"),
                );
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::Act;

    fn acts(list: &[(usize, u64)]) -> Effects {
        Effects {
            acts: list
                .iter()
                .map(|&(slot, term)| {
                    (
                        slot,
                        slot as u64 + 1,
                        Act {
                            term,
                            what: "Heartbeat".into(),
                        },
                    )
                })
                .collect(),
            ..Effects::default()
        }
    }

    /// One new term after the heal is the one change allowed; a second is flapping.
    /// Terms that acted before the heal do not count.
    #[test]
    fn leadership_changes_at_most_once_after_the_heal() {
        let mut c = Checker::new(1000);
        c.on_effects(acts(&[(0, 1), (1, 2)]), 100).unwrap();
        c.healed(500);
        c.on_effects(acts(&[(1, 2)]), 600).unwrap();
        c.on_effects(acts(&[(0, 3)]), 700).unwrap();
        c.on_effects(acts(&[(0, 3)]), 800).unwrap();
        let v = c.on_effects(acts(&[(1, 4)]), 1900).unwrap_err();
        assert!(v.what.contains("won after the heal"), "{}", v.what);
    }
}
