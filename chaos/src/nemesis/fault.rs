//! Faults as data: each variant names a fault and, by construction, its heal.
//!
//! | fault | apply | heal |
//! |---|---|---|
//! | `Kill` | SIGKILL | start (with its AOF) |
//! | `RestartKeep` | SIGKILL | start with its data |
//! | `RestartWipe` | SIGKILL | start EMPTY (amnesia) |
//! | `Freeze` | SIGSTOP / `docker pause` | thaw |
//! | `Partition` | proxy disabled / `docker network disconnect` | enable / reconnect |
//! | `BlackHole` | proxy `timeout` 0 toxics both ways | remove them (held connections close) |
//! | `Slow` | proxy latency toxic (downstream) | remove it |
//! | `Connection` | one proxy toxic on the lock's connections ([`super::connection`]) | remove it |
//! | `ClockJump` | libfaketime offset (Valkey) | offset 0 |
//! | `ClockSkew` | libfaketime rate, no jump (Valkey; local, Docker) | offset 0, rate 1 |
//! | `ClientStall` | the workload stalls the worker | the workload resumes it |
//! | `Forget` | the run's lock keys deleted on the node ([`super::forget`]) | nothing (keys come back as holders set them) |
//!
//! `RestartWipe` keeps the node down for the whole window and brings it back empty at the
//! END of the window: amnesia only matters if the node forgets while the others still hold
//! the keys, so the window is meant to be shorter than the lock TTL. `Kill` and `RestartKeep`
//! do the same to the node; they differ in intent (long outage vs. bounce), which recipes use.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::connection::ConnectionFault;
use crate::cluster::{NodeId, Verb};

/// Index of a workload worker (client-side faults target these, not nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct WorkerId(pub usize);

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "worker {}", self.0)
    }
}

/// How a partition is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionVia {
    /// Disable the node's proxy: workers are cut off, the node itself keeps running
    /// (both backends; needs the proxy layer).
    #[default]
    Proxy,
    /// `docker network disconnect` the node's container (docker only): everything,
    /// proxy included, loses it.
    Network,
}

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Fault {
    /// Crash (SIGKILL); heal: start again with its AOF.
    Kill,
    /// Crash, then come back with its data at the end of the window.
    RestartKeep,
    /// Crash, then come back with NO data at the end of the window (amnesia).
    RestartWipe,
    /// Stop the process (SIGSTOP / docker pause); heal: thaw.
    Freeze,
    /// Cut workers off the node; heal: repair.
    Partition {
        /// Proxy disable or docker network disconnect.
        via: PartitionVia,
    },
    /// Connections stay open, data vanishes both ways; heal: remove the toxics (which closes
    /// the held connections, as Toxiproxy does; clients reconnect).
    BlackHole,
    /// Replies (and with `both_ways` requests) are delayed by `latency_ms ± jitter_ms` on
    /// `connections_pct` % of the connections; heal: remove the toxics.
    Slow {
        /// Added delay, milliseconds.
        latency_ms: u64,
        /// Random ± spread, milliseconds.
        jitter_ms: u64,
        /// Share of connections slowed (Toxiproxy's toxicity), percent, 1-100.
        connections_pct: u64,
        /// Requests delayed too.
        both_ways: bool,
    },
    /// Resets, split replies, truncated streams or muted replies on the node's proxy
    /// ([`ConnectionFault`]); heal: remove the toxic.
    Connection(ConnectionFault),
    /// The node's wall clock jumps by `offset_s` seconds (Valkey only); heal: offset 0.
    ClockJump {
        /// Seconds; positive jumps forward (keys expire early).
        offset_s: i64,
    },
    /// The node's wall clock runs `rate_ppm` parts per million fast (positive) or slow from
    /// the moment it is applied, without a jump (Valkey only; the local and Docker backends,
    /// which know the server's start); heal: the real clock again, a jump back (or forward)
    /// by what it gained (or lost).
    ClockSkew {
        /// Parts per million: 10,000 runs 1 % fast.
        rate_ppm: i64,
    },
    /// A worker stops for the window (GC pause, swapped out); applied by the workload
    /// through [`super::WorkerControl`]; targets are workers.
    ClientStall,
    /// The node, still running, loses the run's lock keys (an eviction, an operator's
    /// delete) and keeps its fence counters ([`super::forget`]); heal: nothing.
    Forget,
}

