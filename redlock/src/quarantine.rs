//! Restart quarantine: a node that may have forgotten its keys does not vote until every
//! lease granted before it forgot has ended.
//!
//! # Why
//! A primary that restarts without its data (no AOF, or `appendfsync everysec` losing the
//! last second) forgets the lock keys it held. Another client can then gather a majority
//! with it while the first holder's lease is still valid: two holders, and — since the
//! fence counter is forgotten too — two grants with one fencing token (Kleppmann's
//! amnesia-split; `docs/model.md` has the trace). antirez's answer is operational: keep a
//! restarted node out for longer than the longest TTL. The quarantine does that in the
//! client, so it holds even when the operator did not.
//!
//! # How
//! Every new connection already asks the server `INFO server` (for its `run_id`, see
//! `node`, "One server, one vote"); the same reply carries `uptime_in_seconds`. The
//! uptime is truncated to whole seconds, so the latest the server can have started is
//! `now − uptime` (with `now` read once the reply is in: the reply was made no later). A
//! yes from a node whose latest possible start is less than the quarantine ago counts as
//! a no ([`NodeError::Quarantined`]); its key is released like any failed attempt's. No
//! round trip is added: the question is asked once per connection, never per operation.
//!
//! A node whose `run_id` differs from the one its previous connection saw has restarted:
//! its *epoch* moves on. A lease remembers the epoch of each yes it counted; a yes from an
//! older epoch is void (that server is gone, and its key with it). When fewer than a
//! quorum of a lease's yes votes are still from the node's current epoch, the lease is
//! lost: [`Lease::is_valid`](crate::Lease::is_valid) says so at once, an extend fails with
//! [`LossReason::NodeRestarted`](crate::LossReason::NodeRestarted), and a renewing lease's
//! `lost()` fires. The restart is seen when this client next connects to that node — for
//! any call of any lease, which is why the signal is shared ([`Restarts`]).
//!
//! # The length
//! Every lease granted before the restart has ended once its TTL (plus the drift
//! allowance, for server clocks that run fast) has passed since the restart, as long as no
//! client uses a longer TTL: the default is the longest TTL + drift this client uses
//! ([`RestartQuarantine::Auto`](crate::config::RestartQuarantine::Auto)), growing with
//! [`Redlock::with_ttl`](crate::Redlock::with_ttl) and
//! [`Lease::extend_for`](crate::Lease::extend_for). Clients in other processes with longer
//! TTLs are not seen: set the length explicitly to their longest TTL + drift.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::NodeError;

/// What a server said about itself in `INFO server`, and when the reply was in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerInfo {
    pub(crate) run_id: Option<String>,
    /// `uptime_in_seconds`, truncated by the server to whole seconds.
    pub(crate) uptime: Option<Duration>,
    pub(crate) seen_at: Instant,
}

impl ServerInfo {
    /// Parses the `INFO server` text; fields that are missing stay `None`.
    pub(crate) fn parse(info: &str, seen_at: Instant) -> ServerInfo {
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_owned())
        };
        ServerInfo {
            run_id: field("run_id"),
            uptime: field("uptime_in_seconds")
                .and_then(|s| s.parse::<u64>().ok())
                .map(Duration::from_secs),
            seen_at,
        }
    }

    /// The latest instant the server can have started: `seen_at − uptime`. `None` when
    /// the uptime is unknown or reaches back before our monotonic clock can count (the
    /// server is older than this machine's boot: no quarantine can still apply).
    fn started_by(&self) -> Option<Instant> {
        self.seen_at.checked_sub(self.uptime?)
    }
}

/// One node's server as this client knows it.
#[derive(Debug, Default)]
struct Life {
    run_id: Option<String>,
    /// Moves on each time a connection finds another `run_id` than the last one.
    epoch: u64,
    /// The latest possible start of the current server, if known.
    started_by: Option<Instant>,
}

/// A node's incarnations: which server it is now, since when at the latest.
#[derive(Debug, Default)]
pub(crate) struct Incarnation(Mutex<Life>);

impl Incarnation {
    fn life(&self) -> std::sync::MutexGuard<'_, Life> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records what a new connection learnt; returns the epoch that connection belongs to
    /// and whether it found a restart (another `run_id` than the previous connection).
    /// A server that would not say its `run_id` (an ACL) is taken to be the one before:
    /// nothing can be told, so nothing is voided (see "What the lock cannot promise").
    pub(crate) fn learn(&self, info: &ServerInfo) -> (u64, bool) {
        let mut life = self.life();
        let restarted = match (&life.run_id, &info.run_id) {
            (Some(before), Some(now)) => before != now,
            _ => false,
        };
        if restarted {
            life.epoch = life.epoch.saturating_add(1);
        }
        if info.run_id.is_some() {
            life.run_id.clone_from(&info.run_id);
        }
        // A later connection to the same server gives a later truncation: keep the latest
        // possible start seen (the most conservative one).
        let started_by = info.started_by();
        life.started_by = if restarted {
            started_by
        } else {
            life.started_by.max(started_by)
        };
        (life.epoch, restarted)
    }

