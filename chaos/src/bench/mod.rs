//! `chaos bench`: our client side by side with the Rust peers, in one run, on one cluster,
//! reported as ratios (the machine is shared and noisy; ratios taken minutes apart on the
//! same nodes are what can be compared).
//!
//! # Map
//! - this file: [`BenchConfig`]/[`Plan`] (sample counts, `--quick`), [`run`] (bring up 5
//!   local primaries, put node 4 behind an in-process proxy for the slow-node case, run
//!   the cases, tear everything down), the report types and the [`ratios`].
//! - [`clients`]: one adapter per client behind [`clients::LockClient`] — ours unfenced,
//!   fenced, and fenced with the clock-jump guard or with durable votes, `rslock` 0.10,
//!   `redlock` 2.0 (sequential, blocking, on `spawn_blocking`), and the floor (one node,
//!   `SET NX PX` + Lua compare-and-delete). The two peers sit
//!   behind the `peers` feature, off by default: rslock's only tokio feature pulls rustls.
//! - [`cases`]: healthy (also the durable case's loop), slow node, frozen node, hand-off,
//!   throughput, and the hook for timing `chaos fencing-table` end to end.
//! - [`transport`]: the lock's lean RESP2 connection beside the `redis` crate's RESP3 one,
//!   and the check that the RESP3 client really is on the latter.
//! - [`ceiling`]: the throughput rows' bound — the cores left to the servers over the
//!   servers' CPU per lock op, both measured in the client's own slices — and why it is
//!   one; [`proc_cpu`] reads those CPU times from `/proc`.
//! - [`redis_benchmark`]: `redis-benchmark -P 16` for the same command mix, a reference
//!   row (`redis-benchmark-P16`) that no longer bounds a lock client.
//! - [`stats`]: p50/p99 from HDR histograms, and the crate's one percentile.
//!   [`table`]: the printed table.
//!
//! # Cases, in run order
//! 1. **healthy** — acquire+release on one resource, no contention; clients take turns in
//!    [`cases::ROUNDS`] blocks so load drift on the shared machine hits them alike.
//! 2. **slow-node** — node 4 reached through a proxy adding 50 ms to every reply
//!    (acquire+release, so mostly the release waiting for that node).
//! 3. **healthy/acquire** and **slow-node/acquire** — acquire alone, releases detached,
//!    the lanes of both cases interleaved: the slow/healthy ratio compares like with like
//!    (an awaited 50 ms release idles the box and by itself doubles the next acquire).
//! 4. **hand-off** — holder releases at `t`, a waiter acquires at `t′`; `t′ − t`.
//! 5. **throughput** — 64 tasks × 64 resources for 10 s (`--quick`: 2 s); every row with
//!    its client's CPU per op, the servers' CPU per op and the [`ceiling`] it implies, and
//!    the row's fraction of it. Then `redis-benchmark -P 16` on the same nodes, for
//!    reference.
//! 6. **transport/latency** and **transport/throughput** — `ours` (the lock's lean RESP2
//!    connection, `redis://` URLs) beside `ours-resp3` (the same URLs with
//!    `protocol=resp3`: the `redis` crate's multiplexed connection), both unfenced:
//!    acquire+release as in healthy, then 64 tasks × 64 resources as in throughput (with
//!    the ceiling too). Between the two, `CLIENT LIST` on
//!    every node must show new `resp=3` connections, or the case fails (see [`transport`]).
//!    Issue 23 keeps the lean connection only while it wins here.
//! 7. **durable/always** and **durable/everysec** — acquire+release like healthy, for
//!    `ours-fenced` and `ours-durable` (fenced, a yes counts once fsynced), with every
//!    node switched to that `appendfsync` and back to the run's policy afterwards, also on
//!    error or panic. A case of its own: a node at `everysec` that waits for its
//!    once-a-second fsync makes a durable vote take up to a second, which would swamp every
//!    other case; its lanes stop at [`Plan::durable_budget`]. (Valkey 8.1.8 does not wait:
//!    see [`clients::DURABLE_FSYNC_TIMEOUT`].)
//! 8. **frozen-node/acquire** — node 4 SIGSTOPped; always thawed afterwards, also on error
//!    or panic. Last, so hung peer connections cannot disturb the other cases.
//! 9. **fencing-table** — the whole `chaos fencing-table` on these nodes, timed (full: 45
//!    runs of 10,000 sections at once; `--quick`: 9 runs of 1,000).
//!
//! # Where the time goes (perf, 2026-12-01)
//! The nodes run without libfaketime ([`ClusterSpec::without_clock_faults`]): under it,
//! every clock call of a Valkey server re-read the timestamp file, 72 % of the machine's
//! samples were in the servers (`path_openat`, `vfs_read`, `getenv`, `vfprintf` at the top)
//! and throughput was a third of what it is without. Without it, in the throughput case,
//! the client's Tokio workers take about a third of the samples (half of it socket
//! syscalls in the kernel, then our code and malloc) and the servers half.
//! `docs/performance.md` has the numbers.
//!
//! Per lock operation (acquire + release, no contention), measured the same day:
//! - **Server side**, from `INFO commandstats` on one node (20,000 cycles): `SET NX PX`
//!   0.47 µs; our release script 2.9 µs with its `PUBLISH`, 2.2 µs without (the `PUBLISH`
//!   itself 0.2–0.4 µs, the rest is the extra `redis.call`); rslock's `EVALSHA` script
//!   2.0–2.3 µs; `EVAL` against `EVALSHA` of the same script: within 0.3 µs. Any check
//!   of "is anyone waiting" (a marker key, `PUBSUB NUMSUB`) is itself a `redis.call` of
//!   the same cost, so the release keeps its `PUBLISH`. Most of a server's time per
//!   command is not in the command at all but in reading and writing the socket.
//! - **Client side**: the throughput rows carry this process's CPU per operation
//!   (`cpu/op`; the clients take turns). Cuts so far: one timer per fan-out instead of
//!   one per node call (86 → 81 µs per op in one round), the release returning at a
//!   majority, and (2026-12-01, evening) a fan-out that polls its few calls in place
//!   instead of boxing each into a `FuturesUnordered` and that counts every answer
//!   already in before deciding, so a call that has answered is never handed to a
//!   background task: A/B on one machine, two rounds each, base/new interleaved,
//!   throughput ours/rslock 0.88, 0.89 → 0.98, 1.02 and `cpu/op` 37.2, 36.1 → 32.2,
//!   31.6 µs against rslock's 31.2–32.9 µs. What is left per node call — the order gate,
//!   the in-flight permit — is the price of the request-order guarantee rslock does not
//!   give; perf shows no single symbol of ours above 0.2 % of the samples. Then
//!   (2026-12-01, night) a connection of our own for `redis://` nodes (`fenced_redlock`'s
//!   `conn`): no channel and driver task per request, the request written from the
//!   caller's task when the connection is idle, batched by one writer task when it is
//!   busy. A/B, same machine, interleaved: `cpu/op` ours/rslock 1.14, 1.05 → 0.93, 0.91,
//!   throughput ours/rslock 0.92, 0.95 → 0.99, 1.00 (the servers take most of the machine),
//!   fenced `cpu/op` −24 %; `docs/measurements/transport-2026-12-01.txt`.
//!
//! `--repeat K` (default 3, 1 with `--quick`) runs cases 1–8 K times on the same nodes;
//! every row is the median of its K per-round values, with the p50 and ops/s ranges beside
//! it, so "within noise" is a number. `--case NAME,…` runs a subset. Progress goes to
//! stderr through [`Meter`]: a bar on a terminal, otherwise a line every 10 s (cases done
//! of all, elapsed, an estimate, the case running now); the fencing-table case has its own
//! meter, in sections.
//!
//! Every lane stops at `max_timeouts` samples cut at the 2 s cap or at its time budget,
//! whichever comes first, so slow peers bound the run instead of stretching it.
//! The floor is one node, so it is measured only where a node fault cannot touch it
//! (healthy, throughput); it has no retry policy, so it is not in the hand-off either.
//!
//! # The nodes' fsync
//! The cluster runs `appendfsync always`; with 5 nodes on one disk that puts a shared
//! `fdatasync` queue on every write of every "independent" node. [`AppendFsync`]
//! (`--appendfsync`, default `everysec`) says which one a run used; it is in the report.

