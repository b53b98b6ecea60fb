//! Scenarios: a fault recipe (or timeline) plus what the run should show — as data.
//!
//! # Map
//! - this file: [`Scenario`] (the scenario file model's root), the built-ins
//!   [`SCENARIOS`] and [`find`], [`Scenario::schedule`].
//! - [`expectation`]: [`Expectation`], what a run must show, and [`Anomaly`].
//! - [`model`]: how faults are written down: a seeded [`Recipe`] (fault kinds with
//!   parameter ranges, a [`TargetRule`], a window shape) or a timeline of [`TimedFault`]s.
//! - [`generate`]: the one generator that turns either into a [`Schedule`].
//! - [`recipes`]: the built-in scenarios, expressed in that model.
//! - [`validate`]: rules beyond the types ([`SpecError`]), and whether a scenario fits a run.
//! - [`file`](mod@file): scenario files (`chaos run --scenario-file x.toml`), with errors that name
//!   the file, line and field.
//!
//! A scenario says which faults happen when, and how the workload is shaped so they can
//! bite ([`Scenario::work`], [`Scenario::pause_rate`]); the workload and the checker decide
//! what a run did, and compare it with [`Scenario::expectation`].
//!
//! Three scenarios exist to SHOW the lock's known failures ([`Expectation::MustShow`]): a
//! rig that does not see them there is blind, and fails.
//!
//! # Scenarios as files
//! `chaos scenarios --json` prints every built-in in the file format (`--toml NAME` one
//! of them as TOML); copy one, edit it, and play it with `chaos run --scenario-file FILE`
//! (TOML, or JSON when the name ends in `.json`). For example `kill-minority` with faults
//! of a minute:
//!
//! ```toml
//! name = "kill-minority-60s"
//! about = "SIGKILL a random minority for up to a minute, start it again; repeat"
//! expectation = "safe-and-available"   # or unavailable-but-safe, lock-holds, tokens-grow, may-violate-fencing-holds,
//!                                      # must-show-lost-update, must-show-exclusion-violation
//! work = "run"                         # or "to-validity", or a duration: "100ms"
//! pause_rate = 0.0
//! amnesia_split = false
//! # split_clock_step = { back_s = [30, 60], forward_s = [60, 120] }   # with amnesia_split only
//! clients = "per-worker"               # or "shared": a mode's workers share one lock client
//! proxied = "all"                      # or "first-worker": proxy faults hit worker 0 only
//! ttl = "1s"                           # optional: this scenario's lease TTL instead of --ttl
//! seed = 7                             # optional: fixed schedule whatever --seed says
//!
//! [recipe]
//! faults = [{ kind = "kill" }]         # several: one drawn per window
//! targets = "minority"                 # one, one-of-minority, majority, all, { nodes = [0, 2] }
//! window = { on = [0.3, 0.4], off = [0.05, 0.1], max_on = "60s" }
//! ```
//!
//! or faults at fixed times instead of `[recipe]`:
//!
//! ```toml
//! [[timeline]]
//! fault = { kind = "slow", latency_ms = [200, 400], jitter_pct = 10 }
//! targets = { nodes = [1] }
//! start = "2s"                         # or a share of the run: "10%"
//! end = "6s"
//! repeat = { every = "1s", lasting = "200ms" }   # optional: a short window every second
//! ```
//!
//! YAML is not read: TOML and JSON are the formats. `docs/schema/scenario.schema.json`
//! describes the model for editors.

pub mod expectation;
pub mod file;
pub mod generate;
pub mod model;
pub mod recipes;
pub mod validate;

use std::sync::LazyLock;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

pub use expectation::{Anomaly, Expectation};
pub use model::{
    At, Clients, ClockStep, FaultSpec, Proxied, Recipe, Repeat, TargetRule, TimedFault, ValueRange,
    WindowSpec, Work,
};
pub use recipes::{CLIENT_PAUSE_RATE, LONG_WORK};
pub use validate::SpecError;

use crate::nemesis::Schedule;

/// The run a schedule is made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Length of the run.
    pub duration: Duration,
    /// Number of primaries.
    pub nodes: usize,
    /// Number of workload workers (client-side faults pick among them).
    pub workers: usize,
}

