//! Graceful shutdown of a service that takes a lock per entity: on Ctrl-C, stop the
//! workers — dropping their acquires mid-flight is safe (a dropped attempt removes its
//! keys) — then `shutdown()` waits for those clean-ups and releases before the process
//! exits, so no key outlives the process for a TTL.
//!
//! ```sh
//! REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002 \
//!     cargo run -p fenced-redlock --example graceful_shutdown    # then Ctrl-C
//! ```

use std::error::Error;
use std::future::Future;
use std::time::Duration;

use fenced_redlock::{LockError, Redlock};
use tokio::task::JoinSet;

/// Runs `workers` workers, each locking `example:order:{n}` for successive `n` and
/// working `work` under each lease, until `stop` resolves; then shuts down. The number
/// of sections completed.
pub async fn run(
    nodes: &[String],
    workers: u32,
    work: Duration,
    stop: impl Future<Output = ()>,
) -> Result<u64, Box<dyn Error + Send + Sync>> {
    let redlock = Redlock::builder(nodes)
        .ttl(Duration::from_secs(10))
        .fencing(true)
        .build()?;
    let mut tasks = JoinSet::new();
    for w in 0..workers {
        let redlock = redlock.clone();
        tasks.spawn(async move {
            let mut done = 0u64;
            for n in (w..).step_by(workers.max(1) as usize) {
                let resource = format!("example:order:{}", n % 16);
                let lease = match redlock.acquire(&resource, Duration::from_secs(1)).await {
                    Ok(lease) => lease,
                    Err(LockError::ShutDown) => break,
                    Err(_) => continue, // busy or a node down: try the next entity
                };
                tokio::time::sleep(work).await;
                lease.release().await;
                done += 1;
            }
            done
        });
    }
    stop.await;
    // Aborting drops each worker wherever it is: mid-acquire (its attempt cleans up in
    // the background), mid-work (the dropped lease is released in the background).
    tasks.abort_all();
    let mut sections = 0;
    while let Some(joined) = tasks.join_next().await {
        sections += joined.unwrap_or(0);
    }
    // Waits for those background clean-ups and releases, bounded by the node deadlines.
    redlock.shutdown().await?;
    Ok(sections)
}

fn nodes_from_env() -> Vec<String> {
    std::env::var("REDLOCK_NODES")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
        .split(',')
        .map(str::to_owned)
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let sections = run(&nodes_from_env(), 4, Duration::from_millis(50), ctrl_c).await?;
    println!("stopped after {sections} sections; no lock key left behind");
    Ok(())
}
