//! Typed errors: one for building a client, one for using it.

use std::fmt;
use std::time::Duration;

/// A configuration the builder refused. Returned by [`crate::Builder::build`];
/// each message says what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No node URL was given.
    #[error(
        "no nodes configured: pass at least one redis:// URL (an odd number such as 5 is recommended)"
    )]
    NoNodes,
    /// A URL could not be parsed.
    #[error(
        "node #{index} has an unusable URL ({reason}); expected redis://[user:password@]host:port[/db] or rediss://…"
    )]
    InvalidUrl {
        /// Position of the URL in the list, from 0.
        index: usize,
        /// What the parser said (with any password removed).
        reason: String,
    },
    /// The same server appears twice: it would count two votes.
    #[error(
        "nodes #{first} and #{second} are the same server ({addr}); list every primary once, or the quorum is meaningless"
    )]
    DuplicateNode {
        /// Position of the first occurrence.
        first: usize,
        /// Position of the repeat.
        second: usize,
        /// The address both name.
        addr: String,
    },
    /// The lease time is zero.
    #[error("ttl is zero: a lease needs a positive time to live, e.g. 10s")]
    ZeroTtl,
    /// The TTL is longer than [`crate::config::MAX_TTL`].
    #[error(
        "ttl {ttl:?} is too large: use at most {max:?} (servers refuse expiry times that overflow their millisecond clock)",
        max = crate::config::MAX_TTL
    )]
    TtlTooLarge {
        /// The rejected TTL.
        ttl: Duration,
    },
    /// The TTL is shorter than one millisecond, the unit of `PX`.
    #[error("ttl {ttl:?} is below 1ms: PX takes whole milliseconds; use at least 1ms")]
    TtlTooSmall {
        /// The rejected TTL.
        ttl: Duration,
    },
    /// The drift allowance swallows the whole TTL.
    #[error(
        "clock drift allowance {drift:?} is not below ttl {ttl:?}: lower the drift factor or raise the ttl"
    )]
    DriftExceedsTtl {
        /// Computed drift (factor × ttl + 2 ms).
        drift: Duration,
        /// Configured TTL.
        ttl: Duration,
    },
    /// A drift factor that is negative, NaN or ≥ 1.
    #[error("drift factor {factor} is out of range: use a number in [0, 1), typically 0.01")]
    InvalidDriftFactor {
        /// The rejected factor.
        factor: f64,
    },
    /// The per-node deadline is not shorter than the TTL.
    #[error(
        "node timeout {timeout:?} is not below ttl {ttl:?}: a single slow node could eat the whole lease; use a node timeout well under the ttl (default ttl/10)"
    )]
    NodeTimeoutTooLong {
        /// Configured per-node deadline.
        timeout: Duration,
        /// Configured TTL.
        ttl: Duration,
    },
    /// A per-node deadline of zero would fail every call.
    #[error(
        "node timeout is zero: every node call would time out; use a few milliseconds at least"
    )]
    ZeroNodeTimeout,
    /// A restart quarantine shorter than the TTL plus the drift allowance: a lease granted
    /// just before a node forgot its keys could still be valid when that node votes again.
    #[error(
        "restart quarantine {quarantine:?} is shorter than ttl + drift ({needed:?}): raise it to at least {needed:?} (or to the longest ttl + drift of any client of these nodes), or switch it off with RestartQuarantine::Off and accept that a node restarted without its data can grant a second holder"
    )]
    QuarantineTooShort {
        /// The configured quarantine.
        quarantine: Duration,
        /// The TTL plus the drift allowance.
        needed: Duration,
    },
    /// [`Durability::Fsync`](crate::Durability::Fsync) with a zero timeout: `WAITAOF`
    /// takes whole milliseconds, and 0 would make it wait without end.
    #[error(
        "durability timeout is zero: durable votes need a positive fsync wait, e.g. 5ms with appendfsync always (about 1s with everysec)"
    )]
    ZeroDurabilityTimeout,
    /// The fsync wait of [`Durability::Fsync`](crate::Durability::Fsync) does not fit in
    /// the node deadline: it is part of every vote, so every vote would miss its deadline.
    #[error(
        "durability timeout {timeout:?} is not below the node timeout {node_timeout:?}: the fsync wait happens inside each vote; lower the durability timeout (with appendfsync always a few ms suffice) or raise node_timeout above it (about 1s with appendfsync everysec)"
    )]
    DurabilityTimeoutTooLong {
        /// The configured fsync wait.
        timeout: Duration,
        /// The node deadline it must fit in.
        node_timeout: Duration,
    },
    /// Retry delay of zero would spin.
    #[error("retry delay is zero: waiting acquires would spin; use at least 1ms")]
    ZeroRetryDelay,
    /// A [`RetryPolicy`](crate::retry::RetryPolicy) capped at zero attempts.
    #[error(
        "max attempts is zero: an acquire makes at least one attempt; use 1 for a single try, or leave the cap unset to let `wait` alone bound the acquire"
    )]
    ZeroMaxAttempts,
    /// Exponential backoff whose base is zero or above its cap.
    #[error(
        "exponential backoff needs 0 < base <= cap, got base {base:?} and cap {cap:?}: use a base of a few milliseconds and a cap at least that large"
    )]
    InvalidBackoff {
        /// The first pause's upper bound.
        base: Duration,
        /// The largest pause.
        cap: Duration,
    },
}

