//! The checker: what a fenced-counter run did, computed from its records by pure functions.
//!
//! - [`exclusion`]: pairs of grants whose hold windows overlap (mutual exclusion broken).
//! - [`fence`]: grants whose fencing token did not grow (duplicates, regressions).
//! - [`report`]: per-run numbers ([`RunReport`]) and their summary over runs ([`Summary`]).

pub mod exclusion;
pub mod fence;
pub mod report;

pub use exclusion::{Window, exclusion_violations, overlapping_pairs};
pub use fence::fence_regressions;
pub use report::{RunReport, Summary, lost};
