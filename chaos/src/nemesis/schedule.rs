//! Schedules: which fault hits which targets, from when to when (since the run's start).
//!
//! A schedule is plain data, so it is printed in the report as planned, and the same
//! (recipe, duration, nodes, workers, seed) always gives the same schedule.
//! [`windows`] is the seeded timeline recipes build on: non-overlapping fault windows
//! between a quiet lead-in and a quiet tail, so the run starts healthy and ends healed.

use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;
use serde::{Serialize, Serializer};

use super::error::NemesisError;
use super::fault::{Fault, PartitionVia, Targets};
use crate::cluster::Flavour;

/// Upper bound on the windows one schedule may hold.
pub const MAX_WINDOWS: usize = 64;

fn as_ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One fault on some targets during `[start, end)` of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduledFault {
    /// What.
    pub fault: Fault,
    /// On whom.
    pub targets: Targets,
    /// Applied at (since the run's start); serialized as `start_ms`.
    #[serde(rename = "start_ms", serialize_with = "as_ms")]
    pub start: Duration,
    /// Healed at; serialized as `end_ms`.
    #[serde(rename = "end_ms", serialize_with = "as_ms")]
    pub end: Duration,
}

/// A list of faults on a timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Schedule {
    /// Seed it was generated from.
    pub seed: u64,
    /// Length of the run it was made for; serialized as `duration_ms`.
    #[serde(rename = "duration_ms", serialize_with = "as_ms")]
    pub duration: Duration,
    /// The faults, by start time.
    pub faults: Vec<ScheduledFault>,
}

/// What a cluster can take, for [`Schedule::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Number of primaries.
    pub nodes: usize,
    /// Number of workers (for client-side faults).
    pub workers: usize,
    /// Whether the cluster has a proxy layer.
    pub proxy: bool,
    /// Whether `docker network disconnect` is available.
    pub network_partitions: bool,
    /// Server flavour (clock faults are Valkey-only).
    pub flavour: Flavour,
    /// Whether a [`super::WorkerControl`] is attached.
    pub worker_control: bool,
}

impl Schedule {
    /// Check every entry fits: targets in range and of the right kind, windows ordered, and
    /// the cluster can do each fault. Returns the first problem.
    pub fn validate(&self, caps: &Capabilities) -> Result<(), NemesisError> {
        for (index, sf) in self.faults.iter().enumerate() {
            let fault = sf.fault.name();
            let bad = |reason: String| NemesisError::InvalidSchedule {
                index,
                fault,
                reason,
            };
            if sf.end < sf.start {
                return Err(bad(format!(
                    "ends ({:?}) before it starts ({:?})",
                    sf.end, sf.start
                )));
            }
            match (&sf.targets, sf.fault.targets_workers()) {
                (Targets::Nodes(n), false) => {
                    if let Some(bad_node) = n.iter().find(|n| n.0 >= caps.nodes) {
                        return Err(bad(format!(
                            "{bad_node} is out of range: the cluster has {} nodes",
                            caps.nodes
                        )));
                    }
                }
                (Targets::Workers(w), true) => {
                    if !caps.worker_control {
                        return Err(NemesisError::NoWorkerControl { fault });
                    }
                    if let Some(bad_worker) = w.iter().find(|w| w.0 >= caps.workers) {
                        return Err(bad(format!(
                            "{bad_worker} is out of range: the workload has {} workers",
                            caps.workers
                        )));
                    }
                }
                (Targets::Nodes(_), true) => {
                    return Err(bad("targets nodes; it needs Targets::Workers".into()));
                }
                (Targets::Workers(_), false) => {
                    return Err(bad("targets workers; it needs Targets::Nodes".into()));
                }
            }
            if sf.fault.needs_proxy() && !caps.proxy {
                return Err(NemesisError::NoProxy { fault });
            }
            if sf.fault
                == (Fault::Partition {
                    via: PartitionVia::Network,
                })
                && !caps.network_partitions
            {
                return Err(bad(
                    "network partitions need the docker backend; use PartitionVia::Proxy".into(),
                ));
            }
            if matches!(sf.fault, Fault::ClockJump { .. } | Fault::ClockSkew { .. })
                && !caps.flavour.supports_clock_faults()
            {
                return Err(bad(format!(
                    "clock faults are not supported on {}; use --flavour valkey",
                    caps.flavour
                )));
            }
        }
        Ok(())
    }

    /// Time of the last heal (zero for an empty schedule).
    pub fn last_heal(&self) -> Duration {
        self.faults
            .iter()
            .map(|f| f.end)
            .max()
            .unwrap_or(Duration::ZERO)
    }
}

/// How [`windows`] lays out fault windows, as fractions of the run (so the shape is the same
/// for a 10 s test and a 10 min soak) with absolute caps.
#[derive(Debug, Clone, Copy)]
pub struct WindowShape {
    /// Fault duration range, as a fraction of the run.
    pub on: (f64, f64),
    /// Healthy gap range between faults, as a fraction of the run.
    pub off: (f64, f64),
    /// No fault lasts longer than this.
    pub max_on: Duration,
}

/// Seeded, non-overlapping `[start, end)` windows inside `[10 %, 90 %]` of `duration`, at
/// most [`MAX_WINDOWS`]. Always at least one window when `duration` > 0.
pub fn windows(
    rng: &mut StdRng,
    duration: Duration,
    shape: WindowShape,
) -> Vec<(Duration, Duration)> {
    let total = duration.as_millis().min(u128::from(u64::MAX)) as u64;
    if total == 0 {
        return Vec::new();
    }
    let frac = |f: f64| ((total as f64) * f.clamp(0.0, 1.0)) as u64;
    let range = |rng: &mut StdRng, (lo, hi): (f64, f64)| {
        let (lo, hi) = (frac(lo), frac(hi).max(frac(lo)));
        rng.random_range(lo..=hi)
    };
    let max_on = u64::try_from(shape.max_on.as_millis()).unwrap_or(u64::MAX);
    let (first, last) = (frac(0.1), frac(0.9));
    let mut out = Vec::new();
    let mut t = first;
    while out.len() < MAX_WINDOWS {
        let on = range(rng, shape.on).clamp(1, max_on.max(1));
        if t + on > last {
            if out.is_empty() {
                // Too short a run for the shape: one window over the middle of it.
                out.push((first, last.max(first + 1)));
            }
            break;
        }
        out.push((t, t + on));
        t += on + range(rng, shape.off).max(1);
    }
    out.into_iter()
        .map(|(s, e)| (Duration::from_millis(s), Duration::from_millis(e)))
        .collect()
}
