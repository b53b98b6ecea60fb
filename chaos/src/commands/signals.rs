//! The signals that stop a command: SIGINT (Ctrl-C), SIGTERM (`timeout`, a cancelled CI
//! job, systemd, Kubernetes) and SIGHUP (a closed terminal or SSH session).
//!
//! Their default action ends the process at once, leaving the servers (in process groups
//! of their own), PostgreSQL and containers running with their temp directories. A command
//! that starts anything creates an [`Interrupt`] FIRST, which replaces that action for all
//! three, and selects on [`Interrupt::recv`] beside its work; the work's drop guards and
//! teardown then run as on any other exit path.

use tokio::signal::unix::{Signal, SignalKind, signal};

use super::CommandError;

/// Listens for SIGINT, SIGTERM and SIGHUP from the moment it is created.
#[derive(Debug)]
pub struct Interrupt {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Interrupt {
    /// Takes over the three signals (inside a Tokio runtime).
    ///
    /// # Errors
    /// [`CommandError::Harness`] when a handler cannot be installed.
    pub fn listen() -> Result<Self, CommandError> {
        let on = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| CommandError::harness(format!("listening for {name}: {e}")))
        };
        Ok(Interrupt {
            int: on(SignalKind::interrupt(), "SIGINT")?,
            term: on(SignalKind::terminate(), "SIGTERM")?,
            hup: on(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// The next of the three signals to arrive: `"SIGINT"`, `"SIGTERM"` or `"SIGHUP"`.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}
