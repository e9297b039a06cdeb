//! The optimizers the servers apply, with the arithmetic of `torch.optim`'s SGD,
//! Adagrad and Adam (L2 weight decay added to the gradient, as torch does), so a model
//! trained through psrs takes the steps it would take in one PyTorch process.
//!
//! State is per value: SGD with momentum keeps a velocity, Adagrad a sum of squared
//! gradients, Adam two moments. A state slice is laid out as `[first moment..., second
//! moment...]`.
//!
//! The dense parameters are updated by [`Optimizer::apply`], `torch.optim.SGD`,
//! `Adagrad` and `Adam` on dense gradients. Embedding rows are updated by
//! [`Optimizer::apply_row`], the optimizers torch applies to the sparse gradients of
//! `nn.Embedding(sparse=True)`: only rows with a gradient in the step move (untouched
//! rows keep their values and state); Adagrad is `torch.optim.Adagrad`'s sparse path,
//! Adam is `torch.optim.SparseAdam` (bias correction by the table's step count, `eps`
//! added to `sqrt(v)` before the correction); SGD with momentum keeps each row's
//! velocity and applies it only when the row has a gradient (torch's SGD on a sparse
//! gradient would decay and apply the velocity of every row ever touched).

use super::error::TablesError;
use serde::{Deserialize, Serialize};

/// An optimizer and its settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Optimizer {
    /// `p -= lr * v` with `v = momentum * v + g` (plain SGD when momentum is 0).
    Sgd {
        /// Learning rate.
        lr: f32,
        /// Momentum.
        momentum: f32,
        /// L2 weight decay.
        weight_decay: f32,
    },
    /// `s += g * g; p -= lr * g / (sqrt(s) + eps)`.
    Adagrad {
        /// Learning rate.
        lr: f32,
        /// Added to the denominator.
        eps: f32,
        /// Starting value of the sum of squares.
        initial_accumulator_value: f32,
        /// L2 weight decay.
        weight_decay: f32,
    },
    /// Adam with bias correction (not AMSGrad; decay as L2, not AdamW). On embedding
    /// rows, `torch.optim.SparseAdam` ([`Optimizer::apply_row`]).
    Adam {
        /// Learning rate.
        lr: f32,
        /// Decay of the first moment.
        beta1: f32,
        /// Decay of the second moment.
        beta2: f32,
        /// Added to the denominator.
        eps: f32,
        /// L2 weight decay.
        weight_decay: f32,
    },
}

impl Optimizer {
    /// Checks the settings: [`TablesError::Invalid`], one line naming the bad one.
    pub fn validate(&self) -> Result<(), TablesError> {
        let fine = |name: &str, v: f32, ok: bool| {
            if v.is_finite() && ok {
                Ok(())
            } else {
                Err(TablesError::Invalid(format!("{name}={v}: out of range")))
            }
        };
        match *self {
            Optimizer::Sgd {
                lr,
                momentum,
                weight_decay,
            } => {
                fine("lr", lr, lr > 0.0)?;
                fine("momentum", momentum, (0.0..1.0).contains(&momentum))?;
                fine("weight_decay", weight_decay, weight_decay >= 0.0)
            }
            Optimizer::Adagrad {
                lr,
                eps,
                initial_accumulator_value,
                weight_decay,
            } => {
                fine("lr", lr, lr > 0.0)?;
                fine("eps", eps, eps >= 0.0)?;
                fine(
                    "initial_accumulator_value",
                    initial_accumulator_value,
                    initial_accumulator_value >= 0.0,
                )?;
                fine("weight_decay", weight_decay, weight_decay >= 0.0)
            }
            Optimizer::Adam {
                lr,
                beta1,
                beta2,
                eps,
                weight_decay,
            } => {
                fine("lr", lr, lr > 0.0)?;
                fine("beta1", beta1, (0.0..1.0).contains(&beta1))?;
                fine("beta2", beta2, (0.0..1.0).contains(&beta2))?;
                fine("eps", eps, eps >= 0.0)?;
                fine("weight_decay", weight_decay, weight_decay >= 0.0)
            }
        }
    }

