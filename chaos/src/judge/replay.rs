//! `chaos judge DIR`: a recorded run judged again from its files — each played scenario's
//! evidence and history — by the same [`judge`] the live run used, and compared with what
//! the run wrote. A scenario without evidence (not played, not applicable, or recorded
//! before evidence existed) keeps its recorded verdict and says so.

use std::path::Path;

use super::evidence::{Evidence, EvidenceError};
use super::scenario::judge;
use crate::checker::history::read_jsonl;
use crate::report::{ChaosReport, Outcome, ScenarioReport};

/// One scenario of a recorded run, judged again.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejudged {
    /// The scenario as the run reported it.
    pub recorded: ScenarioReport,
    /// The same report with the numbers, faults and verdict judged again (`None`: no
    /// evidence, the recorded verdict stands).
    pub judged: Option<ScenarioReport>,
}

impl Rejudged {
    /// Whether judging again changed nothing the run reported (true without evidence).
    pub fn same(&self) -> bool {
        self.judged.as_ref().is_none_or(|j| *j == self.recorded)
    }

    /// The differences, one line each (verdict outcome and reasons, then which modes'
    /// numbers differ): empty when [`Self::same`].
    pub fn differences(&self) -> Vec<String> {
        let Some(j) = &self.judged else {
            return Vec::new();
        };
        let r = &self.recorded;
        let mut out = Vec::new();
        if j.verdict.outcome != r.verdict.outcome {
            out.push(format!(
                "outcome: recorded {:?}, judged again {:?}",
                r.verdict.outcome, j.verdict.outcome
            ));
        }
        for line in &r.verdict.reasons {
            if !j.verdict.reasons.contains(line) {
                out.push(format!("only recorded: {line}"));
            }
        }
        for line in &j.verdict.reasons {
            if !r.verdict.reasons.contains(line) {
                out.push(format!("only judged again: {line}"));
            }
        }
        for (name, m) in &j.modes {
            if r.modes.get(name) != Some(m) {
                out.push(format!("{name}: its numbers differ"));
            }
        }
        if j.faults != r.faults {
            out.push("the fault windows differ".into());
        }
        if j.timeline != r.timeline {
            out.push("the timeline differs".into());
        }
        out
    }
}

/// A recorded run judged again.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The run as recorded, with every scenario's report replaced by the one judged again
    /// (where it had evidence) and the run's verdict recomputed from them.
    pub report: ChaosReport,
    /// Per scenario, in the run's order.
    pub scenarios: Vec<Rejudged>,
}

/// Judges the run recorded in `dir` again (see the module docs).
///
/// # Errors
/// [`EvidenceError`]: `report.json`, an evidence file or a history file missing or
/// unreadable.
pub fn rejudge(dir: &Path) -> Result<Replay, EvidenceError> {
    let recorded = crate::report::load(dir).map_err(|e| EvidenceError::Format {
        path: dir.join(crate::report::model::REPORT_FILE),
        why: e.to_string(),
    })?;
    let mut scenarios = Vec::with_capacity(recorded.scenarios.len());
    for s in &recorded.scenarios {
        let judged = match &s.evidence {
            None => None,
            Some(rel) => Some(rejudge_one(dir, s, rel)?),
        };
        scenarios.push(Rejudged {
            recorded: s.clone(),
            judged,
        });
    }
    let mut report = recorded.clone();
    report.scenarios = scenarios
        .iter()
        .map(|r| r.judged.clone().unwrap_or_else(|| r.recorded.clone()))
        .collect();
    report.verdict = run_verdict(&recorded, &report.scenarios);
    Ok(Replay { report, scenarios })
}

/// `s` judged again from the evidence at `rel` and its history.
fn rejudge_one(dir: &Path, s: &ScenarioReport, rel: &str) -> Result<ScenarioReport, EvidenceError> {
    let evidence = Evidence::load(&dir.join(rel))?;
    let ops = match &s.history {
        None => Vec::new(),
        Some(h) => {
            let path = dir.join(h);
            match std::fs::File::open(&path) {
                Ok(f) => read_jsonl(std::io::BufReader::new(f))
                    .map_err(|why| EvidenceError::Format { path, why })?,
                // A scenario whose workers did nothing wrote no history file.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(source) => {
                    return Err(EvidenceError::Io {
                        action: "reading",
                        path,
                        source,
                    });
                }
            }
        }
    };
    let j = judge(&evidence, &ops);
    let mut out = s.clone();
    out.faults = j.faults;
    out.modes = j.modes;
    out.timeline = j.timeline;
    out.verdict = j.verdict;
    out.quorum_probe = j.quorum_probe;
    Ok(out)
}

