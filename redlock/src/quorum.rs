//! Parallel fan-out with early decision.
//!
//! A call goes to every node at once. We stop waiting the moment the outcome is known —
//! `required` yes votes, or so many no votes that `required` can no longer be reached —
//! so the latency of a healthy acquire is that of the quorum-th fastest node, and a
//! frozen node costs nothing unless its vote is needed. Calls still in flight are
//! handed to a background task that drives them to their own deadlines: their commands
//! reach the servers in order with anything we send later on the same connection (each
//! call is exactly one command: see `script`). That task is tracked, so a client's
//! `shutdown` waits for it too.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::error::{LockError, NodeError, NodeFailure, NodeFailureReason};
use crate::node::Node;

/// One node's answer: `Ok(Some(v))` yes, `Ok(None)` no (held by another / not ours).
pub(crate) type Answer<T> = (Result<Option<T>, NodeError>, Duration);

/// One node's call in flight.
type Call<Fut> = Pin<Box<Fut>>;

/// What each node said by the time the decision was made.
#[derive(Debug)]
pub(crate) struct Tally<T> {
    /// Indexed like the nodes; `None` = no answer before the decision.
    pub(crate) answers: Vec<Option<Answer<T>>>,
    pub(crate) yes: usize,
    pub(crate) required: usize,
}

impl<T> Tally<T> {
    pub(crate) fn reached(&self) -> bool {
        self.yes >= self.required
    }

    /// The values of the yes votes.
    pub(crate) fn yes_values(&self) -> impl Iterator<Item = &T> {
        self.answers.iter().filter_map(|a| {
            a.as_ref()
                .and_then(|(r, _)| r.as_ref().ok().and_then(Option::as_ref))
        })
    }

    /// Every node that did not say yes, and why.
    pub(crate) fn failures(&self, nodes: &[Arc<Node>]) -> Vec<NodeFailure> {
        nodes
            .iter()
            .zip(&self.answers)
            .filter_map(|(node, answer)| {
                let reason = match answer {
                    None => NodeFailureReason::NoAnswerYet,
                    Some((Ok(Some(_)), _)) => return None,
                    Some((Ok(None), _)) => NodeFailureReason::NotOurs,
                    Some((Err(e), _)) => NodeFailureReason::Error(e.clone()),
                };
                Some(NodeFailure {
                    addr: node.addr().to_owned(),
                    reason,
                })
            })
            .collect()
    }

    /// The error for a tally that did not reach its quorum.
    pub(crate) fn quorum_error(&self, resource: &str, nodes: &[Arc<Node>]) -> LockError {
        LockError::QuorumNotReached {
            resource: resource.to_owned(),
            granted: self.yes,
            required: self.required,
            nodes: nodes.len(),
            failures: self.failures(nodes),
        }
    }

    /// Nodes that said a definite "not ours".
    pub(crate) fn not_ours(&self) -> usize {
        self.answers
            .iter()
            .filter(|a| matches!(a, Some((Ok(None), _))))
            .count()
    }
}

/// How long to wait for answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// Until the outcome is decided (quorum reached or impossible).
    Decided,
    /// Until every node has answered or hit its deadline.
    All,
}

/// Sends `op` to every node in parallel and collects answers until `until` is met or
/// `deadline` (from now) has passed: a node that has not answered by then counts as
/// [`NodeError::Timeout`], and its call is dropped. One timer bounds every node's call
/// (the ops use [`Node::call_unbounded`]); calls still in flight after a decision are
/// driven to the same deadline in the background.
///
/// Each wake-up polls every call still in flight (a handful; a call that has no reply
/// yet answers "not yet" at the cost of an atomic load), so answers that arrived
/// together are all counted before deciding: a call that has already answered is not
/// handed to the background, and often none is.
pub(crate) async fn fan_out<T, F, Fut>(
    nodes: &[Arc<Node>],
    required: usize,
    until: Until,
    deadline: Duration,
    tasks: &TaskTracker,
    op: F,
) -> Tally<T>
where
    T: Send + 'static,
    F: Fn(Arc<Node>) -> Fut,
    Fut: Future<Output = Answer<T>> + Send + 'static,
{
    fan_out_then(nodes, required, until, deadline, tasks, op, |_| async {}).await
}

