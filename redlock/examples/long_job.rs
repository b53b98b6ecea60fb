//! A job longer than the lease: renew in the background and stop the moment the lease is
//! lost (`select!` on `lost()`), instead of finishing the work without the lock.
//!
//! ```sh
//! REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002 \
//!     cargo run -p fenced-redlock --example long_job
//! ```

use std::error::Error;
use std::time::Duration;

use fenced_redlock::{Redlock, RenewOptions};

/// How the job ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Every step ran under the lease.
    Finished { steps: u32 },
    /// The lease was lost after this many steps; the rest was not done.
    Lost { steps: u32, reason: String },
}

/// Runs `steps` steps of `step` each under a renewed lease with a `ttl` that is shorter
/// than the whole job.
pub async fn run(
    nodes: &[String],
    ttl: Duration,
    steps: u32,
    step: Duration,
) -> Result<Ended, Box<dyn Error + Send + Sync>> {
    let redlock = Redlock::builder(nodes).ttl(ttl).fencing(true).build()?;
    let lease = redlock
        .acquire("example:long-job", Duration::from_secs(5))
        .await?;
    // Renews at a third of the TTL by default; `lost()` resolves when a renewal fails
    // to reach a majority in time or validity runs out first.
    let held = lease.auto_renew(RenewOptions::default());
    let mut done = 0;
    let ended = loop {
        if done == steps {
            break Ended::Finished { steps: done };
        }
        tokio::select! {
            reason = held.lost() => {
                break Ended::Lost { steps: done, reason: reason.to_string() };
            }
            () = tokio::time::sleep(step) => done += 1,
        }
    };
    held.release().await;
    redlock.shutdown().await?;
    Ok(ended)
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
    // Ten seconds of work under a two-second lease.
    let ended = run(
        &nodes_from_env(),
        Duration::from_secs(2),
        20,
        Duration::from_millis(500),
    )
    .await?;
    println!("{ended:?}");
    Ok(())
}
