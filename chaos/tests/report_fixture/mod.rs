//! A realistic synthetic [`ChaosReport`] for the renderer tests: a minute of three modes
//! contending for one lock among five workers, with node and client faults, refused writes,
//! exclusion violations and lost increments — deterministic (a fixed LCG), no cluster.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use redlock_chaos::report::{
    ChaosReport, CounterSample, Culprit, FaultWindow, GrantSpan, LatencySample, LostUpdate,
    ModeReport, ModeTimeline, Ms, Outcome, PauseSpan, RejectedWrite, ScenarioReport, Verdict,
    ViolationMark,
};

pub const MODES: [&str; 3] = ["none", "write_only", "claim_first"];
pub const WORKERS: usize = 5;
/// A name that must come out escaped.
pub const EVIL_NAME: &str = "stall<script>alert('x')</script>";

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn faults(failing: bool) -> Vec<FaultWindow> {
    let f = |kind: &str, detail: &str, targets: &[&str], start_ms, end_ms| FaultWindow {
        kind: kind.into(),
        detail: detail.into(),
        targets: targets.iter().map(|t| t.to_string()).collect(),
        start_ms,
        end_ms,
    };
    let mut v = vec![
        f("freeze", "SIGSTOP", &["n1"], 8_000, Some(16_000)),
        f(
            "partition",
            "both ways",
            &["n3", "n4"],
            24_000,
            Some(33_000),
        ),
        f("slow", "+50ms ±10ms", &["n2"], 36_000, Some(44_000)),
        f("client-stall", "pause 2s", &["w2"], 46_000, Some(48_000)),
    ];
    if failing {
        v.push(f(
            "clock-jump",
            "offset +20s",
            &["n0", "n1", "n2"],
            12_000,
            Some(20_000),
        ));
        v.push(f("kill", "SIGKILL", &["n0"], 52_000, None));
    }
    v
}

fn in_fault(faults: &[FaultWindow], t_ms: u64) -> bool {
    faults
        .iter()
        .any(|f| f.start_ms <= t_ms && f.end_ms.is_none_or(|e| t_ms < e))
}

