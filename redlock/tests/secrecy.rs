//! The owner token is a credential (whoever has it can extend or release the lock), so it
//! appears in no error and no log line: not in any `Display` or `Debug` of what the client
//! hands back, and not in anything it traces, down to TRACE, through a run of acquires,
//! extends and releases that fail in every way a server can make them fail — a command it
//! does not know (whose error quotes the command's arguments back), a script error, a key of
//! the wrong type, a key gone.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fenced_redlock::{Lease, Redlock, RenewOptions};
use redis::Commands;
use support::{Cluster, DelIfEqProxy, Flavour};

/// Every span (name and fields, as opened and as recorded later) and every event (all its
/// fields, the message among them), at every level, as text.
#[derive(Clone, Default)]
struct Everything(Arc<Mutex<String>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push_str(&format!(" {}={value}", field.name()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Everything {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut line = format!("span {}:", attrs.metadata().name());
        attrs.record(&mut Fields(&mut line));
        self.push(line);
    }

    fn on_record(
        &self,
        _: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut line = String::from("record:");
        values.record(&mut Fields(&mut line));
        self.push(line);
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut line = format!(
            "{} {}:",
            event.metadata().level(),
            event.metadata().target()
        );
        event.record(&mut Fields(&mut line));
        self.push(line);
    }
}

impl Everything {
    fn push(&self, line: String) {
        let mut all = self.0.lock().expect("not poisoned");
        all.push_str(&line);
        all.push('\n');
    }

    fn text(&self) -> String {
        self.0.lock().expect("not poisoned").clone()
    }
}

/// Runs of exactly 32 hex digits in `text`: the shape of an owner token (a `run_id` or a
/// script's SHA has 40, a release id 16).
fn token_shaped(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_hexdigit())
        .filter(|run| run.len() == 32)
        .map(str::to_owned)
        .collect()
}

/// What the client said, and which tokens it held, in one run.
#[derive(Default)]
struct Seen {
    texts: Vec<(String, String)>,
    tokens: Vec<String>,
}

impl Seen {
    fn said(&mut self, what: &str, text: String) {
        self.texts.push((what.to_owned(), text));
    }

    /// Both renderings of `value`.
    fn shown<T: std::fmt::Display + std::fmt::Debug>(&mut self, what: &str, value: &T) {
        self.said(&format!("{what} (Display)"), value.to_string());
        self.said(&format!("{what} (Debug)"), format!("{value:?}"));
    }

    /// The token of `lease`, as the server holding its key stores it.
    fn token_of(&mut self, lease: &Lease, server: &support::Server) {
        let token: String = server.admin().get(lease.resource()).expect("GET");
        assert_eq!(token.len(), 32, "a token is 32 hex digits: {token}");
        self.tokens.push(token);
    }
}

/// `DEL key` on every server of `cluster`.
fn delete_everywhere(cluster: &Cluster, key: &str) {
    for s in &cluster.servers {
        let _: () = s.admin().del(key).expect("DEL");
    }
}

// One thread: the capturing subscriber is the thread's default, and every task of the
// client runs on it.
#[tokio::test]
async fn no_owner_token_in_any_error_or_log_line() {
    use tracing_subscriber::layer::SubscriberExt;
    let everything = Everything::default();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry()
            .with(everything.clone())
            .with(tracing_subscriber::filter::LevelFilter::TRACE),
    );
    let mut seen = Seen::default();

    // Three Redis 7 behind DELIFEQ stand-ins: releases go native once the probe found it.
    let cluster = Cluster::start(Flavour::Redis, 3);
    let mut proxies = Vec::new();
    for s in &cluster.servers {
        proxies.push(DelIfEqProxy::start(s.port).await);
    }
    let redlock = Redlock::builder(proxies.iter().map(DelIfEqProxy::url))
        .ttl(Duration::from_secs(5))
        .build()
        .expect("valid");
    for _ in 0..50 {
        let lease = redlock.try_acquire("learn").await.expect("free");
        seen.token_of(&lease, &cluster.servers[0]);
        seen.said("a lease", format!("{lease:?}"));
        let report = lease.release_all().await;
        seen.said("a release", format!("{report:?}"));
        if proxies.iter().all(|p| p.delifeq_seen() > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        proxies.iter().all(|p| p.delifeq_seen() > 0),
        "DELIFEQ learnt"
    );

    // Extended, held by another client, extended after the keys are gone.
    let mut lease = redlock.try_acquire("secret").await.expect("free");
    seen.token_of(&lease, &cluster.servers[0]);
    lease.extend().await.expect("extended");
    let held = redlock.try_acquire("secret").await.expect_err("held");
    seen.shown("a contended acquire", &held);
    delete_everywhere(&cluster, "secret");
    let gone = lease.extend().await.expect_err("gone");
    seen.shown("an extend of a gone key", &gone);
    seen.said(
        "a release of a gone key",
        format!("{:?}", lease.release_all().await),
    );

    // A key of the wrong type: the extend's and the release's scripts fail in the server.
    let mut lease = redlock.try_acquire("typed").await.expect("free");
    seen.token_of(&lease, &cluster.servers[0]);
    for s in &cluster.servers {
        let mut admin = s.admin();
        let _: () = admin.del("typed").expect("DEL");
        let _: () = admin.hset("typed", "field", "value").expect("HSET");
    }
    let wrong = lease.extend().await.expect_err("a hash is not our key");
    seen.shown("an extend of a hash", &wrong);
    for p in &proxies {
        p.forget();
    }
    seen.said(
        "a release of a hash",
        format!("{:?}", lease.release_all().await),
    );
    delete_everywhere(&cluster, "typed");

    // The servers forget DELIFEQ under open connections: "unknown command", which quotes
    // its arguments — the token among them.
    for i in 0..3 {
        let lease = redlock
            .try_acquire(&format!("forgot:{i}"))
            .await
            .expect("free");
        seen.token_of(&lease, &cluster.servers[0]);
        let report = lease.release_all().await;
        seen.said(
            &format!("release {i} after DELIFEQ was forgotten"),
            format!("{report:?}"),
        );
    }
    redlock.shutdown().await.expect("shut down");

    // Servers where SET is an unknown command: an acquire's SET fails there, quoting the
    // token; with fencing, the acquire script's SET fails inside the script.
    let renamed = ["--rename-command", "SET", "SET_ELSEWHERE"];
    let odd = Cluster::start_each(Flavour::Redis, &[&[], &[], &renamed, &renamed]);
    let urls = odd.urls();
    let two_of_three = Redlock::builder(urls[..3].to_vec())
        .ttl(Duration::from_secs(5))
        .build()
        .expect("valid");
    let lease = two_of_three.try_acquire("renamed").await.expect("2 of 3");
    seen.token_of(&lease, &odd.servers[0]);
    seen.said("a lease with one failed node", format!("{lease:?}"));
    seen.said("its release", format!("{:?}", lease.release_all().await));
    let one_of_three = Redlock::builder([urls[0].clone(), urls[2].clone(), urls[3].clone()])
        .ttl(Duration::from_secs(5))
        .build()
        .expect("valid");
    let failed = one_of_three
        .try_acquire("renamed")
        .await
        .expect_err("1 of 3");
    seen.shown("an acquire failed by unknown SET", &failed);
    let waited = one_of_three
        .acquire("renamed", Duration::from_millis(200))
        .await
        .expect_err("1 of 3");
    seen.shown("a waiting acquire failed by unknown SET", &waited);
    let fenced = Redlock::builder([urls[0].clone(), urls[2].clone(), urls[3].clone()])
        .ttl(Duration::from_secs(5))
        .fencing(true)
        .build()
        .expect("valid");
    let script = fenced.try_acquire("renamed").await.expect_err("1 of 3");
    seen.shown("a fenced acquire failed by a script error", &script);
    for client in [two_of_three, one_of_three, fenced] {
        client.shutdown().await.expect("shut down");
    }

    // Valkey 8.1 extends with `SET … IFEQ`, which quotes the token twice when SET is
    // unknown: a renewal that fails (one node lost the key, one does not know SET) says
    // why in a log line.
    let odd = Cluster::start_each(Flavour::Valkey, &[&[], &[], &renamed]);
    let renewing = Redlock::builder(odd.urls())
        .ttl(Duration::from_secs(2))
        .build()
        .expect("valid");
    let lease = renewing.try_acquire("renewed").await.expect("2 of 3");
    seen.token_of(&lease, &odd.servers[0]);
    let _: () = odd.servers[1].admin().del("renewed").expect("DEL");
    let before = everything.text().matches("renewal failed").count();
    let held = lease.auto_renew(RenewOptions::default().interval(Duration::from_millis(50)));
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while everything.text().matches("renewal failed").count() == before {
        assert!(
            tokio::time::Instant::now() < until,
            "no renewal failed in 5 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen.said(
        "a renewing lease's release",
        format!("{:?}", held.release_all().await),
    );
    renewing.shutdown().await.expect("shut down");

    let log = everything.text();
    assert!(log.contains("redlock.release"), "the capture works: {log}");
    seen.said("the log", log);
    let mut leaks = Vec::new();
    for (what, text) in &seen.texts {
        for token in &seen.tokens {
            if text.contains(token.as_str()) {
                leaks.push(format!("{what}: the token {token} in {text}"));
            }
        }
        for run in token_shaped(text) {
            leaks.push(format!("{what}: a token-shaped {run} in {text}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "{} leaks:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
}
