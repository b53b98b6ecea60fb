//! The chaos rig for `fenced-redlock` (work in progress).
//!
//! - [`bench`](mod@bench): `chaos bench`, our client beside the Rust peers, as ratios.
//! - [`cluster`]: N Redis/Valkey primaries (docker or local processes) and the faults run on them.
//! - [`proxy`]: Toxiproxy-compatible proxy server and async client.
//! - [`nemesis`]: faults as data, seeded schedules, applied and always healed.
//! - [`scenario`]: named fault recipes (`chaos scenarios`) and what each should show.
//! - [`pg`]: a throwaway PostgreSQL server (or an existing one) for the fenced counter.
//! - [`workload`]: the fenced counter — workers, modes, stalls — and the fencing table.
//! - [`commands`]: `chaos fencing-table` and `chaos lock`.
//! - [`lockut`]: the lock under test — ours, or a plain Redlock with a deliberate mistake.
//! - [`run`]: `chaos run` — every scenario on one cluster, four modes at once, recorded.
//! - [`judge`]: a scenario's verdict as a pure function of its recorded evidence and
//!   history, live and offline (`chaos judge DIR`).
//! - [`report`]: the `report.json` schema shared by the runner and the renderers.
//! - [`checker`]: lost updates and exclusion violations, computed from a run's records.
//! - [`schema`]: the JSON Schemas in `docs/schema/`, derived from the types above.

pub mod bench;
pub mod checker;
pub mod cluster;
pub mod commands;
pub mod judge;
pub mod lockut;
pub mod nemesis;
pub mod pg;
pub mod proxy;
pub mod report;
pub mod run;
pub mod scenario;
pub mod schema;
pub mod workload;