/// Like [`fan_out`]; when calls were still in flight at the decision, `late` gets their
/// answers once each has one (by node index; [`NodeError::Timeout`] for a call that
/// reached the deadline), in the background task that drove them, which waits for it.
pub(crate) async fn fan_out_then<T, F, Fut, L, LFut>(
    nodes: &[Arc<Node>],
    required: usize,
    until: Until,
    deadline: Duration,
    tasks: &TaskTracker,
    op: F,
    late: L,
) -> Tally<T>
where
    T: Send + 'static,
    F: Fn(Arc<Node>) -> Fut,
    Fut: Future<Output = Answer<T>> + Send + 'static,
    L: FnOnce(Vec<(usize, Answer<T>)>) -> LFut + Send + 'static,
    LFut: Future<Output = ()> + Send + 'static,
{
    let started = tokio::time::Instant::now();
    let mut pending: Vec<Option<Call<Fut>>> = nodes
        .iter()
        .map(|node| Some(Box::pin(op(Arc::clone(node)))))
        .collect();
    let mut tally = Tally {
        answers: (0..nodes.len()).map(|_| None).collect(),
        yes: 0,
        required,
    };
    let mut no = 0usize;
    let mut in_flight = pending.len();
    // Saturating: a deadline too far to represent is no deadline.
    let end = started.checked_add(deadline);
    let timer = async {
        match end {
            Some(end) => tokio::time::sleep_until(end).await,
            None => std::future::pending().await,
        }
    };
    let mut timer = std::pin::pin!(timer);
    let timed_out = std::future::poll_fn(|cx| {
        for (i, slot) in pending.iter_mut().enumerate() {
            let Some(answer) = poll_slot(slot, cx) else {
                continue;
            };
            in_flight = in_flight.saturating_sub(1);
            match &answer.0 {
                Ok(Some(_)) => tally.yes = tally.yes.saturating_add(1),
                _ => no = no.saturating_add(1),
            }
            if let Some(answer_slot) = tally.answers.get_mut(i) {
                *answer_slot = Some(answer);
            }
        }
        let decided = tally.yes >= required
            || !crate::validity::quorum_still_possible_with(nodes.len(), required, no);
        if in_flight == 0 || (until == Until::Decided && decided) {
            return Poll::Ready(false);
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(true),
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    if timed_out {
        for (node, slot) in nodes.iter().zip(tally.answers.iter_mut()) {
            if slot.is_none() {
                let e = NodeError::Timeout(deadline);
                crate::metrics::node_error(node.addr(), &e);
                *slot = Some((Err(e), started.elapsed()));
            }
        }
        // Past every node's deadline: nothing left to wait for.
        return tally;
    }
    if in_flight > 0 {
        // Keep polling the rest so every command is sent and its reply consumed, up to
        // the same deadline.
        let mut left: Vec<(usize, Arc<Node>, Option<Call<Fut>>)> = nodes
            .iter()
            .zip(pending)
            .enumerate()
            .filter(|(_, (_, call))| call.is_some())
            .map(|(i, (node, call))| (i, Arc::clone(node), call))
            .collect();
        tasks.spawn(async move {
            let mut answers = Vec::with_capacity(left.len());
            let rest = std::future::poll_fn(|cx| {
                for (i, _, slot) in &mut left {
                    if let Some(answer) = poll_slot(slot, cx) {
                        answers.push((*i, answer));
                    }
                }
                if left.iter().any(|(_, _, slot)| slot.is_some()) {
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            });
            let timed_out = match end {
                Some(end) => tokio::time::timeout_at(end, rest).await.is_err(),
                None => {
                    rest.await;
                    false
                }
            };
            if timed_out {
                for (i, node, call) in &left {
                    if call.is_some() {
                        let e = NodeError::Timeout(deadline);
                        crate::metrics::node_error(node.addr(), &e);
                        answers.push((*i, (Err(e), started.elapsed())));
                    }
                }
            }
            late(answers).await;
        });
    }
    tally
}

/// Polls the call in `slot`, if any; its answer once it has one (the slot is then empty).
fn poll_slot<Fut: Future>(
    slot: &mut Option<Call<Fut>>,
    cx: &mut std::task::Context<'_>,
) -> Option<Fut::Output> {
    let answer = match slot.as_mut()?.as_mut().poll(cx) {
        Poll::Ready(answer) => answer,
        Poll::Pending => return None,
    };
    *slot = None;
    Some(answer)
}
