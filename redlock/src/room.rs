//! Room in a stalled node's line for the deletes that follow our writes.
//!
//! A failed attempt's clean-up works because its delete queues behind the attempt's `SET`
//! on the same connection (see `cleanup`); so does a release behind the lease's last write.
//! A connection holds at most [`MAX_PENDING`](crate::conn::MAX_PENDING) requests waiting
//! for replies, and a stalled server (stopped, frozen, swapping) answers none of them, so
//! the line fills — in about a second, for a client that keeps trying while one node is
//! frozen. Were every request admitted while there is room, a `SET` could take one of the
//! last places and its delete find the line full: refused, the delete is never sent, and
//! when the server runs again it runs the `SET` and the key stands for its whole TTL
//! (nobody can take the lock on that node meanwhile). The chaos rig saw that key after a
//! 3.5 s freeze.
//!
//! So the line is split. Every request shares the first [`SHARED`] places: votes (with
//! the `TIME` and `WAITAOF` that go behind them), extends, fence writes, probes, and the
//! deletes that follow no write of ours still in line. The rest is kept for the delete that
//! follows a write of ours still in line. A shared request is refused
//! ([`NodeError::Backlog`](crate::NodeError::Backlog), before anything is sent) when it
//! would take the line past [`SHARED`], counting its companions.
//!
//! # Credits: one kept place per write in line
//! Which delete may take a kept place is decided by construction, not by the caller. A
//! write of ours on a lock key — a vote's `SET`, an extend's write ([`Room::Write`]) — that
//! gets into a line leaves a [`Credit`] in the [`Writes`] of its attempt (later its lease):
//! the connection it went out on and the place it took. A delete of that key
//! ([`Room::Delete`]) takes a kept place only by spending that credit, and only while the
//! write is still in that line (its place not yet answered); otherwise it is a shared
//! request. Where no write of that attempt or lease ever got into the line — every vote
//! refused with `Backlog`, or dropped before it was sent — the delete is not sent at all
//! (nothing of ours is there to follow, and no key of ours to remove). All of this is
//! decided in the node's order gate, where every earlier call of ours to that node has
//! already been sent or refused (see `node`).
//!
//! Why that is enough: call `W` the credits not spent whose writes are still in the line,
//! and `L` the requests in the line. When a shared request gets in, `L ≤ SHARED`, and each
//! of the `W` writes is one of those `L` requests, so `L + W ≤ 2 × SHARED`, at most
//! [`MAX_PENDING`](crate::conn::MAX_PENDING). Until the next shared request gets in, a
//! delete spending a credit adds one to `L` and takes one from `W`, and a reply takes one
//! from `L` (and from `W`, when it was a credited write's): `L + W` never grows. So when
//! a delete spends a credit, counted in `W`, `L` is below the limit: the connection has a
//! place for it. Each credit is spent once, by the next delete of its key on that node; a
//! lease keeps only its newest write's credit per node (when an older write is still in
//! line, so is the newer, which is behind it).
//!
//! What it does not promise: a delete following a write that has left the line (the `SET`
//! was answered long ago, the lease is released while the node is frozen) is a shared
//! request and may be refused. Nothing of ours runs after it then, so the key is where it
//! is: the release is tried again, as a clean-up is (see `cleanup`), and the key goes at
//! the next try after the node answers again, or expires with its TTL. Places are counted
//! when a request is sent; the `PUBLISH` a native compare-and-delete sends after its reply
//! (see `lease`) is not, but it follows a reply, so the server is answering then.
//!
//! The `redis` crate's connection (TLS, Unix sockets, RESP3) keeps no line we can count:
//! there a request waits for room until its deadline, the split does not apply, and only
//! "not sent where nothing was" does.

use std::sync::{Arc, Mutex, PoisonError};

use redis::RedisError;

use crate::conn::Mark;

/// Places in a connection's line every request may take; the rest are kept for deletes
/// that follow our writes.
pub(crate) const SHARED: usize = crate::conn::MAX_PENDING / 2;

// Both halves hold something, and the kept half has a place for each shared one (see
// "Why that is enough").
const _: () = assert!(SHARED > 0 && SHARED.saturating_mul(2) <= crate::conn::MAX_PENDING);

/// The code of the error a delete gets when nothing of ours was sent to its node: it is
/// not sent either (see "Credits"); never shown to callers, who see nothing there.
const UNSENT_CODE: &str = "REDLOCK_UNSENT";

/// Which places in a node's line a request may take.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Room<'a> {
    /// The first [`SHARED`] places.
    Shared,
    /// The first [`SHARED`] places, for a write of ours on a lock key: once it is in line,
    /// its credit is kept in these writes.
    Write(&'a Writes),
    /// A delete of the key these writes went to: a kept place by spending their credit
    /// while its write is in line, else a shared place; not sent where none was sent.
    Delete(&'a Writes),
}

/// Whether a request may join a node's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// It may.
    Send,
    /// The places it may take are full: [`NodeError::Backlog`](crate::NodeError::Backlog).
    Refuse,
    /// A delete that follows nothing: not sent (see [`unsent`]).
    Unsent,
}

