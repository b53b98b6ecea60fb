//! When the processes the lock runs in were held off the CPU.
//!
//! The key watcher ([`super::leaks`]) sees a stall of its own tick and of the path to a
//! node, but not one of another thread: on a busy 2-core machine the kernel keeps one of
//! the runner's runtime threads waiting for a CPU for 40-80 ms at a time while the other
//! runs on (measured beside two busy loops, `majority-loss` on Docker, per-thread
//! `schedstat` read every 10 ms). The lock's tasks queued on the waiting thread — a failed
//! attempt's clean-up among them — wait with it, and the watcher, on time on the other
//! thread, sees nothing. A key of a correct lock then stands most of its TTL and the leak
//! check, told of no stall, judged it a leak (the full tier under a CPU hog, 2026-12-06).
//!
//! So the kernel is asked: every [`EVERY`], each thread of the runner and of its worker
//! processes is read from `/proc/<pid>/task/<tid>/schedstat` (time on the CPU, time spent
//! runnable but waiting for one, and how many times it got one). A wait is added when the
//! thread gets the CPU, so a thread whose wait grew by `D` between two reads waited that
//! long in waits that ended in between (and began at most `D` before the earlier read).
//! When `D` reaches [`LATE`] the thread ran for at most a read's interval less that —
//! a few ms of 25 — and what was queued on it waited with it: a stall of every node, from
//! `D` before the earlier read to the later one. A thread sharing a core with one or two
//! others waits less than that (half or two thirds of 25 ms) and is no stall.
//!
//! Measured (`majority-loss` on Docker, 12 s, 2026-12-06): quiet, 5-6 such stalls a run
//! (the Docker kills and starts); beside two busy loops, 14-17. Counting a thread only when
//! its waits averaged [`LATE`] per arrival found 2 a run beside the busy loops and missed
//! most — hence the total.
//!
//! Nothing the lock reports is used. Where `/proc` has no `schedstat` (not Linux, or a
//! kernel without it) nothing is concluded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::clock::ScenarioClock;
use super::leaks::{EVERY, LATE};
use crate::checker::keys::Exempt;

/// The processes to watch, asked before each read: the runner and its live worker
/// processes.
pub type Pids = Arc<dyn Fn() -> Vec<i32> + Send + Sync>;

/// One thread's scheduler counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedStat {
    /// Time spent waiting for a CPU while runnable, ns.
    pub waited_ns: u64,
    /// Times it got a CPU.
    pub arrivals: u64,
}

impl SchedStat {
    /// Parses `/proc/…/schedstat`: `<on-cpu ns> <waiting ns> <arrivals>`.
    pub fn parse(text: &str) -> Option<Self> {
        let mut it = text.split_whitespace().map(str::parse::<u64>);
        let _on_cpu = it.next()?.ok()?;
        Some(SchedStat {
            waited_ns: it.next()?.ok()?,
            arrivals: it.next()?.ok()?,
        })
    }
}

/// The threads of `pid` and their counters; empty when they cannot be read.
pub fn read_threads(pid: i32) -> Vec<(i32, SchedStat)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let tid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
        Some((tid, SchedStat::parse(&text)?))
    })
    .collect()
}

/// The stall a thread's counters show between a read at `before_us` and one at `at_us`
/// (µs on the scenario clock), if it waited [`LATE`] or longer in between (see the module
/// docs).
pub fn stall(before: SchedStat, now: SchedStat, before_us: u64, at_us: u64) -> Option<Exempt> {
    let waited_ns = now.waited_ns.checked_sub(before.waited_ns)?;
    // Counters that went backwards are another thread's under a reused id.
    now.arrivals.checked_sub(before.arrivals)?;
    let late_ns = u64::try_from(LATE.as_nanos()).unwrap_or(u64::MAX);
    (waited_ns >= late_ns).then(|| Exempt {
        node: None,
        from_us: before_us.saturating_sub(waited_ns / 1000),
        to_us: at_us,
    })
}

