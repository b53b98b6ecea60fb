//! The restart quarantine against real servers: the amnesia-split shape (a holder on a
//! bare majority, one node of it restarted empty) with the guard on and off.

use crate::support;

use std::time::Duration;

use fenced_redlock::{
    Lease, LeaseStatus, LockError, LossReason, NodeError, NodeFailureReason, NodeOutcome, Redlock,
    RenewOptions, RestartQuarantine,
};
use redis::Commands;
use support::{Cluster, Flavour};
use tokio::task::block_in_place;
use tokio::time::Instant;

/// Short enough for a test, long enough that a restart and the calls after it fit into
/// one quarantine (TTL + drift = 3.032 s) on a loaded machine.
const TTL: Duration = Duration::from_secs(3);

/// How long a signal that is given at once may take on a busy two-core machine.
const AT_ONCE: Duration = Duration::from_millis(500);

/// A fresh server looks like a restarted one: wait until the cluster's servers are older
/// than the quarantine (uptime is whole seconds: 4 s of life shows at least 4 s, and the
/// quarantine is 3.032 s).
async fn past_first_start() {
    tokio::time::sleep(Duration::from_millis(4200)).await;
}

/// Calls on node `i` of the commands an acquire sends (`SET`, or the fenced script).
fn lock_calls(cluster: &Cluster, i: usize) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut cluster.servers[i].admin())
        .expect("INFO");
    stats
        .lines()
        .filter(|l| {
            ["cmdstat_set:", "cmdstat_eval:", "cmdstat_evalsha:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

fn client(cluster: &Cluster, quarantine: RestartQuarantine) -> Redlock {
    Redlock::builder(cluster.urls())
        .ttl(TTL)
        .node_timeout(Duration::from_millis(300))
        .fencing(true)
        .restart_quarantine(quarantine)
        .build()
        .expect("valid config")
}

/// A lease on nodes 0 and 1 only: node 2 holds the key for someone else during the
/// acquire, and lets it go after.
async fn held_on_0_and_1(cluster: &Cluster, redlock: &Redlock, resource: &str) -> Lease {
    let mut third = cluster.servers[2].admin();
    let _: () = third.set_ex(resource, "someone-else", 30).expect("SET");
    let before = block_in_place(|| lock_calls(cluster, 2));
    let lease = redlock
        .try_acquire(resource)
        .await
        .expect("0 and 1 are free");
    // The acquire may return before node 2 ran its SET NX: wait for it to be refused there.
    let until = Instant::now() + Duration::from_secs(5);
    while block_in_place(|| lock_calls(cluster, 2)) == before {
        assert!(Instant::now() < until, "node 2 never got the acquire");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _: () = third.del(resource).expect("DEL");
    let granted: Vec<usize> = (0..3)
        .filter(|&i| lease.nodes()[i].outcome == NodeOutcome::Granted)
        .collect();
    assert_eq!(granted, [0, 1], "{:?}", lease.nodes());
    lease
}

/// Someone else holds `key` on node `i` for a minute: that node refuses our acquires.
fn occupy(cluster: &Cluster, i: usize, key: &str) {
    let _: () = cluster.servers[i]
        .admin()
        .set_ex(key, "someone-else", 60)
        .expect("SET");
}

/// Kills node 1 and starts it again without its data; with `flush`, empties it with
/// FLUSHALL first (an operator's "clean" restart).
fn restart_empty(cluster: &mut Cluster, flush: bool) {
    block_in_place(|| {
        if flush {
            let _: () = redis::cmd("FLUSHALL")
                .query(&mut cluster.servers[1].admin())
                .expect("FLUSHALL");
        }
        cluster.servers[1].restart();
    });
}

/// Amnesia-split, guard on: holder A on {0, 1}; node 1 restarts empty; contender B (its
/// own client, as another process would be) must not get {1, 2} while A's key lives on
/// node 0. Without the quarantine B is granted there (see the test with it off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_empty_gets_no_vote_while_the_holder_lives() {
    for (flavour, flush) in [(Flavour::Redis, false), (Flavour::Valkey, true)] {
        let mut cluster = Cluster::start(flavour, 3);
        past_first_start().await;
        let (a, b) = (
            client(&cluster, RestartQuarantine::Auto),
            client(&cluster, RestartQuarantine::Auto),
        );
        // B has connections to the old node 1: it must see the restart on reconnect.
        b.try_acquire("warm").await.expect("free").release().await;
        let lease = held_on_0_and_1(&cluster, &a, "split").await;
        restart_empty(&mut cluster, flush);

        let err = b
            .try_acquire("split")
            .await
            .expect_err("node 1 is in quarantine: B has node 2's vote alone");
        assert!(
            matches!(
                cluster.reason_of(&err, 1),
                Some(NodeFailureReason::Error(NodeError::Quarantined { remaining }))
                    if remaining > Duration::ZERO && remaining <= TTL + b.drift()
            ),
            "{flavour:?}: {err}"
        );
        assert_eq!(
            cluster.reason_of(&err, 0),
            Some(NodeFailureReason::NotOurs),
            "{err}"
        );
        assert!(lease.is_valid(), "A's client has not seen the restart yet");
        // B's key on node 1 is cleaned up like any failed attempt's.
        let left = block_in_place(|| {
            let until = std::time::Instant::now() + Duration::from_secs(2);
            loop {
                let holding = cluster.holding("split");
                if holding == [0] || std::time::Instant::now() >= until {
                    return holding;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        assert_eq!(left, [0], "{flavour:?}: only A's key on node 0 is left");
        lease.release().await;
    }
}

/// A holder that counted on the restarted node hears of it as soon as its client next
/// reaches that node: a renewing lease's `lost()` fires at once (its next renewal is
/// seconds away), a plain lease is no longer valid and its extend fails with
/// `NodeRestarted`; and an extend that is itself the next contact says so too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_counted_on_the_restarted_node_loses_its_lease() {
    let mut cluster = Cluster::start(Flavour::Redis, 3);
    past_first_start().await;
    let a = client(&cluster, RestartQuarantine::Auto);
    let c = client(&cluster, RestartQuarantine::Auto);
    let renewing = held_on_0_and_1(&cluster, &a, "renewed")
        .await
        .auto_renew(RenewOptions::default().interval(Duration::from_millis(2500)));
    let mut plain = held_on_0_and_1(&cluster, &a, "plain").await;
    let mut other = held_on_0_and_1(&cluster, &c, "other").await;
    restart_empty(&mut cluster, false);

    // Any call of A's client reconnects node 1 and sees the new run_id.
    let poke = a.try_acquire("poke").await.expect("nodes 0 and 2 vote");
    // Its answer may come after the decision (it had to connect first), not as a yes.
    assert!(
        matches!(
            poke.nodes()[1].outcome,
            NodeOutcome::Failed(NodeError::Quarantined { .. }) | NodeOutcome::NoAnswer
        ),
        "{:?}",
        poke.nodes()
    );
    poke.release().await;
    let seen = Instant::now();
    let reason = tokio::time::timeout(AT_ONCE, renewing.lost()).await;
    assert_eq!(
        reason.ok(),
        Some(LossReason::NodeRestarted),
        "lost() silent {:?} after the restart was seen",
        seen.elapsed()
    );
    assert!(!renewing.is_held());
    assert!(!plain.is_valid());
    assert_eq!(plain.remaining(), Duration::ZERO);
    let err = plain.extend().await.expect_err("voided");
    assert!(
        matches!(
            err,
            LockError::LeaseLost {
                reason: LossReason::NodeRestarted,
                ..
            }
        ),
        "{err}"
    );

    // C's client has not been to node 1 since: its extend is the next contact.
    assert!(other.is_valid());
    let err = other.extend().await.expect_err("node 1 restarted");
    assert!(
        matches!(
            err,
            LockError::LeaseLost {
                reason: LossReason::NodeRestarted,
                ..
            }
        ),
        "{err}"
    );
    assert!(!other.is_valid());
    renewing.release().await;
    plain.release().await;
    other.release().await;
}

/// The quarantine ends: once TTL + drift has passed since the latest possible start, the
/// node votes again. Node 0 is held by someone else throughout, so every decision waits
/// for node 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_quarantine_the_node_votes_again() {
    let mut cluster = Cluster::start(Flavour::Valkey, 3);
    past_first_start().await;
    let redlock = client(&cluster, RestartQuarantine::Auto);
    assert_eq!(redlock.restart_quarantine(), Some(TTL + redlock.drift()));
    occupy(&cluster, 0, "back");
    restart_empty(&mut cluster, false);
    let err = redlock
        .try_acquire("back")
        .await
        .expect_err("node 1 does not vote");
    let Some(NodeFailureReason::Error(NodeError::Quarantined { remaining })) =
        cluster.reason_of(&err, 1)
    else {
        panic!("node 1 voted right after its restart: {err}");
    };
    assert!(remaining > Duration::ZERO && remaining <= TTL + redlock.drift());
    tokio::time::sleep(remaining + Duration::from_millis(100)).await;
    let lease = redlock
        .try_acquire("back")
        .await
        .expect("nodes 1 and 2 vote");
    assert_eq!(
        lease.nodes()[1].outcome,
        NodeOutcome::Granted,
        "{:?}",
        lease.nodes()
    );
    lease.release().await;
}

/// The control: with the quarantine off the same restart lets B in while A still holds
/// a valid lease (Kleppmann's amnesia-split). So it is the quarantine that prevents it in
/// the tests above. (The tokens differ here: A's fence write reached node 2 too, a few
/// microseconds after its grant; the model has the trace where it had not yet.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_quarantine_off_a_restart_lets_a_second_holder_in() {
    let mut cluster = Cluster::start(Flavour::Redis, 3);
    past_first_start().await;
    let (a, b) = (
        client(&cluster, RestartQuarantine::Off),
        client(&cluster, RestartQuarantine::Off),
    );
    assert_eq!(a.restart_quarantine(), None);
    let first = held_on_0_and_1(&cluster, &a, "split").await;
    restart_empty(&mut cluster, false);
    let second = b.try_acquire("split").await.expect("nodes 1 and 2 vote");
    assert!(first.is_valid() && second.is_valid(), "two holders");
    first.release().await;
    second.release().await;
}

/// A fenced lease is valid when it is granted, whichever nodes made each of its two
/// quorums: it once counted only the nodes that said yes in both rounds, so a lease whose
/// acquire was decided by one majority and its fence write by another was void from
/// birth (`is_valid()` false, extend failing with `NodeRestarted` though nothing
/// restarted). Five nodes, both rounds decided on the first three answers: the quorums
/// differ often.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_fenced_lease_is_valid_whichever_majorities_decided_its_rounds() {
    let cluster = Cluster::start(Flavour::Valkey, 5);
    past_first_start().await;
    let redlock = client(&cluster, RestartQuarantine::Auto);
    for i in 0..300 {
        let lease = redlock.try_acquire("fresh").await.expect("free");
        assert!(lease.is_valid(), "attempt {i}: {:?}", lease.nodes());
        lease.release_all().await;
    }
}

/// Kills node 1, starts it again empty, and then steps its wall clock `step_s` seconds
/// (libfaketime): its `uptime_in_seconds`, computed from the wall clock, is off by the step.
fn restart_empty_then_step(cluster: &mut Cluster, step_s: i64) {
    block_in_place(|| {
        cluster.servers[1].restart();
        cluster.servers[1].jump_clock(step_s);
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut cluster.servers[1].admin())
            .expect("INFO");
        let uptime = info
            .lines()
            .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
            .map(str::trim)
            .unwrap_or_default()
            .parse::<i64>()
            .expect("a number");
        assert!(
            if step_s < 0 {
                uptime < 0
            } else {
                uptime >= step_s
            },
            "the step shows in the uptime: {uptime} after {step_s:+} s"
        );
    });
}

/// Amnesia-split with the restarted node's wall clock stepped after its start (issue
/// 48): back 30 s, its uptime is negative, which once meant "start unknown" and a vote
/// at once; forward 60 s, it overstates the uptime by a minute, which once ended the
/// quarantine before it began. B saw the old server (it warmed its connections), so it
/// knows the new one started after that: out either way, while A's key lives on node 0.
/// A fresh client D, which never saw the old server, has only the uptime: a negative one
/// fails closed; the forward step it cannot see (docs/trade-offs.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stepped_clock_does_not_let_a_restarted_node_vote_early() {
    for step_s in [-30, 60] {
        let mut cluster = Cluster::start_clocked(3);
        past_first_start().await;
        let (a, b) = (
            client(&cluster, RestartQuarantine::Auto),
            client(&cluster, RestartQuarantine::Auto),
        );
        b.try_acquire("warm").await.expect("free").release().await;
        let lease = held_on_0_and_1(&cluster, &a, "split").await;
        restart_empty_then_step(&mut cluster, step_s);

        let outcome = b.try_acquire("split").await;
        let err = match outcome {
            Ok(second) => {
                let both = lease.is_valid() && second.is_valid();
                second.release().await;
                panic!("step {step_s:+} s: B granted, two holders: {both}");
            }
            Err(err) => err,
        };
        assert!(
            matches!(
                cluster.reason_of(&err, 1),
                Some(NodeFailureReason::Error(NodeError::Quarantined { remaining }))
                    if remaining > Duration::ZERO && remaining <= TTL + b.drift()
            ),
            "step {step_s:+} s: {err}"
        );
        if step_s < 0 {
            let d = client(&cluster, RestartQuarantine::Auto);
            let err = d
                .try_acquire("split")
                .await
                .expect_err("a negative uptime is a start now");
            assert!(
                matches!(
                    cluster.reason_of(&err, 1),
                    Some(NodeFailureReason::Error(NodeError::Quarantined { .. }))
                ),
                "fresh client: {err}"
            );
        }
        assert!(lease.is_valid(), "A's client has not seen the restart yet");
        lease.release().await;
    }
}

/// One long `extend_for` grows `Auto`'s quarantine for nodes that start from then on,
/// not for one that started before it (issue 48): no lease of the longer TTL can have had
/// that node's vote. Once it kept every node that started in the last minute out for a
/// minute, for the life of the client (reproduced: every acquire refused for ~57 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_longer_ttl_used_later_does_not_lengthen_an_earlier_start() {
    let mut cluster = Cluster::start(Flavour::Valkey, 3);
    past_first_start().await;
    let redlock = client(&cluster, RestartQuarantine::Auto);
    occupy(&cluster, 0, "late");
    restart_empty(&mut cluster, false);
    // Node 1 is new and out: the next lease is granted by nodes 0 and 2.
    let _: () = cluster.servers[0].admin().del("late").expect("DEL");
    let mut long = redlock
        .try_acquire("long")
        .await
        .expect("nodes 0 and 2 vote");
    long.extend_for(Duration::from_secs(60))
        .await
        .expect("nodes 0 and 2 extend");
    assert!(redlock.restart_quarantine() >= Some(Duration::from_secs(60)));
    long.release().await;
    occupy(&cluster, 0, "late");
    // Node 1 started before the 60 s TTL was used: out for TTL + drift, not a minute.
    tokio::time::sleep(TTL + redlock.drift() + Duration::from_millis(200)).await;
    let lease = redlock
        .try_acquire("late")
        .await
        .expect("nodes 1 and 2 vote after TTL + drift");
    assert_eq!(lease.nodes()[1].outcome, NodeOutcome::Granted);
    lease.release().await;
}

