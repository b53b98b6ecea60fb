//! The builder, its defaults, and the validation done once at `build()`.

use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::clockwatch::Allowance;
use crate::durable::Durability;
use crate::error::ConfigError;
use crate::node::Node;
use crate::quarantine::Guards;
use crate::retry::RetryPolicy;
use crate::validity;
use crate::{Redlock, Shared};

/// Lease time when none is set.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// The longest TTL accepted: ten years. Servers refuse a `PX` whose expiry time (now + ttl
/// in ms) overflows a 64-bit integer, and validity deadlines are instants on our
/// monotonic clock; ten years is far inside both, and far beyond any sensible lease.
pub const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// The shortest TTL accepted: `PX` takes whole milliseconds, and `PX 0` is refused.
pub const MIN_TTL: Duration = Duration::from_millis(1);
/// Fraction of the TTL set aside for server clocks running fast (plus a fixed 2 ms).
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
/// Divisor that derives the per-node deadline from the TTL when none is set (`ttl / 10`).
///
/// The deadline trades two costs. Too short, and a healthy node slowed by a busy client
/// host misses it: a false "no answer", a failed attempt, a retry. Too long, and a frozen
/// node whose vote is needed holds every attempt for the whole deadline, eating validity.
/// Measured 2026-12-01 under the heaviest load we have (`chaos fencing-table --runs 5
/// --sections 1000 --jobs 45 --node-timeout T`: 360 workers contending for 45 locks on a
/// 2-core machine that also runs the five servers and PostgreSQL): for T from 2 to 40 ms
/// the wall time (39–45 s) and the client's CPU per section (597–752 µs) did not move
/// beyond run-to-run noise (one of two runs at 2 ms took 63 s and 1,082 µs; its repeat
/// 40.5 s and 599 µs), and no waiting acquire failed — false "no answer"s were too rare
/// to cost much even at 2 ms. So the choice rests on the other side: `ttl / 10` lets a
/// frozen node take at most a tenth of the validity from an attempt.
pub const DEFAULT_NODE_TIMEOUT_DIVISOR: u32 = 10;
/// Upper bound of a derived per-node deadline: a node that slow is better counted as down.
pub const MAX_DERIVED_NODE_TIMEOUT: Duration = Duration::from_millis(500);
/// Lower bound of a derived per-node deadline.
pub const MIN_DERIVED_NODE_TIMEOUT: Duration = Duration::from_millis(2);
/// Mean pause between attempts of a waiting acquire when no release is heard (jittered ±50 %):
/// the default [`RetryPolicy`].
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(50);

/// Whether a node that (re)started recently may vote, and for how long it may not (see
/// [`Builder::restart_quarantine`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RestartQuarantine {
    /// On, for the longest TTL + drift allowance this client uses (the builder's TTL, and
    /// any longer one of [`Redlock::with_ttl`] or [`Lease::extend_for`](crate::Lease::extend_for)
    /// since).
    Auto,
    /// On, for this long. Must be at least the TTL + drift allowance of every client of
    /// these nodes; `build()` checks it against this client's, and `with_ttl` and
    /// `extend_for` refuse a TTL it does not cover.
    For(Duration),
    /// Off: a node votes as soon as it answers, whatever it forgot. Amnesia then breaks
    /// mutual exclusion and fencing-token order (see the crate's Trade-offs). The default,
    /// for now: see [`Builder::restart_quarantine`] for why.
    #[default]
    Off,
}

/// Validated settings shared by a client and its leases.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) ttl: Duration,
    pub(crate) drift: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) node_timeout: Duration,
    pub(crate) node_timeout_explicit: bool,
    pub(crate) retry: RetryPolicy,
    pub(crate) key_prefix: String,
    pub(crate) fencing: bool,
    pub(crate) notify: bool,
    pub(crate) quarantine: RestartQuarantine,
    /// Whether the clock-jump guard is on (see `clockwatch`).
    pub(crate) clock_jump_guard: bool,
    /// When a yes counts (see `durable`); checked by [`Settings::with_durability`].
    pub(crate) durability: Durability,
}

