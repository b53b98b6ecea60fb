//! How a scenario's faults are written down: the data behind every built-in scenario and
//! every scenario file.
//!
//! A scenario lays its faults either with a [`Recipe`] (seeded: fault windows over the run,
//! each with a fault kind, its parameters and its targets drawn at random) or on an
//! explicit timeline of [`TimedFault`]s. Parameters are [`ValueRange`]s (`[100, 800]`, or a
//! single value), targets a [`TargetRule`] (`minority`, `{ nodes = [0, 2] }`, ...), window
//! lengths fractions of the run ([`Fractions`]) with an absolute cap, durations humantime
//! strings (`"60s"`, `"1m 30s"`, `"250ms"`).
//!
//! Every type refuses unknown fields, and the values that cannot be right (an empty range,
//! a fraction outside `[0, 1]`, a duration without a unit) are refused while parsing, so a
//! file's error points at the line that holds them.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, IntoDeserializer, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::validate::{self, SpecError};
use crate::nemesis::PartitionVia;
use crate::nemesis::schedule::WindowShape;

/// How long a critical section works, per scenario. In files: `"run"`, `"to-validity"`,
/// `"renewed"`, or a duration such as `"100ms"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Work {
    /// The run's setting (`RunConfig::work`, 5 ms).
    #[default]
    Run,
    /// This long: the clock scenarios need sections long enough for a second holder to get
    /// in while the first still works.
    Fixed(Duration),
    /// Until shortly before the end of the validity the lock reported
    /// ([`crate::run::chaos_workload::work_to_validity`]): a lock that overstates its
    /// validity writes after its keys expired, and is caught.
    ToValidity,
    /// 2-5 × the TTL under `auto_renew` (our lock; others cannot renew and lose the lease
    /// mid-section), extended to half or twice the TTL within half a TTL of the grant in two
    /// sections of three (the validity claimed after it is read against the servers): the
    /// holder checks the renewer's status before its write, and each grant's last known
    /// validity is read against the servers before the release.
    Renewed,
}

impl Serialize for Work {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Work::Run => s.serialize_str("run"),
            Work::ToValidity => s.serialize_str("to-validity"),
            Work::Renewed => s.serialize_str("renewed"),
            Work::Fixed(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
        }
    }
}

impl JsonSchema for Work {
    fn schema_name() -> Cow<'static, str> {
        "Work".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let duration = generator.subschema_for::<human_duration::HumanDuration>();
        json_schema!({
            "description": "How long a critical section works: `run` (the run's `--work`), `to-validity`, `renewed`, or a duration such as `100ms`.",
            "anyOf": [
                { "enum": ["run", "to-validity", "renewed"] },
                duration
            ]
        })
    }
}

impl<'de> Deserialize<'de> for Work {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "run" => Ok(Work::Run),
            "to-validity" => Ok(Work::ToValidity),
            "renewed" => Ok(Work::Renewed),
            other => humantime::parse_duration(other)
                .map(Work::Fixed)
                .map_err(|e| {
                    de::Error::custom(format!(
                        "{other:?} ({e}): use \"run\", \"to-validity\", \"renewed\" or a duration such as \"100ms\""
                    ))
                }),
        }
    }
}

/// How a mode's in-process workers reach the nodes. In files: `"per-worker"` (the default)
/// or `"shared"`. Worker processes (client stalls, and pauses with per-worker clients) always
/// have their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Clients {
    /// One lock client per worker, with its own connections and release notifier: competing
    /// `SET`s travel on different connections and can reach the nodes in different orders,
    /// so votes split and failed attempts must clean up, as between real services.
    #[default]
    PerWorker,
    /// One lock client per mode, shared by its workers: their requests overlap on one
    /// pipelined connection per node, where a reply handed to the wrong request shows.
    /// `none` and `checked` wake their waiters with release notices, `write_only` and
    /// `claim_first` without (their waiters poll), so both ways a client hands the lock
    /// from one of its tasks to the next meet the faults. With a `pause_rate`, a worker's
    /// pause is its own task's sleep while its siblings go on (`task-pause`).
    Shared,
}

