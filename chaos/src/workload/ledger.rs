//! The chaos run's resource: a counter that names every update it kept — and so every one it
//! lost.
//!
//! `counters` (the lock crate's [`fenced_redlock::pg`]) can only say *how many* increments
//! vanished. The ledger row also holds `last`, the id of the section whose write it holds,
//! and every accepted write appends `(section, prev, value)` to `chaos_applied` in the same
//! statement, where `prev` is the `last` the section read. A write that read a stale state
//! overwrites `value` and `last` with what it read plus one: the sections written since are
//! no longer reachable from the row. So at the end, walking `prev` from the row's `last`
//! through `chaos_applied` gives the chain of updates that survived; every other applied
//! section was erased, and the write that erased it is the one on the chain that read a
//! state older than it (see [`crate::checker::lost`](mod@crate::checker::lost)). It is Elle's list-append idea with
//! the list kept as links, so no statement carries more than a few numbers.
//!
//! The fenced modes guard their writes exactly as [`fenced_redlock::pg::CounterTable`] does
//! (`fence < $t` for write-only, a claim `fence < $t` then `fence = $t` for claim-first);
//! each is ONE statement (a data-modifying CTE), so the counter and the log change together
//! or not at all, as in `counters`.
//!
//! ```sql
//! CREATE TABLE chaos_ledger  (id int PRIMARY KEY, value bigint, fence bigint, last bigint);
//! CREATE TABLE chaos_applied (row_id int, section bigint, prev bigint, value bigint,
//!                             seq bigserial, PRIMARY KEY (row_id, section));
//! ```

use tokio_postgres::GenericClient;
use tokio_postgres::types::{ToSql, Type};

use super::Mode;

/// `last` of a row no section has written yet.
pub const ORIGIN: u64 = 0;

/// What a read (or a claim) returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct State {
    /// The counter.
    pub value: i64,
    /// The section whose write the row holds ([`ORIGIN`]: none yet).
    pub last: u64,
}

/// One accepted write, as `chaos_applied` keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Applied {
    /// The section that wrote.
    pub section: u64,
    /// The `last` it had read.
    pub prev: u64,
    /// The value it wrote.
    pub value: i64,
}

/// A row's state at the end: the row, and every write it accepted.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Final {
    /// The row.
    pub state: Option<State>,
    /// Every accepted write.
    pub applied: Vec<Applied>,
}

/// The ledger tables and their statements.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ledger;

const CREATE: &str = "CREATE TABLE IF NOT EXISTS chaos_ledger (id int PRIMARY KEY, \
    value bigint NOT NULL, fence bigint NOT NULL DEFAULT 0, last bigint NOT NULL DEFAULT 0); \
    CREATE TABLE IF NOT EXISTS chaos_applied (row_id int NOT NULL, section bigint NOT NULL, \
    prev bigint NOT NULL, value bigint NOT NULL, seq bigserial NOT NULL, \
    PRIMARY KEY (row_id, section))";
const RESET_ROW: &str = "INSERT INTO chaos_ledger (id, value, fence, last) VALUES ($1, 0, 0, 0) \
    ON CONFLICT (id) DO UPDATE SET value = 0, fence = 0, last = 0";
const RESET_LOG: &str = "DELETE FROM chaos_applied WHERE row_id = $1";
const READ: &str = "SELECT value, last FROM chaos_ledger WHERE id = $1";
const CLAIM: &str =
    "UPDATE chaos_ledger SET fence = $1 WHERE id = $2 AND fence < $1 RETURNING value, last";
/// In the row's order: `seq` is drawn inside the write's statement after its `UPDATE` took
/// the row lock, so two writes of one row draw in the order they changed it.
const APPLIED: &str =
    "SELECT section, prev, value FROM chaos_applied WHERE row_id = $1 ORDER BY seq";

/// The write of `mode`: `$1` value, `$2` section, `$3` row, `$4` prev, `$5` token (the
/// fenced modes only). The conditions are `counters`' (see the module docs).
fn write_sql(mode: Mode) -> &'static str {
    match mode {
        Mode::None | Mode::Checked => {
            "WITH w AS (UPDATE chaos_ledger SET value = $1, last = $2 \
             WHERE id = $3 RETURNING id) \
             INSERT INTO chaos_applied (row_id, section, prev, value) SELECT id, $2, $4, $1 FROM w"
        }
        Mode::WriteOnly => {
            "WITH w AS (UPDATE chaos_ledger SET value = $1, last = $2, fence = $5 \
             WHERE id = $3 AND fence < $5 RETURNING id) \
             INSERT INTO chaos_applied (row_id, section, prev, value) SELECT id, $2, $4, $1 FROM w"
        }
        Mode::ClaimFirst => {
            "WITH w AS (UPDATE chaos_ledger SET value = $1, last = $2 \
             WHERE id = $3 AND fence = $5 RETURNING id) \
             INSERT INTO chaos_applied (row_id, section, prev, value) SELECT id, $2, $4, $1 FROM w"
        }
    }
}

