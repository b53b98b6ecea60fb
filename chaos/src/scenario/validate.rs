//! What a scenario must satisfy beyond its types, and whether it fits a run.
//!
//! [`check`] holds on every scenario, whatever the run (faults hit the kind of target they
//! can hit, a timeline entry ends after it starts, ...); the file loader runs the parts
//! that concern one value while parsing, so their errors carry a line. [`fits`] holds
//! against one run's nodes, workers and duration, known only once the command line is.

use super::model::{At, FaultSpec, MAX_REPEATS, Proxied, Recipe, TargetRule, TimedFault};
use super::{Scenario, Shape};

/// A scenario that cannot be played: which field, and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {message}")]
#[non_exhaustive]
pub struct SpecError {
    /// Path of the field, e.g. `recipe.window.on` or `timeline[1].end`.
    pub field: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl SpecError {
    /// At `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        SpecError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error at `prefix.field`.
    pub fn within(mut self, prefix: &str) -> Self {
        self.field = if self.field.is_empty() {
            prefix.to_owned()
        } else if self.field.starts_with('[') {
            format!("{prefix}{}", self.field)
        } else {
            format!("{prefix}.{}", self.field)
        };
        self
    }
}

/// Every rule that does not depend on the run.
///
/// # Errors
/// The first field that breaks one.
pub fn check(s: &Scenario) -> Result<(), SpecError> {
    check_name(&s.name).map_err(|m| SpecError::new("name", m))?;
    check_rate(s.pause_rate).map_err(|m| SpecError::new("pause_rate", m))?;
    if s.ttl.is_some_and(|t| t.is_zero()) {
        return Err(SpecError::new(
            "ttl",
            "0 is not a lease: give a positive TTL such as \"1s\", or leave it out for the run's --ttl",
        ));
    }
    if s.amnesia_split && s.proxied != Proxied::All {
        return Err(SpecError::new(
            "proxied",
            "`amnesia_split` gives worker 0 its own view of the nodes already; use `proxied = \"all\"` with it",
        ));
    }
    if let Some(step) = &s.split_clock_step {
        if !s.amnesia_split {
            return Err(SpecError::new(
                "split_clock_step",
                "steps the clock of the node `amnesia_split` restarts, and there is none without it; set `amnesia_split = true`, or use a `clock-jump` fault for a clock that jumps on its own",
            ));
        }
        for (field, range) in [("back_s", step.back_s), ("forward_s", step.forward_s)] {
            if range.lo == 0 {
                return Err(SpecError::new(
                    format!("split_clock_step.{field}"),
                    "a step of 0 s leaves the uptime as it is; give at least 1 s, e.g. [30, 60] back (the uptime reads negative) or [60, 120] forward",
                ));
            }
        }
    }
    if s.late_retire {
        check_late_retire(s)?;
    }
    match (&s.recipe, &s.timeline) {
        (Some(_), Some(_)) => {
            return Err(SpecError::new(
                "timeline",
                "a scenario has either a `recipe` or a `timeline`, not both; remove one",
            ));
        }
        (None, None) => {
            return Err(SpecError::new(
                "recipe",
                "missing: give a `recipe` (seeded fault windows) or a `timeline` (faults at fixed times; `timeline = []` for none)",
            ));
        }
        _ => {}
    }
    if let Some(r) = &s.recipe {
        check_recipe(r).map_err(|e| e.within("recipe"))?;
    }
    for (i, t) in s.timeline.iter().flatten().enumerate() {
        check_timed(t).map_err(|e| e.within(&format!("timeline[{i}]")))?;
    }
    Ok(())
}

/// `late_retire` delays worker 0's requests at the proxies from inside the worker's task:
/// worker 0 must be the only proxied client, and no worker may be a process of its own.
fn check_late_retire(s: &Scenario) -> Result<(), SpecError> {
    if s.proxied != Proxied::FirstWorker {
        return Err(SpecError::new(
            "proxied",
            "`late_retire` delays worker 0's requests at the proxies, which must carry no other worker; use `proxied = \"first-worker\"` with it",
        ));
    }
    if s.pause_rate > 0.0 || s.fault_kinds().any(FaultSpec::targets_workers) {
        return Err(SpecError::new(
            "late_retire",
            "client pauses and stalls run workers as processes, which cannot drive the late retirement; set `pause_rate = 0` and leave out client stalls, or play them in a scenario of their own",
        ));
    }
    if s.work == super::Work::Renewed {
        return Err(SpecError::new(
            "late_retire",
            "a renewed section releases through its renewer and never retires; use another `work` with `late_retire`",
        ));
    }
    Ok(())
}

/// What [`check_name`] accepts, as the scenario schema's `pattern`.
pub(crate) const NAME_PATTERN: &str = "^[A-Za-z0-9._-]+$";

/// Names go into resource keys and reports.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "{name:?}: use letters, digits, '-', '_' or '.', e.g. \"kill-minority-60s\""
        ));
    }
    Ok(())
}

pub(crate) fn check_rate(rate: f64) -> Result<(), String> {
    if !(0.0..=1.0).contains(&rate) {
        return Err(format!(
            "{rate} is not a probability: use 0 (never) to 1 (every section)"
        ));
    }
    Ok(())
}

/// A recipe on its own.
///
/// # Errors
/// The first field (relative to the recipe) that is wrong.
pub fn check_recipe(r: &Recipe) -> Result<(), SpecError> {
    if r.faults.is_empty() {
        return Err(SpecError::new(
            "faults",
            "empty: name at least one fault kind, e.g. [{ kind = \"kill\" }]",
        ));
    }
    for f in &r.faults {
        check_targets(f, &r.targets)?;
    }
    if r.window.on.lo <= 0.0 {
        return Err(SpecError::new(
            "window.on",
            format!(
                "[{}, {}]: a fault must last; use a lower bound above 0, e.g. [0.05, 0.1]",
                r.window.on.lo, r.window.on.hi
            ),
        ));
    }
    if r.window.max_on.is_zero() {
        return Err(SpecError::new(
            "window.max_on",
            "0: a fault must last; use e.g. \"60s\"",
        ));
    }
    Ok(())
}

