//! The clock-jump guard against real servers: Valkey under libfaketime, two of three
//! nodes' clocks set a minute ahead while a holder has the lock (the clock-jump-majority
//! shape). Without the guard a second client is granted the lock the holder still holds;
//! with it, the jumped nodes' votes do not count until every lease from before the jump
//! has ended, and the holder hears that its majority is gone.

use crate::support;

use std::time::Duration;

use fenced_redlock::{
    Lease, LockError, LossReason, NodeError, NodeFailureReason, NodeOutcome, Redlock, RenewOptions,
};
use support::Cluster;
use tokio::task::block_in_place;

/// Short enough for a test, long enough that the steps after the jump fit into the
/// holder's validity on a loaded machine.
const TTL: Duration = Duration::from_secs(3);

/// Far beyond the TTL: every key on a jumped node expires at once.
const LEAP_SECONDS: i64 = 60;

/// How long a signal that is given at once may take on a busy two-core machine.
const AT_ONCE: Duration = Duration::from_millis(500);

fn client(cluster: &Cluster, guard: bool) -> Redlock {
    Redlock::builder(cluster.urls())
        .ttl(TTL)
        .node_timeout(Duration::from_millis(300))
        .fencing(true)
        .clock_jump_guard(guard)
        .build()
        .expect("valid config")
}

/// Rounds on every node, so the client has read each clock before the jump; with the
/// guard on, a steady clock must never look like a jump.
async fn warm(redlock: &Redlock) {
    for _ in 0..10 {
        let lease = redlock
            .try_acquire("warm")
            .await
            .expect("free, and no clock moved");
        lease.release_all().await;
    }
}

/// `resource` held by `redlock` on all three nodes.
async fn held_everywhere(cluster: &Cluster, redlock: &Redlock, resource: &str) -> Lease {
    let lease = redlock.try_acquire(resource).await.expect("free");
    let held = block_in_place(|| cluster.wait_held_everywhere(resource, Duration::from_secs(2)));
    assert_eq!(held, [0, 1, 2], "the acquire reached every node");
    lease
}

fn leap(cluster: &Cluster, offset_seconds: i64) {
    block_in_place(|| {
        let before = cluster.servers[0].time_us();
        for server in &cluster.servers[..2] {
            server.jump_clock(offset_seconds);
        }
        let after = cluster.servers[0].time_us();
        let moved = (after - before) / 1_000_000;
        assert!(
            (moved - offset_seconds as i128).abs() <= 1,
            "node 0's clock moved {moved} s, not {offset_seconds} s: is libfaketime loaded?"
        );
    });
}

fn jumped(reason: Option<&NodeFailureReason>) -> bool {
    matches!(
        reason,
        Some(NodeFailureReason::Error(NodeError::ClockJumped { ahead, remaining }))
            if *ahead > Duration::from_secs(50) && *remaining > Duration::ZERO && *remaining <= TTL + Duration::from_millis(100)
    )
}

/// Without the guard, the jump hands the lock to a second client while the first still
/// holds a valid lease: the anomaly the guard exists for (and proof that this set-up
/// produces it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_guard_a_majority_that_leapt_forward_grants_a_second_holder() {
    let cluster = Cluster::start_clocked(3);
    let (a, b) = (client(&cluster, false), client(&cluster, false));
    warm(&b).await;
    let first = held_everywhere(&cluster, &a, "res").await;
    leap(&cluster, LEAP_SECONDS);
    let second = b
        .try_acquire("res")
        .await
        .expect("nodes 0 and 1 forgot A's key with the jump");
    assert!(first.is_valid() && second.is_valid(), "two valid holders");
    second.release().await;
    first.release().await;
}

/// With the guard, the second client that had read the nodes' clocks before is refused
/// with `ClockJumped`; the holder's next round on the jumped nodes reports the lease
/// lost with `ClockJumped`; once the quarantine has passed, the nodes vote again and
/// the next token is larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_guard_the_jumped_majority_gives_no_second_holder() {
    let cluster = Cluster::start_clocked(3);
    let (a, b) = (client(&cluster, true), client(&cluster, true));
    assert!(a.clock_jump_guard());
    warm(&a).await;
    warm(&b).await;
    let mut first = held_everywhere(&cluster, &a, "res").await;
    let first_token = first.fence().expect("fencing on");
    leap(&cluster, LEAP_SECONDS);

    let err = b
        .try_acquire("res")
        .await
        .expect_err("the jumped nodes do not vote; node 2 is A's");
    let (r0, r1) = (cluster.reason_of(&err, 0), cluster.reason_of(&err, 1));
    // Two failures decide the attempt: the third may not have answered yet.
    let late = |r: &Option<NodeFailureReason>| matches!(r, Some(NodeFailureReason::NoAnswerYet));
    assert!(
        (jumped(r0.as_ref()) || late(&r0)) && (jumped(r1.as_ref()) || late(&r1)),
        "{err}"
    );
    assert!(jumped(r0.as_ref()) || jumped(r1.as_ref()), "{err}");

    // A's extend is its client's next contact with the jumped nodes (unless the reply to
    // its fence write on the third node came after the jump: then it has seen it already
    // and the lease is void before the extend; either way the extend says why).
    let err = first.extend().await.expect_err("its majority jumped");
    assert!(
        matches!(
            err,
            LockError::LeaseLost {
                reason: LossReason::ClockJumped,
                ..
            }
        ),
        "{err}"
    );
    assert!(!first.is_valid());
    first.release().await;

    // The quarantine ends a TTL + drift after the jump was seen.
    tokio::time::sleep(TTL + b.drift() + Duration::from_millis(200)).await;
    let next = b
        .try_acquire("res")
        .await
        .expect("the jumped nodes vote again");
    // Node 2 alone is no majority: a jumped node voted.
    assert!(
        next.nodes()[..2]
            .iter()
            .any(|n| n.outcome == NodeOutcome::Granted),
        "{:?}",
        next.nodes()
    );
    assert!(next.fence().expect("fencing on") > first_token);
    next.release().await;
}

/// A renewing holder whose client sees the jump through another call (here an acquire
/// of another resource) hears of it at once: `lost()` fires with `ClockJumped` long
/// before its next renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewing_holder_hears_of_the_jump_at_once() {
    let cluster = Cluster::start_clocked(3);
    let a = client(&cluster, true);
    warm(&a).await;
    let renewing = held_everywhere(&cluster, &a, "renewed")
        .await
        .auto_renew(RenewOptions::default().interval(Duration::from_millis(2500)));
    leap(&cluster, LEAP_SECONDS);
    let err = a.try_acquire("poke").await.expect_err("only node 2 votes");
    assert!(
        jumped(cluster.reason_of(&err, 0).as_ref()) || jumped(cluster.reason_of(&err, 1).as_ref()),
        "{err}"
    );
    let reason = tokio::time::timeout(AT_ONCE, renewing.lost()).await;
    assert_eq!(reason.ok(), Some(LossReason::ClockJumped));
    assert!(!renewing.is_held());
    renewing.release().await;
}

/// A clock set back makes keys live longer: that breaks no lease, so the nodes keep
/// their votes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backward_jump_keeps_the_nodes_voting() {
    let cluster = Cluster::start_clocked(3);
    let a = client(&cluster, true);
    warm(&a).await;
    leap(&cluster, -LEAP_SECONDS);
    for _ in 0..3 {
        let lease = a.try_acquire("back").await.expect("no node is out");
        lease.release_all().await;
    }
}
