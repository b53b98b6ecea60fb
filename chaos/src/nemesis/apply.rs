//! Apply one fault to one target, and heal it.
//!
//! Heals are idempotent where the underlying verb allows (start of a running node, enable of
//! an enabled proxy, removing an absent toxic are all fine), so healing twice — e.g. by the
//! runner and by a drop guard — does no harm.

use std::fmt;
use std::time::Duration;

use super::clock_check;
use super::connection;
use super::error::NemesisError;
use super::fault::{Fault, PartitionVia, Target, WorkerId};
use crate::cluster::{Cluster, ClusterError, DataOnRestart, NodeId};
use crate::proxy::{Client, ClientError, Stream, Toxic, ToxicKind};

/// How client-side faults reach the workload (it owns the workers; the nemesis only says
/// when). Implementations must return at once: stall by setting a flag the worker obeys.
pub trait WorkerControl: fmt::Debug + Send + Sync {
    /// Stop `worker` for up to `duration` (it must not touch the lock or the resource meanwhile).
    fn stall(&self, worker: WorkerId, duration: Duration);
    /// End the stall early (the heal); a no-op if it is not stalled.
    fn resume(&self, worker: WorkerId);
}

/// Names of the toxics [`Fault::BlackHole`] adds (see [`Client::black_hole`]).
const BLACK_HOLE_TOXICS: [&str; 2] = ["black_hole_upstream", "black_hole_downstream"];
/// Names of the toxics [`Fault::Slow`] adds: replies, and requests with `both_ways`
/// (Toxiproxy's default names, `<type>_<stream>`).
const SLOW_TOXICS: [&str; 2] = ["latency_downstream", "latency_upstream"];

fn cluster_err(
    verb: &str,
    fault: &Fault,
    node: NodeId,
) -> impl FnOnce(ClusterError) -> NemesisError {
    let action = format!("{verb} {fault} on {node}");
    move |source| NemesisError::Cluster {
        action,
        source: Box::new(source),
    }
}

fn clock_err(verb: &str, fault: &Fault, node: NodeId) -> impl FnOnce(String) -> NemesisError {
    let action = format!("{verb} {fault} on {node}");
    move |observed| NemesisError::ClockNotMoved { action, observed }
}

fn proxy_err(
    verb: &str,
    fault: &Fault,
    node: NodeId,
    proxy: &str,
) -> impl FnOnce(ClientError) -> NemesisError {
    let action = format!("{verb} {fault} on {node} (proxy {proxy})");
    move |source| NemesisError::Proxy {
        action,
        source: Box::new(source),
    }
}

fn need_proxy<'c, C: Cluster>(cluster: &'c C, fault: &Fault) -> Result<&'c Client, NemesisError> {
    cluster.proxy().ok_or(NemesisError::NoProxy {
        fault: fault.name(),
    })
}

fn need_workers<'w>(
    workers: Option<&'w dyn WorkerControl>,
    fault: &Fault,
) -> Result<&'w dyn WorkerControl, NemesisError> {
    workers.ok_or(NemesisError::NoWorkerControl {
        fault: fault.name(),
    })
}

