//! A Toxiproxy-compatible TCP proxy: HTTP API server, toxics and async client.
//!
//! # Map
//! - [`api`]: the JSON types shared by server and client (proxy, toxic,
//!   toxic kinds and attributes, error body).
//! - [`server`]: the HTTP API. In-process: [`ProxyServer::start`] or
//!   [`serve`]; standalone: `chaos toxiproxy --listen ADDR` ([`run`]).
//! - `registry` (private): proxies, their listeners and toxic lists.
//! - `link` (private): one proxied connection, both directions.
//! - `toxics` (private): what the toxics do to one direction.
//! - [`client`]: async client, for this server or Shopify Toxiproxy.
//!
//! # API subset served
//! `GET /version`; `GET`/`POST /proxies`; `POST /populate`; `POST /reset`;
//! `GET`/`POST`/`PATCH`/`DELETE /proxies/{name}`;
//! `GET`/`POST /proxies/{name}/toxics`;
//! `GET`/`POST`/`PATCH`/`DELETE /proxies/{name}/toxics/{toxic}`.
//! Toxics: `latency`, `bandwidth`, `slow_close`, `timeout`, `reset_peer`,
//! `slicer`, `limit_data`, with Toxiproxy's attributes, units and defaults.
//! Errors are `{"error": "...", "status": N}`: 400 bad body, 404 unknown
//! proxy/toxic, 409 duplicate name, 500 when a listen address cannot be bound.
//!
//! # Differences from Shopify Toxiproxy
//! - Toxics act on a direction as a whole, not as a chain of goroutines:
//!   per chunk, latency is applied first (measured from the chunk's arrival,
//!   so pipelining does not stack it), then `limit_data`, then `slicer` and
//!   `bandwidth` while writing. A `timeout` toxic anywhere in the list drops
//!   the data, whatever its position.
//! - `timeout` > 0 closes the connection that long after the toxic started
//!   acting on it (added, changed, or connection opened); Toxiproxy restarts
//!   that timer on every dropped chunk.
//! - `reset_peer` always resets the client side of the connection (the
//!   upstream side is closed normally); like Toxiproxy, it triggers on the
//!   first chunk of its stream, drops that chunk and waits `timeout` ms.
//! - Disabled proxies stop listening (as Toxiproxy), so connects are
//!   refused; the disable call returns only after the listener and every
//!   connection are closed, which makes tests deterministic.
//! - `POST /populate` keeps an existing proxy with the same listen and
//!   upstream (as Toxiproxy) but, unlike Toxiproxy, applies its `enabled`.
//! - `GET /version` answers `{"version": "<this crate's version>"}`.
//! - No `/metrics`, `/events`, no `down` toxic, no TLS.
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
