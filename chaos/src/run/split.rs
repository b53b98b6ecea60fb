//! `amnesia-split`, Kleppmann's case: a holder that reaches only a bare majority, one node
//! of which restarts empty while it holds the lock.
//!
//! - The VICTIM (worker 0 of every mode) has its own network view: it reaches nodes
//!   `0..quorum` and nothing else (its URLs for the others point at a closed port, so they
//!   refuse at once). Every lease it gets is held on exactly that bare majority.
//! - When a victim reports a grant, the runner restarts node `quorum − 1` EMPTY (no AOF) at
//!   once — event-driven, not hoped-for timing. The victim works to the end of its long
//!   lease ([`SPLIT_TTL`]), so the restart finishes inside it.
//! - The four modes' victims share that one node, and a grant that arrives while it restarts
//!   or settles cannot be served. So the restarts go round the modes: a grant from a mode
//!   that has had more restarts than another mode whose victim has been granted is passed
//!   over, and that node waits for the mode behind ([`serves`]). First come, first served
//!   let one mode's victim miss every restart of a Docker run (2026-12-02: `none` saw no
//!   violation while the other modes saw 2-127).
//! - The other workers see every node: the empty node plus the `N − quorum` nodes the victim
//!   never reached are a majority, and the next of them to try gets the lock while the
//!   victim still holds it. Its token is computed from counters that never saw the victim's,
//!   so duplicates are expected too.
//!
//! Each restart is a fault window on the scenario's fault list (kind `amnesia`), so its
//! length — the time the node was down — is measured in every run.
//!
//! # Stepped clocks (`amnesia-split-stepped`)
//! With a [`ClockStep`], the node's wall clock also steps right after each restart (a VM
//! whose clock NTP corrects once its services are up). Redis and Valkey count
//! `uptime_in_seconds` on the wall clock, so a client that dates the restart from it (the
//! restart quarantine) reads a negative uptime after a step back and an overstated one
//! after a step forward. Each restart then:
//! 1. disables the node's proxy, so that no client of the lock meets the new server before
//!    its step (one that did would read a true uptime of 0 and date the restart right);
//! 2. restarts the node EMPTY — at the offset its clock already had, so the new server's
//!    clock is where the old one's was and no client sees a jump there;
//! 3. steps the clock ([`Steps`]: the run's first restart back; after it, back or forward
//!    in turn for each mode's victims, a mode's first direction and every size drawn from
//!    the seed), checks the node's `TIME`
//!    moved by it and that its `uptime_in_seconds` reads negative (back) or at least the
//!    step (forward) — else the server does not count uptime on the wall clock, the
//!    scenario cannot show what it exists for, and the run says so (unknown);
//! 4. enables the proxy again, whatever happened.
//!
//! A step is a fault window of its own (kind `clock-jump`, from the step to the next one).
//! The clock goes back to the real time once the workers have ended, never under them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::clock::ScenarioClock;
use super::suite::mix;
use crate::cluster::{AnyCluster, Cluster, DataOnRestart, NodeId};
use crate::nemesis::clock_check;
use crate::nemesis::target::quorum;
use crate::report::FaultWindow;
use crate::scenario::ClockStep;
use crate::workload::Mode;

/// Lease TTL of the scenario: longer than a node's restart on either backend (about
/// 0.1-0.5 s locally, 1-2 s for a container), so the second holder gets in within it.
pub const SPLIT_TTL: Duration = Duration::from_secs(3);
/// After a restart, the next one waits this long: the cluster settles and other workers get
/// the lock in between.
pub const COOLDOWN: Duration = Duration::from_secs(1);
/// URL of node `i` as the victim sees it when it cannot reach it: a privileged loopback
/// port nothing listens on, so connecting is refused at once (one port per node: a lock
/// rightly refuses the same server twice).
fn unreachable(i: usize) -> String {
    format!("redis://127.0.0.1:{}/", 1 + i)
}

/// The victim's node URLs: the first `quorum` as given, the rest unreachable.
pub fn victim_view(urls: &[String]) -> Vec<String> {
    let q = quorum(urls.len());
    urls.iter()
        .enumerate()
        .map(|(i, u)| if i < q { u.clone() } else { unreachable(i) })
        .collect()
}

/// The node restarted empty: the last of the victim's bare majority.
pub fn wiped_node(nodes: usize) -> NodeId {
    NodeId(quorum(nodes).saturating_sub(1))
}

