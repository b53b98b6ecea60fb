//! The nemesis's records as the report's fault windows, on the scenario clock.

use std::time::Duration;

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
                    Targets::Nodes(n) => n.iter().map(|n| format!("n{}", n.0)).collect(),
                    Targets::Workers(w) => w.iter().map(|w| format!("w{}", w.0)).collect(),
                },
                start_ms: applied + shift,
                end_ms: rec.healed_ms.map(|h| h + shift),
            });
        }
    }
    out
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
        } => format!("+{latency_ms}ms ±{jitter_ms}ms on replies"),
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
    }
}
