//! The `report.json` schema.
//!
//! One [`ChaosReport`] per `chaos run`: the run's identity (seed, backend, server), then one
//! [`ScenarioReport`] per scenario with its faults as applied, the per-mode summary the
//! verdict is computed from, the verdict, and a [`ModeTimeline`] per mode for drawing.
//! All times are milliseconds (or microseconds where named `_us`) since the scenario's start,
//! on one monotonic clock, so grants, faults and writes line up.
//!
//! The summary keys are stable (`sections`, `lost`, `rejected`, `exclusion_violations`,
//! `acquire_attempts`, `acquire_failures`, `acquire_p50_us`, `acquire_p99_us`); fields may
//! be added, never renamed. Schema 2 added the naive `none` and the `checked` mode, and per
//! mode `abandoned`, `stale_writes`, `fence_regressions`, `pauses`, `idle_fault_windows`
//! (with their timeline entries); they read as 0 / empty from a schema-1 file.

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::checker::availability::Recovery;
use crate::checker::handoff::{HandOffs, TakeOvers};
use crate::checker::leak::LeakSummary;
use crate::checker::renewal::LossHeard;
use crate::checker::truth::TruthSummary;
use crate::workload::Mode;

pub use crate::checker::lost::{Culprit, LostUpdate};

/// File name of the report inside the report directory.
pub const REPORT_FILE: &str = "report.json";

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChaosReport {
    /// Schema version of this file.
    #[schemars(extend("const" = crate::run::SCHEMA))]
    pub schema: u32,
    /// Run id (also the docker label value).
    pub run_id: String,
    /// Seed every random choice was derived from; rerun with `--seed` to repeat the faults.
    pub seed: u64,
    /// Cluster backend: `docker` or `local` when the run brought its cluster up, `attached`
    /// with `--stack`.
    #[schemars(extend("enum" = ["docker", "local", "attached"]))]
    pub backend: String,
    /// The lock under test (`chaos run --lock`): `ours`, `rslock`, `plain` or a mutant.
    #[serde(default = "ours")]
    pub lock: String,
    /// `redis` or `valkey`.
    #[schemars(extend("enum" = ["redis", "valkey"]))]
    pub flavour: String,
    /// E.g. `valkey 8.1.8`; empty when the cluster never came up.
    pub server_version: String,
    /// Number of primaries.
    pub nodes: usize,
    /// The container images the run started (docker backend), in the order they started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<RunImage>,
    /// Wall-clock start, RFC 3339 (UTC).
    pub started_at: String,
    /// The command line that produced this report.
    pub command: String,
    /// Scenarios in the order they ran.
    pub scenarios: Vec<ScenarioReport>,
    /// Worst verdict over all scenarios.
    pub verdict: Outcome,
}

/// One container image a run started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunImage {
    /// `server`, `proxy` or `postgres`.
    #[schemars(extend("enum" = ["server", "proxy", "postgres"]))]
    pub role: String,
    /// The name it was started by, e.g. `valkey/valkey:8` or `redlock-chaos-valkey:<hash>`.
    pub name: String,
    /// The engine's image id (`sha256:…`).
    pub id: String,
    /// `official` (`--images official`/`auto`) or `offline` (built from this host's binaries).
    #[schemars(extend("enum" = ["official", "offline"]))]
    pub source: String,
}

/// The lock of reports written before `lock` was recorded.
fn ours() -> String {
    "ours".into()
}

/// Pass, fail on safety, fail on liveness, or the harness could not tell.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Not played: a fault it needs cannot be applied to this cluster (an attached stack
    /// whose node control cannot, say); the reasons say which. Exit code 0 on its own; a
    /// run in which every scenario is not applicable judged nothing and is
    /// [`Outcome::Unknown`].
    #[serde(rename = "not-applicable")]
    NotApplicable,
    /// Every expectation met.
    Pass,
    /// The harness itself failed (no verdict possible); exit code 2.
    Unknown,
    /// Every safety check met, but a liveness check failed: the lock did not grant where it
    /// promised to (no section completed, no grant after a heal, a minority fault without a
    /// section, a majority loss no acquire felt, the quorum probe); exit code 4. On a busy
    /// machine this can be the machine.
    Unavailable,
    /// A safety check failed (holders overlapped, a token did not grow, an update was lost
    /// unexplained, ...), whatever the liveness checks said; exit code 1.
    Fail,
}

