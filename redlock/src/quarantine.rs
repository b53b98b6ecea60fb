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
//! # The uptime is a wall-clock reading, so the guard fails closed
//! Redis and Valkey compute the uptime from their *wall* clock (`time(NULL)` minus the
//! start time), not a monotonic one. A clock stepped back after a start (NTP correcting a
//! host whose RTC ran ahead) makes it negative for as long as the step; a clock stepped
//! forward overstates it, which would end the quarantine early. So:
//! - a server that gives its `run_id` but no usable uptime (missing, negative, not a
//!   number) is taken to have started *now*, when its reply came in;
//! - a restart this client saw (a new `run_id`) counts from when the client saw it, when
//!   the new connection's reply came in, whatever the uptime says. The restart came before
//!   that, and the uptime cannot be trusted to say how long before: a client idle since the
//!   old server last answered it cannot tell a forward step shorter than its idleness
//!   from a real uptime (the model found that trace, `docs/model.md`). It costs one
//!   quarantine counted from the reconnection, for one node.
//!
//! What no client can see: a forward step after a restart of a server it never knew the
//! old one of (a client started after the restart has only the uptime to go by). `docs/trade-offs.md` says what that means for operators.
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
//! used *before the node started*.
//! The builder's TTL counts from the beginning (other processes of the same service use
//! it too); a longer one of [`Redlock::with_ttl`](crate::Redlock::with_ttl) or
//! [`Lease::extend_for`](crate::Lease::extend_for) counts from when it was first asked for,
//! before anything was sent with it ([`Lengths`]). A lease with that TTL got its votes
//! later, so a node that started earlier never held one of its keys: one long
//! `extend_for` does not keep every node out for its length for the client's life. The
//! clock-jump guard takes the length in use at the jump the same way. Clients in other
//! processes with longer TTLs are not seen: set the length explicitly to their longest
//! TTL + drift.

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
    /// A length set explicitly ([`RestartQuarantine::For`](crate::config::RestartQuarantine::For)),
    /// in force whatever TTLs are used; zero when none was.
    pub(crate) fixed: Duration,
    /// Whether the TTLs in use set the length too (see [`Lengths`]).
    pub(crate) auto: bool,
    /// Whether a server younger than the length is kept out (the restart quarantine is on).
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
            fixed: self.fixed.max(other.fixed),
            auto: self.auto || other.auto,
            young: self.young || other.young,
            jumps,
        }
    }

    /// How long a node that started (or jumped) at `from` stays out: the explicit length,
    /// or the longest TTL + drift in use by then.
    pub(crate) fn length_at(&self, from: Option<Instant>, lengths: &Lengths) -> Duration {
        let auto = if self.auto {
            lengths.at(from)
        } else {
            Duration::ZERO
        };
        self.fixed.max(auto)
    }
}

/// The TTL + drift of every TTL this client has used, with when each was first asked for:
/// a staircase, since only a longer one than all before it adds a step. The quarantine of
/// a node is the step in force at its start (see "The length").
#[derive(Debug, Default)]
pub(crate) struct Lengths(Mutex<Staircase>);

#[derive(Debug, Default)]
struct Staircase {
    /// In force from the beginning: the builder's TTL + drift (and any noted without a time).
    base: Duration,
    /// Longer lengths, each with the moment it was first asked for, in the order noted
    /// (both the moments and the lengths grow).
    steps: Vec<(Instant, Duration)>,
}

impl Lengths {
    fn stairs(&self) -> std::sync::MutexGuard<'_, Staircase> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes `length` as in use from `since` on (`None`: from the beginning). Call it
    /// before anything is sent with the TTL it covers.
    pub(crate) fn note(&self, length: Duration, since: Option<Instant>) {
        let mut stairs = self.stairs();
        match since {
            None => stairs.base = stairs.base.max(length),
            Some(at) => {
                let top = stairs.steps.last().map_or(stairs.base, |&(_, l)| l);
                if length > top {
                    // A moment earlier than the last step's (another thread noted first)
                    // joins that step: the staircase only moves forward in time.
                    let at = stairs.steps.last().map_or(at, |&(last, _)| at.max(last));
                    stairs.steps.push((at, length));
                }
            }
        }
    }

