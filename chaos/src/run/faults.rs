//! The nemesis's records as the report's fault windows, on the scenario clock.

use std::time::Duration;

use crate::checker::renewal::Forgot;
use crate::checker::truth::{ClockRates, RateWindow};
use crate::nemesis::{ConnectionFault, Fault, FaultRecord, NemesisReport, PartitionVia, Targets};
use crate::report::FaultWindow;

/// The nemesis's records as report fault windows on the scenario clock; apply or heal
/// errors go to `harness` (the scenario did not do what it says).
pub(crate) fn fault_windows(
    r: &NemesisReport,
    nemesis_t0: Duration,
    processes: bool,
    harness: &mut Vec<String>,
) -> Vec<FaultWindow> {
    let shift = u64::try_from(nemesis_t0.as_millis()).unwrap_or(0);
    let mut out = Vec::new();
    for rec in &r.records {
        for e in &rec.errors {
            harness.push(format!("fault {} ({}): {e}", rec.index, rec.fault));
        }
        if let Some(applied) = rec.applied_ms {
            out.push(FaultWindow {
                kind: rec.fault.name().into(),
                detail: detail(rec, processes),
                targets: match &rec.targets {
                    Targets::Nodes(n) => n.iter().map(|n| n.target()).collect(),
                    Targets::Workers(w) => w.iter().map(|w| format!("w{}", w.0)).collect(),
                },
                start_ms: applied + shift,
                end_ms: rec.healed_ms.map(|h| h + shift),
            });
        }
    }
    out
}

/// The clock rates of the nemesis's `clock-skew` faults, on the scenario clock, drawn as
/// [`ClockRates`] asks: a fast clock from when its node's apply (which ends by confirming
/// the rate) finished until its heal was due; a slow one from when it was due until its
/// heal finished, or to the end of time.
pub(crate) fn clock_rates(r: &NemesisReport, nemesis_t0: Duration) -> ClockRates {
    let shift = u64::try_from(nemesis_t0.as_millis()).unwrap_or(0);
    let us = |ms: u64| ms.saturating_add(shift).saturating_mul(1_000);
    let mut windows = Vec::new();
    for rec in &r.records {
        let Fault::ClockSkew { rate_ppm } = rec.fault else {
            continue;
        };
        let Targets::Nodes(nodes) = &rec.targets else {
            continue;
        };
        for node in nodes {
            let applied = rec
                .node_applied_ms
                .iter()
                .find(|(n, _)| *n == node.0)
                .map(|(_, at)| *at);
            let (from_us, until_us) = if rate_ppm > 0 {
                match applied {
                    Some(at) => (us(at), us(rec.planned_end_ms)),
                    None => continue,
                }
            } else {
                (us(rec.planned_start_ms), rec.healed_ms.map_or(u64::MAX, us))
            };
            windows.push(RateWindow {
                node: node.0,
                rate_ppm,
                from_us,
                until_us,
            });
        }
    }
    ClockRates::new(windows)
}

fn detail(rec: &FaultRecord, processes: bool) -> String {
    match rec.fault {
        Fault::Kill => "SIGKILL; start again with its AOF".into(),
        Fault::RestartKeep => "SIGKILL; back with its data".into(),
        Fault::RestartWipe => "SIGKILL; back EMPTY (amnesia)".into(),
        Fault::Freeze => "frozen (SIGSTOP / docker pause)".into(),
        Fault::Partition {
            via: PartitionVia::Proxy,
        } => "workers cut off at the proxy".into(),
        Fault::Partition {
            via: PartitionVia::Network,
        } => "docker network disconnect".into(),
        Fault::BlackHole => "connections open, data dropped both ways".into(),
        Fault::Slow {
            latency_ms,
            jitter_ms,
            connections_pct,
            both_ways,
        } => {
            let what = if both_ways {
                "requests and replies"
            } else {
                "replies"
            };
            let whose = if connections_pct < 100 {
                format!(" of {connections_pct} % of connections")
            } else {
                String::new()
            };
            format!("+{latency_ms}ms ±{jitter_ms}ms on {what}{whose}")
        }
        Fault::Connection(c) => match c {
            ConnectionFault::ResetPeer { after_ms } => {
                format!("connections reset {after_ms} ms after their first request")
            }
            ConnectionFault::Slicer { bytes, delay_us } => {
                format!("replies in ~{bytes}-byte pieces {delay_us} µs apart")
            }
            ConnectionFault::LimitData { bytes } => {
                format!("connections closed after {bytes} bytes of replies")
            }
            ConnectionFault::MuteReplies => "requests arrive, replies dropped".into(),
        },
        Fault::ClockJump { offset_s } => format!("offset {offset_s:+}s"),
        Fault::ClockSkew { rate_ppm } => {
            format!("runs x{:.3} (no jump)", 1.0 + rate_ppm as f64 / 1e6)
        }
        Fault::ClientStall if processes => "SIGSTOP of this worker's process in every mode".into(),
        Fault::ClientStall => "worker stalled".into(),
        Fault::Forget => "the run's lock keys deleted (fence counters kept)".into(),
    }
}

