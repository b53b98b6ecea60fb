//! fenced-redlock's `claim_first_pg` example against five real primaries and a real
//! PostgreSQL (it lives here, beside the rig's PostgreSQL fixture): every increment lands,
//! and a write under a superseded claim is refused.

use crate::support;

#[allow(dead_code, unreachable_pub)]
#[path = "../../redlock/examples/claim_first_pg.rs"]
mod claim_first_pg;

use fenced_redlock::FenceToken;
use fenced_redlock::pg::{CounterTable, Write};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_first_example_counts_every_increment_and_refuses_a_stale_claim() {
    let (_cluster, urls) = support::five_primaries().await;
    let pg = support::postgres().await;
    let (value, refused) = claim_first_pg::run(&urls, &pg.dsn(), 10)
        .await
        .expect("runs");
    assert_eq!((value, refused), (10, 0));

    // A claim made under a token newer than any grant so far supersedes the example's
    // next claim before it writes: that write is refused, the value stays.
    let client = redlock_chaos::pg::connect(&pg.dsn())
        .await
        .expect("connect");
    let table = CounterTable::new("example_counters").expect("name");
    let old = table
        .claim_row(&client, 1, FenceToken::new(1_000))
        .await
        .expect("claim")
        .expect("free row");
    let newer = table
        .claim_row(&client, 1, FenceToken::new(1_001))
        .await
        .expect("claim")
        .expect("newer token");
    assert_eq!(
        old.write(&client, 99).await.expect("write"),
        Write::Rejected
    );
    assert_eq!(
        newer.write(&client, 11).await.expect("write"),
        Write::Accepted
    );
}
