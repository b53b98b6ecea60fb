//! The late retirement (scenarios with `late_retire`): a fence counter deleted after the
//! lease that asked for it ended.
//!
//! Worker 0 of each mode — alone through the proxies (`proxied = "first-worker"`) — ends
//! its sections with [`Lease::retire_fence`](fenced_redlock::Lease::retire_fence) instead
//! of a release. Before the call the rig puts a latency toxic of a TTL and a half
//! ([`hold_for`]) on the requests of every node's proxy and waits for the API to confirm it;
//! after the requests have surely passed it takes the toxic off. Every key of the lease was
//! set before the call and lives at most a TTL, so each node gets the retirement at least
//! half a TTL after its key expired — when a rival may hold the lock with a larger token.
//! The toxic delays each chunk from its arrival and holds the ones behind it, so the
//! retirement lands late on every node, and the release the call sends after it later.
//!
//! `retire_fence` deletes a node's counter only where our token still holds the lock key,
//! in the same atomic step. A lock without that check deletes the counters under the next
//! holder, and the grant after the deletion starts again at token 1: a token regression,
//! which every expectation that judges tokens fails. A correct lock's late retirement
//! deletes nothing: the counters, and the fenced modes' writes, go on as after a release.
//!
//! One retirement holds the path at a time in the whole run (every mode's worker 0 goes
//! through the same proxies): a worker that finds it taken releases instead. A worker 0 of
//! another mode whose requests meet the toxic sees them late too — an acquire runs out of
//! validity, a release lands after the keys expired — which a correct lock survives.

use std::sync::Arc;
use std::time::Duration;

use fenced_redlock::{LockError, ReleaseOutcome, ReleaseReport};
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::time::Instant;

use crate::checker::history::OpOutcome;
use crate::proxy::{Client, Stream, Toxic, ToxicKind};

/// How long the retirement's requests are held: a TTL and a half — half a TTL after the
/// keys' end at the least, for a rival to be granted before the retirement lands (rivals
/// retry every 25-75 ms), and no more, because the path is held that long for every mode.
pub fn hold_for(ttl: Duration) -> Duration {
    ttl.saturating_add(ttl / 2)
}

/// The toxic's name on each proxy.
pub const TOXIC: &str = "retire_late";

/// Worker 0's way to retire late: the proxies in front of its nodes and the run-wide
/// turn. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LateRetire {
    proxy: Client,
    proxies: Arc<[String]>,
    hold: Duration,
    settle: Duration,
    turn: Arc<Mutex<()>>,
}

impl LateRetire {
    /// Retirements through `proxies` (one per node) of the API at `proxy`, for leases of
    /// `ttl`; its clones, one per mode's worker 0, share one turn.
    pub fn new(proxy: Client, proxies: Vec<String>, ttl: Duration) -> Self {
        LateRetire {
            proxy,
            proxies: proxies.into(),
            hold: hold_for(ttl),
            // Past the hold, for everything sent in the call to have passed.
            settle: ttl / 4,
            turn: Arc::new(Mutex::new(())),
        }
    }

    /// Takes the path and holds every node's requests: `Ok(None)` when another worker's
    /// retirement has it (release instead).
    ///
    /// # Errors
    /// The proxy API refused the toxic (a harness failure; what was added is taken off).
    pub async fn hold(&self) -> Result<Option<HeldPath>, String> {
        let Ok(turn) = self.turn.clone().try_lock_owned() else {
            return Ok(None);
        };
        let mut held = HeldPath {
            late: self.clone(),
            _turn: turn,
            added: Vec::with_capacity(self.proxies.len()),
        };
        let latency = u64::try_from(self.hold.as_millis()).unwrap_or(u64::MAX);
        let toxic =
            Toxic::new(ToxicKind::Latency { latency, jitter: 0 }, Stream::Upstream).named(TOXIC);
        for name in self.proxies.iter() {
            if let Err(e) = self.proxy.add_toxic(name, &toxic).await {
                let _ = held.clear().await;
                return Err(format!(
                    "late retirement: add the toxic to proxy {name}: {e}"
                ));
            }
            held.added.push(name.clone());
        }
        Ok(Some(held))
    }
}

/// Every node's requests held (see [`LateRetire::hold`]) until [`HeldPath::clear_after`];
/// dropped before, it takes the toxics off in the background.
#[derive(Debug)]
pub struct HeldPath {
    late: LateRetire,
    _turn: OwnedMutexGuard<()>,
    added: Vec<String>,
}

impl HeldPath {
    /// Waits until everything sent from `sent` on has passed the toxic (the hold and a
    /// margin), then takes the toxics off.
    ///
    /// # Errors
    /// The proxy API refused the removal (a harness failure).
    pub async fn clear_after(mut self, sent: Instant) -> Result<(), String> {
        tokio::time::sleep_until(sent + self.late.hold + self.late.settle).await;
        self.clear().await
    }

    async fn clear(&mut self) -> Result<(), String> {
        remove(&self.late.proxy, std::mem::take(&mut self.added)).await
    }
}

/// Takes the toxic off every proxy of `names` (one already gone is fine); the first error.
async fn remove(proxy: &Client, names: Vec<String>) -> Result<(), String> {
    let mut first_error = None;
    for name in names {
        match proxy.remove_toxic(&name, TOXIC).await {
            Err(e) if !e.is_not_found() && first_error.is_none() => {
                first_error = Some(format!(
                    "late retirement: take the toxic off proxy {name}: {e}"
                ));
            }
            _ => {}
        }
    }
    first_error.map_or(Ok(()), Err)
}

impl Drop for HeldPath {
    fn drop(&mut self) {
        if self.added.is_empty() {
            return;
        }
        // A run stopped mid-retirement: the proxies outlive the worker.
        let (proxy, added) = (self.late.proxy.clone(), std::mem::take(&mut self.added));
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { remove(&proxy, added).await });
        }
    }
}

/// A retirement as the history records it: its outcome, and what the nodes said.
pub fn outcome(result: &Result<ReleaseReport, LockError>) -> (OpOutcome, String) {
    let report = match result {
        Ok(report) => report,
        Err(e) => return (OpOutcome::Fail, format!("not sent: {e}")),
    };
    let count =
        |f: fn(&ReleaseOutcome) -> bool| report.nodes.iter().filter(|n| f(&n.outcome)).count();
    let deleted = count(|o| *o == ReleaseOutcome::Released);
    let unknown = count(|o| matches!(o, ReleaseOutcome::Unknown(_)));
    let said = format!(
        "{deleted} deleted, {unknown} unanswered in time, {} refused or had none",
        report.nodes.len().saturating_sub(deleted + unknown)
    );
    let outcome = if deleted > 0 {
        OpOutcome::Ok
    } else if unknown > 0 {
        OpOutcome::Info
    } else {
        OpOutcome::Fail
    };
    (outcome, said)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_says_what_the_nodes_said() {
        let lost = Err(LockError::LeaseLost {
            resource: "r".into(),
            reason: fenced_redlock::LossReason::Expired,
        });
        let (o, said) = outcome(&lost);
        assert_eq!(o, OpOutcome::Fail);
        assert!(said.starts_with("not sent: "), "{said}");
        let (o, said) = outcome(&Ok(ReleaseReport::default()));
        assert_eq!(
            (o, said.as_str()),
            (
                OpOutcome::Fail,
                "0 deleted, 0 unanswered in time, 0 refused or had none"
            )
        );
    }
}
