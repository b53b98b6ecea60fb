//! Fencing tokens: numbers that grow from grant to grant of a resource.
//!
//! # How a token is made
//! Each node keeps, beside the lock key `K`, a counter (no expiry) under the key
//! `K` + byte `0xFF` + `fence` (see [`counter_key`]). The acquire's first round is one
//! atomic script per node: `SET K token NX PX ttl` and, if that succeeded, read the
//! counter. With a quorum of yes votes the client takes
//! `t = max(fences read) + 1` and, in a second round sent to **every** node, raises
//! `K:fence` to `t` where it is lower and asks whether `K` still holds our token. A node
//! counts as a yes only if our key was still there **and** its counter was below `t`
//! (a counter already at `t` or above means another grant took this token:
//! [`NodeError::FenceAhead`](crate::NodeError::FenceAhead)). The lease is returned only
//! if a quorum said yes — so `t` was written to a quorum, over smaller counters, while
//! the lock was held there — and only with the validity recomputed after both rounds.
//!
//! # Why a later grant gets a larger token
//! Let grant A with token `a` be returned, and grant B's first round succeed later.
//! A wrote `a` to a set `W` of at least `q = N/2 + 1` nodes, each while A's key was
//! present there. B's `SET NX` succeeded on a set `Q` of `q` nodes. Since `2q > N`, some
//! node `n` lies in both. On `n`, B's `SET NX` could succeed only after A's key was gone
//! (expired or released), which is after A's fence write, which needed A's key. B reads
//! the fence in the same atomic step, so it reads at least `a` and picks `b ≥ a + 1`.
//! The counter itself only ever rises (`set-if-greater`), so nothing else can lower it.
//!
//! A second argument, which needs no assumption about the first round, covers what the
//! first one cannot (below): A's and B's second rounds each needed a quorum of clean
//! writes, so some node `m` counted for both. On `m`, B's write ran after A's (B's first
//! round succeeded after A returned, and A's write preceded its return), so B found the
//! counter at `a` or above, and counted `m` only if `b > a`. The same holds for two
//! grants that chose one token: on the node both counted, the second writer found its own
//! token already there. So returned tokens are unique, and a grant asked for after another
//! returned carries a larger one, as long as the counters on `m` are not forgotten. Two
//! grants in flight at once — both can be won only where a fault took a vote away (a
//! forgotten key, a clock jump) — may return in either order: the one that returns first
//! may hold the larger token (seen by the chaos rig, `docs/mutants.md`, run W).
//!
//! # Why two rounds
//! A fenced acquire could skip round two: increment the counter in round one's script and,
//! when a quorum of the yes votes return the same largest value, hand that value out. It
//! would cost an unfenced acquire's one round trip instead of two, and without faults the
//! model finds no counterexample to it. But the first argument is then the only one, and it needs
//! the shared node to have run the earlier grant's `SET NX` first: one clock jump lets a
//! grant whose quorum was won after another returned carry a **smaller** token. The model
//! finds that trace (`n3_one_round_fence_lets_a_clock_jump_shrink_a_token`,
//! `docs/model.md`, "Why the fence takes two rounds"), so the crate keeps the second round.
//!
//! # What breaks it
//! - **Amnesia.** A node that restarts without its data (no AOF, `FLUSHALL`) forgets its
//!   counter. If that node is `n` above, B may read a stale maximum; if it is also `m`,
//!   B's fence write finds nothing there and counts it. Two grants can then share a token
//!   — Kleppmann's case: the holder held a bare quorum and one of its nodes came back
//!   empty. Tokens stay safe while some node that counted for every returned grant keeps
//!   its counter: when each fence reached all `N` nodes (the normal case: the second round
//!   goes to every node), up to `N − q` nodes may lose their data, **if each stayed out
//!   for longer than the TTL** (so no acquire still in flight counts a vote it gave before
//!   it forgot); when a fence reached only a bare quorum, none may. Restart amnesic nodes
//!   only after they have been out for longer than the TTL *and* re-seed them — or run
//!   with `appendfsync always`.
//! - **Clock jumps.** If a node's clock jumps forward, A's key expires early there, B may
//!   take the lock while A still believes it holds it: mutual exclusion fails. Tokens do
//!   not: the second argument above needs no clock, so B's token is larger (or B is
//!   refused) and a fenced resource rejects A. Without the "counter below `t`" rule a
//!   jump could repeat a token (B read the shared node before the jump let A in); the
//!   model in `redlock/tests/model.rs` found that trace and checks the rule closes it.
//! - **Integers.** Counters live as Lua numbers (doubles); tokens stop at 2^53 with
//!   [`LockError::FenceExhausted`](crate::LockError::FenceExhausted).
//!
//! - **Eviction.** Counters have no expiry. Under `maxmemory` with an `allkeys-*` policy
//!   the server may evict a counter, which is amnesia of that one key (above). Run lock
//!   nodes with `noeviction` or a `volatile-*` policy: those never evict keys without an
//!   expiry, so they never evict a counter (lock keys carry a TTL and may be evicted
//!   early under `volatile-*`, which ends a lease early but cannot hand out a smaller
//!   token).
//!
//! The token is fixed for the life of a lease: extends and renewals keep it.
//!
//! # The counter's key
//! Resource names are `&str`, so every lock key (prefix + name) is valid UTF-8. The counter
//! key holds the byte `0xFF`, which never occurs in UTF-8, so no resource name, with any
//! prefix, can name a counter, and two lock keys never share one (the key is the lock key
//! followed by a fixed suffix). Earlier versions of this crate kept the counter at `K:fence`, which
//! a resource named `K:fence` collided with; those counters are **not migrated**: after an
//! upgrade tokens start again at 1. If a fenced resource already stores tokens from the old
//! counters, copy each old counter to its new key on every node (with no lock held) before
//! the first grant, or the resource will reject the new, smaller tokens as stale.
//!
//! # The counter's life
//! A counter lives as long as its resource is locked now and then, and one key per resource
//! stays behind after the last grant (which matters for per-entity locks such as
//! `order:{id}`). Counters do not expire by themselves: a counter that vanished while a
//! resource still remembers a token would restart at 1 and every later write would be
//! rejected as stale (or, for a resource that forgot too, accepted out of order). Instead,
//! retire a counter explicitly with [`Lease::retire_fence`](crate::Lease::retire_fence)
//! when the entity it fences is gone for good: it deletes the counter on every node while
//! the lease is held, then releases. The next grant of that resource gets token 1 again,
//! which is exactly right for a new entity under the same name and exactly wrong for a
//! resource that still stores the old tokens.

