//! What the runner keeps of one mode while it plays: every entry as it came (the workers'
//! events, counter samples, stalls, failures) for the evidence, the history's operations
//! apart, and the few running counts the progress display and the samples need. Nothing
//! here judges: [`crate::judge`] does, from what this hands over.

use std::time::Duration;

use super::clock::ScenarioClock;
use crate::checker::history::Op;
use crate::judge::events::{GrantOutcome, WorkerEvent};
use crate::judge::evidence::{Entry, FinalRead, ModeLog};
use crate::workload::ledger::Ledger;

/// One mode's record so far.
#[derive(Debug, Default)]
pub struct ModeRecord {
    log: ModeLog,
    ops: Vec<Op>,
    sections: u64,
    ended: usize,
    failures: Vec<String>,
}

impl ModeRecord {
    /// Completed sections so far (accepted writes).
    pub fn sections(&self) -> u64 {
        self.sections
    }

    /// Workers that reported their end (cleanly or not).
    pub fn finished_workers(&self) -> usize {
        self.ended
    }

    /// Harness failures reported so far.
    pub fn failures(&self) -> &[String] {
        &self.failures
    }

    /// A client stall hit one of this mode's workers.
    pub fn count_stall(&mut self) {
        self.log.entries.push(Entry::Stall);
    }

    /// Record a failure found outside the events (a worker process that died, say).
    pub fn fail(&mut self, message: String) {
        self.ended += 1;
        self.failures.push(message.clone());
        self.log.entries.push(Entry::Failure(message));
    }

    /// A counter sample: the counter's `value`, read at `at` after `expected` sections had
    /// completed.
    pub fn sample(&mut self, at: Duration, value: i64, expected: u64) {
        self.log.entries.push(Entry::Sample {
            at_us: u64::try_from(at.as_micros()).unwrap_or(u64::MAX),
            value,
            expected,
        });
    }

    /// Take in one event.
    pub fn push(&mut self, ev: WorkerEvent) {
        let ev = match ev {
            WorkerEvent::Op(op) => return self.ops.push(op),
            ev => ev,
        };
        match &ev {
            WorkerEvent::Grant {
                outcome: GrantOutcome::Accepted,
                ..
            } => self.sections += 1,
            WorkerEvent::Done { .. } => self.ended += 1,
            WorkerEvent::Failed { worker, message } => {
                self.ended += 1;
                self.failures.push(format!("worker {worker}: {message}"));
            }
            _ => {}
        }
        self.log.entries.push(Entry::Event(ev));
    }

    /// The entries, for the evidence, and the history's operations.
    pub fn into_parts(self) -> (ModeLog, Vec<Op>) {
        (self.log, self.ops)
    }
}

/// Reads ledger row `row` and its log through `admin`, timed on `clock`.
///
/// # Errors
/// PostgreSQL's, as text.
pub async fn read_final(
    admin: &tokio_postgres::Client,
    row: i32,
    clock: ScenarioClock,
) -> Result<FinalRead, String> {
    let invoke_us = clock.us(tokio::time::Instant::now());
    let state = Ledger
        .read_final(admin, row)
        .await
        .map_err(|e| e.to_string())?;
    Ok(FinalRead {
        state,
        invoke_us,
        complete_us: clock.us(tokio::time::Instant::now()),
    })
}
