//! Which scenarios a run plays, for how long, with which seeds.
//!
//! Two suites, both for [`DEFAULT_DURATION`] per scenario, in the order `chaos scenarios`
//! lists them:
//! - the DEFAULT SUITE (`chaos run` with no flags, `scripts/chaos`, `--scenario default`):
//!   every named scenario but the [`NIGHTLY_ONLY`] ones, 18 × 20 s of faults plus set-up —
//!   386 s on the docker backend of a 2-core machine, 686 s for `scripts/chaos` from a
//!   fresh clone with its release build (2026-12-06; docs/rig.md, "Time");
//! - the NIGHTLY SUITE (`--scenario all`: the nightly workflow, the local end-to-end run of
//!   `scripts/test`): every named scenario, 25 × 20 s — with 20, 429-432 s on the docker
//!   backend of a 2-core machine (2026-12-05).
//!
//! The default suite must fit, with a release build from a fresh clone, in 12 minutes on
//! such a machine: with all 20, `scripts/chaos` took 930 s one morning and 684 s one
//! afternoon (a 249 s build, 429 s of scenarios; deps already installed), too close to
//! the limit on a slow day. New scenarios go last, so that the others keep their seeds in a
//! seeded run ([`scenario_seed`], which counts positions in the full list whichever suite
//! runs). 20 s is long
//! enough for every recipe to lay several fault windows (the shortest, amnesia, lasts
//! 2–5 % of the run = 0.4–1 s, still beyond a 200 ms TTL) and for thousands of sections
//! per mode; `--duration` scales every recipe (they are fractions of the run).
//!
//! The clock scenarios (`clock-jump`, `clock-jump-majority`, `clock-skew-majority`,
//! `clock-skew-fast`, `amnesia-split-stepped`) need libfaketime, which Debian's jemalloc Redis cannot load: with
//! `--flavour redis` they are left out of `all` (and refused when named).

use std::time::Duration;

use crate::cluster::Flavour;
use crate::scenario::{SCENARIOS, Scenario};

/// Length of each scenario of either suite.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(20);

/// The scenarios only the nightly suite (`all`) plays. Each of them but the last three checks
/// again what scenarios of the default suite check already, and is not the only scenario
/// that caught a mutant of the lock (docs/mutants.md):
/// - `latency-majority`: slow votes on a quorum, inside the node deadline — the lock holds
///   as under `connection-majority` and `renewal-majority`, which also slow or stop a quorum;
/// - `clock-jump`: one node's clock jumps — its forward jump is one node's amnesia within
///   the TTL, which `amnesia-split` and `clock-jump-majority` push further;
/// - `clock-skew-fast`: a quorum's clocks 10 % fast, past the drift allowance — holders may
///   overlap there and are only reported; `clock-skew-majority` judges the skew that must hold;
/// - `mixed`: the minority faults one after another, each with a scenario of its own;
/// - `slow-client-race`: the only scenario that reaches `fence-ahead-counted` (a token
///   handed out twice), which a library test (`fence_tokens.rs`) also catches; nightly
///   because the default suite's 12 minutes have no room left (docs/rig.md, "Time");
/// - `retire-late`: the only scenario that reaches `retire-fence-unconditional` (a late
///   retirement deleting the next holder's counter), which a library test
///   (`fence_counters.rs`) also catches; nightly for the same reason.
/// - `amnesia-split-stepped`: `amnesia-split` with the emptied node's clock stepped after
///   each restart, so its uptime misleads the restart quarantine (issue 48); it judges the
///   guarded lock (`--lock ours-guarded`, which its own end-to-end test plays), while the
///   default suite's `--lock ours` can only be shown the split `amnesia-split` shows
///   already. Nightly for the same 12 minutes.
pub const NIGHTLY_ONLY: &[&str] = &[
    "latency-majority",
    "clock-jump",
    "clock-skew-fast",
    "mixed",
    "slow-client-race",
    "retire-late",
    "amnesia-split-stepped",
];

/// Whether the scenario `name` is one of the [`NIGHTLY_ONLY`] ones.
pub fn nightly_only(name: &str) -> bool {
    NIGHTLY_ONLY.contains(&name)
}

/// The names of whole suites that `--scenario` takes besides scenario names.
pub const SUITES: &[&str] = &["default", "all"];

/// Whether `spec` names a whole suite (`default`, `all`) rather than scenarios.
pub fn is_suite(spec: &str) -> bool {
    SUITES.contains(&spec.trim())
}

