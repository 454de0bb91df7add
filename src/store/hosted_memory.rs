//! The hosted store's per-app memory (`remember`, `recall`, bounded by
//! `hosted.memory_max_keys`) and `coord` registers (ADR 0031 §7): `coord`
//! is one conditional statement per case, so it holds no lock across a
//! read.

use uuid::Uuid;

use super::hosted::CoordOutcome;
use super::sql::{Arg, Database};
use super::{StoreError, StoreResult};
use crate::domain::Millis;

pub(super) async fn remember(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    key: &str,
    value: &str,
    max_keys: u64,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = db.begin().await?;
    let updated = tx
        .execute(
            "UPDATE app_memory SET value = $1, updated_at = $2 WHERE app_id = $3 AND key = $4",
            &[
                Arg::Text(value),
                Arg::Int(now),
                Arg::Id(app_id),
                Arg::Text(key),
            ],
        )
        .await?;
    if updated == 0 {
        // A new key: counted inside the write transaction (SQLite's
        // writer lock; on PostgreSQL two racing inserts may both pass
        // the count by one, which bounds the overshoot by the racers).
        let count = tx
            .fetch_optional(
                "SELECT COUNT(*) AS n FROM app_memory WHERE app_id = $1",
                &[Arg::Id(app_id)],
            )
            .await?
            .map(|r| r.int("n"))
            .transpose()?
            .unwrap_or(0);
        if count as u64 >= max_keys {
            return Err(StoreError::Conflict(format!(
                "the app's memory holds hosted.memory_max_keys ({max_keys}) keys"
            )));
        }
        tx.execute(
            "INSERT INTO app_memory (app_id, key, value, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (app_id, key) DO UPDATE SET value = $3, updated_at = $4",
            &[
                Arg::Id(app_id),
                Arg::Text(key),
                Arg::Text(value),
                Arg::Int(now),
            ],
        )
        .await?;
    }
    tx.commit().await
}

pub(super) async fn recall(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    key: &str,
) -> StoreResult<Option<String>> {
    let row = db
        .read()
        .await?
        .fetch_optional(
            "SELECT value FROM app_memory WHERE app_id = $1 AND key = $2",
            &[Arg::Id(app_id), Arg::Text(key)],
        )
        .await?;
    row.map(|r| r.text("value")).transpose()
}

pub(super) async fn coord(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    key: &str,
    expect: Option<&str>,
    value: Option<&str>,
) -> StoreResult<CoordOutcome> {
    let (id, k) = (Arg::Id(app_id), Arg::Text(key));
    let swapped_version = match (expect, value) {
        (None, None) => {
            let (current, version) = coord_read(db, app_id, key).await?;
            return Ok(CoordOutcome {
                swapped: current.is_none(),
                value: current,
                version,
            });
        }
        (None, Some(v)) => {
            let mut w = db.write().await?;
            let n = w
                .execute(
                    "INSERT INTO app_coord (app_id, key, value, version) VALUES ($1, $2, $3, 1) \
                     ON CONFLICT (app_id, key) DO NOTHING",
                    &[id, k, Arg::Text(v)],
                )
                .await?;
            (n == 1).then_some(1)
        }
        (Some(e), Some(v)) => {
            let mut w = db.write().await?;
            w.fetch_optional(
                "UPDATE app_coord SET value = $1, version = version + 1 \
                 WHERE app_id = $2 AND key = $3 AND value = $4 RETURNING version",
                &[Arg::Text(v), id, k, Arg::Text(e)],
            )
            .await?
            .map(|r| r.int("version"))
            .transpose()?
        }
        (Some(e), None) => {
            let mut w = db.write().await?;
            let n = w
                .execute(
                    "DELETE FROM app_coord WHERE app_id = $1 AND key = $2 AND value = $3",
                    &[id, k, Arg::Text(e)],
                )
                .await?;
            (n == 1).then_some(0)
        }
    };
    match swapped_version {
        Some(version) => Ok(CoordOutcome {
            swapped: true,
            value: value.map(str::to_string),
            version,
        }),
        None => {
            let (current, version) = coord_read(db, app_id, key).await?;
            Ok(CoordOutcome {
                swapped: false,
                value: current,
                version,
            })
        }
    }
}

async fn coord_read(
    db: &(impl Database + ?Sized),
    app: Uuid,
    key: &str,
) -> StoreResult<(Option<String>, i64)> {
    let row = db
        .read()
        .await?
        .fetch_optional(
            "SELECT value, version FROM app_coord WHERE app_id = $1 AND key = $2",
            &[Arg::Id(app), Arg::Text(key)],
        )
        .await?;
    Ok(match row {
        Some(r) => (Some(r.text("value")?), r.int("version")?),
        None => (None, 0),
    })
}
