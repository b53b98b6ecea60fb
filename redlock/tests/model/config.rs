//! What one model check covers: the cluster's size, the clients, the time constants in
//! ticks, the resource's write rule and the faults that may strike.

/// How the resource accepts writes (the two statements of `fenced_redlock::pg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    /// Read unfenced, then `SET value, fence = t WHERE fence < t`.
    WriteOnly,
    /// `SET fence = t WHERE fence < t RETURNING value`, then `SET value WHERE fence = t`.
    ClaimFirst,
}

/// When a node may restart empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Amnesia {
    /// At any moment (the rig's `amnesia-restart` and `amnesia-split`).
    Any,
    /// Only as `fenced_redlock::fence` allows it: at most N − quorum nodes in all, and
    /// only once every token handed out so far has reached all N counters.
    AsDocsAllow,
}

/// How a token is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Fence {
    /// As implemented (`fenced_redlock::fence`): round one reads the counters, the token
    /// is the largest read + 1, round two writes it and counts a node only if its counter
    /// was below the token.
    TwoRounds,
    /// A design we did not ship, checked to show why: round one *increments* the counter
    /// where `SET NX` succeeded and returns the new value; when a quorum of the yes votes
    /// carry the largest value, that value is the token and there is no round two (one
    /// round trip instead of two). Otherwise round two as above, with the largest value
    /// + 1.
    OneRound,
}

/// What a lease's validity becomes while an extend is under way, and after one that
/// fails or is given up (a successful extend always sets `start + ttl − drift`, which is
/// earlier than before when `ttl` shortens the keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ExtendRule {
    /// The rule before issue 23: validity is left alone until the round succeeds, so a
    /// failed or cancelled extend keeps it. Unsafe once an extend can shorten the keys:
    /// its PEXPIREs may have reached a quorum, whose keys then end before the validity.
    OldValidityStands,
    /// The fix: before any PEXPIRE is sent, `valid_until = min(valid_until, start + ttl −
    /// drift)`, so whatever subset of nodes the round reaches, no key it shortens outlives
    /// what the holder believes; a failed or cancelled extend keeps the shrunk value.
    ShrinkBeforeRound,
}

/// What a restarted node's `INFO server` says about its start (issue 48). Redis and Valkey
/// count `uptime_in_seconds` on the wall clock, so a wall-clock step after the restart
/// moves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Uptime {
    /// The time since the restart.
    True,
    /// As if the server had started a TTL earlier: its wall clock stepped forward by a TTL
    /// after the restart (NTP correcting a clock that booted behind). A larger step moves
    /// the estimate further back: a quarantine over sooner where it is believed, and one
    /// `Estimate::Checked` refuses more readily. A step of up to two ticks stays within the
    /// margin the length leaves over a lease (TTL + drift against TTL − drift), which only
    /// the model's coarse drift makes that wide: the step of a TTL stands for every step
    /// longer than twice the library's drift allowance.
    Early,
    /// Negative (the wall clock stepped back by more than the time since the restart),
    /// missing or unparsable.
    Unusable,
}

/// How a client turns a restarted node's `INFO server` into the node's latest possible
/// start, from which its restart quarantine counts. `T` is the new connection's reply
/// (here: the restart itself, the earliest a client can reconnect), `E = T − uptime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Estimate {
    /// Before issue 48: `E` as given; an unusable uptime leaves the start unknown, and the
    /// node votes at once.
    AsGiven,
    /// The fix: an unusable uptime counts as a start at `T` (fail closed). For a restart
    /// the client saw (it knew the old `run_id`), `E` counts only if it is no earlier than
    /// `A`, the latest send time of a request the old server answered; an earlier `E` is
    /// provably wrong and `T` counts. A client that never knew the old server has only `E`.
    /// The review's proposal; the model refutes it: a client idle since the old server last
    /// answered believes a step shorter than its idleness
    /// (`n3_quarantine_checked_believes_a_step_shorter_than_the_time_since_the_last_answer`).
    Checked,
    /// The fix the library took: an unusable uptime, and any restart the client saw (it
    /// knew the old `run_id`), count as a start at `T`; a client that never knew the old
    /// server has only `E`.
    Seen,
}

