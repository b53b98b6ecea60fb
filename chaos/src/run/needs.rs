//! What a scenario needs from the run's settings to be judged at all, checked before
//! anything starts: a scenario that cannot show what its expectation asks for would fail
//! (exit 1, or 4 for a liveness check such as sections > 0) for a reason that is a setting,
//! not the lock.
//!
//! | needs | which scenarios | why |
//! |---|---|---|
//! | TTL longer than a section's work plus the drift allowance | every scenario with fixed work (5 ms, or its own, e.g. 100 ms in `clock-jump-majority`) | the validity left after the work is what `checked` writes under; none left: no section ever completes |
//! | every amnesia (`restart-wipe`) window at least 1.5 × the TTL ([`minimum_duration`] for a recipe's share of the run; the TTL against its cap) | scenarios that judge the lock with amnesia in them (`amnesia-restart`: 6 s at the 200 ms TTL) | the lock promises to hold only for nodes kept out longer than the TTL (`fenced_redlock::fence`, "What breaks it"); a shorter window is the within-the-TTL case, which `amnesia-split` shows |
//! | 2 workers per mode or more | must-show scenarios | an anomaly needs a second holder: one worker alone cannot overlap or overwrite itself |
//! | an odd number of nodes | `amnesia-split` | the victim holds a bare majority; the emptied node plus the N − quorum nodes it never reached make a majority only when N is odd |
//! | [`split_minimum`] | `amnesia-split` | restarts go round the four modes; `none` may be served last |
//! | [`pause_minimum`] | `client-pause` (must-show with pauses) | a worker pauses within its first 1/rate sections; the pause then has to end |
//!
//! Durations have no floor otherwise. Measured 2026-12-02 on the local backend of a loaded
//! 2-core machine (load 4.5; `chaos run --backend local --scenario S --duration D --seed
//! 7`, release build): `client-pause` and `clock-jump-majority` showed their anomaly at
//! 0.5 s and 1 s (seeds 7 and 8), `kill-minority`, `majority-loss` and `latency` passed
//! at 1 s; `amnesia-split` passed at 3 s (seed 7) and was blind at 4 s (seed 8). The
//! `client-pause` bound is a worst case from the slowest documented section rate rather
//! than a measured failure; the `amnesia-split` one is what its tests pass with.

use std::time::Duration;

use fenced_redlock::config::DEFAULT_DRIFT_FACTOR;
use fenced_redlock::validity;

use super::pause::PAUSE_TTLS;
use super::split::{COOLDOWN, SPLIT_TTL};
use crate::scenario::{Anomaly, Expectation, FaultSpec, Scenario, Shape, Work};
use crate::workload::Mode;

/// The slowest a mode completes sections in `client-pause` (each pause stalls its lock for
/// about a TTL): 5 a second, the low end of what [`crate::scenario::CLIENT_PAUSE_RATE`]'s
/// documentation measured.
pub const SLOWEST_PAUSED_SECTIONS_PER_SEC: f64 = 5.0;

/// Checks `scenario`'s TTL, workers and nodes against a run of `shape` with lease `ttl`
/// and section work `work` (for [`Work::Run`]); the duration is [`minimum_duration`]'s.
///
/// # Errors
/// What is missing and the flag to change.
pub fn check(
    scenario: &Scenario,
    shape: &Shape,
    ttl: Duration,
    work: Duration,
) -> Result<(), String> {
    let name = &scenario.name;
    // A built-in's timeline, too, must fit the run: a repeated entry lays at most
    // `MAX_REPEATS` windows.
    crate::scenario::validate::fits(scenario, shape).map_err(|e| format!("`{name}`: {e}"))?;
    if let Some(section) = section_work(scenario, work) {
        let drift = validity::drift(ttl, DEFAULT_DRIFT_FACTOR).unwrap_or(ttl);
        if validity::validity(ttl, section, drift).is_none() {
            let enough = whole_ms(section.saturating_mul(2).saturating_add(drift));
            return Err(format!(
                "--ttl {}: `{name}` works {} in each section, which leaves no validity to write under (drift allowance {}); use --ttl {} or more",
                fmt(ttl),
                fmt(section),
                fmt(drift),
                fmt(enough)
            ));
        }
    }
    // However long the run: a window's cap (or a timeline entry) shorter than the TTL
    // needs. Runs too short for the fractions are `minimum_duration`'s.
    let out = amnesia_out(ttl);
    if promises(scenario.expectation)
        && let Some(longest) = shortest_amnesia(scenario, Duration::MAX)
        && longest < out
    {
        return Err(format!(
            "--ttl {}: `{name}` keeps a node out for as little as {} before it comes back empty, and is judged as a restart kept out longer than the TTL (the lock must hold) only when every one lasts 1.5 × the TTL ({}) or more; use --ttl {} or less",
            fmt(ttl),
            fmt(longest),
            fmt(out),
            fmt(longest.saturating_mul(2) / 3)
        ));
    }
    let Expectation::MustShow(anomaly) = scenario.expectation else {
        return Ok(());
    };
    if shape.workers < 2 {
        return Err(format!(
            "--workers {}: `{name}` must show {}, which takes a second holder per mode; use --workers 2 or more",
            shape.workers,
            anomaly.describe()
        ));
    }
    if scenario.amnesia_split && shape.nodes.is_multiple_of(2) {
        return Err(format!(
            "--nodes {}: `{name}` needs an odd number of nodes (with an even one the emptied node and the nodes its victim never reached are not a majority, so nobody else gets in); use --nodes {}",
            shape.nodes,
            shape.nodes.saturating_add(1)
        ));
    }
    Ok(())
}

