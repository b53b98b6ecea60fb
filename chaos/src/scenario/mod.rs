//! Named scenarios: a fault recipe plus what the run should show.
//!
//! # Map
//! - this file: [`Scenario`], [`Expectation`], the list [`SCENARIOS`] and [`find`].
//! - [`recipes`]: the seeded schedule generators behind each scenario.
//!
//! A scenario says which faults happen when, and how the workload is shaped so they can
//! bite ([`Scenario::work`], [`Scenario::pause_rate`]); the workload and the checker decide
//! what a run did, and compare it with [`Scenario::expectation`].
//!
//! Three scenarios exist to SHOW the lock's known failures ([`Expectation::MustShow`]): a
//! rig that does not see them there is blind, and fails.

pub mod recipes;

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;

use crate::nemesis::{Schedule, ScheduledFault};

/// What a correct lock + fenced resource must show under a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Expectation {
    /// Faults on a minority only: no exclusion violation and nothing lost in any mode, and
    /// the lock stays available (acquire successes > 0 during the run).
    SafeAndAvailable,
    /// A majority is lost for a while: acquires fail cleanly (quorum not reached) while it
    /// lasts, no violation, nothing lost.
    UnavailableButSafe,
    /// Outside the lock's model (amnesia, clock jumps, stalled clients): exclusion
    /// violations and unfenced lost updates may happen and are reported, not failed;
    /// the claim-first fenced mode still loses 0.
    MayViolateFencingHolds,
    /// Built to break the lock: the naive mode `none` must show the anomaly (else the rig
    /// did not observe what it exists to observe), and claim-first still loses 0.
    MustShow(Anomaly),
}

/// What a [`Expectation::MustShow`] scenario must make visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Anomaly {
    /// `none` loses at least one acknowledged increment.
    LostUpdate,
    /// `none` sees at least one pair of overlapping holding windows.
    ExclusionViolation,
}

impl Anomaly {
    /// As a noun phrase: "a lost update".
    pub fn describe(self) -> &'static str {
        match self {
            Anomaly::LostUpdate => "a lost update",
            Anomaly::ExclusionViolation => "an exclusion violation",
        }
    }
}

impl Expectation {
    /// One line, for listings.
    pub fn describe(self) -> &'static str {
        match self {
            Expectation::SafeAndAvailable => "safe and available",
            Expectation::UnavailableButSafe => "unavailable while it lasts, safe",
            Expectation::MayViolateFencingHolds => {
                "violations possible (reported), claim-first loses 0"
            }
            Expectation::MustShow(Anomaly::LostUpdate) => {
                "must show a lost update in none, claim-first loses 0"
            }
            Expectation::MustShow(Anomaly::ExclusionViolation) => {
                "must show an exclusion violation in none, claim-first loses 0"
            }
        }
    }
}

/// How long a critical section works, per scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// The run's setting (`RunConfig::work`, 5 ms).
    Run,
    /// This long: the clock scenarios need sections long enough for a second holder to get
    /// in while the first still works.
    Fixed(Duration),
    /// Until shortly before the end of the validity the lock reported
    /// ([`crate::run::chaos_workload::work_to_validity`]): a lock that overstates its
    /// validity writes after its keys expired, and is caught.
    ToValidity,
}

/// Generates a scenario's faults (see [`recipes`]).
pub type Recipe = fn(&mut StdRng, &Shape) -> Vec<ScheduledFault>;

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

/// A named fault recipe.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// E.g. `"kill-minority"`.
    pub name: &'static str,
    /// One line: what happens.
    pub about: &'static str,
    /// What the run should show.
    pub expectation: Expectation,
    /// Work inside each critical section.
    pub work: Work,
    /// Probability that a worker pauses itself right before its write, while it holds the
    /// lease (0: never); see [`crate::run::pause`].
    pub pause_rate: f64,
    /// Kleppmann's amnesia case, driven by the workload's events rather than a timeline:
    /// worker 0 of each mode reaches only a bare majority, and one node of it restarts
    /// empty whenever such a worker is granted the lock (see [`crate::run::split`]).
    pub amnesia_split: bool,
    recipe: Recipe,
}

