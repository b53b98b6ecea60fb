//! `amnesia-split`, Kleppmann's case: a holder that reaches only a bare majority, one node
//! of which restarts empty while it holds the lock.
//!
//! - The VICTIM (worker 0 of every mode) has its own network view: it reaches nodes
//!   `0..quorum` and nothing else (its URLs for the others point at a closed port, so they
//!   refuse at once). Every lease it gets is held on exactly that bare majority.
//! - When a victim reports a grant, the runner restarts node `quorum − 1` EMPTY (no AOF) at
//!   once — event-driven, not hoped-for timing. The victim works to the end of its long
//!   lease ([`SPLIT_TTL`]), so the restart finishes inside it.
//! - The other workers see every node: the empty node plus the `N − quorum` nodes the victim
//!   never reached are a majority, and the next of them to try gets the lock while the
//!   victim still holds it. Its token is computed from counters that never saw the victim's,
//!   so duplicates are expected too.
//!
//! Each restart is a fault window on the scenario's fault list (kind `amnesia`), so its
//! length — the time the node was down — is measured in every run.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::clock::ScenarioClock;
use crate::cluster::{AnyCluster, Cluster, DataOnRestart, NodeId};
use crate::nemesis::target::quorum;
use crate::report::FaultWindow;

/// Lease TTL of the scenario: longer than a node's restart on either backend (about
/// 0.1-0.5 s locally, 1-2 s for a container), so the second holder gets in within it.
pub const SPLIT_TTL: Duration = Duration::from_secs(3);
/// After a restart, the next one waits this long: the cluster settles and other workers get
/// the lock in between.
const COOLDOWN: Duration = Duration::from_secs(1);
/// URL of node `i` as the victim sees it when it cannot reach it: a privileged loopback
/// port nothing listens on, so connecting is refused at once (one port per node: a lock
/// rightly refuses the same server twice).
fn unreachable(i: usize) -> String {
    format!("redis://127.0.0.1:{}/", 1 + i)
}

/// The victim's node URLs: the first `quorum` as given, the rest unreachable.
pub fn victim_view(urls: &[String]) -> Vec<String> {
    let q = quorum(urls.len());
    urls.iter()
        .enumerate()
        .map(|(i, u)| if i < q { u.clone() } else { unreachable(i) })
        .collect()
}

/// The node restarted empty: the last of the victim's bare majority.
pub fn wiped_node(nodes: usize) -> NodeId {
    NodeId(quorum(nodes).saturating_sub(1))
}

/// Restarts [`wiped_node`] empty whenever a victim grant arrives on `grants` (at most one
/// restart at a time, then `COOLDOWN`), until `stop` or `until`. Returns the restarts as
/// fault windows and the errors met. The node is started again on every exit path.
pub async fn wipe_on_victim_grants(
    cluster: Arc<AnyCluster>,
    mut grants: UnboundedReceiver<()>,
    clock: ScenarioClock,
    until: Duration,
    stop: CancellationToken,
) -> (Vec<FaultWindow>, Vec<String>) {
    let node = wiped_node(cluster.nodes());
    let mut faults = Vec::new();
    let mut errors = Vec::new();
    let deadline = clock.instant_at(until);
    // Bounded by `until` and `stop`.
    loop {
        tokio::select! {
            g = grants.recv() => if g.is_none() { break },
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(deadline) => break,
        }
        if Instant::now() >= deadline {
            break;
        }
        let start = clock.offset(Instant::now());
        let result = tokio::select! {
            r = cluster.restart(node, DataOnRestart::Wipe) => r,
            () = stop.cancelled() => break,
        };
        let end = clock.offset(Instant::now());
        match result {
            Ok(()) => faults.push(FaultWindow {
                kind: "amnesia".into(),
                detail: format!(
                    "restarted empty on a victim's grant ({} ms down)",
                    (end - start).as_millis()
                ),
                targets: vec![node.to_string()],
                start_ms: u64::try_from(start.as_millis()).unwrap_or(u64::MAX),
                end_ms: Some(u64::try_from(end.as_millis()).unwrap_or(u64::MAX)),
            }),
            Err(e) => errors.push(format!("restarting {node} empty: {e}")),
        }
        tokio::select! {
            () = tokio::time::sleep(COOLDOWN) => {}
            () = stop.cancelled() => break,
        }
        // Grants that came during the restart or the cooldown are stale triggers.
        while grants.try_recv().is_ok() {}
    }
    // Whatever happened above, the node runs when we leave (start of a running node is a
    // no-op).
    if let Err(e) = cluster.start(node).await {
        errors.push(format!("starting {node} again: {e}"));
    }
    (faults, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_victim_reaches_a_bare_majority_and_the_last_of_it_is_wiped() {
        let urls: Vec<String> = (0..5).map(|i| format!("redis://n{i}")).collect();
        let view = victim_view(&urls);
        assert_eq!(&view[..3], &urls[..3]);
        assert_eq!(view[3], unreachable(3));
        assert_ne!(view[3], view[4]);
        assert_eq!(wiped_node(5), NodeId(2));
        // The wiped node and the ones the victim cannot reach are a quorum.
        assert_eq!(1 + (5 - quorum(5)), quorum(5));
    }
}
