//! The shared queries (ADR 0014) on the writer thread's connection, so a
//! whole transaction written against [`Executor`] (the verdict group) runs
//! there in one hand-off, as the send group does (ADR 0022).
//!
//! The executor's methods are `async` only because the trait is: on this
//! connection each one runs to completion at its first poll. [`run_ready`]
//! polls such a future once on the writer thread and refuses one that is
//! not ready, so nothing on that thread ever waits on the async runtime.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;
use uuid::Uuid;

use super::send_writer;
use super::uuid;
use super::writer::{bind_numbered, lite_err, note_statement};
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;
use crate::store::sql::{Arg, Columns, Executor, Row};
use crate::store::{StoreError, StoreResult};

/// The writer thread's connection as an [`Executor`]. It holds the
/// connection by `&mut` (a `rusqlite::Connection` is `Send`, not `Sync`),
/// which the trait's `Send` bound needs.
pub(super) struct WriterExec<'c>(pub &'c mut Connection);

/// A row read on the writer thread: its values by column name, read as the
/// sqlx rows of the same file are (ids and JSON as text, bools as integers).
pub struct WriterRow {
    names: Vec<String>,
    values: Vec<Value>,
}

/// Runs a future made of [`WriterExec`] calls to its end on this thread.
pub(super) fn run_ready<T>(work: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(work).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => Err(StoreError::Database(sqlx::Error::Protocol(
            "a transaction on the SQLite writer thread awaited something other than its connection"
                .into(),
        ))),
    }
}

impl WriterExec<'_> {
    fn rows(&mut self, sql: &str, args: &[Arg<'_>], limit: usize) -> StoreResult<Vec<Row>> {
        note_statement();
        let mut stmt = self.0.prepare_cached(sql).map_err(lite_err)?;
        bind_numbered(&mut stmt, args).map_err(lite_err)?;
        let names: Vec<String> = stmt.column_names().iter().map(|n| n.to_string()).collect();
        let mut rows = stmt.raw_query();
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(r) = rows.next().map_err(lite_err)? else {
                break;
            };
            let values = (0..names.len())
                .map(|i| r.get_ref(i).map(Value::from))
                .collect::<rusqlite::Result<Vec<Value>>>()
                .map_err(lite_err)?;
            out.push(Row::SqliteWriter(WriterRow {
                names: names.clone(),
                values,
            }));
        }
        Ok(out)
    }
}

#[async_trait]
impl Executor for WriterExec<'_> {
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<u64> {
        note_statement();
        let mut stmt = self.0.prepare_cached(sql).map_err(lite_err)?;
        bind_numbered(&mut stmt, args).map_err(lite_err)?;
        Ok(stmt.raw_execute().map_err(lite_err)? as u64)
    }

    async fn fetch_optional(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Option<Row>> {
        Ok(self.rows(sql, args, 1)?.pop())
    }

    async fn fetch_all(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Vec<Row>> {
        self.rows(sql, args, usize::MAX)
    }

    async fn append_events(
        &mut self,
        events: &[NewEvent],
        now: Millis,
    ) -> StoreResult<Vec<StoredEvent>> {
        send_writer::append_events(self.0, events, now)
    }

    async fn insert_recipients(
        &mut self,
        message_id: Uuid,
        recipients: &[Uuid],
    ) -> StoreResult<()> {
        let pairs: Vec<(Uuid, Uuid)> = recipients.iter().map(|r| (message_id, *r)).collect();
        send_writer::insert_recipients(self.0, &pairs)
    }
}

impl WriterRow {
    fn get(&self, col: &str) -> StoreResult<ValueRef<'_>> {
        self.names
            .iter()
            .position(|n| n == col)
            .map(|i| ValueRef::from(&self.values[i]))
            .ok_or_else(|| StoreError::Database(sqlx::Error::ColumnNotFound(col.to_string())))
    }

    fn opt_text_ref(&self, col: &str) -> StoreResult<Option<&str>> {
        match self.get(col)? {
            ValueRef::Null => Ok(None),
            ValueRef::Text(t) => std::str::from_utf8(t)
                .map(Some)
                .map_err(|_| corrupt(col, "text that is not UTF-8")),
            _ => Err(corrupt(col, "a value that is not text")),
        }
    }
}

