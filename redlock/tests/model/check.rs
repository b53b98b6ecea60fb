//! Runs one model check and reports what it found, with state counts and traces.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model, Path};

use super::config::Config;
use super::spec::{Action, LockModel};
use super::{symmetry, trace};

/// What one exhaustive check found.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) name: &'static str,
    pub(crate) unique_states: usize,
    pub(crate) states: usize,
    pub(crate) depth: usize,
    pub(crate) took: Duration,
    /// Property name → the rendered path that discovered it (a counterexample for an
    /// `always` property, an example for a `sometimes` one).
    pub(crate) found: BTreeMap<&'static str, String>,
    expectations: BTreeMap<&'static str, Expectation>,
    exhaustive: bool,
    /// Played from a given list of actions, not searched: the rendered trace.
    replayed: Option<String>,
}

impl Outcome {
    /// Asserts that the `always` property held in every reachable state.
    pub(crate) fn holds(&self, property: &str) {
        assert!(
            self.exhaustive,
            "{}: only an exhaustive check proves \"{property}\"",
            self.name
        );
        if let Some(trace) = self.found.get(property) {
            panic!("{}: \"{property}\" is violated:\n{trace}", self.name);
        }
    }

    /// Asserts that the `always` property has a counterexample and prints it.
    pub(crate) fn fails(&self, property: &str) {
        let Some(trace) = self.found.get(property) else {
            panic!(
                "{}: expected a counterexample to \"{property}\", found none",
                self.name
            );
        };
        println!("{}: counterexample to \"{property}\":\n{trace}", self.name);
    }

    /// Asserts that a replayed trace ends where the `sometimes` property does not hold,
    /// and prints the trace.
    pub(crate) fn misses(&self, property: &str) {
        let Some(trace) = &self.replayed else {
            panic!(
                "{}: only a replayed trace can miss \"{property}\"",
                self.name
            );
        };
        assert!(
            !self.found.contains_key(property),
            "{}: \"{property}\" holds at the end of the trace",
            self.name
        );
        println!(
            "{}: \"{property}\" does not hold at the end of:\n{trace}",
            self.name
        );
    }

    /// Asserts that a `sometimes` property was reached (the model is not vacuous).
    pub(crate) fn reaches(&self, property: &str) {
        assert!(
            self.found.contains_key(property),
            "{}: \"{property}\" never happens: the bounds are too small to say anything",
            self.name
        );
    }
}

/// Explores every reachable state of `cfg` (depth first, one representative per node
/// permutation) and prints a line per property. Counterexamples it finds are valid but
/// not the shortest; [`find`] gives those.
pub(crate) fn prove(name: &'static str, cfg: Config) -> Outcome {
    run(name, cfg, None)
}

/// Searches `cfg` breadth first until `property` is discovered, so its counterexample is
/// a shortest one; other properties are not fully checked.
pub(crate) fn find(name: &'static str, cfg: Config, property: &'static str) -> Outcome {
    run(name, cfg, Some(property))
}

/// Searches `cfg` depth first (one representative per node permutation) until
/// `property` is discovered: quicker than [`find`] where the space is wide, but the
/// counterexample is not the shortest.
pub(crate) fn find_deep(name: &'static str, cfg: Config, property: &'static str) -> Outcome {
    let model = LockModel { cfg };
    let started = Instant::now();
    let checker = model
        .clone()
        .checker()
        .symmetry_fn(symmetry::representative)
        .finish_when(HasDiscoveries::AnyOf([property].into()))
        .spawn_dfs()
        .join();
    let mut outcome = summarize(&model, checker);
    outcome.took = started.elapsed();
    outcome.name = name;
    outcome.expectations = model
        .properties()
        .into_iter()
        .map(|p| (p.name, p.expectation))
        .collect();
    outcome.print();
    outcome
}

