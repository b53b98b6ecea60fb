//! The built-in scenarios, as data: what `chaos scenarios` lists and `chaos run` plays by
//! default, in that order. `chaos scenarios --json` prints them in the file format.
//!
//! Every recipe lays its faults on windows (non-overlapping, between a quiet first and last
//! 10 % of the run), so at most one fault is in effect at a time and the run both starts
//! and ends with a healthy cluster.

use std::time::Duration;

use super::model::{
    At, Clients, ClockStep, FaultSpec, Fractions, Proxied, Recipe, Repeat, TargetRule, TimedFault,
    ValueRange, WindowSpec, Work,
};
use super::{Anomaly, Expectation, Scenario};
use crate::nemesis::PartitionVia;

/// `client-pause`: share of sections that pause (one every 5-15 sections of a worker,
/// the first within 10). Each pause stalls its mode's lock for about a TTL, so a mode
/// manages 5-80 sections a second depending on the machine's load: this gives tens of
/// pauses per minute either way, each 300-600 ms with a 200 ms TTL.
pub const CLIENT_PAUSE_RATE: f64 = 0.1;

/// Section work of the clock scenarios: half a 200 ms TTL, so a holder is still working
/// when keys expire early under it and a second holder gets in.
pub const LONG_WORK: Duration = Duration::from_millis(100);

fn window(on: (f64, f64), off: (f64, f64), max_on: Duration) -> WindowSpec {
    let f = |(lo, hi)| Fractions { lo, hi };
    WindowSpec {
        on: f(on),
        off: f(off),
        max_on,
    }
}

/// Faults of a few seconds with similar gaps.
fn regular() -> WindowSpec {
    window((0.08, 0.2), (0.05, 0.12), Duration::from_secs(60))
}

/// 100-800 ms, ± 20 %.
const SLOW: FaultSpec = FaultSpec::Slow {
    latency_ms: ValueRange::new(100, 800),
    jitter_pct: 20,
    connections_pct: 100,
    both_ways: false,
};

/// 20-60 s forward.
const JUMP: FaultSpec = FaultSpec::ClockJump {
    offset_s: ValueRange::new(20, 60),
};

/// 20-60 s back.
const JUMP_BACK: FaultSpec = FaultSpec::ClockJump {
    offset_s: ValueRange::new(-60, -20),
};

/// A clock 1 % fast: keys expire early by 1 % of their TTL, inside the lock's drift
/// allowance (1 % of the TTL + 2 ms).
const SKEW_1PCT: FaultSpec = FaultSpec::ClockSkew {
    rate_ppm: ValueRange::new(10_000, 10_000),
};

/// A clock 10 % fast: keys expire early by 9 % of their TTL, far past the allowance.
const SKEW_10PCT: FaultSpec = FaultSpec::ClockSkew {
    rate_ppm: ValueRange::new(100_000, 100_000),
};

const PARTITION: FaultSpec = FaultSpec::Partition {
    via: PartitionVia::Proxy,
};

/// The faults on the lock's own connections ([`crate::nemesis::connection`]).
const CONNECTION: [FaultSpec; 4] = [
    FaultSpec::ResetPeer {},
    FaultSpec::Slicer {},
    FaultSpec::LimitData {},
    FaultSpec::MuteReplies {},
];

fn recipe(faults: &[FaultSpec], targets: TargetRule, window: WindowSpec) -> Option<Recipe> {
    Some(Recipe {
        faults: faults.to_vec(),
        targets,
        window,
    })
}

fn scenario(name: &str, about: &str, expectation: Expectation, recipe: Option<Recipe>) -> Scenario {
    Scenario {
        name: name.into(),
        about: about.into(),
        expectation,
        work: Work::Run,
        pause_rate: 0.0,
        amnesia_split: false,
        split_clock_step: None,
        late_retire: false,
        clients: Clients::PerWorker,
        proxied: Proxied::All,
        ttl: None,
        seed: None,
        // No recipe: no scheduled faults, an empty timeline.
        timeline: recipe.is_none().then(Vec::new),
        recipe,
    }
}

