//! Subcommands of `chaos` that live in the library so they can be tested and so `main.rs`
//! only dispatches.
//!
//! - [`fencing_table`]: `chaos fencing-table`, the stall rate × mode table.
//! - [`images`]: `chaos images`, the offline images for the compose stack.
//! - [`judge`]: `chaos judge`, a recorded run judged again from its files.
//! - [`lock`]: `chaos lock`, acquire–hold–release once and report per node.
//! - [`run`]: `chaos run`, every scenario end to end with verdicts.
//!
//! What they share:
//! - [`error`](mod@error): [`CommandError`] and the exit-code contract (0, 1, 2, 64).
//! - [`checks`]: configuration checks run before anything starts (exit 64).
//! - [`signals`]: SIGINT, SIGTERM and SIGHUP, which every command that starts something
//!   turns into its ordinary clean-up.
//! - [`environment`]: the environment variables `chaos` reads, as `--help` lists them.
//! - [`stdout`]: output that ends quietly when its reader goes away (`| head`).

pub mod checks;
pub mod environment;
pub mod error;
pub mod fencing_table;
pub mod images;
pub mod judge;
pub mod lock;
pub mod run;
pub mod signals;
pub mod stdout;

use std::time::Duration;

pub use error::{
    CommandError, EXIT_HARNESS, EXIT_LIVENESS, EXIT_NOT_GRANTED, EXIT_SAFETY, EXIT_USAGE,
};

/// Parses `10s`, `250ms`, `1m 30s` (humantime).
///
/// # Errors
/// A message naming the accepted units.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("{e}: write a duration with a unit, e.g. 10s, 250ms, 1m"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        let err = parse_duration("10").expect_err("no unit");
        assert!(err.contains("e.g. 10s"), "{err}");
    }
}
