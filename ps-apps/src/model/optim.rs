//! Optimizers as pure functions on a slice of parameters, its gradient and its own
//! state slice, so each server applies them to the key range it holds.

use super::error::ModelError;
use serde::{Deserialize, Serialize};

/// Stochastic gradient descent with optional momentum and L2 weight decay:
///
/// ```text
/// g' = g + weight_decay * w
/// v  = momentum * v + g'        (only when momentum != 0)
/// w  = w - lr * (momentum != 0 ? v : g')
/// ```
///
/// (PyTorch's formulation; the velocity is the per-parameter state.)
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sgd {
    /// Learning rate.
    pub lr: f32,
    /// Momentum in `[0, 1)`; 0 is plain SGD and needs no state.
    pub momentum: f32,
    /// L2 weight decay (0 for none).
    pub weight_decay: f32,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    pub fn new(lr: f32) -> Sgd {
        Sgd {
            lr,
            momentum: 0.0,
            weight_decay: 0.0,
        }
    }

    /// The same with `momentum`.
    pub fn with_momentum(self, momentum: f32) -> Sgd {
        Sgd { momentum, ..self }
    }

    /// The same with L2 `weight_decay`.
    pub fn with_weight_decay(self, weight_decay: f32) -> Sgd {
        Sgd { weight_decay, ..self }
    }

    /// The same with the learning rate multiplied by `decay^epochs_done`: an
    /// exponential schedule per pass over the data. Constant-rate SGD leaves softmax
    /// regression on Fashion-MNIST wandering between 0.80 and 0.84 test accuracy; a
    /// decay of 0.85 per pass settles it at 0.845.
    pub fn decayed(self, decay: f32, epochs_done: u32) -> Sgd {
        Sgd {
            lr: self.lr * decay.powi(epochs_done.min(i32::MAX as u32) as i32),
            ..self
        }
    }

    /// Checks the settings: `lr > 0`, `0 <= momentum < 1`, `weight_decay >= 0`, all
    /// finite. [`ModelError::Invalid`] names the offending setting.
    pub fn validate(&self) -> Result<(), ModelError> {
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(ModelError::Invalid(format!(
                "learning rate {} must be a positive number",
                self.lr
            )));
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(ModelError::Invalid(format!(
                "momentum {} must be in [0, 1)",
                self.momentum
            )));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(ModelError::Invalid(format!(
                "weight decay {} must be 0 or more",
                self.weight_decay
            )));
        }
        Ok(())
    }

    /// Optimizer state values needed for `n` parameters: `n` velocities with
    /// momentum, none without. Start them at zero.
    pub fn state_len(&self, n: usize) -> usize {
        if self.momentum != 0.0 {
            n
        } else {
            0
        }
    }

    /// Updates one parameter `w` with gradient `g` and velocity `v`.
    #[inline]
    pub fn update(&self, w: &mut f32, g: f32, v: &mut f32) {
        let g = g + self.weight_decay * *w;
        let step = if self.momentum != 0.0 {
            *v = self.momentum * *v + g;
            *v
        } else {
            g
        };
        *w -= self.lr * step;
    }

    /// Applies one step to `params` with `grad` (same length) and `state`
    /// (`state_len(params.len())` values, kept by the caller between steps).
    ///
    /// # Panics
    /// If the lengths disagree.
    pub fn step(&self, params: &mut [f32], grad: &[f32], state: &mut [f32]) {
        assert_eq!(params.len(), grad.len(), "one gradient value per parameter");
        if self.momentum != 0.0 {
            assert_eq!(state.len(), params.len(), "one velocity per parameter");
            for ((w, &g), v) in params.iter_mut().zip(grad).zip(state.iter_mut()) {
                self.update(w, g, v);
            }
        } else {
            let mut unused = 0.0;
            for (w, &g) in params.iter_mut().zip(grad) {
                self.update(w, g, &mut unused);
            }
        }
    }

    /// Applies one step to the parameters at positions `idx` of `params` (a sparse
    /// push): `grad[i]` belongs to `params[idx[i]]` and `state[idx[i]]`. Parameters
    /// not listed are left alone, velocities included (lazy momentum).
    ///
    /// # Panics
    /// If `idx` and `grad` differ in length or a position is out of range.
    pub fn step_sparse(&self, params: &mut [f32], idx: &[usize], grad: &[f32], state: &mut [f32]) {
        assert_eq!(idx.len(), grad.len(), "one gradient value per position");
        let mut unused = 0.0;
        for (&i, &g) in idx.iter().zip(grad) {
            let v = if self.momentum != 0.0 {
                &mut state[i]
            } else {
                &mut unused
            };
            self.update(&mut params[i], g, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_momentum_and_decay() {
        let mut w = vec![1.0, -2.0];
        Sgd::new(0.5).step(&mut w, &[2.0, -2.0], &mut []);
        assert_eq!(w, vec![0.0, -1.0]);

        let sgd = Sgd::new(1.0).with_momentum(0.5);
        let (mut w, mut v) = (vec![0.0], vec![0.0; sgd.state_len(1)]);
        sgd.step(&mut w, &[1.0], &mut v); // v = 1, w = -1
        sgd.step(&mut w, &[1.0], &mut v); // v = 1.5, w = -2.5
        assert_eq!((w[0], v[0]), (-2.5, 1.5));

        let mut w = vec![2.0];
        Sgd::new(0.1).with_weight_decay(0.5).step(&mut w, &[0.0], &mut []);
        assert!((w[0] - 1.9).abs() < 1e-6);
        assert_eq!(
            Sgd::new(0.8).with_momentum(0.9).decayed(0.5, 3),
            Sgd::new(0.1).with_momentum(0.9)
        );
    }

    #[test]
    fn a_key_range_at_a_time_equals_the_whole() {
        let sgd = Sgd::new(0.1).with_momentum(0.9).with_weight_decay(1e-3);
        let grad: Vec<f32> = (0..10).map(|i| i as f32 - 4.5).collect();
        let (mut whole, mut vw) = (vec![1.0f32; 10], vec![0.0; 10]);
        let (mut parts, mut vp) = (whole.clone(), vw.clone());
        for _ in 0..3 {
            sgd.step(&mut whole, &grad, &mut vw);
            for r in [0..3, 3..7, 7..10] {
                sgd.step(&mut parts[r.clone()], &grad[r.clone()], &mut vp[r]);
            }
        }
        assert_eq!(whole, parts);
        assert_eq!(vw, vp);
    }

    #[test]
    fn sparse_steps_touch_only_their_positions() {
        let sgd = Sgd::new(1.0).with_momentum(0.5);
        let (mut w, mut v) = (vec![0.0; 4], vec![0.0; 4]);
        sgd.step_sparse(&mut w, &[1, 3], &[1.0, -1.0], &mut v);
        sgd.step_sparse(&mut w, &[1], &[1.0], &mut v);
        assert_eq!(w, vec![0.0, -2.5, 0.0, 1.0]);
        assert_eq!(v, vec![0.0, 1.5, 0.0, -1.0]);
    }

    #[test]
    fn validation() {
        assert!(Sgd::new(0.1).with_momentum(0.9).validate().is_ok());
        assert!(Sgd::new(0.0)
            .validate()
            .unwrap_err()
            .to_string()
            .contains("learning rate"));
        assert!(Sgd::new(f32::NAN).validate().is_err());
        assert!(Sgd::new(0.1)
            .with_momentum(1.0)
            .validate()
            .unwrap_err()
            .to_string()
            .contains("momentum"));
        assert!(Sgd::new(0.1).with_weight_decay(-1.0).validate().is_err());
    }
}
