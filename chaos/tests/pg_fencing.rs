//! `fenced_redlock::pg` against a real PostgreSQL: repeated writes under one claim, and a
//! table of the wrong shape reported as an error, not a panic.

use crate::support;

use fenced_redlock::FenceToken;
use fenced_redlock::pg::{Claim, CounterTable, PgError, Write};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_claim_writes_many_times_and_a_newer_claim_ends_it() {
    let pg = support::postgres().await;
    let client = redlock_chaos::pg::connect(&pg.dsn())
        .await
        .expect("connect");
    let table = CounterTable::new("claims").expect("name");
    table.create_if_missing(&client).await.expect("create");
    table.insert(&client, 1, 0).await.expect("insert");

    let t5 = FenceToken::new(5);
    let claim = table
        .claim_row(&client, 1, t5)
        .await
        .expect("claim")
        .expect("free row");
    assert_eq!((claim.value(), claim.id(), claim.fence()), (0, 1, t5));
    for v in 1..=3 {
        assert_eq!(
            claim.write(&client, v).await.expect("write"),
            Write::Accepted
        );
    }
    assert_eq!(table.read(&client, 1).await.expect("read"), Some(3));
    // The same token cannot claim twice: a second holder with an equal token (bare-majority
    // amnesia) is refused rather than interleaved.
    assert_eq!(
        table.claim(&client, 1, t5).await.expect("claim"),
        Claim::Rejected
    );
    assert!(
        table
            .claim_row(&client, 1, t5)
            .await
            .expect("claim")
            .is_none()
    );

    let newer = table
        .claim_row(&client, 1, FenceToken::new(6))
        .await
        .expect("claim")
        .expect("newer token");
    assert_eq!(newer.value(), 3);
    assert_eq!(
        claim.write(&client, 99).await.expect("write"),
        Write::Rejected
    );
    assert_eq!(
        newer.write(&client, 4).await.expect("write"),
        Write::Accepted
    );
    assert_eq!(table.read(&client, 1).await.expect("read"), Some(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_column_of_another_type_is_an_error() {
    let pg = support::postgres().await;
    let client = redlock_chaos::pg::connect(&pg.dsn())
        .await
        .expect("connect");
    client
        .batch_execute(
            "CREATE TABLE narrow (id int PRIMARY KEY, value int NOT NULL, \
             fence bigint NOT NULL DEFAULT 0)",
        )
        .await
        .expect("create");
    let table = CounterTable::new("narrow").expect("name");
    table.insert(&client, 1, 7).await.expect("insert");
    let read = table.read(&client, 1).await;
    assert!(
        matches!(
            &read,
            Err(PgError::ColumnType {
                column: "value",
                ..
            })
        ),
        "{read:?}"
    );
    let claim = table.claim(&client, 1, FenceToken::new(1)).await;
    assert!(
        matches!(&claim, Err(PgError::ColumnType { .. })),
        "{claim:?}"
    );
    let message = claim.expect_err("checked").to_string();
    assert!(message.contains("bigint"), "{message}");
}
