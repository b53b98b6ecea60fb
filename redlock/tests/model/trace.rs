//! Counterexamples as numbered lists of events a reader can follow.

use std::fmt::Write;

use stateright::{Model, Path};

use super::config::{Config, Estimate, Fence, Mode, Uptime};
use super::spec::{Action, LockModel};
use super::state::{Phase, Reply, Request, Server, State, Step, Vote};
use super::{client, quarantine};

fn who(client: usize) -> char {
    char::from(b'A' + u8::try_from(client).unwrap_or(25).min(25))
}

fn owner(client: usize, attempt: u8) -> String {
    format!("{}{}", who(client), attempt + 1)
}

fn holder(s: &State, node: usize) -> String {
    match s.nodes[node].key {
        Some(k) => owner(usize::from(k.owner.client), k.owner.attempt),
        None => "nobody".into(),
    }
}

/// What a client's decision did, told by comparing its phase before and after;
/// `renewed` is what a decided extend round gave (`None`: it failed).
fn decision(before: &Phase, after: &Phase, client: usize, now: u8, renewed: Option<u8>) -> String {
    match (before, after) {
        (Phase::Acquiring { attempt, .. }, Phase::Fencing { fence, .. }) => format!(
            " → quorum of SET NX: {} takes token {fence} (max counter read + 1) and sends FENCE_WRITE {fence} to every node",
            owner(client, *attempt)
        ),
        (
            Phase::Acquiring { attempt, .. },
            Phase::Holding {
                fence, valid_until, ..
            },
        ) => format!(
            " → a quorum is at counter {fence}: LEASE GRANTED to {} with token {fence} in one round, valid until t={valid_until}",
            owner(client, *attempt)
        ),
        (
            Phase::Fencing { attempt, .. },
            Phase::Holding {
                fence, valid_until, ..
            },
        ) => format!(
            " → quorum still ours: LEASE GRANTED to {} with token {fence}, valid until t={valid_until}",
            owner(client, *attempt)
        ),
        (Phase::Acquiring { attempt, .. } | Phase::Fencing { attempt, .. }, Phase::Idle) => {
            format!(
                " → attempt {} fails at t={now} (no quorum or no validity left); clean-up deletes sent",
                owner(client, *attempt)
            )
        }
        (
            Phase::Holding {
                extending: Some(_), ..
            },
            Phase::Holding {
                extending: None,
                valid_until,
                ..
            },
        ) => match renewed {
            Some(v) => format!(" → extended: valid until t={v}"),
            None => format!(" → extend FAILED; validity stays until t={valid_until}"),
        },
        _ => String::new(),
    }
}

fn request(client: usize, r: &Request) -> String {
    match r {
        Request::Acquire { attempt } => format!("{}'s SET NX", owner(client, *attempt)),
        Request::FenceWrite { attempt, fence } => {
            format!("{}'s FENCE_WRITE {fence}", owner(client, *attempt))
        }
        Request::Extend { attempt, ttl, .. } => {
            format!(
                "{}'s EXTEND (PEXPIRE to TTL {ttl})",
                owner(client, *attempt)
            )
        }
        Request::Delete { attempt } => format!("{}'s compare-and-delete", owner(client, *attempt)),
    }
}

fn reply(cfg: &Config, r: &Reply) -> String {
    match r {
        Reply::Acquire { fence: Some(f), .. } => match cfg.fence {
            Fence::TwoRounds => format!("granted, counter read {f}"),
            Fence::OneRound => format!("granted, counter incremented to {f}"),
        },
        Reply::Acquire { fence: None, .. } => "refused (held)".into(),
        Reply::FenceWrite { held, .. } => {
            format!("counter raised (was lower), key still ours: {held}")
        }
        Reply::Extend { ok: true, .. } => "ours, expiry reset".into(),
        Reply::Extend { ok: false, .. } => "not ours".into(),
    }
}

