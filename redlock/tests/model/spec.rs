//! The checked model: every action the system or the faults can take in a state, what
//! each does, and the properties.

use stateright::{Model, Property};

use super::config::{Amnesia, Config, Uptime};
use super::state::{Client, Ghost, Link, Node, Phase, Resource, Spent, State, Step};
use super::{client, quarantine};

/// One thing that can happen next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Real time advances one tick on every clock. Only when no running client has
    /// something to do at once: local steps take no time unless the client is paused.
    Tick,
    /// A client begins an acquire attempt.
    Start {
        client: usize,
    },
    /// The `index`th command on the link reaches the node (index 0 unless reordering) and
    /// runs; its answer counts for the client's round if `answered`, else it comes too
    /// late to count.
    ToNode {
        client: usize,
        node: usize,
        index: usize,
        answered: bool,
    },
    /// A round's deadline has passed: decide with what has been answered.
    Deadline {
        client: usize,
    },
    /// The critical section's next step.
    Section {
        client: usize,
    },
    /// The holder extends its lease with this TTL (`extend()` or `extend_for(ttl)`).
    Extend {
        client: usize,
        ttl: u8,
    },
    /// The holder stops waiting for its extend.
    Cancel {
        client: usize,
    },
    /// A command vanishes before it runs.
    Lose {
        client: usize,
        node: usize,
        index: usize,
    },
    Pause {
        client: usize,
    },
    Resume {
        client: usize,
    },
    /// A node crashes and restarts at once, with its data or empty; its connections drop
    /// everything in flight. Its `INFO server` reports `uptime` to every client.
    Restart {
        node: usize,
        empty: bool,
        uptime: Uptime,
    },
    /// A node's clock jumps forward by a whole TTL.
    Jump {
        node: usize,
    },
}

/// The lock, its clients and the resource under one configuration.
#[derive(Debug, Clone)]
pub(crate) struct LockModel {
    pub(crate) cfg: Config,
}

pub(crate) const VALID_EXCLUSIVE: &str = "valid leases are exclusive";
pub(crate) const SETTLED_EXCLUSIVE: &str =
    "valid leases are exclusive, counting only holders with no extend in flight";
pub(crate) const WRITES_IN_VALIDITY: &str = "writes are sent within validity";
pub(crate) const FENCES_GROW: &str = "a quorum won after a grant returned gets a larger token";
pub(crate) const RETURN_ORDER: &str = "tokens grow in the order grants return";
pub(crate) const NO_LOST_UPDATE: &str = "no lost update";
pub(crate) const SOME_GRANT: &str = "a lease is granted";
pub(crate) const TWO_GRANTS: &str = "two leases are granted";
pub(crate) const SOME_WRITE: &str = "a write is accepted";
pub(crate) const SOME_EXTEND: &str = "a lease is extended";

impl LockModel {
    /// Whether the client has a step it takes without letting time pass.
    fn must_act(&self, s: &State, client: usize) -> bool {
        let c = &s.clients[client];
        if c.paused {
            return false;
        }
        if let Some(round) = client::round(&c.phase) {
            return s.now >= round.deadline(&self.cfg);
        }
        match c.phase {
            Phase::Holding { step, .. } => match step {
                Step::Start | Step::Checked { .. } => true,
                Step::Working { until, .. } => s.now >= until,
            },
            _ => false,
        }
    }

