//! Fenced writes to PostgreSQL: the resource side of fencing tokens (feature `postgres`).
//!
//! A lease can end while its holder still believes it holds it (a pause longer than the
//! TTL). The lock service cannot stop that holder's next write; the database can, if every
//! write carries the lease's [`FenceToken`] and the row remembers the highest token that
//! touched it. This module is that check, as SQL on a counter table:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS counters (
//!     id    int    PRIMARY KEY,
//!     value bigint NOT NULL,
//!     fence bigint NOT NULL DEFAULT 0  -- highest token that claimed or wrote the row
//! );
//! ```
//!
//! Two ways to fence a read-modify-write:
//! - **Write-only** ([`CounterTable::write_only`]): read, compute, then
//!   `UPDATE … SET value = $v, fence = $t WHERE id = $id AND fence < $t`. Rejects a stale
//!   holder whose token is older than the last write, but not one that read *before* a
//!   newer holder read and writes *before* that holder writes: both read the same value, the
//!   stale write is accepted (its token is still larger than the row's), and the newer
//!   holder then overwrites it. Rare, but an update is lost.
//! - **Claim-first** ([`CounterTable::claim`] then [`CounterTable::write_claimed`]): stamp
//!   the token on the row and get the value back in one statement, then write only if the
//!   stamp is still ours. A newer holder's claim makes every later statement of the older
//!   holder match no row, so no update is lost.
//!
//! Under PostgreSQL's default READ COMMITTED isolation, an `UPDATE` that finds the row
//! locked by a concurrent update waits, then re-evaluates its `WHERE` on the new row
//! version, so two holders can never both pass the `fence < $t` test with the same row
//! state. No explicit transaction is needed.
//!
//! ## Writing several times under one lease
//! Every statement compares with `<`, so a second [`CounterTable::claim`] or
//! [`CounterTable::write_only`] with the token already on the row is rejected, though the
//! lease is still valid. That is deliberate: **two holders can carry the same token**. If
//! a bare majority of lock nodes forgets its keys (a restart without persistence), a
//! second client can be granted while the first still holds its lease, and both read the
//! same counter maximum and pick the same token. Accepting an equal token (`<=`) would
//! let both claim the row and interleave their read-modify-writes unnoticed; with `<`,
//! the first claim wins and the other holder is rejected.
//!
//! To write several times under one lease, claim once with [`CounterTable::claim_row`]
//! and write through the returned [`RowClaim`] (`… AND fence = $t`): only the holder
//! whose claim succeeded has the handle, so a second holder with the same token cannot
//! write through it. ([`CounterTable::write_claimed`] takes a bare token and cannot tell
//! two such holders apart; prefer the handle.)
//!
//! A rejected statement (0 rows) is an *answer*, not an error: it is reported as
//! [`Write::Rejected`] / [`Claim::Rejected`]. The caller must not retry it with the same
//! token; abort, take a fresh lease and redo the whole read-modify-write. A row that does
//! not exist is reported the same way (the statement matched nothing); create rows with
//! [`CounterTable::insert`] first.
//!
//! ## Why this lives in the lock crate
//! Services that protect data with the lock need exactly these statements and nothing of
//! the chaos rig that measures them, so they are here behind an optional feature: without
//! `postgres`, the crate does not depend on `tokio-postgres` at all.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use fenced_redlock::Redlock;
//! use fenced_redlock::pg::{Claim, CounterTable, Write};
//!
//! let (client, connection) =
//!     tokio_postgres::connect("host=127.0.0.1 user=app dbname=app", tokio_postgres::NoTls).await?;
//! tokio::spawn(connection);
//! let table = CounterTable::default(); // the table `counters`
//! table.create_if_missing(&client).await?;
//!
//! let redlock = Redlock::builder(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002",
//!                                 "redis://127.0.0.1:7003"])
//!     .ttl(Duration::from_secs(2))
//!     .fencing(true)
//!     .build()?;
//! let lease = redlock.acquire("counter:1", Duration::from_secs(5)).await?;
//! let fence = lease.fence().expect("fencing is on");
//! if let Claim::Claimed { value } = table.claim(&client, 1, fence).await? {
//!     match table.write_claimed(&client, 1, fence, value + 1).await? {
//!         Write::Accepted => {}
//!         Write::Rejected => { /* a newer holder claimed the row: redo under a new lease */ }
//!     }
//! }
//! lease.release().await;
//! # Ok(()) }
//! ```