/// Treat "already gone" as healed.
fn ok_if_absent(r: Result<(), ClientError>) -> Result<(), ClientError> {
    match r {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

/// Apply `fault` to `target`; `window` is how long it is meant to last (client stalls need it).
pub async fn apply<C: Cluster>(
    cluster: &C,
    workers: Option<&dyn WorkerControl>,
    fault: &Fault,
    target: Target,
    window: Duration,
) -> Result<(), NemesisError> {
    let node = match target {
        Target::Worker(w) => {
            need_workers(workers, fault)?.stall(w, window);
            return Ok(());
        }
        Target::Node(n) => n,
    };
    let e = |verb| cluster_err(verb, fault, node);
    let proxy = cluster.proxy_name(node);
    match *fault {
        Fault::Kill | Fault::RestartKeep | Fault::RestartWipe => {
            cluster.kill(node).await.map_err(e("apply"))
        }
        Fault::Freeze => cluster.freeze(node).await.map_err(e("apply")),
        Fault::Partition {
            via: PartitionVia::Network,
        } => cluster.disconnect(node).await.map_err(e("apply")),
        Fault::Partition {
            via: PartitionVia::Proxy,
        } => need_proxy(cluster, fault)?
            .disable(&proxy)
            .await
            .map(drop)
            .map_err(proxy_err("apply", fault, node, &proxy)),
        Fault::BlackHole => need_proxy(cluster, fault)?
            .black_hole(&proxy)
            .await
            .map(drop)
            .map_err(proxy_err("apply", fault, node, &proxy)),
        Fault::Slow {
            latency_ms,
            jitter_ms,
            connections_pct,
            both_ways,
        } => {
            let client = need_proxy(cluster, fault)?;
            let streams: &[Stream] = if both_ways {
                &[Stream::Downstream, Stream::Upstream]
            } else {
                &[Stream::Downstream]
            };
            // Percent to Toxiproxy's probability; the spec keeps it within 1-100.
            let toxicity = connections_pct.min(100) as f32 / 100.0;
            for &stream in streams {
                let kind = ToxicKind::Latency {
                    latency: latency_ms,
                    jitter: jitter_ms,
                };
                client
                    .add_toxic(&proxy, &Toxic::new(kind, stream).with_toxicity(toxicity))
                    .await
                    .map_err(proxy_err("apply", fault, node, &proxy))?;
            }
            Ok(())
        }
        Fault::Connection(c) => need_proxy(cluster, fault)?
            .add_toxic(&proxy, &c.toxic())
            .await
            .map(drop)
            .map_err(proxy_err("apply", fault, node, &proxy)),
        Fault::ClockJump { offset_s } => {
            cluster
                .set_clock_offset(node, offset_s)
                .await
                .map_err(e("apply"))?;
            let url = cluster.admin_url(node).map_err(e("apply"))?;
            clock_check::expect_offset(&url, offset_s as f64)
                .await
                .map(drop)
                .map_err(clock_err("apply", fault, node))
        }
        Fault::ClockSkew { rate_ppm } => {
            cluster
                .set_clock_rate(node, rate_ppm)
                .await
                .map_err(e("apply"))?;
            // No jump, then the rate asked for.
            let url = cluster.admin_url(node).map_err(e("apply"))?;
            let first = clock_check::expect_offset(&url, 0.0)
                .await
                .map_err(clock_err("apply", fault, node))?;
            clock_check::expect_rate(&url, first, rate_ppm)
                .await
                .map_err(clock_err("apply", fault, node))
        }
        Fault::Forget => {
            let url = cluster.admin_url(node).map_err(e("apply"))?;
            let deleted = super::forget::forget(&url, cluster.run_id())
                .await
                .map_err(|reason| NemesisError::Forget {
                    action: format!("apply {fault} on {node}"),
                    reason,
                })?;
            tracing::debug!(%node, deleted, "lock keys forgotten");
            Ok(())
        }
        Fault::ClientStall => Err(NemesisError::InvalidSchedule {
            index: 0,
            fault: fault.name(),
            reason: format!("targets {node}; client stalls target workers"),
        }),
    }
}

/// Undo `fault` on `target`.
pub async fn heal<C: Cluster>(
    cluster: &C,
    workers: Option<&dyn WorkerControl>,
    fault: &Fault,
    target: Target,
) -> Result<(), NemesisError> {
    let node = match target {
        Target::Worker(w) => {
            need_workers(workers, fault)?.resume(w);
            return Ok(());
        }
        Target::Node(n) => n,
    };
    let e = |verb| cluster_err(verb, fault, node);
    let proxy = cluster.proxy_name(node);
    match *fault {
        // `start` restarts a killed node from its AOF: that is Keep.
        Fault::Kill | Fault::RestartKeep => cluster.start(node).await.map_err(e("heal")),
        // Amnesia: come back empty, now, while the others still hold their keys.
        Fault::RestartWipe => cluster
            .restart(node, DataOnRestart::Wipe)
            .await
            .map_err(e("heal")),
        Fault::Freeze => cluster.thaw(node).await.map_err(e("heal")),
        Fault::Partition {
            via: PartitionVia::Network,
        } => cluster.reconnect(node).await.map_err(e("heal")),
        Fault::Partition {
            via: PartitionVia::Proxy,
        } => need_proxy(cluster, fault)?
            .enable(&proxy)
            .await
            .map(drop)
            .map_err(proxy_err("heal", fault, node, &proxy)),
        // The toxics it added; one it never got to add is not an error.
        Fault::BlackHole | Fault::Slow { .. } | Fault::Connection(_) => {
            let toxics: &[&str] = match fault {
                Fault::BlackHole => &BLACK_HOLE_TOXICS,
                Fault::Slow { .. } => &SLOW_TOXICS,
                _ => &[connection::TOXIC_NAME],
            };
            let client = need_proxy(cluster, fault)?;
            for toxic in toxics {
                ok_if_absent(client.remove_toxic(&proxy, toxic).await)
                    .map_err(proxy_err("heal", fault, node, &proxy))?;
            }
            Ok(())
        }
        Fault::ClockJump { .. } | Fault::ClockSkew { .. } => {
            cluster.reset_clock(node).await.map_err(e("heal"))?;
            let url = cluster.admin_url(node).map_err(e("heal"))?;
            clock_check::expect_offset(&url, 0.0)
                .await
                .map(drop)
                .map_err(clock_err("heal", fault, node))
        }
        // Forgotten keys come back as holders set them again.
        Fault::ClientStall | Fault::Forget => Ok(()),
    }
}
