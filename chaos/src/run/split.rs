//! `amnesia-split`, Kleppmann's case: a holder that reaches only a bare majority, one node
//! of which restarts empty while it holds the lock.
//!
//! - The VICTIM (worker 0 of every mode) has its own network view: it reaches nodes
//!   `0..quorum` and nothing else (its URLs for the others point at a closed port, so they
//!   refuse at once). Every lease it gets is held on exactly that bare majority.
//! - When a victim reports a grant, the runner restarts node `quorum − 1` EMPTY (no AOF) at
//!   once — event-driven, not hoped-for timing. The victim works to the end of its long
//!   lease ([`SPLIT_TTL`]), so the restart finishes inside it.
//! - The four modes' victims share that one node, and a grant that arrives while it restarts
//!   or settles cannot be served. So the restarts go round the modes: a grant from a mode
//!   that has had more restarts than another mode whose victim has been granted is passed
//!   over, and that node waits for the mode behind ([`serves`]). First come, first served
//!   let one mode's victim miss every restart of a Docker run (2026-12-02: `none` saw no
//!   violation while the other modes saw 2-127).
//! - The other workers see every node: the empty node plus the `N − quorum` nodes the victim
//!   never reached are a majority, and the next of them to try gets the lock while the
//!   victim still holds it. Its token is computed from counters that never saw the victim's,
//!   so duplicates are expected too.
//!
//! Each restart is a fault window on the scenario's fault list (kind `amnesia`), so its
//! length — the time the node was down — is measured in every run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::clock::ScenarioClock;
use crate::cluster::{AnyCluster, Cluster, DataOnRestart, NodeId};
use crate::nemesis::target::quorum;
use crate::report::FaultWindow;
use crate::workload::Mode;

/// Lease TTL of the scenario: longer than a node's restart on either backend (about
/// 0.1-0.5 s locally, 1-2 s for a container), so the second holder gets in within it.
pub const SPLIT_TTL: Duration = Duration::from_secs(3);
/// After a restart, the next one waits this long: the cluster settles and other workers get
/// the lock in between.
pub const COOLDOWN: Duration = Duration::from_secs(1);
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

/// Whether a victim grant from `mode` gets a restart, given the restarts each mode whose
/// victim has been granted so far has had (`restarts`, by mode, `mode` included): only if
/// no such mode has had fewer.
pub fn serves(restarts: &BTreeMap<usize, u32>, mode: usize) -> bool {
    let mine = restarts.get(&mode).copied().unwrap_or(0);
    restarts.values().all(|&other| other >= mine)
}

/// Restarts [`wiped_node`] empty when a victim grant arrives on `grants` (the grant's mode
/// index; at most one restart at a time, then `COOLDOWN`; modes served in turn, see
/// [`serves`]), until `stop` or `until`. Returns the restarts as fault windows and the
/// errors met. The node is started again on every exit path.
pub async fn wipe_on_victim_grants(
    cluster: Arc<AnyCluster>,
    mut grants: UnboundedReceiver<usize>,
    clock: ScenarioClock,
    until: Duration,
    stop: CancellationToken,
) -> (Vec<FaultWindow>, Vec<String>) {
    let node = wiped_node(cluster.nodes());
    let mut faults = Vec::new();
    let mut errors = Vec::new();
    let mut restarts: BTreeMap<usize, u32> = BTreeMap::new();
    let deadline = clock.instant_at(until);
    // Bounded by `until` and `stop`.
    loop {
        let mode = tokio::select! {
            g = grants.recv() => match g { Some(m) => m, None => break },
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(deadline) => break,
        };
        if Instant::now() >= deadline {
            break;
        }
        restarts.entry(mode).or_insert(0);
        if !serves(&restarts, mode) {
            continue;
        }
        if let Some(n) = restarts.get_mut(&mode) {
            *n = n.saturating_add(1);
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
                    "restarted empty on the {} victim's grant ({} ms down)",
                    Mode::ALL.get(mode).map_or("?", |m| m.name()),
                    (end - start).as_millis()
                ),
                targets: vec![node.target()],
                start_ms: u64::try_from(start.as_millis()).unwrap_or(u64::MAX),
                end_ms: Some(u64::try_from(end.as_millis()).unwrap_or(u64::MAX)),
            }),
            Err(e) => errors.push(format!("restarting {node} empty: {e}")),
        }
        tokio::select! {
            () = tokio::time::sleep(COOLDOWN) => {}
            () = stop.cancelled() => break,
        }
        // Grants that came during the restart or the cooldown are stale triggers; their
        // modes wait for a turn.
        while let Ok(m) = grants.try_recv() {
            restarts.entry(m).or_insert(0);
        }
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
        // Its restarts are written as the report's schema spells a node (`n2`), which the
        // leak check reads back to exempt that node alone (it once wrote `node 2`, which
        // exempted every node and failed the published schema).
        let target = wiped_node(5).target();
        assert_eq!(target, "n2");
        assert_eq!(crate::report::model::target_node(&target), Some(2));
        // The wiped node and the ones the victim cannot reach are a quorum.
        assert_eq!(1 + (5 - quorum(5)), quorum(5));
    }

    #[test]
    fn restarts_go_round_the_modes_whose_victims_were_granted() {
        let mut r = BTreeMap::new();
        r.insert(0, 0);
        assert!(serves(&r, 0), "the first grant is served");
        r.insert(0, 1);
        r.insert(2, 0);
        assert!(!serves(&r, 0), "mode 2 has had none yet");
        assert!(serves(&r, 2));
        r.insert(2, 1);
        assert!(serves(&r, 0), "level again: first come, first served");
        assert!(serves(&r, 2));
        // Modes whose victims were never granted do not hold the others up.
        r.insert(0, 3);
        r.insert(2, 3);
        assert!(serves(&r, 2));
    }
}
