//! What the runner tells whoever watches a run (progress bars, log lines, tests).

use std::time::Duration;

use super::model::ScenarioReport;

/// A snapshot of a running scenario, sent about once a second.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Scenario name.
    pub scenario: String,
    /// Index of this scenario in the run, from 0, and how many there are.
    pub index: usize,
    /// Number of scenarios in the run.
    pub total: usize,
    /// Time since the scenario started.
    pub elapsed: Duration,
    /// Planned length.
    pub duration: Duration,
    /// Completed sections so far, per mode (`none`, `write_only`, `claim_first`).
    pub sections: Vec<(String, u64)>,
    /// Faults active now, e.g. `freeze n2`.
    pub active_faults: Vec<String>,
}

/// Receives the runner's events. Implementations must be cheap: they are called from the
/// run's task.
pub trait RunObserver: Send + Sync + std::fmt::Debug {
    /// A scenario is about to start.
    fn scenario_started(&self, progress: &Progress);
    /// Periodic snapshot while a scenario runs.
    fn tick(&self, progress: &Progress);
    /// A scenario finished with this report.
    fn scenario_finished(&self, report: &ScenarioReport);
}

/// Ignores everything (library use and tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl RunObserver for Silent {
    fn scenario_started(&self, _: &Progress) {}
    fn tick(&self, _: &Progress) {}
    fn scenario_finished(&self, _: &ScenarioReport) {}
}
