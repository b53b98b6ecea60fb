//! The fenced-counter workload: W workers increment one PostgreSQL row under one lock.
//!
//! - [`mode`]: how a critical section writes ([`Mode`]) and its timings ([`Preset`], [`Timing`]).
//! - [`stall`]: how a worker stalls ([`Stall`]) — today an async sleep; the seam for a real
//!   process pause later.
//! - [`section`]: one critical section (read or claim, work, write) of the fencing table.
//! - [`ledger`]: the chaos run's resource, a counter that names every update it kept (and
//!   so every one it lost) and the write that erased it.
//! - [`counter`]: one run ([`run_counter`]) and what it records ([`Grant`], [`RunOutcome`]).
//! - [`table`]: every stall rate × mode × run, concurrently, summarised ([`run_table`]).

pub mod counter;
pub mod ledger;
pub mod mode;
pub mod section;
pub mod stall;
pub mod table;

pub use counter::{CounterConfig, Grant, RunError, RunOutcome, run_counter};
pub use mode::{Mode, Preset, StallLength, Timing};
pub use stall::Stall;
pub use table::{TableConfig, TableResult, run_table};
