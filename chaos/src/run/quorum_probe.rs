//! The quorum probe's runner: while exactly `N − quorum` nodes are down, a few acquires of
//! the rig's own through the lock under test's code (why: [`crate::checker::quorum_probe`]).
//!
//! A node counts as down while a fault that stops its answers is in effect on it (crash,
//! restart, freeze, partition, black hole). The probe runs only while nothing else is in
//! effect anywhere (a slow or misbehaving third node would be a fault the lock may
//! rightly fail on), waits [`SETTLE`] into each such window so the fault has taken hold,
//! then makes up to [`PER_WINDOW`] acquires, one attempt each, on a fresh resource each
//! time, releasing what it got. It stops at the scenario's end or its cancellation.
//!
//! The probe's lock is ours as the rig's workers build it, except what would make a
//! correct lock fail on a busy machine or for a reason other than the quorum rule: a
//! long TTL and node deadline ([`PROBE_TTL`], [`NODE_DEADLINE`]), no fencing, no restart
//! quarantine or clock-jump guard (their refusals are correct, and judged elsewhere).

use std::collections::BTreeSet;
use std::time::Duration;

use fenced_redlock::{Redlock, RestartQuarantine};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::clock::ScenarioClock;
use crate::checker::quorum_probe::QuorumProbe;
use crate::lockut::LockKind;
use crate::nemesis::target::quorum;
use crate::nemesis::{ActiveFaults, Fault, Target};

/// Acquires per fault window, at most.
pub const PER_WINDOW: u64 = 4;

/// How long into a window before the first acquire: the fault's verb has run and the
/// proxies have closed what it cut.
pub const SETTLE: Duration = Duration::from_millis(150);

/// Pause between two acquires of one window.
const SPACING: Duration = Duration::from_millis(25);

/// How often the list of faults is looked at.
const POLL: Duration = Duration::from_millis(20);

/// The probe's TTL: far beyond any stall of a busy machine.
pub const PROBE_TTL: Duration = Duration::from_secs(2);

/// The probe's per-node deadline: a healthy node answers within it even on a busy
/// machine; a frozen or black-holed one is given up on at it.
pub const NODE_DEADLINE: Duration = Duration::from_millis(500);

/// Bound on one acquire or release (a lock that waits on a dead node past its deadline
/// fails the acquire here).
const CALL_BOUND: Duration = Duration::from_secs(3);

/// Whether `fault` stops a node's answers while it lasts.
fn stops_answers(fault: &Fault) -> bool {
    matches!(
        fault,
        Fault::Kill
            | Fault::RestartKeep
            | Fault::RestartWipe
            | Fault::Freeze
            | Fault::Partition { .. }
            | Fault::BlackHole
    )
}

/// The window to probe now: the schedule indexes of the faults in effect, when they take
/// exactly `N − quorum` nodes down and nothing else is in effect.
fn probe_window(active: &[(usize, Fault, Target)], nodes: usize) -> Option<BTreeSet<usize>> {
    let mut down = BTreeSet::new();
    for (_, fault, target) in active {
        match target {
            Target::Node(n) if stops_answers(fault) => {
                down.insert(n.0);
            }
            _ => return None,
        }
    }
    (down.len() == nodes.saturating_sub(quorum(nodes)) && !down.is_empty())
        .then(|| active.iter().map(|(i, _, _)| *i).collect())
}

/// Whether the probe runs for `kind`: ours, whose quorum code it checks. The rig's plain
/// Redlock and the peers are not the lock under test of a catalogue.
pub fn applies(kind: LockKind) -> bool {
    matches!(kind, LockKind::Ours | LockKind::OursGuarded)
}