impl Clients {
    /// Its name in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Clients::PerWorker => "per-worker",
            Clients::Shared => "shared",
        }
    }
}

/// Which workers reach the nodes through the proxies, and so feel the proxy faults. In
/// files: `"all"` (the default) or `"first-worker"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Proxied {
    /// Every worker: a proxy fault is the node's network fault, felt by every client.
    #[default]
    All,
    /// Worker 0 of each mode only; the others connect straight to the nodes. A proxy fault
    /// (slow, black hole, partition, connection toxics) is then worker 0's own network
    /// fault — a client on a slow or flaky link — while its rivals see healthy nodes;
    /// node faults (kill, freeze, forget, clocks) still hit everyone. Worker 0 gets a lock
    /// client of its own even where the scenario's workers share one.
    FirstWorker,
}

impl Proxied {
    /// Its name in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Proxied::All => "all",
            Proxied::FirstWorker => "first-worker",
        }
    }
}

/// Seeded fault windows: per window, one of `faults` (drawn when there are several), its
/// parameters, then its targets by `targets`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "RawRecipe")]
// The schema of these fields, as `RawRecipe` reads them (no unknown ones).
#[schemars(!try_from, deny_unknown_fields)]
pub struct Recipe {
    /// Fault kinds to draw from, each with its parameter ranges.
    #[schemars(length(min = 1))]
    pub faults: Vec<FaultSpec>,
    /// Whom each window's fault hits.
    pub targets: TargetRule,
    /// How windows are laid over the run.
    pub window: WindowSpec,
}

/// One fault at a fixed time on an explicit timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "RawTimedFault")]
// The schema of these fields, as `RawTimedFault` reads them (no unknown ones).
#[schemars(!try_from, deny_unknown_fields)]
pub struct TimedFault {
    /// What (parameter ranges are drawn from the scenario's seed).
    pub fault: FaultSpec,
    /// On whom.
    pub targets: TargetRule,
    /// Applied at: since the run's start (`"2s"`) or a share of the run (`"5%"`).
    pub start: At,
    /// Healed at (`"6s"`, `"95%"`), after `start`; at most the run's `--duration`.
    pub end: At,
    /// Instead of one window from `start` to `end`: a window of `lasting` every `every`
    /// between them (a node that forgets its keys every 10 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Repeat>,
}

/// The most windows one repeated timeline entry may lay over a run.
pub const MAX_REPEATS: u64 = 100_000;

/// A timeline entry applied again and again: `lasting` every `every`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    /// From one window's start to the next (`"10ms"`).
    #[serde(with = "human_duration")]
    #[schemars(with = "human_duration::HumanDuration")]
    pub every: Duration,
    /// How long each window lasts (`"2ms"`), less than `every`.
    #[serde(with = "human_duration")]
    #[schemars(with = "human_duration::HumanDuration")]
    pub lasting: Duration,
}

impl Repeat {
    /// The windows between `start` and `end`: `lasting` long, `every` apart, each ending by
    /// `end`.
    pub fn windows(self, start: Duration, end: Duration) -> Vec<(Duration, Duration)> {
        let n = u32::try_from(self.count(start, end).min(MAX_REPEATS)).unwrap_or(0);
        (0..n)
            .map(|k| {
                let t = start.saturating_add(self.every.saturating_mul(k));
                (t, t.saturating_add(self.lasting))
            })
            .collect()
    }

    /// How many windows it lays between `start` and `end`, uncapped.
    pub fn count(self, start: Duration, end: Duration) -> u64 {
        let span = end.saturating_sub(start);
        if span < self.lasting || self.every.is_zero() {
            return u64::from(span >= self.lasting);
        }
        let spare = span.saturating_sub(self.lasting).as_nanos() / self.every.as_nanos();
        u64::try_from(spare).unwrap_or(u64::MAX).saturating_add(1)
    }
}

