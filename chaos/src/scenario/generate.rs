//! The one schedule generator: a scenario's [`Recipe`] or timeline, a seeded RNG and the
//! run's [`Shape`] give its faults.
//!
//! The order in which it draws is part of the contract (a seed must keep giving the same
//! schedule): a recipe draws all its [`windows`] first, then per window the fault kind
//! (only when there are several, as `0..n` in `u32`), that kind's parameters, then the
//! targets. A timeline draws, per entry, the parameters then the targets.

use rand::Rng;
use rand::rngs::StdRng;

use super::Shape;
use super::model::{FaultSpec, Recipe, TargetRule, TimedFault};
use crate::cluster::NodeId;
use crate::nemesis::schedule::windows;
use crate::nemesis::target;
use crate::nemesis::{ConnectionKind, Fault, ScheduledFault, Targets, WorkerId};

/// The faults of `recipe` on a run of `shape`, in window order.
pub fn recipe(recipe: &Recipe, rng: &mut StdRng, shape: &Shape) -> Vec<ScheduledFault> {
    let Some(first) = recipe.faults.first() else {
        return Vec::new();
    };
    windows(rng, shape.duration, recipe.window.shape())
        .into_iter()
        .map(|(start, end)| {
            let spec = if recipe.faults.len() > 1 {
                let n = u32::try_from(recipe.faults.len()).unwrap_or(u32::MAX);
                let i = rng.random_range(0..n) as usize;
                recipe.faults.get(i).unwrap_or(first)
            } else {
                first
            };
            let fault = draw(spec, rng);
            ScheduledFault {
                fault,
                targets: targets(&recipe.targets, rng, shape),
                start,
                end,
            }
        })
        .collect()
}

/// The faults of an explicit timeline, in the order written; a repeated entry gives one
/// fault per window, all with the parameters and targets drawn once for the entry.
pub fn timeline(entries: &[TimedFault], rng: &mut StdRng, shape: &Shape) -> Vec<ScheduledFault> {
    let mut out = Vec::new();
    for e in entries {
        let fault = draw(&e.fault, rng);
        let targets = targets(&e.targets, rng, shape);
        let (start, end) = (
            e.start.resolve(shape.duration),
            e.end.resolve(shape.duration),
        );
        let windows = match e.repeat {
            Some(r) => r.windows(start, end),
            None => vec![(start, end)],
        };
        out.extend(windows.into_iter().map(|(start, end)| ScheduledFault {
            fault,
            targets: targets.clone(),
            start,
            end,
        }));
    }
    out
}

/// A concrete fault: `spec` with its parameters drawn.
pub fn draw(spec: &FaultSpec, rng: &mut StdRng) -> Fault {
    match *spec {
        FaultSpec::Kill {} => Fault::Kill,
        FaultSpec::RestartKeep {} => Fault::RestartKeep,
        FaultSpec::RestartWipe {} => Fault::RestartWipe,
        FaultSpec::Freeze {} => Fault::Freeze,
        FaultSpec::Partition { via } => Fault::Partition { via },
        FaultSpec::BlackHole {} => Fault::BlackHole,
        FaultSpec::Slow {
            latency_ms,
            jitter_pct,
            connections_pct,
            both_ways,
        } => {
            let latency_ms = rng.random_range(latency_ms.lo..=latency_ms.hi);
            Fault::Slow {
                latency_ms,
                jitter_ms: latency_ms.saturating_mul(jitter_pct) / 100,
                connections_pct,
                both_ways,
            }
        }
        FaultSpec::ClockJump { offset_s } => Fault::ClockJump {
            offset_s: rng.random_range(offset_s.lo..=offset_s.hi),
        },
        FaultSpec::ClockSkew { rate_ppm } => Fault::ClockSkew {
            rate_ppm: rng.random_range(rate_ppm.lo..=rate_ppm.hi),
        },
        FaultSpec::ClientStall {} => Fault::ClientStall,
        FaultSpec::Forget {} => Fault::Forget,
        FaultSpec::ResetPeer {} => Fault::Connection(ConnectionKind::ResetPeer.draw(rng)),
        FaultSpec::Slicer {} => Fault::Connection(ConnectionKind::Slicer.draw(rng)),
        FaultSpec::LimitData {} => Fault::Connection(ConnectionKind::LimitData.draw(rng)),
        FaultSpec::MuteReplies {} => Fault::Connection(ConnectionKind::MuteReplies.draw(rng)),
    }
}

/// Concrete targets by `rule` (empty when the run has none to give, e.g. a minority of 2
/// nodes; such faults are dropped from the schedule).
pub fn targets(rule: &TargetRule, rng: &mut StdRng, shape: &Shape) -> Targets {
    let n = shape.nodes;
    match rule {
        TargetRule::One => Targets::Nodes(target::one(rng, n)),
        TargetRule::OneOfMinority => Targets::Nodes(target::one_of_minority(rng, n)),
        TargetRule::Minority => Targets::Nodes(target::minority(rng, n)),
        TargetRule::Majority => Targets::Nodes(target::majority(rng, n)),
        TargetRule::All => Targets::Nodes((0..n).map(NodeId).collect()),
        TargetRule::LastOfFirstQuorum => Targets::Nodes(around_first_quorum(n).0),
        TargetRule::BeyondFirstQuorum => Targets::Nodes(around_first_quorum(n).1),
        TargetRule::Nodes(list) => Targets::Nodes(sorted(list).into_iter().map(NodeId).collect()),
        TargetRule::OneWorker if shape.workers == 0 => Targets::Workers(Vec::new()),
        TargetRule::OneWorker => {
            Targets::Workers(vec![WorkerId(rng.random_range(0..shape.workers))])
        }
        TargetRule::Workers(list) => {
            Targets::Workers(sorted(list).into_iter().map(WorkerId).collect())
        }
    }
}

/// The first quorum's last node and the nodes after it, `(q − 1, q..n)`; both empty when
/// no node lies beyond the first quorum (n ≤ 2).
fn around_first_quorum(n: usize) -> (Vec<NodeId>, Vec<NodeId>) {
    let q = target::quorum(n);
    if q >= n {
        return (Vec::new(), Vec::new());
    }
    (vec![NodeId(q - 1)], (q..n).map(NodeId).collect())
}

fn sorted(list: &[usize]) -> Vec<usize> {
    let mut v = list.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}
