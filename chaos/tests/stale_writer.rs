//! A stale holder's write is rejected by the fenced statements (real Postgres, real Redis).
//!
//! Deterministic: A is granted, stalls past its TTL, B is granted and writes, A writes last.

use crate::support;

use std::time::Duration;

use fenced_redlock::Redlock;
use fenced_redlock::pg::{Claim, CounterTable, Write};
use redlock_chaos::cluster::Cluster;
use redlock_chaos::pg;

const TTL: Duration = Duration::from_millis(200);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_writer_is_rejected_in_both_fenced_modes() {
    let (cluster, urls) = support::five_primaries().await;
    let server = support::postgres().await;
    let db = pg::connect(&server.dsn()).await.expect("connect");
    let table = CounterTable::default();
    table.create_if_missing(&db).await.expect("create");
    let lock = Redlock::builder(&urls)
        .ttl(TTL)
        .fencing(true)
        .build()
        .expect("config");

    // Write-only: A reads, stalls; B reads and writes; A's write is rejected.
    table.insert(&db, 1, 0).await.expect("row");
    let a = lock
        .acquire("row:1", Duration::from_secs(2))
        .await
        .expect("A");
    let fa = a.fence().expect("fence");
    let a_read = table.read(&db, 1).await.expect("read").expect("row");
    tokio::time::sleep(TTL.mul_f64(1.5)).await;
    assert!(
        !a.is_valid(),
        "A's lease must have run out during the stall"
    );
    let b = lock
        .acquire("row:1", Duration::from_secs(2))
        .await
        .expect("B");
    let fb = b.fence().expect("fence");
    assert!(fb > fa);
    let b_read = table.read(&db, 1).await.expect("read").expect("row");
    assert_eq!(
        table
            .write_only(&db, 1, fb, b_read + 1)
            .await
            .expect("B write"),
        Write::Accepted
    );
    assert_eq!(
        table
            .write_only(&db, 1, fa, a_read + 1)
            .await
            .expect("A write"),
        Write::Rejected
    );
    b.release().await;
    let _ = a.release().await;
    assert_eq!(table.read(&db, 1).await.expect("read"), Some(1));

    // Claim-first: A claims, stalls; B claims and writes; A's write is rejected.
    table.insert(&db, 2, 0).await.expect("row");
    let a = lock
        .acquire("row:2", Duration::from_secs(2))
        .await
        .expect("A");
    let fa = a.fence().expect("fence");
    let Claim::Claimed { value: a_value } = table.claim(&db, 2, fa).await.expect("A claim") else {
        panic!("A's claim must succeed on a fresh row");
    };
    tokio::time::sleep(TTL.mul_f64(1.5)).await;
    let b = lock
        .acquire("row:2", Duration::from_secs(2))
        .await
        .expect("B");
    let fb = b.fence().expect("fence");
    let Claim::Claimed { value: b_value } = table.claim(&db, 2, fb).await.expect("B claim") else {
        panic!("B's claim must succeed: its token is newer");
    };
    assert_eq!(
        table
            .write_claimed(&db, 2, fb, b_value + 1)
            .await
            .expect("B write"),
        Write::Accepted
    );
    assert_eq!(
        table
            .write_claimed(&db, 2, fa, a_value + 1)
            .await
            .expect("A write"),
        Write::Rejected
    );
    // A stale claim is rejected too.
    assert_eq!(
        table.claim(&db, 2, fa).await.expect("A reclaim"),
        Claim::Rejected
    );
    b.release().await;
    let _ = a.release().await;
    assert_eq!(table.read(&db, 2).await.expect("read"), Some(1));

    drop(db);
    cluster.down().await.expect("down");
}

/// The documented gap of write-only fencing: a stale write that lands between the next
/// holder's read and write is accepted, and the next holder then overwrites it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_only_misses_a_stale_write_between_read_and_write() {
    let (cluster, urls) = support::five_primaries().await;
    let server = support::postgres().await;
    let db = pg::connect(&server.dsn()).await.expect("connect");
    let table = CounterTable::default();
    table.create_if_missing(&db).await.expect("create");
    table.insert(&db, 3, 0).await.expect("row");
    let lock = Redlock::builder(&urls)
        .ttl(TTL)
        .fencing(true)
        .build()
        .expect("config");

    let a = lock
        .acquire("row:3", Duration::from_secs(2))
        .await
        .expect("A");
    let fa = a.fence().expect("fence");
    let a_read = table.read(&db, 3).await.expect("read").expect("row");
    tokio::time::sleep(TTL.mul_f64(1.5)).await;
    let b = lock
        .acquire("row:3", Duration::from_secs(2))
        .await
        .expect("B");
    let fb = b.fence().expect("fence");
    let b_read = table.read(&db, 3).await.expect("read").expect("row");
    assert_eq!(
        table.write_only(&db, 3, fa, a_read + 1).await.expect("A"),
        Write::Accepted
    );
    assert_eq!(
        table.write_only(&db, 3, fb, b_read + 1).await.expect("B"),
        Write::Accepted
    );
    assert_eq!(
        table.read(&db, 3).await.expect("read"),
        Some(1),
        "two increments, one lost"
    );
    b.release().await;
    let _ = a.release().await;
    drop(db);
    cluster.down().await.expect("down");
}

#[test]
fn postgres_server_is_removed_on_drop() {
    let server = redlock_chaos::pg::PgServer::start().expect("start");
    let port = server.port();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    drop(server);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "postgres still listening after drop"
    );
}
