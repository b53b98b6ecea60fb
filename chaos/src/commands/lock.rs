//! `chaos lock`: acquire once, hold, release, and report what each node said.

use std::time::{Duration, Instant};

use clap::Args;
use fenced_redlock::{LockError, NodeOutcome, Redlock};
use futures::future::BoxFuture;
use serde::Serialize;

use super::signals::Interrupt;
use super::{CommandError, checks};

/// Arguments of `chaos lock`.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// Lock nodes, comma-separated redis:// URLs.
    #[arg(long, env = "REDLOCK_NODES", value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// Resource to lock.
    #[arg(long)]
    pub resource: String,
    /// Lease TTL.
    #[arg(long, value_parser = super::parse_duration, default_value = "10s")]
    pub ttl: Duration,
    /// How long to wait for the lock (0 = one attempt).
    #[arg(long, value_parser = super::parse_duration, default_value = "5s")]
    pub wait: Duration,
    /// How long to hold it before releasing.
    #[arg(long, value_parser = super::parse_duration, default_value = "0s")]
    pub hold: Duration,
    /// Ask for a fencing token.
    #[arg(long)]
    pub fence: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One node's answer, as printed.
#[derive(Debug, Clone, Serialize)]
pub struct NodeLine {
    /// `host:port`.
    pub addr: String,
    /// `granted`, `held`, `no_answer` or `failed: …`.
    pub outcome: String,
    /// Round-trip time(s) of the acquire on this node; absent if it never answered.
    pub latency_us: Option<u64>,
}

/// What `chaos lock` prints as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct LockReport {
    /// Whether the lock was acquired.
    pub acquired: bool,
    /// The resource.
    pub resource: String,
    /// Validity at the grant, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validity_ms: Option<u64>,
    /// Time of the whole acquire (including waiting), in µs.
    pub elapsed_us: u64,
    /// Fencing token (with `--fence`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// Per node, in configuration order (empty when not acquired).
    pub nodes: Vec<NodeLine>,
    /// Why not, when not acquired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every setting, before anything connects: the nodes (URLs that parse, no server twice),
/// the TTL the library accepts, a resource name.
///
/// # Errors
/// [`CommandError::Usage`] naming the flag.
pub fn check(args: &LockArgs) -> Result<(), CommandError> {
    if args.resource.is_empty() {
        return Err(CommandError::usage(
            "--resource is empty: name the resource to lock, e.g. --resource jobs:nightly",
        ));
    }
    checks::lock_settings("--nodes / --ttl", &args.nodes, args.ttl, None)
}

/// Runs the command. `Ok` carries the output and whether the lock was acquired.
///
/// SIGINT, SIGTERM and SIGHUP stop the wait or the hold; the lease is released (or the
/// attempt's keys cleaned up) before the command ends with [`CommandError::Interrupted`].
///
/// # Errors
/// [`CommandError::Usage`] when the settings are invalid (nothing connected),
/// [`CommandError::Interrupted`] on a signal.
///
/// Boxed, as [`crate::run::run_until`] is: compiled once, here.
pub fn run(args: LockArgs) -> BoxFuture<'static, Result<(String, bool), CommandError>> {
    Box::pin(run_unboxed(args))
}

async fn run_unboxed(args: LockArgs) -> Result<(String, bool), CommandError> {
    check(&args)?;
    let lock = Redlock::builder(&args.nodes)
        .ttl(args.ttl)
        .fencing(args.fence)
        .build()
        .map_err(|e| CommandError::usage(format!("--nodes / --ttl: {e}")))?;
    let mut interrupt = Interrupt::listen()?;
    let started = Instant::now();
    let result = tokio::select! {
        r = lock.acquire(&args.resource, args.wait) => r,
        signal = interrupt.recv() => {
            // The dropped attempt's clean-up runs in the background; shutdown waits for it.
            finish(&lock).await;
            return Err(CommandError::Interrupted { signal });
        }
    };
    let elapsed_us = micros(started.elapsed());
    let mut interrupted = None;
    let report = match result {
        Ok(lease) => {
            let report = LockReport {
                acquired: true,
                resource: args.resource.clone(),
                validity_ms: Some(u64::try_from(lease.remaining().as_millis()).unwrap_or(u64::MAX)),
                elapsed_us,
                fence: lease.fence().map(|f| f.get()),
                nodes: lease
                    .nodes()
                    .iter()
                    .map(|n| NodeLine {
                        addr: n.addr.clone(),
                        outcome: outcome_name(&n.outcome),
                        latency_us: n.latency.map(micros),
                    })
                    .collect(),
                error: None,
            };
            tokio::select! {
                () = tokio::time::sleep(args.hold) => {}
                signal = interrupt.recv() => interrupted = Some(signal),
            }
            let _ = lease.release().await;
            report
        }
        Err(e) => LockReport {
            acquired: false,
            resource: args.resource.clone(),
            validity_ms: None,
            elapsed_us,
            fence: None,
            nodes: Vec::new(),
            error: Some(explain(&e)),
        },
    };
    finish(&lock).await;
    if let Some(signal) = interrupted {
        return Err(CommandError::Interrupted { signal });
    }
    let text = if args.json {
        serde_json::to_string(&report).map_err(CommandError::harness)?
    } else {
        render(&report)
    };
    Ok((text, report.acquired))
}

/// The process exits next: let the clean-up of a failed attempt (or of a lease whose
/// release missed a node) finish first, or our keys stay for a whole TTL. A timeout only
/// means those keys expire by themselves; the report stands.
async fn finish(lock: &Redlock) {
    if let Err(e) = lock.shutdown().await {
        eprintln!("note: {e}");
    }
}

fn explain(e: &LockError) -> String {
    if e.is_contended() {
        format!("{e} (the resource is held by someone else; wait longer with --wait)")
    } else {
        format!("{e} (check that the nodes in --nodes / REDLOCK_NODES are up)")
    }
}

fn outcome_name(o: &NodeOutcome) -> String {
    match o {
        NodeOutcome::Granted => "granted".into(),
        NodeOutcome::Held => "held".into(),
        NodeOutcome::NoAnswer => "no_answer".into(),
        NodeOutcome::Failed(e) => format!("failed: {e}"),
        other => format!("{other:?}"),
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn render(r: &LockReport) -> String {
    let mut s = if r.acquired {
        format!(
            "acquired {:?} in {} µs, valid for {} ms",
            r.resource,
            r.elapsed_us,
            r.validity_ms.unwrap_or(0)
        )
    } else {
        format!(
            "NOT acquired {:?} after {} µs: {}",
            r.resource,
            r.elapsed_us,
            r.error.as_deref().unwrap_or("unknown")
        )
    };
    if let Some(f) = r.fence {
        s.push_str(&format!(", fence {f}"));
    }
    for n in &r.nodes {
        let lat = n
            .latency_us
            .map_or_else(|| "-".to_owned(), |l| format!("{l} µs"));
        s.push_str(&format!("\n  {:<22} {:<10} {lat}", n.addr, n.outcome));
    }
    s
}
