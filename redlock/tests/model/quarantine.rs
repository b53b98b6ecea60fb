//! The restart quarantine as each client keeps it (`quarantine.rs` in the library): the
//! start it estimates for a restarted node from `INFO server`, the length that applies
//! from there, and whether the node's yes counts.

use super::config::{Config, Connect, Estimate, Length, Uptime};
use super::state::{Quarantined, Server, Spent, State};

/// `ticks` as a signed time, for starts an uptime places before t=0.
fn signed(ticks: u8) -> i16 {
    i16::from(ticks)
}

/// The node's latest possible start as a client takes it, `None` for "unknown" (no
/// quarantine). The client reconnects at the restart, the earliest it can (a later
/// reconnection only moves `T` and with it the fail-closed start later); `heard` is `A`,
/// `None` if the client never knew the server before this one.
fn start(
    cfg: &Config,
    estimate: Estimate,
    uptime: Uptime,
    heard: Option<u8>,
    now: u8,
) -> Option<i16> {
    let t = signed(now);
    let e = match uptime {
        Uptime::True => Some(t),
        Uptime::Early => Some(t - signed(cfg.ttl)),
        Uptime::Unusable => None,
    };
    match estimate {
        Estimate::AsGiven => e,
        // `E ≥ A` counts ties as consistent: within a tick the two may come in either
        // order, and taking `E` is the shorter quarantine.
        Estimate::Checked => Some(match (e, heard) {
            (Some(e), Some(a)) if e >= signed(a) => e,
            (Some(e), None) => e,
            _ => t,
        }),
        Estimate::Seen => Some(match (e, heard) {
            (Some(e), None) => e,
            _ => t,
        }),
    }
}

/// The longest TTL + drift in use: the builder's, and each longer one first used before
/// `by` (`None`: so far, whenever that was).
fn longest(cfg: &Config, s: &State, by: Option<i16>) -> u8 {
    cfg.extend_for
        .iter()
        .zip(&s.first_used)
        .filter(|(_, used)| match (used, by) {
            (Some(_), None) => true,
            (Some(u), Some(by)) => signed(*u) < by,
            (None, _) => false,
        })
        .map(|(ttl, _)| *ttl)
        .fold(cfg.ttl, u8::max)
        .saturating_add(cfg.drift)
}

/// The length that applies from a start at `since`, fixed when the estimate is made.
/// Everything noted so far came before a start at the restart itself (the interleaving
/// orders them); a start an uptime placed in an earlier tick may have come before or
/// after what was noted in that tick, and the shorter length is taken.
fn length_from(cfg: &Config, s: &State, since: i16) -> u8 {
    match cfg.quarantine.map(|q| q.length) {
        Some(Length::Ticks(ticks)) => ticks,
        Some(Length::LongestAtStart) if since < signed(s.now) => longest(cfg, s, Some(since)),
        Some(Length::LongestAtStart) => longest(cfg, s, None),
        Some(Length::LongestSoFar) | None => cfg.ttl.saturating_add(cfg.drift),
    }
}

/// When the quarantine ends, read at `s.now`.
fn ends(cfg: &Config, s: &State, q: Quarantined) -> i16 {
    let length = match cfg.quarantine.map(|q| q.length) {
        Some(Length::LongestSoFar) => longest(cfg, s, None),
        _ => q.length,
    };
    i16::from(q.since) + signed(length)
}

/// When `client`'s restart quarantine of `node` ends, as read now; `None`: there is none.
pub(crate) fn end(cfg: &Config, s: &State, client: usize, node: usize) -> Option<i16> {
    let q = s.clients[client].servers[node].quarantine?;
    Some(ends(cfg, s, q))
}

/// Whether `client` counts `node`'s yes as no now: the node is in that client's restart
/// quarantine, or in its clock-jump guard.
pub(crate) fn void(cfg: &Config, s: &State, client: usize, node: usize) -> bool {
    let restarted = end(cfg, s, client, node).is_some_and(|end| signed(s.now) < end);
    restarted || s.nodes[node].jump_guarded(s.now)
}

/// `A` as kept: a send time no early start within the time bound can reach (a restart at
/// `max_time` whose uptime says a TTL earlier) is refused by every estimate to come, and is
/// kept as [`Server::LATE`], so that equal situations are equal states.
fn kept(cfg: &Config, sent: u8) -> u8 {
    if sent.saturating_add(cfg.ttl) <= cfg.max_time {
        sent
    } else {
        Server::LATE
    }
}

/// Whether a client's `A` is kept: `Estimate::Checked` will read it at a restart to come.
fn tracks_answers(cfg: &Config, spent: &Spent) -> bool {
    cfg.quarantine
        .is_some_and(|q| q.estimate == Estimate::Checked)
        && knows_servers(cfg, spent)
}

