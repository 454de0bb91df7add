//! The verdict group commit on SQLite's writer thread (issue 13): the same
//! transaction as on a pool ([`crate::store::group_verdicts`], shared with
//! PostgreSQL), run there whole in one hand-off, as a send group is
//! (ADR 0022). Through sqlx each of a group's statements was a round trip
//! to a pooled connection's worker thread, and that connection re-read the
//! pages the writer's last commit changed.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::Connection;
use uuid::Uuid;

use super::conversations::mark_decided;
use super::writer::{lite_err, Writer};
use super::writer_exec::{run_ready, WriterExec};
use crate::store::conversations::Marked;
use crate::store::group_commit::GroupWriter;
use crate::store::group_verdicts::{decide_in, MarkDecided, VerdictWrite};
use crate::store::messages::{MessageDecided, MessageOutcome};
use crate::store::{StoreError, StoreResult};

/// The [`GroupWriter`] of verdicts on SQLite: one hand-off per transaction.
pub(super) struct ThreadVerdicts {
    writer: Arc<Writer>,
}

impl ThreadVerdicts {
    pub fn new(writer: Arc<Writer>) -> ThreadVerdicts {
        ThreadVerdicts { writer }
    }
}

#[async_trait]
impl GroupWriter<VerdictWrite, MessageDecided> for ThreadVerdicts {
    async fn write_one(&self, v: &VerdictWrite) -> StoreResult<MessageDecided> {
        let mut decided = self.write_group(&[v]).await?;
        decided
            .pop()
            .ok_or_else(|| StoreError::Corrupt("a verdict went unanswered".into()))
    }

    async fn write_group(&self, group: &[&VerdictWrite]) -> StoreResult<Vec<MessageDecided>> {
        let group: Vec<VerdictWrite> = group.iter().map(|v| (*v).clone()).collect();
        self.writer
            .run(move |conn| write_verdicts(conn, &group))
            .await
    }
}

#[async_trait]
impl MarkDecided for WriterExec<'_> {
    async fn mark_decided(
        &mut self,
        message_id: Uuid,
        outcome: &MessageOutcome,
        listed: bool,
    ) -> StoreResult<Marked> {
        mark_decided(self, message_id, outcome, listed).await
    }
}

/// The group in one immediate transaction: a verdict group reads before it
/// writes, and a deferred one would fail at its first write
/// (`SQLITE_BUSY_SNAPSHOT`, no wait) if another process (the operator
/// CLI) committed after its first read. On an
/// error it rolls back before the answer goes out; a panic's open
/// transaction is rolled back by the writer thread itself.
fn write_verdicts(
    conn: &mut Connection,
    group: &[VerdictWrite],
) -> StoreResult<Vec<MessageDecided>> {
    let group: Vec<&VerdictWrite> = group.iter().collect();
    conn.execute_batch("BEGIN IMMEDIATE").map_err(lite_err)?;
    let decided = run_ready(decide_in(&mut WriterExec(conn), &group));
    let end = if decided.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    if let Err(e) = conn.execute_batch(end) {
        if end == "COMMIT" {
            let _ = conn.execute_batch("ROLLBACK");
        }
        return Err(lite_err(e));
    }
    decided
}
