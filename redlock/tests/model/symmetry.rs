//! Nodes are interchangeable: a state with nodes 1 and 2 swapped behaves the same. The
//! checker explores one representative per class, which divides the state count by up to
//! N! and changes no property (none of them names a node).

use super::client;
use super::state::{Phase, State, Vote};

/// Everything the state holds about node `n`, to sort nodes by.
fn column(s: &State, n: usize) -> impl Ord + use<> {
    let node = s.nodes[n];
    let links: Vec<_> = s.links.iter().map(|l| l[n].to_node.clone()).collect();
    let servers: Vec<_> = s.clients.iter().map(|c| c.servers[n]).collect();
    let votes: Vec<(Vote, Vote)> = s
        .clients
        .iter()
        .map(|c| {
            let first = match &c.phase {
                Phase::Fencing { first, .. } => first[n],
                _ => Vote::Pending,
            };
            let round = client::round(&c.phase).map_or(Vote::Pending, |r| r.votes[n]);
            (first, round)
        })
        .collect();
    (node, links, servers, votes)
}

/// The state with its nodes in a canonical order.
pub(crate) fn representative(s: &State) -> State {
    let mut order: Vec<usize> = (0..s.nodes.len()).collect();
    order.sort_by_cached_key(|n| column(s, *n));
    let permute = |v: &mut Vec<Vote>| *v = order.iter().map(|n| v[*n]).collect();
    let mut r = s.clone();
    r.nodes = order.iter().map(|n| s.nodes[*n]).collect();
    for links in &mut r.links {
        *links = order.iter().map(|n| links[*n].clone()).collect();
    }
    for c in &mut r.clients {
        c.servers = order.iter().map(|n| c.servers[*n]).collect();
        if let Phase::Fencing { first, .. } = &mut c.phase {
            permute(first);
        }
        if let Some(round) = client::round_mut(&mut c.phase) {
            permute(&mut round.votes);
        }
    }
    r
}