/// What went wrong on one node during one call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The node did not answer within its deadline.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The node answered with an error, or the connection failed.
    #[error("{0}")]
    Redis(String),
    /// The server refused our credentials, or its ACL denies this user the command
    /// (`NOPERM`: e.g. scripts, where scripting is switched off; see "Which operations need
    /// Lua" in `docs/lock.md`).
    #[error("authentication or permission refused: {0}")]
    Auth(String),
    /// The node answered something the protocol does not allow here: bytes that are not
    /// RESP2 on the lean connection (which then connects again), or a reply of a type the
    /// command cannot return. Something other than a Redis or Valkey primary may be
    /// listening at that address, or a proxy in between mangles replies.
    #[error("unexpected reply: {0}; is a Redis or Valkey primary listening at this address?")]
    Protocol(String),
    /// The node's connection already has this many requests waiting for replies: the
    /// server stopped answering (stopped, swapping, busy in a long script), and callers
    /// that gave up left their requests in line, as their replies must still be read to
    /// keep later replies matched. This request was refused at once, without being sent
    /// (waiting for room would cost it its place in line). Votes and most other requests
    /// are refused at half the line: the rest is kept for the deletes that follow them. The node takes requests again
    /// once the server answers what waits, or the connection breaks. Only the crate's own
    /// connection (`redis://` over TCP, RESP2) refuses so; on the `redis` crate's, a
    /// request waits for room until its deadline ([`NodeError::Timeout`]).
    #[error(
        "{0} requests already wait for this node's replies (is it stopped or overloaded?); refused without sending; it recovers once the node answers again"
    )]
    Backlog(usize),
    /// The node's connection reached the same server (same `run_id`) as the node at this
    /// address, under another name: its vote is not counted twice. Judged per connection:
    /// the node connects again after a second or so, and votes once its address leads to a
    /// server of its own.
    #[error(
        "same server as node {0} (same run_id): list every primary once; this vote is not counted"
    )]
    SameServer(String),
    /// The fence write found the node's counter already at or above the token this attempt
    /// chose: another grant has used it (a clock that jumped or a node that lost data let
    /// two attempts read the same maximum). The attempt is refused rather than handing out
    /// a token that is not larger than every earlier one; a waiting acquire retries.
    #[error(
        "fence counter already at {0} or more: another grant took this token (clock jump or lost data on a node); refused, retry for a larger one"
    )]
    FenceAhead(u64),
    /// The node said yes, but its server started (or restarted) less than the restart
    /// quarantine ago, or has restarted since that yes: it may have forgotten keys of
    /// leases that are still valid, so its vote does not count (see
    /// [`RestartQuarantine`](crate::config::RestartQuarantine)). A key it set is released
    /// as a failed attempt's is. It votes again once `remaining` has passed.
    #[error(
        "restarted less than the restart quarantine ago: its vote counts again in {remaining:?}"
    )]
    Quarantined {
        /// Time until the node's votes count again (zero when it restarted since it voted).
        remaining: Duration,
    },
    /// The node said yes, but the `TIME` read behind it showed its clock leapt forward by
    /// at least `ahead` beyond the drift allowance since this client last read it (the
    /// clock-jump guard, [`Builder::clock_jump_guard`](crate::Builder::clock_jump_guard)):
    /// keys there may have expired early, so its vote does not count until every lease
    /// granted before the jump has ended. It votes again once `remaining` has passed.
    #[error(
        "clock jumped forward by at least {ahead:?}: its keys may have expired early; its vote counts again in {remaining:?}"
    )]
    ClockJumped {
        /// The least the node's clock moved beyond what the drift allowance explains.
        ahead: Duration,
        /// Time until the node's votes count again.
        remaining: Duration,
    },
    /// The node said yes, but did not report it fsynced to its append-only file within
    /// the durability timeout ([`Durability::Fsync`](crate::Durability::Fsync)): a crash
    /// now could lose the key, so the vote does not count. The key may be there; it is
    /// released as a failed attempt's is.
    #[error(
        "said yes but did not fsync it to its append-only file within {timeout:?}: the vote does not count; set appendfsync always on the node, or raise the durability timeout (and the node deadline above it)"
    )]
    NotDurable {
        /// The `WAITAOF` timeout that passed.
        timeout: Duration,
    },
    /// Durable votes ([`Durability::Fsync`](crate::Durability::Fsync)) were asked of a
    /// node that does not persist to an append-only file (`appendonly no`): its yes can
    /// never be durable, so it never counts.
    #[error(
        "this node has appendonly no, and durable votes (Durability::Fsync) need appendonly yes: run CONFIG SET appendonly yes on it (with appendfsync always for a node deadline under 1s), or use Durability::Memory"
    )]
    AofDisabled,
    /// Durable votes ([`Durability::Fsync`](crate::Durability::Fsync)) were asked of a
    /// server that does not know `WAITAOF` (Redis or Valkey older than 7.2).
    #[error(
        "the server does not know WAITAOF ({0}): durable votes (Durability::Fsync) need Redis or Valkey 7.2 or newer; upgrade the node, or use Durability::Memory"
    )]
    NoWaitAof(String),
}

