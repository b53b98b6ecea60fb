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