/// How long the restart quarantine lasts after a node's estimated start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Length {
    /// A fixed number of ticks (`RestartQuarantine::For`, or `Auto` while every TTL in use
    /// is the builder's).
    Ticks(u8),
    /// `Auto` before issue 48: the longest TTL + drift used so far, read at each vote, for
    /// every node (one longer TTL lengthens every quarantine for good).
    LongestSoFar,
    /// `Auto`, the fix: the longest TTL + drift in use at or before the node's estimated
    /// start. The builder's TTL counts from forever, a longer one from when it is first used
    /// (noted before anything is sent with it).
    LongestAtStart,
}

/// The restart quarantine (`fenced_redlock::RestartQuarantine`): for `length` after a
/// node's latest possible start, as each client estimates it, that client counts the
/// node's yes as no, and cleans its key up as a failed attempt's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Quarantine {
    pub(crate) length: Length,
    pub(crate) estimate: Estimate,
}

impl Quarantine {
    /// `Auto` as the library had it before issue 48.
    pub(crate) const BEFORE_48: Quarantine = Quarantine {
        length: Length::LongestSoFar,
        estimate: Estimate::AsGiven,
    };
    /// `Auto` with issue 48's fix.
    pub(crate) const FIX_48: Quarantine = Quarantine {
        length: Length::LongestAtStart,
        estimate: Estimate::Seen,
    };
    /// `Auto` with the review's proposed estimate (`Estimate::Checked`), refuted.
    pub(crate) const CHECKED_48: Quarantine = Quarantine {
        length: Length::LongestAtStart,
        estimate: Estimate::Checked,
    };
}

/// When a client first connects to the nodes, which decides whether it knew a node's
/// server before that server restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Connect {
    /// At its first attempt (connections are made by the first call): a restart before it
    /// is one the client never saw.
    FirstCall,
    /// Before the first attempt (a long-running client): each connection's `INFO` was
    /// answered at t=0, and every restart is one the client sees.
    Early,
}

/// The faults one check lets loose. Each is a nondeterministic action of the model, so
/// the checker tries it at every point of every interleaving, up to its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Faults {
    /// Any message may vanish (a reset connection: the command may or may not have run).
    pub(crate) loss: bool,
    /// Messages on one connection may overtake each other (TCP never does this; it stands
    /// for a client that reconnects and sends on a new connection).
    pub(crate) reorder: bool,
    /// How many times a client may be frozen (GC, SIGSTOP), for as long as time runs.
    pub(crate) pauses: u8,
    /// How many node restarts that keep their data (AOF with `appendfsync always`).
    pub(crate) restarts_keep: u8,
    /// How many node restarts that come back empty, and under which rule.
    pub(crate) restarts_empty: u8,
    /// The rule for empty restarts.
    pub(crate) amnesia: Amnesia,
    /// How many times a node's clock may jump forward by a whole TTL.
    pub(crate) clock_jumps: u8,
    /// What a restarted node's uptime may say (each restart picks one, the same for every
    /// client: the wall-clock step comes before any client reconnects).
    pub(crate) uptimes: &'static [Uptime],
}

impl Faults {
    /// No fault: messages are still delayed arbitrarily (within the time bound), and
    /// server clocks still run fast within the drift allowance.
    pub(crate) const NONE: Faults = Faults {
        loss: false,
        reorder: false,
        pauses: 0,
        restarts_keep: 0,
        restarts_empty: 0,
        amnesia: Amnesia::Any,
        clock_jumps: 0,
        uptimes: &[Uptime::True],
    };
}