impl NodeError {
    pub(crate) fn from_redis(err: &redis::RedisError) -> Self {
        if err.code() == Some(crate::conn::BACKLOG_CODE) {
            let waiting = err
                .detail()
                .and_then(|d| d.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(crate::conn::MAX_PENDING);
            return NodeError::Backlog(waiting);
        }
        let text = redacted(err);
        if err.kind() == redis::ErrorKind::Parse {
            return NodeError::Protocol(text);
        }
        let lower = text.to_ascii_lowercase();
        if lower.contains("noauth")
            || lower.contains("wrongpass")
            || lower.contains("authentication")
            || lower.contains("noperm")
        {
            NodeError::Auth(text)
        } else {
            NodeError::Redis(text)
        }
    }

    /// True when the node did not answer in time (frozen, partitioned or slow).
    pub fn is_timeout(&self) -> bool {
        matches!(self, NodeError::Timeout(_))
    }
}

/// Where a server's error starts quoting the command's arguments back (`ERR unknown command
/// 'DELIFEQ', with args beginning with: 'key' 'token' `, Redis and Valkey alike).
const QUOTED_ARGS: &str = "with args beginning with:";

/// `err` as text, without what could be an owner token. A token is a credential (whoever
/// has it can extend or release the lock: see `token`), and every request that carries one
/// (`SET`, `DELIFEQ`, the scripts) could come back quoted in an error that is then shown,
/// logged or returned. So the quoted arguments are cut off (the quote may end inside a
/// token, which a pattern would miss), and any other run of exactly 32 hex digits (a
/// token's shape; a `run_id` or a script's SHA has 40) is masked.
pub(crate) fn redacted(err: &redis::RedisError) -> String {
    let mut text = err.to_string();
    if let Some(at) = text.find(QUOTED_ARGS) {
        text.truncate(at.saturating_add(QUOTED_ARGS.len()));
        text.push_str(" (withheld)");
    }
    mask_token_shaped(&text)
}

/// `text` with every run of exactly 32 ASCII hex digits replaced by `***`.
fn mask_token_shaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.len() == 32 {
            out.push_str("***");
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if c.is_ascii_hexdigit() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// A node's failure, named by its address (never with a password).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeFailure {
    /// `host:port` of the node.
    pub addr: String,
    /// Why its vote was missing.
    pub reason: NodeFailureReason,
}

/// Why a node did not grant, extend or release.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeFailureReason {
    /// The key is held by another token (or, for extend, is gone).
    NotOurs,
    /// The node failed or did not answer.
    Error(NodeError),
    /// The decision was made before this node answered.
    NoAnswerYet,
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            NodeFailureReason::NotOurs => write!(f, "node {}: held by another owner", self.addr),
            NodeFailureReason::Error(e) => write!(f, "node {}: {e}", self.addr),
            NodeFailureReason::NoAnswerYet => write!(f, "node {}: no answer yet", self.addr),
        }
    }
}

