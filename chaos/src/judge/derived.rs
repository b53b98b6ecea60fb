//! Faults the rig imposed that the record itself shows, as the report's fault windows: a
//! worker's pauses (from its `Pausing`/`Resumed` events) and worker 0's late retirements
//! (from the history). The nemesis's faults are recorded as it applied them; these are
//! derived by the judge, so the evidence holds each fact once.

use super::evidence::Setup;
use crate::checker::history::{Op, OpKind};
use crate::report::{FaultWindow, PauseSpan};

/// The report's kind for a late retirement's window.
pub const FAULT_KIND: &str = "retire-late";

/// `mode`'s client pauses as fault windows on the paused worker, named as `setup` says the
/// rig paused them.
pub fn pauses(mode: &str, pauses: &[PauseSpan], setup: &Setup) -> Vec<FaultWindow> {
    pauses
        .iter()
        .map(|p| FaultWindow {
            kind: setup.pause_kind.clone(),
            detail: format!("{mode} w{}: {}", p.worker, setup.pause_how),
            targets: vec![format!("w{}", p.worker)],
            start_ms: p.from_ms.0 / 1000,
            end_ms: p.to_ms.map(|e| e.0 / 1000),
        })
        .collect()
}

/// `mode`'s late retirements in its `history` as the report's fault windows, on the
/// retiring worker: from each call until its requests had passed the proxies (held
/// `held_ms` there). Worker 0's own link, not a node's: no node counts as down for them.
pub fn retirements(mode: &str, history: &[Op], held_ms: u64) -> Vec<FaultWindow> {
    let held = held_ms;
    history
        .iter()
        .filter(|op| op.f == OpKind::Retire)
        .map(|op| {
            let worker = op.worker.unwrap_or_default();
            FaultWindow {
                kind: FAULT_KIND.into(),
                detail: format!(
                    "{mode} w{worker}: retirement's requests held {held} ms at its proxies ({})",
                    op.error.as_deref().unwrap_or("no answer recorded")
                ),
                targets: vec![format!("w{worker}")],
                start_ms: op.invoke_us / 1000,
                end_ms: Some(op.complete_us / 1000),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::history::OpOutcome;

    #[test]
    fn each_retirement_is_a_window_on_its_worker() {
        let mut op = Op::new(0, OpKind::Retire, OpOutcome::Info, 1_500_000, 1_850_000);
        op.error = Some("0 deleted, 5 unanswered in time, 0 refused or had none".into());
        let release = Op::new(1, OpKind::Release, OpOutcome::Ok, 10, 20);
        let w = retirements("none", &[release, op], 300);
        assert_eq!(
            w,
            vec![FaultWindow {
                kind: "retire-late".into(),
                detail: "none w0: retirement's requests held 300 ms at its proxies (0 deleted, 5 unanswered in time, 0 refused or had none)".into(),
                targets: vec!["w0".into()],
                start_ms: 1_500,
                end_ms: Some(1_850),
            }]
        );
    }
}
