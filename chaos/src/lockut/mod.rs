//! The lock under test: the seam through which the chaos workload acquires, so the same
//! scenarios and checker run against our lock and against locks known to be broken.
//!
//! # Map
//! - this file: [`LockKind`] (what `--lock` names), [`LockUnderTest`] (one adapter per
//!   kind), its [`Lease`] and what a grant says ([`Granted`]) or why none came
//!   ([`AcquireFailure`]).
//! - [`plain`]: a small textbook Redlock with one switch per deliberate mistake
//!   ([`Mutation`]): the mutants the checker is proven on.
//! - `rslock` (`peers` feature): the peer client `rslock`, as it is.
//!
//! Ours and the plain lock hand out fencing tokens (the plain lock computes them as ours
//! does), so every mode runs on them; rslock has none, so only the unfenced modes run on
//! it ([`LockKind::fences`]).

pub mod plain;
#[cfg(feature = "peers")]
pub mod rslock;

use std::sync::Arc;
use std::time::Duration;

use fenced_redlock::{LockError, NodeFailureReason, Redlock, RestartQuarantine};
use tokio::time::Instant;

pub use plain::{Mutation, PlainRedlock};

/// Which lock a run uses (`chaos run --lock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LockKind {
    /// `fenced_redlock`.
    #[default]
    Ours,
    /// `fenced_redlock` with both guards on: the restart quarantine
    /// (`RestartQuarantine::Auto`) and the clock-jump guard. Where a scenario's faults are
    /// all ones they claim to see (a node back empty within the TTL, clock jumps), it is
    /// judged as a lock that holds ([`crate::scenario::Scenario::within_guards`]).
    OursGuarded,
    /// The rig's plain Redlock with `Mutation` (or none).
    Plain(Mutation),
    /// The peer client `rslock` 0.10 (needs the `peers` feature).
    Rslock,
}

impl LockKind {
    /// `ours`, `plain`, or the mutation's name (`quorum-of-one`, ...).
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Ours => "ours",
            LockKind::OursGuarded => "ours-guarded",
            LockKind::Plain(Mutation::None) => "plain",
            LockKind::Plain(m) => m.name(),
            LockKind::Rslock => "rslock",
        }
    }

    /// The key it stores a lock on `resource` under, as [`LockUnderTest::build`] builds it
    /// (ours prefixes `resource:`; the others use the resource as it is).
    pub fn key(self, resource: &str) -> String {
        match self {
            LockKind::Ours | LockKind::OursGuarded => format!("{resource}:{resource}"),
            LockKind::Plain(_) | LockKind::Rslock => resource.to_owned(),
        }
    }

    /// Whether its grants carry fencing tokens (the fenced modes run only then).
    pub fn fences(self) -> bool {
        !matches!(self, LockKind::Rslock)
    }

    /// Whether it can retire a fence counter (`retire_fence`, ours only): what a
    /// `late_retire` scenario needs ([`crate::run::retire`]).
    pub fn retires(self) -> bool {
        matches!(self, LockKind::Ours | LockKind::OursGuarded)
    }

    /// Whether it claims to keep holders apart through a node's amnesia and clock jumps
    /// (see [`LockKind::OursGuarded`]).
    pub fn guarded(self) -> bool {
        matches!(self, LockKind::OursGuarded)
    }

    /// Every kind, for `--lock` and its help.
    pub fn all() -> Vec<LockKind> {
        let mut v = vec![
            LockKind::Ours,
            LockKind::OursGuarded,
            LockKind::Plain(Mutation::None),
        ];
        v.extend(Mutation::BROKEN.map(LockKind::Plain));
        v.push(LockKind::Rslock);
        v
    }

    /// Parses a name given by [`LockKind::name`].
    ///
    /// # Errors
    /// A message listing the known names.
    pub fn parse(s: &str) -> Result<LockKind, String> {
        LockKind::all()
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = LockKind::all().iter().map(|k| k.name()).collect();
                format!("unknown lock {s:?}; use one of {}", names.join(", "))
            })
    }
}