use tokio_postgres::GenericClient;
use tokio_postgres::types::{ToSql, Type};

use crate::fence::FenceToken;

/// The table name used by [`CounterTable::default`].
pub const DEFAULT_TABLE: &str = "counters";

/// Longest identifier PostgreSQL keeps without truncating (NAMEDATALEN − 1).
const MAX_IDENT_LEN: usize = 63;

/// Errors of the fenced-write helpers. A stale token is *not* an error (see [`Write`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The table name cannot be used safely in SQL.
    #[error(
        "table name {name:?} is not allowed: use 1-63 characters of [a-z0-9_], starting with a letter or _"
    )]
    InvalidTable {
        /// The rejected name.
        name: String,
    },
    /// The table's columns are not the expected `(id int, value bigint, fence bigint)`.
    #[error(
        "table {table:?}: column {column:?} does not have the expected type ({reason}); create the table with CounterTable::create_if_missing or give `value` and `fence` type bigint"
    )]
    ColumnType {
        /// The table.
        table: String,
        /// The column read.
        column: &'static str,
        /// What the driver said.
        reason: String,
    },
    /// The statement failed (connection lost, table missing, …).
    #[error("postgres: {}", describe(.0))]
    Postgres(#[from] tokio_postgres::Error),
}

/// `tokio_postgres::Error` displays a server error as just "db error"; say which.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({}): {}", db.message(), db.code().code(), e),
        None => e.to_string(),
    }
}

/// Outcome of a fenced write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a rejected write means the caller is stale and must redo its work under a new lease"]
pub enum Write {
    /// The row was updated.
    Accepted,
    /// No row matched: a holder with a newer (or, for [`CounterTable::write_claimed`], a
    /// different) token has written or claimed it, or the row does not exist.
    Rejected,
}

impl Write {
    /// `true` for [`Write::Accepted`].
    pub fn is_accepted(self) -> bool {
        self == Write::Accepted
    }
}

/// Outcome of [`CounterTable::claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a rejected claim means the caller is stale and must not write"]
pub enum Claim {
    /// Our token is now on the row; this was its value at that moment.
    Claimed {
        /// The counter's value.
        value: i64,
    },
    /// No row matched: a token at least as new is already on it, or the row does not exist.
    Rejected,
}

/// Our claim on a row, returned by [`CounterTable::claim_row`]: the lease's token is on
/// the row, and [`write`](RowClaim::write) writes under it as many times as needed, until
/// a newer holder claims the row.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a claim is only useful for writing through it"]
pub struct RowClaim {
    table: CounterTable,
    id: i32,
    fence: FenceToken,
    value: i64,
}

impl RowClaim {
    /// The row's value when it was claimed.
    pub fn value(&self) -> i64 {
        self.value
    }

    /// The row.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The token on the row.
    pub fn fence(&self) -> FenceToken {
        self.fence
    }

    /// `UPDATE … SET value = $v WHERE id = $id AND fence = $t`: writes while our claim is
    /// still the newest on the row; repeatable under the same claim.
    ///
    /// # Errors
    /// [`PgError::Postgres`] when the statement fails; a lost claim is `Ok(Write::Rejected)`.
    pub async fn write<C: GenericClient>(&self, client: &C, value: i64) -> Result<Write, PgError> {
        self.table
            .write_claimed(client, self.id, self.fence, value)
            .await
    }
}

/// A counter table `(id int primary key, value bigint not null, fence bigint not null
/// default 0)` with a validated name, and the fenced statements on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterTable {
    name: String,
    create: String,
    insert: String,
    read: String,
    write_only: String,
    claim: String,
    write_claimed: String,
}

impl Default for CounterTable {
    /// The table [`DEFAULT_TABLE`] (`counters`).
    fn default() -> Self {
        CounterTable::with_valid_name(DEFAULT_TABLE)
    }
}

