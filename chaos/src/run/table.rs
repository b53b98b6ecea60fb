//! The text table `chaos run` prints: one line per scenario × mode, the verdict on each
//! scenario's first line, and the reasons of every verdict that is not a pass.

use std::fmt::Write as _;

use crate::report::{ChaosReport, Outcome};

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

/// Renders `report` as a table.
pub fn render(report: &ChaosReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} · {} backend · {} · seed {}",
        report.run_id, report.backend, report.server_version, report.seed
    );
    let _ = writeln!(
        out,
        "{:<19} {:<11} {:>8} {:>5} {:>8} {:>5} {:>8} {:>7} {:>6} {:>7} {:>7}  verdict",
        "scenario",
        "mode",
        "sections",
        "lost",
        "rejected",
        "viol",
        "acquires",
        "failed",
        "errors",
        "p50 ms",
        "p99 ms"
    );
    for s in &report.scenarios {
        let verdict = match s.verdict.outcome {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Unknown => "UNKNOWN",
        };
        if s.modes.is_empty() {
            let _ = writeln!(out, "{:<19} {:<11} {:>86}  {verdict}", s.name, "-", "");
        }
        for (i, (mode, m)) in s.modes.iter().enumerate() {
            let _ = writeln!(
                out,
                "{:<19} {:<11} {:>8} {:>5} {:>8} {:>5} {:>8} {:>7} {:>6} {:>7} {:>7}  {}",
                if i == 0 { s.name.as_str() } else { "" },
                mode,
                m.sections,
                m.lost,
                m.rejected,
                m.exclusion_violations,
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
        "overall: {:?} (exit {}); acquires = quorum rounds, failed = rounds without the lock, errors = acquires that failed on unreachable nodes; p50/p99 of winning rounds",
        report.verdict,
        report.verdict.exit_code()
    );
    out
}
