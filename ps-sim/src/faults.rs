//! The faults of a run, drawn from its generator: partitions of any subset (often the
//! active scheduler with a minority of the nodes), lossy, duplicating and reordering
//! periods, crashes and restarts. Constraints keep the run meaningful: at most
//! `replicas` servers are down or cut off at once (more lose data by design), a
//! majority of the nodes stays up, and at least one scheduler candidate runs. At the
//! end of the fault window the network heals and every process runs again.

pub use crate::fault::Fault;
use crate::world::{App, Ev, Proc, World};
use ps_core::node::Role;

/// Schedules the first draw and the end of the fault window.
pub fn plan(w: &mut World) {
    let first = w.rng.between(100, 1000);
    w.agenda.at(first, Ev::Fault(Fault::Next));
    let end = w.cfg.fault_ms;
    w.agenda.at(end, Ev::Fault(Fault::End));
}

fn servers(w: &World) -> std::ops::Range<usize> {
    w.cfg.schedulers..w.cfg.schedulers + w.cfg.servers
}

/// The partition side holding most nodes.
fn main_side(w: &World) -> u32 {
    let mut count = std::collections::BTreeMap::new();
    for s in w.cfg.schedulers..w.slots.len() {
        *count.entry(w.net.side(s)).or_insert(0) += 1;
    }
    count
        .into_iter()
        .max_by_key(|&(side, n)| (n, std::cmp::Reverse(side)))
        .map_or(0, |(s, _)| s)
}

/// Servers not serving: down, without their table yet, copying their ranges, or cut
/// off from most nodes.
fn servers_out(w: &World) -> usize {
    let main = main_side(w);
    servers(w)
        .filter(|&s| match &w.slots[s].proc {
            Some(Proc {
                app: App::Server(x), ..
            }) => {
                let x = x.lock();
                x.rank().is_none() || x.catching_up() || w.net.side(s) != main
            }
            _ => true,
        })
        .count()
}

/// Nodes that can vote now: running, holding their id, on the side of most nodes.
fn voters_available(w: &World) -> usize {
    let main = main_side(w);
    let dead = w.newest_table().map(|t| t.dead().clone()).unwrap_or_default();
    (w.cfg.schedulers..w.slots.len())
        .filter(|&s| w.net.side(s) == main)
        .filter(|&s| match &w.slots[s].proc {
            Some(p) if !matches!(p.app, App::Sched(_)) => {
                p.po.van().is_ready() && !dead.contains(&p.po.van().my_node().id)
            }
            _ => false,
        })
        .count()
}

/// How many more nodes may go down or be cut off: the election needs a majority of
/// the cluster's nodes holding their ids (more than that lost at once, replacements
/// could not join: by design, see the operations guide).
fn spare_voters(w: &World) -> usize {
    voters_available(w).saturating_sub(w.cfg.nodes() / 2 + 1)
}

/// Applies fault `f` at the world's time.
pub fn apply(w: &mut World, f: Fault) {
    let now = w.now;
    match f {
        Fault::Next => {
            if w.calm {
                return;
            }
            draw(w);
            let next = now + w.rng.between(200, 2000);
            w.agenda.at(next, Ev::Fault(Fault::Next));
        }
        Fault::Partition(_) | Fault::Lossy { .. } if w.calm => {}
        Fault::Crash(_) if w.calm => {}
        Fault::Partition(sides) => {
            w.log.push(format!("{now} ms: partition {sides:?}"));
            w.net.partition(sides);
        }
        Fault::Heal => {
            if w.net.partitioned() || w.net.loss > 0.0 {
                w.log.push(format!("{now} ms: healed"));
            }
            w.net.heal();
        }
        Fault::Lossy { loss, dup, slow } => {
            w.log
                .push(format!("{now} ms: loss {loss:.2} dup {dup:.2} slow {slow:.2}"));
            w.net.loss = loss;
            w.net.dup = dup;
            w.net.slow = slow;
        }
        Fault::Crash(slot) => {
            w.crash(slot, "crashed");
            w.restart_later(slot);
        }
        Fault::Restart(slot) => {
            if !w.up(slot) {
                w.start(slot);
            }
        }
        Fault::End if w.calm => {}
        Fault::End => {
            w.calm = true;
            w.log
                .push(format!("{now} ms: faults end; healed, every process running"));
            w.net.heal();
            for slot in 0..w.slots.len() {
                if !w.up(slot) {
                    w.start(slot);
                }
            }
        }
    }
}