/// Every built-in scenario, in the order `chaos scenarios` lists them.
pub fn builtins() -> Vec<Scenario> {
    use Expectation::*;
    use TargetRule::*;
    vec![
        scenario(
            "kill-minority",
            "SIGKILL a random minority, start it again with its AOF; repeat",
            SafeAndAvailable,
            recipe(&[FaultSpec::Kill {}], Minority, regular()),
        ),
        scenario(
            "pause-minority",
            "freeze (SIGSTOP / docker pause) a random minority, then thaw; repeat",
            SafeAndAvailable,
            recipe(&[FaultSpec::Freeze {}], Minority, regular()),
        ),
        scenario(
            "partition-minority",
            "cut workers off a random minority at its proxy, then repair; repeat",
            SafeAndAvailable,
            recipe(&[PARTITION], Minority, regular()),
        ),
        Scenario {
            // Sections work until shortly before their validity ends: slow acquires must
            // shorten them.
            work: Work::ToValidity,
            ..scenario(
                "latency",
                "100-800 ms (±20 %) reply latency on a random minority (slow acquires); repeat",
                SafeAndAvailable,
                recipe(&[SLOW], Minority, regular()),
            )
        },
        // Replies of a quorum slowed, but within the 20 ms node deadline, so the grant
        // counts slow votes: a validity counted from the replies rather than the send
        // outlasts the keys by the reply latency, which server truth sees.
        scenario(
            "latency-majority",
            "5-15 ms (±20 %) reply latency on a quorum of nodes (votes still inside the node deadline); repeat",
            LockHolds,
            recipe(
                &[FaultSpec::Slow {
                    latency_ms: ValueRange::new(5, 15),
                    jitter_pct: 20,
                    connections_pct: 100,
                    both_ways: false,
                }],
                Majority,
                regular(),
            ),
        ),
        // The lock's own connections: the pipelined transport must keep every reply with
        // its request through resets, split and truncated replies, and muted replies.
        // A mode's workers share one client, so their requests overlap in each pipeline.
        Scenario {
            clients: Clients::Shared,
            ..scenario(
                "connection-minority",
                "a random minority's connections (shared by a mode's workers): reset mid-pipeline, replies split or cut off, or replies muted; repeat",
                SafeAndAvailable,
                recipe(&CONNECTION, Minority, regular()),
            )
        },
        // Most acquires fail while a majority's connections are broken: nothing to judge
        // of availability, but the lock must hold.
        Scenario {
            clients: Clients::Shared,
            ..scenario(
                "connection-majority",
                "the same connection faults on a quorum of nodes at once, a few seconds each; repeat",
                LockHolds,
                recipe(
                    &CONNECTION,
                    Majority,
                    window((0.04, 0.1), (0.05, 0.1), Duration::from_secs(10)),
                ),
            )
        },
        // Extends and background renewal under faults: a minority's must not cost the
        // lease; shortening and lengthening extends come first in two sections of three.
        Scenario {
            work: Work::Renewed,
            ..scenario(
                "renewal",
                "sections of 2-5 × TTL under auto_renew (extend_for half or twice the TTL, asked within half a TTL of the grant); one minority fault after another, connection faults included",
                LockHolds,
                recipe(
                    &[
                        FaultSpec::Kill {},
                        FaultSpec::Freeze {},
                        PARTITION,
                        SLOW,
                        FaultSpec::ResetPeer {},
                        FaultSpec::MuteReplies {},
                    ],
                    Minority,
                    window((0.05, 0.12), (0.03, 0.08), Duration::from_secs(30)),
                ),
            )
        },
        // Renewals fail while a majority is gone: the holder must hear it (lost()) before
        // its keys are gone, and stop writing.
        Scenario {
            work: Work::Renewed,
            ..scenario(
                "renewal-majority",
                "sections of 2-5 × TTL under auto_renew; a quorum of nodes killed, frozen, cut off or muted for a few seconds; repeat",
                LockHolds,
                recipe(
                    &[
                        FaultSpec::Kill {},
                        FaultSpec::Freeze {},
                        PARTITION,
                        FaultSpec::MuteReplies {},
                    ],
                    Majority,
                    window((0.04, 0.1), (0.05, 0.1), Duration::from_secs(10)),
                ),
            )
        },
        // One node down for longer than the TTL, back empty: everything it forgot had
        // expired, and its fence counter is behind the others' — the regime the lock's docs
        // promise (a node kept out longer than the TTL). The needs check refuses a run whose
        // windows could be shorter than 1.5 × the TTL. Amnesia within the TTL is
        // `amnesia-split`'s.
        scenario(
            "amnesia-restart",
            "kill one node, keep it down longer than the TTL (0.4-1.5 s), bring it back EMPTY; repeat",
            SafeAndAvailable,
            recipe(
                &[FaultSpec::RestartWipe {}],
                OneOfMinority,
                window((0.05, 0.08), (0.05, 0.1), Duration::from_millis(1500)),
            ),
        ),
        // A forward jump expires that node's keys at once: a lease that counted its vote
        // among a bare quorum (three of five, after a contended round) ends early, like
        // amnesia of one node within the TTL, and a second holder may get in. A backward
        // jump keeps keys alive longer there (a vote that outlives the lease). Tokens must
        // grow either way.
        scenario(
            "clock-jump",
            "one node's clock jumps 20-60 s forward or back for a few seconds (Valkey only); repeat",
            TokensGrow,
            recipe(
                &[JUMP, JUMP_BACK],
                One,
                window((0.03, 0.08), (0.05, 0.12), Duration::from_secs(5)),
            ),
        ),
        // Meant to outlast the lease TTL.
        scenario(
            "client-stall",
            "one worker stalls for 15-30 % of the run (longer than a short TTL); repeat",
            LockHolds,
            recipe(
                &[FaultSpec::ClientStall {}],
                OneWorker,
                window((0.15, 0.3), (0.05, 0.1), Duration::from_secs(120)),
            ),
        ),
        // The workers' own pauses are the faults.
        Scenario {
            pause_rate: CLIENT_PAUSE_RATE,
            ..scenario(
                "client-pause",
                "workers pause (SIGSTOP) right before their write, one in 5-15 sections, 1.5-3 × TTL and until a rival wrote",
                MustShow(Anomaly::LostUpdate),
                None,
            )
        },
        // The victim's grants trigger the faults.
        Scenario {
            amnesia_split: true,
            ..scenario(
                "amnesia-split",
                "worker 0 reaches only a bare majority; on its grants one node of it restarts EMPTY (TTL 3 s, it holds to the end); others gather that node and the rest",
                MustShow(Anomaly::ExclusionViolation),
                None,
            )
        },
        // The holder's keys expire on a majority while it still holds the lock, and the
        // next acquire wins. Each jump bites once, when it starts, so there are many short
        // ones.
        Scenario {
            work: Work::Fixed(LONG_WORK),
            ..scenario(
                "clock-jump-majority",
                "a quorum of nodes' clocks jump 20-60 s forward at once (Valkey only); 100 ms sections; repeat",
                MustShow(Anomaly::ExclusionViolation),
                recipe(
                    &[JUMP],
                    Majority,
                    window((0.02, 0.04), (0.03, 0.06), Duration::from_secs(3)),
                ),
            )
        },
        // Rate skew on a quorum, within the drift allowance: the lock's validity must still end
        // before its keys do, which server truth reads. Sections work up to their validity.
        Scenario {
            work: Work::ToValidity,
            ..scenario(
                "clock-skew-majority",
                "a quorum of nodes' clocks run 1 % fast (inside the drift allowance) for seconds at a time (Valkey; local and Docker); repeat",
                LockHolds,
                recipe(
                    &[SKEW_1PCT],
                    Majority,
                    window((0.15, 0.3), (0.05, 0.1), Duration::from_secs(60)),
                ),
            )
        },
        // Past the allowance: keys on a quorum expire ~18 ms before a 200 ms validity ends,
        // and a holder working to its validity may share the lock. Reported, not failed:
        // no client can see another machine's clock rate. The counters that mint tokens
        // are not clocks: tokens must grow.
        Scenario {
            work: Work::ToValidity,
            ..scenario(
                "clock-skew-fast",
                "a quorum of nodes' clocks run 10 % fast (past the drift allowance) for seconds at a time (Valkey; local and Docker); repeat",
                TokensGrow,
                recipe(
                    &[SKEW_10PCT],
                    Majority,
                    window((0.15, 0.3), (0.05, 0.1), Duration::from_secs(60)),
                ),
            )
        },
        // Once or twice.
        scenario(
            "majority-loss",
            "kill a quorum of nodes for 20-35 % of the run, then start them again",
            UnavailableButSafe,
            recipe(
                &[FaultSpec::Kill {}],
                Majority,
                window((0.2, 0.35), (0.1, 0.2), Duration::from_secs(300)),
            ),
        ),
        // A different minority fault per window.
        scenario(
            "mixed",
            "one minority fault after another: kill, restart, freeze, partition, black hole, latency",
            SafeAndAvailable,
            recipe(
                &[
                    FaultSpec::Kill {},
                    FaultSpec::RestartKeep {},
                    FaultSpec::Freeze {},
                    PARTITION,
                    FaultSpec::BlackHole {},
                    SLOW,
                ],
                Minority,
                window((0.05, 0.12), (0.03, 0.08), Duration::from_secs(30)),
            ),
        ),
        // The servers, not the lock, lose the keys: a quorum of running nodes forgets the
        // lock keys at once (an eviction, an operator's delete), fence counters kept. Holders
        // may overlap until they hear of it (reported), tokens must grow, and a renewed
        // lease must hear it from its renewer at its next renewal, not when its validity
        // runs out ([`crate::checker::renewal`]).
        Scenario {
            work: Work::Renewed,
            ..scenario(
                "renewal-forget",
                "sections of 2-5 × TTL under auto_renew; a quorum of nodes forgets the lock keys at once (eviction; fence counters kept); repeat",
                TokensGrow,
                recipe(
                    &[FaultSpec::Forget {}],
                    Majority,
                    window((0.02, 0.05), (0.05, 0.1), Duration::from_secs(2)),
                ),
            )
        },
        // One task of a process stuck while holding: its siblings share its client, whose
        // record of the lease must stop holding them back at the lease's validity end
        // (`checker::handoff`, take-overs).
        Scenario {
            pause_rate: CLIENT_PAUSE_RATE,
            clients: Clients::Shared,
            ..scenario(
                "task-pause",
                "a mode's workers share one client; a worker's task sleeps right before its write, 1.5-3 × TTL, one in 5-15 sections, and a waiting sibling must get in at its validity end",
                LockHolds,
                None,
            )
        },
        // Last, so that every scenario before it keeps its place, and with it its seed in a
        // seeded run (`suite::scenario_seed`). A quorum's replies muted in flaps shorter
        // than the TTL, tens a run: an extend or renewal asked during a flap lands on the
        // nodes, changes the keys' expiry and hears no answer, so it fails. The lease must
        // then claim no more than the keys give (server truth after each `extend_for`,
        // the renewer's reports). In `renewal-majority` a fault starts every few seconds,
        // so a failed shortening extend is a rare event there.
        Scenario {
            work: Work::Renewed,
            ..scenario(
                "renewal-flaps",
                "sections of 2-5 × TTL under auto_renew; a quorum's replies muted in flaps of 50-150 ms every 100-300 ms (at 20 s), so extends land and go unanswered; repeat",
                LockHolds,
                recipe(
                    &[FaultSpec::MuteReplies {}],
                    Majority,
                    window((0.0025, 0.0075), (0.005, 0.015), Duration::from_millis(150)),
                ),
            )
        },
        slow_client_race(),
        // Worker 0 of each mode retires the fence counter at the end of every section it
        // gets the path for, its requests held at the proxies until its keys are gone
        // (`run::retire`): a retirement that deletes without checking the lock deletes
        // the counters under the next holder, and the grant after starts again at 1.
        Scenario {
            proxied: Proxied::FirstWorker,
            late_retire: true,
            ..scenario(
                "retire-late",
                "worker 0 alone through the proxies ends its sections by retiring the fence counter, the requests held 1.5 × TTL at the proxies, past its keys' end: the retirement must then delete nothing, and tokens grow",
                SafeAndAvailable,
                None,
            )
        },
        amnesia_split_stepped(),
    ]
}

