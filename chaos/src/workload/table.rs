//! The fencing table: every stall rate × mode × run, run concurrently, summarised.
//!
//! Settings are independent — each has its own counter row and its own lock — so they run
//! side by side, at most `jobs` at a time. Most of a run is waiting (work, stalls, TTL
//! expiry), so a handful of concurrent runs fit on two cores; see `--jobs`.
//!
//! Seeds: a run's seed is derived from the table seed, the rate and the run index, not the
//! mode, so the three modes of a run see the same stall draws.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use fenced_redlock::pg::CounterTable;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::counter::{CounterConfig, RunError, run_counter};
use super::mode::{Mode, Preset};
use super::stall::Stall;
use crate::checker::{RunReport, Summary};

/// Settings of a table.
#[derive(Debug, Clone)]
pub struct TableConfig {
    /// Lock node URLs.
    pub nodes: Vec<String>,
    /// PostgreSQL connection string.
    pub pg_dsn: String,
    /// Stall probabilities.
    pub rates: Vec<f64>,
    /// Modes.
    pub modes: Vec<Mode>,
    /// Runs per rate and mode.
    pub runs: u32,
    /// Timings.
    pub preset: Preset,
    /// Workers per run.
    pub workers: usize,
    /// Sections per run.
    pub sections: u64,
    /// Table seed.
    pub seed: u64,
    /// Runs in flight at once.
    pub jobs: usize,
    /// Budget of each run.
    pub run_timeout: Duration,
    /// The lock's per-node deadline; `None`: the library's default for the TTL.
    pub node_timeout: Option<Duration>,
    /// Completed sections of all runs, counted as they complete.
    pub done: Option<Arc<std::sync::atomic::AtomicU64>>,
}

/// One rate and mode with its runs (the JSON row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// Stall probability.
    #[schemars(range(min = 0, max = 1))]
    pub stall_rate: f64,
    /// Mode.
    pub mode: Mode,
    /// One report per run, in run order.
    pub runs: Vec<RunReport>,
}

/// A finished table (the JSON document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TableResult {
    /// Table seed.
    pub seed: u64,
    /// Rows in rate order, then mode order.
    pub rows: Vec<Row>,
}

impl TableResult {
    /// What a correct lock and resource must never show, one line per finding: an update
    /// lost by claim-first, or an exclusion violation in any run. Empty when the table is
    /// safe (losses without fencing and in write-only are the table's subject, not failures).
    pub fn safety_failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for row in &self.rows {
            for (i, r) in row.runs.iter().enumerate() {
                if row.mode == Mode::ClaimFirst && r.lost != 0 {
                    out.push(format!(
                        "claim_first lost {} at stall rate {} (run {i})",
                        r.lost, row.stall_rate
                    ));
                }
                if r.exclusion_violations > 0 {
                    out.push(format!(
                        "{} exclusion violation(s) in {} at stall rate {} (run {i})",
                        r.exclusion_violations,
                        row.mode.name(),
                        row.stall_rate
                    ));
                }
            }
        }
        out
    }
}

/// Called after each finished run with `(done, total, rate, mode, run, report, elapsed)`.
pub type Progress = dyn Fn(usize, usize, f64, Mode, u32, &RunReport, Duration) + Send + Sync;

/// Runs the table.
///
/// # Errors
/// The first failing run's [`RunError`]; runs still in flight are dropped.
pub async fn run_table(cfg: TableConfig, progress: Arc<Progress>) -> Result<TableResult, RunError> {
    if cfg.jobs == 0 {
        return Err(RunError::Invalid("jobs = 0; use at least 1".into()));
    }
    // Once, before the runs: concurrent `CREATE TABLE IF NOT EXISTS` can still collide.
    let admin = crate::pg::connect(&cfg.pg_dsn).await?;
    CounterTable::default()
        .create_if_missing(&admin)
        .await
        .map_err(|source| RunError::Pg { worker: 0, source })?;
    drop(admin);
    let limit = Arc::new(Semaphore::new(cfg.jobs));
    let total = cfg.rates.len() * cfg.modes.len() * cfg.runs as usize;
    let mut tasks = tokio::task::JoinSet::new();
    let mut index = 0i32;
    for (ri, &rate) in cfg.rates.iter().enumerate() {
        for (mi, &mode) in cfg.modes.iter().enumerate() {
            for run in 0..cfg.runs {
                index += 1;
                let run_cfg = CounterConfig {
                    nodes: cfg.nodes.clone(),
                    pg_dsn: cfg.pg_dsn.clone(),
                    mode,
                    workers: cfg.workers,
                    sections: cfg.sections,
                    stall_rate: rate,
                    timing: cfg.preset.timing(),
                    stall: Stall::Sleep,
                    seed: run_seed(cfg.seed, ri, run),
                    row: index,
                    resource: format!("fencing-table:{}:{index}", cfg.seed),
                    acquire_wait: Duration::from_secs(10),
                    run_timeout: cfg.run_timeout,
                    node_timeout: cfg.node_timeout,
                    done: cfg.done.clone(),
                };
                let limit = Arc::clone(&limit);
                tasks.spawn(async move {
                    let _permit = limit.acquire_owned().await;
                    let out = run_counter(run_cfg).await;
                    (ri, mi, run, out)
                });
            }
        }
    }
    let mut rows: Vec<Row> = cfg
        .rates
        .iter()
        .flat_map(|&stall_rate| {
            cfg.modes.iter().map(move |&mode| Row {
                stall_rate,
                mode,
                runs: Vec::new(),
            })
        })
        .collect();
    let mut slots: Vec<Vec<Option<RunReport>>> = vec![vec![None; cfg.runs as usize]; rows.len()];
    let mut done = 0;
    while let Some(joined) = tasks.join_next().await {
        let (ri, mi, run, out) = joined.map_err(|e| RunError::Join(e.to_string()))?;
        let out = out?;
        done += 1;
        let rate = cfg.rates[ri];
        let mode = cfg.modes[mi];
        progress(done, total, rate, mode, run, &out.report, out.elapsed);
        slots[ri * cfg.modes.len() + mi][run as usize] = Some(out.report);
    }
    for (row, slot) in rows.iter_mut().zip(slots) {
        row.runs = slot.into_iter().flatten().collect();
    }
    Ok(TableResult {
        seed: cfg.seed,
        rows,
    })
}

