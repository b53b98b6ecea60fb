//! Release a lock in another process: one process acquires and hands the lease over as
//! JSON, another adopts it and releases it (needs `--features serde`).
//!
//! ```sh
//! export REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002
//! cargo run -p fenced-redlock --features serde --example release_elsewhere -- acquire > lease.json
//! cargo run -p fenced-redlock --features serde --example release_elsewhere -- release < lease.json
//! ```

use std::error::Error;
use std::time::Duration;

use fenced_redlock::handle::LeaseHandle;
use fenced_redlock::{Redlock, ReleaseReport};

/// The resource this example locks.
pub const RESOURCE: &str = "example:release-elsewhere";

/// Process A: acquires [`RESOURCE`] and returns the lease as JSON. The keys stay on the
/// servers (for at most the TTL) for another process to release.
pub async fn hand_over(nodes: &[String]) -> Result<String, Box<dyn Error + Send + Sync>> {
    let redlock = Redlock::builder(nodes)
        .ttl(Duration::from_secs(30))
        .fencing(true)
        .build()?;
    let lease = redlock.acquire(RESOURCE, Duration::from_secs(2)).await?;
    // From here this process no longer extends or releases the lease.
    let json = serde_json::to_string(&lease.into_handle())?;
    redlock.shutdown().await?;
    Ok(json)
}

/// Process B: adopts the lease in `json` and releases it; what each node did.
pub async fn release(
    nodes: &[String],
    json: &str,
) -> Result<ReleaseReport, Box<dyn Error + Send + Sync>> {
    let redlock = Redlock::builder(nodes).build()?;
    let handle: LeaseHandle = serde_json::from_str(json)?;
    // No validity is known here (see `fenced_redlock::handle`): to work under the lock,
    // `extend()` first; to only release it, no extend is needed.
    let lease = redlock.adopt(handle)?;
    let report = lease.release().await;
    redlock.shutdown().await?;
    Ok(report)
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
    let nodes = nodes_from_env();
    match std::env::args().nth(1).as_deref() {
        Some("acquire") => println!("{}", hand_over(&nodes).await?),
        Some("release") => {
            let json = std::io::read_to_string(std::io::stdin())?;
            let report = release(&nodes, &json).await?;
            println!("released on {} of {} nodes", report.released(), nodes.len());
        }
        _ => return Err("usage: release_elsewhere acquire|release (handle JSON on stdin)".into()),
    }
    Ok(())
}
