//! Verdicts: a scenario's [`Expectation`] checked against what each mode did.
//!
//! One reason per check, met or not, so a report says why it passed as well as why not.
//!
//! | expectation | checks (every mode unless named) | fails when |
//! |---|---|---|
//! | safe and available | 0 exclusion violations; lost = 0; sections > 0 | any check fails |
//! | unavailable but safe | 0 exclusion violations; lost = 0; acquire errors > 0 (acquires failed cleanly while the majority was gone) | any check fails |
//! | may violate, fencing holds | claim_first lost = 0; violations and none/write_only losses are reported | claim_first lost anything |
//!
//! The outcome is [`Outcome::Unknown`] instead, whatever the numbers, when the harness
//! could not tell: a worker failed (PostgreSQL, a setting), a fault could not be applied or
//! was left unhealed, the run was interrupted, or `lost` is negative (more increments than
//! completed sections: a bug in the rig, not the lock).
//!
//! Why these hold for our lock with the run's timings (TTL 200 ms, node deadline 20 ms,
//! AOF with fsync always): minority faults (kill/restart with AOF, freeze, partition,
//! black hole, latency of any size) cost at most N − quorum votes — a slow node's vote
//! misses its deadline and is simply lost — so a majority never forgets a key before it
//! expires and holding windows cannot overlap; the validity check before each write
//! keeps the unfenced modes inside those windows. A majority loss stops every acquire.
//! Amnesia, clock jumps and client pauses break the lock's assumptions: only claim-first
//! fencing is safe there, and it is safe whatever the lock does (a write is accepted only
//! under the latest successful claim, which read the value atomically).

use std::collections::BTreeMap;

use crate::report::{ModeReport, Outcome, Verdict};
use crate::scenario::Expectation;

/// The rules, as `chaos scenarios` prints them under the list.
pub const RULES: &str = "\
verdicts (chaos run; none, write_only and claim_first run at once in every scenario):
  safe and available               every mode: 0 exclusion violations, lost 0, sections > 0
  unavailable while it lasts, safe every mode: 0 exclusion violations, lost 0, acquires failed on unreachable nodes > 0
  violations possible, claim-first claim_first lost 0; violations and none/write_only losses are reported, not failed
  any: a worker or fault that failed, a fault left unhealed, an interruption -> unknown (exit 2)";

/// The claim-first mode's key in [`ModeReport`] maps.
const CLAIM_FIRST: &str = "claim_first";

