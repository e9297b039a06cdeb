//! What the training loop asks of a model: a minibatch's loss and gradient.

/// Computes a minibatch's loss and gradient for the parameters it touches.
pub trait Learner<B: ?Sized> {
    /// The sorted parameter keys `batch` touches (`None`: every parameter).
    fn keys(&self, batch: &B) -> Option<Vec<u64>>;
    /// Mean loss, number of correct predictions, and the gradient (one value per key
    /// of `keys`, or per parameter) at `params` (values of the same keys).
    fn loss_and_grad(&self, params: &[f32], keys: Option<&[u64]>, batch: &B) -> (f32, usize, Vec<f32>);
}