/// The moments the nemesis's `forget` faults left a quorum of `nodes` without the lock
/// keys, on the scenario clock: from when the fault was due (no key was deleted before)
/// until the quorum-th node's delete had returned (every one was gone by then). A forget
/// that reached fewer nodes is not one.
pub(crate) fn forgets(r: &NemesisReport, nemesis_t0: Duration, nodes: usize) -> Vec<Forgot> {
    let shift = u64::try_from(nemesis_t0.as_millis()).unwrap_or(0);
    let us = |ms: u64| ms.saturating_add(shift).saturating_mul(1_000);
    let quorum = crate::nemesis::target::quorum(nodes);
    let mut out = Vec::new();
    for rec in r.records.iter().filter(|r| r.fault == Fault::Forget) {
        let mut done: Vec<u64> = rec.node_applied_ms.iter().map(|(_, at)| *at).collect();
        done.sort_unstable();
        if let Some(at) = done.get(quorum.saturating_sub(1)) {
            out.push(Forgot {
                from_us: us(rec.planned_start_ms),
                gone_us: us(*at),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::NodeId;
    use crate::nemesis::Schedule;

    fn report(records: Vec<FaultRecord>) -> NemesisReport {
        NemesisReport {
            schedule: Schedule {
                seed: 0,
                duration: Duration::from_secs(10),
                faults: Vec::new(),
            },
            records,
            cancelled: false,
            unhealed: Vec::new(),
        }
    }

    fn skew(rate_ppm: i64, nodes: &[usize], applied: &[(usize, u64)]) -> FaultRecord {
        FaultRecord {
            index: 0,
            fault: Fault::ClockSkew { rate_ppm },
            targets: Targets::Nodes(nodes.iter().map(|&n| NodeId(n)).collect()),
            planned_start_ms: 1_000,
            planned_end_ms: 5_000,
            applied_ms: applied.first().map(|(_, at)| *at),
            node_applied_ms: applied.to_vec(),
            healed_ms: Some(5_200),
            errors: Vec::new(),
        }
    }

    #[test]
    fn a_fast_clock_counts_from_its_node_s_confirmation_to_the_heal_due() {
        let report = report(vec![skew(10_000, &[0, 1, 2], &[(0, 1_600), (1, 2_200)])]);
        let rates = clock_rates(&report, Duration::from_millis(100));
        // Node 0 confirmed at 1.6 s (+ 0.1 s shift), node 1 at 2.2 s; node 2's apply failed.
        assert_eq!(rates.at(0, 1_699_999), 0);
        assert_eq!(rates.at(0, 1_700_000), 10_000);
        assert_eq!(rates.at(1, 2_000_000), 0);
        assert_eq!(rates.at(1, 2_300_000), 10_000);
        assert_eq!(rates.at(2, 3_000_000), 0);
        assert_eq!(rates.at(0, 5_099_999), 10_000);
        assert_eq!(rates.at(0, 5_100_000), 0);
    }

    #[test]
    fn a_forget_is_gone_when_the_quorum_th_node_s_delete_returned() {
        let forget = |nodes: &[usize], applied: &[(usize, u64)]| FaultRecord {
            fault: Fault::Forget,
            planned_start_ms: 1_000,
            planned_end_ms: 1_500,
            ..skew(0, nodes, applied)
        };
        let r = report(vec![
            forget(&[0, 2, 4], &[(4, 1_003), (0, 1_001), (2, 1_002)]),
            // Applied on two nodes only: a quorum of five still held the keys.
            forget(&[1, 2, 3], &[(1, 1_001), (3, 1_002)]),
            skew(10_000, &[0, 1, 2], &[(0, 1_600)]),
        ]);
        let f = forgets(&r, Duration::from_millis(100), 5);
        assert_eq!(
            f,
            [Forgot {
                from_us: 1_100_000,
                gone_us: 1_103_000
            }]
        );
    }

    #[test]
    fn a_slow_clock_counts_from_its_start_due_to_its_heal() {
        let mut slow = skew(-10_000, &[3], &[(3, 1_600)]);
        let rates = clock_rates(&report(vec![slow.clone()]), Duration::ZERO);
        assert_eq!(rates.at(3, 999_999), 0);
        assert_eq!(rates.at(3, 1_000_000), -10_000);
        assert_eq!(rates.at(3, 5_199_999), -10_000);
        assert_eq!(rates.at(3, 5_200_000), 0);
        slow.healed_ms = None;
        let rates = clock_rates(&report(vec![slow]), Duration::ZERO);
        assert_eq!(rates.at(3, u64::MAX - 1), -10_000);
    }
}