/// With `amnesia_split`: how the emptied node's wall clock steps right after each restart,
/// before any client of the lock reaches it (libfaketime; Valkey only). Redis and Valkey
/// count `uptime_in_seconds` on the wall clock, so a step back by more than the node has
/// run makes the uptime read negative, and a step forward overstates it by the step: a
/// client that estimates the node's start from it (the restart quarantine) is misled both
/// ways. The run's first restart steps back (a client may meet the node for the first time
/// after it, and no client can tell an overstated uptime of a node it never saw before);
/// after it each mode's victims see the two directions in turn, a mode's first drawn from
/// the seed; each step's size is drawn from its range. The offset carries over to the next
/// restart (a new server starts where the old one's clock was), so the only clock change
/// a client can see is the step itself. In files:
/// `split_clock_step = { back_s = [30, 60], forward_s = [60, 120] }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClockStep {
    /// Seconds back, `[30, 60]` or one value, at least 1: more than the restarted node has
    /// run when it is first asked (its uptime must read negative; the rig checks it does).
    pub back_s: ValueRange<u64>,
    /// Seconds forward, `[60, 120]` or one value, at least 1: the uptime then overstates
    /// the node's life by this much (the rig checks it does).
    pub forward_s: ValueRange<u64>,
}

/// A moment of the run: an offset from its start (`"2s"`) or a share of its length
/// (`"5%"`, so a built-in's timeline fits any `--duration`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum At {
    /// Since the run's start.
    Offset(Duration),
    /// This fraction of the run's length, 0 to 1.
    Share(f64),
}

impl At {
    /// The offset it names in a run of `run`.
    pub fn resolve(self, run: Duration) -> Duration {
        match self {
            At::Offset(d) => d,
            At::Share(f) => run.mul_f64(f.clamp(0.0, 1.0)),
        }
    }
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Offset(d) => write!(f, "{}", humantime::format_duration(*d)),
            // Rounded to a ten-thousandth of a percent: 0.07 prints 7%, not 7.000000000000001%.
            At::Share(s) => write!(f, "{}%", (s * 1e6).round() / 1e4),
        }
    }
}

impl Serialize for At {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for At {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if let Some(pct) = s.strip_suffix('%') {
            return match pct.trim().parse::<f64>() {
                Ok(p) if (0.0..=100.0).contains(&p) => Ok(At::Share(p / 100.0)),
                _ => Err(de::Error::custom(format!(
                    "{s:?} is not a share of the run: use 0% to 100%, e.g. \"5%\""
                ))),
            };
        }
        humantime::parse_duration(&s).map(At::Offset).map_err(|e| {
            de::Error::custom(format!(
                "{s:?} is not a moment of the run ({e}): write a duration with a unit (\"2s\", \"250ms\") or a share of the run (\"5%\")"
            ))
        })
    }
}

impl JsonSchema for At {
    fn schema_name() -> Cow<'static, str> {
        "At".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A moment of the run: a duration since its start (`2s`, `250ms`) or a share of its length (`5%`).",
            "type": "string"
        })
    }
}

/// [`Recipe`] as written, checked by [`validate::check_recipe`] while parsing (so the
/// error points at the recipe).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecipe {
    faults: Vec<FaultSpec>,
    targets: TargetRule,
    window: WindowSpec,
}

impl TryFrom<RawRecipe> for Recipe {
    type Error = String;

    fn try_from(r: RawRecipe) -> Result<Self, String> {
        let recipe = Recipe {
            faults: r.faults,
            targets: r.targets,
            window: r.window,
        };
        validate::check_recipe(&recipe).map_err(|e| e.to_string())?;
        Ok(recipe)
    }
}

/// [`TimedFault`] as written, checked by [`validate::check_timed`] while parsing.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTimedFault {
    fault: FaultSpec,
    targets: TargetRule,
    start: At,
    end: At,
    #[serde(default)]
    repeat: Option<Repeat>,
}

impl TryFrom<RawTimedFault> for TimedFault {
    type Error = String;

    fn try_from(t: RawTimedFault) -> Result<Self, String> {
        let timed = TimedFault {
            fault: t.fault,
            targets: t.targets,
            start: t.start,
            end: t.end,
            repeat: t.repeat,
        };
        validate::check_timed(&timed).map_err(|e| e.to_string())?;
        Ok(timed)
    }
}

