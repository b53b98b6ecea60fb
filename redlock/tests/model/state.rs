//! The state of the whole system at one instant: real time, the nodes, the clients, the
//! messages in flight, the resource and the fault budgets spent — plus two ghost fields
//! that only the properties read.

/// One acquire attempt's owner token: unique per client and attempt, as the 128 random
/// bits of `Token::random` are in practice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Owner {
    pub(crate) client: u8,
    pub(crate) attempt: u8,
}

/// A lock key on a node: whose it is and when it expires on that node's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub(crate) owner: Owner,
    pub(crate) expires: u8,
}

/// One Redis primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub(crate) struct Node {
    pub(crate) key: Option<Key>,
    /// The `K:fence` counter (no expiry).
    pub(crate) fence: u8,
    /// How far this node's clock has jumped ahead of real time.
    pub(crate) ahead: u8,
    /// Real time from which its votes count again after a clock jump (clock-jump guard); 0
    /// once that time has come, so that equal situations are equal states. (The restart
    /// quarantine is each client's own: [`Server`].)
    pub(crate) votes_from: u8,
}

/// A command on its way to a node, sent by the client whose link carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Request {
    /// `ACQUIRE_FENCED`: SET NX PX ttl, and on success read the counter.
    Acquire { attempt: u8 },
    /// `FENCE_WRITE`: raise the counter to `fence`, say whether our key is still there.
    FenceWrite { attempt: u8, fence: u8 },
    /// `EXTEND`: compare-and-PEXPIRE to `ttl`, for the lease's `nth` extend.
    Extend { attempt: u8, nth: u8, ttl: u8 },
    /// `RELEASE` (and the clean-up of a failed attempt): compare-and-delete. Its answer
    /// changes nothing the client does, so it has none here.
    Delete { attempt: u8 },
}

/// A node's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Reply {
    /// `Some(counter)` granted, `None` held by another.
    Acquire { attempt: u8, fence: Option<u8> },
    /// Whether our key still held the lock when the counter was raised, and the counter
    /// was below our token (a counter already there is not a yes).
    FenceWrite { attempt: u8, held: bool },
    /// Whether the key was ours and got the extend's TTL.
    Extend { attempt: u8, nth: u8, ok: bool },
}

/// The commands in flight from one client to one node, in the order sent: one TCP
/// connection (a `ConnectionManager`) delivers them in that order. Answers are not kept
/// in flight: an answer either reaches the client while its round still counts (in the
/// same step as the command runs) or it never counts, which is all a late answer does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct Link {
    pub(crate) to_node: Vec<Request>,
}

/// One node's part in a round, as `quorum::Tally` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Vote {
    /// No answer yet (after the deadline: a failure, `NoAnswerYet`).
    Pending,
    /// Yes, with the counter read (0 for rounds that read none).
    Yes(u8),
    /// A definite no (held by another / not ours).
    No,
    /// A yes that does not count: the node is in its restart quarantine. A failure, like
    /// a missed deadline: a failed attempt cleans up there.
    Void,
}

/// Which round a client is waiting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RoundKind {
    Acquire,
    FenceWrite,
    /// The lease's `nth` extend: answers to an earlier extend of the same lease, still in
    /// flight, do not count for it (each `fan_out` has its own calls).
    Extend {
        nth: u8,
    },
}

/// A fan-out in progress: started at `started` (client clock), one vote per node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Round {
    pub(crate) kind: RoundKind,
    pub(crate) started: u8,
    /// The TTL the round gives the keys, from which validity is counted.
    pub(crate) ttl: u8,
    pub(crate) votes: Vec<Vote>,
}

/// Where a holder is in its critical section (the chaos run's `run_section`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    /// About to read (write-only) or claim (claim-first).
    Start,
    /// Read `value`; working until `until`.
    Working { value: u8, until: u8 },
    /// Looked at `is_valid()` and found time left; about to write `value + 1`.
    Checked { value: u8 },
}

