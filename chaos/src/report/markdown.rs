//! A Markdown summary of a run for CI pages (a GitHub job summary, a pull-request comment):
//! one row per scenario with its outcome and, where it did not pass, why.
//!
//! A safety failure and a lock that stayed safe but did not grant where it promised to
//! (a liveness failure: [`Outcome::Unavailable`]) are told apart in the rows and counted
//! apart: a nightly job that cries "FAIL" for a loaded runner gets switched off.
//!
//! Not-applicable scenarios are shown as such and counted apart: a run against an attached
//! deployment whose controls cannot freeze a node did not judge the freeze scenarios, and a
//! summary that counted them as passes would claim a proof nobody ran.

use std::fmt::Write as _;

use super::model::{ChaosReport, CheckKind, Outcome, ScenarioReport};

/// Longest reason shown in a cell; the report has the rest.
const REASON_CHARS: usize = 300;

/// The summary of `report`, ending in a newline.
pub fn render_markdown(report: &ChaosReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Chaos run `{}`: {}\n",
        report.run_id,
        outcome_word(report.verdict)
    );
    let _ = writeln!(
        out,
        "Lock `{}` on {} × {} ({} backend), seed {}, started {}.\n",
        report.lock,
        report.nodes,
        report.server_version,
        report.backend,
        report.seed,
        report.started_at
    );
    let _ = writeln!(out, "| scenario | result | why |");
    let _ = writeln!(out, "| --- | --- | --- |");
    let (mut passed, mut failed, mut unavailable, mut unknown, mut skipped) = (0, 0, 0, 0, 0);
    for s in &report.scenarios {
        match s.verdict.outcome {
            Outcome::Pass => passed += 1,
            Outcome::Fail => failed += 1,
            Outcome::Unavailable => unavailable += 1,
            Outcome::Unknown => unknown += 1,
            Outcome::NotApplicable => skipped += 1,
        }
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            cell(&s.name),
            outcome_word(s.verdict.outcome),
            cell(&why(s))
        );
    }
    let _ = writeln!(
        out,
        "\n{passed} passed, {failed} failed (safety), {unavailable} unavailable (liveness failed, \
         safety held), {unknown} without a verdict (harness), {skipped} not applicable (not played: nothing was judged). Timelines and every \
         reason: report.html in the report directory."
    );
    out
}

fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Fail => "**FAIL** (safety)",
        Outcome::Unavailable => "**UNAVAILABLE** (liveness failed, safety held)",
        Outcome::Unknown => "**no verdict** (harness failed)",
        Outcome::NotApplicable => "not applicable",
    }
}

