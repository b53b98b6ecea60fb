//! Fence-token order: a correct lock's tokens are unique, and grow in real-time order.
//!
//! A grant counts a node only where its fence write found the counter below its token and
//! raised it (`FENCE_WRITE`), and any two grants' fence-write quorums share a node. On that
//! node the second write found the first one's token, so:
//! - **no token is granted twice**, whatever the two grants' timing: the second, finding
//!   its own token there, could not count the node;
//! - **a grant asked for after another returned gets a larger token**: all its fence
//!   writes ran after the other's had raised the shared node's counter.
//!
//! Nothing is promised of two grants whose acquires overlapped in time: both can be granted
//! only where a fault took a vote away (a node forgot its key, or its clock jumped), and
//! the one that returned first may then hold the larger token — the resource still tells
//! them apart (run W in `docs/mutants.md`: a correct lock, a node forgetting its keys every
//! 100 ms, returned token 493 0.45 ms before token 492, their acquires overlapping). Judged
//! by the order in which grants returned, such a pair looked like a regression.
//!
//! The times are the history's (`checker::history`): when the worker asked for the lock
//! (the acquire's invoke) and when it had it (complete), on the scenario's one clock.

/// One granted acquire: when it was asked for, when it returned, its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenGrant {
    /// The acquire's invoke time.
    pub invoke: u64,
    /// The acquire's complete time.
    pub complete: u64,
    /// Its fencing token.
    pub token: u64,
}

/// The grants (indices into `grants`, in order of their return) whose token breaks the
/// rules above, each with the token it did not exceed: the largest token returned before
/// it was asked for, or its own when another grant had that token already (a repeat counts
/// once per grant after the first that returned with it).
pub fn fence_regressions(grants: &[TokenGrant]) -> Vec<(usize, u64)> {
    let mut by_return: Vec<usize> = (0..grants.len()).collect();
    by_return.sort_by_key(|&i| (grants[i].complete, grants[i].token, i));
    // The largest token among the first k returned grants, for every k.
    let mut running = Vec::with_capacity(by_return.len());
    let mut max = 0u64;
    for &i in &by_return {
        max = max.max(grants[i].token);
        running.push(max);
    }
    let mut seen = std::collections::HashSet::with_capacity(grants.len());
    let mut out = Vec::new();
    for &i in &by_return {
        let g = grants[i];
        // Grants that returned strictly before this one was asked for.
        let before = by_return.partition_point(|&j| grants[j].complete < g.invoke);
        let earlier_max = before.checked_sub(1).and_then(|k| running.get(k)).copied();
        let repeated = !seen.insert(g.token);
        match earlier_max {
            Some(m) if g.token <= m => out.push((i, m)),
            _ if repeated => out.push((i, g.token)),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn g(invoke: u64, complete: u64, token: u64) -> TokenGrant {
        TokenGrant {
            invoke,
            complete,
            token,
        }
    }

    #[test]
    fn a_later_acquire_must_get_a_larger_token() {
        assert!(fence_regressions(&[]).is_empty());
        assert!(fence_regressions(&[g(0, 1, 1), g(2, 5, 2), g(6, 9, 7)]).is_empty());
        // Given out of order: order is by time.
        assert!(fence_regressions(&[g(6, 9, 7), g(0, 1, 1), g(2, 5, 2)]).is_empty());
        assert_eq!(fence_regressions(&[g(0, 1, 3), g(2, 5, 2)]), vec![(1, 3)]);
        assert_eq!(
            fence_regressions(&[g(0, 1, 3), g(2, 5, 2), g(6, 7, 4), g(8, 9, 4)]),
            vec![(1, 3), (3, 4)]
        );
    }

    #[test]
    fn overlapping_acquires_may_return_in_either_order() {
        // Run W's pair, on a correct lock: asked 9,492,870 and 9,496,620 µs, returned
        // 9,512,451 and 9,512,003 µs, with tokens 492 and 493. Counted by return order,
        // 492 after 493 was a regression.
        let pair = [g(9_492_870, 9_512_451, 492), g(9_496_620, 9_512_003, 493)];
        assert!(fence_regressions(&pair).is_empty());
        // A grant asked for after both returned must exceed both.
        let mut more = pair.to_vec();
        more.push(g(9_520_220, 9_534_937, 493));
        assert_eq!(fence_regressions(&more), vec![(2, 493)]);
    }

    #[test]
    fn a_token_granted_twice_counts_even_when_the_acquires_overlapped() {
        // Run W's mutant `fence-ahead-counted`: two overlapping acquires both got 733.
        let twice = [
            g(13_074_396, 13_109_865, 733),
            g(13_034_202, 13_128_538, 733),
        ];
        assert_eq!(fence_regressions(&twice), vec![(1, 733)]);
        // Same return time: one of the two counts.
        assert_eq!(fence_regressions(&[g(0, 5, 4), g(1, 5, 4)]).len(), 1);
    }

    #[test]
    fn touching_intervals_are_not_ordered() {
        // Asked at the very microsecond the other returned: not strictly after it.
        assert!(fence_regressions(&[g(0, 5, 9), g(5, 8, 3)]).is_empty());
        assert_eq!(fence_regressions(&[g(0, 5, 9), g(6, 8, 3)]), vec![(1, 9)]);
    }

    proptest! {
        #[test]
        fn increasing_tokens_never_count(
            steps in proptest::collection::vec((0u64..50, 0u64..50), 0..50)
        ) {
            // Sequential acquires with growing tokens.
            let mut t = 0;
            let grants: Vec<TokenGrant> = steps.iter().enumerate().map(|(i, (gap, len))| {
                let invoke = t + gap;
                t = invoke + len;
                g(invoke, t, i as u64 + 1)
            }).collect();
            prop_assert!(fence_regressions(&grants).is_empty());
        }

        #[test]
        fn every_repeat_of_a_token_counts(
            grants in proptest::collection::vec((0u64..100, 0u64..100, 1u64..20), 2..40)
        ) {
            let grants: Vec<TokenGrant> =
                grants.iter().map(|&(a, len, t)| g(a, a + len, t)).collect();
            let distinct: std::collections::BTreeSet<u64> =
                grants.iter().map(|g| g.token).collect();
            prop_assert!(fence_regressions(&grants).len() >= grants.len() - distinct.len());
        }

        #[test]
        fn unique_tokens_of_overlapping_acquires_never_count(
            tokens in proptest::collection::vec(1u64..1000, 1..40)
        ) {
            // All asked before any returned: no order is promised among them.
            let mut tokens = tokens;
            tokens.sort_unstable();
            tokens.dedup();
            let n = tokens.len() as u64;
            let grants: Vec<TokenGrant> = tokens.iter().enumerate()
                .map(|(i, &t)| g(i as u64, n + (t * 7919) % 1000, t)).collect();
            prop_assert!(fence_regressions(&grants).is_empty());
        }
    }
}