fn section(model: &LockModel, before: &State, after: &State, client: usize) -> String {
    let c = who(client);
    let (Phase::Holding { fence, step, .. }, next) =
        (&before.clients[client].phase, &after.clients[client].phase)
    else {
        return String::new();
    };
    let next_step = match next {
        Phase::Holding { step, .. } => Some(*step),
        _ => None,
    };
    match (step, next_step) {
        (Step::Start, Some(Step::Working { value, .. })) => match model.cfg.mode {
            Mode::WriteOnly => format!("client {c} reads the row: value {value} (unfenced)"),
            Mode::ClaimFirst => {
                format!("client {c} claims the row with token {fence}: value {value}")
            }
        },
        (Step::Start, _) => format!(
            "client {c}'s claim with token {fence} is REFUSED (row fence {}); it releases",
            before.resource.fence
        ),
        (Step::Working { .. }, Some(Step::Checked { .. })) => {
            format!("client {c} checks is_valid(): yes")
        }
        (Step::Working { .. }, _) => {
            format!("client {c} checks is_valid(): no — abandons the section and releases")
        }
        (Step::Checked { value }, _) => {
            let accepted = after.resource.writes > before.resource.writes;
            format!(
                "client {c} writes value {} with token {fence}: {} (row now value {}, fence {}); it releases",
                value + 1,
                if accepted { "ACCEPTED" } else { "REFUSED" },
                after.resource.value,
                after.resource.fence
            )
        }
    }
}

/// One event in words.
fn event(model: &LockModel, before: &State, action: Action, after: &State) -> String {
    let now = before.now;
    // What an extend round decided, with `vote` counted first if it is one.
    let renewed = |client: usize, vote: Option<(usize, Reply)>| {
        let Phase::Holding {
            extending: Some(round),
            ..
        } = &before.clients[client].phase
        else {
            return None;
        };
        let mut round = round.clone();
        if let Some((node, Reply::Extend { ok, .. })) = vote {
            round.votes[node] = match ok {
                true if quarantine::void(&model.cfg, before, client, node) => Vote::Void,
                true => Vote::Yes(0),
                false => Vote::No,
            };
        }
        client::renewed(&model.cfg, &round, now)
    };
    let decided = |client: usize, vote: Option<(usize, Reply)>| {
        decision(
            &before.clients[client].phase,
            &after.clients[client].phase,
            client,
            now,
            renewed(client, vote),
        )
    };
    match action {
        Action::Tick => format!("time passes: t={}", after.now),
        Action::Start { client } => {
            let attempt = after.clients[client].attempts_used - 1;
            format!(
                "client {} starts attempt {}: SET NX to every node, deadline t={}",
                who(client),
                owner(client, attempt),
                now + model.cfg.node_timeout
            )
        }
        Action::ToNode {
            client,
            node,
            index,
            answered,
        } => {
            let r = &before.links[client][node].to_node[index];
            // Run it again on a copy of the node to learn the answer it gave.
            let mut copy = before.nodes[node];
            let id = u8::try_from(client).unwrap_or(u8::MAX);
            let answer = copy.run(&model.cfg, id, *r, before.now);
            let outcome = match answer {
                Some(a @ Reply::Extend { ok: true, .. }) => format!(
                    "{}, key now expires at t={} on its clock",
                    reply(&model.cfg, &a),
                    copy.key.map_or(0, |k| k.expires)
                ),
                Some(a) => reply(&model.cfg, &a),
                None => format!("key now held by {}", holder(after, node)),
            };
            let quarantined = if quarantine::void(&model.cfg, before, client, node) {
                " [in quarantine (restart or clock jump): a yes counts as no]"
            } else {
                ""
            };
            format!(
                "node {} runs {}{}: {outcome}{quarantined} (counter {}){}",
                node + 1,
                request(client, r),
                if index > 0 { " (overtaking)" } else { "" },
                after.nodes[node].fence,
                if answered {
                    decided(client, answer.map(|a| (node, a)))
                } else if client::awaits(&before.clients[client].phase, node, r) {
                    " — the answer comes too late to count".into()
                } else {
                    String::new()
                }
            )
        }
        Action::Deadline { client } => format!(
            "client {}'s per-node deadlines pass{}",
            who(client),
            decided(client, None)
        ),
        Action::Section { client } => section(model, before, after, client),
        Action::Extend { client, ttl } => {
            let (
                Phase::Holding {
                    valid_until: old, ..
                },
                Phase::Holding {
                    valid_until: new,
                    extending,
                    ..
                },
            ) = (&before.clients[client].phase, &after.clients[client].phase)
            else {
                return String::new();
            };
            let call = if ttl == model.cfg.ttl {
                "extend()".to_string()
            } else {
                format!("extend_for({ttl})")
            };
            let c = who(client);
            if extending.is_none() {
                format!("client {c} calls {call}: LeaseLost, validity ended at t={old}")
            } else if new < old {
                format!(
                    "client {c} calls {call}: validity first SHRINKS to t={new} (start + TTL − drift), then EXTEND with TTL {ttl} goes to every node"
                )
            } else {
                format!(
                    "client {c} calls {call}: EXTEND with TTL {ttl} to every node; validity stays until t={old} meanwhile"
                )
            }
        }
        Action::Cancel { client } => {
            let until = match &after.clients[client].phase {
                Phase::Holding { valid_until, .. } => *valid_until,
                _ => 0,
            };
            format!(
                "client {} STOPS WAITING for its extend (drops the future): validity stays until t={until}; the EXTENDs already queued still run",
                who(client)
            )
        }
        Action::Lose {
            client,
            node,
            index,
        } => format!(
            "LOST: {} on its way to node {}",
            request(client, &before.links[client][node].to_node[index]),
            node + 1
        ),
        Action::Pause { client } => format!("client {} is PAUSED (GC, SIGSTOP)", who(client)),
        Action::Resume { client } => format!("client {} resumes", who(client)),
        Action::Restart {
            node,
            empty,
            uptime,
        } => format!(
            "node {} crashes and restarts {}; its connections drop what was in flight{}{}",
            node + 1,
            if empty {
                "EMPTY (lock key and fence counter forgotten)"
            } else {
                "with its data (AOF)"
            },
            match uptime {
                Uptime::True => String::new(),
                Uptime::Early => format!(
                    "; a wall-clock step forward makes its uptime say it started at t={}",
                    i16::from(now) - i16::from(model.cfg.ttl)
                ),
                Uptime::Unusable => {
                    "; a wall-clock step back makes its uptime negative (unusable)".into()
                }
            },
            restart_quarantine(model, before, after, node, uptime)
        ),
        Action::Jump { node } => format!(
            "node {}'s clock JUMPS forward by the TTL ({} ticks): its keys expire early{}",
            node + 1,
            model.cfg.ttl,
            match model.cfg.jump_guard {
                Some(_) => format!(
                    "; out of the vote (clock-jump guard) until t={}",
                    after.nodes[node].votes_from
                ),
                None => String::new(),
            }
        ),
    }
}