/// A scenario: its faults and what the run should show. Built-ins are in [`SCENARIOS`];
/// files deserialize into this (unknown fields are refused).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// `validate::check`: exactly one of the two.
#[schemars(extend("oneOf" = [{ "required": ["recipe"] }, { "required": ["timeline"] }]))]
pub struct Scenario {
    /// E.g. `"kill-minority"` (letters, digits, `-`, `_`, `.`).
    #[serde(deserialize_with = "name")]
    #[schemars(pattern(validate::NAME_PATTERN))]
    pub name: String,
    /// One line: what happens.
    #[serde(default)]
    pub about: String,
    /// What the run should show.
    pub expectation: Expectation,
    /// Work inside each critical section.
    #[serde(default)]
    pub work: Work,
    /// Probability that a worker pauses itself right before its write, while it holds the
    /// lease (0: never); see [`crate::run::pause`]. Worker processes stop (`SIGSTOP`); with
    /// [`Clients::Shared`] the worker's task sleeps while its siblings go on.
    #[serde(default, deserialize_with = "rate")]
    #[schemars(range(min = 0, max = 1))]
    pub pause_rate: f64,
    /// Kleppmann's amnesia case, driven by the workload's events rather than a timeline:
    /// worker 0 of each mode reaches only a bare majority, and one node of it restarts
    /// empty whenever such a worker is granted the lock (see [`crate::run::split`]).
    #[serde(default)]
    pub amnesia_split: bool,
    /// With `amnesia_split`: the emptied node's wall clock steps back or forward right
    /// after each restart, before any client reaches it, so its `uptime_in_seconds` reads
    /// negative or overstated (libfaketime: Valkey only; see [`ClockStep`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_clock_step: Option<ClockStep>,
    /// A late fence retirement, driven by the workload: worker 0 of each mode (alone
    /// through the proxies: `proxied = "first-worker"`) ends its sections with
    /// `retire_fence`, whose requests the rig holds on the way to the nodes past the keys'
    /// expiry; a correct lock's retirement then deletes nothing (see
    /// [`crate::run::retire`]). Our lock only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub late_retire: bool,
    /// Whether a mode's workers each have their own lock client (the default) or share one.
    #[serde(default)]
    pub clients: Clients,
    /// Which workers reach the nodes through the proxies: all (the default), or only
    /// worker 0 of each mode, so that proxy faults are one client's network faults.
    #[serde(default)]
    pub proxied: Proxied,
    /// This scenario's lease TTL (`"1s"`); `None`: the run's `--ttl`. A scenario whose
    /// faults are timed against the per-node deadline (a tenth of the TTL) sets it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "model::human_duration::option"
    )]
    #[schemars(with = "Option<model::human_duration::HumanDuration>")]
    pub ttl: Option<std::time::Duration>,
    /// This scenario's own seed; `None`: derived from the run's `--seed` (see
    /// [`crate::run::suite::scenario_seed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Seeded fault windows (exactly one of `recipe` and `timeline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<Recipe>,
    /// Faults at fixed times (`[]`: none scheduled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Vec<TimedFault>>,
}

fn name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    validate::check_name(&s).map_err(serde::de::Error::custom)?;
    Ok(s)
}

fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let r = f64::deserialize(d)?;
    validate::check_rate(r).map_err(serde::de::Error::custom)?;
    Ok(r)
}

impl Scenario {
    /// Whether its pauses are sleeps of one task of a shared client rather than stops of
    /// a worker process (a process cannot share another's client).
    pub fn pauses_tasks(&self) -> bool {
        self.pause_rate > 0.0 && self.clients == Clients::Shared
    }

    /// Whether every fault of the scenario is one the lock's guards claim to see — a node
    /// back empty (the restart quarantine), a clock jump (the clock-jump guard), a node
    /// back empty whose clock then steps (both) — with no client paused: then a guarded
    /// lock (`ours-guarded`) must keep its holders apart and its tokens growing, whatever
    /// the expectation says of a textbook Redlock.
    pub fn within_guards(&self) -> bool {
        if self.pause_rate > 0.0 {
            return false;
        }
        let recipe = self.recipe.iter().flat_map(|r| r.faults.iter());
        let timeline = self.timeline.iter().flatten().map(|t| &t.fault);
        let mut faults = recipe.chain(timeline).peekable();
        let any = faults.peek().is_some();
        let seen =
            faults.all(|f| matches!(f, FaultSpec::ClockJump { .. } | FaultSpec::RestartWipe {}));
        (self.amnesia_split || any) && seen
    }

    /// The schedule for a run of `duration` on `nodes` primaries with `workers` workers;
    /// the same arguments always give the same schedule.
    pub fn schedule(
        &self,
        duration: Duration,
        nodes: usize,
        workers: usize,
        seed: u64,
    ) -> Schedule {
        let mut rng = StdRng::seed_from_u64(seed);
        let shape = Shape {
            duration,
            nodes,
            workers,
        };
        let mut faults = match (&self.recipe, &self.timeline) {
            (Some(r), _) => generate::recipe(r, &mut rng, &shape),
            (None, Some(t)) => generate::timeline(t, &mut rng, &shape),
            (None, None) => Vec::new(),
        };
        faults.retain(|f| !f.targets.is_empty());
        faults.sort_by_key(|f| f.start);
        Schedule {
            seed,
            duration,
            faults,
        }
    }

    /// Every fault kind it may schedule.
    pub fn fault_kinds(&self) -> impl Iterator<Item = &FaultSpec> {
        let recipe = self.recipe.iter().flat_map(|r| r.faults.iter());
        let timeline = self.timeline.iter().flatten().map(|t| &t.fault);
        recipe.chain(timeline)
    }

    /// Whether its faults include clock jumps, skews or steps (libfaketime: Valkey only).
    pub fn needs_clock_faults(&self) -> bool {
        self.split_clock_step.is_some()
            || self
                .fault_kinds()
                .any(|f| matches!(f, FaultSpec::ClockJump { .. } | FaultSpec::ClockSkew { .. }))
    }

    /// Whether it is one of the built-ins, unchanged.
    pub fn is_builtin(&self) -> bool {
        SCENARIOS.iter().any(|s| s == self)
    }
}

/// Every built-in scenario, in the order `chaos scenarios` lists them (see [`recipes`]).
pub static SCENARIOS: LazyLock<Vec<Scenario>> = LazyLock::new(recipes::builtins);

/// The built-in scenario called `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}