/// The verdict for `expectation` given each mode's report and the harness problems seen
/// (empty when the harness worked).
pub fn verdict(
    expectation: Expectation,
    modes: &BTreeMap<String, ModeReport>,
    harness: &[String],
) -> Verdict {
    let mut reasons: Vec<String> = harness.iter().map(|h| format!("harness: {h}")).collect();
    let mut outcome = if harness.is_empty() {
        Outcome::Pass
    } else {
        Outcome::Unknown
    };
    for (name, m) in modes {
        if m.lost < 0 {
            outcome = outcome.worst(Outcome::Unknown);
            reasons.push(format!(
                "harness: {name}: lost = {} < 0 (more increments than sections; a rig bug)",
                m.lost
            ));
        }
    }
    if modes.is_empty() {
        outcome = outcome.worst(Outcome::Unknown);
        reasons.push("harness: no mode reported".into());
    }
    let mut failed_modes: Vec<String> = Vec::new();
    let mut check = |mode: &str, ok: bool, text: String| {
        if !ok {
            outcome = outcome.worst(Outcome::Fail);
            if !failed_modes.iter().any(|m| m == mode) {
                failed_modes.push(mode.to_owned());
            }
        }
        reasons.push(format!("{} {text}", if ok { "ok:" } else { "FAILED:" }));
    };
    match expectation {
        Expectation::SafeAndAvailable | Expectation::UnavailableButSafe => {
            for (name, m) in modes {
                check(
                    name,
                    m.exclusion_violations == 0,
                    format!(
                        "{name}: {} exclusion violations (want 0)",
                        m.exclusion_violations
                    ),
                );
                // Negative is a rig bug, reported above as unknown; not a safety failure.
                check(
                    name,
                    m.lost <= 0,
                    format!("{name}: lost {} (want 0)", m.lost),
                );
                if expectation == Expectation::SafeAndAvailable {
                    check(
                        name,
                        m.sections > 0,
                        format!(
                            "{name}: {} sections completed (want > 0: available)",
                            m.sections
                        ),
                    );
                } else {
                    check(
                        name,
                        m.acquire_errors > 0,
                        format!(
                            "{name}: {} acquires failed on unreachable nodes (want > 0: the majority loss was felt, cleanly)",
                            m.acquire_errors
                        ),
                    );
                }
            }
        }
        Expectation::MayViolateFencingHolds => {
            match modes.get(CLAIM_FIRST) {
                Some(m) => check(
                    CLAIM_FIRST,
                    m.lost <= 0,
                    format!("{CLAIM_FIRST}: lost {} (want 0)", m.lost),
                ),
                None => check(CLAIM_FIRST, false, format!("{CLAIM_FIRST}: did not run")),
            }
            for (name, m) in modes.iter().filter(|(n, _)| *n != CLAIM_FIRST) {
                reasons.push(format!(
                    "reported: {name}: lost {}, {} exclusion violations, {} rejected",
                    m.lost, m.exclusion_violations, m.rejected
                ));
            }
        }
    }
    Verdict {
        outcome,
        reasons,
        failed_modes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(sections: u64, lost: i64, violations: u64, errors: u64) -> ModeReport {
        ModeReport {
            sections,
            lost,
            rejected: 0,
            exclusion_violations: violations,
            acquire_attempts: 10,
            acquire_failures: 1,
            acquire_errors: errors,
            acquire_p50_us: 1,
            acquire_p99_us: 2,
            stalls: 0,
            final_value: sections as i64 - lost,
        }
    }

    fn modes(none: ModeReport, claim: ModeReport) -> BTreeMap<String, ModeReport> {
        BTreeMap::from([
            ("none".to_owned(), none),
            ("write_only".to_owned(), mode(10, 0, 0, 0)),
            ("claim_first".to_owned(), claim),
        ])
    }

    #[test]
    fn safe_and_available() {
        let good = modes(mode(10, 0, 0, 0), mode(10, 0, 0, 0));
        let v = verdict(Expectation::SafeAndAvailable, &good, &[]);
        assert_eq!(v.outcome, Outcome::Pass, "{:?}", v.reasons);
        assert_eq!(v.reasons.len(), 9);
        let lost = modes(mode(10, 2, 0, 0), mode(10, 0, 0, 0));
        assert_eq!(
            verdict(Expectation::SafeAndAvailable, &lost, &[]).outcome,
            Outcome::Fail
        );
        let idle = modes(mode(0, 0, 0, 0), mode(10, 0, 0, 0));
        assert_eq!(
            verdict(Expectation::SafeAndAvailable, &idle, &[]).outcome,
            Outcome::Fail
        );
    }

    #[test]
    fn unavailable_needs_clean_acquire_errors() {
        let felt = modes(mode(3, 0, 0, 4), mode(3, 0, 0, 2));
        let mut all = felt.clone();
        all.insert("write_only".into(), mode(3, 0, 0, 1));
        assert_eq!(
            verdict(Expectation::UnavailableButSafe, &all, &[]).outcome,
            Outcome::Pass
        );
        assert_eq!(
            verdict(Expectation::UnavailableButSafe, &felt, &[]).outcome,
            Outcome::Fail
        );
    }

    #[test]
    fn fencing_holds_ignores_unfenced_losses_but_not_claim_first() {
        let unfenced = modes(mode(10, 5, 3, 0), mode(10, 0, 0, 0));
        let v = verdict(Expectation::MayViolateFencingHolds, &unfenced, &[]);
        assert_eq!(v.outcome, Outcome::Pass, "{:?}", v.reasons);
        assert!(v.reasons.iter().any(|r| r.contains("none: lost 5")));
        let fenced = modes(mode(10, 0, 0, 0), mode(10, 1, 0, 0));
        assert_eq!(
            verdict(Expectation::MayViolateFencingHolds, &fenced, &[]).outcome,
            Outcome::Fail
        );
    }

    #[test]
    fn harness_problems_are_unknown_unless_safety_failed() {
        let good = modes(mode(10, 0, 0, 0), mode(10, 0, 0, 0));
        let v = verdict(
            Expectation::SafeAndAvailable,
            &good,
            &["fault left unhealed".into()],
        );
        assert_eq!(v.outcome, Outcome::Unknown);
        assert!(v.reasons[0].starts_with("harness:"));
        let negative = modes(mode(10, -1, 0, 0), mode(10, 0, 0, 0));
        assert_eq!(
            verdict(Expectation::SafeAndAvailable, &negative, &[]).outcome,
            Outcome::Unknown
        );
    }
}
