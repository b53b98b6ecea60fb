//! The judge: a scenario's verdict as a pure function of what the run recorded.
//!
//! The runner ([`crate::run`]) plays a scenario and records what it saw — the evidence
//! and the history — and nothing else; this module turns those records into each mode's
//! numbers and the verdict, with the checks of [`crate::checker`]. The same function runs
//! live and offline (`chaos judge DIR`), so a verdict can be re-derived, audited, or
//! re-judged by a newer checker from the run's own files.
//!
//! Imports run one way: `run` → `judge` → `report` / `checker`; nothing here reads the
//! runner.
//!
//! # Map
//! - [`events`]: what workers report ([`events::WorkerEvent`]), the raw record.
//! - [`evidence`]: everything a verdict uses besides the history, as written to
//!   `evidence/NNN-name.json` ([`evidence::Evidence`]).
//! - [`record`]: one mode's entries and history → its numbers and timeline.
//! - [`derived`]: client pauses and late retirements as fault windows, from the record.
//! - [`scenario`]: one scenario judged ([`scenario::judge`]).
//! - [`verdict`]: expectation × mode numbers → [`crate::report::Verdict`].
//! - [`replay`]: a recorded run judged again ([`replay::rejudge`]).

pub mod derived;
pub mod events;
pub mod evidence;
pub mod record;
pub mod replay;
pub mod scenario;
pub mod verdict;
