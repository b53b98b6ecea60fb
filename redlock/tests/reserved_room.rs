//! The places a stalled node's line keeps for deletes (see `room` in the crate) are for
//! the deletes of writes that reached that line. Issue 48 (finding 2): a release, and the
//! clean-up of a cancelled attempt, took one of those places on every node — also where the
//! vote had been refused with `Backlog` and nothing was ever sent. About 800 short leases
//! or cancelled attempts while one node was frozen filled the whole line with such deletes:
//! the delete of a lease whose `SET` waited in that line was refused, the `SET` ran at the
//! thaw, and the released lease's key stood ~9.5 s of its 10 s TTL (with one more node
//! down, nobody could take the lock). Seen on Redis 7 and Valkey 8.1.
//!
//! Each test freezes n0 of three, holds one lease `held` across the freeze, floods n0's
//! line (one client, so one connection and one line), releases `held`, thaws n0, and asks
//! n0 whether `held`'s key is gone.

use crate::support;

use std::time::Duration;

use fenced_redlock::{Lease, NodeError, Redlock, ReleaseOutcome};
use futures::FutureExt;
use support::{Cluster, Flavour, command_calls};
use tokio::task::block_in_place;
use tokio::time::Instant;

/// Long enough that a key standing for its TTL is unmistakable.
const TTL: Duration = Duration::from_secs(10);

/// Leases or attempts while n0 is frozen: more than a line holds (`conn::MAX_PENDING`,
/// 1,024), so the flood fills it however its places are shared out.
const FLOOD: usize = 1_100;

/// How long after the thaw `held`'s delete may take, when it waited in n0's line behind
/// the `SET` (the line's 1,024 requests run in milliseconds).
const IN_LINE: Duration = Duration::from_millis(500);

/// How long after the thaw `held`'s delete may take when it was refused and is tried again
/// (pauses between tries grow to a second: `cleanup::MAX_PAUSE`).
const TRIED_AGAIN: Duration = Duration::from_millis(2_500);

/// What fills n0's line.
#[derive(Debug, Clone, Copy)]
enum Flood {
    /// Leases taken on n1 and n2 and released at once.
    Leases,
    /// Acquires dropped after their first poll, which sent their votes.
    Cancelled,
}

/// A client whose connections are made before n0 is frozen (a connection to a frozen
/// server is never made), with a node deadline the busy test machine keeps.
async fn client(cluster: &Cluster) -> Redlock {
    let client = Redlock::builder(cluster.urls())
        .ttl(TTL)
        .node_timeout(Duration::from_millis(200))
        .build()
        .expect("valid");
    let warm = client
        .try_acquire("warm")
        .await
        .expect("three healthy nodes");
    assert_eq!(
        warm.release_all().await.released(),
        3,
        "warm-up on every node"
    );
    client
}

/// Sends `FLOOD` leases or attempts at the frozen n0's line; how many were granted (for
/// cancelled attempts: decided in their first poll).
async fn flood(client: &Redlock, kind: Flood) -> usize {
    let mut granted = 0;
    for i in 0..FLOOD {
        let resource = format!("flood-{i}");
        match kind {
            Flood::Leases => {
                // A miss (the machine is busy) fills the line too: its clean-up asks n0.
                if let Ok(lease) = client.try_acquire(&resource).await {
                    granted += 1;
                    let _ = lease.release().await;
                }
            }
            Flood::Cancelled => {
                // n1 and n2 may both answer within the first poll (loopback, another
                // core): a lease then, dropped at once, whose drop releases it.
                if client.try_acquire(&resource).now_or_never().is_some() {
                    granted += 1;
                }
                // Let n1 and n2's replies be read, so that only n0's line fills.
                if i % 32 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else {
                    tokio::task::yield_now().await;
                }
            }
        }
    }
    granted
}

/// `held` (its `SET` waiting in n0's line, or answered before the freeze when `answered`),
/// then the flood, then `held`'s release; n0 thawed at the end. Returns `held`'s key, its
/// release's outcome on n0, and what the flood did.
async fn release_after_flood(
    cluster: &Cluster,
    client: &Redlock,
    kind: Flood,
    answered: bool,
) -> (String, ReleaseOutcome, String) {
    let n0 = &cluster.servers[0];
    let held: Lease = if answered {
        let lease = client
            .try_acquire("held")
            .await
            .expect("three healthy nodes");
        let everywhere =
            block_in_place(|| cluster.wait_held_everywhere(lease.key(), Duration::from_secs(2)));
        assert_eq!(everywhere, [0, 1, 2], "held's SET answered on every node");
        n0.freeze();
        lease
    } else {
        n0.freeze();
        client.try_acquire("held").await.expect("n1 and n2")
    };
    let key = held.key().to_owned();
    let started = Instant::now();
    let granted = flood(client, kind).await;
    let flooded = match kind {
        Flood::Leases => format!(
            "{FLOOD} leases in {:?} ({granted} granted)",
            started.elapsed()
        ),
        Flood::Cancelled => format!(
            "{FLOOD} cancelled acquires in {:?} ({granted} decided in their first poll)",
            started.elapsed()
        ),
    };
    let report = held.release().await;
    let outcome = report.nodes[0].outcome.clone();
    n0.thaw();
    (key, outcome, flooded)
}

