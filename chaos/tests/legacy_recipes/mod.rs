//! A frozen copy of the recipe functions the built-in scenarios had before scenarios became
//! data (`chaos/src/scenario/recipes.rs` at f6d8411), used only to check that the generic
//! generator gives every built-in the very same schedule for a seed. Do not edit: it is the
//! reference.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;

use redlock_chaos::nemesis::schedule::{WindowShape, windows};
use redlock_chaos::nemesis::target;
use redlock_chaos::nemesis::{Fault, PartitionVia, ScheduledFault, Targets, WorkerId};
use redlock_chaos::scenario::Shape;

/// Faults of a few seconds with similar gaps.
const REGULAR: WindowShape = WindowShape {
    on: (0.08, 0.2),
    off: (0.05, 0.12),
    max_on: Duration::from_secs(60),
};

fn on_nodes(
    rng: &mut StdRng,
    shape: &Shape,
    w: WindowShape,
    mut each: impl FnMut(&mut StdRng) -> (Fault, Vec<redlock_chaos::cluster::NodeId>),
) -> Vec<ScheduledFault> {
    windows(rng, shape.duration, w)
        .into_iter()
        .map(|(start, end)| {
            let (fault, nodes) = each(rng);
            ScheduledFault {
                fault,
                targets: Targets::Nodes(nodes),
                start,
                end,
            }
        })
        .collect()
}

/// Kill a random minority per window.
pub fn kill_minority(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    on_nodes(rng, s, REGULAR, |r| {
        (Fault::Kill, target::minority(r, s.nodes))
    })
}

/// Freeze a random minority per window.
pub fn pause_minority(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    on_nodes(rng, s, REGULAR, |r| {
        (Fault::Freeze, target::minority(r, s.nodes))
    })
}

/// Partition (at the proxy) a random minority per window.
pub fn partition_minority(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    let p = Fault::Partition {
        via: PartitionVia::Proxy,
    };
    on_nodes(rng, s, REGULAR, |r| (p, target::minority(r, s.nodes)))
}

fn slow(r: &mut StdRng) -> Fault {
    let latency_ms = r.random_range(100..=800);
    Fault::Slow {
        latency_ms,
        jitter_ms: latency_ms / 5,
        connections_pct: 100,
        both_ways: false,
    }
}

/// Latency on a random minority per window.
pub fn latency(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    on_nodes(rng, s, REGULAR, |r| (slow(r), target::minority(r, s.nodes)))
}

/// One node down briefly, back empty: shorter than typical TTLs, so the others still hold
/// the keys it forgot.
pub fn amnesia_restart(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    let w = WindowShape {
        on: (0.02, 0.05),
        off: (0.05, 0.1),
        max_on: Duration::from_millis(1500),
    };
    on_nodes(rng, s, w, |r| (Fault::RestartWipe, target::one(r, s.nodes)))
}

/// One node's clock jumps forward for a few seconds.
pub fn clock_jump(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    let w = WindowShape {
        on: (0.03, 0.08),
        off: (0.05, 0.12),
        max_on: Duration::from_secs(5),
    };
    on_nodes(rng, s, w, |r| {
        let offset_s = r.random_range(20..=60);
        (Fault::ClockJump { offset_s }, target::one(r, s.nodes))
    })
}

/// A quorum of nodes' clocks jump forward at once, by far more than any TTL: the holder's
/// keys expire on a majority while it still holds the lock, and the next acquire wins.
/// Each jump bites once, when it starts, so there are many short ones.
pub fn clock_jump_majority(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    let w = WindowShape {
        on: (0.02, 0.04),
        off: (0.03, 0.06),
        max_on: Duration::from_secs(3),
    };
    on_nodes(rng, s, w, |r| {
        let offset_s = r.random_range(20..=60);
        (Fault::ClockJump { offset_s }, target::majority(r, s.nodes))
    })
}

/// No scheduled faults: the workers' own pauses (`client-pause`) or grants
/// (`amnesia-split`) trigger the faults.
pub fn none(_: &mut StdRng, _: &Shape) -> Vec<ScheduledFault> {
    Vec::new()
}

/// One worker stalls for a long stretch (meant to outlast the lease TTL).
pub fn client_stall(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    let w = WindowShape {
        on: (0.15, 0.3),
        off: (0.05, 0.1),
        max_on: Duration::from_secs(120),
    };
    windows(rng, s.duration, w)
        .into_iter()
        .filter(|_| s.workers > 0)
        .map(|(start, end)| ScheduledFault {
            fault: Fault::ClientStall,
            targets: Targets::Workers(vec![WorkerId(rng.random_range(0..s.workers))]),
            start,
            end,
        })
        .collect()
}

/// A quorum of nodes down for a long stretch, once or twice.
pub fn majority_loss(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    let w = WindowShape {
        on: (0.2, 0.35),
        off: (0.1, 0.2),
        max_on: Duration::from_secs(300),
    };
    on_nodes(rng, s, w, |r| (Fault::Kill, target::majority(r, s.nodes)))
}

/// A different minority fault per window.
pub fn mixed(rng: &mut StdRng, s: &Shape) -> Vec<ScheduledFault> {
    let w = WindowShape {
        on: (0.05, 0.12),
        off: (0.03, 0.08),
        max_on: Duration::from_secs(30),
    };
    on_nodes(rng, s, w, |r| {
        let fault = match r.random_range(0..6) {
            0 => Fault::Kill,
            1 => Fault::RestartKeep,
            2 => Fault::Freeze,
            3 => Fault::Partition {
                via: PartitionVia::Proxy,
            },
            4 => Fault::BlackHole,
            _ => slow(r),
        };
        (fault, target::minority(r, s.nodes))
    })
}

/// A generator of the old kind.
pub type Recipe = fn(&mut StdRng, &Shape) -> Vec<ScheduledFault>;

/// Every built-in's old recipe, by name.
pub const ALL: &[(&str, Recipe)] = &[
    ("kill-minority", kill_minority),
    ("pause-minority", pause_minority),
    ("partition-minority", partition_minority),
    ("latency", latency),
    ("amnesia-restart", amnesia_restart),
    ("clock-jump", clock_jump),
    ("client-stall", client_stall),
    ("client-pause", none),
    ("amnesia-split", none),
    ("clock-jump-majority", clock_jump_majority),
    ("majority-loss", majority_loss),
    ("mixed", mixed),
];
