//! What this client itself holds: waiters of one client do not ask the nodes for a lock
//! that one of its own leases holds.
//!
//! Tasks of one process often share a client and wait for the same resource (workers
//! taking turns on a row, handlers serialising on an account). While one of them holds
//! the lease, every other's attempt can only be refused — each node finds our own key —
//! yet each costs a request per node, a script run per node and the clean-up bookkeeping.
//! Measured on the fencing table (8 tasks on one client, 5 ms sections): 4 attempts per
//! grant, 16 commands per node per section.
//!
//! So a grant records its key and validity end here, every change of validity (extend,
//! cut) updates it, and the lease's drop removes it. A waiter that finds its key held here,
//! still valid, skips the remote attempt and waits — for a release notice, its retry
//! pause, or the holder's validity end, whichever comes first. This only ever holds
//! attempts back, never grants anything: the nodes still decide every grant.
//!
//! And the waiters take turns ([`Held::turn`]): one per key asks the nodes, the others
//! queue first come, first served. Without that, the task that has just released asks
//! again at once, ahead of the waiter its release notice woke, and mostly wins — a
//! waiter could go unserved for the whole of its wait (seen on the fencing table: waits of
//! 10 s that ended without the lock, with the lock handed around every 10 ms).
//!
//! What it changes beyond the cost: a sibling whose keys the servers lost (an eviction, a
//! restart without data) still counts as holding until its validity ends, so a waiter of
//! the same client does not step in before that — the exclusion the sibling believes in
//! holds within the process. Waiters of other clients see only the nodes, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use crate::token::Token;

/// The queue of one key's waiting acquires: a fair (first come, first served) lock.
type Gate = Arc<tokio::sync::Mutex<()>>;

/// Keys held by leases of one client (its `Shared`), with each one's validity end, and
/// the queues of its waiting acquires.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Keyed by the lease's own `Arc<str>`: recording a grant allocates nothing.
    keys: Mutex<HashMap<Arc<str>, (Token, Instant)>>,
    gates: Arc<Mutex<HashMap<String, Gate>>>,
}

/// A waiting acquire's turn to ask the nodes for its key; the next in line gets it when
/// this is dropped (the acquire returned, or its future was dropped).
///
/// It exists from the moment its gate is in the map, before the turn comes (`guard`
/// still `None`): an acquire dropped while in line then removes the gate too, when it was
/// the last to use it.
#[derive(Debug)]
pub(crate) struct Turn {
    gates: Arc<Mutex<HashMap<String, Gate>>>,
    key: String,
    gate: Gate,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        drop(self.guard.take());
        forget_gate(&self.gates, &self.key, &self.gate);
    }
}

/// Removes `key`'s gate once nobody but the map has it (clones are made under the map's
/// lock, so the count cannot grow meanwhile).
fn forget_gate(gates: &Mutex<HashMap<String, Gate>>, key: &str, gate: &Gate) {
    let mut gates = gates
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // The map's and `gate`'s: nobody else waits.
    if Arc::strong_count(gate) == 2 && gates.get(key).is_some_and(|g| Arc::ptr_eq(g, gate)) {
        gates.remove(key);
    }
}

