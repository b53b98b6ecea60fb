//! The proxies of a server: configuration, toxics and running listeners.
//!
//! All operations go through one async mutex, so API calls are applied one
//! at a time and a disable has fully stopped the listener (and closed the
//! connections) before its HTTP answer is sent: a client that connects right
//! after `enabled: false` is refused, deterministically.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{Mutex, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::api::{ApiError, NewProxy, Proxy, ProxyUpdate, Stream, Toxic, ToxicWire};
use super::link::{self, LinkConfig};
use super::populate::same_endpoint;
use super::toxics::{Dice, ToxicList};

/// All proxies of one server.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    proxies: Mutex<BTreeMap<String, Entry>>,
    dice: Dice,
}

#[derive(Debug)]
struct Entry {
    name: String,
    listen: String,
    upstream: String,
    enabled: bool,
    toxics: Vec<Toxic>,
    upstream_tx: watch::Sender<ToxicList>,
    downstream_tx: watch::Sender<ToxicList>,
    runner: Option<Runner>,
}

/// A bound listener, its accept loop and its connections.
#[derive(Debug)]
struct Runner {
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl Entry {
    fn new(p: &NewProxy) -> Self {
        Entry {
            name: p.name.clone(),
            listen: p.listen.clone(),
            upstream: p.upstream.clone(),
            enabled: false,
            toxics: Vec::new(),
            upstream_tx: watch::Sender::new(Arc::default()),
            downstream_tx: watch::Sender::new(Arc::default()),
            runner: None,
        }
    }

    fn view(&self) -> Proxy {
        Proxy {
            name: self.name.clone(),
            listen: self.listen.clone(),
            upstream: self.upstream.clone(),
            enabled: self.enabled,
            toxics: self.toxics.clone(),
        }
    }

    /// Binds the listen address and starts accepting.
    async fn start(&mut self, dice: &Dice) -> Result<(), ApiError> {
        if self.runner.is_some() {
            return Ok(());
        }
        let listener = bind(&self.listen).await?;
        if let Ok(addr) = listener.local_addr() {
            // Report the real port when asked for port 0, as Toxiproxy does;
            // a later re-enable binds that same port again.
            self.listen = addr.to_string();
        }
        let cancel = CancellationToken::new();
        let tasks = TaskTracker::new();
        let cfg = LinkConfig {
            upstream: self.upstream.clone(),
            upstream_toxics: self.upstream_tx.subscribe(),
            downstream_toxics: self.downstream_tx.subscribe(),
            cancel: cancel.clone(),
            dice: dice.clone(),
        };
        tasks.spawn(accept_loop(listener, cfg, tasks.clone()));
        self.runner = Some(Runner { cancel, tasks });
        self.enabled = true;
        tracing::info!(proxy = %self.name, listen = %self.listen, upstream = %self.upstream, "proxy started");
        Ok(())
    }

    /// Stops listening and closes every connection, waiting until they are gone.
    async fn stop(&mut self) {
        self.enabled = false;
        if let Some(r) = self.runner.take() {
            r.cancel.cancel();
            r.tasks.close();
            r.tasks.wait().await;
            tracing::info!(proxy = %self.name, "proxy stopped");
        }
    }

    fn publish_toxics(&self) {
        let of = |s: Stream| -> ToxicList {
            Arc::new(
                self.toxics
                    .iter()
                    .filter(|t| t.stream == s)
                    .cloned()
                    .collect(),
            )
        };
        self.upstream_tx.send_replace(of(Stream::Upstream));
        self.downstream_tx.send_replace(of(Stream::Downstream));
    }
}

/// Binds a listen address, failing with Toxiproxy's 500 and its wording
/// (Go's `listen tcp 127.0.0.1:3310: bind: address already in use`). Like
/// Go's listener, a name that resolves to both families binds IPv4.
async fn bind(listen: &str) -> Result<TcpListener, ApiError> {
    let fail = |what: String| ApiError::internal(format!("listen tcp{what}"));
    let addrs: Vec<_> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| fail(format!(": address {listen}: {}", go_words(&e))))?
        .collect();
    let addr = addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| fail(format!(": address {listen}: no such host")))?;
    TcpListener::bind(addr)
        .await
        .map_err(|e| fail(format!(" {addr}: bind: {}", go_words(&e))))
}

