//! Whether a renewed lease hears that its keys are gone.
//!
//! A renewer that finds its keys gone on a majority must say so at once (`LossReason::Gone`):
//! the holder may be working on a validity the servers no longer back, and someone else
//! may already hold the lock. The lease still ends at its validity whatever the renewer
//! says (`status()` watches the clock), so a renewer that keeps quiet is caught only by
//! *when* and *how* its holder hears: a lease whose keys a quorum of nodes forgot (the
//! nemesis's `forget`) while it held must hear of the loss at its next renewal, well before
//! its validity runs out.
//!
//! The rule, per renewed grant held when a forget began and still held (no loss heard,
//! section not done) when the keys were gone on a quorum at `gone`:
//! - a loss heard for any reason but `Expired` is what the renewer owes: **heard**;
//! - a loss heard as `Expired` more than [`Bound`] after `gone` is **late** — the renewer
//!   ran at least one renewal in between (every `interval`, a third of the TTL by default),
//!   found the keys gone, and said nothing; unless something stalled in between — the
//!   worker itself (its watch of the lease saw a tick come late), or a node or the machine
//!   (the rig's key watcher saw its path stall, [`crate::run::leaks`]): then it is
//!   **excused**, and counted;
//! - `Expired` sooner than that is **heard**: validity ran out before a renewal was due;
//! - a section that ended before hearing anything is not judged (a renewal after a long
//!   `extend_for` may rightly wait past its end).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A `forget` that left a quorum of nodes without the lock keys, on the scenario clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forgot {
    /// When the fault was due: no key was deleted before.
    pub from_us: u64,
    /// When the quorum-th node's delete had returned: every one was gone by then.
    pub gone_us: u64,
}

/// How a renewed section heard that its lease was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Heard {
    /// Validity ran out (`LossReason::Expired`): the renewer had not renewed in time.
    Expired,
    /// Any other reason the renewer published (`Gone`, `NodeRestarted`, ...).
    Told,
}

/// One renewed grant, as its section saw it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RenewedGrant {
    /// When the acquire returned.
    pub start_us: u64,
    /// When the section's last statement returned.
    pub done_us: u64,
    /// The loss the section heard, and when (none: it never heard one).
    pub loss: Option<(Heard, u64)>,
    /// Windows in which the worker's watch of the lease ticked late (the worker held off
    /// the CPU): `[from, to)`.
    pub stalls: Vec<(u64, u64)>,
}

/// How long after its keys were gone a lease may still hear `Expired` rather than be
/// told: the renewer's interval plus what a renewal round and the watch's tick take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound(pub u64);

impl Bound {
    /// For a lease of `ttl_us` renewed every third of it (the default): half the TTL — a
    /// third for the interval, a sixth for the round and the tick. A renewer that keeps
    /// quiet is heard at validity's end, at least two thirds of the TTL after the last
    /// renewal before the forget, minus the drift allowance.
    pub fn for_ttl_us(ttl_us: u64) -> Self {
        Bound(ttl_us / 2)
    }
}

/// What the check found in one mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LossHeard {
    /// Renewed grants that held when a forget began and heard a loss after the keys were
    /// gone on a quorum: the cases judged.
    pub judged: u64,
    /// Of those, told by the renewer (`Gone` or another reason it published).
    pub told: u64,
    /// Of those, heard only as `Expired`, more than the bound after the keys were gone:
    /// a renewer that saw the loss and kept quiet.
    pub late: u64,
    /// Late, but the worker, a node or the machine stalled in between: not judged.
    #[serde(default)]
    pub excused: u64,
    /// The bound, ms.
    #[serde(default)]
    pub bound_ms: u64,
    /// A few late ones, e.g. `granted 1.204 s, keys gone 1.310 s, heard Expired 1.498 s`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// Late losses kept as examples.
const EXAMPLES: usize = 5;

fn s(us: u64) -> String {
    format!("{:.3} s", us as f64 / 1e6)
}

