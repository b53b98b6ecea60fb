//! Fence-token order: a correct lock hands out tokens that grow with every grant.
//!
//! A grant's token is the largest a quorum had seen plus one, and two grants' quorums
//! intersect, so in grant order every token must be larger than all before it. A grant
//! whose token is not (a duplicate — two holders with one token, as amnesia gives — or a
//! regression) means a fenced resource could not tell the holders apart.

/// Indices (into `grants`, given as `(grant time, token)`) of the grants whose token is not
/// larger than every token granted strictly earlier. Grants at the same instant are
/// compared with each other too (one of two equal tokens is counted). Order of the input
/// does not matter; the result is in grant order.
pub fn fence_regressions<T: Ord + Copy>(grants: &[(T, u64)]) -> Vec<(usize, u64)> {
    let mut order: Vec<usize> = (0..grants.len()).collect();
    // Ties on time: smaller token first, so a tie counts only what really collides.
    order.sort_by_key(|&i| (grants[i].0, grants[i].1));
    let mut max: Option<u64> = None;
    let mut out = Vec::new();
    for i in order {
        let token = grants[i].1;
        match max {
            Some(m) if token <= m => out.push((i, m)),
            _ => max = Some(token),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn duplicates_and_regressions_count() {
        assert!(fence_regressions::<u64>(&[]).is_empty());
        assert!(fence_regressions(&[(0u64, 1), (5, 2), (9, 7)]).is_empty());
        // Given out of order: order is by time.
        assert!(fence_regressions(&[(9u64, 7), (0, 1), (5, 2)]).is_empty());
        assert_eq!(fence_regressions(&[(0u64, 1), (5, 1)]), vec![(1, 1)]);
        assert_eq!(
            fence_regressions(&[(0u64, 3), (5, 2), (6, 4), (7, 4)]),
            vec![(1, 3), (3, 4)]
        );
    }

    proptest! {
        #[test]
        fn increasing_tokens_never_count(mut times in proptest::collection::vec(0u64..1000, 0..50)) {
            times.sort_unstable();
            times.dedup();
            let grants: Vec<(u64, u64)> = times.iter().enumerate().map(|(i, t)| (*t, i as u64 + 1)).collect();
            prop_assert!(fence_regressions(&grants).is_empty());
        }

        #[test]
        fn a_repeated_token_always_counts(
            tokens in proptest::collection::vec(1u64..20, 2..40)
        ) {
            let grants: Vec<(u64, u64)> = tokens.iter().enumerate().map(|(i, t)| (i as u64, *t)).collect();
            let distinct: std::collections::BTreeSet<u64> = tokens.iter().copied().collect();
            // Each grant that is not a new maximum is counted, so at least the repeats are.
            prop_assert!(fence_regressions(&grants).len() >= tokens.len() - distinct.len());
        }
    }
}
