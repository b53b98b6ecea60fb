//! The nemesis: faults as data, seeded schedules, applied to a cluster and always healed.
//!
//! # Map
//! - [`fault`]: [`Fault`], what can go wrong, each with its heal (crash/start, hold/release,
//!   partition/repair, ...), and [`Targets`]: which nodes (or workers) it hits.
//! - [`target`]: seeded choice of one node, a minority or a majority.
//! - [`schedule`]: [`Schedule`], a list of [`ScheduledFault`]s on a timeline, and the seeded
//!   window generator recipes build them from.
//! - [`apply`](mod@apply): apply/heal one fault on one target against a [`Cluster`] and its proxy;
//!   [`WorkerControl`], how client-side faults reach the workload.
//! - [`runner`]: [`Nemesis`], which plays a schedule on a tokio timeline, records when each
//!   fault was really applied and healed, and heals whatever is active on every exit path.
//! - [`clock_check`]: after every clock fault and heal, the node's `TIME` against ours.
//! - [`forget`](mod@forget): a node losing the run's lock keys while it runs.
//! - [`error`]: what can go wrong ([`NemesisError`]).
//!
//! The named recipes that produce schedules live in [`crate::scenario`].
//!
//! [`Cluster`]: crate::cluster::Cluster

pub mod apply;
pub mod clock_check;
pub mod connection;
pub mod error;
pub mod fault;
pub mod forget;
pub mod runner;
pub mod schedule;
pub mod target;

pub use apply::{WorkerControl, apply, heal};
pub use connection::{ConnectionFault, ConnectionKind};
pub use error::NemesisError;
pub use fault::{Fault, PartitionVia, Target, Targets, WorkerId};
pub use runner::{ActiveFaults, FaultRecord, Nemesis, NemesisReport};
pub use schedule::{Schedule, ScheduledFault};
