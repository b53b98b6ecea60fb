//! The chaos rig for `fenced-redlock` (work in progress).
//!
//! - [`cluster`]: N Redis/Valkey primaries (docker or local processes) and the faults run on them.

pub mod cluster;
