//! How a subcommand failed, and the exit code each failure maps to (the CI contract).
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done; every expectation met |
//! | 1 | a safety expectation failed ([`EXIT_SAFETY`]) |
//! | 2 | the harness failed: a server, container, proxy or database could not be run or reached, or a signal stopped the command ([`EXIT_HARNESS`]) |
//! | 3 | `chaos lock` only: the lock was not granted ([`EXIT_NOT_GRANTED`]) |
//! | 4 | every safety check met, but a liveness check failed: the lock did not grant where it promised to ([`EXIT_LIVENESS`]) |
//! | 64 | the command line or a file it names is wrong; nothing was started ([`EXIT_USAGE`]) |
//!
//! Configuration errors are found before anything starts, so a typo in a nightly job never
//! reads as a safety failure (1) or a broken harness (2); and a lock that stayed safe but
//! stopped granting (on a busy machine, perhaps for the machine) never reads as a safety
//! failure either (4). A verdict's code is [`crate::report::Outcome::exit_code`].

/// A safety expectation failed (`chaos run`, `chaos report --exit-code`, `chaos
/// fencing-table`).
pub const EXIT_SAFETY: u8 = 1;
/// The harness failed, or a signal stopped the command.
pub const EXIT_HARNESS: u8 = 2;
/// `chaos lock` asked for a lock that was not granted (held elsewhere, or no quorum): an
/// answer, not a safety failure.
pub const EXIT_NOT_GRANTED: u8 = 3;
/// Every safety check met, but a liveness check failed (`chaos run`, `chaos report
/// --exit-code`): no section completed, no grant after a heal, a minority fault without a
/// section, a majority loss no acquire felt, or the quorum probe.
pub const EXIT_LIVENESS: u8 = 4;
/// Exit code of a command line that cannot be acted on (`EX_USAGE` of sysexits.h); nothing
/// was started.
pub const EXIT_USAGE: u8 = 64;

/// Why a subcommand stopped without a result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The command line (or a file it names) cannot be acted on; the message says what to
    /// change. Found before anything was started.
    #[error("{0}")]
    Usage(String),
    /// A server, container, proxy or database could not be run or reached.
    #[error("{0}")]
    Harness(String),
    /// A signal stopped the command; what it started was removed first.
    #[error("interrupted ({signal}); nothing it started is left running")]
    Interrupted {
        /// `SIGINT`, `SIGTERM` or `SIGHUP`.
        signal: &'static str,
    },
}

impl CommandError {
    /// A usage error from anything printable.
    pub fn usage(message: impl Into<String>) -> Self {
        CommandError::Usage(message.into())
    }

    /// A harness error from anything printable.
    pub fn harness(message: impl ToString) -> Self {
        CommandError::Harness(message.to_string())
    }

    /// The exit code: [`EXIT_USAGE`] or [`EXIT_HARNESS`].
    pub fn exit_code(&self) -> u8 {
        match self {
            CommandError::Usage(_) => EXIT_USAGE,
            CommandError::Harness(_) | CommandError::Interrupted { .. } => EXIT_HARNESS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes a verdict exits with are the ones this table documents.
    #[test]
    fn verdicts_exit_with_the_documented_codes() {
        use crate::report::Outcome;
        assert_eq!(Outcome::Fail.exit_code(), EXIT_SAFETY);
        assert_eq!(Outcome::Unavailable.exit_code(), EXIT_LIVENESS);
        assert_eq!(Outcome::Unknown.exit_code(), EXIT_HARNESS);
        assert_eq!(Outcome::Pass.exit_code(), 0);
        assert_eq!(Outcome::NotApplicable.exit_code(), 0);
        let codes = [
            EXIT_SAFETY,
            EXIT_HARNESS,
            EXIT_NOT_GRANTED,
            EXIT_LIVENESS,
            EXIT_USAGE,
        ];
        for (i, a) in codes.iter().enumerate() {
            assert!(
                !codes[i + 1..].contains(a),
                "exit code {a} means two things"
            );
        }
    }

    #[test]
    fn only_usage_errors_exit_64() {
        assert_eq!(CommandError::usage("x").exit_code(), 64);
        assert_eq!(CommandError::harness("x").exit_code(), 2);
        let stopped = CommandError::Interrupted { signal: "SIGTERM" };
        assert_eq!(stopped.exit_code(), 2);
        assert!(stopped.to_string().contains("SIGTERM"), "{stopped}");
    }
}