pub mod cases;
pub mod ceiling;
pub mod clients;
pub mod proc_cpu;
pub mod redis_benchmark;
pub mod stats;
pub mod table;
pub mod transport;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::cluster::{Cluster, ClusterError, ClusterSpec, Flavour, LocalCluster, NodeId};
use crate::proxy::{self, NewProxy, ProxyServer, Stream};
use crate::report::meter::Meter;
use cases::{Client, Lane};
use ceiling::Servers;
use clients::{Floor, Ours};
use stats::Samples;

/// Number of primaries.
pub const NODES: usize = 5;
/// The client name of the `redis-benchmark` reference row in the throughput case.
pub const REDIS_BENCHMARK: &str = "redis-benchmark-P16";
/// The node made slow (through the proxy) and, later, frozen.
pub const FAULTY_NODE: usize = 4;
/// Latency the proxy adds to every reply of the slow node.
pub const SLOW_NODE_LATENCY: Duration = Duration::from_millis(50);

/// Everything that can stop the bench.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// Bringing up or faulting the cluster failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The in-process proxy failed.
    #[error("proxy: {0}")]
    Proxy(String),
    /// A client or tool could not be set up.
    #[error("setup: {0}")]
    Setup(String),
    /// A client gave up acquiring (held, or nodes failing).
    #[error("{client}: not acquired: {detail}")]
    NotAcquired {
        /// Adapter name.
        client: &'static str,
        /// Its error.
        detail: String,
    },
    /// A release failed.
    #[error("release: {0}")]
    Release(String),
    /// An adapter was handed another adapter's lock (a bug in the bench).
    #[error("wrong lock type: {0}")]
    WrongHeld(String),
    /// A bounded wait ran out.
    #[error("timed out after {0:?}")]
    TimedOut(Duration),
    /// A task failed to join.
    #[error("task: {0}")]
    Task(String),
    /// SIGINT, SIGTERM or SIGHUP: the bench stopped; its servers, proxy and database were
    /// removed.
    #[error("interrupted ({signal}); nothing it started is left running")]
    Interrupted {
        /// The signal.
        signal: &'static str,
    },
    /// Writing the report failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The run panicked; the cluster was taken down anyway.
    #[error("bench panicked: {0}")]
    Panicked(String),
}

/// Sample counts and bounds.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Lease TTL for every client.
    pub ttl: Duration,
    /// Cap on one sample; beyond it the sample counts as a timeout.
    pub cap: Duration,
    /// Timeouts after which a client's case stops.
    pub max_timeouts: u32,
    /// Healthy samples (and unmeasured warm-up cycles before them).
    pub healthy: usize,
    /// Warm-up cycles before each latency case.
    pub warmup: usize,
    /// Slow-node acquire+release samples (each waits ~50 ms for the slow node).
    pub slow: usize,
    /// Measuring time after which a lane stops (slow peers would take minutes otherwise).
    pub lane_budget: Duration,
    /// Acquire-only samples, releases detached (healthy and slow node, same rhythm).
    pub acquire_only: usize,
    /// Frozen-node samples.
    pub frozen: usize,
    /// Durable-case samples per lane and fsync policy.
    pub durable: usize,
    /// Measuring time after which a durable-case lane stops: at `appendfsync everysec` a
    /// durable sample can wait up to a second per round, so this bounds the case.
    pub durable_budget: Duration,
    /// Cap on one durable-case sample: two rounds of up to
    /// [`clients::DURABLE_NODE_TIMEOUT`] each, then the release.
    pub durable_cap: Duration,
    /// Hand-off samples, and warm-up hand-offs before them.
    pub handoff: usize,
    /// Unmeasured hand-offs first (our waiters subscribe on the first wait).
    pub handoff_warmup: usize,
    /// Throughput duration.
    pub throughput: Duration,
    /// Concurrent tasks (= resources) in the throughput case.
    pub tasks: usize,
    /// `redis-benchmark -n` per node and command.
    pub ceiling_requests: u32,
    /// Time the full fencing table (45 runs of 10,000 sections); else one 1,000-section run
    /// per setting.
    pub fencing_table_full: bool,
}

impl Plan {
    /// The full run.
    pub fn full() -> Self {
        Plan {
            ttl: Duration::from_secs(10),
            cap: Duration::from_secs(2),
            max_timeouts: 3,
            healthy: 2000,
            warmup: 200,
            slow: 100,
            acquire_only: 1000,
            lane_budget: Duration::from_secs(12),
            frozen: 50,
            durable: 100,
            durable_budget: Duration::from_secs(5),
            durable_cap: Duration::from_secs(6),
            handoff: 60,
            handoff_warmup: 3,
            throughput: Duration::from_secs(10),
            tasks: 64,
            ceiling_requests: 100_000,
            fencing_table_full: true,
        }
    }