/// The failed checks (safety first: the cell is cut), the harness error, or why the
/// scenario could not be played; nothing for a pass.
fn why(s: &ScenarioReport) -> String {
    let reasons = &s.verdict.reasons;
    match s.verdict.outcome {
        Outcome::Pass => String::new(),
        Outcome::Fail | Outcome::Unavailable => {
            let mut failed: Vec<(CheckKind, &String)> = reasons
                .iter()
                .filter_map(|r| CheckKind::of(r).map(|(k, _)| (k, r)))
                .collect();
            failed.sort_by_key(|(k, _)| *k != CheckKind::Safety);
            failed
                .into_iter()
                .map(|(_, r)| r.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        }
        Outcome::Unknown | Outcome::NotApplicable => reasons.join("; "),
    }
}

/// `text` made safe for one table cell: no pipes or newlines, at most [`REASON_CHARS`].
fn cell(text: &str) -> String {
    let flat: String = text
        .replace('|', "\\|")
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if flat.chars().count() <= REASON_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(REASON_CHARS).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::report::model::Verdict;

    fn scenario(name: &str, outcome: Outcome, reasons: &[&str]) -> ScenarioReport {
        ScenarioReport {
            name: name.into(),
            about: String::new(),
            expected: String::new(),
            seed: 1,
            duration_ms: 20_000,
            clients: String::new(),
            faults: Vec::new(),
            modes: BTreeMap::new(),
            verdict: Verdict {
                outcome,
                reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
                failed_modes: Vec::new(),
            },
            timeline: BTreeMap::new(),
            history: None,
            quorum_probe: None,
            ops: Vec::new(),
            evidence: None,
            evidence_json: None,
        }
    }

    fn report(scenarios: Vec<ScenarioReport>) -> ChaosReport {
        let verdict = scenarios
            .iter()
            .map(|s| s.verdict.outcome)
            .fold(Outcome::NotApplicable, Outcome::worst);
        ChaosReport {
            schema: 3,
            run_id: "r1".into(),
            seed: 7,
            backend: "attached".into(),
            lock: "ours".into(),
            flavour: "valkey".into(),
            server_version: "valkey 8.1.8".into(),
            nodes: 5,
            images: Vec::new(),
            started_at: "2026-12-04T22:00:00Z".into(),
            command: "chaos run".into(),
            scenarios,
            verdict,
        }
    }

    #[test]
    fn not_applicable_is_shown_and_counted_apart_from_passes() {
        let md = render_markdown(&report(vec![
            scenario("kill-minority", Outcome::Pass, &["ok: none: lost 0"]),
            scenario(
                "pause-minority",
                Outcome::NotApplicable,
                &["the stack's controls cannot freeze a node"],
            ),
            scenario(
                "latency",
                Outcome::Fail,
                &[
                    "ok: none: lost 0",
                    "FAILED (liveness): none: 0 sections completed",
                    "FAILED (safety): checked: 2 exclusion violations | x",
                ],
            ),
            scenario(
                "partition-minority",
                Outcome::Unavailable,
                &[
                    "ok: none: lost 0",
                    "FAILED (liveness): claim_first: 1 heals without a grant within 3000 ms",
                ],
            ),
        ]));
        assert!(
            md.starts_with("## Chaos run `r1`: **FAIL** (safety)"),
            "{md}"
        );
        assert!(md.contains("| `kill-minority` | pass |  |"), "{md}");
        assert!(
            md.contains(
                "| `pause-minority` | not applicable | the stack's controls cannot freeze a node |"
            ),
            "{md}"
        );
        // Only the failed checks, safety first, pipes escaped.
        assert!(
            md.contains(
                "| `latency` | **FAIL** (safety) | FAILED (safety): checked: 2 exclusion violations \\| x; FAILED (liveness): none: 0 sections completed |"
            ),
            "{md}"
        );
        // A lock that stayed safe but stopped granting is told apart, and counted apart.
        assert!(
            md.contains(
                "| `partition-minority` | **UNAVAILABLE** (liveness failed, safety held) | FAILED (liveness): claim_first: 1 heals without a grant within 3000 ms |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "1 passed, 1 failed (safety), 1 unavailable (liveness failed, safety held), 0 without a verdict (harness), 1 not applicable"
            ),
            "{md}"
        );
        let safe = render_markdown(&report(vec![scenario(
            "partition-minority",
            Outcome::Unavailable,
            &["FAILED (liveness): quorum probe: 1 of 8"],
        )]));
        assert!(
            safe.starts_with("## Chaos run `r1`: **UNAVAILABLE** (liveness failed, safety held)"),
            "{safe}"
        );
    }

    #[test]
    fn long_reasons_are_cut_and_newlines_flattened() {
        let long = format!("line one\nline two {}", "x".repeat(400));
        let md = render_markdown(&report(vec![scenario("mixed", Outcome::Unknown, &[&long])]));
        let row = md
            .lines()
            .find(|l| l.starts_with("| `mixed`"))
            .expect("row");
        assert!(row.contains("line one line two"), "{row}");
        assert!(row.ends_with("… |"), "{row}");
        assert!(row.chars().count() < REASON_CHARS + 60, "{row}");
    }
}