/// How a [`Recipe`] lays its windows (see [`crate::nemesis::schedule::windows`]): lengths
/// and gaps as fractions of the run, so the shape is the same for a 10 s test and a 10 min
/// soak, and an absolute cap on each fault.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// Fault length, as a fraction of the run: `[0.08, 0.2]`.
    pub on: Fractions,
    /// Healthy gap between faults, as a fraction of the run.
    pub off: Fractions,
    /// No fault lasts longer than this (`"60s"`).
    #[serde(with = "human_duration")]
    #[schemars(with = "human_duration::HumanDuration")]
    pub max_on: Duration,
}

impl WindowSpec {
    /// As the window generator takes it.
    pub fn shape(&self) -> WindowShape {
        WindowShape {
            on: (self.on.lo, self.on.hi),
            off: (self.off.lo, self.off.hi),
            max_on: self.max_on,
        }
    }
}

/// A fault kind with parameter ranges; `kind` names it, as in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", try_from = "RawFaultSpec")]
// The schema of the variants, per kind: `RawFaultSpec` reads one flat table, but refuses a
// parameter of another kind and asks for the missing ones, so it reads the same documents.
#[schemars(!try_from, deny_unknown_fields)]
#[non_exhaustive]
pub enum FaultSpec {
    /// SIGKILL; heal: start again with its AOF.
    Kill {},
    /// SIGKILL, back with its data at the end of the window.
    RestartKeep {},
    /// SIGKILL, back EMPTY at the end of the window (amnesia).
    RestartWipe {},
    /// SIGSTOP / docker pause; heal: thaw.
    Freeze {},
    /// Cut workers off the node.
    Partition {
        /// `proxy` (both backends) or `network` (docker only); default `proxy`.
        #[schemars(default)]
        via: PartitionVia,
    },
    /// Connections stay open, data vanishes both ways.
    BlackHole {},
    /// Replies delayed by `latency_ms` ± `jitter_pct` % of it (and requests too with
    /// `both_ways`), on `connections_pct` % of the node's connections.
    Slow {
        /// Added delay, milliseconds: `[100, 800]` or one value.
        latency_ms: ValueRange<u64>,
        /// Random ± spread, in percent of the drawn latency (0-100; default 0).
        #[schemars(default, range(max = 100))]
        jitter_pct: u64,
        /// Share of the node's connections slowed, each rolled once when it opens (or when
        /// the fault starts): Toxiproxy's toxicity, in percent (1-100; default 100). Below
        /// 100, clients of one node see it at different speeds.
        #[serde(default = "all_connections", skip_serializing_if = "is_all")]
        #[schemars(default = "all_connections", range(min = 1, max = 100))]
        connections_pct: u64,
        /// Delay requests on their way to the node as well as replies (default false:
        /// replies only), each direction rolled on its own.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        #[schemars(default)]
        both_ways: bool,
    },
    /// The node's wall clock jumps by `offset_s` seconds (Valkey only).
    ClockJump {
        /// Seconds, `[20, 60]` or one value; positive jumps forward.
        offset_s: ValueRange<i64>,
    },
    /// The node's wall clock runs `rate_ppm` parts per million fast (or slow, negative) from
    /// the window's start, without a jump (Valkey only; local and Docker backends).
    ClockSkew {
        /// Parts per million, `[10000, 10000]` (1 % fast) or one value.
        rate_ppm: ValueRange<i64>,
    },
    /// Connections reset (RST) 5-100 ms after their first request (see
    /// [`crate::nemesis::ConnectionKind::draw`] for the drawn parameters of these four).
    ResetPeer {},
    /// Replies cut into 1-8-byte pieces.
    Slicer {},
    /// Each connection closed after 16-2,048 bytes of replies.
    LimitData {},
    /// Requests arrive, replies are dropped.
    MuteReplies {},
    /// A worker stops for the window; targets are workers (`one-worker`, `{ workers = [..] }`).
    ClientStall {},
    /// The node loses the run's lock keys at the window's start (an eviction, an operator's
    /// delete) and keeps running, fence counters kept; nothing to heal.
    Forget {},
}