/// Whether a victim grant from `mode` gets a restart, given the restarts each mode whose
/// victim has been granted so far has had (`restarts`, by mode, `mode` included): only if
/// no such mode has had fewer.
pub fn serves(restarts: &BTreeMap<usize, u32>, mode: usize) -> bool {
    let mine = restarts.get(&mode).copied().unwrap_or(0);
    restarts.values().all(|&other| other >= mine)
}

/// The steps of a stepped split (module docs, step 3), mode by mode.
#[derive(Debug, Clone)]
pub struct Steps {
    spec: ClockStep,
    seed: u64,
    /// Per mode served so far: whether its first step went back.
    first_back: BTreeMap<usize, bool>,
}

impl Steps {
    /// The steps of `spec` in a scenario seeded `seed`.
    pub fn new(spec: ClockStep, seed: u64) -> Self {
        Steps {
            spec,
            seed,
            first_back: BTreeMap::new(),
        }
    }

    /// The step, in signed seconds, of the `nth` restart (from 0) served to `mode`'s
    /// victim. The run's first restart steps back: a client may meet the node for the first
    /// time after it, and a client new to a node has only its uptime to go by — an
    /// overstated one no client can tell (`fenced_redlock`'s quarantine docs), so a
    /// forward step there would judge the lock on what it does not claim. After that each
    /// mode's victims see back and forward in turn, a mode's first direction drawn from
    /// the seed; each size is drawn from its range by the seed, the mode and `nth`, so a
    /// seeded run repeats its steps for the same order of grants.
    pub fn next(&mut self, mode: usize, nth: u32) -> i64 {
        let opens = self.first_back.is_empty();
        let per_mode = mix(self.seed, mode as u64);
        let first_back = *self
            .first_back
            .entry(mode)
            .or_insert_with(|| opens || StdRng::seed_from_u64(per_mode).random_bool(0.5));
        let back = first_back == nth.is_multiple_of(2);
        let range = if back {
            self.spec.back_s
        } else {
            self.spec.forward_s
        };
        let size = StdRng::seed_from_u64(mix(per_mode, u64::from(nth) + 1))
            .random_range(range.lo..=range.hi.max(range.lo));
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        if back { -size } else { size }
    }
}

/// What a stepped restart did to the node's clock.
struct Stepped {
    /// The step, seconds.
    by: i64,
    /// When the clock file took it, on the scenario clock.
    at: Duration,
    /// `uptime_in_seconds` right after it.
    uptime: i64,
}

/// One restart EMPTY; with `step`, behind a disabled proxy and with the clock stepped by
/// it before the proxy opens again (see the module docs). `offset` is the node's clock
/// offset, moved by the step as soon as the clock file holds it.
async fn restart_empty(
    cluster: &AnyCluster,
    node: NodeId,
    clock: ScenarioClock,
    step: Option<i64>,
    offset: &mut i64,
) -> Result<Option<Stepped>, String> {
    let Some(by) = step else {
        return cluster
            .restart(node, DataOnRestart::Wipe)
            .await
            .map(|()| None)
            .map_err(|e| format!("restarting {node} empty: {e}"));
    };
    let proxy = cluster.proxy().ok_or_else(|| {
        format!("{node} has no proxy to hold clients off until its clock has stepped")
    })?;
    let name = cluster.proxy_name(node);
    proxy
        .disable(&name)
        .await
        .map_err(|e| format!("disabling proxy {name} before the restart: {e}"))?;
    let stepped = restart_and_step(cluster, node, clock, by, offset).await;
    let opened = proxy
        .enable(&name)
        .await
        .map(drop)
        .map_err(|e| format!("enabling proxy {name} after the restart: {e}"));
    let stepped = stepped?;
    opened.map(|()| Some(stepped))
}

/// Steps 2 and 3 of the module docs.
async fn restart_and_step(
    cluster: &AnyCluster,
    node: NodeId,
    clock: ScenarioClock,
    by: i64,
    offset: &mut i64,
) -> Result<Stepped, String> {
    cluster
        .restart(node, DataOnRestart::Wipe)
        .await
        .map_err(|e| format!("restarting {node} empty: {e}"))?;
    let to = offset.saturating_add(by);
    cluster
        .set_clock_offset(node, to)
        .await
        .map_err(|e| format!("stepping {node}'s clock {by:+} s: {e}"))?;
    *offset = to;
    let at = clock.offset(Instant::now());
    let url = cluster.admin_url(node).map_err(|e| e.to_string())?;
    clock_check::expect_offset(&url, to as f64)
        .await
        .map_err(|e| format!("stepping {node}'s clock {by:+} s to {to:+} s: {e}"))?;
    let uptime = clock_check::uptime(&url).await?;
    let misread = if by < 0 { uptime < 0 } else { uptime >= by };
    if !misread {
        return Err(format!(
            "{node}'s clock stepped {by:+} s right after its restart, yet its uptime_in_seconds reads {uptime}: this server does not count its uptime on the wall clock, so the step misleads no client and the scenario shows nothing"
        ));
    }
    Ok(Stepped { by, at, uptime })
}