    /// The longest length in force at `at` (`None`: at an unknown moment, so the longest
    /// of all).
    pub(crate) fn at(&self, at: Option<Instant>) -> Duration {
        let stairs = self.stairs();
        let step = match at {
            None => stairs.steps.last(),
            Some(at) => stairs.steps.iter().rev().find(|&&(since, _)| since <= at),
        };
        step.map_or(stairs.base, |&(_, l)| l.max(stairs.base))
    }
}

/// What a server said about itself in `INFO server`, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerInfo {
    pub(crate) run_id: Option<String>,
    /// `uptime_in_seconds`, truncated by the server to whole seconds; `None` when it is
    /// missing or unusable (negative after a wall-clock step back, not a number).
    pub(crate) uptime: Option<Duration>,
    /// When the reply was in.
    pub(crate) seen_at: Instant,
}

impl ServerInfo {
    /// Parses the `INFO server` text; fields that are missing or unusable stay `None`.
    pub(crate) fn parse(info: &str, seen_at: Instant) -> ServerInfo {
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_owned())
        };
        ServerInfo {
            run_id: field("run_id"),
            // Signed: a negative uptime is a wall clock stepped back, not a parse error
            // to shrug off (it must fail closed, see "The uptime is a wall-clock reading").
            uptime: field("uptime_in_seconds")
                .and_then(|s| s.parse::<i64>().ok())
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs),
            seen_at,
        }
    }

    /// The start the uptime tells, if it tells one.
    fn told_start(&self) -> Told {
        match self.uptime {
            None => Told::Nothing,
            Some(uptime) => match self.seen_at.checked_sub(uptime) {
                Some(at) => Told::At(at),
                None => Told::BeforeOurClock,
            },
        }
    }
}

/// What an uptime says of the server's latest possible start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    /// At the latest then: `seen_at − uptime`.
    At(Instant),
    /// Before our monotonic clock can count (older than this machine's boot).
    BeforeOurClock,
    /// Nothing usable.
    Nothing,
}

/// One node's server as this client knows it.
#[derive(Debug, Default)]
struct Life {
    run_id: Option<String>,
    /// Moves on each time a connection finds another `run_id` than the last one.
    epoch: u64,
    /// The latest possible start of the current server; `None` when it is older than
    /// our clock can count (no quarantine can still apply).
    started_by: Option<Instant>,
    /// The node's clock as this client sampled it (clock-jump guard).
    clock: ClockWatch,
    /// The last forward jump seen: when, and by at least how much.
    jumped: Option<(Instant, Duration)>,
    /// The epoch the last forward jump moved to.
    jump_epoch: Option<u64>,
}