use std::fmt;

/// The largest token: the largest integer a Lua number holds exactly.
pub const MAX_FENCE: u64 = 1 << 53;

/// What follows the lock key in its counter's key. Starts with `0xFF`, a byte no UTF-8
/// string contains, so no lock key can be a counter key.
const COUNTER_SUFFIX: &[u8] = b"\xfffence";

/// The key of the fence counter beside lock key `key` (see the [module docs](self)).
///
/// ```
/// let key = fenced_redlock::fence::counter_key("orders:42");
/// assert_eq!(key, b"orders:42\xfffence");
/// assert!(std::str::from_utf8(&key).is_err());
/// ```
pub fn counter_key(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len().saturating_add(COUNTER_SUFFIX.len()));
    k.extend_from_slice(key.as_bytes());
    k.extend_from_slice(COUNTER_SUFFIX);
    k
}

/// A fencing token: strictly greater than the token of any earlier returned grant of the
/// same resource, under the conditions in the [module docs](self). Send it with every
/// write and let the resource reject writes carrying a smaller one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FenceToken(u64);

impl FenceToken {
    /// Wraps a raw value (e.g. one read back from your database).
    pub const fn new(value: u64) -> Self {
        FenceToken(value)
    }

    /// The number, for storing next to the data it protects.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// As `i64` for SQL `bigint` columns (tokens stop at 2^53, so this never truncates).
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    /// The token after the largest counter read from a quorum, or `None` when exhausted.
    pub(crate) fn next_after<'a>(read: impl IntoIterator<Item = &'a i64>) -> Result<Self, u64> {
        let max = read
            .into_iter()
            .map(|v| u64::try_from(*v).unwrap_or(0))
            .max()
            .unwrap_or(0);
        match max.checked_add(1) {
            Some(next) if next <= MAX_FENCE => Ok(FenceToken(next)),
            _ => Err(max),
        }
    }
}

impl fmt::Display for FenceToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn next_is_max_plus_one() {
        assert_eq!(FenceToken::next_after(&[3, 9, 0]), Ok(FenceToken(10)));
        assert_eq!(FenceToken::next_after(&[]), Ok(FenceToken(1)));
        assert_eq!(FenceToken::next_after(&[-5]), Ok(FenceToken(1)));
    }

    #[test]
    fn exhausted_at_two_to_the_53() {
        let max = MAX_FENCE as i64;
        assert_eq!(
            FenceToken::next_after(&[max - 1]),
            Ok(FenceToken(MAX_FENCE))
        );
        assert_eq!(FenceToken::next_after(&[max]), Err(MAX_FENCE));
    }

    proptest! {
        /// No lock key (any UTF-8 string) is a counter key, and distinct lock keys have
        /// distinct counters.
        #[test]
        fn counter_keys_are_outside_the_lock_key_space(a in ".*", b in ".*") {
            let key = counter_key(&a);
            prop_assert!(std::str::from_utf8(&key).is_err());
            prop_assert_ne!(key.as_slice(), b.as_bytes());
            prop_assert_eq!(counter_key(&a) == counter_key(&b), a == b);
        }

        /// Any quorum that shares a node with an earlier writer's quorum reads at least
        /// the earlier token, so the next token is larger.
        #[test]
        fn intersecting_quorums_give_larger_tokens(
            counters in proptest::collection::vec(0i64..1_000_000, 5),
            written in proptest::sample::subsequence((0..5usize).collect::<Vec<_>>(), 3..=5),
            reader in proptest::sample::subsequence((0..5usize).collect::<Vec<_>>(), 3..=5),
        ) {
            let first = FenceToken::next_after(&counters).expect("small");
            let mut after = counters.clone();
            for i in &written {
                after[*i] = after[*i].max(first.as_i64());
            }
            let read: Vec<i64> = reader.iter().map(|i| after[*i]).collect();
            let second = FenceToken::next_after(&read).expect("small");
            prop_assert!(second > first);
        }
    }
}
