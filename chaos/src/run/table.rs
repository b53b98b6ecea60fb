//! The text table `chaos run` prints: one line per scenario × mode, the verdict on each
//! scenario's first line, and the reasons of every verdict that is not a pass.

use std::fmt::Write as _;

use crate::report::model::or_unknown;
use crate::report::{ChaosReport, Outcome};

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

/// Mode names in the order the workload runs them (`none`, `checked`, `write_only`,
/// `claim_first`), unknown names after them alphabetically.
fn ordered<'a>(names: impl Iterator<Item = &'a String>) -> Vec<&'a String> {
    let mut v: Vec<&String> = names.collect();
    v.sort_by_key(|n| {
        let pos = crate::workload::Mode::ALL
            .iter()
            .position(|m| m.name() == n.as_str());
        (pos.unwrap_or(usize::MAX), (*n).clone())
    });
    v
}

/// Renders `report` as a table.
pub fn render(report: &ChaosReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} · {} backend · {} · lock {} · seed {}",
        report.run_id, report.backend, report.server_version, report.lock, report.seed
    );
    let _ = writeln!(
        out,
        "{:<19} {:<11} {:>8} {:>5} {:>6} {:>5} {:>8} {:>5} {:>5} {:>6} {:>6} {:>8} {:>7} {:>6} {:>7} {:>7}  verdict",
        "scenario",
        "mode",
        "sections",
        "lost",
        "lost %",
        "stale",
        "rejected",
        "aband",
        "viol",
        "tokens",
        "pauses",
        "acquires",
        "failed",
        "errors",
        "p50 ms",
        "p99 ms"
    );
    for s in &report.scenarios {
        let verdict = match s.verdict.outcome {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL (safety)",
            Outcome::Unavailable => "UNAVAILABLE (liveness)",
            Outcome::Unknown => "UNKNOWN",
            Outcome::NotApplicable => "N/A",
        };
        if s.modes.is_empty() {
            let _ = writeln!(out, "{:<19} {:<11} {:>120}  {verdict}", s.name, "-", "");
        }
        for (i, mode) in ordered(s.modes.keys()).into_iter().enumerate() {
            let m = &s.modes[mode];
            let _ = writeln!(
                out,
                "{:<19} {:<11} {:>8} {:>5} {:>6.1} {:>5} {:>8} {:>5} {:>5} {:>6} {:>6} {:>8} {:>7} {:>6} {:>7} {:>7}  {}",
                if i == 0 { s.name.as_str() } else { "" },
                mode,
                m.sections,
                or_unknown(m.lost),
                100.0 * m.lost_share(),
                m.stale_writes,
                m.rejected,
                m.abandoned,
                m.exclusion_violations,
                m.fence_regressions,
                m.pauses,
                m.acquire_attempts,
                m.acquire_failures,
                m.acquire_errors,
                ms(m.acquire_p50_us),
                ms(m.acquire_p99_us),
                if i == 0 { verdict } else { "" },
            );
        }
        if s.verdict.outcome != Outcome::Pass {
            for r in s.verdict.reasons.iter().filter(|r| !r.starts_with("ok:")) {
                let _ = writeln!(out, "    {r}");
            }
        }
    }
    let _ = writeln!(
        out,
        "overall: {:?} (exit {}: {}); lost % = share of acknowledged increments lost; stale = accepted writes completed after the lease's validity; aband = grants abandoned (validity ran out before the write); viol = overlapping holding windows; tokens = grants whose fencing token repeated one or did not exceed one returned before they asked; pauses = workers stopped while holding; acquires = quorum rounds, failed = rounds without the lock, errors = acquires that failed on unreachable nodes; p50/p99 of winning rounds",
        report.verdict,
        report.verdict.exit_code(),
        report.verdict.meaning()
    );
    out
}