impl Life {
    /// The latest possible start of the server `info` came from, `restarted` telling
    /// whether it is another server than the one before. Fails closed: a restart this
    /// client saw, or an uptime that is unusable, gives the moment the reply came in.
    fn start_of(&self, info: &ServerInfo, restarted: bool) -> Option<Instant> {
        let now = Some(info.seen_at);
        if restarted {
            return now;
        }
        match (
            info.told_start(),
            info.run_id.is_some() && self.run_id == info.run_id,
        ) {
            (Told::At(at), true) => self.started_by.max(Some(at)),
            (Told::At(at), false) => Some(at),
            // The same server as before: what we knew of it stands.
            (Told::BeforeOurClock | Told::Nothing, true) => self.started_by,
            (Told::BeforeOurClock, false) => None,
            (Told::Nothing, false) => now,
        }
    }
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
        life.started_by = life.start_of(info, restarted);
        if restarted {
            life.epoch = life.epoch.saturating_add(1);
        }
        if info.run_id.is_some() {
            life.run_id.clone_from(&info.run_id);
        }
        (life.epoch, restarted)
    }

    /// The current epoch.
    pub(crate) fn epoch(&self) -> u64 {
        self.life().epoch
    }

    /// Whether a yes given on a connection of `epoch` counts at `now` under `guards`:
    /// `Err` with the time until the node votes again when it does not (the node started
    /// less than its quarantine ago and the restart quarantine is on, its clock jumped
    /// less than the quarantine ago, or it restarted or jumped since that yes).
    pub(crate) fn vote_counts(
        &self,
        epoch: u64,
        now: Instant,
        guards: Guards,
        lengths: &Lengths,
    ) -> Result<(), NodeError> {
        let life = self.life();
        let left = |from: Instant| match from.checked_add(guards.length_at(Some(from), lengths)) {
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
            fixed: length,
            auto: false,
            young: true,
            jumps: None,
        }
    }

    /// No TTLs noted: only explicit lengths apply.
    fn none() -> Lengths {
        Lengths::default()
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
            node.vote_counts(epoch, at(6), restart(q), &none()),
            Err(NodeError::Quarantined {
                remaining: Duration::from_secs(1)
            })
        );
        assert_eq!(node.vote_counts(epoch, at(7), restart(q), &none()), Ok(()));
        // An old server votes at once.
        let old = Incarnation::default();
        let (epoch, _) = old.learn(&info("b", 3600, t0));
        assert_eq!(old.vote_counts(epoch, t0, restart(q), &none()), Ok(()));
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
            node.vote_counts(before, t0, restart(Duration::ZERO), &none())
                .is_err()
        );
        assert_eq!(
            node.vote_counts(after, t0, restart(Duration::ZERO), &none()),
            Ok(())
        );
        // The same server again, or one that will not say: no restart.
        assert!(!node.learn(&info("b", 3601, t0)).1);
        let silent = ServerInfo {
            run_id: None,
            uptime: None,
            seen_at: t0,
        };
        assert_eq!(node.learn(&silent), (after, false));
    }

    /// `INFO server` as a server whose wall clock was stepped would give it.
    fn raw(run_id: &str, uptime: &str, seen_at: Instant) -> ServerInfo {
        let text = format!("# Server\r\nrun_id:{run_id}\r\nuptime_in_seconds:{uptime}\r\n");
        ServerInfo::parse(&text, seen_at)
    }

    #[test]
    fn a_server_with_no_usable_uptime_started_now() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let q = Duration::from_secs(10);
        let at = |s: u64| t0 + Duration::from_secs(s);
        // Negative (a wall clock stepped back after the start), missing, not a number.
        for uptime in ["-29", "", "soon"] {
            let node = Incarnation::default();
            let (epoch, _) = node.learn(&raw("a", uptime, t0));
            assert_eq!(
                node.vote_counts(epoch, at(9), restart(q), &none()),
                Err(NodeError::Quarantined {
                    remaining: Duration::from_secs(1)
                }),
                "uptime {uptime:?}"
            );
            assert_eq!(node.vote_counts(epoch, at(10), restart(q), &none()), Ok(()));
        }
        // The same server again with a stepped clock: what we knew of it stands.
        let node = Incarnation::default();
        node.learn(&info("a", 3600, t0));
        let (epoch, restarted) = node.learn(&raw("a", "-5", at(1)));
        assert!(!restarted);
        assert_eq!(node.vote_counts(epoch, at(1), restart(q), &none()), Ok(()));
    }

    /// Whatever its uptime says — a forward step's overstatement, a truthful few seconds,
    /// a negative one — a restart this client saw counts from when it saw it: an idle
    /// client cannot tell a step shorter than its idleness from the truth (the model's
    /// trace, `docs/model.md`).
    #[test]
    fn a_restart_we_saw_counts_from_when_we_saw_it() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let q = Duration::from_secs(10);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let node = Incarnation::default();
        node.learn(&info("a", 3600, t0));
        for (run_id, uptime, seen) in [("b", "65", 30), ("c", "5", 50), ("d", "-29", 70)] {
            let (epoch, restarted) = node.learn(&raw(run_id, uptime, at(seen)));
            assert!(restarted, "{run_id}");
            assert!(
                node.vote_counts(epoch, at(seen + 9), restart(q), &none())
                    .is_err(),
                "{run_id}: out for the quarantine from when the restart was seen"
            );
            assert_eq!(
                node.vote_counts(epoch, at(seen + 10), restart(q), &none()),
                Ok(()),
                "{run_id}"
            );
        }
    }

    #[test]
    fn the_length_is_the_longest_ttl_in_use_when_the_node_started() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let lengths = Lengths::default();
        lengths.note(Duration::from_secs(3), None);
        // A 60 s TTL first asked for at 10 s.
        lengths.note(Duration::from_secs(60), Some(at(10)));
        // Shorter ones add nothing.
        lengths.note(Duration::from_secs(5), Some(at(20)));
        assert_eq!(lengths.at(Some(t0)), Duration::from_secs(3));
        assert_eq!(lengths.at(Some(at(10))), Duration::from_secs(60));
        assert_eq!(lengths.at(Some(at(30))), Duration::from_secs(60));
        assert_eq!(lengths.at(None), Duration::from_secs(60));
        let auto = Guards {
            fixed: Duration::ZERO,
            auto: true,
            young: true,
            jumps: None,
        };
        // Started at 5 s: no lease of the 60 s TTL can have had its vote.
        let early = Incarnation::default();
        let (early_epoch, _) = early.learn(&info("a", 0, at(5)));
        assert!(
            early
                .vote_counts(early_epoch, at(7), auto, &lengths)
                .is_err()
        );
        assert_eq!(
            early.vote_counts(early_epoch, at(8), auto, &lengths),
            Ok(())
        );
        // Started at 12 s: out for 60 s.
        let late = Incarnation::default();
        let (epoch, _) = late.learn(&info("b", 0, at(12)));
        assert!(late.vote_counts(epoch, at(71), auto, &lengths).is_err());
        assert_eq!(late.vote_counts(epoch, at(72), auto, &lengths), Ok(()));
        // An explicit length stands whatever the TTLs.
        let both = auto.merge(restart(Duration::from_secs(9)));
        assert!(
            early
                .vote_counts(early_epoch, at(13), both, &lengths)
                .is_err()
        );
        assert_eq!(
            early.vote_counts(early_epoch, at(14), both, &lengths),
            Ok(())
        );
    }

    #[test]
    fn an_uptime_before_the_clock_began_means_no_quarantine() {
        let node = Incarnation::default();
        let now = Instant::now();
        let (epoch, _) = node.learn(&info("a", u64::MAX / 4, now));
        assert_eq!(
            node.vote_counts(epoch, now, restart(Duration::from_secs(10)), &none()),
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
            fixed: Duration::from_secs(10),
            auto: false,
            young: false,
            jumps: Some(allowance),
        };
        let node = Incarnation::default();
        // A young server: only the restart quarantine would keep it out.
        let (epoch, _) = node.learn(&info("a", 1, t0));
        assert_eq!(node.vote_counts(epoch, t0, guards, &none()), Ok(()));
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
        assert_eq!(node.vote_counts(epoch, at(50), guards, &none()), Ok(()));
        // One second ahead at 100 ms.
        let step = node.sample_clock(&sample(100, 1_100), allowance, at(100));
        assert!(matches!(step, Step::Forward(d) if d > Duration::from_millis(990)));
        let out = node.vote_counts(epoch, at(100), guards, &none());
        assert!(
            matches!(out, Err(NodeError::ClockJumped { remaining, .. }) if remaining == Duration::from_secs(10)),
            "{out:?}"
        );
        // Votes given after the jump wait for the length too, then count.
        let now = node.epoch();
        assert_ne!(now, epoch);
        assert!(node.vote_counts(now, at(5_000), guards, &none()).is_err());
        assert_eq!(node.vote_counts(now, at(10_100), guards, &none()), Ok(()));
        // The vote from before the jump stays void.
        assert!(
            node.vote_counts(epoch, at(10_100), guards, &none())
                .is_err()
        );
    }

    #[test]
    fn guards_merge_to_the_stricter_of_each() {
        let a = Guards {
            fixed: Duration::from_secs(1),
            auto: false,
            young: true,
            jumps: None,
        };
        let b = Guards {
            fixed: Duration::from_secs(2),
            auto: true,
            young: false,
            jumps: Some(Allowance {
                tolerance: Duration::from_millis(3),
                rate_ppm: 10,
            }),
        };
        let m = a.merge(b);
        assert_eq!(
            (m.fixed, m.auto, m.young, m.jumps),
            (b.fixed, true, true, b.jumps)
        );
    }
}