impl Outcome {
    /// The process exit code CI relies on: 0 pass, 1 safety failure, 2 harness failure,
    /// 4 liveness failure (every safety check met).
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::NotApplicable | Outcome::Pass => 0,
            Outcome::Fail => 1,
            Outcome::Unknown => 2,
            Outcome::Unavailable => 4,
        }
    }

    /// The worse of two outcomes (fail > unavailable > unknown > pass > not applicable):
    /// a safety failure outranks everything, and a liveness failure outranks a harness
    /// failure elsewhere in the run, which judged nothing.
    pub fn worst(self, other: Outcome) -> Outcome {
        self.max(other)
    }

    /// What the outcome means, in a few words, for summary lines.
    pub fn meaning(self) -> &'static str {
        match self {
            Outcome::NotApplicable => "not played here",
            Outcome::Pass => "every expectation met",
            Outcome::Unknown => "the harness could not tell: no verdict",
            Outcome::Unavailable => "every safety check met; a liveness check failed",
            Outcome::Fail => "a safety check failed",
        }
    }
}

/// The kind of a failed check, which decides the outcome: a failed safety check fails the
/// scenario ([`Outcome::Fail`]); a failed liveness check, with every safety check met,
/// makes it [`Outcome::Unavailable`]. A failed check's reason starts with the kind's
/// [`prefix`](CheckKind::prefix), so that renderers can tell them apart from the reasons alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    /// Every check not marked liveness: what must never happen (overlapping holders, tokens
    /// that do not grow, unexplained losses, a validity that outlasts the keys), and the
    /// lock's hygiene judged with it (keys a failed attempt left standing, a renewer silent
    /// on a loss, a client's waiters held back by a lease it let go).
    Safety,
    /// What must eventually happen: sections complete, grants resume after heals and go on
    /// through minority faults, acquires fail where a majority is gone, the quorum probe.
    Liveness,
}

impl CheckKind {
    /// Both kinds, safety first.
    pub const ALL: [CheckKind; 2] = [CheckKind::Safety, CheckKind::Liveness];

    /// How a failed check's reason starts: `FAILED (safety): ` or `FAILED (liveness): `.
    pub fn prefix(self) -> &'static str {
        match self {
            CheckKind::Safety => "FAILED (safety): ",
            CheckKind::Liveness => "FAILED (liveness): ",
        }
    }

    /// The outcome a failed check of this kind gives its scenario.
    pub fn outcome(self) -> Outcome {
        match self {
            CheckKind::Safety => Outcome::Fail,
            CheckKind::Liveness => Outcome::Unavailable,
        }
    }

    /// `safety` or `liveness`.
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::Safety => "safety",
            CheckKind::Liveness => "liveness",
        }
    }

    /// The kind of a failed check's `reason` and the text after its prefix; `None` for
    /// any other reason (met, reported, harness, unknown).
    pub fn of(reason: &str) -> Option<(CheckKind, &str)> {
        CheckKind::ALL
            .into_iter()
            .find_map(|k| reason.strip_prefix(k.prefix()).map(|rest| (k, rest)))
    }
}

/// A verdict and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// Outcome.
    pub outcome: Outcome,
    /// One sentence per expectation checked (met or not), or the harness error.
    pub reasons: Vec<String>,
    /// Modes whose own checks failed (empty when the failure is not a mode's, e.g. the
    /// harness's; then every mode carries it).
    #[serde(default)]
    #[schemars(with = "Vec<Mode>")]
    pub failed_modes: Vec<String>,
}

