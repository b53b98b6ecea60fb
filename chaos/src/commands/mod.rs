//! Subcommands of `chaos` that live in the library so they can be tested and so `main.rs`
//! only dispatches.
//!
//! - [`fencing_table`]: `chaos fencing-table`, the stall rate × mode table.
//! - [`lock`]: `chaos lock`, acquire–hold–release once and report per node.

pub mod fencing_table;
pub mod lock;

use std::time::Duration;

/// Parses `10s`, `250ms`, `1m 30s` (humantime).
///
/// # Errors
/// A message naming the accepted units.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("{e}: write a duration with a unit, e.g. 10s, 250ms, 1m"))
}