/// Reads the threads of `pids` every [`EVERY`] from the scenario's zero until `until` on
/// `clock` or `stop`; the stalls seen, merged where they overlap.
pub async fn watch(
    pids: Pids,
    clock: ScenarioClock,
    until: Duration,
    stop: CancellationToken,
) -> Vec<Exempt> {
    let end = clock.instant_at(until);
    tokio::select! {
        () = tokio::time::sleep_until(clock.instant_at(Duration::ZERO)) => {}
        () = stop.cancelled() => return Vec::new(),
    }
    let mut last: HashMap<(i32, i32), (SchedStat, u64)> = HashMap::new();
    let mut out: Vec<Exempt> = Vec::new();
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Bounded by `end`.
    while Instant::now() < end && !stop.is_cancelled() {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => break,
        }
        let mut seen = HashMap::with_capacity(last.len());
        for pid in pids() {
            for (tid, now) in read_threads(pid) {
                let at_us = clock.us(Instant::now());
                if let Some(&(before, before_us)) = last.get(&(pid, tid))
                    && let Some(s) = stall(before, now, before_us, at_us)
                {
                    push_merged(&mut out, s);
                }
                seen.insert((pid, tid), (now, at_us));
            }
        }
        // Threads that ended are forgotten (their ids may come back for others).
        last = seen;
    }
    out
}

/// Adds `s`, joining it with the last window when they overlap (they come in time order,
/// give or take a read).
fn push_merged(out: &mut Vec<Exempt>, s: Exempt) {
    if let Some(prev) = out.last_mut()
        && s.from_us <= prev.to_us
        && prev.from_us <= s.to_us
    {
        prev.from_us = prev.from_us.min(s.from_us);
        prev.to_us = prev.to_us.max(s.to_us);
        return;
    }
    out.push(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(waited_ms: u64, arrivals: u64) -> SchedStat {
        SchedStat {
            waited_ns: waited_ms * 1_000_000,
            arrivals,
        }
    }

    #[test]
    fn parses_the_kernels_three_numbers() {
        assert_eq!(
            SchedStat::parse("5123456 3552826 17\n"),
            Some(SchedStat {
                waited_ns: 3_552_826,
                arrivals: 17
            })
        );
        assert_eq!(SchedStat::parse("1 2"), None);
        assert_eq!(SchedStat::parse("a b c"), None);
    }

    #[test]
    fn this_process_threads_can_be_read() {
        let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        let threads = read_threads(me);
        if cfg!(target_os = "linux") {
            assert!(
                !threads.is_empty(),
                "no /proc/{me}/task/*/schedstat: the CPU stall watch would be blind"
            );
        }
    }

    #[test]
    fn a_long_wait_is_a_stall_of_every_node_reaching_back_by_the_wait() {
        // 60 ms waited between reads at 1.000 s and 1.025 s (one wait, or a few).
        let s = stall(at(100, 10), at(160, 11), 1_000_000, 1_025_000).unwrap();
        assert_eq!(
            stall(at(100, 10), at(160, 14), 1_000_000, 1_025_000),
            Some(s)
        );
        assert_eq!(
            s,
            Exempt {
                node: None,
                from_us: 940_000,
                to_us: 1_025_000
            }
        );
    }

    #[test]
    fn sharing_a_core_is_no_stall() {
        // Half of 25 ms waited, over 4 arrivals.
        assert_eq!(stall(at(100, 10), at(112, 14), 0, 25_000), None);
        // Nothing waited, or counters that went backwards (a reused thread id).
        assert_eq!(stall(at(100, 10), at(100, 12), 0, 25_000), None);
        assert_eq!(stall(at(100, 10), at(90, 12), 0, 25_000), None);
        assert_eq!(stall(at(100, 10), at(130, 9), 0, 25_000), None);
        // Still waiting: its wait is counted when it gets the CPU, at a later read.
        assert_eq!(stall(at(100, 10), at(100, 10), 0, 25_000), None);
    }

    #[test]
    fn exactly_the_limit_is_a_stall() {
        let late_ms = u64::try_from(LATE.as_millis()).unwrap();
        assert!(stall(at(0, 1), at(late_ms, 3), 0, 25_000).is_some());
        assert!(stall(at(0, 1), at(late_ms - 1, 3), 0, 25_000).is_none());
    }

    #[test]
    fn overlapping_stalls_merge_and_separate_ones_stay_apart() {
        let w = |from_us, to_us| Exempt {
            node: None,
            from_us,
            to_us,
        };
        let mut out = Vec::new();
        push_merged(&mut out, w(100, 200));
        push_merged(&mut out, w(150, 260));
        push_merged(&mut out, w(300, 400));
        assert_eq!(out, vec![w(100, 260), w(300, 400)]);
    }
}