/// One scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScenarioReport {
    /// Scenario name, e.g. `kill-minority`.
    pub name: String,
    /// One line: what happens.
    pub about: String,
    /// The documented expectation, as a sentence.
    pub expected: String,
    /// Seed of this scenario's schedule and workers.
    pub seed: u64,
    /// Planned length.
    pub duration_ms: u64,
    /// How the workers reached the nodes: `per-worker` (each its own lock client),
    /// `shared` (one client per mode) or `processes` (each worker a process of its own);
    /// empty in reports written before it was recorded.
    #[serde(default)]
    #[schemars(extend("enum" = ["", "per-worker", "shared", "processes"]))]
    pub clients: String,
    /// Faults as actually applied and healed.
    pub faults: Vec<FaultWindow>,
    /// Per mode: `none`, `checked`, `write_only`, `claim_first`.
    #[schemars(schema_with = "by_mode::<ModeReport>")]
    pub modes: BTreeMap<String, ModeReport>,
    /// The verdict against `expected`.
    pub verdict: Verdict,
    /// What happened when, per mode (same keys as `modes`).
    #[schemars(schema_with = "by_mode::<ModeTimeline>")]
    pub timeline: BTreeMap<String, ModeTimeline>,
    /// The history's file, relative to the report directory (`null`: none was recorded).
    #[serde(default)]
    pub history: Option<String>,
    /// The rig's own acquires while exactly `N − quorum` nodes were down (`null`: the lock
    /// under test is not ours, or the scenario was not played).
    #[serde(default)]
    pub quorum_probe: Option<crate::checker::quorum_probe::QuorumProbe>,
    /// The history itself: written to `history` beside the report, never into it.
    #[serde(skip)]
    pub ops: Vec<crate::checker::history::Op>,
    /// The evidence file, relative to the report directory: everything the verdict used
    /// besides the history, from which `chaos judge DIR` judges the scenario again
    /// (`null`: the scenario was not played, or the report predates evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The evidence itself, as JSON: written to `evidence` beside the report, never into it.
    #[serde(skip)]
    pub evidence_json: Option<String>,
}

/// The schema of a map keyed by mode name (`none`, `checked`, ...).
fn by_mode<V: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "propertyNames": generator.subschema_for::<Mode>(),
        "additionalProperties": generator.subschema_for::<V>()
    })
}

/// One fault as applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FaultWindow {
    /// E.g. `kill`, `freeze`, `partition`, `slow`, `clock-jump`, `client-stall`.
    pub kind: String,
    /// Human detail, e.g. `+50ms ±10ms` or `offset +20s`.
    pub detail: String,
    /// `n0`…`n4` for nodes, `w0`… for workers.
    #[schemars(inner(pattern("^[nw][0-9]+$")))]
    pub targets: Vec<String>,
    /// When it took effect.
    pub start_ms: u64,
    /// When it was healed (`None`: never healed — a harness failure).
    pub end_ms: Option<u64>,
}

/// The node a fault target names (`n2` → 2); `None` for a worker or anything else.
pub fn target_node(target: &str) -> Option<usize> {
    target.strip_prefix('n')?.parse().ok()
}

