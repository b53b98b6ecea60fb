//! A node running the Lua scripts of `script.rs`, each one atomic step on the node's own
//! clock.

use super::config::{Config, Fence};
use super::state::{Key, Node, Owner, Reply, Request};

impl Node {
    /// Whether the node is in its clock-jump guard at real time `now`: every client counts
    /// its yes as no until then.
    pub(crate) fn jump_guarded(&self, now: u8) -> bool {
        now < self.votes_from
    }

    /// The node's clock at real time `now`.
    pub(crate) fn clock(&self, now: u8) -> u8 {
        now.saturating_add(self.ahead)
    }

    /// Forgets the key once the node's clock has reached its expiry (Redis expires lazily
    /// and actively; either way a read after expiry sees nothing).
    pub(crate) fn expire(&mut self, now: u8) {
        if self.key.is_some_and(|k| k.expires <= self.clock(now)) {
            self.key = None;
        }
    }

    fn holds(&self, owner: Owner) -> bool {
        self.key.is_some_and(|k| k.owner == owner)
    }

    /// Runs one request from `client` at real time `now`; returns the answer, if any.
    /// Keys live the TTL (the acquire's, or the extend's own) less the drift allowance in
    /// ticks of real time, as if the node's
    /// clock ran fast by all of it (the worst case the validity allows for: a key present
    /// for less time can only let others in sooner).
    pub(crate) fn run(
        &mut self,
        cfg: &Config,
        client: u8,
        request: Request,
        now: u8,
    ) -> Option<Reply> {
        self.expire(now);
        let clock = self.clock(now);
        let expires = |ttl: u8| clock.saturating_add(ttl.saturating_sub(cfg.drift));
        match request {
            Request::Acquire { attempt } => {
                let fence = if self.key.is_none() {
                    self.key = Some(Key {
                        owner: Owner { client, attempt },
                        expires: expires(cfg.ttl),
                    });
                    if cfg.fence == Fence::OneRound {
                        // INCR in the same atomic step.
                        self.fence = self.fence.saturating_add(1);
                    }
                    Some(self.fence)
                } else {
                    None
                };
                Some(Reply::Acquire { attempt, fence })
            }
            Request::FenceWrite { attempt, fence } => {
                // Set-if-greater first, whoever holds the key: the counter never falls.
                // A counter already at `fence` is not a yes (another grant took it).
                let ahead = self.fence >= fence;
                self.fence = self.fence.max(fence);
                let held = self.holds(Owner { client, attempt }) && !ahead;
                Some(Reply::FenceWrite { attempt, held })
            }
            Request::Extend { attempt, nth, ttl } => {
                // PEXPIRE sets the expiry, earlier or later than it was.
                let ok = self.holds(Owner { client, attempt });
                let at = expires(ttl);
                if let (true, Some(key)) = (ok, self.key.as_mut()) {
                    key.expires = at;
                }
                Some(Reply::Extend { attempt, nth, ok })
            }
            Request::Delete { attempt } => {
                if self.holds(Owner { client, attempt }) {
                    self.key = None;
                }
                None
            }
        }
    }
}
