//! The checker: what a fenced-counter run did, computed from its records by pure functions.
//! It never asks the lock anything: it judges what was recorded.
//!
//! - [`announced`]: the validity a lease announced over time (acquire, extends, renewals):
//!   what writes are judged stale against, and where renewed holding windows end.
//! - [`availability`]: long minority faults during which a mode was granted nothing.
//! - [`exclusion`]: pairs of grants whose hold windows overlap (mutual exclusion broken).
//! - [`fence`]: grants whose fencing token was granted twice, or did not exceed one returned
//!   before it was asked for.
//! - [`handoff`]: whether a released lease, or one kept past its validity, still held its own
//!   client's waiters back.
//! - [`report`]: per-run numbers ([`RunReport`]) and their summary over runs ([`Summary`]).
//! - [`stale`]: how many lost increments stale writes can explain.
//! - [`truth`]: server truth — each grant's reported validity against how long a quorum
//!   of its keys really lived, by the servers' `PTTL`.
//! - [`leak`]: keys of attempts that were never granted, left on a node long after the
//!   attempt should have removed them.
//! - [`keys`]: what the key watcher records (key reads, windows that excuse a key).
//! - [`exemptions`]: the faults and stalls that excuse a key left standing.
//! - [`release_leak`]: keys of granted leases, left on a node after their release should
//!   have removed them.
//! - [`history`]: the history, Jepsen-style: every operation with its invoke and complete
//!   times, outcome (ok / fail / info) and values; JSON lines.
//! - [`quorum_probe`]: acquires the rig makes itself while exactly `N − quorum` nodes are
//!   down: the lock must grant them (an off-by-one in "quorum still possible" does not).
//! - [`renewal`]: whether a renewed lease whose keys a quorum forgot hears it from its
//!   renewer, not only when its validity runs out.
//! - [`retire`]: late fence retirements followed by a grant (what a `late_retire`
//!   scenario needs to have seen).
//! - [`lost`](mod@lost): lost updates by name, each with the write that erased it, replayed from the
//!   resource's log.

pub mod announced;
pub mod availability;
pub mod exclusion;
pub mod exemptions;
pub mod fence;
pub mod handoff;
pub mod history;
pub mod keys;
pub mod leak;
pub mod lost;
pub mod quorum_probe;
pub mod release_leak;
pub mod renewal;
pub mod report;
pub mod retire;
pub mod stale;
pub mod truth;

pub use exclusion::{Window, exclusion_violations, overlapping_pairs};
pub use fence::{TokenGrant, fence_regressions};
pub use lost::{LostReport, LostUpdate, lost_updates};
pub use report::{RunReport, Summary, lost};
pub use stale::{Written, stale_reach};