/// Probes until `stop` or `until` on the scenario clock; the result for the report
/// (`None`: the probe's lock could not be built — said in `Err`).
pub async fn run(
    urls: Vec<String>,
    faults: ActiveFaults,
    clock: ScenarioClock,
    until: Duration,
    stop: CancellationToken,
) -> Result<QuorumProbe, String> {
    let nodes = urls.len();
    let lock = Redlock::builder(&urls)
        .ttl(PROBE_TTL)
        .node_timeout(NODE_DEADLINE)
        .key_prefix("chaos:quorum-probe:")
        .fencing(false)
        .notify_waiters(false)
        .restart_quarantine(RestartQuarantine::Off)
        .clock_jump_guard(false)
        .build()
        .map_err(|e| format!("the quorum probe's lock: {e}"))?;
    let mut probe = QuorumProbe {
        down: u64::try_from(nodes.saturating_sub(quorum(nodes))).unwrap_or(0),
        nodes: u64::try_from(nodes).unwrap_or(0),
        ..QuorumProbe::default()
    };
    let end = clock.instant_at(until);
    // The window being probed, since when, and how many acquires it had.
    let mut current: Option<(BTreeSet<usize>, Instant, u64)> = None;
    let mut seq = 0u64;
    loop {
        let now = Instant::now();
        if stop.is_cancelled() || now >= end {
            break;
        }
        let window = probe_window(&faults.now(), nodes);
        match (&mut current, window) {
            (_, None) => current = None,
            (Some((w, _, _)), Some(n)) if *w == n => {}
            (_, Some(n)) => current = Some((n, now, 0)),
        }
        if let Some((_, since, done)) = &mut current
            && *done < PER_WINDOW
            && now.duration_since(*since) >= SETTLE
        {
            if *done == 0 {
                probe.windows += 1;
            }
            *done += 1;
            seq += 1;
            let at_ms = u64::try_from(clock.offset(now).as_millis()).unwrap_or(u64::MAX);
            let outcome = attempt(&lock, &format!("p{seq}")).await;
            probe.record(at_ms, outcome);
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(SPACING) => {}
            }
            continue;
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(POLL) => {}
        }
    }
    let _ = tokio::time::timeout(CALL_BOUND, lock.shutdown()).await;
    Ok(probe)
}

/// One attempt on `resource`; releases what it got.
async fn attempt(lock: &Redlock, resource: &str) -> Result<(), String> {
    match tokio::time::timeout(CALL_BOUND, lock.try_acquire(resource)).await {
        Err(_) => Err(format!("no outcome within {CALL_BOUND:?}")),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(lease)) => {
            // Best effort: keys not deleted expire with the probe's TTL, on a resource
            // no one asks for again.
            let _ = tokio::time::timeout(CALL_BOUND, lease.release()).await;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::NodeId;
    use crate::nemesis::WorkerId;

    fn node(i: usize) -> Target {
        Target::Node(NodeId(i))
    }

    #[test]
    fn probes_only_exactly_the_largest_minority_down_and_nothing_else() {
        let kill = Fault::Kill;
        let slow = Fault::Slow {
            latency_ms: 100,
            jitter_ms: 0,
            connections_pct: 100,
            both_ways: false,
        };
        assert_eq!(
            probe_window(&[(0, kill, node(1)), (0, kill, node(3))], 5),
            Some(BTreeSet::from([0]))
        );
        assert_eq!(
            probe_window(&[(2, Fault::Freeze, node(1)), (3, kill, node(4))], 5),
            Some(BTreeSet::from([2, 3]))
        );
        // One node down: three of four left, no edge to probe.
        assert_eq!(probe_window(&[(0, kill, node(1))], 5), None);
        // A majority down.
        assert_eq!(
            probe_window(
                &[(0, kill, node(0)), (0, kill, node(1)), (0, kill, node(2))],
                5
            ),
            None
        );
        // Something else in effect: not probed.
        assert_eq!(
            probe_window(
                &[(0, kill, node(1)), (0, kill, node(3)), (1, slow, node(0))],
                5
            ),
            None
        );
        assert_eq!(
            probe_window(
                &[
                    (0, kill, node(1)),
                    (0, kill, node(3)),
                    (1, Fault::ClientStall, Target::Worker(WorkerId(0)))
                ],
                5
            ),
            None
        );
        // Slow nodes still answer.
        assert_eq!(
            probe_window(&[(0, slow, node(1)), (0, slow, node(3))], 5),
            None
        );
        assert_eq!(probe_window(&[], 5), None);
        // Three nodes: one down is the edge.
        assert_eq!(
            probe_window(&[(0, Fault::BlackHole, node(2))], 3),
            Some(BTreeSet::from([0]))
        );
    }

    #[test]
    fn runs_on_ours_only() {
        assert!(applies(LockKind::Ours));
        assert!(applies(LockKind::OursGuarded));
        assert!(!applies(LockKind::Plain(crate::lockut::Mutation::None)));
    }
}