fn corrupt(col: &str, what: &str) -> StoreError {
    StoreError::Corrupt(format!("column {col} holds {what}"))
}

fn required<T>(col: &str, v: Option<T>) -> StoreResult<T> {
    v.ok_or_else(|| corrupt(col, "NULL"))
}

impl Columns for WriterRow {
    fn id(&self, col: &str) -> StoreResult<Uuid> {
        uuid(required(col, self.opt_text_ref(col)?)?)
    }

    fn opt_id(&self, col: &str) -> StoreResult<Option<Uuid>> {
        self.opt_text_ref(col)?.map(uuid).transpose()
    }

    fn text(&self, col: &str) -> StoreResult<String> {
        required(col, self.opt_text(col)?)
    }

    fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        Ok(self.opt_text_ref(col)?.map(str::to_string))
    }

    fn int(&self, col: &str) -> StoreResult<i64> {
        required(col, self.opt_int(col)?)
    }

    fn opt_int(&self, col: &str) -> StoreResult<Option<i64>> {
        match self.get(col)? {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(i) => Ok(Some(i)),
            _ => Err(corrupt(col, "a value that is not an integer")),
        }
    }

    fn json(&self, col: &str) -> StoreResult<String> {
        self.text(col)
    }

    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>> {
        match self.get(col)? {
            ValueRef::Blob(b) => Ok(b.to_vec()),
            ValueRef::Text(t) => Ok(t.to_vec()),
            _ => Err(corrupt(col, "a value that is not a blob")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE t (id TEXT, n INTEGER, note TEXT, data BLOB);
             INSERT INTO t VALUES ('6f1c3a58-31a8-4bb4-9a3e-2ad3c6f1a001', 7, NULL, x'0102');",
        )
        .unwrap();
        c
    }

    #[test]
    fn reads_rows_as_the_sqlx_rows_of_the_same_file() {
        let mut c = conn();
        let mut ex = WriterExec(&mut c);
        let row = run_ready(ex.fetch_optional(
            "SELECT id, n, note, data FROM t WHERE n = $1",
            &[Arg::Int(7)],
        ))
        .unwrap()
        .expect("the row");
        assert_eq!(
            row.id("id").unwrap().to_string(),
            "6f1c3a58-31a8-4bb4-9a3e-2ad3c6f1a001"
        );
        assert_eq!(row.int("n").unwrap(), 7);
        assert_eq!(row.opt_text("note").unwrap(), None);
        assert!(matches!(row.text("note"), Err(StoreError::Corrupt(_))));
        assert_eq!(row.bytes("data").unwrap(), vec![1, 2]);
        assert!(row.int("missing").is_err());
        let none = run_ready(ex.fetch_optional("SELECT n FROM t WHERE n = $1", &[Arg::Int(8)]));
        assert!(none.unwrap().is_none());
    }

    #[test]
    fn execute_counts_changed_rows_and_binds_by_number() {
        let mut c = conn();
        let mut ex = WriterExec(&mut c);
        let changed = run_ready(ex.execute(
            "UPDATE t SET note = $2 WHERE n = $1",
            &[Arg::Int(7), Arg::Text("x")],
        ))
        .unwrap();
        assert_eq!(changed, 1);
        let rows = run_ready(ex.fetch_all("SELECT note FROM t", &[])).unwrap();
        assert_eq!(rows[0].text("note").unwrap(), "x");
    }

    #[test]
    fn a_future_that_waits_is_refused_not_blocked_on() {
        let pending = std::future::pending::<StoreResult<()>>();
        assert!(run_ready(pending).is_err());
    }
}