    /// `--quick`: enough samples to exercise every path, well under a minute.
    pub fn quick() -> Self {
        Plan {
            healthy: 200,
            warmup: 30,
            slow: 15,
            acquire_only: 100,
            lane_budget: Duration::from_secs(3),
            frozen: 8,
            durable: 20,
            durable_budget: Duration::from_secs(3),
            handoff: 12,
            handoff_warmup: 2,
            throughput: Duration::from_secs(2),
            ceiling_requests: 10_000,
            fencing_table_full: false,
            ..Plan::full()
        }
    }
}

/// The nodes' AOF fsync policy during the bench.
///
/// The cluster starts its nodes with `appendfsync always` (what the lock's safety under
/// restarts needs). Here all 5 nodes share one disk, so every `SET`/`DEL` on every node
/// waits for an `fdatasync` queued on the same device — a serialisation five real nodes
/// on five disks do not have, and which dominates every client's latency alike (profiled:
/// ~30 % of all CPU samples are valkey in `fdatasync`, acquire p50 roughly doubles).
/// The default measures the clients; `always` measures this box's disk as well.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum AppendFsync {
    /// Keep the cluster's `appendfsync always`.
    Always,
    /// `CONFIG SET appendfsync everysec` on every node for the run (default).
    Everysec,
}

impl AppendFsync {
    /// The config value.
    pub fn as_str(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
        }
    }
}

/// A case `--case` can select (acquire-only rows come with `acquire`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum Case {
    /// Acquire+release, no contention.
    Healthy,
    /// Acquire+release with one node 50 ms away.
    SlowNode,
    /// Acquire alone, healthy and slow node interleaved.
    Acquire,
    /// Release → waiting acquire.
    HandOff,
    /// 64 tasks × 64 resources, with the CPU ceiling; `redis-benchmark` for reference.
    Throughput,
    /// The lock's lean RESP2 connection beside the `redis` crate's RESP3 one: latency and
    /// 64 × 64 throughput, with CPU per operation.
    Transport,
    /// Acquire+release, fenced, with and without durable votes, at `appendfsync always`
    /// and `everysec`.
    Durable,
    /// Acquire with one node frozen.
    FrozenNode,
    /// `chaos fencing-table`, timed end to end (once, after the rounds).
    FencingTable,
}

impl Case {
    /// Every case, in run order.
    pub const ALL: [Case; 9] = [
        Case::Healthy,
        Case::SlowNode,
        Case::Acquire,
        Case::HandOff,
        Case::Throughput,
        Case::Transport,
        Case::Durable,
        Case::FrozenNode,
        Case::FencingTable,
    ];
}

/// Rounds of the full run: enough for a median and a range per client.
pub const DEFAULT_REPEAT: usize = 3;

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Rounds of every selected case (except the fencing table, timed once); each row
    /// reports the median of its per-round values and their range.
    pub repeat: usize,
    /// Cases to run, in [`Case::ALL`] order whatever the order given.
    pub cases: Vec<Case>,
    /// AOF fsync policy of the nodes during the run.
    pub appendfsync: AppendFsync,
    /// Server implementation of the 5 local primaries.
    pub flavour: Flavour,
    /// Counts and bounds.
    pub plan: Plan,
    /// Whether this is `--quick` (reported in `machine`).
    pub quick: bool,
}

impl BenchConfig {
    /// Full or quick, on Valkey.
    pub fn new(quick: bool) -> Self {
        BenchConfig {
            repeat: if quick { 1 } else { DEFAULT_REPEAT },
            cases: Case::ALL.to_vec(),
            appendfsync: AppendFsync::Everysec,
            flavour: Flavour::Valkey,
            plan: if quick { Plan::quick() } else { Plan::full() },
            quick,
        }
    }
}

/// One row of the table / one element of `cases` in the JSON.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// Case name (`healthy`, `healthy/acquire`, ...).
    pub case: String,
    /// Adapter name.
    pub client: String,
    /// Median, µs.
    pub p50_us: Option<f64>,
    /// 99th percentile, µs.
    pub p99_us: Option<f64>,
    /// Operations per second (see [`stats::Summary::ops_per_s`]).
    pub ops_per_s: Option<f64>,
    /// Samples cut at the cap.
    pub timeouts: u32,
    /// Measured samples.
    pub samples: usize,
    /// Failed operations.
    pub errors: u32,
    /// Why a row is short or empty.
    pub note: Option<String>,
    /// Rounds this row aggregates (`--repeat`); p50, p99 and ops/s are the medians of the
    /// per-round values, samples, timeouts and errors their sums.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub rounds: usize,
    /// Lowest and highest per-round p50, µs (the spread "within noise" means).
    #[serde(default)]
    pub p50_range_us: Option<[f64; 2]>,
    /// Lowest and highest per-round ops/s.
    #[serde(default)]
    pub ops_range: Option<[f64; 2]>,
    /// This process's CPU time per operation, µs: the client's cost plus the runtime's
    /// (the clients take turns; one at a time, in the latency loops, that includes the
    /// worker threads' sleeps and wake-ups). In `healthy`, `hand-off` (per hand-off, holder
    /// and waiter together), `throughput`, `transport/*` and `durable/*` rows. Not where
    /// other work in this process would be billed to the client: the slow-node rows (the
    /// proxy runs in this process), the acquire-only rows (a lane's detached releases
    /// finish during the next lane's turn) and the fencing table (a whole workload and
    /// checker, not lock operations).
    #[serde(default)]
    pub cpu_us_per_op: Option<f64>,
    /// The servers' CPU time per lock operation, µs: user + system time of all 5 server
    /// processes (`/proc/<pid>/stat`) over this client's slices, over its operations
    /// (throughput rows; see [`ceiling`]).
    #[serde(default)]
    pub server_cpu_us_per_op: Option<f64>,
    /// Cores left to the servers over this client's slices: the machine's CPU time
    /// (`/proc/stat`) minus this process's and everything else's but the servers', per
    /// second of wall time (throughput rows).
    #[serde(default)]
    pub server_cores: Option<f64>,
    /// The ceiling, lock ops/s: `server_cores` over the servers' CPU per operation — what
    /// the servers could do with the CPU this client left them (throughput rows).
    #[serde(default)]
    pub ceiling_ops_per_s: Option<f64>,
    /// `ops_per_s` over `ceiling_ops_per_s`, per round: the share of the CPU left to the
    /// servers that they used (1: they were the bottleneck; below 1, the client left CPU
    /// idle).
    #[serde(default)]
    pub of_ceiling: Option<f64>,
    /// The servers' `read` system calls per lock operation, all 5 together
    /// (`/proc/<pid>/io` `syscr`, throughput rows): fewer means this client's requests
    /// reached each server batched into fewer reads.
    #[serde(default)]
    pub server_reads_per_op: Option<f64>,
    /// The servers' `write` system calls per lock operation, all 5 together (`syscw`,
    /// throughput rows): fewer means replies left in fewer writes.
    #[serde(default)]
    pub server_writes_per_op: Option<f64>,
}