    /// Its name, as psrs.torch takes it.
    pub fn name(&self) -> &'static str {
        match self {
            Optimizer::Sgd { .. } => "sgd",
            Optimizer::Adagrad { .. } => "adagrad",
            Optimizer::Adam { .. } => "adam",
        }
    }

    /// State values kept per parameter value.
    pub fn state_per_value(&self) -> usize {
        match *self {
            Optimizer::Sgd { momentum, .. } => usize::from(momentum != 0.0),
            Optimizer::Adagrad { .. } => 1,
            Optimizer::Adam { .. } => 2,
        }
    }

    /// True if it counts steps (Adam's bias correction).
    pub fn counts_steps(&self) -> bool {
        matches!(self, Optimizer::Adam { .. })
    }

    /// The state of `n` values before their first update.
    pub fn initial_state(&self, n: usize) -> Vec<f32> {
        let fill = match *self {
            Optimizer::Adagrad {
                initial_accumulator_value,
                ..
            } => initial_accumulator_value,
            _ => 0.0,
        };
        vec![fill; n * self.state_per_value()]
    }

    /// One update of `params` by the gradient `grad`, scaled by `scale` first (the
    /// mean over a sync version's workers). `state` holds
    /// [`Optimizer::state_per_value`] values per parameter; `step` counts the updates
    /// so far and is incremented.
    pub fn apply(&self, params: &mut [f32], grad: &[f32], scale: f32, state: &mut [f32], step: &mut u32) {
        debug_assert_eq!(params.len(), grad.len());
        debug_assert_eq!(state.len(), params.len() * self.state_per_value());
        *step = step.saturating_add(1);
        match *self {
            Optimizer::Sgd {
                lr,
                momentum,
                weight_decay,
            } => {
                if momentum == 0.0 {
                    for (p, &g) in params.iter_mut().zip(grad) {
                        *p -= lr * (g * scale + weight_decay * *p);
                    }
                } else {
                    for ((p, &g), v) in params.iter_mut().zip(grad).zip(state.iter_mut()) {
                        *v = momentum * *v + (g * scale + weight_decay * *p);
                        *p -= lr * *v;
                    }
                }
            }
            Optimizer::Adagrad {
                lr, eps, weight_decay, ..
            } => {
                for ((p, &g), s) in params.iter_mut().zip(grad).zip(state.iter_mut()) {
                    let g = g * scale + weight_decay * *p;
                    *s += g * g;
                    *p -= lr * g / (s.sqrt() + eps);
                }
            }
            Optimizer::Adam {
                lr,
                beta1,
                beta2,
                eps,
                weight_decay,
            } => {
                let t = *step as i32;
                // torch computes the corrections in double precision
                let c1 = 1.0 - (beta1 as f64).powi(t);
                let c2_sqrt = (1.0 - (beta2 as f64).powi(t)).sqrt();
                let step_size = (lr as f64 / c1) as f32;
                let c2_sqrt = c2_sqrt as f32;
                let (m, v) = state.split_at_mut(params.len());
                for (((p, &g), m), v) in params.iter_mut().zip(grad).zip(m).zip(v) {
                    let g = g * scale + weight_decay * *p;
                    *m += (g - *m) * (1.0 - beta1);
                    *v = *v * beta2 + (1.0 - beta2) * g * g;
                    *p -= step_size * *m / (v.sqrt() / c2_sqrt + eps);
                }
            }
        }
    }
}