impl CounterTable {
    /// A table with another name. Only plain lower-case identifiers are accepted, because
    /// the name is spliced into SQL text (identifiers cannot be bound as parameters).
    ///
    /// # Errors
    /// [`PgError::InvalidTable`] for anything but 1-63 characters of `[a-z0-9_]` that do not
    /// start with a digit.
    pub fn new(name: &str) -> Result<Self, PgError> {
        if is_plain_identifier(name) {
            Ok(CounterTable::with_valid_name(name))
        } else {
            Err(PgError::InvalidTable {
                name: name.to_owned(),
            })
        }
    }

    fn with_valid_name(t: &str) -> Self {
        CounterTable {
            name: t.to_owned(),
            create: format!(
                "CREATE TABLE IF NOT EXISTS {t} (id int PRIMARY KEY, value bigint NOT NULL, \
                 fence bigint NOT NULL DEFAULT 0)"
            ),
            insert: format!(
                "INSERT INTO {t} (id, value, fence) VALUES ($1, $2, 0) \
                 ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value, fence = 0"
            ),
            read: format!("SELECT value FROM {t} WHERE id = $1"),
            write_only: format!(
                "UPDATE {t} SET value = $1, fence = $2 WHERE id = $3 AND fence < $2"
            ),
            claim: format!(
                "UPDATE {t} SET fence = $1 WHERE id = $2 AND fence < $1 RETURNING value"
            ),
            write_claimed: format!("UPDATE {t} SET value = $1 WHERE id = $2 AND fence = $3"),
        }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `CREATE TABLE IF NOT EXISTS` with the layout above.
    ///
    /// # Errors
    /// [`PgError::Postgres`] when the statement fails.
    pub async fn create_if_missing<C: GenericClient>(&self, client: &C) -> Result<(), PgError> {
        // Look first: `IF NOT EXISTS` on an existing table sends a NOTICE every time.
        let exists = client
            .query_typed_opt(
                "SELECT 1 FROM pg_catalog.pg_class WHERE oid = to_regclass($1)",
                &[(&self.name, Type::TEXT)],
            )
            .await?
            .is_some();
        if !exists {
            client.execute(self.create.as_str(), &[]).await?;
        }
        Ok(())
    }

    /// Creates row `id` with `value` and fence 0, or resets an existing one to that. Only
    /// for setting up: it ignores fences by design.
    ///
    /// # Errors
    /// [`PgError::Postgres`] when the statement fails.
    pub async fn insert<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
        value: i64,
    ) -> Result<(), PgError> {
        client
            .execute_typed(&self.insert, &[(&id, Type::INT4), (&value, Type::INT8)])
            .await?;
        Ok(())
    }

