//! The chaos rig for `fenced-redlock` (work in progress).
//!
//! - [`bench`]: `chaos bench`, our client beside the Rust peers, as ratios.
//! - [`cluster`]: N Redis/Valkey primaries (docker or local processes) and the faults run on them.
//! - [`proxy`]: Toxiproxy-compatible proxy server and async client.

pub mod bench;
pub mod cluster;
pub mod proxy;
