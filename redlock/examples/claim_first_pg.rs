//! Fenced writes to PostgreSQL with claim-first: stamp the lease's token on the row
//! *before* reading it, then write only while the row still carries that token. A holder
//! that paused past its lease is refused by the database, whatever it believes.
//!
//! ```sh
//! REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002 \
//! PG_DSN='host=/var/run/postgresql user=postgres' \
//!     cargo run -p fenced-redlock --features postgres --example claim_first_pg
//! ```

use std::error::Error;
use std::time::Duration;

use fenced_redlock::Redlock;
use fenced_redlock::pg::{CounterTable, Write};

/// Increments row 1 of table `example_counters` `times` times, each under its own lease
/// with claim-first fencing; the row's value at the end and the writes the database
/// refused.
pub async fn run(
    nodes: &[String],
    pg_dsn: &str,
    times: u32,
) -> Result<(i64, u32), Box<dyn Error + Send + Sync>> {
    let (client, connection) = tokio_postgres::connect(pg_dsn, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let table = CounterTable::new("example_counters")?;
    table.create_if_missing(&client).await?;
    table.insert(&client, 1, 0).await?;

    let redlock = Redlock::builder(nodes)
        .ttl(Duration::from_secs(5))
        .fencing(true)
        .build()?;
    let mut refused = 0;
    for _ in 0..times {
        let lease = redlock
            .acquire("example:counter:1", Duration::from_secs(2))
            .await?;
        let token = lease
            .fence()
            .ok_or("fencing is on, so every lease has a token")?;
        // Claim first: our token goes on the row, and we learn its value, in one statement.
        match table.claim_row(&client, 1, token).await? {
            Some(claim) => {
                // ... the work, as long as it takes ...
                if claim.write(&client, claim.value() + 1).await? == Write::Rejected {
                    refused += 1; // a newer holder claimed the row meanwhile
                }
            }
            None => refused += 1, // a newer token is already on the row
        }
        lease.release().await;
    }
    redlock.shutdown().await?;
    let value = table.read(&client, 1).await?.unwrap_or(0);
    Ok((value, refused))
}

fn nodes_from_env() -> Vec<String> {
    std::env::var("REDLOCK_NODES")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
        .split(',')
        .map(str::to_owned)
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let dsn = std::env::var("PG_DSN").unwrap_or_else(|_| "host=localhost user=postgres".into());
    let (value, refused) = run(&nodes_from_env(), &dsn, 10).await?;
    println!("counter is {value}; {refused} writes refused");
    Ok(())
}
