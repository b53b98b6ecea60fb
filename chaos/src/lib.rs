//! The chaos rig for `fenced-redlock` (work in progress).
//!
//! - [`cluster`]: N Redis/Valkey primaries (docker or local processes) and the faults run on them.
//! - [`proxy`]: Toxiproxy-compatible proxy server and async client.
//! - [`nemesis`]: faults as data, seeded schedules, applied and always healed.
//! - [`scenario`]: named fault recipes (`chaos scenarios`) and what each should show.

pub mod cluster;
pub mod nemesis;
pub mod proxy;
pub mod scenario;
