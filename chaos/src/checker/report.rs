//! Per-run results and their summary over repeated runs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What one run of the counter workload did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunReport {
    /// Completed critical sections (the target).
    pub sections: u64,
    /// Sections that stalled past the TTL before writing.
    pub stalls: u64,
    /// Increments missing from the final value.
    pub lost: i64,
    /// Writes or claims the database rejected as stale (each one was redone).
    pub rejected: u64,
    /// Pairs of grants whose hold windows overlapped.
    pub exclusion_violations: u64,
    /// Waiting acquires that ended without the lock (contention, slow or unreachable
    /// nodes), each retried: the harness rides them out instead of failing the run.
    #[serde(default)]
    pub acquire_failures: u64,
}

/// Increments missing from the counter: `sections − final value`. Negative would mean
/// more increments landed than sections completed, which only a bug in the workload could do.
pub fn lost(sections: u64, final_value: i64) -> i64 {
    i64::try_from(sections)
        .unwrap_or(i64::MAX)
        .saturating_sub(final_value)
}

/// Median and range of a number over runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest.
    pub min: i64,
    /// Largest.
    pub max: i64,
    /// Sum over runs.
    pub total: i64,
}

impl Summary {
    /// Summary of `values`; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = i64>) -> Option<Summary> {
        let mut v: Vec<i64> = values.into_iter().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2] as f64
        } else {
            (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
        };
        Some(Summary {
            median,
            min: v[0],
            max: v[n - 1],
            total: v.iter().sum(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_is_target_minus_value() {
        assert_eq!(lost(10_000, 8_350), 1_650);
        assert_eq!(lost(10, 10), 0);
    }

    #[test]
    fn summary_median_and_range() {
        assert_eq!(Summary::of([]), None);
        let s = Summary::of([5, 1, 3]).expect("values");
        assert_eq!((s.median, s.min, s.max, s.total), (3.0, 1, 5, 9));
        let s = Summary::of([4, 1, 3, 2]).expect("values");
        assert_eq!(s.median, 2.5);
    }
}