impl Room<'_> {
    /// Whether a request taking `places` (itself and its companions) may join node
    /// `node`'s line on connection `generation`, which stands at `mark` (`None`: the
    /// connection keeps no count). Spends nothing: see [`sent`](Self::sent).
    pub(crate) fn admit(
        self,
        node: usize,
        generation: u64,
        mark: Option<Mark>,
        places: usize,
    ) -> Admit {
        let shared = match mark {
            Some(mark) if mark.waiting.saturating_add(places) > SHARED => Admit::Refuse,
            _ => Admit::Send,
        };
        match self {
            Room::Shared | Room::Write(_) => shared,
            Room::Delete(writes) => writes.with(node, |trace| {
                if !trace.sent {
                    Admit::Unsent
                } else if trace.credit.is_some_and(|c| c.in_line(generation, mark)) {
                    // The connection itself refuses at its limit, which by "Why that is
                    // enough" this delete does not reach.
                    Admit::Send
                } else {
                    shared
                }
            }),
        }
    }

    /// Records that a request this room admitted got into node `node`'s line on
    /// connection `generation`, at the place `mark` gave as next just before (`None`: not
    /// counted): a write leaves its credit, a delete spends the one there was.
    pub(crate) fn sent(self, node: usize, generation: u64, mark: Option<Mark>) {
        match self {
            Room::Shared => {}
            Room::Write(writes) => writes.with(node, |trace| {
                trace.sent = true;
                trace.credit = mark.map(|m| Credit {
                    generation,
                    place: m.next(),
                });
            }),
            Room::Delete(writes) => writes.with(node, |trace| trace.credit = None),
        }
    }
}

/// What an attempt, then its lease, has sent each node, as its deletes need to know
/// (see "Credits"). Shared by the calls of the attempt and of the lease's extends, which
/// may still be in flight when the delete starts. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Writes(Arc<[Mutex<Trace>]>);

/// One node's part of [`Writes`].
#[derive(Debug, Default, Clone, Copy)]
struct Trace {
    /// A write of ours got into this node's line (its key may be there, or be set yet).
    sent: bool,
    /// The credit of the newest of them, not spent yet.
    credit: Option<Credit>,
}

/// A write of ours in a node's line: the connection and the place it took. A request that
/// is not ours may get in between reading the next place and the write taking its own
/// (the `PUBLISH` of a release, sent outside the order gate): the write's place is then
/// later than the credit says, and the credit is taken for spent earlier than it need be,
/// never later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Credit {
    generation: u64,
    place: u64,
}

impl Credit {
    /// Whether the write is still in line on connection `generation`, which stands at
    /// `mark`.
    fn in_line(self, generation: u64, mark: Option<Mark>) -> bool {
        self.generation == generation && mark.is_some_and(|m| m.answered <= self.place)
    }
}

impl Writes {
    /// Nothing sent yet to any of `nodes` nodes: a new attempt.
    pub(crate) fn none(nodes: usize) -> Self {
        Self::of(nodes, Trace::default())
    }

    /// Something may be on every one of `nodes` nodes, with no credit: a lease adopted
    /// from a handle, whose keys another client set.
    pub(crate) fn anywhere(nodes: usize) -> Self {
        Self::of(
            nodes,
            Trace {
                sent: true,
                credit: None,
            },
        )
    }

    fn of(nodes: usize, trace: Trace) -> Self {
        Writes((0..nodes).map(|_| Mutex::new(trace)).collect())
    }

    /// Runs `f` on node `node`'s trace. A node this does not know (none: every node of a
    /// client is counted when its attempt starts) is taken as written to, with no credit.
    fn with<R>(&self, node: usize, f: impl FnOnce(&mut Trace) -> R) -> R {
        match self.0.get(node) {
            Some(trace) => f(&mut trace.lock().unwrap_or_else(PoisonError::into_inner)),
            None => f(&mut Trace {
                sent: true,
                credit: None,
            }),
        }
    }
}

/// The error of a delete that [`Admit::Unsent`] kept from being sent.
pub(crate) fn unsent() -> RedisError {
    redis::make_extension_error(
        UNSENT_CODE.to_owned(),
        Some("nothing of ours was sent to this node: no delete either".to_owned()),
    )
}