/// Whether `expectation` asks the lock to hold (rather than allowing violations or
/// requiring an anomaly).
fn promises(expectation: Expectation) -> bool {
    matches!(
        expectation,
        Expectation::SafeAndAvailable | Expectation::UnavailableButSafe | Expectation::LockHolds
    )
}

/// How long an amnesic node must stay out for the lock to promise anything: 1.5 × the TTL
/// (the docs ask for longer than the TTL; the half is room for the nemesis's timing).
fn amnesia_out(ttl: Duration) -> Duration {
    ttl.saturating_mul(3) / 2
}

/// The shortest run whose recipe windows keep an amnesic node out for [`amnesia_out`]:
/// the window's smallest share of the run must reach it (zero without amnesia).
fn amnesia_minimum(scenario: &Scenario, ttl: Duration) -> Duration {
    let wipe = |f: &FaultSpec| matches!(f, FaultSpec::RestartWipe {});
    scenario
        .recipe
        .iter()
        .filter(|r| r.faults.iter().any(wipe) && r.window.on.lo > 0.0)
        .map(|r| amnesia_out(ttl).div_f64(r.window.on.lo.min(1.0)))
        .max()
        .unwrap_or(Duration::ZERO)
}

/// The shortest time a node of `scenario` stays down before it comes back empty
/// (`restart-wipe`) in a run of `duration`; `None`: it never does.
fn shortest_amnesia(scenario: &Scenario, duration: Duration) -> Option<Duration> {
    let wipe = |f: &FaultSpec| matches!(f, FaultSpec::RestartWipe {});
    let recipe = scenario
        .recipe
        .iter()
        .filter(|r| r.faults.iter().any(wipe))
        .map(|r| {
            // As the window generator draws it: at least `on.lo` of the run, at most `max_on`.
            let lo = Duration::from_millis(
                (duration.as_millis().min(u128::from(u64::MAX)) as f64
                    * r.window.on.lo.clamp(0.0, 1.0)) as u64,
            );
            lo.min(r.window.max_on)
        });
    let timeline = scenario
        .timeline
        .iter()
        .flatten()
        .filter(|t| wipe(&t.fault))
        .map(|t| match t.repeat {
            Some(r) => r.lasting,
            None => t
                .end
                .resolve(duration)
                .saturating_sub(t.start.resolve(duration)),
        });
    recipe.chain(timeline).min()
}

/// The shortest run in which `scenario` can show what it must (zero for the expectations
/// judged on whatever the run did), in whole seconds.
pub fn minimum_duration(scenario: &Scenario, workers: usize, ttl: Duration) -> Duration {
    if promises(scenario.expectation) {
        return round_up_to_second(amnesia_minimum(scenario, ttl));
    }
    let Expectation::MustShow(anomaly) = scenario.expectation else {
        return Duration::ZERO;
    };
    let mut minimum = Duration::ZERO;
    if scenario.amnesia_split {
        minimum = minimum.max(split_minimum(ttl));
    }
    if scenario.pause_rate > 0.0 && anomaly == Anomaly::LostUpdate {
        minimum = minimum.max(pause_minimum(scenario.pause_rate, workers, ttl));
    }
    round_up_to_second(minimum)
}

/// The fixed work of each section, if it has one.
fn section_work(scenario: &Scenario, run_work: Duration) -> Option<Duration> {
    match scenario.work {
        Work::Fixed(d) => Some(d),
        Work::Run => Some(run_work),
        // Works up to a share of whatever validity the grant had, or several TTLs.
        Work::ToValidity | Work::Renewed => None,
    }
}

