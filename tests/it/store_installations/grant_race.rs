//! A grant to an app racing its uninstall (ADR 0023 "Leftovers"): the
//! grant's transaction holds the app's installation row, so an uninstall
//! that holds it first (its CAS and its grant delete done, not yet
//! committed) makes the grant wait and then refuse, leaving no grant
//! behind. On PostgreSQL, whose READ COMMITTED snapshot would otherwise let
//! the grant see the row still live; the test plays the uninstall's
//! statements on a raw connection so it controls when they commit.

use std::time::{Duration, Instant};

use switchboard::domain::authz::level::{GrantPlace, Holder};
use switchboard::domain::authz::Level;
use switchboard::domain::PrincipalKind;
use switchboard::store::{StoreError, APP_NOT_INSTALLED};

use super::{no_events, operator_install, T};
use crate::store_places::{grant, someone, space};
use crate::support::legacy_db::LegacyDb;

/// Whether another transaction waits on `tx`'s own (for a row it holds),
/// asked on `tx` itself: the raw pool has one connection.
async fn someone_waits_on(tx: &mut sqlx::PgConnection) -> bool {
    let waiting: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted \
         AND transactionid::text = txid_current()::text",
    )
    .fetch_one(tx)
    .await
    .unwrap();
    waiting > 0
}

#[tokio::test]
async fn a_grant_racing_an_uninstall_waits_for_it_and_is_refused() {
    let (store, raw, _) = super::postgres_store().await;
    let LegacyDb::Postgres(pool) = raw else {
        unreachable!("a PostgreSQL store")
    };
    let app = someone(&store, PrincipalKind::App, "Werewolf").await;
    if store.installation(app).await.unwrap().is_none() {
        store
            .install(&operator_install(app, None, T + 1), &no_events)
            .await
            .unwrap();
    }
    let place = GrantPlace::Space(space(&store, "games").await);

    // The uninstall, half done: the row moved and the grants deleted,
    // uncommitted (its lock held).
    let mut uninstall = pool.begin().await.unwrap();
    let moved = sqlx::query(
        "UPDATE installations SET state = 'uninstalled', updated_at = updated_at + 1 \
         WHERE app_id = $1 AND state <> 'uninstalled'",
    )
    .bind(app)
    .execute(&mut *uninstall)
    .await
    .unwrap();
    assert_eq!(moved.rows_affected(), 1);
    sqlx::query("DELETE FROM grants WHERE subject_kind = 'principal' AND subject_id = $1")
        .bind(app)
        .execute(&mut *uninstall)
        .await
        .unwrap();

    let granting = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .put_grant(&grant(Holder::Principal(app), place, Level::Write))
                .await
        })
    };
    // The grant either waits on the row (the fix) or finishes at once,
    // having seen the row still live (no fix): whichever comes first.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !granting.is_finished() && !someone_waits_on(&mut uninstall).await {
        assert!(
            Instant::now() < deadline,
            "the grant neither waited nor finished"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    uninstall.commit().await.unwrap();

    let result = granting.await.unwrap();
    assert!(
        matches!(&result, Err(StoreError::Conflict(m)) if m == APP_NOT_INSTALLED),
        "{result:?}"
    );
    let left: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM grants WHERE subject_kind = 'principal' AND subject_id = $1",
    )
    .bind(app)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(left, 0, "no grant outlives the uninstall");
}