/// The names `kind` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Kind {
    Kill,
    RestartKeep,
    RestartWipe,
    Freeze,
    Partition,
    BlackHole,
    Slow,
    ClockJump,
    ClockSkew,
    ClientStall,
    ResetPeer,
    Slicer,
    LimitData,
    MuteReplies,
    Forget,
}

/// [`FaultSpec`] as written: a flat table whose parameters are checked against its kind
/// (a plain struct rather than serde's internally tagged enum, so an error inside a
/// parameter still names it, with its line).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFaultSpec {
    kind: Kind,
    via: Option<PartitionVia>,
    latency_ms: Option<ValueRange<u64>>,
    #[serde(default, deserialize_with = "percent")]
    jitter_pct: Option<u64>,
    #[serde(default, deserialize_with = "percent")]
    connections_pct: Option<u64>,
    both_ways: Option<bool>,
    offset_s: Option<ValueRange<i64>>,
    rate_ppm: Option<ValueRange<i64>>,
}

fn all_connections() -> u64 {
    100
}

fn is_all(pct: &u64) -> bool {
    *pct == 100
}

fn percent<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let p = u64::deserialize(d)?;
    if p > 100 {
        return Err(de::Error::custom(format!(
            "{p} is not a percentage: use 0 to 100"
        )));
    }
    Ok(Some(p))
}

impl TryFrom<RawFaultSpec> for FaultSpec {
    type Error = String;

    fn try_from(r: RawFaultSpec) -> Result<Self, String> {
        let spec = match r.kind {
            Kind::Kill => FaultSpec::Kill {},
            Kind::RestartKeep => FaultSpec::RestartKeep {},
            Kind::RestartWipe => FaultSpec::RestartWipe {},
            Kind::Freeze => FaultSpec::Freeze {},
            Kind::Partition => FaultSpec::Partition {
                via: r.via.unwrap_or_default(),
            },
            Kind::BlackHole => FaultSpec::BlackHole {},
            Kind::Slow => FaultSpec::Slow {
                latency_ms: r.latency_ms.ok_or_else(|| {
                    SpecError::new(
                        "latency_ms",
                        "missing: `slow` needs a latency, e.g. latency_ms = [100, 800]",
                    )
                    .to_string()
                })?,
                jitter_pct: r.jitter_pct.unwrap_or(0),
                connections_pct: match r.connections_pct {
                    Some(0) => {
                        return Err(SpecError::new(
                            "connections_pct",
                            "0 slows no connection: use 1 to 100, or leave the fault out",
                        )
                        .to_string());
                    }
                    p => p.unwrap_or(100),
                },
                both_ways: r.both_ways.unwrap_or(false),
            },
            Kind::ClockJump => FaultSpec::ClockJump {
                offset_s: r.offset_s.ok_or_else(|| {
                    SpecError::new(
                        "offset_s",
                        "missing: `clock-jump` needs an offset, e.g. offset_s = [20, 60]",
                    )
                    .to_string()
                })?,
            },
            Kind::ClockSkew => FaultSpec::ClockSkew {
                rate_ppm: r.rate_ppm.ok_or_else(|| {
                    SpecError::new(
                        "rate_ppm",
                        "missing: `clock-skew` needs a rate, e.g. rate_ppm = 10000 (1 % fast)",
                    )
                    .to_string()
                })?,
            },
            Kind::ClientStall => FaultSpec::ClientStall {},
            Kind::ResetPeer => FaultSpec::ResetPeer {},
            Kind::Slicer => FaultSpec::Slicer {},
            Kind::LimitData => FaultSpec::LimitData {},
            Kind::MuteReplies => FaultSpec::MuteReplies {},
            Kind::Forget => FaultSpec::Forget {},
        };
        let given = [
            ("via", r.via.is_some(), "partition"),
            ("latency_ms", r.latency_ms.is_some(), "slow"),
            ("jitter_pct", r.jitter_pct.is_some(), "slow"),
            ("connections_pct", r.connections_pct.is_some(), "slow"),
            ("both_ways", r.both_ways.is_some(), "slow"),
            ("offset_s", r.offset_s.is_some(), "clock-jump"),
            ("rate_ppm", r.rate_ppm.is_some(), "clock-skew"),
        ];
        for (field, present, owner) in given {
            if present && spec.name() != owner {
                return Err(SpecError::new(
                    field,
                    format!(
                        "does not apply to `{}` (only `{owner}` takes it); remove it",
                        spec.name()
                    ),
                )
                .to_string());
            }
        }
        Ok(spec)
    }
}