/// The summary of one mode in one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModeReport {
    /// The lock this mode ran on (`ours`, `plain`, ...): the lock under test, or the
    /// rig's plain lock for a must-show scenario's canary (`none`); empty in older reports.
    #[serde(default)]
    pub lock: String,
    /// Critical sections that completed (their write was accepted).
    pub sections: u64,
    /// `sections − final counter value`: increments that vanished; `null` when the final
    /// value could not be read (the harness could not tell, never "everything lost").
    pub lost: Option<i64>,
    /// Writes the fenced resource refused (redone under a fresh lock).
    pub rejected: u64,
    /// Pairs of grants whose holding windows overlapped.
    pub exclusion_violations: u64,
    /// The longest overlap among them, in µs (0 without violations): a few µs is a clock
    /// question between two processes, a TTL's worth is two holders.
    #[serde(default)]
    pub longest_overlap_us: u64,
    /// Acquire attempts (each a full quorum round).
    pub acquire_attempts: u64,
    /// Attempts that did not get the lock (contention, quorum loss, timeouts).
    pub acquire_failures: u64,
    /// Acquires that ended in an error other than contention (quorum unreachable).
    pub acquire_errors: u64,
    /// Median latency of successful acquires.
    pub acquire_p50_us: u64,
    /// 99th percentile latency of successful acquires.
    pub acquire_p99_us: u64,
    /// Sections that stalled (client stalls from the fault schedule).
    pub stalls: u64,
    /// Final counter value; `null` when it could not be read.
    pub final_value: Option<i64>,
    /// Grants whose validity ran out before the write (nothing written; the modes that
    /// check their lease only).
    #[serde(default)]
    pub abandoned: u64,
    /// Accepted writes that completed after their lease's `valid_until`: written by a holder
    /// that no longer held the lock (a pause, a scheduler hiccup).
    #[serde(default)]
    pub stale_writes: u64,
    /// Grants whose fencing token repeated another grant's, or was not larger than the token
    /// of every grant returned before its acquire was invoked (`checker::fence`).
    #[serde(default)]
    pub fence_regressions: u64,
    /// Times a worker paused itself while holding a lease (`client-pause`).
    #[serde(default)]
    pub pauses: u64,
    /// Scheduled node faults of at least [`IDLE_FAULT_MIN_MS`] (2 s) during which this mode was
    /// granted no section that completed (the lock was not available while they lasted).
    #[serde(default)]
    pub idle_fault_windows: u64,
    /// The most increments the stale writes could have erased: per stale write, itself and
    /// every accepted write that completed between its grant and its own write. A loss
    /// beyond it was not the stale writes' doing ([`crate::checker::stale`]).
    #[serde(default)]
    pub stale_reach: u64,
    /// Lost updates that no stale write explains — neither the lost write nor the one that
    /// erased it completed after its lease: two holders at once
    /// ([`crate::checker::lost`](mod@crate::checker::lost)); `null` when the row's log could not be read.
    #[serde(default)]
    pub unexplained_losses: Option<u64>,
    /// Writes whose statement failed (PostgreSQL errors): indeterminate until the row's log
    /// settled them; not counted in `sections`.
    #[serde(default)]
    pub indeterminate_writes: u64,
    /// Server truth: each grant's `valid_until` against how long a quorum of its keys
    /// lived, by the servers' `PTTL` ([`crate::checker::truth`]).
    #[serde(default)]
    pub server_truth: TruthSummary,
    /// Keys of never-granted attempts left on a node long after the attempt should have
    /// removed them ([`crate::checker::leak`]).
    #[serde(default)]
    pub leaks: LeakSummary,
    /// Renewed grants whose renewer announced a validity (`status()`: held until *t*) and
    /// later a shorter one while still holding: a holder that read the first worked past
    /// the keys' end. Watched every [`RENEWAL_WATCH_TICK_MS`] (5 ms) through each renewed
    /// section.
    #[serde(default)]
    pub validity_cuts: u64,
    /// How soon grants resumed after each heal, and the longest gap between grants during a
    /// minority fault against the same mode's healthy pace ([`crate::checker::availability`]).
    #[serde(default)]
    pub recovery: Recovery,
    /// Renewed grants whose keys a quorum of nodes forgot while they held: whether their
    /// renewer told them, or they heard only when validity ran out
    /// ([`crate::checker::renewal`]).
    #[serde(default)]
    pub loss_heard: LossHeard,
    /// Where a mode's workers share one client: how its releases handed the lock to
    /// siblings already waiting ([`crate::checker::handoff`]); empty elsewhere.
    #[serde(default)]
    pub hand_offs: HandOffs,
    /// Where a mode's workers share one client: whether a sibling got in once a lease kept
    /// past its validity stopped counting ([`crate::checker::handoff`]); empty elsewhere.
    #[serde(default)]
    pub take_overs: TakeOvers,
    /// `late_retire` scenarios: worker 0's fence retirements that reached the nodes after
    /// its keys expired (sent, then held at the proxies) and were followed by a grant —
    /// each a chance for a lock that deletes a counter it no longer guards to hand out
    /// token 1 again ([`crate::run::retire`]). Absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_retirements: Option<u64>,
}