/// A timeline entry on its own.
///
/// # Errors
/// The first field (relative to the entry) that is wrong.
pub fn check_timed(t: &TimedFault) -> Result<(), SpecError> {
    check_targets(&t.fault, &t.targets)?;
    // Two offsets or two shares compare now; a mix only against a run (`fits`).
    let ordered = match (t.start, t.end) {
        (At::Offset(a), At::Offset(b)) => b > a,
        (At::Share(a), At::Share(b)) => b > a,
        _ => true,
    };
    if !ordered {
        return Err(SpecError::new(
            "end",
            format!(
                "{} is not after start ({}): a fault is healed after it is applied",
                t.end, t.start
            ),
        ));
    }
    if let Some(r) = t.repeat
        && (r.lasting.is_zero() || r.lasting >= r.every)
    {
        return Err(SpecError::new(
            "repeat.lasting",
            format!(
                "{} against every {}: each window must last, and end before the next starts (e.g. every = \"10ms\", lasting = \"2ms\")",
                humantime::format_duration(r.lasting),
                humantime::format_duration(r.every)
            ),
        ));
    }
    Ok(())
}

fn check_targets(f: &FaultSpec, rule: &TargetRule) -> Result<(), SpecError> {
    let bad = |m: String| Err(SpecError::new("targets", m));
    match rule {
        TargetRule::Nodes(l) | TargetRule::Workers(l) if l.is_empty() => {
            return bad("an empty list hits nothing; name at least one".into());
        }
        _ => {}
    }
    match (f.targets_workers(), rule.picks_workers()) {
        (true, false) => bad(format!(
            "`{}` hits workers: use \"one-worker\" or {{ workers = [0] }}",
            f.name()
        )),
        (false, true) => bad(format!(
            "`{}` hits nodes: use \"one\", \"one-of-minority\", \"minority\", \"majority\", \"all\" or {{ nodes = [0] }}",
            f.name()
        )),
        _ => Ok(()),
    }
}

/// Whether `s` fits a run of `shape`: its explicit nodes and workers exist, its timeline
/// ends within the run.
///
/// # Errors
/// The first field that does not fit, naming the flag to change.
pub fn fits(s: &Scenario, shape: &Shape) -> Result<(), SpecError> {
    if let Some(r) = &s.recipe {
        fits_targets(&r.targets, shape).map_err(|m| SpecError::new("recipe.targets", m))?;
    }
    for (i, t) in s.timeline.iter().flatten().enumerate() {
        fits_targets(&t.targets, shape)
            .map_err(|m| SpecError::new(format!("timeline[{i}].targets"), m))?;
        let (start, end) = (
            t.start.resolve(shape.duration),
            t.end.resolve(shape.duration),
        );
        if end > shape.duration {
            return Err(SpecError::new(
                format!("timeline[{i}].end"),
                format!(
                    "{} is past the end of the run ({}); end it earlier or raise --duration",
                    humantime::format_duration(end),
                    humantime::format_duration(shape.duration)
                ),
            ));
        }
        if end <= start {
            return Err(SpecError::new(
                format!("timeline[{i}].end"),
                format!(
                    "{} ({}) is not after start ({}, {}) in a run of {}",
                    t.end,
                    humantime::format_duration(end),
                    t.start,
                    humantime::format_duration(start),
                    humantime::format_duration(shape.duration)
                ),
            ));
        }
        if let Some(r) = t.repeat {
            let n = r.count(start, end);
            if n > MAX_REPEATS {
                return Err(SpecError::new(
                    format!("timeline[{i}].repeat.every"),
                    format!(
                        "{n} windows in a run of {}: at most {MAX_REPEATS}; repeat less often or shorten the run",
                        humantime::format_duration(shape.duration)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn fits_targets(rule: &TargetRule, shape: &Shape) -> Result<(), String> {
    match rule {
        TargetRule::Nodes(l) => match l.iter().find(|n| **n >= shape.nodes) {
            Some(n) => Err(format!(
                "node {n} does not exist: the run has {} nodes (0-{}); use --nodes {} or a smaller index",
                shape.nodes,
                shape.nodes.saturating_sub(1),
                n + 1
            )),
            None => Ok(()),
        },
        TargetRule::Workers(l) => match l.iter().find(|w| **w >= shape.workers) {
            Some(w) => Err(format!(
                "worker {w} does not exist: the run has {} workers per mode (0-{}); use --workers {} or a smaller index",
                shape.workers,
                shape.workers.saturating_sub(1),
                w + 1
            )),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::find;
    use crate::scenario::model::{ClockStep, ValueRange};

    #[test]
    fn a_clock_step_needs_a_split_and_a_step_of_a_second_or_more() {
        let stepped = find("amnesia-split-stepped").expect("built-in");
        assert_eq!(check(stepped), Ok(()));
        let mut lone = stepped.clone();
        lone.amnesia_split = false;
        let e = check(&lone).expect_err("no split");
        assert_eq!(e.field, "split_clock_step");
        assert!(e.message.contains("amnesia_split = true"), "{e}");
        let mut still = stepped.clone();
        still.split_clock_step = Some(ClockStep {
            back_s: ValueRange::new(0, 30),
            forward_s: ValueRange::new(60, 120),
        });
        let e = check(&still).expect_err("a step of 0 s");
        assert_eq!(e.field, "split_clock_step.back_s");
    }
}
