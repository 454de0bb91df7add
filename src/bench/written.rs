//! Bytes a fan-out writes to the store, per delivery: the figure issue 13's
//! layout change is judged by. Read from the database itself, beside the hub
//! (its own connection), so the hub's code is measured, not instrumented.
//!
//! SQLite: `page_count * page_size` after `wal_checkpoint(TRUNCATE)`, so the
//! WAL is folded into the main file and neither checkpoint timing nor WAL
//! reuse skews the figure. PostgreSQL: growth of `pg_database_size`, and the
//! WAL written (`pg_current_wal_lsn()` difference, cluster-wide, which on the
//! throwaway server is this hub alone): the truer "written" figure.

use std::str::FromStr;

use sqlx::Connection as _;

use super::report::Entry;

/// One reading of the store's size (and, on PostgreSQL, its WAL position).
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    db_bytes: u64,
    wal_lsn: Option<u64>,
}

/// Reads the store named by `database_url` (the hub's own URL).
pub async fn mark(database_url: &str) -> anyhow::Result<Mark> {
    if database_url.starts_with("sqlite:") {
        sqlite_mark(database_url).await
    } else {
        postgres_mark(database_url).await
    }
}

/// Records the growth since `before` as totals and per delivery.
pub async fn record(
    entry: &mut Entry,
    database_url: &str,
    before: Mark,
    deliveries: usize,
) -> anyhow::Result<()> {
    let after = mark(database_url).await?;
    let per = |bytes: u64| (bytes as f64 / deliveries.max(1) as f64 * 10.0).round() / 10.0;
    let db = after.db_bytes.saturating_sub(before.db_bytes);
    entry.result("db_bytes_written", db);
    entry.result("db_bytes_per_delivery", per(db));
    if let (Some(a), Some(b)) = (after.wal_lsn, before.wal_lsn) {
        let wal = a.saturating_sub(b);
        entry.result("wal_bytes_written", wal);
        entry.result("wal_bytes_per_delivery", per(wal));
    }
    Ok(())
}

async fn sqlite_mark(url: &str) -> anyhow::Result<Mark> {
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)?.create_if_missing(false);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
    let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(&mut conn)
        .await?;
    anyhow::ensure!(
        busy == 0,
        "wal_checkpoint(TRUNCATE) could not complete: the hub was still writing"
    );
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
        .fetch_one(&mut conn)
        .await?;
    let page_size: i64 = sqlx::query_scalar("PRAGMA page_size")
        .fetch_one(&mut conn)
        .await?;
    conn.close().await?;
    Ok(Mark {
        db_bytes: (pages * page_size) as u64,
        wal_lsn: None,
    })
}

async fn postgres_mark(url: &str) -> anyhow::Result<Mark> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let (size, lsn): (i64, String) =
        sqlx::query_as("SELECT pg_database_size(current_database()), pg_current_wal_lsn()::text")
            .fetch_one(&mut conn)
            .await?;
    conn.close().await?;
    Ok(Mark {
        db_bytes: size as u64,
        wal_lsn: Some(parse_lsn(&lsn)?),
    })
}

/// `16/B374D848` → the byte position `0x16_B374D848`.
fn parse_lsn(text: &str) -> anyhow::Result<u64> {
    let (hi, lo) = text
        .split_once('/')
        .ok_or_else(|| anyhow::anyhow!("not an LSN: {text}"))?;
    Ok((u64::from_str_radix(hi, 16)? << 32) | u64::from_str_radix(lo, 16)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsn_text_is_a_byte_position() {
        assert_eq!(parse_lsn("0/0").unwrap(), 0);
        assert_eq!(
            parse_lsn("16/B374D848").unwrap(),
            (0x16 << 32) | 0xB374_D848
        );
        assert!(parse_lsn("16B374D848").is_err());
        assert!(parse_lsn("x/1").is_err());
    }
}