impl Fault {
    /// Short stable name, e.g. `"partition"`.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::RestartKeep => "restart-keep",
            Fault::RestartWipe => "restart-wipe",
            Fault::Freeze => "freeze",
            Fault::Partition { .. } => "partition",
            Fault::BlackHole => "black-hole",
            Fault::Slow { .. } => "slow",
            Fault::Connection(c) => c.kind().name(),
            Fault::ClockJump { .. } => "clock-jump",
            Fault::ClockSkew { .. } => "clock-skew",
            Fault::ClientStall => "client-stall",
            Fault::Forget => "forget",
        }
    }

    /// Whether it goes through the proxy API.
    pub fn needs_proxy(&self) -> bool {
        matches!(
            self,
            Fault::Partition {
                via: PartitionVia::Proxy
            } | Fault::BlackHole
                | Fault::Slow { .. }
                | Fault::Connection(_)
        )
    }

    /// What it asks of the cluster ([`Cluster::check`]); `None` for client-side faults.
    ///
    /// [`Cluster::check`]: crate::cluster::Cluster::check
    pub fn needs(&self) -> Option<Verb> {
        Some(match self {
            Fault::Kill | Fault::RestartKeep => Verb::Kill,
            Fault::RestartWipe => Verb::RestartWipe,
            Fault::Freeze => Verb::Freeze,
            Fault::Partition {
                via: PartitionVia::Network,
            } => Verb::Disconnect,
            Fault::Partition {
                via: PartitionVia::Proxy,
            }
            | Fault::BlackHole
            | Fault::Slow { .. }
            | Fault::Connection(_) => Verb::Proxy,
            Fault::ClockJump { .. } => Verb::Clock,
            Fault::ClockSkew { .. } => Verb::ClockRate,
            Fault::Forget => Verb::Forget,
            Fault::ClientStall => return None,
        })
    }

    /// Whether its targets are workers rather than nodes.
    pub fn targets_workers(&self) -> bool {
        matches!(self, Fault::ClientStall)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Partition { via } => write!(f, "partition ({via:?})"),
            Fault::Slow {
                latency_ms,
                jitter_ms,
                connections_pct,
                both_ways,
            } => {
                write!(f, "slow ({latency_ms}±{jitter_ms} ms")?;
                if *connections_pct < 100 {
                    write!(f, ", {connections_pct} % of connections")?;
                }
                if *both_ways {
                    f.write_str(", both ways")?;
                }
                f.write_str(")")
            }
            Fault::ClockJump { offset_s } => write!(f, "clock-jump ({offset_s:+} s)"),
            Fault::ClockSkew { rate_ppm } => write!(f, "clock-skew ({rate_ppm:+} ppm)"),
            Fault::Connection(c) => c.fmt(f),
            other => f.write_str(other.name()),
        }
    }
}

/// One thing a fault is applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// A primary.
    Node(NodeId),
    /// A workload worker.
    Worker(WorkerId),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Node(n) => n.fmt(f),
            Target::Worker(w) => w.fmt(f),
        }
    }
}

/// What a scheduled fault hits: nodes, or (client-side faults) workers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Targets {
    /// Primaries.
    Nodes(Vec<NodeId>),
    /// Workload workers.
    Workers(Vec<WorkerId>),
}

impl Targets {
    /// Each target on its own.
    pub fn iter(&self) -> Box<dyn Iterator<Item = Target> + '_> {
        match self {
            Targets::Nodes(n) => Box::new(n.iter().map(|n| Target::Node(*n))),
            Targets::Workers(w) => Box::new(w.iter().map(|w| Target::Worker(*w))),
        }
    }

    /// Number of targets.
    pub fn len(&self) -> usize {
        match self {
            Targets::Nodes(n) => n.len(),
            Targets::Workers(w) => w.len(),
        }
    }

    /// No targets at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The node targets (empty for workers).
    pub fn nodes(&self) -> &[NodeId] {
        match self {
            Targets::Nodes(n) => n,
            Targets::Workers(_) => &[],
        }
    }
}
