//! The worker's minibatch loop of the synchronous-SGD design (Paddle's): pull the
//! model if it is out of date, compute the gradient, push it tagged with the version
//! it was computed on; a rejected push (the model moved on) is recomputed on the new
//! model and retried, and the task fails after too many rejections.

use super::exchange::{ParamExchange, ShardReply};
use crate::model::learner::Learner;
use ps_core::kv::KvError;

/// What one minibatch did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchOutcome {
    /// Mean loss of the accepted attempt.
    pub loss: f32,
    /// Correct predictions in it.
    pub correct: usize,
    /// Pushes rejected before acceptance.
    pub rejections: u32,
    /// The newest model version (over the shards) the accepted gradient was computed on.
    pub version: u64,
}

/// Why a minibatch could not be trained.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchError {
    /// Rejected `max_rejections` times in a row: the task should be reported failed.
    TooManyRejections(u32),
    /// The exchange with the servers failed.
    Exchange(KvError),
}

/// The per-worker state carried across minibatches.
#[derive(Clone, Debug)]
pub struct MinibatchLoop {
    /// Sync mode: after an accepted push at version v, the next pull waits for v+1.
    pub sync: bool,
    /// Rejections after which a minibatch fails.
    pub max_rejections: u32,
    /// Every gradient is multiplied by this before it is pushed (1.0 by default). With
    /// (momentum) SGD on the servers this is a learning-rate schedule: the worker sets
    /// it per pass for `--lr-decay`.
    pub grad_scale: f32,
    after: Vec<Option<u64>>,
}

impl MinibatchLoop {
    /// A loop over `num_shards` shards.
    pub fn new(num_shards: usize, sync: bool, max_rejections: u32) -> MinibatchLoop {
        MinibatchLoop {
            sync,
            max_rejections,
            grad_scale: 1.0,
            after: vec![None; num_shards],
        }
    }