/// Joins node failures as `node a: …; node b: …`.
pub(crate) struct FailureList<'a>(pub(crate) &'a [NodeFailure]);

impl fmt::Display for FailureList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, failure) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}

/// An acquire, extend or release that did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Fewer than a majority of nodes said yes.
    #[error("lock {resource:?}: granted {granted} of {nodes}, needed {required}: {}", FailureList(.failures))]
    QuorumNotReached {
        /// The resource asked for.
        resource: String,
        /// Nodes that said yes.
        granted: usize,
        /// Majority needed.
        required: usize,
        /// Nodes in the cluster.
        nodes: usize,
        /// Why the others did not.
        failures: Vec<NodeFailure>,
    },
    /// A majority said yes but too late: no validity was left.
    #[error(
        "lock {resource:?}: a majority agreed but the attempt took {elapsed:?} of a {ttl:?} ttl, leaving no validity; raise the ttl or lower node latency"
    )]
    NoValidityLeft {
        /// The resource asked for.
        resource: String,
        /// Time the attempt took.
        elapsed: Duration,
        /// TTL requested.
        ttl: Duration,
    },
    /// Waiting for the lock ran past its deadline.
    #[error(
        "lock {resource:?}: not acquired within {waited:?} ({attempts} attempts); last: {last}"
    )]
    WaitTimeout {
        /// The resource asked for.
        resource: String,
        /// How long it waited.
        waited: Duration,
        /// Attempts made.
        attempts: u32,
        /// The last attempt's failure.
        last: Box<LockError>,
    },
    /// The [`RetryPolicy`](crate::retry::RetryPolicy) said stop (its attempt cap was
    /// reached, or its function returned `None`) before the acquire's `wait` had passed.
    #[error(
        "lock {resource:?}: not acquired in {attempts} attempts (the retry policy's limit) after {waited:?}; last: {last}; raise the policy's max attempts or wait for the holder's release"
    )]
    RetriesExhausted {
        /// The resource asked for.
        resource: String,
        /// Attempts made.
        attempts: u32,
        /// How long it waited.
        waited: Duration,
        /// The last attempt's failure.
        last: Box<LockError>,
    },
    /// [`Lease::extend_for`](crate::Lease::extend_for) was given a TTL the builder would
    /// refuse; nothing was sent to the servers.
    #[error("cannot extend {resource:?} for {ttl:?}: {reason}")]
    InvalidTtl {
        /// The resource of the lease.
        resource: String,
        /// The rejected TTL.
        ttl: Duration,
        /// The rule it breaks, as [`crate::Builder::build`] reports it.
        #[source]
        reason: ConfigError,
    },
    /// A [`LeaseHandle`](crate::handle::LeaseHandle) that cannot name a lease (checked by
    /// [`Redlock::adopt`](crate::Redlock::adopt) before anything is sent).
    #[error(
        "unusable lease handle: {reason}; pass the handle `Lease::into_handle` made, unchanged"
    )]
    InvalidHandle {
        /// What is wrong with it.
        reason: String,
    },
    /// An empty resource name.
    #[error("empty resource name: name the thing you lock, e.g. \"orders:42\"")]
    EmptyResource,
    /// The lease is no longer held (validity ran out or the keys are gone).
    #[error("lease on {resource:?} is lost: {reason}")]
    LeaseLost {
        /// The resource of the lease.
        resource: String,
        /// Why.
        reason: crate::LossReason,
    },
    /// The client was shut down ([`crate::Redlock::shutdown`]); it takes no new locks.
    #[error("the lock client was shut down: build a new client to take locks again")]
    ShutDown,
    /// [`crate::Redlock::shutdown`] gave up waiting for background work.
    #[error(
        "shutdown waited {waited:?} and {pending} background clean-ups were still running; their keys expire with the ttl"
    )]
    ShutdownTimedOut {
        /// How long it waited.
        waited: Duration,
        /// Background tasks still running.
        pending: usize,
    },
    /// The fencing counter would overflow (2^53, the largest integer Lua holds exactly).
    #[error(
        "fencing counter of {resource:?} is exhausted (reached {value}); reset it deliberately"
    )]
    FenceExhausted {
        /// The resource.
        resource: String,
        /// The stored value.
        value: u64,
    },
}

