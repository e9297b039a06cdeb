//! Which certificate speaks for the scheduler, as a server or worker sees it. Every
//! scheduler candidate holds a scheduler certificate and sends as id 1, so the role
//! alone does not say which one is active. Without an election there is one
//! scheduler: the first certificate heard in its name is its, until this node has
//! lost its scheduler (silent past the timeout: a restarted scheduler, with a new
//! process and certificate, is then taken). Under an election every scheduler message
//! carries an epoch (term, candidate) and each term belongs to one candidate: the
//! first certificate heard at an epoch is that epoch's, and another certificate at
//! the same epoch is refused (a standby, or another holder of a scheduler
//! certificate, cannot speak for the active scheduler). A new epoch is the failover
//! machines' to judge (a candidate with a higher term takes over); they fence the
//! lower ones. Pure: the van asks it for every message in the scheduler's name that
//! comes over a link with a certificate.

use super::refusal::Refusal;
use crate::failover::Epoch;
use crate::message::Command;
use std::collections::BTreeMap;

/// Epochs remembered (the newest).
const EPOCHS: usize = 16;

/// The certificates heard speaking for the scheduler.
#[derive(Clone, Debug, Default)]
pub struct ActiveScheduler {
    single: Option<u64>,
    epochs: BTreeMap<Epoch, u64>,
}

impl ActiveScheduler {
    /// Nothing heard yet.
    pub fn new() -> ActiveScheduler {
        ActiveScheduler::default()
    }

    /// A message `cmd` in the scheduler's name at `epoch`, over a link whose
    /// certificate has fingerprint `fp`; `election`: there are scheduler candidates;
    /// `lost`: this node has not heard its scheduler within the timeout.
    pub fn check(&mut self, cmd: Command, epoch: Epoch, fp: u64, election: bool, lost: bool) -> Result<(), Refusal> {
        if lost {
            self.single = None;
            self.epochs.clear();
        }
        let known = if election {
            self.epochs.get(&epoch).copied()
        } else {
            self.single
        };
        match known {
            Some(f) if f == fp => Ok(()),
            Some(_) => Err(Refusal::NotTheActiveScheduler {
                cmd,
                epoch: if election {
                    format!(" at {epoch}")
                } else {
                    String::new()
                },
            }),
            None if election => {
                self.epochs.insert(epoch, fp);
                while self.epochs.len() > EPOCHS {
                    self.epochs.pop_first();
                }
                Ok(())
            }
            None => {
                self.single = Some(fp);
                Ok(())
            }
        }
    }
}