    /// The current value of row `id` (`None` if there is no such row). Unfenced: a read
    /// cannot be rejected, which is why write-only fencing can still lose updates.
    ///
    /// # Errors
    /// [`PgError::Postgres`] when the statement fails.
    pub async fn read<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
    ) -> Result<Option<i64>, PgError> {
        let row = client
            .query_typed_opt(&self.read, &[(&id, Type::INT4)])
            .await?;
        row.map(|r| self.value_of(&r)).transpose()
    }

    /// `UPDATE … SET value = $v, fence = $t WHERE id = $id AND fence < $t`: writes only if
    /// no holder with a token ≥ `fence` has written the row.
    ///
    /// # Errors
    /// [`PgError::Postgres`] when the statement fails; a stale token is `Ok(Write::Rejected)`.
    pub async fn write_only<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
        fence: FenceToken,
        value: i64,
    ) -> Result<Write, PgError> {
        let t = fence.as_i64();
        let params: [(&(dyn ToSql + Sync), Type); 3] =
            [(&value, Type::INT8), (&t, Type::INT8), (&id, Type::INT4)];
        let rows = client.execute_typed(&self.write_only, &params).await?;
        Ok(outcome(rows))
    }

    /// `UPDATE … SET fence = $t WHERE id = $id AND fence < $t RETURNING value`: stamps our
    /// token on the row and returns its value, unless a token ≥ `fence` is already there.
    ///
    /// # Errors
    /// [`PgError::Postgres`] when the statement fails; a stale token is `Ok(Claim::Rejected)`.
    pub async fn claim<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
        fence: FenceToken,
    ) -> Result<Claim, PgError> {
        let t = fence.as_i64();
        let params: [(&(dyn ToSql + Sync), Type); 2] = [(&t, Type::INT8), (&id, Type::INT4)];
        let row = client.query_typed_opt(&self.claim, &params).await?;
        Ok(match row {
            Some(r) => Claim::Claimed {
                value: self.value_of(&r)?,
            },
            None => Claim::Rejected,
        })
    }

    /// [`claim`](Self::claim), returning a [`RowClaim`] to write through, as often as
    /// needed, under this one claim; `None` when rejected (a token at least as new is on
    /// the row, or there is no such row). See "Writing several times under one lease".
    ///
    /// # Errors
    /// [`PgError::Postgres`] when the statement fails.
    pub async fn claim_row<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
        fence: FenceToken,
    ) -> Result<Option<RowClaim>, PgError> {
        Ok(match self.claim(client, id, fence).await? {
            Claim::Claimed { value } => Some(RowClaim {
                table: self.clone(),
                id,
                fence,
                value,
            }),
            Claim::Rejected => None,
        })
    }

    /// Column 0 (`value`) of a row, as `bigint`.
    fn value_of(&self, row: &tokio_postgres::Row) -> Result<i64, PgError> {
        row.try_get(0).map_err(|e| PgError::ColumnType {
            table: self.name.clone(),
            column: "value",
            reason: e.to_string(),
        })
    }

    /// `UPDATE … SET value = $v WHERE id = $id AND fence = $t`: writes only if our claim is
    /// still the newest on the row.
    ///
    /// # Errors
    /// [`PgError::Postgres`] when the statement fails; a lost claim is `Ok(Write::Rejected)`.
    pub async fn write_claimed<C: GenericClient>(
        &self,
        client: &C,
        id: i32,
        fence: FenceToken,
        value: i64,
    ) -> Result<Write, PgError> {
        let t = fence.as_i64();
        let params: [(&(dyn ToSql + Sync), Type); 3] =
            [(&value, Type::INT8), (&id, Type::INT4), (&t, Type::INT8)];
        let rows = client.execute_typed(&self.write_claimed, &params).await?;
        Ok(outcome(rows))
    }
}

/// [`CounterTable::write_only`] on the table `counters`.
///
/// # Errors
/// [`PgError::Postgres`] when the statement fails; a stale token is `Ok(Write::Rejected)`.
pub async fn write_only<C: GenericClient>(
    client: &C,
    id: i32,
    fence: FenceToken,
    value: i64,
) -> Result<Write, PgError> {
    CounterTable::default()
        .write_only(client, id, fence, value)
        .await
}

/// [`CounterTable::claim`] on the table `counters`.
///
/// # Errors
/// [`PgError::Postgres`] when the statement fails; a stale token is `Ok(Claim::Rejected)`.
pub async fn claim<C: GenericClient>(
    client: &C,
    id: i32,
    fence: FenceToken,
) -> Result<Claim, PgError> {
    CounterTable::default().claim(client, id, fence).await
}

/// [`CounterTable::write_claimed`] on the table `counters`.
///
/// # Errors
/// [`PgError::Postgres`] when the statement fails; a lost claim is `Ok(Write::Rejected)`.
pub async fn write_claimed<C: GenericClient>(
    client: &C,
    id: i32,
    fence: FenceToken,
    value: i64,
) -> Result<Write, PgError> {
    CounterTable::default()
        .write_claimed(client, id, fence, value)
        .await
}

fn outcome(rows: u64) -> Write {
    // `id` is the primary key, so at most one row can match.
    if rows == 0 {
        Write::Rejected
    } else {
        Write::Accepted
    }
}

fn is_plain_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    let Some(first) = bytes.next() else {
        return false;
    };
    name.len() <= MAX_IDENT_LEN
        && (first.is_ascii_lowercase() || first == b'_')
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_identifiers_only() {
        for ok in ["counters", "_t", "c2", "a_b_c"] {
            assert!(CounterTable::new(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "2c",
            "Counters",
            "c;drop table x",
            "c\"",
            "public.c",
            long.as_str(),
        ] {
            assert!(
                matches!(CounterTable::new(bad), Err(PgError::InvalidTable { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn statements_carry_the_fence_checks() {
        let t = CounterTable::default();
        assert_eq!(t.name(), "counters");
        assert!(t.write_only.contains("AND fence < $2"));
        assert!(t.claim.contains("AND fence < $1 RETURNING value"));
        assert!(t.write_claimed.contains("AND fence = $3"));
    }
}
