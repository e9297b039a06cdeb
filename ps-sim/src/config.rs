//! What one simulated run looks like: the cluster, the job, the timings, the fault
//! window and the planted bugs (off except in the simulator's own tests).

use crate::scheduler::SchedulerBugs;
use crate::server::ServerBugs;

/// Bugs planted on purpose, each of a kind the invariants must catch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plant {
    /// Servers answer pushes before their replicas applied them.
    pub server: ServerBugs,
    /// Masters forget a pending task when they resume; the active scheduler keeps
    /// no lease; and the production code's switches (liveness counts silence from
    /// before acting, campaigns without pre-votes, a task counts again from another
    /// attempt).
    pub scheduler: SchedulerBugs,
}

impl Plant {
    /// Every `--plant` name.
    pub const NAMES: [&'static str; 6] = [
        "no-lease",
        "early-ack",
        "forget-pending",
        "silence-before-acting",
        "count-every-attempt",
        "no-pre-vote",
    ];

    /// Parses a `--plant` name: `no-lease`, `early-ack`, `forget-pending` (the
    /// simulator's own), `silence-before-acting`, `count-every-attempt`, `no-pre-vote`
    /// (switches in the production code, [`ps_core::config::Planted`] and
    /// [`ps_apps::master::MasterPlanted`]).
    pub fn parse(name: &str) -> Result<Plant, String> {
        let mut p = Plant::default();
        match name {
            "early-ack" => p.server.early_ack = true,
            "forget-pending" => p.scheduler.forget_pending = true,
            "no-lease" => p.scheduler.no_lease = true,
            "silence-before-acting" => p.scheduler.node.silence_before_acting = true,
            "count-every-attempt" => p.scheduler.master.count_every_attempt = true,
            "no-pre-vote" => p.scheduler.node.no_pre_vote = true,
            other => return Err(format!("'{other}' is not a planted bug ({})", Plant::NAMES.join(", "))),
        }
        Ok(p)
    }
}

/// A run's shape.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Scheduler candidates (the first starts active).
    pub schedulers: usize,
    /// Servers.
    pub servers: usize,
    /// Workers.
    pub workers: usize,
    /// Extra copies of each key range (`PS_REPLICAS`).
    pub replicas: usize,
    /// Tasks per pass.
    pub tasks: usize,
    /// Passes over the data.
    pub passes: u64,
    /// `PS_HEARTBEAT_INTERVAL` in ms.
    pub heartbeat_ms: u64,
    /// `PS_HEARTBEAT_TIMEOUT` in ms.
    pub timeout_ms: u64,
    /// `PS_RESEND_TIMEOUT` in ms.
    pub resend_ms: u64,
    /// Faults happen until this time (ms); then the network heals and every
    /// process is restarted.
    pub fault_ms: u64,
    /// After the faults stop, the job must finish within this (ms).
    pub finish_ms: u64,
    /// Bugs planted on purpose.
    pub plant: Plant,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            schedulers: 2,
            servers: 2,
            workers: 3,
            replicas: 1,
            tasks: 10,
            passes: 6,
            heartbeat_ms: 100,
            timeout_ms: 500,
            resend_ms: 200,
            fault_ms: 8_000,
            finish_ms: 60_000,
            plant: Plant::default(),
        }
    }
}

impl SimConfig {
    /// Checks the shape; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.schedulers == 0 || self.schedulers > 16 {
            return Err(format!("schedulers: {} is not 1-16", self.schedulers));
        }
        if self.servers == 0 || self.workers == 0 {
            return Err("a run needs at least one server and one worker".into());
        }
        if self.replicas >= self.servers {
            return Err(format!(
                "replicas: {} copies need at least {} servers",
                self.replicas,
                self.replicas + 1
            ));
        }
        if self.tasks == 0 || self.passes == 0 {
            return Err("a run needs at least one task and one pass".into());
        }
        if self.timeout_ms <= self.heartbeat_ms {
            return Err("the heartbeat timeout must exceed the heartbeat interval".into());
        }
        Ok(())
    }

    /// Servers and workers: the nodes of the cluster.
    pub fn nodes(&self) -> usize {
        self.servers + self.workers
    }
}

impl SimConfig {
    /// The `psrs simulate` options that give this shape (those that differ from the
    /// default), for a replay command.
    pub fn args(&self) -> String {
        let d = SimConfig::default();
        let mut out = Vec::new();
        if (self.schedulers, self.servers, self.workers) != (d.schedulers, d.servers, d.workers) {
            out.push(format!("--nodes {},{},{}", self.schedulers, self.servers, self.workers));
        }
        if self.replicas != d.replicas {
            out.push(format!("--replicas {}", self.replicas));
        }
        if self.tasks != d.tasks {
            out.push(format!("--tasks {}", self.tasks));
        }
        if self.passes != d.passes {
            out.push(format!("--passes {}", self.passes));
        }
        if let Some(p) = self.plant.name() {
            out.push(format!("--plant {p}"));
        }
        out.join(" ")
    }
}

impl Plant {
    /// The `--plant` name of this plant: the one name [`Plant::parse`] reads into it
    /// (none when no bug, or several, are planted).
    pub fn name(&self) -> Option<&'static str> {
        Plant::NAMES.into_iter().find(|n| Plant::parse(n).as_ref() == Ok(self))
    }
}

#[cfg(test)]
mod tests {
    use super::Plant;

    #[test]
    fn every_plant_name_reads_back_as_itself() {
        for name in Plant::NAMES {
            assert_eq!(Plant::parse(name).unwrap().name(), Some(name));
        }
        assert_eq!(Plant::default().name(), None);
        assert!(Plant::parse("no-such-bug").is_err());
    }
}