fn run_seed(seed: u64, rate_index: usize, run: u32) -> u64 {
    seed.wrapping_mul(1_000_003)
        .wrapping_add((rate_index as u64) << 32)
        .wrapping_add(u64::from(run))
}

/// The table as text: per rate and mode, stalls, lost (median and range), rejected,
/// exclusion violations and failed acquires (medians over runs, violations and failed
/// acquires summed).
pub fn render(result: &TableResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10} {:<12} {:>6} {:>8} {:>8} {:>16} {:>9} {:>10} {:>12}",
        "stall",
        "mode",
        "runs",
        "stalls",
        "lost",
        "lost range",
        "rejected",
        "violations",
        "acq. failed"
    );
    for row in &result.rows {
        let runs = &row.runs;
        let stalls = Summary::of(runs.iter().map(|r| r.stalls as i64));
        let lost = Summary::of(runs.iter().map(|r| r.lost));
        let rejected = Summary::of(runs.iter().map(|r| r.rejected as i64));
        let violations: u64 = runs.iter().map(|r| r.exclusion_violations).sum();
        let failed: u64 = runs.iter().map(|r| r.acquire_failures).sum();
        let med = |s: Option<Summary>| s.map_or("-".to_owned(), |s| format!("{}", s.median));
        let range = lost.map_or("-".to_owned(), |s| format!("{}..{}", s.min, s.max));
        let _ = writeln!(
            out,
            "{:<10} {:<12} {:>6} {:>8} {:>8} {:>16} {:>9} {:>10} {:>12}",
            format!("{}%", row.stall_rate * 100.0),
            row.mode.name(),
            runs.len(),
            med(stalls),
            med(lost),
            range,
            med(rejected),
            violations,
            failed
        );
    }
    out.push_str("stalls, lost, rejected: median over runs; lost range: min..max; violations: overlapping grant pairs, summed; acq. failed: waiting acquires that ended without the lock (retried), summed\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(lost: i64) -> RunReport {
        RunReport {
            sections: 100,
            stalls: 5,
            lost,
            rejected: 0,
            exclusion_violations: 0,
            acquire_failures: 0,
        }
    }

    #[test]
    fn safety_failures_are_claim_first_losses_and_violations_only() {
        let row = |mode, r| Row {
            stall_rate: 0.01,
            mode,
            runs: vec![r],
        };
        let safe = TableResult {
            seed: 1,
            rows: vec![
                row(Mode::None, report(40)),
                row(Mode::WriteOnly, report(2)),
                row(Mode::ClaimFirst, report(0)),
            ],
        };
        assert!(safe.safety_failures().is_empty());
        let lost = TableResult {
            seed: 1,
            rows: vec![row(Mode::ClaimFirst, report(1))],
        };
        assert_eq!(lost.safety_failures().len(), 1);
        let overlap = TableResult {
            seed: 1,
            rows: vec![row(
                Mode::None,
                RunReport {
                    exclusion_violations: 3,
                    ..report(0)
                },
            )],
        };
        assert!(overlap.safety_failures()[0].contains("3 exclusion violation"));
    }

    #[test]
    fn json_shape() {
        let t = TableResult {
            seed: 7,
            rows: vec![Row {
                stall_rate: 0.05,
                mode: Mode::ClaimFirst,
                runs: vec![report(0)],
            }],
        };
        let v: serde_json::Value = serde_json::to_value(&t).expect("json");
        assert_eq!(v["seed"], 7);
        assert_eq!(v["rows"][0]["mode"], "claim_first");
        assert_eq!(v["rows"][0]["stall_rate"], 0.05);
        let run = &v["rows"][0]["runs"][0];
        for k in [
            "sections",
            "stalls",
            "lost",
            "rejected",
            "exclusion_violations",
        ] {
            assert!(run.get(k).is_some(), "{k}");
        }
    }

    #[test]
    fn render_has_a_line_per_row() {
        let t = TableResult {
            seed: 1,
            rows: vec![
                Row {
                    stall_rate: 0.01,
                    mode: Mode::None,
                    runs: vec![report(3), report(9), report(5)],
                },
                Row {
                    stall_rate: 0.01,
                    mode: Mode::ClaimFirst,
                    runs: vec![report(0)],
                },
            ],
        };
        let text = render(&t);
        assert!(text.contains("none"), "{text}");
        assert!(text.contains("3..9"), "{text}");
        assert_eq!(text.lines().count(), 4);
    }

    #[test]
    fn run_seeds_differ_by_rate_and_run() {
        assert_ne!(run_seed(1, 0, 0), run_seed(1, 1, 0));
        assert_ne!(run_seed(1, 0, 0), run_seed(1, 0, 1));
    }
}
