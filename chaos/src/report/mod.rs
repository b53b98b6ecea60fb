//! What a chaos run writes down, and how people and CI read it.
//!
//! # Map
//! - [`model`]: the `report.json` schema — the contract between the runner (which fills it)
//!   and every renderer (which only reads it). `chaos report DIR` re-renders from the file.
//! - [`observer`]: the [`RunObserver`] events the runner sends while it runs.
//! - [`progress`]: observers for people (indicatif bars) and CI logs (plain lines).
//! - [`meter`]: the same for long commands counted in units (`chaos fencing-table`).
//! - [`write`](mod@write): the report directory — [`write_all`], [`load`], [`rerender`].
//! - [`html`]: `report.html`, one self-contained page ([`render_html`]); its charts are
//!   `timeline`, `latency` and `counter`, drawn with the `svg` writer on the shared `axis`,
//!   thinned by `downsample`, coloured by `palette`; all text through `escape`; the lost
//!   updates and their culprits are a table (`culprits`).
//! - [`junit`]: `junit.xml` for CI ([`render_junit`]).
//! - [`markdown`]: a Markdown summary for CI pages ([`render_markdown`], `chaos report
//!   --markdown`), not-applicable scenarios shown as such.
//! - [`error`]: what can fail, as [`ReportError`].

mod axis;
mod counter;
mod culprits;
mod downsample;
pub mod error;
mod escape;
pub mod html;
pub mod junit;
mod latency;
pub mod markdown;
pub mod meter;
pub mod model;
pub mod observer;
mod palette;
pub mod progress;
mod svg;
mod timeline;
pub mod write;

pub use error::ReportError;
pub use escape::escape;
pub use html::render_html;
pub use junit::render_junit;
pub use markdown::render_markdown;
pub use model::{
    ChaosReport, CounterSample, Culprit, FaultWindow, FenceMark, GrantSpan, LatencySample,
    LostUpdate, ModeReport, ModeTimeline, Ms, Outcome, PauseSpan, RejectedWrite, RunImage,
    ScenarioReport, Verdict, ViolationMark,
};
pub use observer::{Progress, RunObserver, Silent};
pub use progress::{BarsObserver, LineObserver, observer_for_terminal};
pub use write::{ReportPaths, load, rerender, write_all};