    /// Whether an empty restart of a node is allowed now.
    fn may_forget(&self, s: &State) -> bool {
        let f = &self.cfg.faults;
        if s.spent.restarts_empty >= f.restarts_empty {
            return false;
        }
        match f.amnesia {
            Amnesia::Any => true,
            Amnesia::AsDocsAllow => {
                usize::from(s.spent.restarts_empty) < self.cfg.nodes - self.cfg.quorum()
                    && s.nodes.iter().all(|n| n.fence >= s.ghost.max_chosen)
            }
        }
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let cfg = &self.cfg;
        vec![State {
            now: 0,
            nodes: vec![Node::default(); cfg.nodes],
            clients: vec![
                Client {
                    phase: Phase::Idle,
                    attempts_used: 0,
                    paused: false,
                    servers: quarantine::servers(cfg),
                };
                cfg.clients
            ],
            links: vec![vec![Link::default(); cfg.nodes]; cfg.clients],
            resource: Resource::default(),
            spent: Spent::default(),
            ghost: Ghost::default(),
            first_used: vec![None; cfg.extend_for.len()],
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let cfg = &self.cfg;
        let f = &cfg.faults;
        let clients = 0..cfg.clients;
        // Nothing depends on when the first attempt starts, so time starts with it: a
        // quiet prefix would only repeat every later state at another clock reading.
        let started = s.clients.iter().any(|c| c.attempts_used > 0);
        if started && s.now < cfg.max_time && !clients.clone().any(|c| self.must_act(s, c)) {
            actions.push(Action::Tick);
        }
        for client in clients {
            let c = &s.clients[client];
            for node in 0..cfg.nodes {
                let link = &s.links[client][node].to_node;
                let deliverable = if f.reorder {
                    link.len()
                } else {
                    link.len().min(1)
                };
                for (index, request) in link.iter().enumerate().take(deliverable) {
                    // A paused client reads nothing: an answer reaching it counts as late.
                    let awaited = !c.paused && client::awaits(&c.phase, node, request);
                    // An answer lost after its command ran exists only with message loss;
                    // otherwise a late answer is the same as a command that ran late.
                    if !awaited || f.loss {
                        actions.push(Action::ToNode {
                            client,
                            node,
                            index,
                            answered: false,
                        });
                    }
                    if awaited {
                        actions.push(Action::ToNode {
                            client,
                            node,
                            index,
                            answered: true,
                        });
                    }
                }
                if f.loss {
                    for index in 0..link.len() {
                        actions.push(Action::Lose {
                            client,
                            node,
                            index,
                        });
                    }
                }
            }
            if c.paused {
                actions.push(Action::Resume { client });
                continue;
            }
            if s.spent.pauses < f.pauses {
                actions.push(Action::Pause { client });
            }
            match &c.phase {
                Phase::Idle if c.attempts_used < cfg.attempts => {
                    actions.push(Action::Start { client });
                }
                Phase::Idle => {}
                phase => {
                    if let Some(round) = client::round(phase) {
                        if round.decision(cfg, s.now).is_some() {
                            actions.push(Action::Deadline { client });
                        }
                    } else if self.must_act(s, client) {
                        actions.push(Action::Section { client });
                    }
                    if let Phase::Holding {
                        step: Step::Working { .. },
                        extending,
                        extends,
                        ..
                    } = phase
                    {
                        if extending.is_some() && cfg.cancel_extends {
                            actions.push(Action::Cancel { client });
                        }
                        if extending.is_none() && *extends < cfg.extends {
                            for ttl in cfg.extend_ttls() {
                                actions.push(Action::Extend { client, ttl });
                            }
                        }
                    }
                }
            }
        }
        for node in 0..cfg.nodes {
            for &uptime in f.uptimes {
                if s.spent.restarts_keep < f.restarts_keep {
                    actions.push(Action::Restart {
                        node,
                        empty: false,
                        uptime,
                    });
                }
                if self.may_forget(s) {
                    actions.push(Action::Restart {
                        node,
                        empty: true,
                        uptime,
                    });
                }
            }
            if s.spent.clock_jumps < f.clock_jumps {
                actions.push(Action::Jump { node });
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let cfg = &self.cfg;
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.now += 1;
                let now = s.now;
                // Drop expired keys and ended quarantines now, so equal situations are
                // equal states.
                for n in &mut s.nodes {
                    n.expire(now);
                    if !n.jump_guarded(now) {
                        n.votes_from = 0;
                    }
                }
                quarantine::expire(cfg, &mut s);
            }
            Action::Start { client } => {
                if s.clients[client].attempts_used == 0 {
                    quarantine::connect(cfg, &mut s, client);
                }
                client::start(cfg, &mut s, client);
            }
            Action::ToNode {
                client,
                node,
                index,
                answered,
            } => {
                let request = s.links[client][node].to_node.remove(index);
                let now = s.now;
                let id = u8::try_from(client).ok()?;
                let void = quarantine::void(cfg, &s, client, node);
                let sent = client::round(&s.clients[client].phase).map(|r| r.started);
                let reply = s.nodes[node].run(cfg, id, request, now);
                if let (true, Some(reply), Some(sent)) = (answered, reply, sent) {
                    quarantine::answered(cfg, &mut s, client, node, sent);
                    client::receive(cfg, &mut s, client, node, reply, void);
                }
            }
            Action::Deadline { client } => client::decide(cfg, &mut s, client),
            Action::Section { client } => client::section(cfg, &mut s, client),
            Action::Extend { client, ttl } => client::extend(cfg, &mut s, client, ttl),
            Action::Cancel { client } => client::cancel_extend(&mut s, client),
            Action::Lose {
                client,
                node,
                index,
            } => {
                s.links[client][node].to_node.remove(index);
            }
            Action::Pause { client } => {
                s.clients[client].paused = true;
                s.spent.pauses += 1;
            }
            Action::Resume { client } => s.clients[client].paused = false,
            Action::Restart {
                node,
                empty,
                uptime,
            } => {
                for links in &mut s.links {
                    links[node] = Link::default();
                }
                if empty {
                    s.nodes[node].key = None;
                    s.nodes[node].fence = 0;
                    s.spent.restarts_empty += 1;
                } else {
                    s.spent.restarts_keep += 1;
                }
                quarantine::restarted(cfg, &mut s, node, uptime);
            }
            Action::Jump { node } => {
                let now = s.now;
                let n = &mut s.nodes[node];
                if let Some(ticks) = cfg.jump_guard {
                    n.votes_from = n.votes_from.max(now.saturating_add(ticks));
                }
                n.ahead = n.ahead.saturating_add(cfg.ttl);
                n.expire(s.now);
                s.spent.clock_jumps += 1;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(VALID_EXCLUSIVE, valid_exclusive),
            Property::always(SETTLED_EXCLUSIVE, settled_exclusive),
            Property::always(WRITES_IN_VALIDITY, |_, s: &State| !s.ghost.stale_write),
            Property::always(FENCES_GROW, |_, s: &State| !s.ghost.fence_regressed),
            Property::always(RETURN_ORDER, |_, s: &State| !s.ghost.return_order_broken),
            Property::always(NO_LOST_UPDATE, |_, s: &State| {
                s.resource.value == s.resource.writes
            }),
            Property::sometimes(SOME_GRANT, |_, s: &State| s.ghost.grants >= 1),
            Property::sometimes(TWO_GRANTS, |_, s: &State| s.ghost.grants >= 2),
            Property::sometimes(SOME_WRITE, |_, s: &State| s.resource.writes >= 1),
            Property::sometimes(SOME_EXTEND, |_, s: &State| s.ghost.extended),
        ]
    }
}

/// No two clients would call their lease valid if they looked now. A holder waiting on
/// an extend counts with the validity it would keep if it stopped waiting now: what
/// `is_held()` shows while the renewer's extend is in flight, and what a caller whose
/// extend future is dropped at this point gets.
fn valid_exclusive(_: &LockModel, s: &State) -> bool {
    (0..s.clients.len())
        .filter(|c| s.believes_valid(*c))
        .count()
        <= 1
}

/// The same, leaving out holders in the middle of an extend: a counterexample to this
/// one shows the overlap after the extend has failed or been given up, not only while
/// it is under way.
fn settled_exclusive(_: &LockModel, s: &State) -> bool {
    (0..s.clients.len())
        .filter(|c| s.believes_valid(*c) && client::round(&s.clients[*c].phase).is_none())
        .count()
        <= 1
}