fn one() -> usize {
    1
}

impl Row {
    pub(crate) fn from_samples(case: &str, client: &str, s: &Samples, note: Option<String>) -> Row {
        let summary = s.summary();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        Row {
            case: case.to_owned(),
            client: client.to_owned(),
            p50_us: summary.map(|x| us(x.p50)),
            p99_us: summary.map(|x| us(x.p99)),
            ops_per_s: summary.map(|x| x.ops_per_s),
            timeouts: s.timeouts,
            samples: summary.map_or(0, |x| x.samples),
            errors: s.errors,
            note,
            rounds: 1,
            p50_range_us: None,
            ops_range: None,
            cpu_us_per_op: summary.and_then(|x| x.cpu_per_op).map(us),
            server_cpu_us_per_op: None,
            server_cores: None,
            ceiling_ops_per_s: None,
            of_ceiling: None,
            server_reads_per_op: None,
            server_writes_per_op: None,
        }
    }

    /// This row with its ceiling, or with why it has none appended to its note.
    pub(crate) fn with_ceiling(mut self, bound: Result<ceiling::Bound, ceiling::NoBound>) -> Row {
        match bound {
            Ok(b) => {
                self.server_cpu_us_per_op = Some(b.server_cpu_per_op_s * 1e6);
                self.server_cores = Some(b.server_cores);
                self.ceiling_ops_per_s = Some(b.ops_per_s);
                self.of_ceiling = Some(b.fraction);
                self.server_reads_per_op = b.server_io_per_op.map(|io| io.0);
                self.server_writes_per_op = b.server_io_per_op.map(|io| io.1);
            }
            Err(e) => {
                let why = format!("no ceiling: {e}");
                self.note = Some(match self.note.take() {
                    Some(n) => format!("{n}; {why}"),
                    None => why,
                });
            }
        }
        self
    }

    pub(crate) fn skipped(case: &str, client: &str, note: &str) -> Row {
        Row::from_samples(case, client, &Samples::default(), Some(note.to_owned()))
    }
}

/// One target: its value, the target as text, and whether it was met.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Ratio {
    /// The measured ratio (or value), `None` when a row is missing.
    pub value: Option<f64>,
    /// E.g. `"<= 1.5"`.
    pub target: String,
    /// Met, missed, or unknown.
    pub pass: Option<bool>,
    /// What it compares.
    pub meaning: String,
}

/// The host, for reading numbers later.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Machine {
    /// Logical CPUs available.
    pub cpus: usize,
    /// `/proc/cpuinfo` model name.
    pub cpu_model: String,
    /// Kernel release.
    pub kernel: String,
    /// 1-minute load average when the bench started.
    pub loadavg_1m: Option<f64>,
    /// Server on the nodes, e.g. `valkey 8.1.8`.
    pub server: String,
    /// Our per-node deadline in this run, ms.
    pub node_timeout_ms: u64,
    /// Lease TTL, ms.
    pub ttl_ms: u64,
    /// `--quick`.
    pub quick: bool,
    /// The nodes' `appendfsync` during the run.
    pub appendfsync: AppendFsync,
    /// Rounds of every case (`--repeat`).
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub repeat: usize,
}

/// The whole result (`--json`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct BenchReport {
    /// Every row.
    pub cases: Vec<Row>,
    /// Targets.
    pub ratios: BTreeMap<String, Ratio>,
    /// Host description.
    pub machine: Machine,
    /// RFC 3339, UTC.
    pub date: String,
    /// Things the reader should know (skipped parts, ceiling details).
    pub notes: Vec<String>,
}

/// Brings up the cluster, runs every case, takes it down (also after an error or panic).
///
/// Boxed, as [`crate::run::run_until`] is: compiled once, here.
pub fn run(config: &BenchConfig) -> BoxFuture<'_, Result<BenchReport, BenchError>> {
    Box::pin(run_unboxed(config))
}

async fn run_unboxed(config: &BenchConfig) -> Result<BenchReport, BenchError> {
    let date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let loadavg_1m = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()));
    let cluster =
        LocalCluster::up(ClusterSpec::new(config.flavour, NODES).without_clock_faults()).await?;
    let result = AssertUnwindSafe(run_on(&cluster, config))
        .catch_unwind()
        .await;
    let down = cluster.down().await;
    let (cases, notes, node_timeout) = match result {
        Ok(r) => r?,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            return Err(BenchError::Panicked(msg));
        }
    };
    down?;
    let machine = Machine {
        cpus: std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model: cpu_model(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
        loadavg_1m,
        server: cluster.server_version().to_owned(),
        node_timeout_ms: node_timeout.as_millis() as u64,
        ttl_ms: config.plan.ttl.as_millis() as u64,
        quick: config.quick,
        appendfsync: config.appendfsync,
        repeat: config.repeat,
    };
    Ok(BenchReport {
        ratios: ratios(&cases, node_timeout),
        cases,
        machine,
        date,
        notes,
    })
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default()
}

fn node_addr(url: &str) -> Result<SocketAddr, BenchError> {
    url.trim_start_matches("redis://")
        .trim_end_matches('/')
        .parse()
        .map_err(|e| BenchError::Setup(format!("node address {url}: {e}")))
}

pub(crate) async fn set_appendfsync(url: &str, policy: AppendFsync) -> Result<(), BenchError> {
    let set = async {
        let client = redis::Client::open(url)?;
        let mut c = client.get_multiplexed_async_connection().await?;
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("appendfsync")
            .arg(policy.as_str())
            .query_async::<()>(&mut c)
            .await
    };
    match tokio::time::timeout(Duration::from_secs(5), set).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(BenchError::Setup(format!(
            "CONFIG SET appendfsync on {url}: {e}"
        ))),
        Err(_) => Err(BenchError::Setup(format!(
            "CONFIG SET appendfsync on {url}: timed out"
        ))),
    }
}

/// The adapters over `urls`; the floor (on `floor_url`) only when given.
async fn build_set(
    urls: &[String],
    ttl: Duration,
    floor_url: Option<&str>,
) -> Result<(Vec<Client>, Duration), BenchError> {
    let ours = Ours::new(urls, ttl, false)?;
    let node_timeout = ours.node_timeout();
    let mut set: Vec<Client> = vec![
        Arc::new(ours),
        Arc::new(Ours::new(urls, ttl, true)?),
        Arc::new(Ours::guarded(urls, ttl)?),
    ];
    #[cfg(feature = "peers")]
    {
        set.push(Arc::new(clients::Rslock::new(urls)?));
        set.push(Arc::new(clients::Sequential::new(urls)?));
    }
    if let Some(u) = floor_url {
        set.push(Arc::new(Floor::connect(u).await?));
    }
    Ok((set, node_timeout))
}

