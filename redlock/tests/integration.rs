//! fenced-redlock's integration tests against real Redis and Valkey servers, one module per
//! subject, built as one test binary (`integration`): one link and one copy of the shared
//! code instead of one per file (issue 25; the protocol model, `model.rs`, stays a binary of
//! its own). Run one subject with `cargo nextest run -p fenced-redlock --test integration -E
//! 'test(/^lock::/)'`.

mod support;

mod blocking;
mod cancelled_release;
mod cleanup_reconnect;
mod clients;
mod clock_jump;
mod connect;
mod durable;
// By path: its own `#[path]` modules then resolve from tests/, as when it was a crate root.
#[path = "examples.rs"]
mod examples;
mod extend_for;
mod fence_counters;
mod fence_tokens;
mod full_line;
// By path: its own `#[path]` modules then resolve from tests/, as when it was a crate root.
#[path = "handle.rs"]
mod handle;
mod handoff;
mod limits;
mod lock;
mod lua_free;
mod metrics;
mod native_delete;
mod notify_deadlines;
mod order;
mod probe;
mod quarantine;
mod reserved_room;
mod retry;
mod safety;
mod same_server;
mod secrecy;
mod shortening_extend;
mod siblings;
mod transport;