fn as_i64(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

fn as_u64(id: i64) -> u64 {
    u64::try_from(id).unwrap_or(0)
}

fn state(row: &tokio_postgres::Row) -> Result<State, tokio_postgres::Error> {
    Ok(State {
        value: row.try_get(0)?,
        last: as_u64(row.try_get(1)?),
    })
}

impl Ledger {
    /// Creates the tables if missing.
    ///
    /// # Errors
    /// PostgreSQL's.
    pub async fn create_if_missing<C: GenericClient>(
        &self,
        client: &C,
    ) -> Result<(), tokio_postgres::Error> {
        client.batch_execute(CREATE).await
    }

    /// Row `id` at 0, written by no one, its log empty.
    ///
    /// # Errors
    /// PostgreSQL's.
    pub async fn reset<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
    ) -> Result<(), tokio_postgres::Error> {
        client
            .execute_typed(RESET_LOG, &[(&id, Type::INT4)])
            .await?;
        client
            .execute_typed(RESET_ROW, &[(&id, Type::INT4)])
            .await?;
        Ok(())
    }

    /// The row (`None`: no such row).
    ///
    /// # Errors
    /// PostgreSQL's.
    pub async fn read<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
    ) -> Result<Option<State>, tokio_postgres::Error> {
        match client.query_typed_opt(READ, &[(&id, Type::INT4)]).await? {
            Some(r) => state(&r).map(Some),
            None => Ok(None),
        }
    }

    /// Stamps `fence` on the row unless a token at least as new is there; the state then
    /// (`None`: refused).
    ///
    /// # Errors
    /// PostgreSQL's.
    pub async fn claim<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
        fence: u64,
    ) -> Result<Option<State>, tokio_postgres::Error> {
        let t = as_i64(fence);
        let params: [(&(dyn ToSql + Sync), Type); 2] = [(&t, Type::INT8), (&id, Type::INT4)];
        match client.query_typed_opt(CLAIM, &params).await? {
            Some(r) => state(&r).map(Some),
            None => Ok(None),
        }
    }

    /// Section `section` of `mode` writes `value` over the state whose `last` was `prev`,
    /// under `fence` (ignored unfenced); whether the write was accepted.
    ///
    /// # Errors
    /// PostgreSQL's: the write may or may not have landed (`chaos_applied` tells).
    #[allow(clippy::too_many_arguments)]
    pub async fn write<C: GenericClient>(
        &self,
        client: &C,
        mode: Mode,
        id: i32,
        section: u64,
        prev: u64,
        value: i64,
        fence: u64,
    ) -> Result<bool, tokio_postgres::Error> {
        let (s, p, t) = (as_i64(section), as_i64(prev), as_i64(fence));
        let params: [(&(dyn ToSql + Sync), Type); 5] = [
            (&value, Type::INT8),
            (&s, Type::INT8),
            (&id, Type::INT4),
            (&p, Type::INT8),
            (&t, Type::INT8),
        ];
        let params = if mode.is_fenced() {
            &params[..]
        } else {
            &params[..4]
        };
        Ok(client.execute_typed(write_sql(mode), params).await? == 1)
    }

    /// The row and its whole log, read at the end.
    ///
    /// # Errors
    /// PostgreSQL's.
    pub async fn read_final<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
    ) -> Result<Final, tokio_postgres::Error> {
        let state = self.read(client, id).await?;
        let rows = client.query_typed(APPLIED, &[(&id, Type::INT4)]).await?;
        let applied = rows
            .iter()
            .map(|r| {
                Ok(Applied {
                    section: as_u64(r.try_get(0)?),
                    prev: as_u64(r.try_get(1)?),
                    value: r.try_get(2)?,
                })
            })
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
        Ok(Final { state, applied })
    }
}

/// Section ids: worker `w`'s `n`-th section (from 1) is `w × 1 000 000 + n`, so an id reads
/// as its worker and number, and no section is [`ORIGIN`].
pub fn section_id(worker: usize, n: u64) -> u64 {
    (worker as u64)
        .saturating_mul(SECTIONS_PER_WORKER)
        .saturating_add(n)
}

/// The worker of a [`section_id`].
pub fn worker_of(section: u64) -> u64 {
    section / SECTIONS_PER_WORKER
}

const SECTIONS_PER_WORKER: u64 = 1_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_ids_read_as_worker_and_number() {
        assert_eq!(section_id(0, 1), 1);
        assert_eq!(section_id(2, 17), 2_000_017);
        assert_eq!(worker_of(2_000_017), 2);
        assert_ne!(section_id(0, 1), ORIGIN);
    }

    #[test]
    fn every_write_keeps_the_counters_fence_condition() {
        assert!(!write_sql(Mode::None).contains("fence"));
        assert!(write_sql(Mode::WriteOnly).contains("fence < $5"));
        assert!(write_sql(Mode::ClaimFirst).contains("fence = $5"));
        assert!(CLAIM.contains("fence < $1"));
        for m in Mode::ALL {
            assert!(write_sql(m).contains("INSERT INTO chaos_applied"), "{m:?}");
        }
    }
}