/// What each client made of a restart: the start it took and where its quarantine of the
/// node ends.
fn restart_quarantine(
    model: &LockModel,
    before: &State,
    after: &State,
    node: usize,
    uptime: Uptime,
) -> String {
    if model.cfg.quarantine.is_none() {
        return String::new();
    }
    let now = i16::from(before.now);
    let taken: Vec<String> = (0..after.clients.len())
        .map(|c| {
            let Some(q) = after.clients[c].servers[node].quarantine else {
                return "start unknown: no quarantine".into();
            };
            let until = quarantine::end(&model.cfg, after, c, node).unwrap_or(now);
            let estimate = model.cfg.quarantine.map(|q| q.estimate);
            let checked = estimate == Some(Estimate::Checked);
            let heard = before.clients[c].servers[node].heard;
            let why = match (uptime, checked, i16::from(q.since) < now, heard) {
                (Uptime::Early, false, _, Some(_)) if estimate == Some(Estimate::Seen) => {
                    "a restart it saw counts from now: ".into()
                }
                (Uptime::Early, false, ..) => "taken as given: ".into(),
                (Uptime::Early, true, true, Some(a)) => {
                    format!("believed (its last answer from the old server was sent at t={a}): ")
                }
                (Uptime::Early, true, true, None) => {
                    "believed (it never knew the old server): ".into()
                }
                (Uptime::Early, true, false, Some(Server::LATE)) => {
                    "refused (earlier than its last answer from the old server): ".into()
                }
                (Uptime::Early, true, false, Some(a)) => format!(
                    "refused (earlier than its last answer from the old server, sent at t={a}): "
                ),
                (Uptime::Unusable, ..) => "fails closed: ".into(),
                _ => String::new(),
            };
            format!("{why}start t={}, quarantine until t={until}", q.since)
        })
        .collect();
    if taken.windows(2).all(|w| w[0] == w[1]) {
        return format!("; restart quarantine: {}", taken[0]);
    }
    let each: Vec<String> = taken
        .iter()
        .enumerate()
        .map(|(c, t)| format!("client {} {t}", who(c)))
        .collect();
    format!("; {}", each.join("; "))
}

/// The path as a numbered list, one event per line with the real time it happened at.
pub(crate) fn render(model: &LockModel, path: &Path<State, Action>) -> String {
    let mut out = String::new();
    let mut n = 0;
    for (state, action) in path.clone().into_vec() {
        let Some(action) = action else { continue };
        let Some(after) = model.next_state(&state, action) else {
            continue;
        };
        n += 1;
        let _ = writeln!(
            out,
            "{n:>3}. t={} {}",
            state.now,
            event(model, &state, action, &after)
        );
    }
    out
}