impl Scenario {
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
        let mut faults = (self.recipe)(&mut rng, &shape);
        faults.retain(|f| !f.targets.is_empty());
        faults.sort_by_key(|f| f.start);
        Schedule {
            seed,
            duration,
            faults,
        }
    }
}

/// `client-pause`: share of sections that pause (one every 5-15 sections of a worker,
/// the first within 10). Each pause stalls its mode's lock for about a TTL, so a mode
/// manages 5-80 sections a second depending on the machine's load: this gives tens of
/// pauses per minute either way, each 300-600 ms with a 200 ms TTL.
pub const CLIENT_PAUSE_RATE: f64 = 0.1;

/// Section work of the clock scenarios: half a 200 ms TTL, so a holder is still working
/// when keys expire early under it and a second holder gets in.
pub const LONG_WORK: Duration = Duration::from_millis(100);

impl Scenario {
    /// Whether its faults include clock jumps (libfaketime: Valkey only).
    pub fn needs_clock_faults(&self) -> bool {
        self.schedule(Duration::from_secs(60), 5, 1, 0)
            .faults
            .iter()
            .any(|f| matches!(f.fault, crate::nemesis::Fault::ClockJump { .. }))
    }
}

/// Every scenario, in the order `chaos scenarios` lists them.
pub static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "kill-minority",
        about: "SIGKILL a random minority, start it again with its AOF; repeat",
        expectation: Expectation::SafeAndAvailable,
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::kill_minority,
    },
    Scenario {
        name: "pause-minority",
        about: "freeze (SIGSTOP / docker pause) a random minority, then thaw; repeat",
        expectation: Expectation::SafeAndAvailable,
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::pause_minority,
    },
    Scenario {
        name: "partition-minority",
        about: "cut workers off a random minority at its proxy, then repair; repeat",
        expectation: Expectation::SafeAndAvailable,
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::partition_minority,
    },
    Scenario {
        name: "latency",
        about: "100-800 ms (±20 %) reply latency on a random minority (slow acquires); repeat",
        expectation: Expectation::SafeAndAvailable,
        work: Work::ToValidity,
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::latency,
    },
    Scenario {
        name: "amnesia-restart",
        about: "kill one node and bring it back EMPTY within a second or so; repeat",
        expectation: Expectation::MayViolateFencingHolds,
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::amnesia_restart,
    },
    Scenario {
        name: "clock-jump",
        about: "one node's clock jumps 20-60 s forward for a few seconds (Valkey only); repeat",
        expectation: Expectation::MayViolateFencingHolds,
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::clock_jump,
    },
    Scenario {
        name: "client-stall",
        about: "one worker stalls for 15-30 % of the run (longer than a short TTL); repeat",
        expectation: Expectation::MayViolateFencingHolds,
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::client_stall,
    },
    Scenario {
        name: "client-pause",
        about: "workers pause (SIGSTOP) right before their write, 1.5-3 × TTL, one in 5-15 sections",
        expectation: Expectation::MustShow(Anomaly::LostUpdate),
        work: Work::Run,
        pause_rate: CLIENT_PAUSE_RATE,
        amnesia_split: false,
        recipe: recipes::none,
    },
    Scenario {
        name: "amnesia-split",
        about: "worker 0 reaches only a bare majority; on its grants one node of it restarts EMPTY (TTL 3 s, it holds to the end); others gather that node and the rest",
        expectation: Expectation::MustShow(Anomaly::ExclusionViolation),
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: true,
        recipe: recipes::none,
    },
    Scenario {
        name: "clock-jump-majority",
        about: "a quorum of nodes' clocks jump 20-60 s forward at once (Valkey only); 100 ms sections; repeat",
        expectation: Expectation::MustShow(Anomaly::ExclusionViolation),
        work: Work::Fixed(LONG_WORK),
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::clock_jump_majority,
    },
    Scenario {
        name: "majority-loss",
        about: "kill a quorum of nodes for 20-35 % of the run, then start them again",
        expectation: Expectation::UnavailableButSafe,
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::majority_loss,
    },
    Scenario {
        name: "mixed",
        about: "one minority fault after another: kill, restart, freeze, partition, black hole, latency",
        expectation: Expectation::SafeAndAvailable,
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: false,
        recipe: recipes::mixed,
    },
];

/// The scenario called `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}