/// A lease whose client has already seen the restart of a node it counted, handed to
/// `auto_renew` only then: the renewer reports it lost at once. It once subscribed to
/// restarts when its task started, missed this one, and said `Held` until its first
/// renewal (0.99 s here with a 3 s TTL, while `is_valid()` was false).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_voided_before_auto_renew_is_reported_lost_at_once() {
    let mut cluster = Cluster::start(Flavour::Redis, 3);
    past_first_start().await;
    let a = client(&cluster, RestartQuarantine::Auto);
    let lease = held_on_0_and_1(&cluster, &a, "late").await;
    restart_empty(&mut cluster, false);
    // Any call of A's client reconnects node 1; its answer (and with it the new run_id)
    // may come after the poke returned.
    a.try_acquire("poke")
        .await
        .expect("nodes 0 and 2 vote")
        .release()
        .await;
    let until = Instant::now() + Duration::from_secs(2);
    while lease.is_valid() {
        assert!(Instant::now() < until, "A's client never saw the restart");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        Instant::now() < lease.valid_until(),
        "voided by the restart, not expired"
    );
    let interval = Duration::from_millis(2500);
    let renewing = lease.auto_renew(RenewOptions::default().interval(interval));
    assert_eq!(
        renewing.status(),
        LeaseStatus::Lost(LossReason::NodeRestarted),
        "a void lease reported held by its renewer"
    );
    assert!(!renewing.is_held());
    let reason = tokio::time::timeout(AT_ONCE, renewing.lost()).await;
    assert_eq!(reason.ok(), Some(LossReason::NodeRestarted));
    renewing.release().await;
}