type Outcome = (Vec<Row>, Vec<String>, Duration);

async fn run_on(cluster: &LocalCluster, config: &BenchConfig) -> Result<Outcome, BenchError> {
    let plan = &config.plan;
    let mut notes = Vec::new();
    if !cfg!(feature = "peers") {
        notes.push("built without feature `peers`: rslock and redlock 2.0 not measured".into());
    }
    for i in 0..NODES {
        set_appendfsync(&cluster.admin_url(NodeId(i))?, config.appendfsync).await?;
    }
    let urls: Vec<String> = (0..NODES)
        .map(|i| cluster.worker_url(NodeId(i)))
        .collect::<Result<_, _>>()?;
    let admin: Vec<SocketAddr> = (0..NODES)
        .map(|i| node_addr(&cluster.admin_url(NodeId(i))?))
        .collect::<Result<_, _>>()?;

    // The slow node: our own proxy in front of its admin address, +50 ms on every reply.
    let proxy_server = ProxyServer::start(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| BenchError::Proxy(e.to_string()))?;
    let slow = async {
        let api = proxy::Client::new(&proxy_server.url())
            .map_err(|e| BenchError::Proxy(e.to_string()))?;
        let p = api
            .create_proxy(&NewProxy::new(
                "bench-slow-node",
                "127.0.0.1:0",
                admin[FAULTY_NODE].to_string(),
            ))
            .await
            .map_err(|e| BenchError::Proxy(e.to_string()))?;
        api.add_latency(
            &p.name,
            Stream::Downstream,
            SLOW_NODE_LATENCY,
            Duration::ZERO,
        )
        .await
        .map_err(|e| BenchError::Proxy(e.to_string()))?;
        let mut slow_urls = urls.clone();
        slow_urls[FAULTY_NODE] = format!("redis://{}", p.listen);
        Ok::<_, BenchError>(slow_urls)
    }
    .await;
    let result = match slow {
        Ok(slow_urls) => rounds(cluster, config, &urls, &slow_urls, &admin, &mut notes).await,
        Err(e) => Err(e),
    };
    let stopped = proxy_server.shutdown().await;
    let (mut rows, node_timeout) = result?;
    stopped.map_err(|e| BenchError::Proxy(e.to_string()))?;
    if config.cases.contains(&Case::FencingTable) {
        tracing::info!("bench: fencing table (once)");
        rows.push(cases::fencing_table_end_to_end(&urls, plan).await);
    }
    Ok((rows, notes, node_timeout))
}

/// `config.repeat` rounds of the selected cases under a progress meter (a bar on a
/// terminal, a line every few seconds otherwise: cases done of all, elapsed, an estimate,
/// and which case runs), then one row per (case, client) over all rounds.
async fn rounds(
    cluster: &LocalCluster,
    config: &BenchConfig,
    urls: &[String],
    slow_urls: &[String],
    admin: &[SocketAddr],
    notes: &mut Vec<String>,
) -> Result<(Vec<Row>, Duration), BenchError> {
    let repeat = config.repeat.max(1);
    let per_round = config
        .cases
        .iter()
        .filter(|c| **c != Case::FencingTable)
        .count();
    let meter = Meter::start("bench", "cases", (per_round * repeat) as u64);
    let mut all = Vec::with_capacity(repeat);
    let mut node_timeout = Duration::ZERO;
    for round in 0..repeat {
        let progress = Progress {
            meter: &meter,
            round,
            repeat,
        };
        let (rows, nt) =
            cases_on(cluster, config, urls, slow_urls, admin, notes, &progress).await?;
        node_timeout = nt;
        all.push(rows);
    }
    meter.finish();
    Ok((aggregate(&all), node_timeout))
}

/// Where the rounds are: [`case`](Progress::case) before a case, [`done`](Progress::done)
/// after it.
struct Progress<'a> {
    meter: &'a Meter,
    round: usize,
    repeat: usize,
}

impl Progress<'_> {
    fn case(&self, name: &str) {
        let now = format!("round {}/{}: {name}", self.round + 1, self.repeat);
        self.meter.println(&format!("bench: {now}"));
        self.meter.now(&now);
    }

    fn done(&self) {
        self.meter.counter().fetch_add(1, Ordering::Relaxed);
    }
}

