//! `junit.xml`: the run as JUnit for CI — one suite per run, one test case per
//! scenario × mode named `<scenario>/<mode>`.
//!
//! A failed scenario fails the cases of the modes its reasons name; when no reason names a
//! mode (a scenario-wide expectation) every mode of it fails, so CI never shows a failed run
//! as green. A harness failure (`Outcome::Unknown`) is an `<error>`: nothing was judged.
//! A scenario that could not be played here (`Outcome::NotApplicable`) is `<skipped>`, with
//! the reason as its message.

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::error::ReportError;
use super::model::{ChaosReport, ModeReport, Outcome, ScenarioReport, or_unknown};
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
        Outcome::Fail if !blamed => TestCaseStatus::success(),
        Outcome::Fail | Outcome::Unknown => {
            let (kind, ty) = if s.verdict.outcome == Outcome::Fail {
                (NonSuccessKind::Failure, "expectation")
            } else {
                (NonSuccessKind::Error, "harness")
            };
            let mut st = TestCaseStatus::non_success(kind);
            // The failed check that names this mode ("FAILED: none: the rig did not observe
            // …"), else the first failure or harness reason.
            let tagged = format!("FAILED: {mode}:");
            let first = s
                .verdict
                .reasons
                .iter()
                .find(|r| r.starts_with(&tagged))
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