impl Held {
    /// Waits for this acquire's turn to ask the nodes for `key`, behind the acquires of
    /// this client that came first, until `deadline` (`None`: no deadline, or the
    /// deadline came first).
    pub(crate) async fn turn(&self, key: &str, deadline: Option<Instant>) -> Option<Turn> {
        let gate = {
            let mut gates = self
                .gates
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(gates.entry(key.to_owned()).or_default())
        };
        // From here the gate is in the map: whatever ends this wait (the turn, the
        // deadline, this future dropped in line), `turn`'s drop takes the gate out again
        // once nobody else uses it.
        let mut turn = Turn {
            gates: Arc::clone(&self.gates),
            key: key.to_owned(),
            gate,
            guard: None,
        };
        // The wait holds a clone of the gate; it ends (or is dropped) before `turn` is.
        let waiting = Arc::clone(&turn.gate).lock_owned();
        turn.guard = match deadline {
            Some(d) => tokio::time::timeout_at(d, waiting).await.ok(),
            None => Some(waiting.await),
        };
        turn.guard.is_some().then_some(turn)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, (Token, Instant)>> {
        // A poisoned map is still a correct map: every update is one insert or remove.
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The lease with owner `token` holds `key` until `until` (a grant, or a change of
    /// its validity).
    pub(crate) fn hold(&self, key: &Arc<str>, token: Token, until: Instant) {
        self.lock().insert(Arc::clone(key), (token, until));
    }

    /// The lease with owner `token` changed its validity end to `until`; nothing when it
    /// is not the one recorded (another lease of the key replaced it).
    pub(crate) fn update(&self, key: &str, token: Token, until: Instant) {
        if let Some(entry) = self.lock().get_mut(key)
            && entry.0 == token
        {
            entry.1 = until;
        }
    }

    /// The lease with owner `token` is done with `key` (released, dropped, handed over).
    pub(crate) fn forget(&self, key: &str, token: Token) {
        let mut keys = self.lock();
        if keys.get(key).is_some_and(|(t, _)| *t == token) {
            keys.remove(key);
        }
    }

    /// Which lease of this client holds `key` now (its owner token) and until when, if
    /// one does. An entry whose validity has ended is removed (its lease may live on,
    /// expired, until dropped).
    pub(crate) fn holder(&self, key: &str) -> Option<(Token, Instant)> {
        let mut keys = self.lock();
        let held = *keys.get(key)?;
        if Instant::now() < held.1 {
            Some(held)
        } else {
            keys.remove(key);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_key_is_held_until_its_validity_ends_or_its_lease_forgets_it() {
        let held = Held::default();
        let key: Arc<str> = Arc::from("k");
        let (a, b) = (Token::random(), Token::random());
        let now = Instant::now();
        assert_eq!(held.holder("k").map(|(_, until)| until), None);
        held.hold(&key, a, now + Duration::from_millis(100));
        assert_eq!(
            held.holder("k").map(|(_, until)| until),
            Some(now + Duration::from_millis(100))
        );
        // Another lease's update or drop leaves the entry alone.
        held.update("k", b, now + Duration::from_millis(500));
        held.forget("k", b);
        assert_eq!(
            held.holder("k").map(|(_, until)| until),
            Some(now + Duration::from_millis(100))
        );
        held.update("k", a, now + Duration::from_millis(50));
        assert_eq!(
            held.holder("k").map(|(_, until)| until),
            Some(now + Duration::from_millis(50))
        );
        tokio::time::advance(Duration::from_millis(50)).await;
        assert_eq!(
            held.holder("k").map(|(_, until)| until),
            None,
            "ended at its validity"
        );
        held.hold(&key, b, Instant::now() + Duration::from_millis(100));
        held.forget("k", b);
        assert_eq!(
            held.holder("k").map(|(_, until)| until),
            None,
            "forgotten by its lease"
        );
    }

    fn gates(held: &Held) -> usize {
        held.gates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// A waiting acquire dropped while in line (its wait timed out by the caller's
    /// `timeout`, its task aborted) takes its key's gate with it when it was the last in
    /// line: the map once kept a gate for every key that ended that way.
    #[tokio::test(start_paused = true)]
    async fn a_turn_dropped_while_waiting_leaves_no_gate_behind() {
        let held = Held::default();
        for deadline in [None, Some(Instant::now() + Duration::from_secs(1))] {
            for first_goes_first in [true, false] {
                let first = held.turn("k", None).await.expect("nobody in line");
                let mut second = Box::pin(held.turn("k", deadline));
                assert!(second.as_mut().now_or_never().is_none(), "behind first");
                if first_goes_first {
                    drop(first);
                    drop(second);
                } else {
                    drop(second);
                    drop(first);
                }
                assert_eq!(
                    gates(&held),
                    0,
                    "deadline {deadline:?}, first dropped first: {first_goes_first}"
                );
            }
        }
        // The key's line still works.
        assert!(held.turn("k", None).await.is_some());
    }
}
