//! Late retirements that could show: a retirement of the fence counter (the history's
//! `retire`) that was sent, reached the nodes by its completion, and was followed by a
//! grant of the same mode asked for after that. A lock that deletes a counter it no
//! longer guards makes such a grant's token start again (a regression, judged by
//! [`fence`](super::fence)); with none of them a `late_retire` scenario saw nothing
//! (`crate::run::retire`).

use super::history::{Op, OpKind, OpOutcome};

/// How many of `history`'s retirements (one mode's) were sent and then followed by a
/// grant asked for once they had landed; `None` when it holds no retirement at all.
pub fn late_retirements(history: &[Op]) -> Option<u64> {
    let mut retires = history
        .iter()
        .filter(|op| op.f == OpKind::Retire)
        .peekable();
    retires.peek()?;
    // The latest invoke of a granted acquire: a retirement that landed before it counts.
    let last_grant = history
        .iter()
        .filter(|op| op.f == OpKind::Acquire && op.outcome == OpOutcome::Ok)
        .map(|op| op.invoke_us)
        .max();
    let seen = retires
        .filter(|r| r.outcome != OpOutcome::Fail)
        .filter(|r| last_grant.is_some_and(|g| g >= r.complete_us))
        .count();
    Some(seen as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(f: OpKind, outcome: OpOutcome, invoke: u64, complete: u64) -> Op {
        Op::new(0, f, outcome, invoke, complete)
    }

    #[test]
    fn a_retirement_counts_once_sent_and_followed_by_a_grant() {
        assert_eq!(late_retirements(&[]), None);
        let grant = |at| op(OpKind::Acquire, OpOutcome::Ok, at, at + 5);
        let history = [
            grant(0),
            // Sent, landed at 500: a grant asked for at 600 follows it.
            op(OpKind::Retire, OpOutcome::Info, 20, 500),
            // Not sent (the lease had run out).
            op(OpKind::Retire, OpOutcome::Fail, 700, 701),
            grant(600),
            // Landed after the last grant was asked for: nothing could show it.
            op(OpKind::Retire, OpOutcome::Info, 650, 1_100),
            op(OpKind::Acquire, OpOutcome::Fail, 1_200, 1_300),
        ];
        assert_eq!(late_retirements(&history), Some(1));
        assert_eq!(late_retirements(&history[..1]), None);
        assert_eq!(late_retirements(&history[1..2]), Some(0));
    }
}
