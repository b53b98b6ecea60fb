//! Room in a stalled node's line for the deletes that follow our writes.
//!
//! A failed attempt's clean-up works because its delete queues behind the attempt's `SET`
//! on the same connection (see `cleanup`). A connection holds at most
//! [`MAX_PENDING`](crate::conn::MAX_PENDING) requests waiting for replies, and a stalled
//! server (stopped, frozen, swapping) answers none of them, so the line fills — in about a
//! second, for a client that keeps trying while one node is frozen. Were every request
//! admitted while there is room, a `SET` could take one of the last places and its delete
//! find the line full: refused, the delete is never sent, and when the server runs again
//! it runs the `SET` and the key stands for its whole TTL (nobody can take the lock on that
//! node meanwhile). The chaos rig saw that key after a 3.5 s freeze.
//!
//! So the line is split. Every request shares the first [`SHARED`] places: votes (with
//! the `TIME` and `WAITAOF` that go behind them), fence writes, clean-up rounds sent again,
//! probes. The rest is [`Room::Reserved`] for the delete that follows a write of ours: a
//! failed attempt's first clean-up round, and a release. A shared request is refused
//! ([`NodeError::Backlog`](crate::NodeError::Backlog), before anything is sent) when it
//! would take the line past [`SHARED`], counting its companions.
//!
//! Why that is enough: shared requests never hold more than [`SHARED`] places, so at most
//! that many votes wait in the line; each has at most one reserved delete (the clean-up
//! skips nodes that refused the vote, so a refused vote has none), and a release follows
//! a grant. The reserved half fills only if a client had more than
//! `MAX_PENDING − SHARED` (512) attempts and leases in flight on one node when it stalled.
//! A delete that finds even that full is refused, and its key expires with its TTL.
//!
//! The `redis` crate's connection (TLS, Unix sockets, RESP3) keeps no line we can count:
//! there a request waits for room until its deadline, and the split does not apply.

/// Places in a connection's line every request may take; the rest are kept for deletes
/// that follow our writes.
pub(crate) const SHARED: usize = crate::conn::MAX_PENDING / 2;

// Both halves hold something.
const _: () = assert!(SHARED > 0 && SHARED < crate::conn::MAX_PENDING);

/// Which places in a node's line a request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Room {
    /// The first [`SHARED`] places.
    Shared,
    /// Every place: a delete that follows a write of ours on this node.
    Reserved,
}

impl Room {
    /// Whether a request taking `places` (itself and its companions) may join a line in
    /// which `waiting` requests already wait; `None` when the connection keeps no count.
    pub(crate) fn admits(self, waiting: Option<usize>, places: usize) -> bool {
        match (self, waiting) {
            (Room::Shared, Some(waiting)) => waiting.saturating_add(places) <= SHARED,
            // The connection itself refuses at its limit.
            (Room::Reserved, _) | (_, None) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::MAX_PENDING;

    #[test]
    fn shared_requests_leave_the_second_half_for_deletes() {
        assert!(Room::Shared.admits(Some(0), 3));
        assert!(Room::Shared.admits(Some(SHARED - 3), 3));
        assert!(!Room::Shared.admits(Some(SHARED - 2), 3));
        assert!(!Room::Shared.admits(Some(SHARED), 1));
        assert!(Room::Reserved.admits(Some(SHARED), 1));
        assert!(Room::Reserved.admits(Some(MAX_PENDING - 1), 1));
        // The `redis` crate's connection: nothing to count.
        assert!(Room::Shared.admits(None, 3));
    }
}