/// One row per (case, client) over the rounds: medians of the per-round p50, p99 and ops/s,
/// the p50 and ops/s ranges, summed counts, the first note.
pub fn aggregate(rounds: &[Vec<Row>]) -> Vec<Row> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut by_key: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for row in rounds.iter().flatten() {
        let key = (row.case.clone(), row.client.clone());
        if !by_key.contains_key(&key) {
            order.push(key.clone());
        }
        by_key.entry(key).or_default().push(row);
    }
    let range = |v: &[f64]| -> Option<[f64; 2]> {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo.is_finite() && hi.is_finite()).then_some([lo, hi])
    };
    order
        .into_iter()
        .filter_map(|key| {
            let rows = by_key.get(&key)?;
            let p50s: Vec<f64> = rows.iter().filter_map(|r| r.p50_us).collect();
            let p99s: Vec<f64> = rows.iter().filter_map(|r| r.p99_us).collect();
            let ops: Vec<f64> = rows.iter().filter_map(|r| r.ops_per_s).collect();
            let cpu: Vec<f64> = rows.iter().filter_map(|r| r.cpu_us_per_op).collect();
            let median_of = |f: fn(&Row) -> Option<f64>| {
                stats::median(&rows.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            Some(Row {
                case: key.0.clone(),
                client: key.1.clone(),
                p50_us: stats::median(&p50s),
                p99_us: stats::median(&p99s),
                ops_per_s: stats::median(&ops),
                timeouts: rows.iter().map(|r| r.timeouts).sum(),
                samples: rows.iter().map(|r| r.samples).sum(),
                errors: rows.iter().map(|r| r.errors).sum(),
                note: rows.iter().find_map(|r| r.note.clone()),
                rounds: rows.len(),
                p50_range_us: range(&p50s),
                ops_range: range(&ops),
                cpu_us_per_op: stats::median(&cpu),
                server_cpu_us_per_op: median_of(|r| r.server_cpu_us_per_op),
                server_cores: median_of(|r| r.server_cores),
                ceiling_ops_per_s: median_of(|r| r.ceiling_ops_per_s),
                of_ceiling: median_of(|r| r.of_ceiling),
                server_reads_per_op: median_of(|r| r.server_reads_per_op),
                server_writes_per_op: median_of(|r| r.server_writes_per_op),
            })
        })
        .collect()
}

async fn cases_on(
    cluster: &LocalCluster,
    config: &BenchConfig,
    urls: &[String],
    slow_urls: &[String],
    admin: &[SocketAddr],
    notes: &mut Vec<String>,
    progress: &Progress<'_>,
) -> Result<(Vec<Row>, Duration), BenchError> {
    let plan = &config.plan;
    let on = |c: Case| config.cases.contains(&c);
    let (direct, node_timeout) = build_set(urls, plan.ttl, Some(&urls[0])).await?;
    let mut rows = Vec::new();
    let (slow, _) = build_set(slow_urls, plan.ttl, None).await?;

    if on(Case::Healthy) {
        progress.case("healthy");
        let mut healthy: Vec<Lane> = direct
            .iter()
            .map(|c| Lane::new("healthy", c).with_cpu())
            .collect();
        cases::latency(&mut healthy, plan.healthy, plan.warmup, plan).await;
        rows.extend(healthy.iter().map(Lane::row));
        progress.done();
    }
    if on(Case::SlowNode) {
        progress.case("slow node");
        let mut slow_cycle: Vec<Lane> = slow.iter().map(|c| Lane::new("slow-node", c)).collect();
        cases::latency(&mut slow_cycle, plan.slow, plan.warmup.min(5), plan).await;
        rows.extend(slow_cycle.iter().map(Lane::row));
        progress.done();
    }
    if on(Case::Acquire) {
        progress.case("acquire only (healthy and slow node)");
        // Acquire alone: healthy and slow-node lanes take turns, in the same detached
        // rhythm, so the slow-node/healthy ratio compares like with like.
        let mut acquire: Vec<Lane> = direct
            .iter()
            .map(|c| Lane::new("healthy/acquire", c))
            .chain(slow.iter().map(|c| Lane::new("slow-node/acquire", c)))
            .collect();
        let mut pending = JoinSet::new();
        cases::acquire_only(&mut acquire, plan.acquire_only, plan, &mut pending).await;
        drain(&mut pending).await;
        rows.extend(acquire.iter().map(Lane::row));
        progress.done();
    }
    drop(slow);

    if on(Case::HandOff) {
        progress.case("hand-off");
        let (holders, _) = build_set(urls, plan.ttl, None).await?;
        rows.extend(cases::handoff(&holders, &direct, plan).await);
        progress.done();
    }

    if on(Case::Throughput) {
        progress.case("throughput");
        let servers = Servers::from_pids(&cluster.pids());
        rows.extend(cases::throughput("throughput", &direct, plan, &servers).await);
        rows.push(redis_benchmark_row(plan, admin, notes).await);
        progress.done();
    }

    if on(Case::Transport) {
        progress.case("transport (lean RESP2 beside the redis crate's RESP3)");
        rows.extend(transport::run(cluster, urls, plan, notes).await?);
        progress.done();
    }

    if on(Case::Durable) {
        progress.case("durable votes (appendfsync always, then everysec)");
        if !notes.iter().any(|n| n.starts_with("durable:")) {
            notes.push(format!(
                "durable: ours-durable waits up to {:?} for each vote's fsync (WAITAOF), within a {:?} node deadline",
                clients::DURABLE_FSYNC_TIMEOUT,
                clients::DURABLE_NODE_TIMEOUT
            ));
        }
        rows.extend(durable_case(cluster, urls, config).await?);
        progress.done();
    }

    if on(Case::FrozenNode) {
        progress.case("frozen node");
        let frozen_clients: Vec<Client> = direct
            .iter()
            .filter(|c| c.name() != "floor-1-node")
            .cloned()
            .collect();
        rows.extend(frozen_case(cluster, &frozen_clients, plan).await?);
        progress.done();
    }
    Ok((rows, node_timeout))
}

/// The reference row: `redis-benchmark -P 16` for the throughput case's command mix (not
/// a bound on a lock client; see [`redis_benchmark`]).
async fn redis_benchmark_row(plan: &Plan, admin: &[SocketAddr], notes: &mut Vec<String>) -> Row {
    let Some(bin) = redis_benchmark::locate() else {
        return Row::skipped("throughput", REDIS_BENCHMARK, "redis-benchmark not found");
    };
    let limit = plan.throughput * 6 + Duration::from_secs(30);
    match redis_benchmark::measure(
        &bin,
        admin,
        plan.ceiling_requests,
        plan.tasks as u32,
        plan.ttl,
        limit,
    )
    .await
    {
        Ok(c) => {
            let mut row = Row::skipped("throughput", REDIS_BENCHMARK, "");
            row.ops_per_s = Some(c.lock_ops_per_s);
            row.note = Some(
                "per-node (SET+EVAL) pair rate, pipelined 16 deep: a reference, not a bound".into(),
            );
            notes.push(format!(
                "redis-benchmark: SET NX PX per node {:?}/s, EVAL compare-and-delete per node {:?}/s (5 nodes at once, -c {} -P {})",
                c.set_rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
                c.eval_rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
                plan.tasks,
                redis_benchmark::PIPELINE
            ));
            row
        }
        Err(e) => Row::skipped("throughput", REDIS_BENCHMARK, &e.to_string()),
    }
}

/// Freeze, measure, and thaw whatever happens; then let every sample's task finish
/// (blocking peers' threads end once the node answers again) within a bound.
async fn frozen_case(
    cluster: &LocalCluster,
    clients: &[Client],
    plan: &Plan,
) -> Result<Vec<Row>, BenchError> {
    let node = NodeId(FAULTY_NODE);
    let mut pending = JoinSet::new();
    cluster.freeze(node).await?;
    let measured = AssertUnwindSafe(async {
        let mut lanes: Vec<Lane> = clients
            .iter()
            .map(|c| Lane::new("frozen-node/acquire", c))
            .collect();
        cases::acquire_only(&mut lanes, plan.frozen, plan, &mut pending).await;
        lanes.iter().map(Lane::row).collect::<Vec<_>>()
    })
    .catch_unwind()
    .await;
    let thawed = cluster.thaw(node).await;
    // Thawed: hung calls get their replies now.
    drain(&mut pending).await;
    thawed?;
    match measured {
        Ok(rows) => Ok(rows),
        Err(_) => Err(BenchError::Panicked("frozen-node case".into())),
    }
}

/// Fenced acquire+release with memory votes and with durable ones, lanes taking turns,
/// once with the nodes at `appendfsync always` and once at `everysec`; the run's policy is
/// put back afterwards, also after an error or a panic.
async fn durable_case(
    cluster: &LocalCluster,
    urls: &[String],
    config: &BenchConfig,
) -> Result<Vec<Row>, BenchError> {
    let plan = Plan {
        cap: config.plan.durable_cap,
        lane_budget: config.plan.durable_budget,
        ..config.plan.clone()
    };
    let clients: Vec<Client> = vec![
        Arc::new(Ours::new(urls, plan.ttl, true)?),
        Arc::new(Ours::durable(urls, plan.ttl)?),
    ];
    let admin: Vec<String> = (0..NODES)
        .map(|i| cluster.admin_url(NodeId(i)))
        .collect::<Result<_, _>>()?;
    let measured = AssertUnwindSafe(async {
        let mut rows = Vec::new();
        for policy in [AppendFsync::Always, AppendFsync::Everysec] {
            for url in &admin {
                set_appendfsync(url, policy).await?;
            }
            let case = format!("durable/{}", policy.as_str());
            let mut lanes: Vec<Lane> = clients
                .iter()
                .map(|c| Lane::new(&case, c).with_cpu())
                .collect();
            // Each warm-up cycle of a durable lane at `everysec` takes about a second; one
            // opens the connections, and the `always` round before has warmed the rest.
            let warmup = match policy {
                AppendFsync::Always => plan.warmup.min(5),
                AppendFsync::Everysec => 1,
            };
            cases::latency(&mut lanes, plan.durable, warmup, &plan).await;
            rows.extend(lanes.iter().map(Lane::row));
        }
        Ok::<_, BenchError>(rows)
    })
    .catch_unwind()
    .await;
    let mut restored = Ok(());
    for url in &admin {
        if let Err(e) = set_appendfsync(url, config.appendfsync).await {
            restored = restored.and(Err(e));
        }
    }
    match measured {
        Ok(rows) => {
            let rows = rows?;
            restored?;
            Ok(rows)
        }
        Err(_) => Err(BenchError::Panicked("durable case".into())),
    }
}

/// Joins detached sample tasks, bounded; async stragglers are aborted (blocking ones
/// finish on their own once their node answers).
async fn drain(pending: &mut JoinSet<()>) {
    let drained = tokio::time::timeout(Duration::from_secs(20), async {
        while pending.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        pending.abort_all();
    }
}

fn find<'a>(rows: &'a [Row], case: &str, client: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.case == case && r.client == client)
}