    /// The current epoch.
    pub(crate) fn epoch(&self) -> u64 {
        self.life().epoch
    }

    /// Whether a yes given on a connection of `epoch` counts at `now` under a quarantine of
    /// `length`: `Err` with the time until the node votes again when it does not (the node
    /// started less than `length` ago, or restarted since that connection was made).
    pub(crate) fn vote_counts(
        &self,
        epoch: u64,
        now: Instant,
        length: Duration,
    ) -> Result<(), NodeError> {
        let life = self.life();
        let ends = life.started_by.map(|s| s.checked_add(length));
        let remaining = match ends {
            // Too far to represent: quarantined for as long as anyone can wait.
            Some(None) => Some(Duration::MAX),
            Some(Some(end)) if now < end => Some(end.saturating_duration_since(now)),
            _ => None,
        };
        match (epoch == life.epoch, remaining) {
            (true, None) => Ok(()),
            (_, remaining) => Err(NodeError::Quarantined {
                remaining: remaining.unwrap_or_default(),
            }),
        }
    }
}

/// Counts restarts seen on any node of a client: renewers watch it to re-check their
/// votes the moment a restart is seen, whichever call saw it.
#[derive(Debug)]
pub(crate) struct Restarts(watch::Sender<u64>);

impl Default for Restarts {
    fn default() -> Self {
        Restarts(watch::Sender::new(0))
    }
}

impl Restarts {
    pub(crate) fn seen(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(run_id: &str, uptime: u64, seen_at: Instant) -> ServerInfo {
        ServerInfo {
            run_id: Some(run_id.to_owned()),
            uptime: Some(Duration::from_secs(uptime)),
            seen_at,
        }
    }

    #[test]
    fn parses_the_fields_of_info_server() {
        let now = Instant::now();
        let text = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\nuptime_in_days:0\r\n";
        assert_eq!(ServerInfo::parse(text, now), info("abc123", 42, now));
        let bare = ServerInfo::parse("# Server\r\n", now);
        assert_eq!((bare.run_id, bare.uptime), (None, None));
    }

    #[test]
    fn a_young_server_does_not_vote_until_the_quarantine_has_passed_since_its_latest_start() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let q = Duration::from_secs(10);
        let node = Incarnation::default();
        // Uptime 3 s at t0: started in (t0 − 4 s, t0 − 3 s]; the latest start counts.
        let (epoch, restarted) = node.learn(&info("a", 3, t0));
        assert!(!restarted);
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(
            node.vote_counts(epoch, at(6), q),
            Err(NodeError::Quarantined {
                remaining: Duration::from_secs(1)
            })
        );
        assert_eq!(node.vote_counts(epoch, at(7), q), Ok(()));
        // An old server votes at once.
        let old = Incarnation::default();
        let (epoch, _) = old.learn(&info("b", 3600, t0));
        assert_eq!(old.vote_counts(epoch, t0, q), Ok(()));
    }

    #[test]
    fn a_new_run_id_voids_the_votes_of_the_old_one() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let node = Incarnation::default();
        let (before, _) = node.learn(&info("a", 3600, t0));
        let (after, restarted) = node.learn(&info("b", 3600, t0));
        assert!(restarted);
        assert_ne!(before, after);
        assert!(node.vote_counts(before, t0, Duration::ZERO).is_err());
        assert_eq!(node.vote_counts(after, t0, Duration::ZERO), Ok(()));
        // The same server again, or one that will not say: no restart.
        assert!(!node.learn(&info("b", 3601, t0)).1);
        let silent = ServerInfo {
            run_id: None,
            uptime: None,
            seen_at: t0,
        };
        assert_eq!(node.learn(&silent), (after, false));
    }

    #[test]
    fn an_uptime_before_the_clock_began_means_no_quarantine() {
        let node = Incarnation::default();
        let now = Instant::now();
        let (epoch, _) = node.learn(&info("a", u64::MAX / 4, now));
        assert_eq!(
            node.vote_counts(epoch, now, Duration::from_secs(10)),
            Ok(())
        );
    }
}
