//! `junit.xml`: the run as JUnit for CI — one suite per run, one test case per
//! scenario × mode named `<scenario>/<mode>`.
//!
//! A failed scenario fails the cases of the modes its reasons name; when no reason names a
//! mode (a scenario-wide expectation) every mode of it fails, so CI never shows a failed run
//! as green. A failure's type says its kind: `safety` when the mode's failed check is a
//! safety one, `liveness` when it is a liveness one (the lock stayed safe but did not grant
//! where it promised to: still a `<failure>`, never a pass); `expectation` in a report
//! written before reasons said their kind. A harness failure (`Outcome::Unknown`) is an
//! `<error>`: nothing was judged.
//! A scenario that could not be played here (`Outcome::NotApplicable`) is `<skipped>`, with
//! the reason as its message.

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::error::ReportError;
use super::model::{ChaosReport, CheckKind, ModeReport, Outcome, ScenarioReport, or_unknown};
use super::palette;

/// File name of the JUnit file inside the report directory.
pub const JUNIT_FILE: &str = "junit.xml";

/// The JUnit XML for a report.
pub fn render_junit(report: &ChaosReport) -> Result<String, ReportError> {
    let mut suite = TestSuite::new("chaos");
    suite.add_properties([
        Property::new("run_id", report.run_id.as_str()),
        Property::new("seed", report.seed.to_string()),
        Property::new("backend", report.backend.as_str()),
        Property::new("lock", report.lock.as_str()),
        Property::new("server_version", report.server_version.as_str()),
        Property::new("command", report.command.as_str()),
    ]);
    for s in &report.scenarios {
        let modes = palette::ordered_modes(s.modes.keys().chain(s.timeline.keys()));
        // A scenario that produced no mode at all still needs a case, or a harness failure
        // before the first mode would vanish from CI.
        if modes.is_empty() {
            suite.add_test_case(case(s, "all", None, true));
            continue;
        }
        let failed = &s.verdict.failed_modes;
        for mode in &modes {
            // A failure that is no mode's own (the harness's) belongs to every mode.
            let blamed = failed.is_empty() || failed.iter().any(|f| f == mode);
            suite.add_test_case(case(s, mode, s.modes.get(*mode), blamed));
        }
    }
    let mut junit = Report::new(format!("chaos {}", report.run_id));
    junit.add_test_suite(suite);
    Ok(junit.to_string()?)
}

fn case(s: &ScenarioReport, mode: &str, m: Option<&ModeReport>, blamed: bool) -> TestCase {
    let status = match s.verdict.outcome {
        Outcome::Pass => TestCaseStatus::success(),
        Outcome::NotApplicable => {
            let mut st = TestCaseStatus::skipped();
            st.set_message(s.verdict.reasons.join("; "));
            st.set_type("not-applicable");
            st
        }
        Outcome::Fail | Outcome::Unavailable if !blamed => TestCaseStatus::success(),
        Outcome::Fail | Outcome::Unavailable | Outcome::Unknown => {
            // The failed check that names this mode ("FAILED (safety): none: 1 exclusion
            // violations …"), its safety failure first; else the scenario's first failure,
            // else its first reason that is not a met check.
            let own = |kind: CheckKind| {
                s.verdict.reasons.iter().find(|r| {
                    CheckKind::of(r)
                        .is_some_and(|(k, rest)| k == kind && rest.starts_with(&format!("{mode}:")))
                })
            };
            let first_failed = |kind: CheckKind| {
                s.verdict
                    .reasons
                    .iter()
                    .find(|r| CheckKind::of(r).is_some_and(|(k, _)| k == kind))
            };
            let failed = own(CheckKind::Safety)
                .or_else(|| own(CheckKind::Liveness))
                .or_else(|| first_failed(CheckKind::Safety))
                .or_else(|| first_failed(CheckKind::Liveness));
            let (kind, ty) = match (s.verdict.outcome, failed.and_then(|r| CheckKind::of(r))) {
                (Outcome::Unknown, _) => (NonSuccessKind::Error, "harness"),
                (_, Some((k, _))) => (NonSuccessKind::Failure, k.name()),
                // No failed check's reason says its kind: an unavailable verdict is a
                // liveness one; a failed one from a report written before the kinds were
                // (when a liveness miss failed too) keeps the old, kindless type.
                (Outcome::Unavailable, None) => (NonSuccessKind::Failure, "liveness"),
                (_, None) => (NonSuccessKind::Failure, "expectation"),
            };
            let mut st = TestCaseStatus::non_success(kind);
            // An unknown verdict has no failed check (either kind outranks it).
            let first = failed
                .or_else(|| s.verdict.reasons.iter().find(|r| !r.starts_with("ok:")))
                .or(s.verdict.reasons.first())
                .map_or("no reason given", String::as_str);
            st.set_message(first);
            st.set_type(ty);
            st.set_description(format!(
                "{}\nexpected: {}\n{}",
                s.verdict.reasons.join("\n"),
                s.expected,
                m.map(summary).unwrap_or_default()
            ));
            st
        }
    };
    let mut c = TestCase::new(format!("{}/{}", s.name, mode), status);
    c.set_classname(format!("chaos.{}", s.name));
    c.set_time(std::time::Duration::from_millis(s.duration_ms));
    if let Some(m) = m {
        c.set_system_out(summary(m));
    }
    c
}

fn summary(m: &ModeReport) -> String {
    format!(
        "sections={} lost={} rejected={} exclusion_violations={} acquire_attempts={} \
         acquire_failures={} acquire_errors={} acquire_p50_us={} acquire_p99_us={} stalls={} final_value={} \
         lost_share={:.4} abandoned={} stale_writes={} fence_regressions={} pauses={} idle_fault_windows={} \
         late_resumes={}",
        m.sections,
        or_unknown(m.lost),
        m.rejected,
        m.exclusion_violations,
        m.acquire_attempts,
        m.acquire_failures,
        m.acquire_errors,
        m.acquire_p50_us,
        m.acquire_p99_us,
        m.stalls,
        or_unknown(m.final_value),
        m.lost_share(),
        m.abandoned,
        m.stale_writes,
        m.fence_regressions,
        m.pauses,
        m.idle_fault_windows,
        m.recovery.late
    )
}
