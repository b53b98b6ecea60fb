//! Seeded choice of targets: one node, a minority, a majority.
//!
//! Quorum arithmetic matches the lock's: quorum = N/2 + 1, so the largest minority that can
//! fail without costing availability is N − quorum = (N − 1)/2 (2 of 5).

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::index::sample;

use crate::cluster::NodeId;

/// Nodes a lock needs: N/2 + 1.
pub fn quorum(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// Largest set of nodes whose loss leaves a quorum: (N − 1)/2 (0 for N ≤ 2).
pub fn max_minority(nodes: usize) -> usize {
    nodes.saturating_sub(quorum(nodes))
}

/// `k` distinct nodes out of `nodes`, sorted.
fn pick(rng: &mut StdRng, nodes: usize, k: usize) -> Vec<NodeId> {
    let k = k.min(nodes);
    let mut v: Vec<NodeId> = sample(rng, nodes, k).into_iter().map(NodeId).collect();
    v.sort();
    v
}

/// One node (empty when there are none).
pub fn one(rng: &mut StdRng, nodes: usize) -> Vec<NodeId> {
    pick(rng, nodes, 1.min(nodes))
}

/// One node, but only if losing it leaves a quorum (empty for N ≤ 2).
pub fn one_of_minority(rng: &mut StdRng, nodes: usize) -> Vec<NodeId> {
    pick(rng, nodes, 1.min(max_minority(nodes)))
}

/// A random minority of 1..=(N − 1)/2 nodes (empty when N ≤ 2: no minority can fail safely).
pub fn minority(rng: &mut StdRng, nodes: usize) -> Vec<NodeId> {
    let max = max_minority(nodes);
    if max == 0 {
        return Vec::new();
    }
    let k = rng.random_range(1..=max);
    pick(rng, nodes, k)
}

/// A random set of exactly a quorum of nodes: the smallest loss that stops every acquire.
pub fn majority(rng: &mut StdRng, nodes: usize) -> Vec<NodeId> {
    pick(rng, nodes, quorum(nodes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn sizes() {
        assert_eq!((quorum(5), max_minority(5)), (3, 2));
        assert_eq!((quorum(1), max_minority(1)), (1, 0));
        assert_eq!((quorum(4), max_minority(4)), (3, 1));
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..100 {
            let m = minority(&mut rng, 5);
            assert!((1..=2).contains(&m.len()));
            assert_eq!(majority(&mut rng, 5).len(), 3);
        }
        assert!(minority(&mut rng, 2).is_empty());
    }
}
