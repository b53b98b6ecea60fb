//! The clean-up of a failed or cancelled attempt, and of a release a node refused or did
//! not answer: a token-checked delete of the key on every node that may hold it, tried
//! again on the nodes that did not answer.
//!
//! The delete queues behind the attempt's `SET` on the connection the `SET` went out on,
//! so one round is enough while that connection lives. It is not when the connection
//! broke with the `SET` already in the server's socket (a proxy or a load balancer closed
//! it, the network reset it, while the server was stalled): the delete must then go out
//! on a new connection, which has no order with the old one, and making it waits for the
//! same stalled server. The round gives up at its node deadline; the server, once it runs
//! again, carries out the buffered `SET`, and the key stands for its whole TTL — nobody
//! can take the lock on that node meanwhile (availability, not safety: the key holds the
//! failed attempt's token, which no lease carries). Nor is it enough when the delete was
//! refused ([`NodeError::Backlog`]): a release whose lease's writes had all left the
//! stalled node's line has no place kept for it there (see `room`), and its key, set long
//! ago, stays until a delete gets in.
//!
//! So the nodes whose delete failed or missed its deadline are tried again, after pauses
//! that double from the node deadline up to [`MAX_PAUSE`], until each has answered, the
//! keys' TTL has passed since the last write that may have set them (the attempt's start,
//! the lease's last extend), or [`Redlock::shutdown`] began (which then waits for at most
//! the round in flight). A node that answers — deleted, nothing there, another owner's
//! key — is done; so is a node to which nothing of ours was ever sent (a vote refused
//! with `Backlog`, or dropped before it left): no delete goes there (see `room`), and no
//! round asks it again.
//!
//! What this cannot close: an answer on a new connection says nothing of a `SET` still
//! travelling on the old one (in a network path, not yet in the server's socket); and a
//! server stalled longer than the TTL runs the `SET` after the last try. Such a key
//! expires with its TTL.
//!
//! [`Redlock::shutdown`]: crate::Redlock::shutdown

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::NodeError;
use crate::lease::{ReleaseOutcome, ReleaseReport, Wait, delete_everywhere};
use crate::node::Node;
use crate::room::Writes;
use crate::token::Token;

/// The longest pause between two rounds.
pub(crate) const MAX_PAUSE: Duration = Duration::from_secs(1);

/// The shortest pause between two rounds (a node deadline can be set below it).
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// One failed or cancelled attempt's key, or one released lease's, to delete.
#[derive(Debug, Clone)]
pub(crate) struct Cleanup {
    pub(crate) key: Arc<str>,
    pub(crate) token: Token,
    /// What the attempt or lease sent each node: which nodes get a delete, and in which
    /// places of their lines (see `room`).
    pub(crate) writes: Writes,
    /// Whether a delete that removes the key tells the key's waiters (a release's does; a
    /// failed attempt's wakes nobody, see `client`).
    pub(crate) announce: bool,
    /// Each round's node deadline.
    pub(crate) deadline: Duration,
    /// When the keys expire, had every write that may have set them landed when it was
    /// sent: no new round starts after it.
    pub(crate) give_up_at: Instant,
    /// The client's shutdown signal: no new round starts once it fired.
    pub(crate) closing: CancellationToken,
}

impl Cleanup {
    /// Deletes the key on `nodes` (those of them that anything of ours reached), again on
    /// those that did not answer (see the module docs). The first round's requests are
    /// handed to the connections at the first poll, so a caller that polls this once
    /// before spawning it keeps the deletes behind the attempt's `SET`s.
    pub(crate) async fn run(self, nodes: Vec<Arc<Node>>) {
        let report = self.round(&nodes).await;
        let left = unanswered(nodes, report.nodes.iter().map(|n| &n.outcome));
        self.again(left).await;
    }

    /// Asks `nodes` again, after a pause, and so on until each has answered (see the
    /// module docs): those whose first delete — [`run`](Self::run)'s first round, or a
    /// release's — was refused, failed or missed its deadline.
    pub(crate) async fn again(self, mut nodes: Vec<Arc<Node>>) {
        let mut pause = self.deadline.max(MIN_PAUSE);
        let mut rounds = 1u32;
        while !nodes.is_empty() {
            if !self.paused(pause).await {
                tracing::debug!(
                    key = %self.key,
                    rounds,
                    unanswered = nodes.len(),
                    "clean-up gave up: its keys expire with the ttl"
                );
                return;
            }
            let report = self.round(&nodes).await;
            nodes = unanswered(nodes, report.nodes.iter().map(|n| &n.outcome));
            rounds = rounds.saturating_add(1);
            pause = pause.saturating_mul(2).min(MAX_PAUSE);
        }
    }

    /// One delete on each of `nodes`, waiting for every answer or deadline.
    async fn round(&self, nodes: &[Arc<Node>]) -> ReleaseReport {
        // Nothing is left in flight for a late answer.
        delete_everywhere(nodes, self, Wait::All, |_| async {}).await
    }

    /// Waits `pause`; `false` (at once) when the next round would start after
    /// `give_up_at`, or when shutdown begins.
    async fn paused(&self, pause: Duration) -> bool {
        match Instant::now().checked_add(pause) {
            Some(next) if next <= self.give_up_at && !self.closing.is_cancelled() => {
                tokio::select! {
                    () = tokio::time::sleep_until(next) => true,
                    () = self.closing.cancelled() => false,
                }
            }
            _ => false,
        }
    }
}

/// The `nodes` whose `outcomes` (in node order) call for another try.
pub(crate) fn unanswered<'a>(
    nodes: Vec<Arc<Node>>,
    outcomes: impl Iterator<Item = &'a ReleaseOutcome>,
) -> Vec<Arc<Node>> {
    nodes
        .into_iter()
        .zip(outcomes)
        .filter(|(_, outcome)| try_again(outcome))
        .map(|(node, _)| node)
        .collect()
}

/// Whether a node's delete may succeed if sent again: it was refused for a full line,
/// missed its deadline, or its connection failed. Refused credentials, a second name for
/// a server already counted, and answers (deleted, nothing there, not ours) are final;
/// a delete still on its way ([`ReleaseOutcome::Pending`]) is asked again, if need be, by
/// whoever drives it to its answer.
pub(crate) fn try_again(outcome: &ReleaseOutcome) -> bool {
    match outcome {
        ReleaseOutcome::Failed(e) | ReleaseOutcome::Unknown(e) => matches!(
            e,
            NodeError::Timeout(_)
                | NodeError::Redis(_)
                | NodeError::Protocol(_)
                | NodeError::Backlog(_)
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_final_and_connection_faults_are_tried_again() {
        let again = |o: ReleaseOutcome| try_again(&o);
        assert!(!again(ReleaseOutcome::Released));
        assert!(!again(ReleaseOutcome::AlreadyGone));
        assert!(!again(ReleaseOutcome::NotOurs));
        // Driven to its answer elsewhere (see `lease`).
        assert!(!again(ReleaseOutcome::Pending));
        assert!(again(ReleaseOutcome::Failed(NodeError::Timeout(
            Duration::from_millis(20)
        ))));
        assert!(again(ReleaseOutcome::Failed(NodeError::Redis(
            "connection reset".into()
        ))));
        assert!(again(ReleaseOutcome::Failed(NodeError::Backlog(64))));
        assert!(!again(ReleaseOutcome::Failed(NodeError::Auth(
            "WRONGPASS".into()
        ))));
        assert!(!again(ReleaseOutcome::Failed(NodeError::SameServer(
            "127.0.0.1:7001".into()
        ))));
    }
}