impl Optimizer {
    /// One update of an embedding row `params` by its gradient `grad` (scaled by
    /// `scale`), as torch updates the rows of a sparse gradient: SGD and Adagrad as
    /// [`Optimizer::apply`]; Adam as `torch.optim.SparseAdam` at the table's step `t`
    /// (from 1: the steps the table has taken, this one included):
    /// `m += (g - m)(1 - b1); v += (g² - v)(1 - b2);
    /// p -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)`.
    pub fn apply_row(&self, params: &mut [f32], grad: &[f32], scale: f32, state: &mut [f32], t: u64) {
        let Optimizer::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
        } = *self
        else {
            return self.apply(params, grad, scale, state, &mut 0);
        };
        debug_assert_eq!(params.len(), grad.len());
        debug_assert_eq!(state.len(), params.len() * 2);
        let t = t.clamp(1, i32::MAX as u64) as i32;
        // torch computes the step size in double precision
        let c1 = 1.0 - (beta1 as f64).powi(t);
        let c2 = 1.0 - (beta2 as f64).powi(t);
        let step_size = (lr as f64 * c2.sqrt() / c1) as f32;
        let (m, v) = state.split_at_mut(params.len());
        for (((p, &g), m), v) in params.iter_mut().zip(grad).zip(m).zip(v) {
            let g = g * scale + weight_decay * *p;
            *m += (g - *m) * (1.0 - beta1);
            *v += (g * g - *v) * (1.0 - beta2);
            *p -= step_size * (*m / (v.sqrt() + eps));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(o: Optimizer, grads: &[[f32; 2]]) -> Vec<f32> {
        let mut p = vec![1.0f32, -2.0];
        let mut s = o.initial_state(2);
        let mut step = 0;
        for g in grads {
            o.apply(&mut p, g, 1.0, &mut s, &mut step);
        }
        assert_eq!(step as usize, grads.len());
        p
    }

    fn close(a: &[f32], b: &[f32]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-6, "{a:?} vs {b:?}");
        }
    }

    // Expected values: torch 2.x, `torch.optim.X([p], ...)` with p = [1, -2] and the
    // gradients [0.5, -1], then [0.25, 2], stepped twice (computed by hand below with
    // torch's formulas).
    #[test]
    fn sgd_with_momentum_and_decay() {
        let o = Optimizer::Sgd {
            lr: 0.1,
            momentum: 0.9,
            weight_decay: 0.01,
        };
        let p = run(o, &[[0.5, -1.0], [0.25, 2.0]]);
        // step 1: g = [0.51, -1.02], v = g, p = [0.949, -1.898]
        // step 2: g = [0.25949, 1.98102], v = [0.71849, 1.06302], p = [0.877151, -2.004302]
        close(&p, &[0.877_151, -2.004_302]);
    }

    #[test]
    fn adagrad_accumulates_squares() {
        let o = Optimizer::Adagrad {
            lr: 0.1,
            eps: 1e-10,
            initial_accumulator_value: 0.0,
            weight_decay: 0.0,
        };
        let p = run(o, &[[0.5, -1.0], [0.25, 2.0]]);
        // step 1: p -= 0.1 * sign(g) -> [0.9, -1.9]
        // step 2: s = [0.3125, 5], p -= 0.1 * g / sqrt(s)
        close(
            &p,
            &[0.9 - 0.1 * 0.25 / 0.3125f32.sqrt(), -1.9 - 0.1 * 2.0 / 5f32.sqrt()],
        );
    }

    #[test]
    fn adam_corrects_bias_per_step() {
        let o = Optimizer::Adam {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        };
        let p = run(o, &[[0.5, -1.0]]);
        // the first Adam step moves each parameter by lr * sign(g)
        close(&p, &[0.99, -1.99]);
        let p = run(o, &[[0.5, -1.0], [0.25, 2.0]]);
        // step 2: m = [0.0725, 0.11], v = [0.000312..., 0.004995], c1 = 0.19, c2 = 0.001999
        let m: [f64; 2] = [0.9 * 0.05 + 0.1 * 0.25, 0.9 * -0.1 + 0.1 * 2.0];
        let v: [f64; 2] = [0.999 * 0.00025 + 0.001 * 0.0625, 0.999 * 0.001 + 0.001 * 4.0];
        let (c1, c2) = (1.0 - 0.9f64.powi(2), (1.0 - 0.999f64.powi(2)).sqrt());
        let want: Vec<f32> = [0.99f64, -1.99]
            .iter()
            .zip(m.iter().zip(v))
            .map(|(p, (m, v))| (p - 0.01 / c1 * m / (v.sqrt() / c2 + 1e-8)) as f32)
            .collect();
        close(&p, &want);
    }

    #[test]
    fn rows_take_sparse_adams_step_at_the_tables_count() {
        let o = Optimizer::Adam {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-3,
            weight_decay: 0.0,
        };
        // torch.optim.SparseAdam, p = [1, -2], gradients [0.5, -1] at table step 1,
        // then [0.25, 2] at table step 4 (the row was untouched in steps 2 and 3)
        let mut p = vec![1.0f32, -2.0];
        let mut s = o.initial_state(2);
        o.apply_row(&mut p, &[0.5, -1.0], 1.0, &mut s, 1);
        o.apply_row(&mut p, &[0.25, 2.0], 1.0, &mut s, 4);
        let mut want = [1.0f64, -2.0];
        let (mut m, mut v) = ([0.0f64; 2], [0.0f64; 2]);
        for (g, t) in [([0.5f64, -1.0], 1), ([0.25, 2.0], 4)] {
            let size = 0.01 * (1.0 - 0.999f64.powi(t)).sqrt() / (1.0 - 0.9f64.powi(t));
            for i in 0..2 {
                m[i] += (g[i] - m[i]) * 0.1;
                v[i] += (g[i] * g[i] - v[i]) * 0.001;
                want[i] -= size * m[i] / (v[i].sqrt() + 1e-3);
            }
        }
        close(&p, &[want[0] as f32, want[1] as f32]);
        // the dense Adam adds eps after the correction: another step with this eps
        let (mut q, mut r) = (vec![1.0f32, -2.0], vec![1.0f32, -2.0]);
        let (mut sq, mut sr) = (o.initial_state(2), o.initial_state(2));
        o.apply(&mut q, &[0.5, -1.0], 1.0, &mut sq, &mut 0);
        o.apply_row(&mut r, &[0.5, -1.0], 1.0, &mut sr, 1);
        assert!((q[0] - r[0]).abs() > 1e-4, "{q:?} {r:?}");
        // SGD and Adagrad rows are the dense arithmetic
        let sgd = Optimizer::Sgd {
            lr: 0.1,
            momentum: 0.5,
            weight_decay: 0.0,
        };
        let (mut a, mut b) = (vec![1.0f32], vec![1.0f32]);
        let (mut sa, mut sb) = (sgd.initial_state(1), sgd.initial_state(1));
        sgd.apply_row(&mut a, &[2.0], 1.0, &mut sa, 7);
        sgd.apply(&mut b, &[2.0], 1.0, &mut sb, &mut 0);
        assert_eq!((a, sa), (b, sb));
    }

    #[test]
    fn scale_averages_and_settings_are_checked() {
        let o = Optimizer::Sgd {
            lr: 1.0,
            momentum: 0.0,
            weight_decay: 0.0,
        };
        let mut p = vec![0.0f32];
        o.apply(&mut p, &[4.0], 0.25, &mut [], &mut 0);
        assert_eq!(p, vec![-1.0]);
        assert_eq!(o.state_per_value(), 0);
        let bad = Optimizer::Adam {
            lr: 0.1,
            beta1: 1.0,
            beta2: 0.9,
            eps: 1e-8,
            weight_decay: 0.0,
        };
        let e = bad.validate().unwrap_err();
        assert!(matches!(e, TablesError::Invalid(_)));
        assert_eq!(e.to_string(), "beta1=1: out of range");
        let nan = Optimizer::Sgd {
            lr: f32::NAN,
            momentum: 0.0,
            weight_decay: 0.0,
        };
        assert!(nan.validate().unwrap_err().to_string().starts_with("lr=NaN"));
    }
}