/// The run's verdict from its scenarios judged again, keeping what the run itself added
/// (an interruption, a cluster that would not come down: a verdict worse than all its
/// scenarios'), and unknown when nothing was played.
fn run_verdict(recorded: &ChaosReport, scenarios: &[ScenarioReport]) -> Outcome {
    let worst = |ss: &[ScenarioReport]| {
        ss.iter()
            .fold(Outcome::Pass, |acc, s| acc.worst(s.verdict.outcome))
    };
    let run_level = if recorded.verdict != worst(&recorded.scenarios) {
        recorded.verdict
    } else {
        Outcome::Pass
    };
    if scenarios
        .iter()
        .all(|s| s.verdict.outcome == Outcome::NotApplicable)
    {
        return Outcome::Unknown;
    }
    scenarios
        .iter()
        .fold(run_level, |acc, s| acc.worst(s.verdict.outcome))
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::path::PathBuf;

    use super::*;

    /// The committed recorded run `name` (`fixtures/NAME`, every file gzipped) unpacked
    /// into a fresh directory, as `chaos run --report` wrote it.
    fn unpacked(name: &str) -> tempfile::TempDir {
        let from: PathBuf = [env!("CARGO_MANIFEST_DIR"), "src/judge/fixtures", name]
            .iter()
            .collect();
        let to = tempfile::tempdir().expect("tempdir");
        let mut stack = vec![from.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("fixture dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let rel = path.strip_prefix(&from).expect("inside");
                let out = to.path().join(rel.with_extension(""));
                std::fs::create_dir_all(out.parent().expect("parent")).expect("mkdir");
                let mut text = Vec::new();
                flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("open"))
                    .read_to_end(&mut text)
                    .expect("gunzip");
                std::fs::write(out, text).expect("write");
            }
        }
        to
    }

    /// Judging a committed run again gives what the live run reported, scenario by
    /// scenario, numbers, faults, timeline and reasons included. A change to a check
    /// that changes a recorded verdict fails here: if it is meant, re-judge the fixture
    /// (`chaos judge --write`, then gzip the files back) and say why in the commit.
    fn replays_as_recorded(name: &str, outcome: Outcome) -> Replay {
        let dir = unpacked(name);
        let replay = rejudge(dir.path()).expect("judged again");
        for s in &replay.scenarios {
            assert!(
                s.judged.is_some(),
                "{name}: {} has evidence",
                s.recorded.name
            );
            assert!(
                s.same(),
                "{name}: {}: {:#?}",
                s.recorded.name,
                s.differences()
            );
        }
        assert_eq!(replay.report.verdict, outcome, "{name}");
        replay
    }

    #[test]
    fn a_busy_machine_run_of_a_correct_lock_is_judged_again_as_it_passed() {
        // `latency` beside `stress-ng --cpu 4` on 2 cores: the stalls the watcher saw are
        // in the evidence, and excuse what they excused live.
        let replay = replays_as_recorded("busy-latency", Outcome::Pass);
        let modes = &replay.report.scenarios[0].modes;
        assert!(modes.values().all(|m| m.leaks.stalls > 0), "{modes:#?}");
    }

    #[test]
    fn a_broken_lock_is_judged_again_as_it_failed_with_the_same_reasons() {
        // `--lock quorum-of-one`: a grant on one vote; holders overlap in every mode.
        let replay = replays_as_recorded("quorum-of-one-kill-minority", Outcome::Fail);
        let reasons = &replay.report.scenarios[0].verdict.reasons;
        assert!(
            reasons
                .iter()
                .any(|r| r.starts_with("FAILED (safety): claim_first:")
                    && r.contains("exclusion violations")),
            "{reasons:#?}"
        );
    }

    #[test]
    fn evidence_that_says_otherwise_is_judged_otherwise_and_the_difference_named() {
        // The same broken run with its history emptied: no lost update, no acquire is
        // left to judge tokens by; the judgement changes and says where.
        let dir = unpacked("quorum-of-one-kill-minority");
        for entry in std::fs::read_dir(dir.path().join("history")).expect("history") {
            std::fs::write(entry.expect("entry").path(), "").expect("emptied");
        }
        let replay = rejudge(dir.path()).expect("judged again");
        let s = &replay.scenarios[0];
        assert!(!s.same());
        let diff = s.differences();
        assert!(
            diff.iter().any(|d| d.starts_with("only recorded: ")),
            "{diff:#?}"
        );
    }

    #[test]
    fn a_directory_without_a_run_is_refused_with_what_to_give() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = rejudge(dir.path()).expect_err("no report.json").to_string();
        assert!(err.contains("report.json"), "{err}");
    }
}