/// Restarts [`wiped_node`] empty when a victim grant arrives on `grants` (the grant's mode
/// index; at most one restart at a time, then `COOLDOWN`; modes served in turn, see
/// [`serves`]), until `stop` or `until`; with `step`, each restart steps the node's clock
/// (module docs; `seed` draws the steps). Returns the restarts (and steps) as fault
/// windows and the errors met. The node is started again on every exit path, its proxy
/// enabled, and a stepped clock set right once `stop` says the workers have ended.
pub async fn wipe_on_victim_grants(
    cluster: Arc<AnyCluster>,
    mut grants: UnboundedReceiver<usize>,
    clock: ScenarioClock,
    until: Duration,
    stop: CancellationToken,
    step: Option<ClockStep>,
    seed: u64,
) -> (Vec<FaultWindow>, Vec<String>) {
    let node = wiped_node(cluster.nodes());
    let mut faults = Vec::new();
    let mut errors = Vec::new();
    let mut restarts: BTreeMap<usize, u32> = BTreeMap::new();
    let deadline = clock.instant_at(until);
    let mut steps = step.map(|s| Steps::new(s, seed));
    // The node's clock offset, and the window of the step that set it.
    let mut offset = 0i64;
    let mut jump: Option<FaultWindow> = None;
    // Bounded by `until` and `stop`.
    loop {
        let mode = tokio::select! {
            g = grants.recv() => match g { Some(m) => m, None => break },
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(deadline) => break,
        };
        if Instant::now() >= deadline {
            break;
        }
        restarts.entry(mode).or_insert(0);
        if !serves(&restarts, mode) {
            continue;
        }
        let nth = restarts.get(&mode).copied().unwrap_or(0);
        if let Some(n) = restarts.get_mut(&mode) {
            *n = n.saturating_add(1);
        }
        let by = steps.as_mut().map(|s| s.next(mode, nth));
        let start = clock.offset(Instant::now());
        let result = tokio::select! {
            r = restart_empty(&cluster, node, clock, by, &mut offset) => r,
            () = stop.cancelled() => break,
        };
        let end = clock.offset(Instant::now());
        let victim = Mode::ALL.get(mode).map_or("?", |m| m.name());
        let down = (end - start).as_millis();
        let detail = match &result {
            Ok(Some(s)) => format!(
                "restarted empty on the {victim} victim's grant, its clock then stepped {:+} s before any client reached it (uptime_in_seconds {}; {down} ms out of reach)",
                s.by, s.uptime
            ),
            Ok(None) => format!("restarted empty on the {victim} victim's grant ({down} ms down)"),
            Err(e) => format!("restart on the {victim} victim's grant, failed ({down} ms): {e}"),
        };
        faults.push(FaultWindow {
            kind: "amnesia".into(),
            detail,
            targets: vec![node.target()],
            start_ms: ms(start),
            end_ms: Some(ms(end)),
        });
        match result {
            Ok(Some(s)) => {
                // A step's window lasts until the next step (a new server starts where
                // the old one's clock was) or the reset.
                close(&mut jump, s.at, &mut faults);
                jump = Some(FaultWindow {
                    kind: "clock-jump".into(),
                    detail: format!(
                        "offset {offset:+}s: stepped {:+}s right after a restart",
                        s.by
                    ),
                    targets: vec![node.target()],
                    start_ms: ms(s.at),
                    end_ms: None,
                });
            }
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
        tokio::select! {
            () = tokio::time::sleep(COOLDOWN) => {}
            () = stop.cancelled() => break,
        }
        // Grants that came during the restart or the cooldown are stale triggers; their
        // modes wait for a turn.
        while let Ok(m) = grants.try_recv() {
            restarts.entry(m).or_insert(0);
        }
    }
    // Whatever happened above, the node runs when we leave (start of a running node is a
    // no-op), reachable.
    if let Err(e) = cluster.start(node).await {
        errors.push(format!("starting {node} again: {e}"));
    }
    if step.is_some() {
        if let Some(proxy) = cluster.proxy() {
            let name = cluster.proxy_name(node);
            if let Err(e) = proxy.enable(&name).await {
                errors.push(format!("enabling proxy {name} again: {e}"));
            }
        }
        // Set right with no worker left to feel it: the reset is a jump too. Also when
        // no step took (a step dropped mid-way may have written the clock file).
        stop.cancelled().await;
        match reset_clock(&cluster, node).await {
            Ok(()) => close(&mut jump, clock.offset(Instant::now()), &mut faults),
            Err(e) => {
                errors.push(e);
                faults.extend(jump.take());
            }
        }
    }
    (faults, errors)
}

/// The clock of `node` back at the real time, checked.
async fn reset_clock(cluster: &AnyCluster, node: NodeId) -> Result<(), String> {
    cluster
        .reset_clock(node)
        .await
        .map_err(|e| format!("setting {node}'s clock right again: {e}"))?;
    let url = cluster.admin_url(node).map_err(|e| e.to_string())?;
    clock_check::expect_offset(&url, 0.0)
        .await
        .map(drop)
        .map_err(|e| format!("setting {node}'s clock right again: {e}"))
}

/// Ends the open step window, if any, at `at`, onto `faults`.
fn close(jump: &mut Option<FaultWindow>, at: Duration, faults: &mut Vec<FaultWindow>) {
    if let Some(mut w) = jump.take() {
        w.end_ms = Some(ms(at));
        faults.push(w);
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_victim_reaches_a_bare_majority_and_the_last_of_it_is_wiped() {
        let urls: Vec<String> = (0..5).map(|i| format!("redis://n{i}")).collect();
        let view = victim_view(&urls);
        assert_eq!(&view[..3], &urls[..3]);
        assert_eq!(view[3], unreachable(3));
        assert_ne!(view[3], view[4]);
        assert_eq!(wiped_node(5), NodeId(2));
        // Its restarts are written as the report's schema spells a node (`n2`), which the
        // leak check reads back to exempt that node alone (it once wrote `node 2`, which
        // exempted every node and failed the published schema).
        let target = wiped_node(5).target();
        assert_eq!(target, "n2");
        assert_eq!(crate::report::model::target_node(&target), Some(2));
        // The wiped node and the ones the victim cannot reach are a quorum.
        assert_eq!(1 + (5 - quorum(5)), quorum(5));
    }

    #[test]
    fn restarts_go_round_the_modes_whose_victims_were_granted() {
        let mut r = BTreeMap::new();
        r.insert(0, 0);
        assert!(serves(&r, 0), "the first grant is served");
        r.insert(0, 1);
        r.insert(2, 0);
        assert!(!serves(&r, 0), "mode 2 has had none yet");
        assert!(serves(&r, 2));
        r.insert(2, 1);
        assert!(serves(&r, 0), "level again: first come, first served");
        assert!(serves(&r, 2));
        // Modes whose victims were never granted do not hold the others up.
        r.insert(0, 3);
        r.insert(2, 3);
        assert!(serves(&r, 2));
    }

    #[test]
    fn the_first_restart_steps_back_then_each_mode_in_turn_within_the_ranges_from_the_seed() {
        let spec = crate::scenario::recipes::SPLIT_CLOCK_STEP;
        // Modes in the order their victims are served, six rounds.
        let order: Vec<usize> = [2, 0, 3, 1].iter().copied().cycle().take(24).collect();
        let play = |seed: u64| {
            let mut steps = Steps::new(spec, seed);
            let mut nth: BTreeMap<usize, u32> = BTreeMap::new();
            let mut by_mode: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
            for &mode in &order {
                let n = nth.entry(mode).or_insert(0);
                by_mode.entry(mode).or_default().push(steps.next(mode, *n));
                *n += 1;
            }
            by_mode
        };
        let mut first_back = Vec::new();
        for seed in 0..16 {
            let by_mode = play(seed);
            assert_eq!(
                by_mode,
                play(seed),
                "the same seed and order, the same steps"
            );
            assert!(by_mode[&2][0] < 0, "the run's first restart steps back");
            for (mode, steps) in &by_mode {
                for pair in steps.windows(2) {
                    assert_ne!(pair[0] < 0, pair[1] < 0, "mode {mode} in turn: {steps:?}");
                }
                for &s in steps {
                    if s < 0 {
                        assert!((30..=60).contains(&-s), "{s}");
                    } else {
                        assert!((60..=120).contains(&s), "{s}");
                    }
                }
                if *mode != 2 {
                    first_back.push(steps[0] < 0);
                }
            }
        }
        // The other modes' first directions are drawn: both occur.
        assert!(first_back.iter().any(|b| *b) && first_back.iter().any(|b| !*b));
    }
}
