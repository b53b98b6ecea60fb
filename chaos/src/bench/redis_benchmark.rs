//! `redis-benchmark` on the same nodes, same command mix: the servers' capacity for that mix
//! under a pipelined C load generator. **Not a bound on a lock client** (see
//! [`super::ceiling`] for the one the bench reports against); kept as a reference row,
//! `redis-benchmark-P16`.
//!
//! One lock operation (acquire + release, no contention) is, on **each** of the 5 nodes,
//! one `SET key token NX PX ttl` and one compare-and-delete script. The nodes work in
//! parallel, so with per-node rates `r_set` and `r_eval` (commands/s), one node serves
//! `1 / (1/r_set + 1/r_eval)` pairs per second (≈ r/2 when both are near r); the row
//! reports the median of that over the nodes, in lock ops/s.
//!
//! # Why it is not a ceiling
//! All 5 nodes are driven at once (one `redis-benchmark` per node per phase), on the same
//! cores as the servers. Unpipelined (`-P 1`, until 2026-12-01) the five generators took
//! as much CPU as the servers and the lock clients beat the "ceiling" by up to 1.67 ×.
//! Pipelined [`PIPELINE`] deep, one read and one write carry 16 commands, so a server's
//! cost per command — mostly socket reads and writes, not the command — is a fraction of
//! what it is for a lock client, whose every request is a round trip of its own. The
//! number then measures batching, which no lock client can do across its own
//! round trips. `EVAL` with the script text is what `redis-benchmark` can send (the server
//! caches scripts by SHA). Random keys (`-r`) make the compare fail, which skips the
//! `DEL`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::BenchError;
use super::clients::COMPARE_AND_DELETE;

/// Commands each `redis-benchmark` connection keeps in flight (see the module docs).
pub const PIPELINE: u32 = 16;

/// Where `redis-benchmark` is: `$REDIS_BENCHMARK_BIN`, else on `PATH`.
pub fn locate() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REDIS_BENCHMARK_BIN") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("redis-benchmark"))
        .find(|p| p.is_file())
}

/// Per-node rates and the derived lock-op rate.
#[derive(Debug, Clone)]
pub struct Capacity {
    /// `SET NX PX` commands/s per node.
    pub set_rates: Vec<f64>,
    /// `EVAL` compare-and-delete commands/s per node.
    pub eval_rates: Vec<f64>,
    /// Median over nodes of `1 / (1/r_set + 1/r_eval)`: lock ops/s.
    pub lock_ops_per_s: f64,
}

/// Runs both phases on every node in parallel; each process is bounded by `limit`.
pub async fn measure(
    bin: &PathBuf,
    nodes: &[SocketAddr],
    requests: u32,
    clients: u32,
    ttl: Duration,
    limit: Duration,
) -> Result<Capacity, BenchError> {
    let ttl_ms = ttl.as_millis().to_string();
    let set: Vec<&str> = vec![
        "SET",
        "bench:ceiling:__rand_int__",
        "token",
        "NX",
        "PX",
        &ttl_ms,
    ];
    let eval: Vec<&str> = vec![
        "EVAL",
        COMPARE_AND_DELETE,
        "1",
        "bench:ceiling:__rand_int__",
        "token",
    ];
    let set_rates = phase(bin, nodes, requests, clients, &set, limit).await?;
    let eval_rates = phase(bin, nodes, requests, clients, &eval, limit).await?;
    let mut pairs: Vec<f64> = set_rates
        .iter()
        .zip(&eval_rates)
        .map(|(s, e)| {
            if *s > 0.0 && *e > 0.0 {
                1.0 / (1.0 / s + 1.0 / e)
            } else {
                0.0
            }
        })
        .collect();
    pairs.sort_by(f64::total_cmp);
    let lock_ops_per_s = pairs.get(pairs.len() / 2).copied().unwrap_or(0.0);
    Ok(Capacity {
        set_rates,
        eval_rates,
        lock_ops_per_s,
    })
}

async fn phase(
    bin: &PathBuf,
    nodes: &[SocketAddr],
    requests: u32,
    clients: u32,
    command: &[&str],
    limit: Duration,
) -> Result<Vec<f64>, BenchError> {
    let mut running = Vec::with_capacity(nodes.len());
    for addr in nodes {
        let child = Command::new(bin)
            .arg("-h")
            .arg(addr.ip().to_string())
            .arg("-p")
            .arg(addr.port().to_string())
            .arg("-n")
            .arg(requests.to_string())
            .arg("-c")
            .arg(clients.to_string())
            .arg("-P")
            .arg(PIPELINE.to_string())
            .args(["-r", "100000", "-q"])
            .args(command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A timed-out or abandoned run must not outlive the bench.
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BenchError::Setup(format!("starting {}: {e}", bin.display())))?;
        running.push(child.wait_with_output());
    }
    let outputs = tokio::time::timeout(limit, futures::future::join_all(running))
        .await
        .map_err(|_| BenchError::TimedOut(limit))?;
    outputs
        .into_iter()
        .map(|o| {
            let o = o.map_err(|e| BenchError::Setup(format!("redis-benchmark: {e}")))?;
            let out = String::from_utf8_lossy(&o.stdout);
            parse_rate(&out).ok_or_else(|| {
                BenchError::Setup(format!(
                    "redis-benchmark printed no rate (status {}): {} {}",
                    o.status,
                    out.trim(),
                    String::from_utf8_lossy(&o.stderr).trim()
                ))
            })
        })
        .collect()
}

/// The rate in `-q` output: `"<command>: 91743.12 requests per second, p50=…"` (progress
/// lines before it are separated by `\r`).
pub fn parse_rate(out: &str) -> Option<f64> {
    out.split(['\r', '\n']).rev().find_map(|line| {
        let (before, _) = line.split_once(" requests per second")?;
        before.split_whitespace().next_back()?.parse::<f64>().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quiet_output() {
        let out = "SET bench:ceiling:__rand_int__ token NX PX 10000: rps=0.0 (overall: nan) avg_msec=nan\r\
                   SET bench:ceiling:__rand_int__ token NX PX 10000: 91743.12 requests per second, p50=0.335 msec\n\n";
        assert_eq!(parse_rate(out), Some(91743.12));
        assert_eq!(parse_rate("ERROR"), None);
    }
}
