//! Watching a run: progress bars on a terminal, plain periodic lines in CI logs.
//!
//! [`observer_for_terminal`] picks one by whether stderr (where both draw, keeping stdout
//! for results) is a terminal. Both are [`RunObserver`]s the runner calls about once a second.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::model::{Outcome, ScenarioReport, or_unknown};
use super::observer::{Progress, RunObserver};

/// How often the plain observer writes a line while a scenario runs: often enough to show
/// a CI job is alive, rarely enough that a 10-minute scenario is 60 lines, not 600.
pub const DEFAULT_LINE_INTERVAL: Duration = Duration::from_secs(10);

/// Bars when stderr is a terminal, plain lines every [`DEFAULT_LINE_INTERVAL`] otherwise.
pub fn observer_for_terminal() -> Box<dyn RunObserver> {
    if std::io::stderr().is_terminal() {
        Box::new(BarsObserver::new())
    } else {
        Box::new(LineObserver::new(std::io::stderr(), DEFAULT_LINE_INTERVAL))
    }
}

/// `12s/60s · none 120 · write_only 118 · faults: freeze n2`
fn status(p: &Progress) -> String {
    let mut s = format!("{}/{}", secs(p.elapsed), secs(p.duration));
    for (mode, n) in &p.sections {
        s.push_str(&format!(" · {mode} {n}"));
    }
    if p.active_faults.is_empty() {
        s.push_str(" · no faults");
    } else {
        s.push_str(&format!(" · faults: {}", p.active_faults.join(", ")));
    }
    s
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

fn verdict_line(r: &ScenarioReport) -> String {
    let word = match r.verdict.outcome {
        Outcome::Pass => "PASS",
        Outcome::Fail => "FAIL (safety)",
        Outcome::Unavailable => "UNAVAILABLE (liveness)",
        Outcome::Unknown => "UNKNOWN",
        Outcome::NotApplicable => "N/A",
    };
    let modes: Vec<String> = r
        .modes
        .iter()
        .map(|(m, s)| {
            format!(
                "{m}: lost {} violations {}",
                or_unknown(s.lost),
                s.exclusion_violations
            )
        })
        .collect();
    let mut line = format!("{word} {} — {}", r.name, modes.join("; "));
    if r.verdict.outcome != Outcome::Pass {
        for reason in &r.verdict.reasons {
            line.push_str(&format!("\n    {reason}"));
        }
    }
    line
}

/// Plain lines for logs: one when a scenario starts, one per `every` while it runs, one
/// with the verdict when it ends.
pub struct LineObserver<W> {
    every: Duration,
    state: Mutex<LineState<W>>,
}

struct LineState<W> {
    out: W,
    index: usize,
    total: usize,
    last: Option<Duration>,
}

impl<W> std::fmt::Debug for LineObserver<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineObserver")
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

impl<W: Write + Send> LineObserver<W> {
    /// Writes to `out`, a progress line at most once per `every` of scenario time.
    pub fn new(out: W, every: Duration) -> LineObserver<W> {
        LineObserver {
            every,
            state: Mutex::new(LineState {
                out,
                index: 0,
                total: 0,
                last: None,
            }),
        }
    }

    /// The writer back (tests read what was written).
    pub fn into_inner(self) -> W {
        match self.state.into_inner() {
            Ok(s) => s.out,
            Err(poisoned) => poisoned.into_inner().out,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut LineState<W>) -> R) -> R {
        // A panic elsewhere while holding the lock must not silence the log.
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }
}

impl<W: Write + Send> RunObserver for LineObserver<W> {
    fn scenario_started(&self, p: &Progress) {
        self.with(|s| {
            s.index = p.index;
            s.total = p.total;
            s.last = None;
            // Log writes are best effort: a closed pipe must not stop the run.
            let _ = writeln!(
                s.out,
                "[{}/{}] {}: started ({})",
                p.index + 1,
                p.total,
                p.scenario,
                secs(p.duration)
            );
        });
    }

    fn tick(&self, p: &Progress) {
        self.with(|s| {
            let due = s
                .last
                .is_none_or(|l| p.elapsed.saturating_sub(l) >= self.every);
            if due {
                s.last = Some(p.elapsed);
                let _ = writeln!(
                    s.out,
                    "[{}/{}] {} {}",
                    p.index + 1,
                    p.total,
                    p.scenario,
                    status(p)
                );
            }
        });
    }

    fn scenario_finished(&self, r: &ScenarioReport) {
        self.with(|s| {
            let _ = writeln!(s.out, "[{}/{}] {}", s.index + 1, s.total, verdict_line(r));
            let _ = s.out.flush();
        });
    }
}

/// indicatif bars: the run (scenario N/M) and the current scenario (elapsed of duration,
/// sections per mode, faults active now). Verdicts print above the bars.
#[derive(Debug)]
pub struct BarsObserver {
    multi: MultiProgress,
    run: ProgressBar,
    scenario: Mutex<Option<ProgressBar>>,
}

impl Default for BarsObserver {
    fn default() -> Self {
        Self::new()
    }
}

impl BarsObserver {
    /// Bars drawn on stderr.
    pub fn new() -> BarsObserver {
        Self::with_target(ProgressDrawTarget::stderr())
    }

    /// Bars drawn on `target` (hidden in tests).
    pub fn with_target(target: ProgressDrawTarget) -> BarsObserver {
        let multi = MultiProgress::with_draw_target(target);
        let run = multi.add(ProgressBar::new(0));
        if let Ok(style) =
            ProgressStyle::with_template("{prefix:.bold} scenario {pos}/{len} {wide_msg}")
        {
            run.set_style(style);
        }
        run.set_prefix("chaos");
        BarsObserver {
            multi,
            run,
            scenario: Mutex::new(None),
        }
    }
}

impl RunObserver for BarsObserver {
    fn scenario_started(&self, p: &Progress) {
        self.run.set_length(p.total as u64);
        self.run.set_position(p.index as u64);
        self.run.set_message(p.scenario.clone());
        let bar = self
            .multi
            .add(ProgressBar::new(p.duration.as_millis() as u64));
        if let Ok(style) =
            ProgressStyle::with_template("  {prefix:20} [{bar:30.cyan/blue}] {wide_msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(p.scenario.clone());
        bar.set_message(status(p));
        let mut g = self.scenario.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = g.replace(bar) {
            old.finish_and_clear();
        }
    }

    fn tick(&self, p: &Progress) {
        let g = self.scenario.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = g.as_ref() {
            bar.set_position(p.elapsed.as_millis() as u64);
            bar.set_message(status(p));
        }
    }

    fn scenario_finished(&self, r: &ScenarioReport) {
        let mut g = self.scenario.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = g.take() {
            bar.finish_and_clear();
        }
        let _ = self.multi.println(verdict_line(r));
        self.run.inc(1);
        if self.run.position() >= self.run.length().unwrap_or(0) {
            self.run.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::Verdict;
    use std::collections::BTreeMap;

    fn progress(elapsed: u64) -> Progress {
        Progress {
            scenario: "pause-minority".into(),
            index: 1,
            total: 3,
            elapsed: Duration::from_secs(elapsed),
            duration: Duration::from_secs(60),
            sections: vec![
                ("none".into(), 10 * elapsed),
                ("claim_first".into(), 9 * elapsed),
            ],
            active_faults: if elapsed > 15 {
                vec!["freeze n2".into()]
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn plain_observer_prints_a_line_per_interval_and_the_verdict() {
        let obs = LineObserver::new(Vec::new(), Duration::from_secs(10));
        obs.scenario_started(&progress(0));
        for s in 0..=30 {
            obs.tick(&progress(s));
        }
        obs.scenario_finished(&finished(Outcome::Fail, "claim_first lost 2"));
        let text = String::from_utf8(obs.into_inner()).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "[2/3] pause-minority: started (60s)");
        // Ticks at 0, 10, 20 and 30 s print; the 27 in between do not.
        let ticks: Vec<&&str> = lines.iter().filter(|l| l.contains("/60s")).collect();
        assert_eq!(ticks.len(), 4, "{text}");
        assert!(
            ticks[1].contains("10s/60s · none 100 · claim_first 90 · no faults"),
            "{text}"
        );
        assert!(ticks[2].contains("faults: freeze n2"), "{text}");
        assert!(
            text.contains("[2/3] FAIL (safety) pause-minority"),
            "{text}"
        );
        assert!(text.contains("    claim_first lost 2"), "{text}");
    }

    fn finished(outcome: Outcome, reason: &str) -> ScenarioReport {
        ScenarioReport {
            name: "pause-minority".into(),
            about: String::new(),
            expected: String::new(),
            seed: 1,
            duration_ms: 60_000,
            clients: String::new(),
            faults: vec![],
            modes: BTreeMap::new(),
            verdict: Verdict {
                outcome,
                reasons: vec![reason.into()],
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

    #[test]
    fn the_verdict_line_says_whether_safety_or_liveness_failed() {
        let line = verdict_line(&finished(
            Outcome::Unavailable,
            "FAILED (liveness): none: 0 sections completed (want > 0: available)",
        ));
        assert!(
            line.starts_with("UNAVAILABLE (liveness) pause-minority"),
            "{line}"
        );
        assert!(
            line.contains("\n    FAILED (liveness): none: 0 sections"),
            "{line}"
        );
        let line = verdict_line(&finished(
            Outcome::Fail,
            "FAILED (safety): none: 1 exclusion violations",
        ));
        assert!(line.starts_with("FAIL (safety) pause-minority"), "{line}");
    }

    #[test]
    fn bars_observer_survives_a_whole_run_hidden() {
        let obs = BarsObserver::with_target(ProgressDrawTarget::hidden());
        obs.scenario_started(&progress(0));
        obs.tick(&progress(5));
        obs.scenario_finished(&ScenarioReport {
            name: "x".into(),
            about: String::new(),
            expected: String::new(),
            seed: 0,
            duration_ms: 0,
            clients: String::new(),
            faults: vec![],
            modes: BTreeMap::new(),
            verdict: Verdict {
                outcome: Outcome::Pass,
                reasons: vec![],
                failed_modes: Vec::new(),
            },
            timeline: BTreeMap::new(),
            history: None,
            quorum_probe: None,
            ops: Vec::new(),
            evidence: None,
            evidence_json: None,
        });
        // Started as scenario 2 of 3 (index 1); finishing it counts it done.
        assert_eq!(obs.run.position(), 2);
    }
}