    /// Trains one minibatch.
    pub fn step<B: ?Sized>(
        &mut self,
        learner: &impl Learner<B>,
        ex: &mut impl ParamExchange,
        batch: &B,
    ) -> Result<BatchOutcome, BatchError> {
        let n = ex.num_shards();
        let keys = learner.keys(batch);
        let mut send = vec![true; n];
        let mut rejections = 0;
        let mut first: Option<(f32, usize)> = None;
        loop {
            let pulled = ex.pull(keys.as_deref(), &self.after).map_err(BatchError::Exchange)?;
            let (loss, correct, mut grad) = learner.loss_and_grad(&pulled.values, keys.as_deref(), batch);
            if self.grad_scale != 1.0 {
                grad.iter_mut().for_each(|g| *g *= self.grad_scale);
            }
            first.get_or_insert((loss, correct));
            let replies = ex
                .push(keys.as_deref(), &grad, &pulled.versions, &send)
                .map_err(BatchError::Exchange)?;
            let mut all_taken = true;
            for (s, r) in replies.iter().enumerate() {
                match r {
                    ShardReply::Accepted => {
                        self.after[s] = self.sync.then_some(pulled.versions[s]);
                        send[s] = false;
                    }
                    ShardReply::Rejected(_) => {
                        all_taken = false;
                        self.after[s] = None;
                    }
                    ShardReply::Skipped => {}
                }
            }
            if all_taken {
                let (loss, correct) = first.unwrap_or((loss, correct));
                return Ok(BatchOutcome {
                    loss,
                    correct,
                    rejections,
                    version: pulled.versions.iter().copied().max().unwrap_or(0),
                });
            }
            rejections += 1;
            if rejections >= self.max_rejections {
                return Err(BatchError::TooManyRejections(rejections));
            }
            // the shards that took the gradient must not wait for an update this
            // worker's retry will not contribute to
            for (after, sent) in self.after.iter_mut().zip(&send) {
                if !sent {
                    *after = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::exchange::Pulled;
    use super::*;

    /// One shard holding one parameter, rejecting the first `reject` pushes.
    struct Fake {
        value: f32,
        version: u64,
        reject: u32,
        pulls: Vec<Vec<Option<u64>>>,
        pushed: Vec<(f32, u64)>,
    }

    impl ParamExchange for Fake {
        fn num_shards(&self) -> usize {
            1
        }
        fn pull(&mut self, _k: Option<&[u64]>, after: &[Option<u64>]) -> Result<Pulled, KvError> {
            self.pulls.push(after.to_vec());
            if after[0] == Some(self.version) {
                // the fake applies the pending update when asked to wait for it
                self.version += 1;
            }
            Ok(Pulled {
                values: vec![self.value],
                versions: vec![self.version],
            })
        }
        fn push(
            &mut self,
            _k: Option<&[u64]>,
            g: &[f32],
            v: &[u64],
            send: &[bool],
        ) -> Result<Vec<ShardReply>, KvError> {
            assert!(send[0]);
            if self.reject > 0 {
                self.reject -= 1;
                self.version += 1;
                return Ok(vec![ShardReply::Rejected(self.version)]);
            }
            self.pushed.push((g[0], v[0]));
            Ok(vec![ShardReply::Accepted])
        }
    }

    struct Square;
    impl Learner<f32> for Square {
        fn keys(&self, _b: &f32) -> Option<Vec<u64>> {
            None
        }
        fn loss_and_grad(&self, p: &[f32], _k: Option<&[u64]>, target: &f32) -> (f32, usize, Vec<f32>) {
            let d = p[0] - target;
            (d * d, 0, vec![2.0 * d])
        }
    }

    fn fake(reject: u32) -> Fake {
        Fake {
            value: 3.0,
            version: 0,
            reject,
            pulls: vec![],
            pushed: vec![],
        }
    }

    #[test]
    fn sync_pull_waits_for_the_contributed_version() {
        let mut f = fake(0);
        let mut l = MinibatchLoop::new(1, true, 3);
        let o = l.step(&Square, &mut f, &1.0).unwrap();
        assert_eq!((o.loss, o.rejections), (4.0, 0));
        let o2 = l.step(&Square, &mut f, &1.0).unwrap();
        assert_eq!(
            (o.version, o2.version),
            (0, 1),
            "the version each gradient was computed on"
        );
        assert_eq!(f.pulls, vec![vec![None], vec![Some(0)]]);
        assert_eq!(f.pushed, vec![(4.0, 0), (4.0, 1)]);
    }

    #[test]
    fn rejected_pushes_are_recomputed_on_the_new_version() {
        let mut f = fake(2);
        let mut l = MinibatchLoop::new(1, true, 5);
        let o = l.step(&Square, &mut f, &1.0).unwrap();
        assert_eq!(o.rejections, 2);
        assert_eq!(
            f.pushed,
            vec![(4.0, 2)],
            "pushed once, tagged with the version pulled last"
        );
    }

    #[test]
    fn too_many_rejections_fail_the_batch() {
        let mut f = fake(10);
        let mut l = MinibatchLoop::new(1, false, 3);
        assert_eq!(l.step(&Square, &mut f, &1.0), Err(BatchError::TooManyRejections(3)));
    }

    #[test]
    fn async_mode_never_waits() {
        let mut f = fake(0);
        let mut l = MinibatchLoop::new(1, false, 3);
        l.step(&Square, &mut f, &1.0).unwrap();
        l.step(&Square, &mut f, &1.0).unwrap();
        assert_eq!(f.pulls, vec![vec![None], vec![None]]);
    }

    #[test]
    fn gradients_are_scaled_before_the_push() {
        let mut f = fake(0);
        let mut l = MinibatchLoop::new(1, false, 3);
        l.grad_scale = 0.25;
        let o = l.step(&Square, &mut f, &1.0).unwrap();
        assert_eq!(o.loss, 4.0, "the loss is not scaled");
        assert_eq!(f.pushed, vec![(1.0, 0)]);
    }
}