/// What a grant says, on this process's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    /// Fencing token.
    pub fence: Option<u64>,
    /// Start of the winning attempt.
    pub acquired_at: Instant,
    /// When the holder learned it had the lock.
    pub granted_at: Instant,
    /// End of validity, as the lock reports it.
    pub valid_until: Instant,
    /// Quorum rounds the acquire made.
    pub attempts: u32,
}

impl Granted {
    /// Time of the winning round.
    pub fn elapsed(&self) -> Duration {
        self.granted_at.saturating_duration_since(self.acquired_at)
    }
}

/// Why an acquire ended without the lock (contention, faults): counted and retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireFailure {
    /// Quorum rounds made.
    pub rounds: u32,
    /// Nodes failed or were unreachable (not contention alone).
    pub node_fault: bool,
}

/// The lock a worker acquires: one adapter per [`LockKind`].
#[derive(Debug, Clone)]
pub enum LockUnderTest {
    /// `fenced_redlock`, fencing on (guards as its kind says).
    Ours(Redlock),
    /// The rig's plain Redlock.
    Plain(Arc<PlainRedlock>),
    /// rslock.
    #[cfg(feature = "peers")]
    Rslock(rslock::RslockUnderTest),
}

/// A held lease of either adapter.
#[derive(Debug)]
pub enum Lease {
    /// Ours.
    Ours(fenced_redlock::Lease),
    /// The plain lock's.
    Plain(plain::PlainLease),
    /// rslock's.
    #[cfg(feature = "peers")]
    Rslock(rslock::RslockLease),
}

impl Lease {
    /// What the grant says.
    pub fn granted(&self) -> Granted {
        match self {
            Lease::Ours(l) => Granted {
                fence: l.fence().map(|f| f.get()),
                acquired_at: l.acquired_at(),
                granted_at: l.granted_at(),
                valid_until: l.valid_until(),
                attempts: l.attempts(),
            },
            Lease::Plain(l) => *l.granted(),
            #[cfg(feature = "peers")]
            Lease::Rslock(l) => *l.granted(),
        }
    }

    /// The key on the nodes and the owner token stored in it, for reading server truth
    /// ([`crate::checker::truth`]).
    pub fn owner(&self) -> (&[u8], &[u8]) {
        match self {
            Lease::Ours(l) => (l.key().as_bytes(), l.owner_token().as_bytes()),
            Lease::Plain(l) => l.owner(),
            #[cfg(feature = "peers")]
            Lease::Rslock(l) => l.owner(),
        }
    }
}

/// An acquire that could not be counted as a failure: a setting or the fencing counter is
/// broken (a harness failure, the worker stops).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Fatal(pub String);

impl LockUnderTest {
    /// Waits (bounded) for ours's background clean-ups and releases before a worker exits;
    /// the plain lock releases in the foreground and has nothing to wait for.
    pub async fn shutdown(&self) -> Result<(), fenced_redlock::LockError> {
        match self {
            LockUnderTest::Ours(r) => r.shutdown().await,
            LockUnderTest::Plain(_) => Ok(()),
            #[cfg(feature = "peers")]
            LockUnderTest::Rslock(_) => Ok(()),
        }
    }

