//! Quick start: take a lock on a majority of the nodes, carry its fencing token, release,
//! and let background clean-ups finish before exiting.
//!
//! ```sh
//! REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002 \
//!     cargo run -p fenced-redlock --example quick_start
//! ```

use std::error::Error;
use std::time::Duration;

use fenced_redlock::Redlock;

/// Acquires `example:quick-start` on `nodes`, holds it briefly, releases it; the fencing
/// token it got.
pub async fn run(nodes: &[String]) -> Result<u64, Box<dyn Error + Send + Sync>> {
    let redlock = Redlock::builder(nodes)
        .ttl(Duration::from_secs(5))
        .fencing(true)
        .build()?;
    // Wait up to 2 s for the lock (release notifications wake us early).
    let lease = redlock
        .acquire("example:quick-start", Duration::from_secs(2))
        .await?;
    let token = lease.fence().map_or(0, |t| t.get());
    println!(
        "holding {:?} with token {token}, valid for {:?}",
        lease.resource(),
        lease.remaining()
    );
    // ... the work: send `token` with every write, so the resource can refuse old holders.
    let report = lease.release().await;
    println!("released on {} of {} nodes", report.released(), nodes.len());
    // Releases of dropped leases and clean-ups of failed attempts run in the background.
    redlock.shutdown().await?;
    Ok(token)
}

/// Node URLs from `REDLOCK_NODES` (comma-separated), else one server on localhost.
fn nodes_from_env() -> Vec<String> {
    std::env::var("REDLOCK_NODES")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
        .split(',')
        .map(str::to_owned)
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    run(&nodes_from_env()).await.map(drop)
}
