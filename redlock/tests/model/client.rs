//! A client, step by step as `client.rs` (acquire), `quorum.rs` (fan-out with early
//! decision), `lease.rs` (extend, release) and the chaos run's critical section do it.

use super::config::{Config, ExtendRule, Fence, Mode};
use super::quarantine;
use super::state::{Phase, Reply, Request, Round, RoundKind, State, Step, Vote};

impl Round {
    fn new(kind: RoundKind, started: u8, ttl: u8, nodes: usize) -> Round {
        Round {
            kind,
            started,
            ttl,
            votes: vec![Vote::Pending; nodes],
        }
    }

    /// `Some(true)` once a quorum said yes, `Some(false)` once one is out of reach, as
    /// `fan_out` with `Until::Decided` stops waiting. After the deadline a missing answer
    /// is a failure.
    pub(crate) fn decision(&self, cfg: &Config, now: u8) -> Option<bool> {
        let yes = self
            .votes
            .iter()
            .filter(|v| matches!(v, Vote::Yes(_)))
            .count();
        let past_deadline = now >= self.deadline(cfg);
        let failed = self
            .votes
            .iter()
            .filter(|v| {
                matches!(v, Vote::No | Vote::Void) || (past_deadline && **v == Vote::Pending)
            })
            .count();
        if yes >= cfg.quorum() {
            Some(true)
        } else if cfg.nodes - failed < cfg.quorum() {
            Some(false)
        } else {
            None
        }
    }

    /// When the per-node deadlines run out (all calls of a round start together).
    pub(crate) fn deadline(&self, cfg: &Config) -> u8 {
        self.started.saturating_add(cfg.node_timeout)
    }
}

/// `ttl − elapsed − drift > 0`: the lease's end on the client clock, or `None`. The drift
/// allowance is one number of ticks for every TTL (the real one grows with the TTL by 1 %
/// and is far below a tick for each TTL the model uses).
fn valid_until(cfg: &Config, ttl: u8, started: u8, now: u8) -> Option<u8> {
    let elapsed = now.saturating_sub(started);
    (ttl > elapsed.saturating_add(cfg.drift)).then(|| started + ttl - cfg.drift)
}

/// The validity a decided extend round gives the lease, `None` if it failed (no quorum,
/// or no validity left).
pub(crate) fn renewed(cfg: &Config, round: &Round, now: u8) -> Option<u8> {
    if round.decision(cfg, now) == Some(true) {
        valid_until(cfg, round.ttl, round.started, now)
    } else {
        None
    }
}

fn send_all(state: &mut State, client: usize, request: impl Fn(usize) -> Option<Request>) {
    for (node, link) in state.links[client].iter_mut().enumerate() {
        if let Some(r) = request(node) {
            link.to_node.push(r);
        }
    }
}

/// The client's round in progress, if any.
pub(crate) fn round_mut(phase: &mut Phase) -> Option<&mut Round> {
    match phase {
        Phase::Acquiring { round, .. } | Phase::Fencing { round, .. } => Some(round),
        Phase::Holding {
            extending: Some(round),
            ..
        } => Some(round),
        _ => None,
    }
}

/// The client's round in progress, if any.
pub(crate) fn round(phase: &Phase) -> Option<&Round> {
    match phase {
        Phase::Acquiring { round, .. } | Phase::Fencing { round, .. } => Some(round),
        Phase::Holding {
            extending: Some(round),
            ..
        } => Some(round),
        _ => None,
    }
}

/// The attempt whose token the client is using now.
fn current_attempt(phase: &Phase) -> Option<u8> {
    match phase {
        Phase::Idle => None,
        Phase::Acquiring { attempt, .. }
        | Phase::Fencing { attempt, .. }
        | Phase::Holding { attempt, .. } => Some(*attempt),
    }
}

/// `attempt()`: a fresh token, `SET NX` (with the fence read) to every node at once.
pub(crate) fn start(cfg: &Config, state: &mut State, client: usize) {
    let c = &mut state.clients[client];
    let attempt = c.attempts_used;
    c.attempts_used += 1;
    c.phase = Phase::Acquiring {
        attempt,
        round: Round::new(RoundKind::Acquire, state.now, cfg.ttl, cfg.nodes),
    };
    send_all(state, client, |_| Some(Request::Acquire { attempt }));
}

