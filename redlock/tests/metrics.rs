//! Feature `metrics`: every metric moves the way `fenced_redlock::metrics` documents it,
//! under real contention and real lost leases on real servers; tracing spans carry the
//! outcome.
#![cfg(feature = "metrics")]

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fenced_redlock::metrics as m;
use fenced_redlock::{Durability, LossReason, Redlock, RenewOptions};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use support::{Cluster, Flavour};

/// The process-wide recorder (installed once) and a lock that keeps the tests of this
/// binary from counting each other's work when they share a process (`cargo test`).
fn recorder() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the only recorder");
        m::describe();
        snapshotter
    })
}

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What moved since [`Seen::begin`]: counter increments and histogram samples, keyed as
/// `name{label=value,…}` with labels sorted.
struct Seen {
    base: HashMap<String, u64>,
    counters: HashMap<String, u64>,
    samples: HashMap<String, Vec<f64>>,
}

fn render(key: &metrics::Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    if labels.is_empty() {
        key.name().to_owned()
    } else {
        format!("{}{{{}}}", key.name(), labels.join(","))
    }
}

impl Seen {
    fn begin() -> Seen {
        let mut seen = Seen {
            base: HashMap::new(),
            counters: HashMap::new(),
            samples: HashMap::new(),
        };
        seen.read();
        seen.base = std::mem::take(&mut seen.counters);
        seen.samples.clear();
        seen
    }

    /// Takes a snapshot (which drains histogram samples into ours).
    fn read(&mut self) {
        for (key, _, _, value) in recorder().snapshot().into_vec() {
            let name = render(key.key());
            match value {
                DebugValue::Counter(v) => {
                    self.counters.insert(name, v);
                }
                DebugValue::Histogram(v) => self
                    .samples
                    .entry(name)
                    .or_default()
                    .extend(v.into_iter().map(|f| f.0)),
                DebugValue::Gauge(_) => {}
            }
        }
    }

    /// A counter's increase since `begin`.
    fn count(&self, key: &str) -> u64 {
        let now = self.counters.get(key).copied().unwrap_or(0);
        now - self.base.get(key).copied().unwrap_or(0)
    }

    /// Increase of every series of a counter whose key starts with `prefix`.
    fn count_prefixed(&self, prefix: &str) -> u64 {
        self.counters
            .keys()
            .filter(|k| k.starts_with(prefix))
            .map(|k| self.count(k))
            .sum()
    }

    fn samples(&self, key: &str) -> &[f64] {
        self.samples.get(key).map_or(&[], Vec::as_slice)
    }
}

fn max(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(0.0, f64::max)
}