/// How often a renewed section reads its renewer's `status()` for
/// [`ModeReport::validity_cuts`].
pub const RENEWAL_WATCH_TICK_MS: u64 = 5;

/// Shortest fault window [`ModeReport::idle_fault_windows`] looks at: long enough for
/// many sections of any scenario (and a few of `latency`'s long ones).
pub const IDLE_FAULT_MIN_MS: u64 = 2_000;

/// A count that may be unknown, as text: the number, or `?`.
pub fn or_unknown(n: Option<i64>) -> String {
    n.map_or_else(|| "?".into(), |n| n.to_string())
}

impl ModeReport {
    /// Share of acknowledged increments lost, `lost / sections` (Jepsen's measure), in
    /// `[0, 1]`; 0 when nothing was acknowledged.
    pub fn lost_share(&self) -> f64 {
        match self.lost {
            Some(lost) if self.sections > 0 => (lost.max(0) as f64 / self.sections as f64).min(1.0),
            _ => 0.0,
        }
    }
}

/// What one mode did over time, for the timeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModeTimeline {
    /// Every grant: who held the lock, from when to when.
    pub grants: Vec<GrantSpan>,
    /// Writes the resource refused.
    pub rejected: Vec<RejectedWrite>,
    /// Overlapping grant pairs.
    pub violations: Vec<ViolationMark>,
    /// Acquire latencies over time (all successes, and failures with `ok: false`).
    pub acquire: Vec<LatencySample>,
    /// The counter's value over time, sampled, beside the count of completed sections.
    pub counter: Vec<CounterSample>,
    /// Client pauses: a worker stopped while holding a lease.
    #[serde(default)]
    pub pauses: Vec<PauseSpan>,
    /// Grants whose token repeated one, or did not exceed one returned before they asked.
    #[serde(default)]
    pub fence_regressions: Vec<FenceMark>,
    /// Acknowledged writes the row did not keep, each with the write that erased it (at
    /// most 500; the count is `sections − final value` plus indeterminate writes kept).
    #[serde(default)]
    pub lost_updates: Vec<LostUpdate>,
}

/// A worker stopped (paused itself) and resumed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PauseSpan {
    /// Worker index.
    pub worker: usize,
    /// When it stopped.
    pub from_ms: Ms,
    /// When it was resumed (`None`: the scenario ended first; it was killed).
    pub to_ms: Option<Ms>,
}

/// A grant whose token did not increase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FenceMark {
    /// Worker index.
    pub worker: usize,
    /// Its token.
    pub fence: u64,
    /// The token it did not exceed: the largest returned before it was asked for, or its
    /// own when another grant returned with it first.
    pub earlier_max: u64,
    /// When it was granted.
    pub at_ms: Ms,
}

/// One grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GrantSpan {
    /// Worker index.
    pub worker: usize,
    /// Fencing token.
    pub fence: Option<u64>,
    /// When the acquire returned.
    pub start_ms: Ms,
    /// When the worker stopped holding: release, or end of validity if earlier.
    pub end_ms: Ms,
    /// End of validity.
    pub valid_until_ms: Ms,
    /// Whether this grant's write was accepted.
    pub accepted: bool,
    /// When the section's last statement returned.
    #[serde(default)]
    pub done_ms: Ms,
    /// Validity ran out before the write; nothing was written.
    #[serde(default)]
    pub abandoned: bool,
    /// The write was accepted but completed after `valid_until_ms`.
    #[serde(default)]
    pub stale: bool,
}

/// A refused write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RejectedWrite {
    /// Worker index.
    pub worker: usize,
    /// The stale token.
    pub fence: Option<u64>,
    /// When it was refused.
    pub at_ms: Ms,
}

/// Two grants that overlapped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ViolationMark {
    /// The earlier grant's worker.
    pub first_worker: usize,
    /// The later grant's worker.
    pub second_worker: usize,
    /// Start of the overlap.
    pub from_ms: Ms,
    /// End of the overlap.
    pub to_ms: Ms,
}

