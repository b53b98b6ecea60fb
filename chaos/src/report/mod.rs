//! What a chaos run writes down, and how people and CI read it.
//!
//! # Map
//! - [`model`]: the `report.json` schema — the contract between the runner (which fills it)
//!   and every renderer (which only reads it). `chaos report DIR` re-renders from the file.
//! - [`observer`]: [`observer::RunObserver`], the runner's live events (progress, finished scenarios).

pub mod model;
pub mod observer;

pub use model::{
    ChaosReport, CounterSample, FaultWindow, GrantSpan, LatencySample, ModeReport, ModeTimeline,
    Ms, Outcome, RejectedWrite, ScenarioReport, Verdict, ViolationMark,
};
