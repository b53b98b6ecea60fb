//! The checker: what a fenced-counter run did, computed from its records by pure functions.
//! It never asks the lock anything: it judges what was recorded.
//!
//! - [`exclusion`]: pairs of grants whose hold windows overlap (mutual exclusion broken).
//! - [`fence`]: grants whose fencing token did not grow (duplicates, regressions).
//! - [`report`]: per-run numbers ([`RunReport`]) and their summary over runs ([`Summary`]).
//! - [`stale`]: how many lost increments stale writes can explain.

pub mod exclusion;
pub mod fence;
pub mod report;
pub mod stale;

pub use exclusion::{Window, exclusion_violations, overlapping_pairs};
pub use fence::fence_regressions;
pub use report::{RunReport, Summary, lost};
pub use stale::{Written, stale_reach};
