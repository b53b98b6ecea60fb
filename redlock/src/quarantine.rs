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
//! client uses a longer TTL: [`RestartQuarantine::Auto`](crate::config::RestartQuarantine::Auto)
//! (the quarantine itself is off by default) lasts the longest TTL + drift this client
//! uses, growing with [`Redlock::with_ttl`](crate::Redlock::with_ttl) and
//! [`Lease::extend_for`](crate::Lease::extend_for). Clients in other processes with longer
//! TTLs are not seen: set the length explicitly to their longest TTL + drift.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::clockwatch::{Allowance, ClockWatch, Sample, Step};
use crate::error::NodeError;

/// The guards in force for a vote: the restart quarantine, the clock-jump guard (see
/// `clockwatch`), or both. `None` where a vote is taken means both are off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Guards {
    /// How long a node stays out of the vote after its start, restart or clock jump.
    pub(crate) length: Duration,
    /// Whether a server younger than `length` is kept out (the restart quarantine is on).
    pub(crate) young: bool,
    /// The clock-jump guard's allowance, when the guard is on.
    pub(crate) jumps: Option<Allowance>,
}

impl Guards {
    /// The guards covering both `self` and `other`: the longer quarantine, the smaller
    /// jump tolerance.
    pub(crate) fn merge(self, other: Guards) -> Guards {
        let jumps = match (self.jumps, other.jumps) {
            (Some(a), Some(b)) => Some(Allowance {
                tolerance: a.tolerance.min(b.tolerance),
                rate_ppm: a.rate_ppm.min(b.rate_ppm),
            }),
            (a, b) => a.or(b),
        };
        Guards {
            length: self.length.max(other.length),
            young: self.young || other.young,
            jumps,
        }
    }
}

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
    /// The node's clock as this client sampled it (clock-jump guard).
    clock: ClockWatch,
    /// The last forward jump seen: when, and by at least how much.
    jumped: Option<(Instant, Duration)>,
    /// The epoch the last forward jump moved to.
    jump_epoch: Option<u64>,
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

    /// Whether a yes given on a connection of `epoch` counts at `now` under `guards`:
    /// `Err` with the time until the node votes again when it does not (the node started
    /// less than the quarantine ago and the restart quarantine is on, its clock jumped
    /// less than the quarantine ago, or it restarted or jumped since that yes).
    pub(crate) fn vote_counts(
        &self,
        epoch: u64,
        now: Instant,
        guards: Guards,
    ) -> Result<(), NodeError> {
        let life = self.life();
        let left = |from: Instant| match from.checked_add(guards.length) {
            // Too far to represent: out for as long as anyone can wait.
            None => Some(Duration::MAX),
            Some(end) if now < end => Some(end.saturating_duration_since(now)),
            Some(_) => None,
        };
        let young = life.started_by.filter(|_| guards.young).and_then(left);
        let jumped = life.jumped.and_then(|(at, ahead)| Some((left(at)?, ahead)));
        match (epoch == life.epoch, young, jumped) {
            (_, _, Some((remaining, ahead))) => Err(NodeError::ClockJumped {
                ahead,
                remaining: remaining.max(young.unwrap_or_default()),
            }),
            (true, None, None) => Ok(()),
            (_, remaining, None) => Err(NodeError::Quarantined {
                remaining: remaining.unwrap_or_default(),
            }),
        }
    }

    /// Takes a `TIME` sample in (see `clockwatch`). A forward jump beyond `allowance`
    /// starts the node's quarantine at `now` and moves its epoch on, voiding every
    /// earlier yes — the one the sample came with included.
    pub(crate) fn sample_clock(&self, sample: &Sample, allowance: Allowance, now: Instant) -> Step {
        let mut life = self.life();
        let step = life.clock.observe(sample, allowance);
        if let Step::Forward(ahead) = step {
            life.epoch = life.epoch.saturating_add(1);
            life.jumped = Some((now, ahead));
            life.jump_epoch = Some(life.epoch);
        }
        step
    }

    /// The epoch a call sent now on a connection of `conn_epoch` votes in: a jump seen
    /// since the connection was made moves it on (the connection stays; its later yeses
    /// were given after the jump and count once the quarantine has passed).
    pub(crate) fn sending(&self, conn_epoch: u64) -> u64 {
        conn_epoch.max(self.life().jump_epoch.unwrap_or(0))
    }

    /// Whether a clock jump moved the epoch on since `epoch` (else a restart did, if
    /// anything).
    pub(crate) fn jumped_since(&self, epoch: u64) -> bool {
        self.life().jump_epoch.is_some_and(|j| j > epoch)
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

    fn restart(length: Duration) -> Guards {
        Guards {
            length,
            young: true,
            jumps: None,
        }
    }

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
            node.vote_counts(epoch, at(6), restart(q)),
            Err(NodeError::Quarantined {
                remaining: Duration::from_secs(1)
            })
        );
        assert_eq!(node.vote_counts(epoch, at(7), restart(q)), Ok(()));
        // An old server votes at once.
        let old = Incarnation::default();
        let (epoch, _) = old.learn(&info("b", 3600, t0));
        assert_eq!(old.vote_counts(epoch, t0, restart(q)), Ok(()));
    }

    #[test]
    fn a_new_run_id_voids_the_votes_of_the_old_one() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let node = Incarnation::default();
        let (before, _) = node.learn(&info("a", 3600, t0));
        let (after, restarted) = node.learn(&info("b", 3600, t0));
        assert!(restarted);
        assert_ne!(before, after);
        assert!(
            node.vote_counts(before, t0, restart(Duration::ZERO))
                .is_err()
        );
        assert_eq!(node.vote_counts(after, t0, restart(Duration::ZERO)), Ok(()));
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
            node.vote_counts(epoch, now, restart(Duration::from_secs(10))),
            Ok(())
        );
    }

    #[test]
    fn a_forward_clock_jump_voids_earlier_votes_and_keeps_the_node_out_for_the_length() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let allowance = Allowance {
            tolerance: Duration::from_millis(4),
            rate_ppm: 10_000,
        };
        let guards = Guards {
            length: Duration::from_secs(10),
            young: false,
            jumps: Some(allowance),
        };
        let node = Incarnation::default();
        // A young server: only the restart quarantine would keep it out.
        let (epoch, _) = node.learn(&info("a", 1, t0));
        assert_eq!(node.vote_counts(epoch, t0, guards), Ok(()));
        let epoch_s = 1_800_000_000u64;
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let sample = |ms: u64, server_ms: u64| {
            let server_us = u128::from(epoch_s) * 1_000_000 + u128::from(server_ms) * 1_000;
            let secs = u64::try_from(server_us / 1_000_000).unwrap();
            let micros = u64::try_from(server_us % 1_000_000).unwrap();
            Sample::new(at(ms), (secs, micros), at(ms) + Duration::from_micros(100)).unwrap()
        };
        assert_eq!(
            node.sample_clock(&sample(0, 0), allowance, at(0)),
            Step::First
        );
        assert_eq!(
            node.sample_clock(&sample(50, 50), allowance, at(50)),
            Step::Steady
        );
        assert_eq!(node.vote_counts(epoch, at(50), guards), Ok(()));
        // One second ahead at 100 ms.
        let step = node.sample_clock(&sample(100, 1_100), allowance, at(100));
        assert!(matches!(step, Step::Forward(d) if d > Duration::from_millis(990)));
        let out = node.vote_counts(epoch, at(100), guards);
        assert!(
            matches!(out, Err(NodeError::ClockJumped { remaining, .. }) if remaining == Duration::from_secs(10)),
            "{out:?}"
        );
        // Votes given after the jump wait for the length too, then count.
        let now = node.epoch();
        assert_ne!(now, epoch);
        assert!(node.vote_counts(now, at(5_000), guards).is_err());
        assert_eq!(node.vote_counts(now, at(10_100), guards), Ok(()));
        // The vote from before the jump stays void.
        assert!(node.vote_counts(epoch, at(10_100), guards).is_err());
    }

    #[test]
    fn guards_merge_to_the_stricter_of_each() {
        let a = Guards {
            length: Duration::from_secs(1),
            young: true,
            jumps: None,
        };
        let b = Guards {
            length: Duration::from_secs(2),
            young: false,
            jumps: Some(Allowance {
                tolerance: Duration::from_millis(3),
                rate_ppm: 10,
            }),
        };
        let m = a.merge(b);
        assert_eq!((m.length, m.young, m.jumps), (b.length, true, b.jumps));
    }
}