/// Whether the model allows `actions`, one after another, from the initial state.
pub(crate) fn allows(cfg: Config, actions: &[Action]) -> bool {
    let model = LockModel { cfg };
    let init = model.init_states().remove(0);
    Path::from_actions(&model, init, actions).is_some()
}

/// Plays `actions` from the initial state, checking that the model allows each one, and
/// reports the properties the last state violates (or reaches) with the path as their
/// trace: for a trace found by hand where a search is too large for the suite.
pub(crate) fn replay(name: &'static str, cfg: Config, actions: &[Action]) -> Outcome {
    let model = LockModel { cfg };
    let started = Instant::now();
    let init = model.init_states().remove(0);
    let Some(path) = Path::from_actions(&model, init, actions) else {
        panic!("{name}: the model does not allow this sequence of actions");
    };
    let last = path.last_state().clone();
    let rendered = trace::render(&model, &path);
    let properties = model.properties();
    let outcome = Outcome {
        name,
        unique_states: actions.len() + 1,
        states: actions.len() + 1,
        depth: actions.len(),
        took: started.elapsed(),
        found: properties
            .iter()
            .filter(|p| {
                let holds = (p.condition)(&model, &last);
                match p.expectation {
                    Expectation::Sometimes => holds,
                    _ => !holds,
                }
            })
            .map(|p| (p.name, rendered.clone()))
            .collect(),
        expectations: properties
            .iter()
            .map(|p| (p.name, p.expectation.clone()))
            .collect(),
        exhaustive: false,
        replayed: Some(rendered),
    };
    outcome.print();
    outcome
}

fn run(name: &'static str, cfg: Config, target: Option<&'static str>) -> Outcome {
    let model = LockModel { cfg };
    let expectations = model
        .properties()
        .into_iter()
        .map(|p| (p.name, p.expectation))
        .collect();
    let started = Instant::now();
    let builder = model.clone().checker();
    let mut outcome = match target {
        None => summarize(
            &model,
            builder
                .symmetry_fn(symmetry::representative)
                .spawn_dfs()
                .join(),
        ),
        Some(property) => summarize(
            &model,
            builder
                .finish_when(HasDiscoveries::AnyOf([property].into()))
                .spawn_bfs()
                .join(),
        ),
    };
    outcome.took = started.elapsed();
    outcome.name = name;
    outcome.expectations = expectations;
    outcome.exhaustive = target.is_none();
    outcome.print();
    outcome
}

fn summarize(model: &LockModel, checker: impl Checker<LockModel>) -> Outcome {
    Outcome {
        name: "",
        unique_states: checker.unique_state_count(),
        states: checker.state_count(),
        depth: checker.max_depth(),
        took: Duration::ZERO,
        found: checker
            .discoveries()
            .into_iter()
            .map(|(property, path)| (property, trace::render(model, &path)))
            .collect(),
        expectations: BTreeMap::new(),
        exhaustive: false,
        replayed: None,
    }
}

impl Outcome {
    fn print(&self) {
        println!(
            "{}: {} {} states ({} generated), depth {}, {:.1} s",
            self.name,
            if self.exhaustive {
                "all"
            } else if self.replayed.is_some() {
                "replayed, every step allowed by the model:"
            } else {
                "searched until found:"
            },
            self.unique_states,
            self.states,
            self.depth,
            self.took.as_secs_f64()
        );
        for (property, expectation) in &self.expectations {
            let verdict = match (expectation, self.found.contains_key(property)) {
                (Expectation::Sometimes, true) => "reached",
                (Expectation::Sometimes, false) if self.replayed.is_some() => {
                    "not reached at the end"
                }
                (Expectation::Sometimes, false) => "NEVER REACHED",
                (_, true) => "COUNTEREXAMPLE",
                (_, false) if self.exhaustive => "holds",
                (_, false) if self.replayed.is_some() => "holds at the end",
                (_, false) => "not searched to the end",
            };
            println!("  {property}: {verdict}");
        }
    }
}
