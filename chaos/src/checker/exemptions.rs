//! What excuses a lock key left standing: the faults under which a delete could not be
//! expected to reach a node ([`exemptions`], by [`leak::exempt`]'s kinds), and the stalls
//! the key watcher saw that no fault explains ([`outside_faults`]). The watcher that
//! records the stalls is the runner's (`crate::run::leaks`); what they excuse is decided here.

use std::time::Duration;

use super::keys::Exempt;
use super::leak::{self, exempt};
use crate::report::FaultWindow;
use crate::report::model::target_node;

/// Slack around a fault window when telling stalls of a fault from stalls of the machine:
/// the recorded start and end of a fault are when the nemesis applied and healed it.
pub const FAULT_SLACK: Duration = Duration::from_millis(100);

/// The `stalls` that touch no fault window on their node: a stall during a fault is that
/// fault's doing (a frozen node stalls the probe too), and faults are judged by their own
/// rules ([`exempt`]) — a stall must not excuse what a freeze or a latency fault is judged
/// on. A stall that began in a fault and outlasted it is dropped whole. A stall of every
/// node (a process of the lock held off the CPU) is no fault's doing and is kept.
pub fn outside_faults(stalls: &[Exempt], faults: &[FaultWindow]) -> Vec<Exempt> {
    let slack = u64::try_from(FAULT_SLACK.as_micros()).unwrap_or(u64::MAX);
    stalls
        .iter()
        .filter(|s| {
            let Some(sn) = s.node else { return true };
            !faults.iter().any(|f| {
                let on_node = f
                    .targets
                    .iter()
                    .filter_map(|t| target_node(t))
                    .any(|n| sn == n);
                let from = f.start_ms.saturating_mul(1000).saturating_sub(slack);
                let to = f
                    .end_ms
                    .map_or(u64::MAX, |e| e.saturating_mul(1000).saturating_add(slack));
                on_node && s.from_us <= to && s.to_us >= from
            })
        })
        .copied()
        .collect()
}

/// The windows of `faults` in which a delete could not be expected to reach a node (see
/// [`exempt`]), in µs; a worker-targeted one covers every node.
pub fn exemptions(faults: &[FaultWindow]) -> Vec<Exempt> {
    let mut out = Vec::new();
    for f in faults {
        let (from_us, to_us) = if exempt(&f.kind) {
            let to_us = f.end_ms.map_or(u64::MAX, |e| e.saturating_mul(1000));
            (f.start_ms.saturating_mul(1000), to_us)
        } else if let (true, Some(end)) = (leak::exempt_at_heal(&f.kind), f.end_ms) {
            let from_us = end.saturating_mul(1000);
            let close = u64::try_from(leak::HEAL_CLOSE.as_micros()).unwrap_or(u64::MAX);
            (from_us, from_us.saturating_add(close))
        } else {
            continue;
        };
        for t in &f.targets {
            // A worker (or anything else): every node.
            let node = target_node(t);
            out.push(Exempt {
                node,
                from_us,
                to_us,
            });
        }
    }
    out
}

/// Every window of `faults`, whatever its kind, in µs: a delete may be held while one
/// lasts ([`crate::checker::release_leak`]); a worker-targeted one covers every node.
pub fn held(faults: &[FaultWindow]) -> Vec<Exempt> {
    faults
        .iter()
        .flat_map(|f| {
            let from_us = f.start_ms.saturating_mul(1000);
            let to_us = f.end_ms.map_or(u64::MAX, |e| e.saturating_mul(1000));
            f.targets.iter().map(move |t| Exempt {
                node: target_node(t),
                from_us,
                to_us,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_during_a_fault_on_their_node_are_the_faults_not_the_machines() {
        let freeze = FaultWindow {
            kind: "freeze".into(),
            detail: String::new(),
            targets: vec!["n2".into()],
            start_ms: 1_000,
            end_ms: Some(2_000),
        };
        let stall = |node, from_ms: u64, to_ms: u64| Exempt {
            node: Some(node),
            from_us: from_ms * 1000,
            to_us: to_ms * 1000,
        };
        // A process of the lock held off the CPU during the freeze: every node's.
        let cpu = Exempt {
            node: None,
            from_us: 1_400_000,
            to_us: 1_500_000,
        };
        let stalls = [
            // In the freeze, on the frozen node; and one that outlasted it.
            stall(2, 1_200, 1_300),
            stall(2, 1_900, 2_050),
            // Within the slack after the heal.
            stall(2, 2_080, 2_090),
            // Another node, same time: the machine, not the fault.
            stall(3, 1_200, 1_300),
            // The frozen node, long after.
            stall(2, 5_000, 5_100),
            cpu,
        ];
        assert_eq!(
            outside_faults(&stalls, &[freeze]),
            vec![stall(3, 1_200, 1_300), stall(2, 5_000, 5_100), cpu]
        );
    }

    #[test]
    fn exemptions_name_nodes_or_every_node() {
        let w = |kind: &str, targets: &[&str], end: Option<u64>| FaultWindow {
            kind: kind.into(),
            detail: String::new(),
            targets: targets.iter().map(|t| (*t).to_owned()).collect(),
            start_ms: 1_000,
            end_ms: end,
        };
        let e = exemptions(&[
            w("kill", &["n1", "n3"], Some(2_000)),
            w("freeze", &["n0"], Some(2_000)),
            w("client-stall", &["w2"], None),
            w("mute-replies", &["n4"], Some(3_000)),
        ]);
        assert_eq!(
            e,
            vec![
                Exempt {
                    node: Some(1),
                    from_us: 1_000_000,
                    to_us: 2_000_000
                },
                Exempt {
                    node: Some(3),
                    from_us: 1_000_000,
                    to_us: 2_000_000
                },
                Exempt {
                    node: None,
                    from_us: 1_000_000,
                    to_us: u64::MAX
                },
                // Only its heal, which closes the connection.
                Exempt {
                    node: Some(4),
                    from_us: 3_000_000,
                    to_us: 3_100_000
                },
            ]
        );
    }
}
