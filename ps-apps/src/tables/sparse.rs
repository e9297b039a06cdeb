//! One embedding table's rows on one server: stored from their first update (no table
//! allocated up front, so `num_embeddings` can be 10^9), with the optimizer state of
//! each stored row. Gradients collected for a sync version wait in a side table until
//! the version is applied.

use super::init::initial_row;
use super::spec::TableSpec;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// A table's rows held by one server.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SparseTable {
    spec: TableSpec,
    /// Row id → slot in `values` (and `state`, `steps`).
    slots: FxHashMap<u64, u32>,
    values: Vec<f32>,
    state: Vec<f32>,
    steps: Vec<u32>,
    /// Row id → slot in `pending_grads`: the current version's gradients.
    pending: FxHashMap<u64, u32>,
    pending_grads: Vec<f32>,
}

impl SparseTable {
    /// An empty table.
    pub fn new(spec: TableSpec) -> SparseTable {
        SparseTable {
            spec,
            slots: FxHashMap::default(),
            values: Vec::new(),
            state: Vec::new(),
            steps: Vec::new(),
            pending: FxHashMap::default(),
            pending_grads: Vec::new(),
        }
    }

    /// Values per row.
    pub fn dim(&self) -> usize {
        self.spec.dim as usize
    }

    /// Rows stored (updated at least once).
    pub fn stored_rows(&self) -> usize {
        self.slots.len()
    }

    /// Row `id`'s values into `out` (`dim` long): stored, or initial.
    pub fn read(&self, id: u64, out: &mut [f32]) {
        let d = self.dim();
        match self.slots.get(&id) {
            Some(&s) => out.copy_from_slice(&self.values[s as usize * d..(s as usize + 1) * d]),
            None => initial_row(self.spec.seed, id, self.spec.init_std, out),
        }
    }

    /// Adds a gradient of row `id` to the current version's.
    pub fn add_pending(&mut self, id: u64, grad: &[f32]) {
        let d = self.dim();
        let next = self.pending.len() as u32;
        let slot = *self.pending.entry(id).or_insert(next) as usize;
        if slot == self.pending_grads.len() / d {
            self.pending_grads.extend_from_slice(grad);
        } else {
            for (a, g) in self.pending_grads[slot * d..(slot + 1) * d].iter_mut().zip(grad) {
                *a += g;
            }
        }
    }

    /// Applies the collected gradients, each scaled by `scale`, to their rows (storing
    /// rows updated for the first time), and clears them.
    pub fn apply_pending(&mut self, scale: f32) {
        let d = self.dim();
        let pending = std::mem::take(&mut self.pending);
        let grads = std::mem::take(&mut self.pending_grads);
        for (&id, &p) in &pending {
            let s = self.slot(id);
            let spv = self.spec.optimizer.state_per_value();
            let mut step = self.steps.get(s).copied().unwrap_or(0);
            self.spec.optimizer.apply(
                &mut self.values[s * d..(s + 1) * d],
                &grads[p as usize * d..(p as usize + 1) * d],
                scale,
                &mut self.state[s * d * spv..(s + 1) * d * spv],
                &mut step,
            );
            if let Some(c) = self.steps.get_mut(s) {
                *c = step;
            }
        }
        // keep the capacity for the next version
        self.pending = pending;
        self.pending.clear();
        self.pending_grads = grads;
        self.pending_grads.clear();
    }

    /// Row `id`'s slot, storing it with its initial values and state if it is new.
    fn slot(&mut self, id: u64) -> usize {
        if let Some(&s) = self.slots.get(&id) {
            return s as usize;
        }
        let d = self.dim();
        let s = self.slots.len();
        self.slots.insert(id, s as u32);
        self.values.resize((s + 1) * d, 0.0);
        initial_row(self.spec.seed, id, self.spec.init_std, &mut self.values[s * d..]);
        self.state.extend(self.spec.optimizer.initial_state(d));
        if self.spec.optimizer.counts_steps() {
            self.steps.push(0);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::optim::Optimizer;

    fn table(opt: Optimizer) -> SparseTable {
        SparseTable::new(TableSpec {
            name: "t".into(),
            rows: 1 << 30,
            dim: 3,
            optimizer: opt,
            init_std: 0.1,
            seed: 9,
        })
    }

    const SGD: Optimizer = Optimizer::Sgd {
        lr: 1.0,
        momentum: 0.0,
        weight_decay: 0.0,
    };

    #[test]
    fn rows_are_stored_on_their_first_update_only() {
        let mut t = table(SGD);
        let mut init = [0.0; 3];
        t.read(1 << 29, &mut init);
        assert_eq!(t.stored_rows(), 0, "a read stores nothing");
        t.add_pending(1 << 29, &[1.0, 2.0, 3.0]);
        t.add_pending(1 << 29, &[1.0, 0.0, 1.0]);
        t.add_pending(5, &[4.0, 4.0, 4.0]);
        t.apply_pending(0.5);
        assert_eq!(t.stored_rows(), 2);
        let mut now = [0.0; 3];
        t.read(1 << 29, &mut now);
        let want: Vec<f32> = init.iter().zip([1.0, 1.0, 2.0]).map(|(a, g)| a - g).collect();
        assert_eq!(now.to_vec(), want);
        // nothing pending any more
        t.apply_pending(1.0);
        t.read(1 << 29, &mut now);
        assert_eq!(now.to_vec(), want);
    }

    #[test]
    fn each_row_keeps_its_own_adam_state() {
        let adam = Optimizer::Adam {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        };
        let mut t = table(adam);
        let mut r0 = [0.0; 3];
        t.read(0, &mut r0);
        for _ in 0..3 {
            t.add_pending(0, &[1.0; 3]);
            t.apply_pending(1.0);
        }
        t.add_pending(1, &[1.0; 3]);
        t.apply_pending(1.0);
        assert_eq!(t.steps, vec![3, 1]);
        let mut r = [0.0; 3];
        t.read(0, &mut r);
        // three Adam steps with a constant gradient move by lr each
        for (a, b) in r.iter().zip(r0) {
            assert!((a - (b - 0.03)).abs() < 1e-5);
        }
    }
}
