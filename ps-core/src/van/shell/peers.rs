//! The van's wiring of [`crate::protocol::peers`]: screens received messages by
//! incarnation, applies node tables and death notices, and stops a process the
//! scheduler declared dead. Only wiring: the rules are in the pure `Peers`.

use super::Van;
use crate::message::Message;
use crate::node::Node;
use crate::protocol::peers::Admit;
use crate::protocol::resender::{needs_ack, signature};
use std::sync::atomic::Ordering;

impl Van {
    /// False if `msg` must be dropped: it was meant for an earlier process of this
    /// node's id (acknowledged, so that its sender stops resending it), or it is data
    /// from a process declared dead or replaced.
    pub(super) fn admit(&self, msg: &Message) -> bool {
        let mine = self.me.read().incarnation;
        let verdict = self.peers.read().admit(&msg.meta, mine);
        match verdict {
            Admit::Accept => return true,
            Admit::NotForMe => log::debug!("dropped {msg}: meant for an earlier process of id {}", msg.meta.recver),
            Admit::FromTheDead => log::debug!("dropped {msg}: its sender was declared dead or replaced"),
        }
        self.stats.stale.fetch_add(1, Ordering::Relaxed);
        if self.resender.is_some() && needs_ack(&msg.meta) {
            self.ack(msg, signature(&msg.meta));
        }
        false
    }

    /// Records a node table (full or partial); returns the ids a new process took
    /// while they were dead.
    pub(super) fn peers_from_table(&self, nodes: &[Node]) -> Vec<i32> {
        self.peers.write().on_table(nodes)
    }

    /// Applies a death notice naming `nodes`: returns the ids whose current process is
    /// now dead; a notice naming this process stops it.
    pub(super) fn on_death_notice(&self, nodes: &[Node]) -> Vec<i32> {
        let me = self.my_node();
        let notice = self.peers.write().on_death(nodes, &me);
        let ignored: Vec<i32> = nodes
            .iter()
            .map(|n| n.id)
            .filter(|id| !notice.dead.contains(id) && *id != me.id)
            .collect();
        if !ignored.is_empty() {
            log::debug!("death notice about earlier processes of {ignored:?} ignored");
        }
        if notice.evicted {
            self.evicted(&format!(
                "the scheduler declared this node ({me}) dead: no heartbeat reached it within {:?}",
                self.cfg.heartbeat_timeout
            ));
        }
        notice.dead
    }

    /// The scheduler's own deaths (`ids`, declared by its liveness check): the
    /// processes its table has for them.
    pub(super) fn on_declared_dead(&self, ids: &[i32]) -> Vec<i32> {
        let nodes: Vec<Node> = {
            let table = self.table.read();
            ids.iter()
                .filter_map(|id| table.iter().find(|n| n.id == *id).cloned())
                .collect()
        };
        let mut dead = self.on_death_notice(&nodes);
        // ids missing from the table (not expected) are taken as they are
        dead.extend(ids.iter().filter(|id| !nodes.iter().any(|n| n.id == **id)));
        dead
    }

    /// The process of `id` declared dead, if the last one heard of under `id` was (a
    /// replica telling a newcomer that took over `id` from the process declared dead).
    pub fn dead_incarnation(&self, id: i32) -> Option<u64> {
        self.peers.read().dead_incarnation(id)
    }

    /// This process may not go on (declared dead, or refused when it registered
    /// again): tells the layer above, whose owner stops the process.
    pub(super) fn evicted(&self, reason: &str) {
        log::error!("{reason}");
        match self.handler() {
            Some(h) => h.on_evicted(reason),
            None => log::error!("no layer above this van to report the eviction to"),
        }
    }
}