fn draw(w: &mut World) {
    let kind = w.rng.below(10);
    let now = w.now;
    match kind {
        0..=2 if !w.net.partitioned() => {
            if let Some(sides) = partition(w) {
                w.agenda.at(now, Ev::Fault(Fault::Partition(sides)));
                let heal = now + w.rng.between(100, 8000);
                w.agenda.at(heal.min(w.cfg.fault_ms), Ev::Fault(Fault::Heal));
            }
        }
        3..=5 => {
            if let Some(slot) = crash_victim(w) {
                w.agenda.at(now, Ev::Fault(Fault::Crash(slot)));
            }
        }
        6 | 7 if !w.net.partitioned() && w.net.loss == 0.0 => {
            let loss = w.rng.unit() * 0.1;
            let dup = w.rng.unit() * 0.1;
            let slow = w.rng.unit() * 0.2;
            w.agenda.at(now, Ev::Fault(Fault::Lossy { loss, dup, slow }));
            let heal = now + w.rng.between(200, 5000);
            w.agenda.at(heal.min(w.cfg.fault_ms), Ev::Fault(Fault::Heal));
        }
        _ => {}
    }
}

/// A partition: a side with the active scheduler (or a random candidate) and a
/// minority of the nodes, at most `replicas` of them servers; the rest on the other.
fn partition(w: &mut World) -> Option<Vec<u32>> {
    let n = w.slots.len();
    let mut sides = vec![0u32; n];
    let active = w.active();
    let sched = match active {
        Some(a) if w.rng.chance(0.7) => a,
        _ => w.rng.below(w.cfg.schedulers),
    };
    sides[sched] = 1;
    // sometimes another candidate joins it
    for (c, side) in sides.iter_mut().enumerate().take(w.cfg.schedulers) {
        if c != sched && w.rng.chance(0.25) {
            *side = 1;
        }
    }
    let want = w.rng.between(0, spare_voters(w) as u64) as usize;
    let mut servers_cut = 0;
    let nodes: Vec<usize> = (w.cfg.schedulers..n).collect();
    for _ in 0..want {
        let s = nodes[w.rng.below(nodes.len())];
        if sides[s] == 1 {
            continue;
        }
        if w.slots[s].role == Role::Server {
            if servers_cut + servers_out(w) >= w.cfg.replicas {
                continue;
            }
            servers_cut += 1;
        }
        sides[s] = 1;
    }
    Some(sides)
}

fn crash_victim(w: &mut World) -> Option<usize> {
    let n = w.slots.len();
    let slot = w.rng.below(n);
    if !w.up(slot) {
        return None;
    }
    match w.slots[slot].role {
        Role::Scheduler => {
            // the state lives in the candidates' memory: another running one must hold
            // it, as new as this one's (losing the newest state is the documented loss)
            let seq = |c: usize| {
                w.sched_state(c)
                    .filter(|v| !v.core.is_empty())
                    .map(|v| (v.state_epoch, v.seq))
            };
            let mine = seq(slot).unwrap_or_default();
            let others = (0..w.cfg.schedulers)
                .filter(|&c| c != slot && seq(c).is_some_and(|s| s >= mine))
                .count();
            (others > 0).then_some(slot)
        }
        Role::Server => (servers_out(w) < w.cfg.replicas && spare_voters(w) > 0).then_some(slot),
        Role::Worker => (spare_voters(w) > 0).then_some(slot),
    }
}
