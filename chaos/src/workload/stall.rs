//! How a worker stalls mid-section.

use std::time::Duration;

/// The way a stalled worker stops making progress.
///
/// Today the stall is an async sleep of the worker's task: its lease runs out exactly as it
/// would for a paused process, but the rest of the process (and the lock client's
/// connections) keep running. A real process-level pause (SIGSTOP of a worker process) is a
/// later variant; the workload only calls [`Stall::stall`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Stall {
    /// `tokio::time::sleep`.
    #[default]
    Sleep,
}

impl Stall {
    /// Stalls the calling worker for `length`.
    pub async fn stall(&self, length: Duration) {
        match self {
            Stall::Sleep => tokio::time::sleep(length).await,
        }
    }
}
