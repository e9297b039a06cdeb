//! One embedding table's rows on one server: stored from their first update (no table
//! allocated up front, so `num_embeddings` can be 10^9), with the optimizer state of
//! each stored row. Gradients collected for a sync version wait in a side table until
//! the version is applied.
//!
//! The table counts its steps (the versions applied, one per sync step or async push):
//! SparseAdam's bias correction uses the count, and two options of Monolith's use it:
//! a row is created only once it had gradients in `admit_after` steps (the counts of
//! rows not yet created are kept exactly, one small entry per id), and a stored row
//! not updated in `expire_after` steps reads as its initial values again (its memory
//! is reclaimed by a sweep every `expire_after / 2` steps).

use super::init::initial_row;
use super::spec::TableSpec;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// A page of a table's stored rows: their ids, their values (`dim` each) and the slot
/// to go on from (None after the last page).
pub type RowPage = (Vec<u64>, Vec<f32>, Option<usize>);

/// A table's rows held by one server.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SparseTable {
    spec: TableSpec,
    /// Row id → slot in `values` (and `state`, `ids`, `touched`).
    slots: FxHashMap<u64, u32>,
    /// Slot → row id.
    ids: Vec<u64>,
    values: Vec<f32>,
    state: Vec<f32>,
    /// Slot → the step that last updated it (kept only with `expire_after`).
    touched: Vec<u64>,
    /// Steps taken (versions applied).
    steps: u64,
    /// Rows not created yet → the steps they had gradients in (with `admit_after`).
    seen: FxHashMap<u64, u32>,
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
            ids: Vec::new(),
            values: Vec::new(),
            state: Vec::new(),
            touched: Vec::new(),
            steps: 0,
            seen: FxHashMap::default(),
            pending: FxHashMap::default(),
            pending_grads: Vec::new(),
        }
    }

    /// Values per row.
    pub fn dim(&self) -> usize {
        self.spec.dim as usize
    }

    /// Steps taken (versions applied).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Rows stored (updated at least once, not expired).
    pub fn stored_rows(&self) -> usize {
        if self.spec.expire_after == 0 {
            return self.slots.len();
        }
        (0..self.ids.len()).filter(|&s| self.live(s)).count()
    }

    /// Rows seen but not created yet (counted for `admit_after`).
    pub fn counted_rows(&self) -> usize {
        self.seen.len()
    }

    /// Whether slot `s` holds a row (not expired).
    fn live(&self, s: usize) -> bool {
        let n = self.spec.expire_after;
        n == 0 || self.steps - self.touched[s] < n
    }

    /// The slot of row `id`, if it is stored and not expired.
    fn live_slot(&self, id: u64) -> Option<usize> {
        let s = *self.slots.get(&id)? as usize;
        self.live(s).then_some(s)
    }

    /// Row `id`'s values into `out` (`dim` long): stored, or initial.
    pub fn read(&self, id: u64, out: &mut [f32]) {
        let d = self.dim();
        match self.live_slot(id) {
            Some(s) => out.copy_from_slice(&self.values[s * d..(s + 1) * d]),
            None => initial_row(self.spec.seed, id, self.spec.init_std, out),
        }
    }

    /// The stored rows from slot `from` on, at most `max` of them: their ids and
    /// values (`dim` each), and the slot to continue from (None at the end). The
    /// slots are stable while no gradient is applied.
    pub fn dump(&self, from: usize, max: usize) -> RowPage {
        let d = self.dim();
        let (mut ids, mut vals) = (Vec::new(), Vec::new());
        let mut s = from;
        while s < self.ids.len() {
            if ids.len() == max {
                return (ids, vals, Some(s));
            }
            if self.live(s) {
                ids.push(self.ids[s]);
                vals.extend_from_slice(&self.values[s * d..(s + 1) * d]);
            }
            s += 1;
        }
        (ids, vals, None)
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

    /// Takes a step: applies the collected gradients, each scaled by `scale`, to
    /// their rows (creating rows admitted now, dropping the gradients of rows not
    /// admitted yet), and clears them.
    pub fn apply_pending(&mut self, scale: f32) {
        self.steps += 1;
        let d = self.dim();
        let spv = self.spec.optimizer.state_per_value();
        let pending = std::mem::take(&mut self.pending);
        let grads = std::mem::take(&mut self.pending_grads);
        for (&id, &p) in &pending {
            let Some(s) = self.slot(id) else { continue };
            self.spec.optimizer.apply_row(
                &mut self.values[s * d..(s + 1) * d],
                &grads[p as usize * d..(p as usize + 1) * d],
                scale,
                &mut self.state[s * d * spv..(s + 1) * d * spv],
                self.steps,
            );
            if let Some(t) = self.touched.get_mut(s) {
                *t = self.steps;
            }
        }
        // keep the capacity for the next version
        self.pending = pending;
        self.pending.clear();
        self.pending_grads = grads;
        self.pending_grads.clear();
        let n = self.spec.expire_after;
        if n > 0 && self.steps.is_multiple_of((n / 2).max(1)) {
            self.sweep();
        }
    }

    /// Row `id`'s slot for an update: its own, or a new one with its initial values
    /// and state (an expired row's slot is reset), or None while it is not admitted.
    fn slot(&mut self, id: u64) -> Option<usize> {
        let existing = self.slots.get(&id).map(|&s| s as usize);
        if let Some(s) = existing {
            if self.live(s) {
                return Some(s);
            }
        }
        if self.spec.admit_after > 1 {
            let c = self.seen.entry(id).or_insert(0);
            *c += 1;
            if *c < self.spec.admit_after {
                return None;
            }
            self.seen.remove(&id);
        }
        let d = self.dim();
        let spv = self.spec.optimizer.state_per_value();
        let s = match existing {
            Some(s) => s,
            None => {
                let s = self.ids.len();
                self.slots.insert(id, s as u32);
                self.ids.push(id);
                self.values.resize((s + 1) * d, 0.0);
                self.state.resize((s + 1) * d * spv, 0.0);
                if self.spec.expire_after > 0 {
                    self.touched.push(self.steps);
                }
                s
            }
        };
        initial_row(
            self.spec.seed,
            id,
            self.spec.init_std,
            &mut self.values[s * d..(s + 1) * d],
        );
        let init = self.spec.optimizer.initial_state(d);
        self.state[s * d * spv..(s + 1) * d * spv].copy_from_slice(&init);
        Some(s)
    }

    /// Frees the slots of expired rows (the last slot moves into each freed one).
    fn sweep(&mut self) {
        let d = self.dim();
        let spv = self.spec.optimizer.state_per_value();
        let mut s = 0;
        while s < self.ids.len() {
            if self.live(s) {
                s += 1;
                continue;
            }
            let last = self.ids.len() - 1;
            self.slots.remove(&self.ids[s]);
            if s != last {
                let moved = self.ids[last];
                self.ids[s] = moved;
                self.touched[s] = self.touched[last];
                self.values.copy_within(last * d..(last + 1) * d, s * d);
                self.state
                    .copy_within(last * d * spv..(last + 1) * d * spv, s * d * spv);
                self.slots.insert(moved, s as u32);
            }
            self.ids.pop();
            self.touched.pop();
            self.values.truncate(last * d);
            self.state.truncate(last * d * spv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::optim::Optimizer;

    fn table_with(opt: Optimizer, admit_after: u32, expire_after: u64) -> SparseTable {
        SparseTable::new(TableSpec {
            name: "t".into(),
            rows: 1 << 30,
            dim: 3,
            optimizer: opt,
            init_std: 0.1,
            seed: 9,
            admit_after,
            expire_after,
            fp16_wire: false,
        })
    }

    fn table(opt: Optimizer) -> SparseTable {
        table_with(opt, 1, 0)
    }

    const SGD: Optimizer = Optimizer::Sgd {
        lr: 1.0,
        momentum: 0.0,
        weight_decay: 0.0,
    };

    fn row(t: &SparseTable, id: u64) -> [f32; 3] {
        let mut r = [0.0; 3];
        t.read(id, &mut r);
        r
    }

    /// One step in which `ids` each get a gradient of 1.
    fn step(t: &mut SparseTable, ids: &[u64]) {
        for &id in ids {
            t.add_pending(id, &[1.0; 3]);
        }
        t.apply_pending(1.0);
    }

    #[test]
    fn rows_are_stored_on_their_first_update_only() {
        let mut t = table(SGD);
        let init = row(&t, 1 << 29);
        assert_eq!(t.stored_rows(), 0, "a read stores nothing");
        t.add_pending(1 << 29, &[1.0, 2.0, 3.0]);
        t.add_pending(1 << 29, &[1.0, 0.0, 1.0]);
        t.add_pending(5, &[4.0, 4.0, 4.0]);
        t.apply_pending(0.5);
        assert_eq!(t.stored_rows(), 2);
        let want: Vec<f32> = init.iter().zip([1.0, 1.0, 2.0]).map(|(a, g)| a - g).collect();
        assert_eq!(row(&t, 1 << 29).to_vec(), want);
        // nothing pending any more
        t.apply_pending(1.0);
        assert_eq!(row(&t, 1 << 29).to_vec(), want);
        let (ids, vals, next) = t.dump(0, 10);
        assert_eq!((ids.len(), vals.len(), next), (2, 6, None));
        let (ids, _, next) = t.dump(0, 1);
        assert_eq!((ids.len(), next), (1, Some(1)));
    }

    #[test]
    fn adam_rows_are_corrected_by_the_tables_step_count() {
        let adam = Optimizer::Adam {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        };
        let mut t = table(adam);
        let (r0, r1) = (row(&t, 0), row(&t, 1));
        for _ in 0..3 {
            step(&mut t, &[0]);
        }
        // row 1's first gradient comes at the table's step 4: SparseAdam corrects it
        // with t = 4, not with its own count of 1
        step(&mut t, &[1]);
        assert_eq!(t.steps(), 4);
        let (mut want, mut s) = (r1, adam.initial_state(3));
        adam.apply_row(&mut want, &[1.0; 3], 1.0, &mut s, 4);
        assert_eq!(row(&t, 1), want);
        let mut own = r1;
        adam.apply_row(&mut own, &[1.0; 3], 1.0, &mut adam.initial_state(3), 1);
        assert_ne!(own, want, "a count of its own would step differently");
        // three steps with a constant gradient move row 0 by lr each
        for (a, b) in row(&t, 0).iter().zip(r0) {
            assert!((a - (b - 0.03)).abs() < 1e-5);
        }
    }

    #[test]
    fn a_row_is_created_after_gradients_in_admit_after_steps() {
        let mut t = table_with(SGD, 3, 0);
        let init = row(&t, 7);
        // two gradients in one step count once
        t.add_pending(7, &[1.0; 3]);
        t.add_pending(7, &[1.0; 3]);
        t.apply_pending(1.0);
        step(&mut t, &[7, 8]);
        assert_eq!((t.stored_rows(), t.counted_rows()), (0, 2));
        assert_eq!(row(&t, 7), init, "not admitted: initial values, gradients dropped");
        step(&mut t, &[7]);
        assert_eq!((t.stored_rows(), t.counted_rows()), (1, 1));
        // created from its initial values with the third step's gradient only
        assert_eq!(row(&t, 7).to_vec(), init.iter().map(|v| v - 1.0).collect::<Vec<_>>());
        step(&mut t, &[7]);
        assert_eq!(row(&t, 7).to_vec(), init.iter().map(|v| v - 2.0).collect::<Vec<_>>());
    }

    #[test]
    fn a_row_untouched_for_expire_after_steps_reads_as_initial_again() {
        let mut t = table_with(SGD, 1, 4);
        let (a0, b0) = (row(&t, 1), row(&t, 2));
        step(&mut t, &[1, 2]); // step 1
        for _ in 0..3 {
            step(&mut t, &[1]); // steps 2 to 4: row 2 untouched for 3 steps
        }
        assert_eq!(row(&t, 2).to_vec(), b0.iter().map(|v| v - 1.0).collect::<Vec<_>>());
        assert_eq!(t.stored_rows(), 2);
        step(&mut t, &[1]); // step 5: 4 steps untouched
        assert_eq!(row(&t, 2), b0, "expired: initial values");
        assert_eq!((t.stored_rows(), t.ids.len()), (1, 2), "not swept yet (every 2 steps)");
        step(&mut t, &[1]);
        assert_eq!(t.ids.len(), 1, "swept at step 6");
        // created again from its initial values
        step(&mut t, &[2]);
        assert_eq!(row(&t, 2).to_vec(), b0.iter().map(|v| v - 1.0).collect::<Vec<_>>());
        assert_eq!(row(&t, 1).to_vec(), a0.iter().map(|v| v - 6.0).collect::<Vec<_>>());
        // a sweep moves the last slot into a freed one: every row keeps its values
        let mut t = table_with(SGD, 1, 2);
        step(&mut t, &[10, 11, 12]);
        let keep = row(&t, 12);
        step(&mut t, &[12]);
        step(&mut t, &[12]);
        assert_eq!(t.ids, vec![12]);
        assert_eq!(row(&t, 12).to_vec(), keep.iter().map(|v| v - 2.0).collect::<Vec<_>>());
    }
}
