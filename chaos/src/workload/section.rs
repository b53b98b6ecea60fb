//! One critical section of the fenced counter, shared by the fencing table
//! ([`super::counter`]) and the chaos run ([`crate::run::chaos_workload`]).
//!
//! A section, under a held lease: read (or claim) the row, work, run the caller's
//! `before_write` step (a stall in the fencing table, a validity check in the chaos run),
//! then write `value + 1` the way the [`Mode`] says. Acquiring and releasing the lease, and
//! what to do with the outcome, stay with the caller.

use std::future::Future;
use std::time::Duration;

use fenced_redlock::FenceToken;
use fenced_redlock::pg::{Claim, CounterTable, PgError};
use tokio_postgres::Client;
use tokio_postgres::types::Type;

use super::mode::Mode;

/// What a section works on.
#[derive(Debug, Clone)]
pub struct SectionSpec {
    /// The counter table.
    pub table: CounterTable,
    /// How the section writes.
    pub mode: Mode,
    /// Counter row.
    pub row: i32,
    /// Time spent between read (or claim) and write.
    pub work: Duration,
    unfenced_write: String,
}

impl SectionSpec {
    /// A section on `row` of `table`.
    pub fn new(table: CounterTable, mode: Mode, row: i32, work: Duration) -> Self {
        SectionSpec {
            unfenced_write: format!("UPDATE {} SET value = $1 WHERE id = $2", table.name()),
            table,
            mode,
            row,
            work,
        }
    }

    /// The same section with `work` instead.
    pub fn with_work(&self, work: Duration) -> Self {
        SectionSpec {
            work,
            ..self.clone()
        }
    }
}

/// How a section ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionOutcome {
    /// The increment was written.
    Accepted,
    /// The resource refused the claim or the write (a newer token had been there).
    Rejected,
    /// `before_write` said not to write (e.g. the lease's validity ran out); nothing written.
    Abandoned,
}

/// Why a section could not run (never a fault of the lock: PostgreSQL is outside the
/// fault domain, so these are harness failures).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SectionError {
    /// A statement failed.
    #[error(transparent)]
    Pg(#[from] PgError),
    /// The row is missing.
    #[error("counter row {row} is missing; is another run using the same table and row?")]
    NoRow {
        /// The row id.
        row: i32,
    },
    /// A fenced mode got a lease without a token.
    #[error("the lock returned no fencing token; build the client with .fencing(true)")]
    NoFence,
}

/// Runs one section with `fence` (ignored in the unfenced modes). `before_write` is awaited
/// after the work and before the write; `false` abandons the section unwritten.
///
/// # Errors
/// [`SectionError`] when PostgreSQL fails or the row or token is missing.
pub async fn run_section(
    spec: &SectionSpec,
    client: &Client,
    fence: Option<FenceToken>,
    before_write: impl Future<Output = bool>,
) -> Result<SectionOutcome, SectionError> {
    let row = spec.row;
    let fence = match (spec.mode, fence) {
        (Mode::None | Mode::Checked, _) => FenceToken::new(0),
        (_, Some(f)) => f,
        (_, None) => return Err(SectionError::NoFence),
    };
    let value = match spec.mode {
        Mode::None | Mode::Checked | Mode::WriteOnly => spec
            .table
            .read(client, row)
            .await?
            .ok_or(SectionError::NoRow { row })?,
        Mode::ClaimFirst => match spec.table.claim(client, row, fence).await? {
            Claim::Claimed { value } => value,
            Claim::Rejected => return Ok(SectionOutcome::Rejected),
        },
    };
    tokio::time::sleep(spec.work).await;
    if !before_write.await {
        return Ok(SectionOutcome::Abandoned);
    }
    let next = value.saturating_add(1);
    let accepted = match spec.mode {
        Mode::None | Mode::Checked => {
            let rows = client
                .execute_typed(
                    &spec.unfenced_write,
                    &[(&next, Type::INT8), (&row, Type::INT4)],
                )
                .await
                .map_err(PgError::Postgres)?;
            if rows == 0 {
                return Err(SectionError::NoRow { row });
            }
            true
        }
        Mode::WriteOnly => spec
            .table
            .write_only(client, row, fence, next)
            .await?
            .is_accepted(),
        Mode::ClaimFirst => spec
            .table
            .write_claimed(client, row, fence, next)
            .await?
            .is_accepted(),
    };
    Ok(if accepted {
        SectionOutcome::Accepted
    } else {
        SectionOutcome::Rejected
    })
}