impl LockError {
    /// True for failures that a later attempt may not see (contention, node faults, timing).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LockError::QuorumNotReached { .. } | LockError::NoValidityLeft { .. }
        )
    }

    /// True when the resource is simply held: at least one node refused because another
    /// owner holds the key, and every node that answered without granting did so (nodes
    /// the decision did not wait for do not count, nor do nodes in their restart
    /// quarantine, which granted but whose votes do not count). A node that failed or
    /// timed out makes it `false`: then the nodes, not only the holder, stand in the way.
    pub fn is_contended(&self) -> bool {
        match self {
            LockError::QuorumNotReached { failures, .. } => {
                failures
                    .iter()
                    .any(|f| f.reason == NodeFailureReason::NotOurs)
                    && failures.iter().all(|f| {
                        matches!(
                            f.reason,
                            NodeFailureReason::NotOurs
                                | NodeFailureReason::NoAnswerYet
                                | NodeFailureReason::Error(
                                    NodeError::Quarantined { .. } | NodeError::ClockJumped { .. }
                                )
                        )
                    })
            }
            LockError::WaitTimeout { last, .. } | LockError::RetriesExhausted { last, .. } => {
                last.is_contended()
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(bytes: &[u8]) -> redis::RedisError {
        redis::parse_redis_value(bytes)
            .expect("parses")
            .extract_error()
            .expect_err("an error reply")
    }

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn quoted_arguments_are_withheld() {
        let e = reply(
            format!("-ERR unknown command 'DELIFEQ', with args beginning with: 'k' '{TOKEN}' \r\n")
                .as_bytes(),
        );
        let text = NodeError::from_redis(&e).to_string();
        assert!(!text.contains(TOKEN), "{text}");
        assert!(text.contains("unknown command 'DELIFEQ'"), "{text}");
        assert!(text.contains("(withheld)"), "{text}");
        // Cut where the quote begins: a token the server truncated is gone too.
        let cut = reply(
            format!(
                "-ERR unknown command 'SET', with args beginning with: 'k' '{}' \r\n",
                &TOKEN[..20]
            )
            .as_bytes(),
        );
        assert!(!redacted(&cut).contains(&TOKEN[..20]), "{}", redacted(&cut));
    }

    #[test]
    fn token_shaped_runs_are_masked_and_nothing_else() {
        let upper = TOKEN.to_ascii_uppercase();
        let run_id = "a".repeat(40);
        let e =
            reply(format!("-ERR odd '{TOKEN}' {upper}; run_id {run_id} port 6379\r\n").as_bytes());
        let text = redacted(&e);
        assert!(!text.contains(TOKEN) && !text.contains(&upper), "{text}");
        assert!(text.contains(&run_id), "{text}");
        assert!(text.contains("port 6379"), "{text}");
        assert_eq!(mask_token_shaped(&format!("<{TOKEN}>")), "<***>");
        assert_eq!(mask_token_shaped(""), "");
    }
}