/// An OS error as Go prints it: "address already in use", not
/// "Address already in use (os error 98)".
fn go_words(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

async fn accept_loop(listener: TcpListener, cfg: LinkConfig, tasks: TaskTracker) {
    loop {
        tokio::select! {
            _ = cfg.cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    tasks.spawn(link::run(sock, cfg.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(link::ACCEPT_BACKOFF).await;
                }
            },
        }
    }
}

fn proxy_not_found() -> ApiError {
    ApiError::not_found("proxy not found")
}

fn toxic_not_found() -> ApiError {
    ApiError::not_found("toxic not found")
}

fn validate_new(p: &NewProxy) -> Result<(), ApiError> {
    // Empty listen is allowed: the server fills in a free port.
    for (field, value) in [("name", &p.name), ("upstream", &p.upstream)] {
        if value.is_empty() {
            return Err(ApiError::bad_request(format!(
                "missing required field: {field}"
            )));
        }
    }
    Ok(())
}

fn or_default_listen(mut p: NewProxy) -> NewProxy {
    if p.listen.is_empty() {
        p.listen = super::populate::DEFAULT_LISTEN.to_owned();
    }
    p
}

impl Registry {
    /// A registry whose randomness comes from `dice` (seeded or not).
    pub(crate) fn with_dice(dice: Dice) -> Self {
        Registry {
            proxies: Mutex::default(),
            dice,
        }
    }

    pub(crate) async fn list(&self) -> BTreeMap<String, Proxy> {
        let proxies = self.proxies.lock().await;
        proxies.iter().map(|(k, e)| (k.clone(), e.view())).collect()
    }

    pub(crate) async fn create(&self, p: NewProxy) -> Result<Proxy, ApiError> {
        validate_new(&p)?;
        let p = or_default_listen(p);
        let mut proxies = self.proxies.lock().await;
        if proxies.contains_key(&p.name) {
            return Err(ApiError::conflict("proxy already exists"));
        }
        let mut entry = Entry::new(&p);
        if p.enabled {
            entry.start(&self.dice).await?;
        }
        let view = entry.view();
        proxies.insert(p.name, entry);
        Ok(view)
    }

    /// Toxiproxy's populate: an existing proxy whose listen and upstream
    /// name the same endpoints (compared resolved, so `localhost:P` matches a
    /// reported `127.0.0.1:P`) is kept exactly as it is — toxics, open
    /// connections and enabled state; `enabled` in the list is ignored for
    /// it, as in Toxiproxy. One that differs is replaced. The list is
    /// validated in full before anything changes.
    pub(crate) async fn populate(&self, list: Vec<NewProxy>) -> Result<Vec<Proxy>, ApiError> {
        for p in &list {
            validate_new(p)?;
        }
        let mut proxies = self.proxies.lock().await;
        let mut out = Vec::with_capacity(list.len());
        for p in list.into_iter().map(or_default_listen) {
            if let Some(existing) = proxies.get_mut(&p.name) {
                if same_endpoint(&existing.listen, &p.listen).await
                    && same_endpoint(&existing.upstream, &p.upstream).await
                {
                    out.push(existing.view());
                    continue;
                }
                existing.stop().await;
                proxies.remove(&p.name);
            }
            let mut entry = Entry::new(&p);
            if p.enabled {
                entry.start(&self.dice).await?;
            }
            out.push(entry.view());
            proxies.insert(p.name, entry);
        }
        Ok(out)
    }

    pub(crate) async fn get(&self, name: &str) -> Result<Proxy, ApiError> {
        let proxies = self.proxies.lock().await;
        proxies
            .get(name)
            .map(Entry::view)
            .ok_or_else(proxy_not_found)
    }

    /// Applies an update. A new listen or upstream restarts the proxy, which
    /// closes its connections (as Toxiproxy does).
    pub(crate) async fn update(&self, name: &str, u: ProxyUpdate) -> Result<Proxy, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let e = proxies.get_mut(name).ok_or_else(proxy_not_found)?;
        let was_enabled = e.enabled;
        let mut restart = false;
        if let Some(upstream) = u.upstream.filter(|s| !s.is_empty() && *s != e.upstream) {
            e.upstream = upstream;
            restart = true;
        }
        if let Some(listen) = u.listen.filter(|s| !s.is_empty() && *s != e.listen) {
            e.listen = listen;
            restart = true;
        }
        let enable = u.enabled.unwrap_or(was_enabled);
        if restart || !enable {
            e.stop().await;
        }
        if enable {
            e.start(&self.dice).await?;
        }
        Ok(e.view())
    }

    pub(crate) async fn delete(&self, name: &str) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        let mut e = proxies.remove(name).ok_or_else(proxy_not_found)?;
        e.stop().await;
        Ok(())
    }

    /// Enables every proxy and removes every toxic.
    pub(crate) async fn reset(&self) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        let mut first_err = None;
        for e in proxies.values_mut() {
            e.toxics.clear();
            e.publish_toxics();
            if let Err(err) = e.start(&self.dice).await {
                // Keep resetting the others; report the first failure.
                first_err.get_or_insert(err);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    pub(crate) async fn toxics(&self, proxy: &str) -> Result<Vec<Toxic>, ApiError> {
        let proxies = self.proxies.lock().await;
        let e = proxies.get(proxy).ok_or_else(proxy_not_found)?;
        Ok(e.toxics.clone())
    }

    pub(crate) async fn add_toxic(&self, proxy: &str, toxic: Toxic) -> Result<Toxic, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let e = proxies.get_mut(proxy).ok_or_else(proxy_not_found)?;
        if e.toxics.iter().any(|t| t.name == toxic.name) {
            return Err(ApiError::conflict("toxic already exists"));
        }
        e.toxics.push(toxic.clone());
        e.publish_toxics();
        Ok(toxic)
    }

    pub(crate) async fn get_toxic(&self, proxy: &str, name: &str) -> Result<Toxic, ApiError> {
        let proxies = self.proxies.lock().await;
        let e = proxies.get(proxy).ok_or_else(proxy_not_found)?;
        e.toxics
            .iter()
            .find(|t| t.name == name)
            .cloned()
            .ok_or_else(toxic_not_found)
    }

    /// Updates toxicity and attributes; attributes are merged key by key so a
    /// partial body works. Name, type and stream cannot change (Toxiproxy
    /// ignores them too).
    pub(crate) async fn update_toxic(
        &self,
        proxy: &str,
        name: &str,
        update: ToxicWire,
    ) -> Result<Toxic, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let e = proxies.get_mut(proxy).ok_or_else(proxy_not_found)?;
        let slot = e
            .toxics
            .iter_mut()
            .find(|t| t.name == name)
            .ok_or_else(toxic_not_found)?;
        let mut wire = ToxicWire::from(slot.clone());
        if let Some(t) = update.toxicity {
            wire.toxicity = Some(t);
        }
        if let Some(attrs) = update.attributes {
            let merged = wire.attributes.get_or_insert_with(Default::default);
            // JSON null leaves an attribute as it was (Go's decoder does that).
            merged.extend(attrs.into_iter().filter(|(_, v)| !v.is_null()));
        }
        let updated = Toxic::try_from(wire)?;
        *slot = updated.clone();
        e.publish_toxics();
        Ok(updated)
    }

    pub(crate) async fn remove_toxic(&self, proxy: &str, name: &str) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        let e = proxies.get_mut(proxy).ok_or_else(proxy_not_found)?;
        let before = e.toxics.len();
        e.toxics.retain(|t| t.name != name);
        if e.toxics.len() == before {
            return Err(toxic_not_found());
        }
        e.publish_toxics();
        Ok(())
    }

    /// Stops every proxy (server shutdown); configuration is kept.
    pub(crate) async fn stop_all(&self) {
        let mut proxies = self.proxies.lock().await;
        for e in proxies.values_mut() {
            e.stop().await;
        }
    }
}
