//! A Toxiproxy-compatible TCP proxy: HTTP API server, toxics and async client.
//!
//! # Map
//! - [`api`]: the JSON types shared by server and client (proxy, toxic,
//!   toxic kinds and attributes, error body).
//! - [`server`]: the HTTP API. In-process: [`ProxyServer::start`] or
//!   [`serve`]; standalone: `chaos toxiproxy --listen ADDR` ([`run`]);
//!   [`ServeOptions`] for a seed and a config file.
//! - `populate` (private): populate bodies, validation, "same proxy?".
//! - `registry` (private): proxies, their listeners and toxic lists.
//! - `link` (private): one proxied connection, both directions.
//! - `toxics` (private): what the toxics do to one direction.
//! - [`client`]: async client, for this server or Shopify Toxiproxy.
//!
//! # API served
//! `GET /version`; `GET`/`POST /proxies`; `POST /populate`; `POST /reset`;
//! `GET`/`POST`/`PATCH`/`DELETE /proxies/{name}`;
//! `GET`/`POST /proxies/{name}/toxics`;
//! `GET`/`POST`/`PATCH`/`DELETE /proxies/{name}/toxics/{toxic}`.
//! Toxics: `latency`, `bandwidth`, `slow_close`, `timeout`, `reset_peer`,
//! `slicer`, `limit_data`, `noop`, with Toxiproxy's attributes, units and
//! defaults; stream names in any case. Errors are `{"error": "...",
//! "status": N}` with Toxiproxy's messages (`proxy not found`, `toxic
//! already exists`, `missing required field: name at proxy 2`, ...): 400 bad
//! body, 404 unknown proxy/toxic (checked before the body, as there), 409
//! duplicate name, 500 when a listen address cannot be bound (worded as Go
//! does: `listen tcp 127.0.0.1:3310: bind: address already in use`). A populate
//! error also carries `"proxies": null`. Every answer has an
//! `X-Toxiproxy-Request-Id`; a `Mozilla/` user agent gets 403 `User agent
//! not allowed`. `chaos toxiproxy` takes Toxiproxy's `-host`, `-port`,
//! `-config FILE` (populate at start) and `-seed N` (toxicity rolls,
//! jitter, slice sizes), also spelled `--host` etc.
//!
//! # Toxic semantics (as Toxiproxy)
//! - `bandwidth` waits `len / rate` *before* passing bytes on, in slices of
//!   at most 100 ms worth of bytes; pacing carries over from chunk to chunk
//!   (a burst is held to the rate) but idle time earns no credit. Removing
//!   or changing the toxic releases the rest of a chunk at the new pace.
//! - `timeout` > 0 closes the connection once no chunk arrived on its
//!   stream for `timeout` ms (each swallowed chunk restarts the timer);
//!   `timeout` = 0 holds the connection open forever. Removing a timeout
//!   toxic (or `POST /reset`) closes the connections it was holding.
//! - `POST /populate` keeps a proxy whose listen and upstream resolve to
//!   the same addresses (`localhost:P` = `127.0.0.1:P`) untouched: toxics,
//!   open connections and enabled state (its `enabled` field is ignored);
//!   a proxy that differs is replaced. The whole list is validated first;
//!   a listen address that cannot be bound stops the populate there (the
//!   proxies before it stay), with a 500.
//!
//! Measured (a shared 2-core machine; `cargo nextest run -p redlock-chaos
//! --test integration -E 'test(/^toxiproxy_toxics::/)' --no-capture` prints these):
//! a 10 KB echo at `rate` 10 takes 1.06 s and the next 10-byte echo 2 ms;
//! 50 KB at `rate` 100 takes 0.53 s; 480 KB upstream at `rate` 1000 (Toxiproxy's
//! own bandwidth test, expecting 0.48 s) takes 0.50 s; a `timeout=500` connection with a
//! chunk every 200 ms is still open after 1.6 s, and closes 0.30 s after
//! the last chunk; an identical re-populate (written `localhost`, reported
//! `127.0.0.1`) keeps the toxic and the open connection
//! (`toxiproxy_api::populate_with_the_same_config_keeps_proxy_toxics_and_connections`).
//!
//! # Differences from Shopify Toxiproxy
//! Each has a test (`difference_*` in `tests/toxiproxy_api.rs`, or named).
//! - Stricter input: toxicity outside `[0, 1]` and negative attributes are
//!   refused with a 400 (Toxiproxy stores them).
//! - `POST /populate` with an empty list answers `{"proxies": []}`;
//!   Toxiproxy answers `{"proxies": null}`, which typed clients (e.g.
//!   `toxiproxy_rust`) cannot read.
//! - Stream names are stored lower-case, so `"Upstream"` is reported (and
//!   named, `latency_upstream`) as `upstream`; Toxiproxy echoes the case.
//! - A proxy created without `listen` binds a free port on `127.0.0.1`;
//!   Toxiproxy binds every interface.
//! - Malformed JSON gets Toxiproxy's `bad request body: ` prefix, but what
//!   follows is serde's description, not Go's `json: cannot unmarshal ...`
//!   (`toxiproxy_api::toxic_errors_use_toxiproxy_messages` checks the prefix).
//! - Error bodies are labelled `application/json`; Toxiproxy sends the same
//!   JSON as `text/plain`.
//! - `--config` with a missing or invalid file stops the start
//!   ([`ServerError::Config`]); Toxiproxy logs it and starts empty
//!   (`toxiproxy_cli::difference_a_bad_config_stops_the_start`).
//! - Toxics act on a direction as a whole, not as a chain of goroutines:
//!   per chunk, latency first (measured from the chunk's arrival, so
//!   pipelining does not stack it), then `limit_data`, then `slicer` and
//!   `bandwidth` while writing. A `timeout` toxic anywhere in the list drops
//!   the data, whatever its position.
//! - `reset_peer` always resets the client side of the connection (the
//!   upstream side is closed normally); like Toxiproxy, it triggers on the
//!   first chunk of its stream, drops that chunk and waits `timeout` ms.
//! - The disable call returns only after the listener and every connection
//!   are closed, which makes tests deterministic.
//! - `GET /version` answers `{"version": "<this crate's version>"}`.
//! - No `/metrics`, `/events`, no `down` toxic, no TLS.
//!
//! # Client compatibility
//! `tests/toxiproxy_rust_client.rs` drives every call of the `toxiproxy_rust`
//! crate (0.1.6) and `tests/toxiproxy_python_client.rs` every call of
//! `toxiproxy-python` (PyPI 0.1.1, venv from `scripts/install-deps`), both
//! with traffic. Not covered: `toxiproxy_rust`'s `TOXIPROXY` static (fixed
//! to port 8474, which parallel tests must not take).
//!
//! # Why not the `noxious` crate
//! `noxious` (a Rust port of Toxiproxy) was the suggested base. It was
//! replaced by this compact implementation because it pins old
//! dependencies (tokio-util 0.6, rand 0.8, thiserror 1, mockall_double in
//! the normal dependency tree), has no `reset_peer`, and wiring a new toxic
//! and live updates into its link/stream machinery would have been larger
//! than the ~600 lines here. The HTTP side uses axum 0.8 (maintained,
//! `http1`+`json` only, no TLS).
//!
//! # Client choice
//! reqwest 0.13 with `default-features = false, features = ["json"]`: async,
//! maintained, no TLS stack pulled in. The `toxiproxy_rust` crate was not
//! used: it is blocking, ignores status codes and depends on an old reqwest
//! with a security advisory.

pub mod api;
pub mod client;
mod link;
mod populate;
mod registry;
pub mod server;
mod toxics;

pub use api::{ApiError, NewProxy, Proxy, ProxyUpdate, Stream, Toxic, ToxicError, ToxicKind};
pub use client::{Client, ClientError};
pub use populate::DEFAULT_LISTEN;
pub use server::{
    ProxyServer, REQUEST_ID_HEADER, ServeOptions, ServerError, run, serve, serve_with,
};