/// Deletes `key` on every node once every node holds it. An acquire returns at a quorum,
/// so the last node's `SET` may still be on its way (a loaded machine: the client's
/// connection task not yet run); landing after the `DEL`, it would bring the key back there
/// and a later release would find it (seen under `scripts/stress-tests`, 2026-12-06).
async fn delete_everywhere(cluster: &Cluster, key: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for s in &cluster.servers {
        loop {
            let exists: i64 = redis::cmd("EXISTS")
                .arg(key)
                .query(&mut s.admin())
                .expect("EXISTS");
            if exists == 1 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{key} never reached every node"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    for s in &cluster.servers {
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query(&mut s.admin())
            .expect("DEL");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_metrics_follow_a_contended_run_and_failing_nodes() {
    let _serial = SERIAL.lock().await;
    let mut cluster = Cluster::start(Flavour::Redis, 3);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(2))
        .fencing(true)
        .build()
        .expect("config");

    // Four tasks take one resource three times each, holding it 20 ms.
    let mut seen = Seen::begin();
    let start = Arc::new(tokio::sync::Barrier::new(4));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (redlock, start) = (redlock.clone(), Arc::clone(&start));
            tokio::spawn(async move {
                start.wait().await;
                for _ in 0..3 {
                    let lease = redlock
                        .acquire("metrics:busy", Duration::from_secs(10))
                        .await
                        .expect("granted within 10 s");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    lease.release().await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    seen.read();
    assert_eq!(seen.count("redlock_acquire_total{outcome=granted}"), 12);
    assert_eq!(
        seen.samples("redlock_acquire_seconds{outcome=granted}")
            .len(),
        12
    );
    let attempts = seen.samples("redlock_acquire_attempts");
    assert_eq!(attempts.len(), 12);
    assert!(attempts.iter().all(|&a| a >= 1.0), "{attempts:?}");
    // The four share a client: while one held the key, the waiting one did not ask.
    assert!(
        seen.count("redlock_held_back_total") >= 1,
        "waiters held back while a sibling held the key"
    );
    let waits = seen.samples("redlock_wait_seconds{outcome=granted}");
    assert_eq!(waits.len(), 12);
    assert!(
        max(waits) >= 0.015,
        "someone waited out a 20 ms hold: {waits:?}"
    );
    assert!(
        seen.count("redlock_handoff_wakeups_total") >= 1,
        "releases woke waiters"
    );
    assert_eq!(seen.count_prefixed("redlock_node_errors_total"), 0);
    assert_eq!(
        seen.count_prefixed("redlock_acquire_total{outcome=contended"),
        0
    );

    // Held: a single attempt and a bounded wait both come back contended.
    let mut seen = Seen::begin();
    let held = redlock.try_acquire("metrics:busy").await.expect("free now");
    let refused = redlock.try_acquire("metrics:busy").await.expect_err("held");
    assert!(refused.is_contended(), "{refused}");
    let timed_out = redlock
        .acquire("metrics:busy", Duration::from_millis(150))
        .await
        .expect_err("held");
    assert!(timed_out.is_contended(), "{timed_out}");
    held.release().await;
    seen.read();
    assert_eq!(seen.count("redlock_acquire_total{outcome=granted}"), 1);
    assert_eq!(seen.count("redlock_acquire_total{outcome=contended}"), 2);
    let took = seen.samples("redlock_acquire_seconds{outcome=contended}");
    assert_eq!(took.len(), 2);
    assert!(max(took) >= 0.15, "the waiting one waited 150 ms: {took:?}");
    let waited = seen.samples("redlock_wait_seconds{outcome=contended}");
    assert_eq!(waited.len(), 1, "only the waiting acquire: {waited:?}");
    assert!(waited[0] >= 0.15, "{waited:?}");
    let attempts = seen.samples("redlock_acquire_attempts");
    // The granted try and the timed-out wait, one attempt each; not the refused try. The
    // wait's own client held the key: it did not ask the nodes until its wait ended.
    assert_eq!(attempts, [1.0, 1.0]);
    assert!(
        seen.count("redlock_held_back_total") >= 1,
        "the wait was held back while its client held the key"
    );

    // One node frozen: still granted, and that node's calls time out.
    let mut seen = Seen::begin();
    let frozen = cluster.servers[0].addr();
    cluster.servers[0].freeze();
    let lease = redlock.try_acquire("metrics:faults").await.expect("2 of 3");
    lease.release().await;
    // The frozen node's calls run out their 200 ms deadlines in the background.
    tokio::time::sleep(Duration::from_millis(400)).await;
    seen.read();
    let timeouts = seen.count(&format!(
        "redlock_node_errors_total{{kind=timeout,node={frozen}}}"
    ));
    assert!(
        timeouts >= 2,
        "the acquire and the release timed out there: {timeouts}"
    );
    assert_eq!(seen.count("redlock_acquire_total{outcome=granted}"), 1);

    // Two frozen: no majority, and it is the nodes' fault, not a holder's.
    let mut seen = Seen::begin();
    cluster.servers[1].freeze();
    let err = redlock
        .try_acquire("metrics:faults")
        .await
        .expect_err("1 of 3");
    assert!(!err.is_contended(), "{err}");
    seen.read();
    cluster.servers[0].thaw();
    cluster.servers[1].thaw();
    assert_eq!(seen.count("redlock_acquire_total{outcome=unreachable}"), 1);
    assert_eq!(
        seen.samples("redlock_acquire_seconds{outcome=unreachable}")
            .len(),
        1
    );
    assert_eq!(
        seen.count_prefixed("redlock_acquire_total{outcome=granted"),
        0
    );

    // A dead node refuses connections: another kind.
    let mut seen = Seen::begin();
    let dead = cluster.servers[2].addr();
    cluster.servers[2].kill();
    let lease = redlock
        .acquire("metrics:faults", Duration::from_secs(2))
        .await
        .expect("2 of 3");
    lease.release().await;
    // The acquire and the release return once the live nodes answered; the dead node's
    // calls fail (connection refused or reset) in the background, possibly later.
    let refused = format!("redlock_node_errors_total{{kind=redis,node={dead}}}");
    let give_up = std::time::Instant::now() + Duration::from_secs(2);
    seen.read();
    while seen.count(&refused) == 0 && std::time::Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(20)).await;
        seen.read();
    }
    assert!(seen.count(&refused) >= 1, "{:?}", seen.counters);
    redlock.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_votes_refused_are_counted_per_node() {
    let _serial = SERIAL.lock().await;
    // `appendonly no`: every yes is refused as not durable.
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(300))
        .durability(Durability::Fsync {
            timeout: Duration::from_millis(100),
        })
        .build()
        .expect("config");
    let mut seen = Seen::begin();
    redlock
        .try_acquire("metrics:durable")
        .await
        .expect_err("no node fsyncs");
    redlock.shutdown().await.expect("shut down");
    seen.read();
    let nodes: Vec<String> = cluster.servers.iter().map(|s| s.addr()).collect();
    let refused: u64 = nodes
        .iter()
        .map(|n| {
            let votes = seen.count(&format!("redlock_not_durable_votes_total{{node={n}}}"));
            let errors = seen.count(&format!(
                "redlock_node_errors_total{{kind=aof_disabled,node={n}}}"
            ));
            assert_eq!(votes, errors, "node {n}");
            assert!(votes <= 1, "node {n}");
            votes
        })
        .sum();
    // The decision needs two refusals; the third node may answer after it.
    assert!(refused >= 2, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_leases_and_failed_renewals_are_counted_by_reason() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_millis(600))
        .build()
        .expect("config");
    let every = RenewOptions::default().interval(Duration::from_millis(100));

    // Renewing happily: nothing fails, nothing is lost.
    let mut seen = Seen::begin();
    let held = redlock
        .try_acquire("metrics:lost")
        .await
        .expect("free")
        .auto_renew(every);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(held.is_held());
    seen.read();
    assert_eq!(seen.count("redlock_renew_failures_total"), 0);
    assert_eq!(seen.count_prefixed("redlock_leases_lost_total"), 0);

    // Keys deleted under it: the next renewal finds them gone on a majority.
    delete_everywhere(&cluster, "metrics:lost").await;
    let reason = tokio::time::timeout(Duration::from_secs(2), held.lost())
        .await
        .expect("lost in time");
    assert_eq!(reason, LossReason::Gone);
    held.release().await;
    seen.read();
    assert_eq!(seen.count("redlock_leases_lost_total{reason=gone}"), 1);
    assert!(seen.count("redlock_renew_failures_total") >= 1);
    assert_eq!(
        seen.count("redlock_extend_failures_total"),
        0,
        "no extend() call"
    );

    // A plain lease whose keys are gone: extend() fails.
    let mut seen = Seen::begin();
    let mut lease = redlock.try_acquire("metrics:lost").await.expect("free");
    assert!(lease.extend().await.is_ok());
    delete_everywhere(&cluster, "metrics:lost").await;
    assert!(lease.extend().await.is_err());
    lease.release().await;
    seen.read();
    assert_eq!(seen.count("redlock_extend_failures_total"), 1);

    // A majority frozen: renewals time out until validity runs out.
    let mut seen = Seen::begin();
    let held = redlock
        .try_acquire("metrics:lost")
        .await
        .expect("free")
        .auto_renew(every);
    cluster.servers[0].freeze();
    cluster.servers[1].freeze();
    let reason = tokio::time::timeout(Duration::from_secs(2), held.lost())
        .await
        .expect("lost in time");
    cluster.servers[0].thaw();
    cluster.servers[1].thaw();
    assert_eq!(reason, LossReason::Expired);
    held.release().await;
    seen.read();
    assert_eq!(seen.count("redlock_leases_lost_total{reason=expired}"), 1);
    assert!(seen.count("redlock_renew_failures_total") >= 1);
    assert!(seen.count_prefixed("redlock_node_errors_total{kind=timeout") >= 2);

    // The hold cap, then a shutdown under a renewing lease.
    let mut seen = Seen::begin();
    let capped = redlock
        .try_acquire("metrics:capped")
        .await
        .expect("free")
        .auto_renew(every.max_hold(Duration::from_millis(250)));
    assert_eq!(capped.lost().await, LossReason::MaxHoldReached);
    capped.release().await;
    let renewing = redlock
        .try_acquire("metrics:shutdown")
        .await
        .expect("free")
        .auto_renew(every);
    redlock.shutdown().await.expect("shutdown");
    assert_eq!(renewing.lost().await, LossReason::Shutdown);
    seen.read();
    assert_eq!(seen.count("redlock_leases_lost_total{reason=max_hold}"), 1);
    assert_eq!(seen.count("redlock_leases_lost_total{reason=shutdown}"), 1);
    assert_eq!(seen.count("redlock_leases_lost_total{reason=gone}"), 0);
}

/// Records the `outcome` each span had when it closed, by span name.
#[derive(Clone, Default)]
struct Outcomes(Arc<Mutex<Vec<(String, String)>>>);

struct Field<'a>(&'a mut Option<String>);

impl tracing::field::Visit for Field<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "outcome" {
            *self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

struct Outcome(Option<String>);

impl<S> tracing_subscriber::Layer<S> for Outcomes
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut outcome = None;
        attrs.record(&mut Field(&mut outcome));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Outcome(outcome));
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id)
            && let Some(Outcome(outcome)) = span.extensions_mut().get_mut::<Outcome>()
        {
            values.record(&mut Field(outcome));
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let outcome = span
                .extensions()
                .get::<Outcome>()
                .and_then(|o| o.0.clone())
                .unwrap_or_default();
            self.0
                .lock()
                .expect("not poisoned")
                .push((span.name().to_owned(), outcome));
        }
    }
}