/// One model: sizes, time constants (in ticks) and faults.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    /// Number of Redis primaries.
    pub(crate) nodes: usize,
    /// Number of clients contending for the one resource.
    pub(crate) clients: usize,
    /// Acquire attempts each client makes (each one a fresh owner token).
    pub(crate) attempts: u8,
    /// Lock TTL.
    pub(crate) ttl: u8,
    /// Drift allowance subtracted from validity; server clocks may run ahead this much.
    pub(crate) drift: u8,
    /// Per-node deadline of every round.
    pub(crate) node_timeout: u8,
    /// Ticks of work between reading (or claiming) and writing.
    pub(crate) work: u8,
    /// How many extends a holder may start on one lease while working.
    pub(crate) extends: u8,
    /// TTLs an extend may carry besides `ttl` (`extend_for(t)`); each extend picks `ttl`
    /// (`extend()`, the renewer) or one of these. Keys it reaches live `t − drift`.
    pub(crate) extend_for: &'static [u8],
    /// Whether a holder may stop waiting for an extend at any moment (drops its future,
    /// or a timeout around it fires); its PEXPIREs already queued still run.
    pub(crate) cancel_extends: bool,
    /// What happens to validity around an extend.
    pub(crate) extend_rule: ExtendRule,
    /// Time stops here; every behaviour shorter than this is explored.
    pub(crate) max_time: u8,
    /// How the resource accepts writes.
    pub(crate) mode: Mode,
    /// What may go wrong.
    pub(crate) faults: Faults,
    /// How a token is made.
    pub(crate) fence: Fence,
    /// The restart quarantine, after a restart with or without data (the client cannot
    /// tell). `None`: off.
    pub(crate) quarantine: Option<Quarantine>,
    /// When the clients connect.
    pub(crate) connect: Connect,
    /// The clock-jump guard (`Builder::clock_jump_guard`): for this many ticks after its
    /// clock jumps, a node's yes counts as no. The model starts the window at the jump
    /// itself; the library starts it when a client first sees the jump (the `TIME` behind
    /// its next vote there, a vote it voids too), which is later: a longer window, so
    /// what holds here holds there — for a client that read the node before the jump
    /// (every client here talks to every node from the start). `None`: off.
    pub(crate) jump_guard: Option<u8>,
}

impl Config {
    /// `nodes` primaries, two clients with one attempt each, TTL 3, drift 1, deadline 1,
    /// one tick of work, no extends, eight ticks of time, claim-first, no faults,
    /// two-round tokens, no restart quarantine, clients connecting at their first attempt.
    pub(crate) fn new(nodes: usize) -> Config {
        Config {
            nodes,
            clients: 2,
            attempts: 1,
            ttl: 3,
            drift: 1,
            node_timeout: 1,
            work: 1,
            extends: 0,
            extend_for: &[],
            cancel_extends: false,
            extend_rule: ExtendRule::ShrinkBeforeRound,
            max_time: 8,
            mode: Mode::ClaimFirst,
            faults: Faults::NONE,
            fence: Fence::TwoRounds,
            quarantine: None,
            connect: Connect::FirstCall,
            jump_guard: None,
        }
    }

    /// The same model with the clock-jump guard keeping a jumped node out for `ticks`.
    pub(crate) fn jump_guard(mut self, ticks: u8) -> Config {
        self.jump_guard = Some(ticks);
        self
    }

    /// The same model with a restart quarantine of `ticks` from a start taken as given.
    pub(crate) fn quarantine(self, ticks: u8) -> Config {
        self.restart_quarantine(Quarantine {
            length: Length::Ticks(ticks),
            estimate: Estimate::AsGiven,
        })
    }

    /// The same model with this restart quarantine.
    pub(crate) fn restart_quarantine(mut self, quarantine: Quarantine) -> Config {
        self.quarantine = Some(quarantine);
        self
    }

    /// The same model with the clients connecting at another time.
    pub(crate) fn connect(mut self, connect: Connect) -> Config {
        self.connect = connect;
        self
    }

    /// Votes that make a majority, as `fenced_redlock::quorum`.
    pub(crate) fn quorum(&self) -> usize {
        fenced_redlock::quorum(self.nodes)
    }

    /// The same model with another write rule.
    pub(crate) fn mode(mut self, mode: Mode) -> Config {
        self.mode = mode;
        self
    }

    /// The same model with tokens made another way.
    pub(crate) fn fence(mut self, fence: Fence) -> Config {
        self.fence = fence;
        self
    }

    /// The same model with another rule for validity around an extend.
    pub(crate) fn extend_rule(mut self, rule: ExtendRule) -> Config {
        self.extend_rule = rule;
        self
    }

    /// The TTLs one extend may carry: the client's own first, then `extend_for`'s.
    pub(crate) fn extend_ttls(&self) -> impl Iterator<Item = u8> + use<> {
        std::iter::once(self.ttl).chain(self.extend_for.iter().copied())
    }

    /// The same model with these faults.
    pub(crate) fn faults(mut self, faults: Faults) -> Config {
        self.faults = faults;
        self
    }
}