/// Whether `e` is [`unsent`].
pub(crate) fn is_unsent(e: &RedisError) -> bool {
    e.code() == Some(UNSENT_CODE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::MAX_PENDING;

    fn line(answered: u64, waiting: usize) -> Option<Mark> {
        Some(Mark { answered, waiting })
    }

    #[test]
    fn shared_requests_leave_the_second_half_for_deletes() {
        let shared = Room::Shared;
        assert_eq!(shared.admit(0, 0, line(0, 0), 3), Admit::Send);
        assert_eq!(shared.admit(0, 0, line(0, SHARED - 3), 3), Admit::Send);
        assert_eq!(shared.admit(0, 0, line(0, SHARED - 2), 3), Admit::Refuse);
        assert_eq!(shared.admit(0, 0, line(0, SHARED), 1), Admit::Refuse);
        // The `redis` crate's connection: nothing to count.
        assert_eq!(shared.admit(0, 0, None, 3), Admit::Send);
    }

    #[test]
    fn a_delete_takes_a_kept_place_only_behind_its_own_write() {
        let writes = Writes::none(2);
        let (write, delete) = (Room::Write(&writes), Room::Delete(&writes));
        // Nothing sent to either node: no delete.
        assert_eq!(
            delete.admit(0, 7, line(0, MAX_PENDING - 1), 1),
            Admit::Unsent
        );
        assert_eq!(delete.admit(1, 7, line(0, 0), 1), Admit::Unsent);
        // Node 0's vote gets place 100 on connection 7.
        assert_eq!(write.admit(0, 7, line(90, 10), 1), Admit::Send);
        write.sent(0, 7, line(90, 10));
        // While it waits, its delete gets in past the shared half.
        assert_eq!(delete.admit(0, 7, line(100, SHARED), 1), Admit::Send);
        // Not once the vote was answered, nor on another connection: shared, then.
        assert_eq!(delete.admit(0, 7, line(101, SHARED), 1), Admit::Refuse);
        assert_eq!(delete.admit(0, 8, line(0, SHARED), 1), Admit::Refuse);
        assert_eq!(delete.admit(0, 8, line(0, 0), 1), Admit::Send);
        // Spent by the delete that used it: the next delete is a shared request.
        delete.sent(0, 7, line(100, SHARED));
        assert_eq!(delete.admit(0, 7, line(100, SHARED), 1), Admit::Refuse);
        assert_eq!(delete.admit(0, 7, line(100, 0), 1), Admit::Send);
        // Node 1 still had nothing: a vote refused (never recorded) leaves nothing either.
        assert_eq!(write.admit(1, 7, line(0, SHARED), 1), Admit::Refuse);
        assert_eq!(delete.admit(1, 7, line(0, 0), 1), Admit::Unsent);
    }

    #[test]
    fn an_adopted_lease_deletes_everywhere_in_shared_places() {
        let writes = Writes::anywhere(1);
        let delete = Room::Delete(&writes);
        assert_eq!(delete.admit(0, 0, line(0, 0), 1), Admit::Send);
        assert_eq!(delete.admit(0, 0, line(0, SHARED), 1), Admit::Refuse);
        // A node past the ones it was made for: as anywhere.
        assert_eq!(delete.admit(5, 0, line(0, 0), 1), Admit::Send);
    }

    #[test]
    fn the_connection_without_a_count_still_skips_where_nothing_was_sent() {
        let writes = Writes::none(1);
        let delete = Room::Delete(&writes);
        assert_eq!(delete.admit(0, 0, None, 1), Admit::Unsent);
        Room::Write(&writes).sent(0, 0, None);
        assert_eq!(delete.admit(0, 0, None, 1), Admit::Send);
    }

    /// "Why that is enough", played out: writes, deletes of leases picked at random and
    /// replies, in a seeded order. After every step the line and the credits still
    /// standing fit in it (`L + W ≤ MAX_PENDING`); every credited delete gets in, and
    /// some get past the shared half.
    #[test]
    fn every_credited_delete_finds_a_place() {
        let mut seed: u64 = 48;
        let mut next = move |below: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(seed >> 33).expect("31 bits") % below
        };
        let mut line = Mark {
            answered: 0,
            waiting: 0,
        };
        let mut leases: Vec<Writes> = Vec::new();
        let (mut kept, mut unsent) = (0, 0);
        for step in 0..3 * MAX_PENDING {
            let writes = Writes::none(1);
            let write = Room::Write(&writes);
            if write.admit(0, 1, Some(line), 1) == Admit::Send {
                write.sent(0, 1, Some(line));
                line.waiting += 1;
            }
            leases.push(writes);
            if next(3) > 0 && !leases.is_empty() {
                let writes = leases.swap_remove(next(leases.len()));
                let delete = Room::Delete(&writes);
                let credited =
                    writes.with(0, |t| t.credit.is_some_and(|c| c.in_line(1, Some(line))));
                match delete.admit(0, 1, Some(line), 1) {
                    Admit::Send => {
                        assert!(line.waiting < MAX_PENDING, "step {step}: no place");
                        kept += usize::from(line.waiting >= SHARED);
                        delete.sent(0, 1, Some(line));
                        line.waiting += 1;
                    }
                    Admit::Refuse => assert!(!credited, "step {step}: credited, refused"),
                    Admit::Unsent => unsent += 1,
                }
            }
            if next(4) == 0 && line.waiting > 0 {
                line.waiting -= 1;
                line.answered += 1;
            }
            let standing = leases
                .iter()
                .filter(|w| w.with(0, |t| t.credit.is_some_and(|c| c.in_line(1, Some(line)))))
                .count();
            assert!(line.waiting + standing <= MAX_PENDING, "step {step}");
        }
        assert!(kept > 0 && unsent > 0, "kept {kept}, unsent {unsent}");
    }
}