#[tokio::test]
async fn spans_record_their_outcome() {
    use tracing_subscriber::layer::SubscriberExt;
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start(Flavour::Redis, 3);
    let outcomes = Outcomes::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(outcomes.clone()));
    let redlock = Redlock::builder(cluster.urls())
        .ttl(Duration::from_secs(2))
        .build()
        .expect("config");

    let mut lease = redlock
        .acquire("spans:one", Duration::from_secs(1))
        .await
        .expect("free");
    let _ = redlock.try_acquire("spans:one").await.expect_err("held");
    lease.extend().await.expect("extends");
    delete_everywhere(&cluster, "spans:one").await;
    let _ = lease.extend().await.expect_err("gone");
    lease.release().await;
    let lease = redlock.try_acquire("spans:one").await.expect("free");
    lease.release().await;
    cluster.servers[0].freeze();
    cluster.servers[1].freeze();
    let _ = redlock.try_acquire("spans:two").await.expect_err("1 of 3");
    cluster.servers[0].thaw();
    cluster.servers[1].thaw();

    let seen: Vec<(String, String)> = outcomes
        .0
        .lock()
        .expect("not poisoned")
        .iter()
        .filter(|(name, _)| name != "redlock.shutdown")
        .cloned()
        .collect();
    let expected = [
        ("redlock.acquire", "granted"),
        ("redlock.try_acquire", "contended"),
        ("redlock.extend", "extended"),
        ("redlock.extend", "gone"),
        ("redlock.release", "none"),
        ("redlock.try_acquire", "granted"),
        ("redlock.release", "released"),
        ("redlock.try_acquire", "unreachable"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(n, o)| ((*n).to_owned(), (*o).to_owned()))
        .collect();
    assert_eq!(seen, expected);
}