/// Whether `held`'s delete to n0 got into n0's line: a place was kept for it behind its
/// `SET`, whatever the flood sent. A delete refused there would be tried again after the
/// thaw (see `a_refused_release_is_tried_again_after_the_thaw`), which hides a lost place
/// from the key check alone.
fn got_in(outcome: &ReleaseOutcome) -> bool {
    !matches!(outcome, ReleaseOutcome::Failed(NodeError::Backlog(_)))
}

/// The thawed n0 no longer holds `key` within `within`: `None`, or how long it stands.
fn standing(cluster: &Cluster, key: &str, within: Duration) -> Option<i64> {
    let left = block_in_place(|| cluster.wait_gone(key, within));
    if !left.contains(&0) {
        return None;
    }
    let pttl: i64 = redis::cmd("PTTL")
        .arg(key)
        .query(&mut cluster.servers[0].admin())
        .expect("PTTL");
    Some(pttl)
}

/// Issue 48's first reproduction: short leases fill the frozen node's line while one lease
/// is held. On both servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_leases_leave_room_for_a_held_leases_delete() {
    for flavour in Flavour::ALL {
        let cluster = Cluster::start(flavour, 3);
        let client = client(&cluster).await;
        let (key, outcome, flooded) =
            release_after_flood(&cluster, &client, Flood::Leases, false).await;
        let pttl = standing(&cluster, &key, IN_LINE);
        assert_eq!(
            pttl, None,
            "{flavour:?}: after {flooded} against frozen n0, the released lease's key stands \
             on n0 {IN_LINE:?} after the thaw, {pttl:?} ms more; its release there: {outcome:?}"
        );
        assert!(
            got_in(&outcome),
            "{flavour:?}: after {flooded}, the held lease's delete found no place on n0: {outcome:?}"
        );
        // What it costs: with n1 down too, another client can take the lock on n0 and n2.
        cluster.servers[1].freeze();
        let other = Redlock::builder(cluster.urls())
            .ttl(TTL)
            .node_timeout(Duration::from_millis(200))
            .build()
            .expect("valid");
        let taken = other.try_acquire("held").await;
        cluster.servers[1].thaw();
        assert!(
            taken.is_ok(),
            "{flavour:?}: released, yet not free on n0 and n2: {:?}",
            taken.err()
        );
        let _ = other.shutdown().await;
        let _ = client.shutdown().await;
    }
}

/// Issue 48's second reproduction: acquires cancelled after their first poll. Their votes
/// to n0 that were refused sent nothing, so no delete may go there for them — neither in
/// the places kept for deletes nor later, from a clean-up trying again every second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_send_no_delete_where_their_vote_was_refused() {
    let cluster = Cluster::start(Flavour::Valkey, 3);
    let client = client(&cluster).await;
    let n0 = &cluster.servers[0];
    let (sets, deletes) = (command_calls(n0, "set"), command_calls(n0, "eval"));
    let (key, outcome, flooded) =
        release_after_flood(&cluster, &client, Flood::Cancelled, false).await;
    let pttl = standing(&cluster, &key, IN_LINE);
    assert_eq!(
        pttl, None,
        "after {flooded} against frozen n0, the released lease's key stands on n0 \
         {IN_LINE:?} after the thaw, {pttl:?} ms more; its release there: {outcome:?}"
    );
    assert!(
        got_in(&outcome),
        "after {flooded}, the held lease's delete found no place on n0: {outcome:?}"
    );
    // Clean-ups that try again (a delete that missed its deadline while n0 was frozen) do
    // so within a second of the thaw.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let sets = command_calls(n0, "set") - sets;
    let deletes = command_calls(n0, "eval") - deletes;
    // Each `SET` that reached n0 has its delete behind it, and at most one more from a
    // clean-up whose first delete missed its deadline.
    assert!(
        deletes <= 2 * sets,
        "after {flooded}: {deletes} deletes reached n0 for {sets} SETs"
    );
    let _ = client.shutdown().await;
}

/// A release whose delete the frozen node's line refused is tried again, as a failed
/// attempt's clean-up is: `held`'s `SET` was answered before the freeze (its key is there,
/// and no write of ours waits in the line ahead of the delete, so it has no reserved
/// place), and the line is full of the flood's requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_release_is_tried_again_after_the_thaw() {
    let cluster = Cluster::start(Flavour::Redis, 3);
    let client = client(&cluster).await;
    let (key, outcome, flooded) = release_after_flood(&cluster, &client, Flood::Leases, true).await;
    let pttl = standing(&cluster, &key, TRIED_AGAIN);
    assert_eq!(
        pttl, None,
        "after {flooded} against frozen n0, the released lease's key stands on n0 \
         {TRIED_AGAIN:?} after the thaw, {pttl:?} ms more; its release there: {outcome:?}"
    );
    let _ = client.shutdown().await;
}