/// The steps of `amnesia-split-stepped`: back by more than a restarted node has run when
/// first asked (well under a second locally, 1-2 s in a container), so its uptime reads
/// negative; forward by a minute or two, so its uptime says it started long before the
/// leases it forgot.
pub const SPLIT_CLOCK_STEP: ClockStep = ClockStep {
    back_s: ValueRange::new(30, 60),
    forward_s: ValueRange::new(60, 120),
};

/// `amnesia-split`, and right after each restart, before any client reaches it, the
/// emptied node's wall clock steps ([`SPLIT_CLOCK_STEP`], [`crate::run::split`]): a lock
/// that dates the node's start from its `uptime_in_seconds` takes a negative uptime for
/// an unknown start, an overstated one for an old start, and counts the empty node's vote
/// at once. The canary shows the split, as in `amnesia-split`; a guarded lock must keep
/// its holders apart through it (`Scenario::within_guards`).
fn amnesia_split_stepped() -> Scenario {
    Scenario {
        amnesia_split: true,
        split_clock_step: Some(SPLIT_CLOCK_STEP),
        ..scenario(
            "amnesia-split-stepped",
            "amnesia-split, and right after each restart, before any client reaches it, that node's wall clock steps 30-60 s back (its uptime reads negative) or 60-120 s forward (its uptime overstated): the first restart back, then each mode's victims seeing the two in turn (Valkey only)",
            Expectation::MustShow(Anomaly::ExclusionViolation),
            None,
        )
    }
}