fn mode(
    rng: &mut Lcg,
    name: &str,
    grants: usize,
    duration_ms: u64,
    faults: &[FaultWindow],
    failing: bool,
) -> (ModeReport, ModeTimeline) {
    let mut t = ModeTimeline::default();
    let step_us = duration_ms * 1000 / grants.max(1) as u64;
    let (mut sections, mut value) = (0i64, 0i64);
    let (mut attempts, mut failures, mut stalls) = (0u64, 0u64, 0u64);
    let mut lat_ok = Vec::new();
    for (i, fence) in (0..grants).zip(1u64..) {
        let at = i as u64 * step_us + rng.below(step_us / 4 + 1);
        let at_ms = at / 1000;
        let faulty = in_fault(faults, at_ms);
        // A failed attempt or two before most grants while faults are active.
        if faulty && rng.below(3) == 0 {
            attempts += 1;
            failures += 1;
            let lat = 20_000 + rng.below(400_000);
            t.acquire.push(LatencySample {
                at_ms: Ms(at.saturating_sub(lat / 2)),
                latency_us: lat,
                ok: false,
            });
        }
        let lat = if faulty {
            2_000 + rng.below(60_000)
        } else {
            400 + rng.below(1_600)
        } + rng.below(100);
        attempts += 1;
        lat_ok.push(lat);
        t.acquire.push(LatencySample {
            at_ms: Ms(at),
            latency_us: lat,
            ok: true,
        });
        let worker = rng.below(WORKERS as u64) as usize;
        let hold = step_us * 6 / 10;
        // Stale tokens show up in the fenced modes during the client stall.
        let stale = name != "none" && faulty && rng.below(40) == 0;
        if stale {
            stalls += 1;
            t.rejected.push(RejectedWrite {
                worker,
                fence: Some(fence),
                at_ms: Ms(at + hold),
            });
        } else {
            sections += 1;
            value += 1;
        }
        t.grants.push(GrantSpan {
            worker,
            fence: Some(fence),
            start_ms: Ms(at),
            end_ms: Ms(at + hold),
            valid_until_ms: Ms(at + 10_000_000),
            accepted: !stale,
            done_ms: Ms(at + hold),
            abandoned: false,
            stale: false,
        });
        if i % 10 == 0 {
            t.counter.push(CounterSample {
                at_ms: Ms(at + hold),
                value,
                expected: sections,
            });
        }
    }
    if failing && name == "none" {
        // Two overlapping holds during the clock jump: a violation, and increments lost.
        for (k, (a, b)) in [(1usize, 3usize), (0, 4)].into_iter().enumerate() {
            let from = 14_000_000 + k as u64 * 3_000_000;
            t.violations.push(ViolationMark {
                first_worker: a,
                second_worker: b,
                from_ms: Ms(from),
                to_ms: Ms(from + 250_000),
            });
        }
        // A worker paused while holding, and wrote after its lease ended.
        t.pauses.push(PauseSpan {
            worker: 2,
            from_ms: Ms(13_900_000),
            to_ms: Some(Ms(14_400_000)),
        });
        if let Some(g) = t.grants.iter_mut().find(|g| g.start_ms.0 > 13_500_000) {
            g.valid_until_ms = Ms(g.start_ms.0 + 200_000);
            g.done_ms = Ms(g.start_ms.0 + 900_000);
            g.stale = true;
        }
        value -= 7;
        // The paused write erased the next holder's, which in turn had erased one more.
        t.lost_updates.push(LostUpdate {
            section: 1_000_041,
            worker: 1,
            value: 87,
            written_us: 14_100_000,
            stale: false,
            culprit: Some(Culprit {
                section: 2_000_040,
                worker: Some(2),
                read_value: 86,
                written_us: Some(14_800_000),
                stale: true,
                after_stale: None,
            }),
        });
        if let Some(last) = t.counter.last_mut() {
            last.value = value;
        }
        for c in t.counter.iter_mut().filter(|c| c.at_ms.0 > 15_000_000) {
            c.value -= if c.at_ms.0 > 18_000_000 { 7 } else { 3 };
        }
    }
    lat_ok.sort_unstable();
    let pct = |p: f64| {
        lat_ok
            .get(((lat_ok.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    let m = ModeReport {
        lock: "ours".into(),
        sections: sections as u64,
        lost: Some(sections - value),
        rejected: t.rejected.len() as u64,
        exclusion_violations: t.violations.len() as u64,
        longest_overlap_us: t
            .violations
            .iter()
            .map(|v| v.to_ms.0 - v.from_ms.0)
            .max()
            .unwrap_or(0),
        acquire_attempts: attempts,
        acquire_failures: failures,
        acquire_errors: failures / 3,
        acquire_p50_us: pct(0.5),
        acquire_p99_us: pct(0.99),
        stalls,
        final_value: Some(value),
        abandoned: 0,
        stale_writes: t.grants.iter().filter(|g| g.stale).count() as u64,
        fence_regressions: 0,
        pauses: t.pauses.len() as u64,
        idle_fault_windows: 0,
        stale_reach: t.grants.iter().filter(|g| g.stale).count() as u64,
        unexplained_losses: Some(0),
        indeterminate_writes: 0,
        server_truth: Default::default(),
        validity_cuts: 0,
        leaks: Default::default(),
        recovery: Default::default(),
        loss_heard: Default::default(),
        hand_offs: Default::default(),
        take_overs: Default::default(),
        late_retirements: None,
    };
    (m, t)
}

/// A scenario; `failing` adds a clock jump, violations and lost increments in `none`, and
/// an unhealed kill.
pub fn scenario(name: &str, seed: u64, grants_per_mode: usize, failing: bool) -> ScenarioReport {
    let duration_ms = 60_000;
    let faults = faults(failing);
    let mut rng = Lcg(seed);
    let mut modes = BTreeMap::new();
    let mut timeline = BTreeMap::new();
    for m in MODES {
        let (r, t) = mode(&mut rng, m, grants_per_mode, duration_ms, &faults, failing);
        modes.insert(m.to_string(), r);
        timeline.insert(m.to_string(), t);
    }
    let verdict = if failing {
        Verdict {
            outcome: Outcome::Fail,
            reasons: vec![
                "none: 7 increments lost and 2 exclusion violations (expected: 0 lost, 0 violations)".into(),
                "claim_first lost 0 (met)".into(),
                "fault kill on n0 was never healed".into(),
            ],
            failed_modes: vec!["none".into()],
        }
    } else {
        Verdict {
            outcome: Outcome::Pass,
            reasons: vec![
                "no exclusion violation, nothing lost in any mode (met)".into(),
                "acquires succeeded during the faults (met)".into(),
            ],
            failed_modes: Vec::new(),
        }
    };
    ScenarioReport {
        name: name.into(),
        about: "SIGSTOP a random minority, partition two nodes, add latency, stall a client & see"
            .into(),
        expected: "safe and available".into(),
        seed,
        duration_ms,
        clients: "per-worker".into(),
        faults,
        modes,
        verdict,
        timeline,
        history: Some(format!("history/000-{name}.jsonl")),
        quorum_probe: None,
        ops: Vec::new(),
        evidence: None,
        evidence_json: None,
    }
}

/// A run of `n` scenarios (the second one fails, with [`EVIL_NAME`] as its name).
pub fn report(n: usize, grants_per_mode: usize) -> ChaosReport {
    let scenarios: Vec<ScenarioReport> = (0..n)
        .map(|i| match i {
            1 => scenario(EVIL_NAME, 77, grants_per_mode, true),
            _ => scenario(
                &format!("pause-minority-{i}"),
                1000 + i as u64,
                grants_per_mode,
                false,
            ),
        })
        .collect();
    let verdict = scenarios
        .iter()
        .fold(Outcome::Pass, |o, s| o.worst(s.verdict.outcome));
    ChaosReport {
        schema: redlock_chaos::run::SCHEMA,
        run_id: "r-test-0001".into(),
        seed: 42,
        backend: "docker".into(),
        lock: "ours".into(),
        flavour: "valkey".into(),
        server_version: "valkey 8.1.8".into(),
        nodes: 5,
        images: vec![redlock_chaos::report::RunImage {
            role: "server".into(),
            name: "valkey/valkey:8".into(),
            id: "sha256:5f0e4c4be4d4e7b3a5a4c3f9a0d6a51e0a1c9c27f1e0ad2bb1d7d31a8a1e9c0f".into(),
            source: "official".into(),
        }],
        started_at: "2025-01-01T03:00:00Z".into(),
        command: "chaos run --scenario all --duration 60s --report target/chaos/nightly".into(),
        scenarios,
        verdict,
    }
}