/// The check over one mode's renewed grants and the run's forgets; `stalls` are the
/// `[from, to)` windows in which the rig saw a node's path or the machine stall.
pub fn loss_heard(
    grants: &[RenewedGrant],
    forgets: &[Forgot],
    stalls: &[(u64, u64)],
    bound: Bound,
) -> LossHeard {
    let mut out = LossHeard {
        bound_ms: bound.0 / 1_000,
        ..LossHeard::default()
    };
    for f in forgets {
        for g in grants {
            let Some((how, at)) = g.loss else { continue };
            // Held when the forget began, still held when the keys were gone.
            if g.start_us >= f.from_us || at < f.gone_us || g.done_us < f.gone_us {
                continue;
            }
            out.judged += 1;
            let late = how == Heard::Expired && at > f.gone_us.saturating_add(bound.0);
            if !late {
                out.told += u64::from(how == Heard::Told);
                continue;
            }
            let between = |&(a, b): &(u64, u64)| a < at && b > f.gone_us;
            if g.stalls.iter().chain(stalls).any(between) {
                out.excused += 1;
                continue;
            }
            out.late += 1;
            if out.examples.len() < EXAMPLES {
                out.examples.push(format!(
                    "granted {}, keys gone on a quorum {}, heard Expired {} ({} ms later)",
                    s(g.start_us),
                    s(f.gone_us),
                    s(at),
                    (at - f.gone_us) / 1_000
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL_US: u64 = 200_000;

    fn forgot() -> Forgot {
        Forgot {
            from_us: 1_000_000,
            gone_us: 1_010_000,
        }
    }

    fn grant(start_us: u64, done_us: u64, loss: Option<(Heard, u64)>) -> RenewedGrant {
        RenewedGrant {
            start_us,
            done_us,
            loss,
            stalls: Vec::new(),
        }
    }

    fn check(grants: &[RenewedGrant]) -> LossHeard {
        loss_heard(grants, &[forgot()], &[], Bound::for_ttl_us(TTL_US))
    }

    #[test]
    fn told_at_the_next_renewal_passes() {
        let r = check(&[grant(900_000, 1_400_000, Some((Heard::Told, 1_070_000)))]);
        assert_eq!((r.judged, r.told, r.late), (1, 1, 0));
    }

    #[test]
    fn expired_at_validity_s_end_is_late() {
        // Renewed at 0.99 s, keys gone at 1.01 s: a quiet renewer is heard at 1.186 s.
        let r = check(&[grant(900_000, 1_400_000, Some((Heard::Expired, 1_186_000)))]);
        assert_eq!((r.judged, r.told, r.late), (1, 0, 1));
        assert_eq!(r.bound_ms, 100);
        assert!(r.examples[0].contains("176 ms later"), "{:?}", r.examples);
    }

    #[test]
    fn expired_within_the_bound_is_not_late() {
        let r = check(&[grant(900_000, 1_400_000, Some((Heard::Expired, 1_100_000)))]);
        assert_eq!((r.judged, r.told, r.late), (1, 0, 0));
    }

    #[test]
    fn a_stall_between_the_loss_and_the_hearing_excuses() {
        let mut g = grant(900_000, 1_400_000, Some((Heard::Expired, 1_186_000)));
        g.stalls.push((1_050_000, 1_180_000));
        let r = check(&[g.clone()]);
        assert_eq!((r.judged, r.late, r.excused), (1, 0, 1));
        // A stall before the keys were gone excuses nothing.
        g.stalls = vec![(900_000, 1_000_000)];
        assert_eq!(check(&[g.clone()]).late, 1);
        // Nor does one of a node after the hearing; one between does.
        let bound = Bound::for_ttl_us(TTL_US);
        let r = loss_heard(&[g.clone()], &[forgot()], &[(1_190_000, 1_300_000)], bound);
        assert_eq!((r.late, r.excused), (1, 0));
        let r = loss_heard(&[g], &[forgot()], &[(1_100_000, 1_120_000)], bound);
        assert_eq!((r.late, r.excused), (0, 1));
    }

    #[test]
    fn grants_not_holding_through_the_forget_are_not_judged() {
        let r = check(&[
            // Granted after the forget began: its keys may be whole.
            grant(1_005_000, 1_400_000, Some((Heard::Expired, 1_300_000))),
            // Heard its loss before the keys were gone.
            grant(800_000, 1_400_000, Some((Heard::Expired, 1_005_000))),
            // Done before the keys were gone.
            grant(800_000, 1_008_000, Some((Heard::Expired, 1_300_000))),
            // Never heard a loss (ended before its renewer's turn).
            grant(900_000, 1_100_000, None),
        ]);
        assert_eq!(
            r,
            LossHeard {
                bound_ms: 100,
                ..LossHeard::default()
            }
        );
    }
}