/// `amnesia-split`: the `none` victim may be served last. Before its restart come one per
/// other mode, each inside a victim lease ([`SPLIT_TTL`], or the run's TTL when longer)
/// and followed by [`COOLDOWN`]; its own restart needs one more lease. (modes + 1) ×
/// (lease + cool-down) is 20 s with the defaults, the length the every-scenario tests
/// pass with; 6 s (local) and 8 s (Docker) runs were seen blind.
pub fn split_minimum(ttl: Duration) -> Duration {
    let lease = SPLIT_TTL.max(ttl);
    let modes = u32::try_from(Mode::ALL.len()).unwrap_or(u32::MAX);
    lease
        .saturating_add(COOLDOWN)
        .saturating_mul(modes.saturating_add(1))
}

/// `client-pause`: every worker pauses within its first `1/rate` sections, so once its
/// mode has completed `workers × (1/rate − 1) + 1` sections one of them has paused (they
/// share the lock, in any order); at [`SLOWEST_PAUSED_SECTIONS_PER_SEC`] that takes
/// this long at worst, and the longest pause ([`PAUSE_TTLS`] × `ttl`) then has to end for
/// the stale write.
pub fn pause_minimum(rate: f64, workers: usize, ttl: Duration) -> Duration {
    let per_worker = (1.0 / rate).ceil();
    let sections = workers as f64 * (per_worker - 1.0) + 1.0;
    Duration::try_from_secs_f64(sections / SLOWEST_PAUSED_SECTIONS_PER_SEC)
        .unwrap_or(Duration::MAX)
        .saturating_add(ttl.mul_f64(PAUSE_TTLS.1))
}

fn round_up_to_second(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0)))
}

fn whole_ms(d: Duration) -> Duration {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(ms.saturating_add(u64::from(!d.subsec_nanos().is_multiple_of(1_000_000))))
}

fn fmt(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::find;

    fn shape(secs: u64, nodes: usize, workers: usize) -> Shape {
        Shape {
            duration: Duration::from_secs(secs),
            nodes,
            workers,
        }
    }

    const TTL: Duration = Duration::from_millis(200);
    const WORK: Duration = Duration::from_millis(5);

    #[test]
    fn the_default_suite_fits_the_default_run() {
        for s in crate::scenario::SCENARIOS.iter() {
            check(s, &shape(20, 5, 3), TTL, WORK).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert!(
                minimum_duration(s, 3, TTL) <= Duration::from_secs(20),
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn must_show_scenarios_name_their_minimum() {
        let split = find("amnesia-split").expect("built-in");
        assert_eq!(minimum_duration(split, 3, TTL), Duration::from_secs(20));
        let e = check(split, &shape(20, 4, 3), TTL, WORK).expect_err("even nodes");
        assert!(e.contains("--nodes 5"), "{e}");
        let pause = find("client-pause").expect("built-in");
        assert!(minimum_duration(pause, 3, TTL) > Duration::from_secs(1));
        let e = check(pause, &shape(20, 5, 1), TTL, WORK).expect_err("one worker");
        assert!(e.contains("--workers 2"), "{e}");
        // A longer lease means longer pauses.
        assert!(minimum_duration(pause, 3, Duration::from_secs(10)) > Duration::from_secs(30));
        let kill = find("kill-minority").expect("built-in");
        assert_eq!(minimum_duration(kill, 3, TTL), Duration::ZERO);
    }

    #[test]
    fn amnesia_judged_as_safe_keeps_its_node_out_longer_than_the_ttl() {
        let amnesia = find("amnesia-restart").expect("built-in");
        // 1.5 × 200 ms over the windows' smallest share of the run, 5 %.
        assert_eq!(minimum_duration(amnesia, 3, TTL), Duration::from_secs(6));
        assert!(check(amnesia, &shape(6, 5, 3), TTL, WORK).is_ok());
        // No run is long enough when the windows' 1.5 s cap is under 1.5 × the TTL.
        let e = check(
            amnesia,
            &shape(600, 5, 3),
            Duration::from_millis(1100),
            WORK,
        )
        .expect_err("ttl 1.1 s");
        assert!(e.contains("use --ttl 1s or less"), "{e}");
        // Where violations are allowed, nothing is asked.
        let mut allowed = amnesia.clone();
        allowed.expectation = Expectation::MayViolateFencingHolds;
        assert_eq!(minimum_duration(&allowed, 3, TTL), Duration::ZERO);
    }

    #[test]
    fn sections_must_fit_in_the_lease() {
        let kill = find("kill-minority").expect("built-in");
        let e = check(kill, &shape(20, 5, 3), Duration::from_millis(6), WORK).expect_err("6 ms");
        assert!(e.contains("--ttl 13ms or more"), "{e}");
        let jumps = find("clock-jump-majority").expect("built-in");
        assert!(check(jumps, &shape(20, 5, 3), Duration::from_millis(100), WORK).is_err());
    }
}