fn ratio(value: Option<f64>, target: &str, ok: impl Fn(f64) -> bool, meaning: &str) -> Ratio {
    Ratio {
        value,
        target: target.to_owned(),
        pass: value.map(ok),
        meaning: meaning.to_owned(),
    }
}

/// The targets (issues 7, 14 and 23), computed from the rows (reported, never asserted).
pub fn ratios(rows: &[Row], node_timeout: Duration) -> BTreeMap<String, Ratio> {
    let p50 = |case: &str, client: &str| find(rows, case, client).and_then(|r| r.p50_us);
    let p99 = |case: &str, client: &str| find(rows, case, client).and_then(|r| r.p99_us);
    let ops = |case: &str, client: &str| find(rows, case, client).and_then(|r| r.ops_per_s);
    let cpu = |case: &str, client: &str| find(rows, case, client).and_then(|r| r.cpu_us_per_op);
    let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let ours = p50("healthy", "ours");
    let mut m = BTreeMap::new();
    m.insert(
        "healthy_p50_ours_over_floor".into(),
        ratio(
            div(ours, p50("healthy", "floor-1-node")),
            "<= 1.5",
            |v| v <= 1.5,
            "acquire+release p50, ours / one-node floor",
        ),
    );
    m.insert(
        "healthy_p50_sequential_over_ours".into(),
        ratio(
            div(p50("healthy", "redlock-2.0-seq"), ours),
            ">= 3",
            |v| v >= 3.0,
            "redlock 2.0 p50 / ours (how much faster we are)",
        ),
    );
    let rslock = "rslock-0.10";
    m.insert(
        "healthy_p50_ours_over_rslock".into(),
        ratio(
            div(ours, p50("healthy", rslock)),
            "<= 0.9",
            |v| v <= 0.9,
            "acquire+release p50, ours / rslock",
        ),
    );
    m.insert(
        "healthy_acquire_p50_ours_over_rslock".into(),
        ratio(
            div(
                p50("healthy/acquire", "ours"),
                p50("healthy/acquire", rslock),
            ),
            "<= 0.8",
            |v| v <= 0.8,
            "acquire-only p50, ours / rslock",
        ),
    );
    m.insert(
        "throughput_ours_over_rslock".into(),
        ratio(
            div(ops("throughput", "ours"), ops("throughput", rslock)),
            ">= 1.1",
            |v| v >= 1.1,
            "lock ops/s, 64 tasks × 64 resources, ours / rslock",
        ),
    );
    m.insert(
        "throughput_rslock_of_ceiling".into(),
        // The peer's own fraction, for comparison: no target.
        Ratio {
            value: find(rows, "throughput", rslock).and_then(|r| r.of_ceiling),
            target: "reported".into(),
            pass: None,
            meaning: "lock ops/s, rslock / its CPU ceiling (cores left to the servers / their CPU per op)".into(),
        },
    );
    m.insert(
        "fenced_p50_over_unfenced".into(),
        ratio(
            div(p50("healthy", "ours-fenced"), ours),
            "<= 1.4",
            |v| v <= 1.4,
            "acquire+release p50, ours with fencing / ours without",
        ),
    );
    m.insert(
        "jump_guard_p50_over_fenced".into(),
        // A cost, reported: no target to pass or miss.
        Ratio {
            value: div(
                p50("healthy", "ours-jump-guard"),
                p50("healthy", "ours-fenced"),
            ),
            target: "reported".into(),
            pass: None,
            meaning: "acquire+release p50, fenced with the clock-jump guard / fenced without"
                .into(),
        },
    );
    for policy in [AppendFsync::Always, AppendFsync::Everysec] {
        let case = format!("durable/{}", policy.as_str());
        m.insert(
            format!("durable_{}_p50_over_fenced", policy.as_str()),
            // A cost, reported: no target to pass or miss.
            Ratio {
                value: div(p50(&case, "ours-durable"), p50(&case, "ours-fenced")),
                target: "reported".into(),
                pass: None,
                meaning: format!(
                    "acquire+release p50 at appendfsync {}, fenced with durable votes / fenced",
                    policy.as_str()
                ),
            },
        );
    }
    // Issue 23: the lean connection stays only while it wins. Each target is the lean
    // connection winning; by how much is the value.
    m.insert(
        "transport_resp3_p50_over_lean".into(),
        ratio(
            div(
                p50(transport::LATENCY, transport::RESP3),
                p50(transport::LATENCY, transport::LEAN),
            ),
            "> 1",
            |v| v > 1.0,
            "acquire+release p50, ours on the redis crate's RESP3 connection / on the lean one (> 1: lean is faster)",
        ),
    );
    m.insert(
        "transport_resp3_ops_over_lean".into(),
        ratio(
            div(
                ops(transport::THROUGHPUT, transport::RESP3),
                ops(transport::THROUGHPUT, transport::LEAN),
            ),
            "< 1",
            |v| v < 1.0,
            "lock ops/s, 64 tasks × 64 resources, RESP3 connection / lean (< 1: lean does more)",
        ),
    );
    m.insert(
        "transport_resp3_cpu_over_lean".into(),
        ratio(
            div(
                cpu(transport::THROUGHPUT, transport::RESP3),
                cpu(transport::THROUGHPUT, transport::LEAN),
            ),
            "> 1",
            |v| v > 1.0,
            "client CPU per lock op at 64 × 64, RESP3 connection / lean (> 1: lean is cheaper)",
        ),
    );
    m.insert(
        "slow_node_p50_over_healthy".into(),
        ratio(
            div(p50("slow-node", "ours"), ours),
            "<= 2.0",
            |v| v <= 2.0,
            "acquire+release p50 with one +50 ms node / healthy (default release)",
        ),
    );
    m.insert(
        "handoff_p99_ms".into(),
        ratio(
            p99("hand-off", "ours").map(|v| v / 1000.0),
            "<= 5 ms",
            |v| v <= 5.0,
            "release -> waiting acquire p99, ours (ms)",
        ),
    );
    m.insert(
        "slow_acquire_p50_over_healthy".into(),
        ratio(
            div(
                p50("slow-node/acquire", "ours"),
                p50("healthy/acquire", "ours"),
            ),
            "<= 1.2",
            |v| v <= 1.2,
            "our acquire p50 with one +50 ms node / healthy acquire p50",
        ),
    );
    m.insert(
        "frozen_acquire_p99_over_node_timeout".into(),
        ratio(
            div(
                p99("frozen-node/acquire", "ours"),
                Some(node_timeout.as_secs_f64() * 1e6),
            ),
            "<= 1.0",
            |v| v <= 1.0,
            "our acquire p99 with one node frozen / our per-node deadline",
        ),
    );
    m.insert(
        "fencing_table_minutes".into(),
        ratio(
            find(rows, "fencing-table", "ours-fenced")
                .filter(|r| r.errors == 0 && r.samples > 0)
                .and_then(|r| r.p50_us)
                .map(|us| us / 60e6),
            "<= 7 min (full table)",
            |v| v <= 7.0,
            "wall time of the fencing table (the article's took 35 min)",
        ),
    );
    m.insert(
        "handoff_p50_ms".into(),
        ratio(
            p50("hand-off", "ours").map(|v| v / 1000.0),
            "<= 1 ms",
            |v| v <= 1.0,
            "release -> waiting acquire, ours (ms)",
        ),
    );
    m.insert(
        "throughput_ours_of_ceiling".into(),
        ratio(
            find(rows, "throughput", "ours").and_then(|r| r.of_ceiling),
            ">= 0.9",
            |v| v >= 0.9,
            "lock ops/s, ours / the CPU ceiling (cores left to the servers / their CPU per op)",
        ),
    );
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: &str, p50: f64, ops: f64, samples: usize) -> Row {
        Row {
            p50_us: Some(p50),
            p99_us: Some(p50 * 2.0),
            ops_per_s: Some(ops),
            samples,
            ..Row::skipped(case, "ours", "")
        }
    }

    #[test]
    fn rounds_aggregate_to_medians_ranges_and_sums() {
        let rounds = vec![
            vec![
                row("healthy", 500.0, 10.0, 100),
                row("hand-off", 900.0, 1.0, 5),
            ],
            vec![row("healthy", 700.0, 30.0, 100)],
            vec![
                row("healthy", 600.0, 20.0, 100),
                row("hand-off", 800.0, 2.0, 5),
            ],
        ];
        let rows = aggregate(&rounds);
        assert_eq!(rows.len(), 2);
        let healthy = &rows[0];
        assert_eq!(healthy.case, "healthy");
        assert_eq!(healthy.rounds, 3);
        assert_eq!(healthy.p50_us, Some(600.0));
        assert_eq!(healthy.p99_us, Some(1200.0));
        assert_eq!(healthy.ops_per_s, Some(20.0));
        assert_eq!(healthy.p50_range_us, Some([500.0, 700.0]));
        assert_eq!(healthy.ops_range, Some([10.0, 30.0]));
        assert_eq!(healthy.samples, 300);
        assert_eq!(rows[1].rounds, 2);
        assert_eq!(rows[1].p50_range_us, Some([800.0, 900.0]));
    }

    #[test]
    fn transport_ratios_are_resp3_over_lean() {
        let on = |case: &str, client: &str, p50: f64, ops: f64, cpu: f64| Row {
            client: client.to_owned(),
            cpu_us_per_op: Some(cpu),
            ..row(case, p50, ops, 100)
        };
        let rows = vec![
            on(transport::LATENCY, transport::LEAN, 400.0, 2500.0, 40.0),
            on(transport::LATENCY, transport::RESP3, 500.0, 2000.0, 50.0),
            on(
                transport::THROUGHPUT,
                transport::LEAN,
                900.0,
                10_000.0,
                50.0,
            ),
            on(
                transport::THROUGHPUT,
                transport::RESP3,
                1000.0,
                8_000.0,
                60.0,
            ),
        ];
        let m = ratios(&rows, Duration::from_millis(100));
        let got = |name: &str| (m[name].value, m[name].pass);
        assert_eq!(
            got("transport_resp3_p50_over_lean"),
            (Some(1.25), Some(true))
        );
        assert_eq!(
            got("transport_resp3_ops_over_lean"),
            (Some(0.8), Some(true))
        );
        assert_eq!(
            got("transport_resp3_cpu_over_lean"),
            (Some(1.2), Some(true))
        );
        // No rows: no value, no verdict.
        let m = ratios(&[], Duration::from_millis(100));
        assert_eq!(m["transport_resp3_cpu_over_lean"].value, None);
        assert_eq!(m["transport_resp3_cpu_over_lean"].pass, None);
    }
}