/// Whether it matters that a client knew a node's server: a restart may still come, and
/// the estimate tells a restart the client saw from one it did not.
fn knows_servers(cfg: &Config, spent: &Spent) -> bool {
    let f = &cfg.faults;
    cfg.quarantine
        .is_some_and(|q| matches!(q.estimate, Estimate::Checked | Estimate::Seen))
        && (spent.restarts_keep < f.restarts_keep || spent.restarts_empty < f.restarts_empty)
}

/// What a client keeps of an answer sent at `sent`: its time where `Estimate::Checked`
/// reads it, else only that there was one (so that equal situations are equal states).
fn mark(cfg: &Config, sent: u8) -> u8 {
    if cfg
        .quarantine
        .is_some_and(|q| q.estimate == Estimate::Checked)
    {
        kept(cfg, sent)
    } else {
        0
    }
}

/// The clients' knowledge of the servers before anything happens.
pub(crate) fn servers(cfg: &Config) -> Vec<Server> {
    let heard = match cfg.connect {
        Connect::Early => Some(0),
        Connect::FirstCall => None,
    };
    vec![
        Server {
            heard: heard
                .filter(|_| knows_servers(cfg, &Spent::default()))
                .map(|a| mark(cfg, a)),
            quarantine: None,
        };
        cfg.nodes
    ]
}

/// `client`'s first attempt makes its connections: each `INFO` is answered now.
pub(crate) fn connect(cfg: &Config, s: &mut State, client: usize) {
    if cfg.connect == Connect::FirstCall && knows_servers(cfg, &s.spent) {
        let now = s.now;
        for server in &mut s.clients[client].servers {
            server.heard = Some(mark(cfg, now));
        }
    }
}

/// `node`'s server answered `client`'s request sent at `sent`, in time to count.
pub(crate) fn answered(cfg: &Config, s: &mut State, client: usize, node: usize, sent: u8) {
    if tracks_answers(cfg, &s.spent) {
        let heard = &mut s.clients[client].servers[node].heard;
        *heard = (*heard).max(Some(kept(cfg, sent)));
    }
}

/// Notes the first use of a longer TTL, before anything is sent with it.
pub(crate) fn using(cfg: &Config, s: &mut State, ttl: u8) {
    let auto = matches!(
        cfg.quarantine.map(|q| q.length),
        Some(Length::LongestSoFar | Length::LongestAtStart)
    );
    let now = s.now;
    if let (true, Some(i)) = (auto, cfg.extend_for.iter().position(|t| *t == ttl)) {
        s.first_used[i].get_or_insert(now);
    }
}

/// `node` restarted now with this uptime: every client reconnects and estimates its start.
/// A client that had not connected yet learns the new server when it does, and the same
/// estimate holds then (`T` later only helps).
pub(crate) fn restarted(cfg: &Config, s: &mut State, node: usize, uptime: Uptime) {
    let Some(quarantine) = cfg.quarantine else {
        return;
    };
    let now = s.now;
    for client in 0..s.clients.len() {
        let server = s.clients[client].servers[node];
        let since = start(cfg, quarantine.estimate, uptime, server.heard, now);
        let quarantine = since.map(|since| Quarantined {
            since: i8::try_from(since).unwrap_or(i8::MIN),
            length: length_from(cfg, s, since),
        });
        s.clients[client].servers[node] = Server {
            // The new connection's `INFO` was answered now.
            heard: server.heard.map(|_| mark(cfg, now)),
            quarantine,
        };
    }
    if !knows_servers(cfg, &s.spent) {
        for c in &mut s.clients {
            for server in &mut c.servers {
                server.heard = None;
            }
        }
    }
}

/// Forgets quarantines that are over for good, so that equal situations are equal states.
/// Under `Length::LongestSoFar` one can come back while a longer TTL may still be used.
pub(crate) fn expire(cfg: &Config, s: &mut State) {
    let longest_possible = cfg
        .extend_ttls()
        .fold(cfg.ttl, u8::max)
        .saturating_add(cfg.drift);
    let now = signed(s.now);
    for client in 0..s.clients.len() {
        for node in 0..s.nodes.len() {
            let Some(q) = s.clients[client].servers[node].quarantine else {
                continue;
            };
            let last = match cfg.quarantine.map(|q| q.length) {
                Some(Length::LongestSoFar) => i16::from(q.since) + signed(longest_possible),
                _ => ends(cfg, s, q),
            };
            if now >= last {
                s.clients[client].servers[node].quarantine = None;
            }
        }
    }
}