impl Settings {
    /// Checks every rule and derives the dependent values.
    // One argument per builder setting, each checked against the others; the builder is
    // the only caller.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn validated(
        ttl: Duration,
        drift_factor: f64,
        node_timeout: Option<Duration>,
        retry: RetryPolicy,
        key_prefix: String,
        fencing: bool,
        notify: bool,
        quarantine: RestartQuarantine,
    ) -> Result<Self, ConfigError> {
        if ttl.is_zero() {
            return Err(ConfigError::ZeroTtl);
        }
        if ttl < MIN_TTL {
            return Err(ConfigError::TtlTooSmall { ttl });
        }
        if ttl > MAX_TTL {
            return Err(ConfigError::TtlTooLarge { ttl });
        }
        // The servers get whole milliseconds; validity must count from what they get, not
        // from a fraction they never saw.
        let ttl = Duration::from_millis(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        if !(0.0..1.0).contains(&drift_factor) {
            return Err(ConfigError::InvalidDriftFactor {
                factor: drift_factor,
            });
        }
        let drift = validity::drift(ttl, drift_factor).ok_or(ConfigError::InvalidDriftFactor {
            factor: drift_factor,
        })?;
        if drift >= ttl {
            return Err(ConfigError::DriftExceedsTtl { drift, ttl });
        }
        let (node_timeout, explicit) = match node_timeout {
            Some(t) => (t, true),
            None => (derived_node_timeout(ttl), false),
        };
        if node_timeout.is_zero() {
            return Err(ConfigError::ZeroNodeTimeout);
        }
        if node_timeout >= ttl {
            return Err(ConfigError::NodeTimeoutTooLong {
                timeout: node_timeout,
                ttl,
            });
        }
        retry.validate()?;
        if let RestartQuarantine::For(length) = quarantine {
            let needed = ttl.saturating_add(drift);
            if length < needed {
                return Err(ConfigError::QuarantineTooShort {
                    quarantine: length,
                    needed,
                });
            }
        }
        Ok(Settings {
            ttl,
            drift,
            drift_factor,
            node_timeout,
            node_timeout_explicit: explicit,
            retry,
            key_prefix,
            fencing,
            notify,
            quarantine,
            clock_jump_guard: false,
            durability: Durability::Memory,
        })
    }

    /// These settings with `durability`, refused when its fsync wait cannot fit in the
    /// node deadline.
    pub(crate) fn with_durability(mut self, durability: Durability) -> Result<Self, ConfigError> {
        if let Some(timeout) = durability.wait() {
            if timeout.as_millis() == 0 {
                return Err(ConfigError::ZeroDurabilityTimeout);
            }
            if timeout >= self.node_timeout {
                return Err(ConfigError::DurabilityTimeoutTooLong {
                    timeout,
                    node_timeout: self.node_timeout,
                });
            }
        }
        self.durability = durability;
        Ok(self)
    }

    /// Settings with another TTL, re-deriving what depends on it.
    pub(crate) fn with_ttl(&self, ttl: Duration) -> Result<Self, ConfigError> {
        let mut settings = Self::validated(
            ttl,
            self.drift_factor,
            self.node_timeout_explicit.then_some(self.node_timeout),
            self.retry.clone(),
            self.key_prefix.clone(),
            self.fencing,
            self.notify,
            self.quarantine,
        )?;
        settings.clock_jump_guard = self.clock_jump_guard;
        settings.with_durability(self.durability)
    }

    /// The guards leases of this client's TTL need: an explicit quarantine length, or
    /// that the TTLs in use set it ([`auto_length`](Self::auto_length), noted by the
    /// client), whether a young server is kept out, and the clock-jump allowance; `None`
    /// when both guards are off.
    pub(crate) fn guards(&self) -> Option<Guards> {
        let (fixed, auto) = match self.quarantine {
            RestartQuarantine::For(length) => (length, false),
            RestartQuarantine::Auto | RestartQuarantine::Off => (Duration::ZERO, true),
        };
        let young = self.quarantine != RestartQuarantine::Off;
        (young || self.clock_jump_guard).then(|| Guards {
            fixed,
            auto,
            young,
            jumps: self
                .clock_jump_guard
                .then(|| Allowance::of(self.drift, self.drift_factor)),
        })
    }

    /// The quarantine this TTL needs when the TTLs in use set it: TTL + drift.
    pub(crate) fn auto_length(&self) -> Duration {
        self.ttl.saturating_add(self.drift)
    }

    /// The TTL as sent in `PX` (whole milliseconds, at most [`MAX_TTL`]: see `validated`).
    pub(crate) fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

/// `ttl / 10`, kept within [`MIN_DERIVED_NODE_TIMEOUT`, `MAX_DERIVED_NODE_TIMEOUT`] and below the TTL.
fn derived_node_timeout(ttl: Duration) -> Duration {
    let t = ttl
        .checked_div(DEFAULT_NODE_TIMEOUT_DIVISOR)
        .unwrap_or(ttl)
        .clamp(MIN_DERIVED_NODE_TIMEOUT, MAX_DERIVED_NODE_TIMEOUT);
    if t >= ttl {
        ttl.checked_div(2).unwrap_or(ttl)
    } else {
        t
    }
}

/// Builds a [`Redlock`] client. Every setting has a documented default; [`Builder::build`]
/// validates them all at once.
///
/// ```
/// use std::time::Duration;
/// let lock = fenced_redlock::Redlock::builder([
///     "redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003",
/// ])
/// .ttl(Duration::from_secs(5))
/// .fencing(true)
/// .build();
/// # // Building connects lazily: no server is needed here.
/// # drop(lock);
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct Builder {
    nodes: Vec<Source>,
    ttl: Duration,
    drift_factor: f64,
    node_timeout: Option<Duration>,
    retry: RetryPolicy,
    key_prefix: String,
    fencing: bool,
    notify: bool,
    quarantine: RestartQuarantine,
    clock_jump_guard: bool,
    durability: Durability,
}

impl Builder {
    pub(crate) fn new<I, S>(urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::with_nodes(
            urls.into_iter()
                .map(|u| Source::Url(u.as_ref().to_owned()))
                .collect(),
        )
    }

    pub(crate) fn from_clients(clients: impl IntoIterator<Item = redis::Client>) -> Self {
        Self::with_nodes(
            clients
                .into_iter()
                .map(|c| Source::Client(Box::new(c)))
                .collect(),
        )
    }

    fn with_nodes(nodes: Vec<Source>) -> Self {
        Builder {
            nodes,
            ttl: DEFAULT_TTL,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            node_timeout: None,
            retry: RetryPolicy::default(),
            key_prefix: String::new(),
            fencing: false,
            notify: true,
            quarantine: RestartQuarantine::Off,
            clock_jump_guard: false,
            durability: Durability::Memory,
        }
    }

    /// Lease time to live (default [`DEFAULT_TTL`]), between [`MIN_TTL`] and [`MAX_TTL`].
    /// Sent as `PX` in whole milliseconds: a fraction of a millisecond is dropped, and
    /// validity counts from the TTL that is sent.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Drift factor (default [`DEFAULT_DRIFT_FACTOR`]); drift = ttl × factor + 2 ms.
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// Deadline of every single node call (default `ttl / 10`, between 2 ms and 500 ms).
    /// A node that misses it counts as a failed vote, so one frozen node cannot stall a call.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// Mean pause between attempts of a waiting acquire when no release was heard
    /// (default [`DEFAULT_RETRY_DELAY`], jittered ±50 %). Any length is accepted; a
    /// pause that would overflow the clock saturates (the waiter then relies on release
    /// notices and on its `wait`).
    ///
    /// Shorthand for [`retry`](Self::retry)`(`[`RetryPolicy::fixed`]`(delay))`: it
    /// replaces the whole policy, a cap on attempts included; the later call wins.
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry = RetryPolicy::fixed(delay);
        self
    }

    /// How a waiting [`acquire`](Redlock::acquire) spaces its attempts and when it gives
    /// up before its `wait` has passed (default [`RetryPolicy::default`]: the fixed
    /// [`DEFAULT_RETRY_DELAY`], no cap). Release notices end any pause early. Replaces
    /// what [`retry_delay`](Self::retry_delay) set; the later call wins.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fenced_redlock::{retry::RetryPolicy, Redlock};
    ///
    /// let redlock = Redlock::builder(["redis://127.0.0.1:7001"])
    ///     .retry(RetryPolicy::fixed(Duration::from_millis(20)).max_attempts(5))
    ///     .build()
    ///     .expect("valid");
    /// # drop(redlock);
    /// ```
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Prefix put in front of every resource name to form the key (default: none, so
    /// other Redlock clients locking the same name exclude us and we them).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Hand out fencing tokens (default off). Costs a second round trip per acquire;
    /// see the crate docs for what the token guarantees.
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// Let releases wake waiters through PUBLISH/SUBSCRIBE (default on). Off, waiters
    /// only poll every `retry_delay`.
    pub fn notify_waiters(mut self, on: bool) -> Self {
        self.notify = on;
        self
    }

    /// Keep a node that started recently out of the vote (default
    /// [`RestartQuarantine::Off`]; [`RestartQuarantine::Auto`] is on, for the longest TTL +
    /// drift allowance this client uses). See `quarantine` in the crate docs for the
    /// mechanism.
    ///
    /// Why: a node that restarted without its data forgot the keys of leases that may
    /// still be valid, and counting its yes lets a second client gather a majority while
    /// the first still holds the lock (two holders, and two grants with one fencing
    /// token). Once a TTL + drift has passed since the restart, every lease granted before
    /// it has ended — provided no client of these nodes uses a longer TTL (an
    /// [`extend_for`](crate::Lease::extend_for) with a longer TTL counts: `Auto` grows to
    /// cover those of this client, and an explicit length refuses them). Clients in other
    /// processes with longer TTLs are not seen: give their longest TTL + drift here.
    ///
    /// What it costs is availability: a node that started less than the quarantine ago
    /// does not vote (the others must make the majority; with 3 nodes, one restart leaves
    /// no room for another fault), and a lease whose majority included a node seen to
    /// restart is lost. A client cannot tell a restart from a first start, so **a freshly
    /// started cluster takes no lock for the first TTL + drift** of its servers' life (a
    /// fresh test cluster, a new deployment), and a node restarted *with* its data (AOF
    /// with `appendfsync always`) is quarantined too. It costs nothing per operation: the
    /// start time comes from the `INFO server` reply each new connection already asks for
    /// (for the `run_id`).
    ///
    /// Why off by default, for now: that first-start cost would change the behaviour of
    /// every existing deployment and test setup that takes a lock right after starting its
    /// servers; switch it on ([`RestartQuarantine::Auto`]) wherever nodes may restart
    /// without their data. It is safe to leave off where every node persists every write.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fenced_redlock::{config::RestartQuarantine, Redlock};
    ///
    /// // Other services lock the same resources with TTLs up to 30 s.
    /// let redlock = Redlock::builder(["redis://127.0.0.1:7001"])
    ///     .ttl(Duration::from_secs(10))
    ///     .restart_quarantine(RestartQuarantine::For(Duration::from_secs(31)))
    ///     .build()
    ///     .expect("valid");
    /// # drop(redlock);
    /// ```
    pub fn restart_quarantine(mut self, quarantine: RestartQuarantine) -> Self {
        self.quarantine = quarantine;
        self
    }

    /// Keep a node whose clock jumped forward out of the vote (default off). See
    /// `clockwatch` in the crate docs for the mechanism.
    ///
    /// Why: a server expires keys on its own clock, so a clock that jumps forward by more
    /// than the drift allowance expires every key there early, and a second client can
    /// gather a majority while the first still holds the lock. With the guard on, every
    /// vote (acquire, fence write, extend) carries a `TIME` pipelined behind it; a node
    /// whose clock moved further from ours since the previous reading than the drift
    /// allowance (the TTL × drift factor + 2 ms, plus the drift factor of the time
    /// between readings) is out of the vote for the quarantine's length from the moment
    /// the jump is seen (the restart quarantine's length when that is set, else the
    /// longest TTL + drift this client uses), and a held lease whose majority counted it
    /// is lost ([`LossReason::ClockJumped`](crate::LossReason::ClockJumped)).
    ///
    /// What it cannot see: a jump before this client first read the node's clock, a
    /// jump smaller than the allowance plus the round trips' uncertainty, and a clock
    /// that runs fast in steps each below that (a rate outside the drift factor). It
    /// needs `TIME` (an ACL that denies it fails every vote).
    ///
    /// What it costs: one `TIME` request and reply per node per round, on the same
    /// connection and round trip; and availability after a jump (the jumped node is out
    /// for a TTL + drift). Off by default for now: it is new, and its cost is measured in
    /// `chaos bench` before it becomes the default.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fenced_redlock::Redlock;
    ///
    /// let redlock = Redlock::builder(["redis://127.0.0.1:7001"])
    ///     .ttl(Duration::from_secs(10))
    ///     .clock_jump_guard(true)
    ///     .build()
    ///     .expect("valid");
    /// assert!(redlock.clock_jump_guard());
    /// ```
    pub fn clock_jump_guard(mut self, on: bool) -> Self {
        self.clock_jump_guard = on;
        self
    }

    /// When a node's yes counts (default [`Durability::Memory`]: when it answers).
    ///
    /// With [`Durability::Fsync`], a yes to an acquire, a fence write or an extend counts
    /// only once the node reports it fsynced to its append-only file: a `WAITAOF 1 0
    /// <timeout>` goes right behind the request, on the same connection, so no round trip
    /// is added. This closes the window in which a node that crashes loses keys it
    /// granted (with `appendfsync everysec`, up to a second of them). Every node needs
    /// `appendonly yes` ([`NodeError::AofDisabled`](crate::NodeError::AofDisabled)
    /// otherwise) and Redis or Valkey ≥ 7.2
    /// ([`NodeError::NoWaitAof`](crate::NodeError::NoWaitAof)); a node that does not
    /// fsync within `timeout` fails that vote with
    /// [`NodeError::NotDurable`](crate::NodeError::NotDurable).
    ///
    /// The trade-off is latency: the wait is part of the vote, so `timeout` must be below
    /// the node deadline (`build()` refuses it otherwise). With `appendfsync always` the
    /// write is on disk when the server answers, and a few milliseconds suffice; with
    /// `appendfsync everysec` a vote waits up to about a second, so both the timeout and
    /// the node deadline must be that long. Run the nodes with `appendfsync always`: at
    /// `everysec` Valkey 8.1.8 answers `WAITAOF` before the fsync (docs/lock.md, "Durable
    /// votes"). `WAITAOF` also holds back later requests on that connection until it
    /// answers. Releases are not waited for: a lost delete
    /// leaves a key that expires with its TTL.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fenced_redlock::{Durability, Redlock};
    ///
    /// let redlock = Redlock::builder(["redis://127.0.0.1:7001"])
    ///     .node_timeout(Duration::from_millis(50))
    ///     .durability(Durability::Fsync { timeout: Duration::from_millis(20) })
    ///     .build()
    ///     .expect("valid");
    /// assert_eq!(redlock.durability(), Durability::Fsync { timeout: Duration::from_millis(20) });
    /// ```
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Validates the configuration and creates the client. Connections are made lazily
    /// and reconnect by themselves: a node that is down now is a failed vote later, not
    /// an error here.
    ///
    /// Host names are resolved once here (a blocking lookup; IP literals need none) to
    /// refuse one server listed under two names (`localhost:6379` and `127.0.0.1:6379`),
    /// which would count its vote twice. A name that does not resolve yet is not an error.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the setting to change.
    pub fn build(self) -> Result<Redlock, ConfigError> {
        let mut settings = Settings::validated(
            self.ttl,
            self.drift_factor,
            self.node_timeout,
            self.retry,
            self.key_prefix,
            self.fencing,
            self.notify,
            self.quarantine,
        )?;
        settings.clock_jump_guard = self.clock_jump_guard;
        let settings = settings.with_durability(self.durability)?;
        if self.nodes.is_empty() {
            return Err(ConfigError::NoNodes);
        }
        let mut nodes: Vec<Node> = Vec::with_capacity(self.nodes.len());
        let servers = std::sync::Arc::new(crate::node::ServerIds::default());
        let restarts = std::sync::Arc::new(crate::quarantine::Restarts::default());
        let lengths = std::sync::Arc::new(crate::quarantine::Lengths::default());
        for (index, source) in self.nodes.into_iter().enumerate() {
            let client = source
                .into_client()
                .map_err(|reason| ConfigError::InvalidUrl { index, reason })?;
            let node = Node::new(
                index,
                client,
                &settings,
                std::sync::Arc::clone(&servers),
                std::sync::Arc::clone(&restarts),
                std::sync::Arc::clone(&lengths),
            );
            if let Some(first) = nodes.iter().find(|n| n.same_server(&node)) {
                return Err(ConfigError::DuplicateNode {
                    first: first.index(),
                    second: index,
                    addr: node.addr().to_owned(),
                });
            }
            nodes.push(node);
        }
        let deadline = settings.node_timeout;
        Ok(Redlock::from_shared(
            Shared::new(nodes, deadline, restarts, lengths),
            settings,
        ))
    }
}

/// Where a node's connections come from.
#[derive(Debug, Clone)]
enum Source {
    /// A URL, parsed at `build()`.
    Url(String),
    /// The caller's client, used as it is (its TLS and connection settings included).
    /// Boxed: a client is ten times the size of a URL.
    Client(Box<redis::Client>),
}

impl Source {
    /// The client to make the node's connections with; for a URL, why it is unusable
    /// (password removed).
    fn into_client(self) -> Result<redis::Client, String> {
        match self {
            Source::Client(client) => Ok(*client),
            Source::Url(url) => url
                .as_str()
                .into_connection_info()
                .and_then(redis::Client::open)
                .map_err(|e| redact(&e.to_string(), &url)),
        }
    }
}

/// Removes anything that looks like the URL's password from a message.
fn redact(message: &str, url: &str) -> String {
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .and_then(|(userinfo, _)| userinfo.rsplit_once(':').map(|(_, p)| p))
        .filter(|p| !p.is_empty());
    match password {
        Some(p) => message.replace(p, "***"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn five() -> Vec<String> {
        (0..5)
            .map(|i| format!("redis://127.0.0.1:{}", 7000 + i))
            .collect()
    }

    #[test]
    fn defaults_build() {
        let r = Builder::new(five()).build().expect("valid");
        assert_eq!(r.nodes(), 5);
        assert_eq!(r.quorum(), 3);
        assert_eq!(r.settings().node_timeout, Duration::from_millis(500));
        assert_eq!(r.settings().drift, Duration::from_millis(102));
    }

    #[test]
    fn derived_timeout_follows_ttl() {
        let r = Builder::new(five())
            .ttl(Duration::from_millis(200))
            .build()
            .expect("valid");
        assert_eq!(r.settings().node_timeout, Duration::from_millis(20));
        let r = Builder::new(five())
            .ttl(Duration::from_millis(3))
            .drift_factor(0.0)
            .build()
            .expect("valid");
        assert!(r.settings().node_timeout < Duration::from_millis(3));
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let e = |b: Builder| b.build().expect_err("must be refused");
        assert_eq!(e(Builder::new(Vec::<String>::new())), ConfigError::NoNodes);
        assert_eq!(
            e(Builder::new(five()).ttl(Duration::ZERO)),
            ConfigError::ZeroTtl
        );
        assert!(matches!(
            e(Builder::new(five()).ttl(MAX_TTL + Duration::from_millis(1))),
            ConfigError::TtlTooLarge { .. }
        ));
        assert!(matches!(
            e(Builder::new(["redis://a:1", "redis://b:2", "redis://a:1"])),
            ConfigError::DuplicateNode {
                first: 0,
                second: 2,
                ..
            }
        ));
        assert!(matches!(
            e(Builder::new(["redis://a:1", "http://b:2"])),
            ConfigError::InvalidUrl { index: 1, .. }
        ));
        assert!(matches!(
            e(Builder::new(five()).ttl(Duration::from_millis(2))),
            ConfigError::DriftExceedsTtl { .. }
        ));
        assert!(matches!(
            e(Builder::new(five()).drift_factor(1.5)),
            ConfigError::InvalidDriftFactor { .. }
        ));
        assert!(matches!(
            e(Builder::new(five())
                .ttl(Duration::from_secs(1))
                .node_timeout(Duration::from_secs(1))),
            ConfigError::NodeTimeoutTooLong { .. }
        ));
        assert_eq!(
            e(Builder::new(five()).node_timeout(Duration::ZERO)),
            ConfigError::ZeroNodeTimeout
        );
        assert_eq!(
            e(Builder::new(five()).retry_delay(Duration::ZERO)),
            ConfigError::ZeroRetryDelay
        );
    }

    #[test]
    fn ttl_is_whole_milliseconds() {
        let r = Builder::new(five())
            .ttl(Duration::from_micros(10_900))
            .build()
            .expect("valid");
        assert_eq!(r.ttl(), Duration::from_millis(10));
        assert_eq!(r.settings().ttl_ms(), 10);
        assert!(Builder::new(five()).ttl(MAX_TTL).build().is_ok());
    }

    #[test]
    fn messages_never_show_passwords() {
        let err = Builder::new(["redis://user:hunter2@host:notaport"])
            .build()
            .expect_err("bad port");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn the_restart_quarantine_covers_the_longest_ttl() {
        let ttl = Duration::from_secs(10);
        let r = Builder::new(five()).ttl(ttl).build().expect("valid");
        let covers = |r: &crate::Redlock| Some(r.ttl() + r.drift());
        assert_eq!(r.restart_quarantine(), None, "off by default");
        let r = Builder::new(five())
            .ttl(ttl)
            .restart_quarantine(RestartQuarantine::Auto)
            .build()
            .expect("valid");
        assert_eq!(r.restart_quarantine(), covers(&r));
        // Auto grows with a longer TTL of a client sharing the connections, and stays.
        let longer = r.with_ttl(Duration::from_secs(30)).expect("valid");
        assert_eq!(r.restart_quarantine(), covers(&longer));
        let shorter = r.with_ttl(Duration::from_secs(1)).expect("valid");
        assert_eq!(shorter.restart_quarantine(), covers(&longer));
        let off = Builder::new(five())
            .restart_quarantine(RestartQuarantine::Off)
            .build()
            .expect("valid");
        assert_eq!(off.restart_quarantine(), None);
    }

    #[test]
    fn a_quarantine_shorter_than_ttl_plus_drift_is_refused() {
        let ttl = Duration::from_secs(10);
        let needed = ttl + Duration::from_millis(102);
        let built = |q: Duration| {
            Builder::new(five())
                .ttl(ttl)
                .restart_quarantine(RestartQuarantine::For(q))
                .build()
        };
        let err = built(ttl).expect_err("shorter than ttl + drift");
        assert_eq!(
            err,
            ConfigError::QuarantineTooShort {
                quarantine: ttl,
                needed
            }
        );
        assert!(err.to_string().contains("raise it to at least"), "{err}");
        assert!(built(Duration::ZERO).is_err());
        let r = built(needed).expect("exactly enough");
        assert_eq!(r.restart_quarantine(), Some(needed));
        // A longer TTL than the explicit quarantine covers is refused, not silently unsafe.
        assert!(matches!(
            r.with_ttl(Duration::from_secs(20)),
            Err(ConfigError::QuarantineTooShort { .. })
        ));
        assert!(r.with_ttl(Duration::from_secs(5)).is_ok());
    }

    #[test]
    fn another_database_on_the_same_server_is_a_duplicate() {
        // One process fails as one: two databases on it would be two votes for one failure.
        assert!(matches!(
            Builder::new(["redis://a:1/0", "redis://a:1/1"]).build(),
            Err(ConfigError::DuplicateNode { .. })
        ));
    }
}