/// Whether the client is waiting for `node`'s answer to `request` now.
pub(crate) fn awaits(phase: &Phase, node: usize, request: &Request) -> bool {
    let (kind, of) = match *request {
        Request::Acquire { attempt } => (RoundKind::Acquire, attempt),
        Request::FenceWrite { attempt, .. } => (RoundKind::FenceWrite, attempt),
        Request::Extend { attempt, nth, .. } => (RoundKind::Extend { nth }, attempt),
        Request::Delete { .. } => return false,
    };
    round(phase).is_some_and(|r| r.kind == kind && r.votes[node] == Vote::Pending)
        && current_attempt(phase) == Some(of)
}

/// A reply reaches the client. Answers to anything but the round in progress are
/// consumed and ignored, as the background task of `fan_out` does. A yes from a node in
/// the client's restart quarantine or in its clock-jump guard (`void`) counts as
/// [`Vote::Void`], as `Node::vote` does.
pub(crate) fn receive(
    cfg: &Config,
    state: &mut State,
    client: usize,
    node: usize,
    reply: Reply,
    void: bool,
) {
    let attempt = current_attempt(&state.clients[client].phase);
    let Some(round) = round_mut(&mut state.clients[client].phase) else {
        return;
    };
    let (kind, of, vote) = match reply {
        Reply::Acquire { attempt, fence } => (
            RoundKind::Acquire,
            attempt,
            fence.map_or(Vote::No, Vote::Yes),
        ),
        Reply::FenceWrite { attempt, held } => (
            RoundKind::FenceWrite,
            attempt,
            if held { Vote::Yes(0) } else { Vote::No },
        ),
        Reply::Extend { attempt, nth, ok } => (
            RoundKind::Extend { nth },
            attempt,
            if ok { Vote::Yes(0) } else { Vote::No },
        ),
    };
    if round.kind != kind || attempt != Some(of) || round.votes[node] != Vote::Pending {
        return;
    }
    round.votes[node] = match vote {
        Vote::Yes(_) if void => Vote::Void,
        vote => vote,
    };
    if round.decision(cfg, state.now).is_some() {
        decide(cfg, state, client);
    }
}

/// Acts on a decided round: the code after `fan_out(..).await` returns.
pub(crate) fn decide(cfg: &Config, state: &mut State, client: usize) {
    let now = state.now;
    let phase = state.clients[client].phase.clone();
    match phase {
        Phase::Acquiring { attempt, round } => {
            let started = round.started;
            if round.decision(cfg, now) != Some(true) {
                return clean_up(state, client, attempt, &round.votes);
            }
            // `FenceToken::next_after` over the yes votes counted before the decision.
            let read = || {
                round.votes.iter().filter_map(|v| match v {
                    Vote::Yes(f) => Some(*f),
                    _ => None,
                })
            };
            let max = read().max().unwrap_or(0);
            if cfg.fence == Fence::OneRound && read().filter(|f| *f == max).count() >= cfg.quorum()
            {
                // A quorum's counters are at `max` already: no round two.
                let floor = state.ghost.max_granted;
                state.ghost.max_chosen = state.ghost.max_chosen.max(max);
                return match valid_until(cfg, cfg.ttl, started, now) {
                    Some(until) => grant(state, client, attempt, max, floor, until),
                    None => clean_up(state, client, attempt, &round.votes),
                };
            }
            let fence = max + 1;
            state.ghost.max_chosen = state.ghost.max_chosen.max(fence);
            state.clients[client].phase = Phase::Fencing {
                attempt,
                started,
                floor: state.ghost.max_granted,
                fence,
                first: round.votes,
                round: Round::new(RoundKind::FenceWrite, now, cfg.ttl, cfg.nodes),
            };
            // Round two goes to every node, granted or not.
            send_all(state, client, |_| {
                Some(Request::FenceWrite { attempt, fence })
            });
        }
        Phase::Fencing {
            attempt,
            started,
            floor,
            fence,
            first,
            round,
        } => {
            let until = valid_until(cfg, cfg.ttl, started, now);
            match (round.decision(cfg, now), until) {
                (Some(true), Some(valid_until)) => {
                    grant(state, client, attempt, fence, floor, valid_until);
                }
                // Quorum lost in round two, or no validity left: clean up by round one.
                _ => clean_up(state, client, attempt, &first),
            }
        }
        Phase::Holding {
            extending: Some(round),
            ..
        } => {
            let renewed = renewed(cfg, &round, now);
            if let Phase::Holding {
                valid_until,
                extending,
                ..
            } = &mut state.clients[client].phase
            {
                // Success sets validity from this round, earlier than before if its TTL
                // is shorter. A failed extend deletes nothing and leaves validity as it
                // was when the round was sent (shrunk first under the fix).
                if let Some(v) = renewed {
                    *valid_until = v;
                    state.ghost.extended = true;
                }
                *extending = None;
            }
        }
        Phase::Holding { .. } | Phase::Idle => {}
    }
}

