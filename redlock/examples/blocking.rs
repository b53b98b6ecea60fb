//! The blocking client, for code that is not on Tokio: worker threads take turns on one
//! lock, each writing with its fencing token, and dropping the client at the end releases
//! everything before the process exits.
//!
//! ```sh
//! REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002 \
//!     cargo run -p fenced-redlock --features blocking --example blocking
//! ```

use std::error::Error;
use std::sync::Mutex;
use std::time::Duration;

use fenced_redlock::blocking::Redlock;

/// Runs `threads` threads, each taking `example:ledger` `rounds` times and appending its
/// fencing token to a shared ledger under the lock. The ledger, in write order.
pub fn run(
    nodes: &[String],
    threads: usize,
    rounds: usize,
) -> Result<Vec<u64>, Box<dyn Error + Send + Sync>> {
    let redlock = Redlock::new(
        Redlock::builder(nodes)
            .ttl(Duration::from_secs(5))
            .fencing(true),
    )?;
    let ledger = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (redlock, ledger) = (&redlock, &ledger);
                s.spawn(move || -> Result<(), fenced_redlock::LockError> {
                    for _ in 0..rounds {
                        // Blocks this thread until granted (or 5 s have passed).
                        let lease = redlock.acquire("example:ledger", Duration::from_secs(5))?;
                        let token = lease.fence().map_or(0, |t| t.get());
                        // The write a real resource would check: tokens only grow.
                        ledger.lock().unwrap_or_else(|e| e.into_inner()).push(token);
                        lease.release();
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| "a worker panicked")??;
        }
        Ok::<_, Box<dyn Error + Send + Sync>>(())
    })?;
    // Dropping the last handle would do the same: wait for background releases.
    redlock.shutdown()?;
    Ok(ledger.into_inner().unwrap_or_else(|e| e.into_inner()))
}

fn nodes_from_env() -> Vec<String> {
    std::env::var("REDLOCK_NODES")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
        .split(',')
        .map(str::to_owned)
        .collect()
}

fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let ledger = run(&nodes_from_env(), 4, 5)?;
    println!("ledger, in write order: {ledger:?}");
    Ok(())
}