/// The lease TTL of `slow-client-race`: its delays are timed against the per-node deadline,
/// a tenth of it (100 ms).
pub const RACE_TTL: Duration = Duration::from_secs(1);

/// Worker 0 of each mode alone behind the proxies, slow to reach nodes 2-4, while node 2
/// forgets the lock keys every 10 ms (on N nodes: the first quorum's last node, and the
/// nodes beyond that quorum; the race needs an odd N). Worker 0 wins nodes 0-2 in its first round, with
/// its `SET`s to 3 and 4 still on their way and node 2's reply 60 ms late; node 2 forgets
/// its key; a rival that reaches every node at once takes 2, 3 and 4, reads the same
/// counters, writes the same token and releases before worker 0's `SET`s land on 3 and 4;
/// worker 0's fence writes there then find the counters already at its token. The lock
/// must refuse them (`FenceAhead`); one that counts them hands a token out twice
/// (`fence-ahead-counted`, docs/mutants.md). A forgotten key may let holders overlap
/// (amnesia within the TTL): reported, not failed.
fn slow_client_race() -> Scenario {
    let timed = |fault: FaultSpec, targets: TargetRule, repeat: Option<Repeat>| TimedFault {
        fault,
        targets,
        start: At::Share(0.03),
        end: At::Share(0.97),
        repeat,
    };
    let slow = |latency_ms: u64, both_ways: bool| FaultSpec::Slow {
        latency_ms: ValueRange::new(latency_ms, latency_ms),
        jitter_pct: 0,
        connections_pct: 100,
        both_ways,
    };
    Scenario {
        proxied: Proxied::FirstWorker,
        ttl: Some(RACE_TTL),
        timeline: Some(vec![
            timed(slow(60, false), TargetRule::LastOfFirstQuorum, None),
            timed(slow(45, true), TargetRule::BeyondFirstQuorum, None),
            timed(
                FaultSpec::Forget {},
                TargetRule::LastOfFirstQuorum,
                Some(Repeat {
                    every: Duration::from_millis(10),
                    lasting: Duration::from_millis(2),
                }),
            ),
        ]),
        ..scenario(
            "slow-client-race",
            "worker 0 alone through the proxies, its replies from node 2 60 ms late and its requests and replies to nodes 3-4 45 ms late, while node 2 forgets the lock keys every 10 ms (1 s TTL): a rival gets in between worker 0's two rounds; tokens stay unique and grow",
            Expectation::TokensGrow,
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guards_cover_amnesia_and_clock_jumps_and_nothing_else() {
        let covered: Vec<String> = builtins()
            .into_iter()
            .filter(Scenario::within_guards)
            .map(|s| s.name)
            .collect();
        assert_eq!(
            covered,
            [
                "amnesia-restart",
                "clock-jump",
                "amnesia-split",
                "clock-jump-majority",
                "amnesia-split-stepped"
            ]
        );
    }
}