/// One acquire attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LatencySample {
    /// When it finished.
    pub at_ms: Ms,
    /// How long it took.
    pub latency_us: u64,
    /// Whether it got the lock.
    pub ok: bool,
}

/// The counter against what it should be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CounterSample {
    /// When sampled.
    pub at_ms: Ms,
    /// The counter row's value.
    pub value: i64,
    /// Completed sections by then (what the value should be).
    pub expected: i64,
}

pub use self::f64_ms::Ms;

/// Millisecond timestamps with microsecond resolution, stored as integers of µs in memory
/// but written as fractional milliseconds so the JSON reads naturally.
pub mod f64_ms {
    use std::borrow::Cow;
    use std::time::Duration;

    use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Milliseconds since the scenario start, µs resolution.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
    pub struct Ms(pub u64);

    impl Ms {
        /// From a duration since the scenario start.
        pub fn from_duration(d: Duration) -> Ms {
            Ms(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        }

        /// As fractional milliseconds.
        pub fn as_ms(self) -> f64 {
            self.0 as f64 / 1000.0
        }
    }

    impl Serialize for Ms {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_f64(self.as_ms())
        }
    }

    impl JsonSchema for Ms {
        fn schema_name() -> Cow<'static, str> {
            "Ms".into()
        }

        fn json_schema(_: &mut SchemaGenerator) -> Schema {
            json_schema!({
                "description": "Milliseconds since the scenario's start, µs resolution.",
                "type": "number",
                "minimum": 0
            })
        }
    }

    impl<'de> Deserialize<'de> for Ms {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ms, D::Error> {
            let ms = f64::deserialize(d)?;
            if !ms.is_finite() || ms < 0.0 {
                return Err(serde::de::Error::custom(format!("bad timestamp {ms}")));
            }
            Ok(Ms((ms * 1000.0).round() as u64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_outcome_orders_fail_over_unavailable_over_unknown_over_pass() {
        use Outcome::*;
        let ranked = [NotApplicable, Pass, Unknown, Unavailable, Fail];
        for (i, a) in ranked.into_iter().enumerate() {
            for (j, b) in ranked.into_iter().enumerate() {
                assert_eq!(a.worst(b), ranked[i.max(j)], "{a:?} {b:?}");
            }
        }
        assert_eq!(Fail.exit_code(), 1);
        assert_eq!(Unknown.exit_code(), 2);
        assert_eq!(Unavailable.exit_code(), 4);
        assert_eq!(Pass.exit_code(), 0);
        assert_eq!(NotApplicable.exit_code(), 0);
    }

    #[test]
    fn an_unavailable_outcome_is_written_and_read_as_unavailable() {
        let json = serde_json::to_string(&Outcome::Unavailable).expect("serialize");
        assert_eq!(json, "\"unavailable\"");
        let back: Outcome = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, Outcome::Unavailable);
    }

    #[test]
    fn a_failed_checks_kind_is_read_back_from_its_reason() {
        for k in CheckKind::ALL {
            let reason = format!("{}none: 0 sections completed", k.prefix());
            assert_eq!(
                CheckKind::of(&reason),
                Some((k, "none: 0 sections completed"))
            );
        }
        for other in [
            "ok: none: 10 sections",
            "reported: x",
            "harness: y",
            "unknown: z",
        ] {
            assert_eq!(CheckKind::of(other), None, "{other}");
        }
    }

    #[test]
    fn ms_round_trips_as_fractional_milliseconds() {
        let s = GrantSpan {
            worker: 1,
            fence: Some(7),
            start_ms: Ms(1_500),
            end_ms: Ms(2_250),
            valid_until_ms: Ms(200_000),
            accepted: true,
            done_ms: Ms(2_250),
            abandoned: false,
            stale: false,
        };
        let json = serde_json::to_string(&s).expect("serialize");
        assert!(json.contains("\"start_ms\":1.5"), "{json}");
        let back: GrantSpan = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, s);
    }
}