impl FaultSpec {
    /// Short stable name, as in `kind`.
    pub fn name(&self) -> &'static str {
        match self {
            FaultSpec::Kill {} => "kill",
            FaultSpec::RestartKeep {} => "restart-keep",
            FaultSpec::RestartWipe {} => "restart-wipe",
            FaultSpec::Freeze {} => "freeze",
            FaultSpec::Partition { .. } => "partition",
            FaultSpec::BlackHole {} => "black-hole",
            FaultSpec::Slow { .. } => "slow",
            FaultSpec::ClockJump { .. } => "clock-jump",
            FaultSpec::ClockSkew { .. } => "clock-skew",
            FaultSpec::ClientStall {} => "client-stall",
            FaultSpec::ResetPeer {} => "reset-peer",
            FaultSpec::Slicer {} => "slicer",
            FaultSpec::LimitData {} => "limit-data",
            FaultSpec::MuteReplies {} => "mute-replies",
            FaultSpec::Forget {} => "forget",
        }
    }

    /// Whether its targets are workers rather than nodes.
    pub fn targets_workers(&self) -> bool {
        matches!(self, FaultSpec::ClientStall {})
    }
}

/// Whom a fault hits. In files: `"one"`, `"one-of-minority"`, `"minority"`, `"majority"`,
/// `"all"`, `"last-of-first-quorum"`, `"beyond-first-quorum"`, `"one-worker"`, or an
/// explicit `{ nodes = [0, 2] }` / `{ workers = [1] }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum TargetRule {
    /// One random node.
    One,
    /// One random node, only if losing it leaves a quorum (none on 1-2 nodes).
    OneOfMinority,
    /// A random minority of 1..=(N − 1)/2 nodes (none on 1-2 nodes).
    Minority,
    /// A random set of exactly a quorum (N/2 + 1) of nodes.
    Majority,
    /// Every node.
    All,
    /// Node q − 1, the last of the first quorum (nodes 0..q, q = N/2 + 1): node 2 of 5.
    /// None on 1-2 nodes, where no node lies beyond that quorum.
    LastOfFirstQuorum,
    /// The nodes after the first quorum, q..N: nodes 3 and 4 of 5 (a minority). None on 1-2
    /// nodes.
    BeyondFirstQuorum,
    /// These nodes (indexes from 0; must exist in the run).
    Nodes(#[schemars(length(min = 1))] Vec<usize>),
    /// One random worker (client-side faults).
    OneWorker,
    /// These workers (indexes from 0; must exist in the run).
    Workers(#[schemars(length(min = 1))] Vec<usize>),
}

impl TargetRule {
    /// Whether it picks workers rather than nodes.
    pub fn picks_workers(&self) -> bool {
        matches!(self, TargetRule::OneWorker | TargetRule::Workers(_))
    }
}

/// A closed range `[lo, hi]` to draw from; written `[lo, hi]`, or one value for `lo = hi`.
/// `lo ≤ hi` is checked while parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueRange<T> {
    /// Smallest value.
    pub lo: T,
    /// Largest value.
    pub hi: T,
}

impl<T> ValueRange<T> {
    /// `[lo, hi]`.
    pub const fn new(lo: T, hi: T) -> Self {
        ValueRange { lo, hi }
    }
}

impl<T: Serialize + PartialEq> Serialize for ValueRange<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.lo == self.hi {
            self.lo.serialize(s)
        } else {
            [&self.lo, &self.hi].serialize(s)
        }
    }
}