/// A client's protocol state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Phase {
    /// Not trying; may start an attempt if it has any left.
    Idle,
    /// Waiting on the SET NX round of `attempt`, begun at `started`.
    Acquiring { attempt: u8, round: Round },
    /// Quorum reached; writing `fence` back. `first` is the first round's tally, which
    /// decides where a failure cleans up; validity counts from `started`.
    Fencing {
        attempt: u8,
        started: u8,
        /// Ghost: the largest token returned before this quorum was won; the docs promise
        /// this grant a larger one.
        floor: u8,
        fence: u8,
        first: Vec<Vote>,
        round: Round,
    },
    /// Holding the lease `attempt` with token `fence` until `valid_until` (client clock).
    Holding {
        attempt: u8,
        fence: u8,
        valid_until: u8,
        step: Step,
        /// An extend in flight; the section waits for it, as `extend().await` does.
        extending: Option<Round>,
        /// Extends started on this lease.
        extends: u8,
    },
}

/// A client's restart quarantine of one node: the node's latest possible start as the
/// client estimated it (before t=0 when an uptime says so), and the length it lasts from
/// there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Quarantined {
    pub(crate) since: i8,
    /// `Length::LongestSoFar` reads the length again at each vote; this is then the
    /// builder's TTL + drift, the least it can be.
    pub(crate) length: u8,
}

/// What a client knows of one node's server (the library's `quarantine::Incarnation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub(crate) struct Server {
    /// `A`: the latest send time of a request of this client that the node's current server
    /// answered in time to count (the `INFO` of the client's connection included), kept
    /// while a restart may still come and `Estimate::Checked` will read it. `None`: the
    /// client has not connected yet, or nothing reads it. [`Server::LATE`]: later than any
    /// early start the time bound allows.
    pub(crate) heard: Option<u8>,
    /// The restart quarantine in force; `None` when there is none or it is over for good.
    pub(crate) quarantine: Option<Quarantined>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Client {
    pub(crate) phase: Phase,
    pub(crate) attempts_used: u8,
    pub(crate) paused: bool,
    /// `servers[node]`.
    pub(crate) servers: Vec<Server>,
}

impl Server {
    /// An `A` no early start can reach before time runs out.
    pub(crate) const LATE: u8 = u8::MAX;
}

/// The counter row in PostgreSQL (outside the fault domain, as in the rig).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Resource {
    pub(crate) value: u8,
    pub(crate) fence: u8,
    /// Accepted increments; `value < writes` means an update was lost.
    pub(crate) writes: u8,
}

/// Fault budgets spent so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Spent {
    pub(crate) pauses: u8,
    pub(crate) restarts_keep: u8,
    pub(crate) restarts_empty: u8,
    pub(crate) clock_jumps: u8,
}

/// Facts about the history that the properties need and no process could see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Ghost {
    /// The largest token a returned grant carried.
    pub(crate) max_granted: u8,
    /// Grants returned so far.
    pub(crate) grants: u8,
    /// A grant whose quorum was won after an earlier grant returned got a token not
    /// larger than that grant's (what `fenced_redlock::fence` rules out).
    pub(crate) fence_regressed: bool,
    /// A grant returned a token not larger than one returned before it.
    pub(crate) return_order_broken: bool,
    /// Some extend succeeded (only so that a check can show extends happen).
    pub(crate) extended: bool,
    /// A client sent a write after its validity had ended (it looked before a pause).
    pub(crate) stale_write: bool,
    /// The largest token any client has chosen (returned or not).
    pub(crate) max_chosen: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    /// Real time; clients' clocks show it, nodes' clocks show it plus their `ahead`.
    pub(crate) now: u8,
    pub(crate) nodes: Vec<Node>,
    pub(crate) clients: Vec<Client>,
    /// `links[client][node]`.
    pub(crate) links: Vec<Vec<Link>>,
    pub(crate) resource: Resource,
    pub(crate) spent: Spent,
    pub(crate) ghost: Ghost,
    /// When each of `Config::extend_for`'s TTLs was first used, kept only for an `Auto`
    /// restart quarantine, whose length reads it. The clients share it, as clients made from
    /// one `Redlock` share the length (clients in other processes do not: the library's
    /// docs say to set the length by hand for them).
    pub(crate) first_used: Vec<Option<u8>>,
}

impl State {
    /// Whether `client` holds a lease it would call valid if it looked now.
    pub(crate) fn believes_valid(&self, client: usize) -> bool {
        matches!(self.clients[client].phase, Phase::Holding { valid_until, .. } if self.now < valid_until)
    }
}
