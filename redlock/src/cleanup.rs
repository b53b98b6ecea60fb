//! The clean-up of a failed or cancelled attempt: a token-checked delete of its key on
//! every node that may hold it, tried again on the nodes that did not answer.
//!
//! The delete queues behind the attempt's `SET` on the connection the `SET` went out on,
//! so one round is enough while that connection lives. It is not when the connection
//! broke with the `SET` already in the server's socket (a proxy or a load balancer closed
//! it, the network reset it, while the server was stalled): the delete must then go out
//! on a new connection, which has no order with the old one, and making it waits for the
//! same stalled server. The round gives up at its node deadline; the server, once it runs
//! again, carries out the buffered `SET`, and the key stands for its whole TTL — nobody
//! can take the lock on that node meanwhile (availability, not safety: the key holds the
//! failed attempt's token, which no lease carries).
//!
//! So the nodes whose delete failed or missed its deadline are tried again, after pauses
//! that double from the node deadline up to [`MAX_PAUSE`], until each has answered, the
//! attempt's TTL has passed since it started, or [`Redlock::shutdown`] began (which then
//! waits for at most the round in flight). A node that answers — deleted, nothing there,
//! another owner's key — is done.
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
use crate::lease::{ReleaseOutcome, Wait, delete_everywhere};
use crate::node::Node;
use crate::room::Room;
use crate::token::Token;

/// The longest pause between two rounds.
pub(crate) const MAX_PAUSE: Duration = Duration::from_secs(1);

/// The shortest pause between two rounds (a node deadline can be set below it).
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// One failed or cancelled attempt's key, to delete.
pub(crate) struct Cleanup {
    pub(crate) key: Arc<str>,
    pub(crate) token: Token,
    /// Each round's node deadline.
    pub(crate) deadline: Duration,
    /// When the attempt's keys would have expired had every `SET` landed at its start:
    /// no new round starts after it.
    pub(crate) give_up_at: Instant,
    /// The client's shutdown signal: no new round starts once it fired.
    pub(crate) closing: CancellationToken,
}

impl Cleanup {
    /// Deletes the key on `nodes`, again on those that did not answer (see the module
    /// docs). The first round's requests are handed to the connections at the first
    /// poll, so a caller that polls this once before spawning it keeps the deletes
    /// behind the attempt's `SET`s.
    pub(crate) async fn run(self, mut nodes: Vec<Arc<Node>>) {
        let mut pause = self.deadline.max(MIN_PAUSE);
        let mut round = 1u32;
        loop {
            let report = delete_everywhere(
                &nodes,
                &self.key,
                &self.token,
                false,
                self.deadline,
                Wait::All,
                // The first round follows the attempt's `SET`s: it may take the places kept
                // for that. A later one is sent again, where the first may still wait.
                if round == 1 {
                    Room::Reserved
                } else {
                    Room::Shared
                },
            )
            .await;
            nodes = nodes
                .into_iter()
                .zip(report.nodes)
                .filter(|(_, node)| try_again(&node.outcome))
                .map(|(node, _)| node)
                .collect();
            if nodes.is_empty() {
                return;
            }
            let next = Instant::now().checked_add(pause);
            let stop = match next {
                Some(next) if next <= self.give_up_at && !self.closing.is_cancelled() => {
                    tokio::select! {
                        () = tokio::time::sleep_until(next) => false,
                        () = self.closing.cancelled() => true,
                    }
                }
                _ => true,
            };
            if stop {
                tracing::debug!(
                    key = %self.key,
                    rounds = round,
                    unanswered = nodes.len(),
                    "clean-up gave up: its keys expire with the ttl"
                );
                return;
            }
            round = round.saturating_add(1);
            pause = pause.saturating_mul(2).min(MAX_PAUSE);
        }
    }
}

/// Whether a node's delete may succeed if sent again: it missed its deadline or its
/// connection failed. Refused credentials, a second name for a server already counted,
/// and answers (deleted, nothing there, not ours) are final.
fn try_again(outcome: &ReleaseOutcome) -> bool {
    match outcome {
        ReleaseOutcome::Failed(e) | ReleaseOutcome::Unknown(e) => matches!(
            e,
            NodeError::Timeout(_)
                | NodeError::Redis(_)
                | NodeError::Protocol(_)
                | NodeError::Backlog(_)
        ),
        ReleaseOutcome::Pending => true,
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