    /// The lock of `kind` on `nodes` with `ttl`; `resource:` is the key prefix of ours (so
    /// release notifications of different modes do not mix); `notify`: whether ours wakes
    /// its waiters with release notices (`notify_waiters`) or they poll (the others have
    /// no such setting).
    ///
    /// # Errors
    /// A message naming the bad setting.
    pub fn build(
        kind: LockKind,
        nodes: &[String],
        ttl: Duration,
        resource: &str,
        notify: bool,
    ) -> Result<Self, String> {
        match kind {
            LockKind::Ours | LockKind::OursGuarded => Redlock::builder(nodes)
                .ttl(ttl)
                .key_prefix(format!("{resource}:"))
                .notify_waiters(notify)
                .fencing(true)
                .restart_quarantine(if kind.guarded() {
                    RestartQuarantine::Auto
                } else {
                    RestartQuarantine::Off
                })
                .clock_jump_guard(kind.guarded())
                .build()
                .map(LockUnderTest::Ours)
                .map_err(|e| e.to_string()),
            LockKind::Plain(m) => {
                PlainRedlock::new(nodes, ttl, m).map(|l| LockUnderTest::Plain(Arc::new(l)))
            }
            #[cfg(feature = "peers")]
            LockKind::Rslock => rslock::RslockUnderTest::new(nodes, ttl).map(LockUnderTest::Rslock),
            #[cfg(not(feature = "peers"))]
            LockKind::Rslock => Err(
                "this chaos was built without the `peers` feature, which brings rslock; \
                 build with `--features peers`"
                    .into(),
            ),
        }
    }

    /// Acquires `resource`, waiting up to `wait`.
    ///
    /// # Errors
    /// `Ok(Err(_))`: no lock this time (counted, retried); `Err(Fatal)`: a harness failure.
    pub async fn acquire(
        &self,
        resource: &str,
        wait: Duration,
    ) -> Result<Result<Lease, AcquireFailure>, Fatal> {
        match self {
            LockUnderTest::Ours(l) => match l.acquire(resource, wait).await {
                Ok(lease) => Ok(Ok(Lease::Ours(lease))),
                Err(e) => match failed_rounds(&e) {
                    Some(rounds) => {
                        tracing::debug!(resource, error = %e, "acquire failed");
                        Ok(Err(AcquireFailure {
                            rounds,
                            node_fault: is_node_fault(&e),
                        }))
                    }
                    None => Err(Fatal(format!("acquire: {e}"))),
                },
            },
            LockUnderTest::Plain(l) => Ok(l.acquire(resource, wait).await.map(Lease::Plain)),
            #[cfg(feature = "peers")]
            LockUnderTest::Rslock(l) => Ok(l.acquire(resource, wait).await.map(Lease::Rslock)),
        }
    }

    /// Releases `lease` (best effort: keys that could not be deleted expire with the TTL).
    /// Whether a majority of nodes confirmed the delete; `None` when the lock does not say.
    pub async fn release(&self, lease: Lease) -> Option<bool> {
        match (self, lease) {
            (_, Lease::Ours(l)) => {
                let report = l.release().await;
                Some(report.released() > report.nodes.len() / 2)
            }
            (LockUnderTest::Plain(p), Lease::Plain(l)) => {
                p.release(l).await;
                None
            }
            #[cfg(feature = "peers")]
            (LockUnderTest::Rslock(r), Lease::Rslock(l)) => {
                r.release(l).await;
                None
            }
            // A lease can only come from its own lock; nothing to do otherwise.
            _ => None,
        }
    }
}

/// Whether an acquire failure of ours is the nodes' doing (failed, slow, unreachable)
/// rather than contention alone.
pub fn is_node_fault(e: &LockError) -> bool {
    match e {
        LockError::QuorumNotReached { failures, .. } => failures
            .iter()
            .any(|f| matches!(f.reason, NodeFailureReason::Error(_))),
        LockError::NoValidityLeft { .. } => true,
        LockError::WaitTimeout { last, .. } => is_node_fault(last),
        _ => false,
    }
}

/// Quorum rounds behind an acquire failure of ours; `None` when the failure is not a
/// countable acquire failure (a setting or the fencing counter: harness failures).
fn failed_rounds(e: &LockError) -> Option<u32> {
    match e {
        LockError::WaitTimeout { attempts, .. } => Some(*attempts),
        LockError::QuorumNotReached { .. } | LockError::NoValidityLeft { .. } => Some(1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in LockKind::all() {
            assert_eq!(LockKind::parse(k.name()), Ok(k));
        }
        assert!(
            LockKind::parse("nope")
                .unwrap_err()
                .contains("quorum-of-one")
        );
    }
}
