//! The chaos rig for `fenced-redlock` (work in progress).
//!
//! - [`proxy`]: Toxiproxy-compatible proxy server and async client.

pub mod proxy;
