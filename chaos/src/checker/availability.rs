//! Availability: whether the lock kept granting while a minority was down.
//!
//! A minority fault costs the lock at most N − quorum votes, so grants must go on through
//! it. A long node fault during which a mode was granted no section that completed means
//! the lock stopped (a missing per-node deadline waits on the dead node, say).

use crate::report::model::IDLE_FAULT_MIN_MS;
use crate::report::{FaultWindow, ModeTimeline};

/// Node faults lasting at least [`IDLE_FAULT_MIN_MS`] during which `t` shows no grant
/// whose section was accepted (a section granted before the fault and finished during it
/// does not show that the lock worked while it lasted).
pub fn idle_fault_windows(faults: &[FaultWindow], t: &ModeTimeline) -> u64 {
    let mut done: Vec<u64> = t
        .grants
        .iter()
        .filter(|g| g.accepted)
        .map(|g| g.start_ms.0 / 1000)
        .collect();
    done.sort_unstable();
    faults
        .iter()
        .filter(|f| f.targets.iter().all(|t| t.starts_with('n')))
        .filter_map(|f| Some((f.start_ms, f.end_ms?)))
        .filter(|(a, b)| b.saturating_sub(*a) >= IDLE_FAULT_MIN_MS)
        .filter(|(a, b)| {
            let i = done.partition_point(|d| d < a);
            done.get(i).is_none_or(|d| d >= b)
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{GrantSpan, Ms};

    fn fault(target: &str, start_ms: u64, end_ms: u64) -> FaultWindow {
        FaultWindow {
            kind: "freeze".into(),
            detail: String::new(),
            targets: vec![target.into()],
            start_ms,
            end_ms: Some(end_ms),
        }
    }

    fn grant(start_ms: u64, accepted: bool) -> GrantSpan {
        GrantSpan {
            worker: 0,
            fence: None,
            start_ms: Ms(start_ms * 1000),
            end_ms: Ms(start_ms * 1000 + 5_000),
            valid_until_ms: Ms(start_ms * 1000 + 200_000),
            accepted,
            done_ms: Ms(start_ms * 1000 + 5_000),
            abandoned: false,
            stale: false,
        }
    }

    #[test]
    fn a_long_node_fault_without_a_granted_section_is_idle() {
        let t = ModeTimeline {
            // Granted before the first fault and finished inside it; a refused one inside.
            grants: vec![grant(999, true), grant(1_500, false), grant(5_500, true)],
            ..ModeTimeline::default()
        };
        let faults = [
            fault("n1", 1_000, 4_000),
            fault("n2", 5_000, 8_000),
            // Too short to judge, and a worker's pause: neither counts.
            fault("n3", 9_000, 9_500),
            fault("w0", 10_000, 13_000),
        ];
        assert_eq!(idle_fault_windows(&faults, &t), 1);
    }
}
