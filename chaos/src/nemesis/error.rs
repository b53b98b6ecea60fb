//! What can go wrong while applying or healing faults.

use crate::cluster::ClusterError;
use crate::proxy::ClientError;

/// Why a fault could not be scheduled, applied or healed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NemesisError {
    /// The schedule does not fit this cluster.
    #[error("schedule entry {index} ({fault}): {reason}")]
    InvalidSchedule {
        /// Position in [`super::Schedule::faults`].
        index: usize,
        /// The fault's name.
        fault: &'static str,
        /// What to change.
        reason: String,
    },
    /// A proxy fault on a cluster without a proxy layer.
    #[error(
        "{fault} needs the proxy layer; bring the cluster up with ProxyPlan::Chaos or ProxyPlan::External"
    )]
    NoProxy {
        /// The fault's name.
        fault: &'static str,
    },
    /// A client-side fault without a [`super::WorkerControl`].
    #[error("{fault} targets workers; give the nemesis a WorkerControl (Nemesis::with_workers)")]
    NoWorkerControl {
        /// The fault's name.
        fault: &'static str,
    },
    /// The cluster refused a fault or its heal.
    #[error("{action}: {source}")]
    Cluster {
        /// What was being done, e.g. "apply kill to node 1".
        action: String,
        /// The cluster's error.
        #[source]
        source: Box<ClusterError>,
    },
    /// A clock fault or its heal did not move the node's clock as asked (its `TIME` says):
    /// the scenario would have run without the fault.
    #[error(
        "{action}: the node's clock did not move as asked: {observed}. Is libfaketime loaded under the server (LD_PRELOAD) and reading this clock file?"
    )]
    ClockNotMoved {
        /// What was being done, e.g. "apply clock-jump (+20 s) on n1".
        action: String,
        /// What the node's clock read instead.
        observed: String,
    },
    /// The node's keys could not be deleted ([`super::forget`]).
    #[error("{action}: {reason} (is the node's admin address reachable and writable?)")]
    Forget {
        /// What was being done.
        action: String,
        /// What failed.
        reason: String,
    },
    /// The proxy API refused a fault or its heal.
    #[error("{action}: {source}")]
    Proxy {
        /// What was being done.
        action: String,
        /// The API client's error.
        #[source]
        source: Box<ClientError>,
    },
}