/// The lease is returned with `fence`; `floor` is the largest token returned before its
/// quorum was won.
fn grant(state: &mut State, client: usize, attempt: u8, fence: u8, floor: u8, valid_until: u8) {
    let g = &mut state.ghost;
    if g.grants > 0 && fence <= floor {
        g.fence_regressed = true;
    }
    if g.grants > 0 && fence <= g.max_granted {
        g.return_order_broken = true;
    }
    g.max_granted = g.max_granted.max(fence);
    g.grants += 1;
    state.clients[client].phase = Phase::Holding {
        attempt,
        fence,
        valid_until,
        step: Step::Start,
        extending: None,
        extends: 0,
    };
}

/// `cleanup()`: delete our key wherever it may be — every node but those that refused.
fn clean_up(state: &mut State, client: usize, attempt: u8, first: &[Vote]) {
    send_all(state, client, |n| {
        (first[n] != Vote::No).then_some(Request::Delete { attempt })
    });
    state.clients[client].phase = Phase::Idle;
}

/// `release()`: compare-and-delete on every node. Its replies only fill the report.
fn release(state: &mut State, client: usize, attempt: u8) {
    send_all(state, client, |_| Some(Request::Delete { attempt }));
    state.clients[client].phase = Phase::Idle;
}

/// `extend()` (`ttl` is the client's) or `extend_for(ttl)`: LeaseLost without a round when
/// validity is gone, else compare-and-PEXPIRE to `ttl` everywhere.
pub(crate) fn extend(cfg: &Config, state: &mut State, client: usize, ttl: u8) {
    let now = state.now;
    let Phase::Holding {
        attempt,
        valid_until,
        extending,
        extends,
        ..
    } = &mut state.clients[client].phase
    else {
        return;
    };
    let nth = *extends;
    *extends += 1;
    if now >= *valid_until {
        return;
    }
    if cfg.extend_rule == ExtendRule::ShrinkBeforeRound {
        // `start` is taken before any PEXPIRE is sent: a key this round shortens lives
        // at least until `start + ttl − drift`, whichever nodes it reaches.
        let ends = now.saturating_add(ttl).saturating_sub(cfg.drift);
        *valid_until = (*valid_until).min(ends);
    }
    *extending = Some(Round::new(RoundKind::Extend { nth }, now, ttl, cfg.nodes));
    let attempt = *attempt;
    quarantine::using(cfg, state, ttl);
    send_all(state, client, |_| {
        Some(Request::Extend { attempt, nth, ttl })
    });
}

/// The caller stops waiting for its extend (drops the future, or a timeout around it
/// fires): validity stays as it was when the round was sent; the PEXPIREs already queued
/// still run.
pub(crate) fn cancel_extend(state: &mut State, client: usize) {
    if let Phase::Holding { extending, .. } = &mut state.clients[client].phase {
        *extending = None;
    }
}

/// The section's next step, which the client takes at once (no time passes) unless it
/// is paused: read or claim; after the work, look at `is_valid()`; write; release.
pub(crate) fn section(cfg: &Config, state: &mut State, client: usize) {
    let now = state.now;
    let Phase::Holding {
        attempt,
        fence,
        valid_until,
        step,
        ..
    } = state.clients[client].phase.clone()
    else {
        return;
    };
    let next = match step {
        Step::Start => {
            let read = match cfg.mode {
                Mode::WriteOnly => Some(state.resource.read()),
                Mode::ClaimFirst => state.resource.claim(fence),
            };
            read.map(|value| Step::Working {
                value,
                until: now + cfg.work,
            })
        }
        Step::Working { value, .. } => (now < valid_until).then_some(Step::Checked { value }),
        Step::Checked { value } => {
            if now >= valid_until {
                state.ghost.stale_write = true;
            }
            // Accepted or refused, the section is over.
            match cfg.mode {
                Mode::WriteOnly => state.resource.write_only(fence, value + 1),
                Mode::ClaimFirst => state.resource.write_claimed(fence, value + 1),
            };
            None
        }
    };
    match next {
        Some(s) => {
            if let Phase::Holding { step, .. } = &mut state.clients[client].phase {
                *step = s;
            }
        }
        None => release(state, client, attempt),
    }
}