/// Scenarios for `--scenario` (`default`, `all`, or names separated by commas), for
/// `flavour`.
///
/// # Errors
/// A message naming the unknown scenario and the known ones, or why one cannot run.
pub fn select(spec: &str, flavour: Flavour) -> Result<Vec<Scenario>, String> {
    let runnable = |s: &Scenario| !s.needs_clock_faults() || flavour.supports_clock_faults();
    // An empty value is a mistake (an unset variable in a script), not a way to say `all`.
    if spec.trim().is_empty() {
        return Err(
            "--scenario is empty: name scenarios (see `chaos scenarios`), `default` or `all`, or leave the flag out"
                .into(),
        );
    }
    if is_suite(spec) {
        let every = spec.trim() == "all";
        return Ok(SCENARIOS
            .iter()
            .filter(|s| runnable(s) && (every || !nightly_only(&s.name)))
            .cloned()
            .collect());
    }
    let mut out = Vec::new();
    for name in spec.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let s = crate::scenario::find(name).ok_or_else(|| {
            let known: Vec<&str> = SCENARIOS.iter().map(|s| s.name.as_str()).collect();
            format!(
                "unknown scenario {name:?}; use one of {}, or a suite: default or all",
                known.join(", ")
            )
        })?;
        if !runnable(s) {
            return Err(format!(
                "{name} needs clock faults, which {flavour} cannot do; use --flavour valkey"
            ));
        }
        if !out.iter().any(|o: &Scenario| o.name == s.name) {
            out.push(s.clone());
        }
    }
    if out.is_empty() {
        return Err("no scenario named; use --scenario default, all or a name".into());
    }
    Ok(out)
}

/// The seed of `scenario` in a run seeded `seed`: its own [`Scenario::seed`] when it has
/// one; for a built-in (unchanged), derived from its position in [`SCENARIOS`], so
/// `--scenario X --seed S` repeats scenario X of the full suite; for any other scenario
/// (a file's), derived from its name.
pub fn scenario_seed(seed: u64, scenario: &Scenario) -> u64 {
    if let Some(own) = scenario.seed {
        return own;
    }
    match SCENARIOS.iter().position(|s| s == scenario) {
        Some(pos) => mix(seed, pos as u64),
        None => mix(seed, name_hash(&scenario.name)),
    }
}

/// FNV-1a of `name`: stable across builds and platforms (unlike `DefaultHasher`).
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// SplitMix64 of `seed` and `n`: decorrelated seeds for siblings.
pub fn mix(seed: u64, n: u64) -> u64 {
    let mut z = seed ^ n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_and_names() {
        assert_eq!(
            select("all", Flavour::Valkey).expect("all").len(),
            SCENARIOS.len()
        );
        assert_eq!(
            select("all", Flavour::Redis).expect("all").len(),
            // clock-jump, clock-jump-majority, clock-skew-majority, clock-skew-fast,
            // amnesia-split-stepped.
            SCENARIOS.len() - 5
        );
        assert!(
            select(" ", Flavour::Valkey)
                .expect_err("empty")
                .contains("all")
        );
        let two = select("latency, kill-minority,latency", Flavour::Valkey).expect("names");
        assert_eq!(
            two.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["latency", "kill-minority"]
        );
        assert!(
            select("nope", Flavour::Valkey)
                .expect_err("unknown")
                .contains("kill-minority")
        );
        for clock in ["clock-jump", "amnesia-split-stepped"] {
            assert!(
                select(clock, Flavour::Redis)
                    .expect_err("redis")
                    .contains("valkey"),
                "{clock}"
            );
        }
    }

    #[test]
    fn the_default_suite_is_all_but_the_nightly_only_scenarios_in_order() {
        let names = |spec| {
            select(spec, Flavour::Valkey)
                .expect("a suite")
                .into_iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
        };
        let all = names("all");
        let default = names(" default ");
        for n in NIGHTLY_ONLY {
            assert!(all.iter().any(|a| a == n), "{n} is no scenario");
        }
        assert_eq!(default.len(), all.len() - NIGHTLY_ONLY.len());
        let expected: Vec<String> = all
            .iter()
            .filter(|a| !NIGHTLY_ONLY.contains(&a.as_str()))
            .cloned()
            .collect();
        assert_eq!(default, expected);
        // The canaries and the scenarios that alone caught a mutant stay in the default.
        for n in [
            "client-pause",
            "amnesia-split",
            "clock-jump-majority",
            "pause-minority",
            "renewal",
            "renewal-majority",
            "clock-skew-majority",
            "renewal-forget",
            "task-pause",
            "renewal-flaps",
        ] {
            assert!(default.iter().any(|d| d == n), "{n} left the default suite");
        }
        assert!(is_suite("default") && is_suite(" all") && !is_suite("mixed"));
        // A suite on Redis: the clock scenarios leave it.
        assert_eq!(
            select("default", Flavour::Redis).expect("default").len(),
            default.len() - 2
        );
    }

    #[test]
    fn seeds_depend_on_run_seed_and_scenario_only() {
        let a = &SCENARIOS[0];
        let b = &SCENARIOS[1];
        assert_eq!(scenario_seed(7, a), scenario_seed(7, a));
        assert_ne!(scenario_seed(7, a), scenario_seed(7, b));
        assert_ne!(scenario_seed(7, a), scenario_seed(8, a));
        // A file's copy: the same scenario gets the same seed; an edited one its own.
        assert_eq!(scenario_seed(7, &a.clone()), scenario_seed(7, a));
        let mut edited = a.clone();
        edited.about = "edited".into();
        assert_ne!(scenario_seed(7, &edited), scenario_seed(7, a));
        assert_eq!(scenario_seed(7, &edited), scenario_seed(7, &edited.clone()));
        edited.seed = Some(99);
        assert_eq!(scenario_seed(7, &edited), 99);
    }
}