impl<T: JsonSchema> JsonSchema for ValueRange<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("ValueRange_of_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let one = generator.subschema_for::<T>();
        json_schema!({
            "anyOf": [
                one,
                { "type": "array", "items": one, "minItems": 2, "maxItems": 2 }
            ]
        })
    }
}

impl<'de, T> Deserialize<'de> for ValueRange<T>
where
    T: Deserialize<'de> + PartialOrd + Copy + fmt::Display,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T> Visitor<'de> for V<T>
        where
            T: Deserialize<'de> + PartialOrd + Copy + fmt::Display,
        {
            type Value = ValueRange<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a range [low, high]")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                let x = T::deserialize(v.into_deserializer())?;
                Ok(ValueRange::new(x, x))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                let x = T::deserialize(v.into_deserializer())?;
                Ok(ValueRange::new(x, x))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let lo: T = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &"[low, high]"))?;
                let hi: T = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(1, &"[low, high]"))?;
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &"[low, high]"));
                }
                if hi < lo {
                    return Err(de::Error::custom(format!(
                        "empty range [{lo}, {hi}]: write [low, high] with low ≤ high"
                    )));
                }
                Ok(ValueRange::new(lo, hi))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A range of fractions of the run, `[lo, hi]` with `0 ≤ lo ≤ hi ≤ 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fractions {
    /// Smallest share.
    pub lo: f64,
    /// Largest share.
    pub hi: f64,
}

impl Fractions {
    /// `[lo, hi]`, checked.
    ///
    /// # Errors
    /// When a bound is outside `[0, 1]` or `hi < lo`, a message saying so.
    pub fn new(lo: f64, hi: f64) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) {
            return Err(format!(
                "[{lo}, {hi}] is not a range of fractions of the run: use values from 0 to 1 (0.1 = 10 % of --duration)"
            ));
        }
        if hi < lo {
            return Err(format!(
                "empty range [{lo}, {hi}]: write [low, high] with low ≤ high"
            ));
        }
        Ok(Fractions { lo, hi })
    }
}

impl Serialize for Fractions {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        [self.lo, self.hi].serialize(s)
    }
}

impl JsonSchema for Fractions {
    fn schema_name() -> Cow<'static, str> {
        "Fractions".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A range of fractions of the run, `[lo, hi]` with `0 ≤ lo ≤ hi ≤ 1`.",
            "type": "array",
            "items": { "type": "number", "minimum": 0, "maximum": 1 },
            "minItems": 2,
            "maxItems": 2
        })
    }
}

impl<'de> Deserialize<'de> for Fractions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let [lo, hi] = <[f64; 2]>::deserialize(d)?;
        Fractions::new(lo, hi).map_err(de::Error::custom)
    }
}

/// Durations as humantime strings: `"60s"`, `"1m 30s"`, `"250ms"`.
pub(crate) mod human_duration {
    use std::borrow::Cow;
    use std::time::Duration;

    use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
    use serde::{Deserialize, Deserializer, Serializer, de};

    /// The schema of a duration written this way (`#[schemars(with = ...)]`).
    pub(crate) struct HumanDuration;

    impl JsonSchema for HumanDuration {
        fn schema_name() -> Cow<'static, str> {
            "Duration".into()
        }

        fn json_schema(_: &mut SchemaGenerator) -> Schema {
            json_schema!({
                "description": "A duration with a unit: `60s`, `250ms`, `1m 30s`.",
                "type": "string"
            })
        }
    }

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(&s).map_err(|e| {
            de::Error::custom(format!(
                "{s:?} is not a duration ({e}): write one with a unit, e.g. \"60s\", \"250ms\", \"1m 30s\""
            ))
        })
    }

    /// The same for an optional field (`#[serde(default, with = "human_duration::option")]`).
    pub(crate) mod option {
        use std::time::Duration;

        use serde::{Deserializer, Serializer};

        pub(crate) fn serialize<S: Serializer>(
            d: &Option<Duration>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            super::deserialize(d).map(Some)
        }
    }
}
