//! PostgreSQL: selected by a `postgres://` database URL. Ids are native
//! `uuid`, manifests `jsonb`, times Unix millis in `bigint`.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::Row;
use uuid::Uuid;

use super::group_commit::{
    assign_seqs, audience_runs, conversation_counts, group_delivery, group_jobs, recipient_pairs,
    verdict_column, GroupCommit, GroupWriter,
};
use super::sqlite::verdict_of;
use super::{
    AppRecord, Backend, CardRecord, CreatedConversation, CreatedLease, Effects, Fanout,
    IdempotencyRecord, IdempotentResponse, InsertedMessage, Job, JobKind, KeyRecord, LeaseChange,
    MessageDecided, MessageOutcome, MessagePage, NewConversation, NewJob, NewKey, NewLease,
    NewMessage, NewPrincipal, NewTask, PrincipalRecord, SigningKeyRecord, Store, StoreError,
    StoreResult, TaskRecord, Verdict,
};
use crate::domain::conversation::{Conversation, ConversationKind};
use crate::domain::event::{rfc3339, NewEvent, StoredEvent, StreamPosition};
use crate::domain::lease::{Lease, LeaseState};
use crate::domain::manifest::Manifest;
use crate::domain::message::{Message, Origin};
use crate::domain::task::{Task, TaskFailure, TaskParticipant, TaskRole, TaskState};
use crate::domain::{Millis, PrincipalKind};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

pub struct PgStore {
    pool: PgPool,
    /// Sends, group-committed (ADR 0013). Other writes run concurrently.
    sends: GroupCommit,
}

impl PgStore {
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .connect(url)
            .await?;
        Ok(PgStore {
            sends: GroupCommit::new(
                Arc::new(tokio::sync::Mutex::new(())),
                Arc::new(PgSends { pool: pool.clone() }),
            ),
            pool,
        })
    }
}

fn kind(s: &str) -> StoreResult<PrincipalKind> {
    PrincipalKind::parse(s).ok_or_else(|| StoreError::Corrupt(format!("bad principal kind {s:?}")))
}

fn principal_row(row: &PgRow) -> StoreResult<PrincipalRecord> {
    Ok(PrincipalRecord {
        id: row.try_get("id")?,
        kind: kind(row.try_get("kind")?)?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        created_at: row.try_get("created_at")?,
    })
}

async fn insert_principal(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    p: &NewPrincipal,
    key: &NewKey,
) -> StoreResult<()> {
    sqlx::query("INSERT INTO principals (id, kind, name, description, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(p.id)
        .bind(p.kind.as_str())
        .bind(&p.name)
        .bind(&p.description)
        .bind(p.created_at)
        .execute(&mut **tx)
        .await?;
    insert_key(tx, p.id, key, p.created_at).await
}

async fn insert_key(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    principal_id: Uuid,
    key: &NewKey,
    now: Millis,
) -> StoreResult<()> {
    sqlx::query("INSERT INTO principal_keys (key_id, principal_id, secret_hash, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&key.key_id)
        .bind(principal_id)
        .bind(&key.secret_hash[..])
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict("key id already exists".into())
            }
            other => StoreError::Database(other),
        })?;
    Ok(())
}

async fn revoke_active(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    principal_id: Uuid,
    now: Millis,
) -> StoreResult<Vec<String>> {
    let rows = sqlx::query(
        "UPDATE principal_keys SET revoked_at = $1 WHERE principal_id = $2 AND revoked_at IS NULL RETURNING key_id",
    )
    .bind(now)
    .bind(principal_id)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(|r| Ok(r.try_get("key_id")?)).collect()
}

async fn insert_idempotency(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    idem: Option<&IdempotencyRecord>,
    now: Millis,
) -> StoreResult<()> {
    let Some(r) = idem else { return Ok(()) };
    sqlx::query(
        "INSERT INTO idempotency_keys (scope, key, request_hash, status, response, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&r.scope)
    .bind(&r.key)
    .bind(&r.result.request_hash)
    .bind(r.result.status as i32)
    .bind(&r.result.response)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(|e| if is_unique_violation(&e) { StoreError::IdempotencyTaken } else { e.into() })?;
    Ok(())
}

async fn insert_job(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    job: &NewJob,
    now: Millis,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO jobs (id, kind, subject, run_at, created_at, locked_until, attempts) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(job.id)
    .bind(job.kind.as_str())
    .bind(job.subject)
    .bind(job.run_at)
    .bind(now)
    .bind(job.claimed_until)
    .bind(job.initial_attempts())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn insert_conversation(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    c: &NewConversation,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO conversations (id, kind, name, task_id, direct_key, created_by, created_at, template_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(c.id)
    .bind(c.kind.as_str())
    .bind(&c.name)
    .bind(c.task_id)
    .bind(&c.direct_key)
    .bind(c.created_by)
    .bind(c.created_at)
    .bind(&c.template_key)
    .execute(&mut **tx)
    .await?;
    for p in &c.participants {
        sqlx::query("INSERT INTO conversation_participants (conversation_id, principal_id, joined_at) VALUES ($1, $2, $3)")
            .bind(c.id)
            .bind(p)
            .bind(c.created_at)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Applies the effects of a state change inside its transaction.
async fn apply_effects(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    effects: &Effects,
    now: Millis,
) -> StoreResult<Vec<StoredEvent>> {
    finish_job(tx, effects.finish_job).await?;
    for job in &effects.schedule {
        insert_job(tx, job, now).await?;
    }
    for c in &effects.conversations {
        insert_conversation(tx, c).await?;
    }
    append_events(tx, &effects.events, now).await
}

async fn finish_job(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    job: Option<Uuid>,
) -> StoreResult<()> {
    if let Some(id) = job {
        sqlx::query("DELETE FROM jobs WHERE id = $1")
            .bind(id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

async fn load_task(conn: &mut sqlx::PgConnection, row: &PgRow) -> StoreResult<TaskRecord> {
    let id: Uuid = row.try_get("id")?;
    let state: String = row.try_get("state")?;
    let rows = sqlx::query(
        "SELECT agent_id, role FROM task_participants WHERE task_id = $1 ORDER BY role, agent_id",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let mut participants = Vec::with_capacity(rows.len());
    for r in &rows {
        let role: String = r.try_get("role")?;
        participants.push(TaskParticipant {
            agent_id: r.try_get("agent_id")?,
            role: TaskRole::parse(&role)
                .ok_or_else(|| StoreError::Corrupt(format!("bad role {role:?}")))?,
        });
    }
    let code: Option<String> = row.try_get("failure_code")?;
    let reason: Option<String> = row.try_get("failure_reason")?;
    Ok(TaskRecord {
        task: Task {
            id,
            app_id: row.try_get("app_id")?,
            initiator_id: row.try_get("initiator_id")?,
            state: TaskState::parse(&state)
                .ok_or_else(|| StoreError::Corrupt(format!("bad state {state:?}")))?,
            participants,
            failure: code.map(|code| TaskFailure { code, reason }),
            created_at: rfc3339(row.try_get("created_at")?),
            updated_at: rfc3339(row.try_get("updated_at")?),
        },
        initial_conversation: row.try_get("initial_conversation")?,
    })
}

const TASK_COLUMNS: &str =
    "t.id, t.app_id, t.initiator_id, t.state, t.failure_code, t.failure_reason, t.initial_conversation, t.created_at, t.updated_at";

fn lease_row(row: &PgRow) -> StoreResult<Lease> {
    let state: String = row.try_get("state")?;
    let expires: Option<i64> = row.try_get("expires_at")?;
    Ok(Lease {
        lease_id: row.try_get("id")?,
        message_id: row.try_get("message_id")?,
        conversation_id: row.try_get("conversation_id")?,
        recipient_id: row.try_get("recipient_id")?,
        state: LeaseState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("bad lease state {state:?}")))?,
        reason: row.try_get("reason")?,
        expires_at: expires.map(rfc3339),
        created_at: rfc3339(row.try_get("created_at")?),
    })
}

const LEASE_COLUMNS: &str =
    "id, message_id, conversation_id, recipient_id, state, reason, expires_at, created_at";

fn job_row(row: &PgRow) -> StoreResult<Job> {
    let kind: String = row.try_get("kind")?;
    Ok(Job {
        id: row.try_get("id")?,
        kind: JobKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("bad job kind {kind:?}")))?,
        subject: row.try_get("subject")?,
        attempts: row.try_get::<i64, _>("attempts")? as u32,
    })
}

/// `$first, $first+1, ...`: `n` numbered placeholders.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One statement per 500 recipients instead of one per recipient.
async fn insert_recipients(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    message_id: Uuid,
    recipients: &[Uuid],
) -> StoreResult<()> {
    for chunk in recipients.chunks(500) {
        let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO message_recipients (message_id, recipient_id) ",
        );
        q.push_values(chunk, |mut row, r| {
            row.push_bind(message_id).push_bind(*r);
        });
        q.build().execute(&mut **tx).await?;
    }
    Ok(())
}

fn json_err(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// Appends events inside the caller's transaction. The upsert takes the
/// audience's `event_streams` row lock until commit, so a second writer to
/// the same audience gets the next seq only after the first committed:
/// commit order equals seq order, and a reader never sees a later seq
/// before an earlier one.
async fn append_events(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    events: &[NewEvent],
    now: Millis,
) -> StoreResult<Vec<StoredEvent>> {
    // Events are grouped by audience (a stable sort keeps each audience's
    // events in order); each upsert takes up to 400 audiences and adds each
    // one's whole count, so a fan-out, or a group of messages to the same
    // members, costs two statements per 400 audiences. Rows are locked in
    // audience order, the same in every transaction, so two writers to
    // overlapping audiences cannot deadlock.
    let (sorted, runs) = audience_runs(events);
    let mut json_of: std::collections::HashMap<usize, String> = std::collections::HashMap::new();
    let mut stored = Vec::with_capacity(sorted.len());
    for chunk in runs.chunks(400) {
        let mut upsert = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO event_streams (audience, last_seq) ",
        );
        upsert.push_values(chunk, |mut row, (audience, _, count)| {
            row.push_bind(*audience).push_bind(*count as i64);
        });
        upsert.push(
            " ON CONFLICT (audience) DO UPDATE SET last_seq = event_streams.last_seq + excluded.last_seq \
             RETURNING audience, last_seq",
        );
        let mut last_of = std::collections::HashMap::with_capacity(chunk.len());
        for r in upsert.build().fetch_all(&mut **tx).await? {
            last_of.insert(
                r.try_get::<Uuid, _>("audience")?,
                r.try_get::<i64, _>("last_seq")?,
            );
        }
        let mut rows = Vec::new();
        for (audience, first, count) in chunk {
            let last = *last_of
                .get(audience)
                .ok_or_else(|| StoreError::Corrupt("upsert returned no seq".into()))?;
            for (k, e) in sorted[*first..first + count].iter().enumerate() {
                let seq = last - *count as i64 + 1 + k as i64;
                let ptr = std::sync::Arc::as_ptr(&e.payload) as usize;
                if let std::collections::hash_map::Entry::Vacant(slot) = json_of.entry(ptr) {
                    slot.insert(serde_json::to_string(&*e.payload).map_err(json_err)?);
                }
                rows.push((*e, seq, ptr));
            }
        }
        for part in rows.chunks(1000) {
            let mut insert = sqlx::QueryBuilder::<sqlx::Postgres>::new(
                "INSERT INTO events (audience, seq, id, type, occurred_at, payload) ",
            );
            insert.push_values(part, |mut row, (e, seq, ptr)| {
                row.push_bind(e.audience)
                    .push_bind(*seq)
                    .push_bind(e.id)
                    .push_bind(e.event_type)
                    .push_bind(now)
                    .push_bind(json_of[ptr].clone())
                    .push_unseparated("::jsonb");
            });
            insert.build().execute(&mut **tx).await?;
        }
        for (e, seq, _) in rows {
            stored.push(StoredEvent {
                id: e.id,
                audience: e.audience,
                seq: seq as u64,
                event_type: e.event_type.to_string(),
                occurred_at: now,
                payload: e.payload.clone(),
            });
        }
    }
    Ok(stored)
}

fn event_row(row: &PgRow) -> StoreResult<StoredEvent> {
    let payload: String = row.try_get("payload")?;
    Ok(StoredEvent {
        id: row.try_get("id")?,
        audience: row.try_get("audience")?,
        seq: row.try_get::<i64, _>("seq")? as u64,
        event_type: row.try_get("type")?,
        occurred_at: row.try_get("occurred_at")?,
        payload: serde_json::from_str(&payload).map_err(json_err)?,
    })
}

const MESSAGE_COLUMNS: &str =
    "m.id, m.conversation_id, m.seq, m.sender_id, m.origin, m.parts::text AS parts, \
     m.reply_to, m.request_hash, m.verdict, m.verdict_reason, m.created_at, \
     (SELECT COUNT(*) FROM message_recipients r WHERE r.message_id = m.id) AS recipients";

fn message_row(row: &PgRow) -> StoreResult<(Message, Verdict, Option<String>)> {
    let parts: String = row.try_get("parts")?;
    let origin: String = row.try_get("origin")?;
    let message = Message {
        id: row.try_get("id")?,
        conversation_id: row.try_get("conversation_id")?,
        seq: row.try_get::<i64, _>("seq")? as u64,
        sender_id: row.try_get("sender_id")?,
        origin: Origin::parse(&origin)
            .ok_or_else(|| StoreError::Corrupt(format!("bad origin {origin:?}")))?,
        parts: serde_json::from_str(&parts).map_err(json_err)?,
        reply_to: row.try_get("reply_to")?,
        created_at: rfc3339(row.try_get("created_at")?),
    };
    let verdict = verdict_of(
        row.try_get("verdict")?,
        row.try_get("verdict_reason")?,
        row.try_get::<i64, _>("recipients")?,
    )?;
    Ok((message, verdict, row.try_get("request_hash")?))
}

async fn load_conversation(
    conn: &mut sqlx::PgConnection,
    row: &PgRow,
) -> StoreResult<Conversation> {
    let id: Uuid = row.try_get("id")?;
    let kind: String = row.try_get("kind")?;
    let participants: Vec<Uuid> = sqlx::query_scalar(
        "SELECT principal_id FROM conversation_participants WHERE conversation_id = $1 ORDER BY joined_at, principal_id::text",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(Conversation {
        id,
        kind: ConversationKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("bad kind {kind:?}")))?,
        name: row.try_get("name")?,
        key: row.try_get("template_key")?,
        task_id: row.try_get("task_id")?,
        created_by: row.try_get("created_by")?,
        participants,
        last_message_seq: row.try_get::<i64, _>("last_message_seq")? as u64,
        created_at: rfc3339(row.try_get("created_at")?),
    })
}

const CONVERSATION_COLUMNS: &str =
    "c.id, c.kind, c.name, c.task_id, c.template_key, c.created_by, c.created_at, c.last_message_seq";

impl PgStore {
    async fn find_by_client_id(
        &self,
        sender: Uuid,
        client_msg_id: &str,
    ) -> StoreResult<Option<InsertedMessage>> {
        let row = sqlx::query(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.sender_id = $1 AND m.client_msg_id = $2"
        ))
        .bind(sender)
        .bind(client_msg_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            let (message, verdict, request_hash) = message_row(&r)?;
            Ok(InsertedMessage::Duplicate {
                message,
                verdict,
                request_hash,
            })
        })
        .transpose()
    }

    /// Group commit, as on SQLite (ADR 0013): concurrent sends share one
    /// transaction and one commit.
    async fn try_insert_message(&self, m: &NewMessage) -> StoreResult<InsertedMessage> {
        self.sends.submit(m).await
    }
}

/// One message in its own transaction: a lone send, and the fallback when a
/// group's combined write fails on one message's fault.
async fn insert_one(pool: &PgPool, m: &NewMessage) -> StoreResult<InsertedMessage> {
    let mut tx = pool.begin().await?;
    let seq: Option<i64> = sqlx::query_scalar(
        "UPDATE conversations SET last_message_seq = last_message_seq + 1 WHERE id = $1 RETURNING last_message_seq",
    )
    .bind(m.conversation_id)
    .fetch_optional(&mut *tx)
    .await?;
    let seq = seq.ok_or(StoreError::NotFound)?;
    let (verdict_col, verdict) = match &m.fanout {
        Fanout::Forward { recipients, .. } => (
            "forwarded",
            Verdict::Forwarded {
                recipients: recipients.len() as u32,
            },
        ),
        Fanout::Pending => ("pending", Verdict::Pending),
    };
    sqlx::query(
        "INSERT INTO messages (id, conversation_id, seq, sender_id, origin, parts, reply_to, client_msg_id, \
         request_hash, verdict, created_at) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11)",
    )
    .bind(m.id)
    .bind(m.conversation_id)
    .bind(seq)
    .bind(m.sender_id)
    .bind(m.origin.as_str())
    .bind(serde_json::to_string(&m.parts).map_err(json_err)?)
    .bind(m.reply_to)
    .bind(&m.client_msg_id)
    .bind(&m.request_hash)
    .bind(verdict_col)
    .bind(m.created_at)
    .execute(&mut *tx)
    .await?;
    let message = Message {
        id: m.id,
        conversation_id: m.conversation_id,
        seq: seq as u64,
        sender_id: m.sender_id,
        origin: m.origin,
        parts: m.parts.clone(),
        reply_to: m.reply_to,
        created_at: rfc3339(m.created_at),
    };
    if let Some(job) = &m.job {
        insert_job(&mut tx, job, m.created_at).await?;
    }
    let mut events = Vec::new();
    if let Fanout::Forward {
        recipients,
        event_type,
    } = &m.fanout
    {
        insert_recipients(&mut tx, m.id, recipients).await?;
        let payload = std::sync::Arc::new(serde_json::json!({ "message": message }));
        let new: Vec<NewEvent> = recipients
            .iter()
            .map(|r| NewEvent::new(*r, event_type, payload.clone()))
            .collect();
        events = append_events(&mut tx, &new, m.created_at).await?;
    }
    tx.commit().await?;
    Ok(InsertedMessage::Inserted {
        message,
        verdict,
        events,
    })
}

/// The PostgreSQL ways of writing sends, for the group committer.
struct PgSends {
    pool: PgPool,
}

#[async_trait]
impl GroupWriter for PgSends {
    async fn insert_one(&self, m: &NewMessage) -> StoreResult<InsertedMessage> {
        insert_one(&self.pool, m).await
    }

    async fn insert_group(&self, group: &[&NewMessage]) -> StoreResult<Vec<InsertedMessage>> {
        let mut tx = self.pool.begin().await?;
        match insert_group_in(&mut tx, group).await {
            Ok(done) => {
                tx.commit().await?;
                Ok(done)
            }
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }
}

async fn insert_group_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    group: &[&NewMessage],
) -> StoreResult<Vec<InsertedMessage>> {
    let mut first_seq = std::collections::HashMap::new();
    for (conversation, count) in conversation_counts(group) {
        let last: Option<i64> = sqlx::query_scalar(
            "UPDATE conversations SET last_message_seq = last_message_seq + $1 WHERE id = $2 RETURNING last_message_seq",
        )
        .bind(count)
        .bind(conversation)
        .fetch_optional(&mut **tx)
        .await?;
        first_seq.insert(conversation, last.ok_or(StoreError::NotFound)? - count + 1);
    }
    let seqs = assign_seqs(group, first_seq);
    let mut rows = Vec::with_capacity(group.len());
    for (m, seq) in group.iter().zip(&seqs) {
        let parts = serde_json::to_string(&m.parts).map_err(json_err)?;
        rows.push((m, *seq, parts, verdict_column(m)));
    }
    for part in rows.chunks(500) {
        let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO messages (id, conversation_id, seq, sender_id, origin, parts, reply_to, client_msg_id, \
             request_hash, verdict, created_at) ",
        );
        q.push_values(part, |mut row, (m, seq, parts, verdict)| {
            row.push_bind(m.id)
                .push_bind(m.conversation_id)
                .push_bind(*seq)
                .push_bind(m.sender_id)
                .push_bind(m.origin.as_str())
                .push_bind(parts.clone())
                .push_unseparated("::jsonb")
                .push_bind(m.reply_to)
                .push_bind(m.client_msg_id.clone())
                .push_bind(m.request_hash.clone())
                .push_bind(*verdict)
                .push_bind(m.created_at);
        });
        q.build().execute(&mut **tx).await?;
    }
    let jobs = group_jobs(group);
    for part in jobs.chunks(500) {
        let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO jobs (id, kind, subject, run_at, created_at, locked_until, attempts) ",
        );
        q.push_values(part, |mut row, (job, now)| {
            row.push_bind(job.id)
                .push_bind(job.kind.as_str())
                .push_bind(job.subject)
                .push_bind(job.run_at)
                .push_bind(*now)
                .push_bind(job.claimed_until)
                .push_bind(job.initial_attempts());
        });
        q.build().execute(&mut **tx).await?;
    }
    let pairs = recipient_pairs(group);
    for part in pairs.chunks(500) {
        let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO message_recipients (message_id, recipient_id) ",
        );
        q.push_values(part, |mut row, (message, recipient)| {
            row.push_bind(*message).push_bind(*recipient);
        });
        q.build().execute(&mut **tx).await?;
    }
    let delivery = group_delivery(group, &seqs);
    let stored = append_events(tx, &delivery.events, delivery.occurred_at).await?;
    Ok(delivery.results(group, stored))
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn migrate(&self) -> StoreResult<()> {
        MIGRATOR.run(&self.pool).await?;
        sqlx::query("INSERT INTO hub_meta (name, value) VALUES ('sync_epoch', $1) ON CONFLICT (name) DO NOTHING")
            .bind(Uuid::new_v4().to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn sync_epoch(&self) -> StoreResult<String> {
        let row = sqlx::query("SELECT value FROM hub_meta WHERE name = 'sync_epoch'")
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::Corrupt("sync_epoch missing; run migrations".into()))?;
        Ok(row.try_get("value")?)
    }

    async fn create_agent(
        &self,
        agent: &NewPrincipal,
        key: &NewKey,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        insert_idempotency(&mut tx, idem, agent.created_at).await?;
        insert_principal(&mut tx, agent, key).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn create_app(
        &self,
        app: &NewPrincipal,
        manifest: &Manifest,
        key: &NewKey,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()> {
        let manifest =
            serde_json::to_string(manifest).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut tx = self.pool.begin().await?;
        insert_idempotency(&mut tx, idem, app.created_at).await?;
        insert_principal(&mut tx, app, key).await?;
        sqlx::query("INSERT INTO apps (app_id, manifest, updated_at) VALUES ($1, $2::jsonb, $3)")
            .bind(app.id)
            .bind(manifest)
            .bind(app.created_at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn principal(&self, id: Uuid) -> StoreResult<Option<PrincipalRecord>> {
        sqlx::query("SELECT id, kind, name, description, created_at FROM principals WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| principal_row(&r))
            .transpose()
    }

    async fn app(&self, id: Uuid) -> StoreResult<Option<AppRecord>> {
        let row = sqlx::query(
            "SELECT p.id, p.kind, p.name, p.description, p.created_at, a.manifest::text AS manifest \
             FROM principals p JOIN apps a ON a.app_id = p.id WHERE p.id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let manifest: String = row.try_get("manifest")?;
        Ok(Some(AppRecord {
            principal: principal_row(&row)?,
            manifest: serde_json::from_str(&manifest)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        }))
    }

    async fn key(&self, key_id: &str) -> StoreResult<Option<KeyRecord>> {
        let row = sqlx::query(
            "SELECT k.key_id, k.principal_id, p.kind, k.secret_hash, k.created_at, k.revoked_at \
             FROM principal_keys k JOIN principals p ON p.id = k.principal_id WHERE k.key_id = $1",
        )
        .bind(key_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(KeyRecord {
            key_id: row.try_get("key_id")?,
            principal_id: row.try_get("principal_id")?,
            kind: kind(row.try_get("kind")?)?,
            secret_hash: row.try_get("secret_hash")?,
            created_at: row.try_get("created_at")?,
            revoked_at: row.try_get("revoked_at")?,
        }))
    }

    async fn rotate_keys(
        &self,
        principal_id: Uuid,
        new: &NewKey,
        now: Millis,
        presented: Option<&str>,
    ) -> StoreResult<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        // Lock the principal row so two rotations cannot both leave a key active.
        let exists = sqlx::query("SELECT 1 FROM principals WHERE id = $1 FOR UPDATE")
            .bind(principal_id)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound);
        }
        let revoked = revoke_active(&mut tx, principal_id, now).await?;
        if let Some(k) = presented {
            if !revoked.iter().any(|r| r == k) {
                return Err(StoreError::Conflict(
                    "the presented key is no longer active".into(),
                ));
            }
        }
        insert_key(&mut tx, principal_id, new, now).await?;
        tx.commit().await?;
        Ok(revoked)
    }

    async fn revoke_keys(&self, principal_id: Uuid, now: Millis) -> StoreResult<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        // The same lock rotation takes: a revoke never misses a key that a
        // concurrent rotation is inserting.
        sqlx::query("SELECT 1 FROM principals WHERE id = $1 FOR UPDATE")
            .bind(principal_id)
            .fetch_optional(&mut *tx)
            .await?;
        let revoked = revoke_active(&mut tx, principal_id, now).await?;
        tx.commit().await?;
        Ok(revoked)
    }
    async fn keys_revoked_since(&self, since: Millis) -> StoreResult<Vec<(Uuid, String, Millis)>> {
        let rows = sqlx::query(
            "SELECT principal_id, key_id, revoked_at FROM principal_keys WHERE revoked_at IS NOT NULL AND revoked_at >= $1",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<Uuid, _>("principal_id")?,
                    r.try_get("key_id")?,
                    r.try_get("revoked_at")?,
                ))
            })
            .collect()
    }

    async fn events_after(
        &self,
        audience: Uuid,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<StoredEvent>> {
        let rows = sqlx::query(
            "SELECT audience, seq, id, type, occurred_at, payload::text AS payload FROM events \
             WHERE audience = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .bind(audience)
        .bind(after as i64)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_row).collect()
    }

    async fn stream_position(&self, audience: Uuid) -> StoreResult<StreamPosition> {
        let row = sqlx::query(
            "SELECT s.last_seq, s.acked_seq, (SELECT MIN(seq) FROM events e WHERE e.audience = s.audience) AS oldest \
             FROM event_streams s WHERE s.audience = $1",
        )
        .bind(audience)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            None => StreamPosition {
                last_seq: 0,
                acked_seq: 0,
                oldest_seq: 1,
            },
            Some(r) => {
                let last = r.try_get::<i64, _>("last_seq")? as u64;
                let oldest: Option<i64> = r.try_get("oldest")?;
                StreamPosition {
                    last_seq: last,
                    acked_seq: r.try_get::<i64, _>("acked_seq")? as u64,
                    oldest_seq: oldest.map_or(last + 1, |o| o as u64),
                }
            }
        })
    }

    async fn ack_events(&self, audience: Uuid, seq: u64) -> StoreResult<u64> {
        let acked: Option<i64> = sqlx::query_scalar(
            "UPDATE event_streams SET acked_seq = GREATEST(acked_seq, $1) WHERE audience = $2 AND last_seq >= $1 RETURNING acked_seq",
        )
        .bind(seq as i64)
        .bind(audience)
        .fetch_optional(&self.pool)
        .await?;
        match acked {
            Some(a) => Ok(a as u64),
            None if seq == 0 => Ok(0),
            None => Err(StoreError::Conflict("seq is beyond the last event".into())),
        }
    }

    async fn prune_events(&self, older_than: Millis, keep_per_audience: u64) -> StoreResult<u64> {
        sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
            .bind(older_than)
            .execute(&self.pool)
            .await?;
        let by_age = sqlx::query("DELETE FROM events WHERE occurred_at < $1")
            .bind(older_than)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let by_count = sqlx::query(
            "DELETE FROM events e USING event_streams s WHERE s.audience = e.audience AND e.seq <= s.last_seq - $1",
        )
        .bind(keep_per_audience.min(i64::MAX as u64) as i64)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(by_age + by_count)
    }

    async fn create_conversation(
        &self,
        c: &NewConversation,
        events: &[NewEvent],
    ) -> StoreResult<CreatedConversation> {
        if let Some(key) = &c.direct_key {
            let existing: Option<Uuid> =
                sqlx::query_scalar("SELECT id FROM conversations WHERE direct_key = $1")
                    .bind(key)
                    .fetch_optional(&self.pool)
                    .await?;
            if let Some(id) = existing {
                let found = self.conversation(id).await?.ok_or(StoreError::NotFound)?;
                return Ok(CreatedConversation::Existing(found));
            }
        }
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO conversations (id, kind, name, task_id, direct_key, created_by, created_at, template_key) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(c.id)
        .bind(c.kind.as_str())
        .bind(&c.name)
        .bind(c.task_id)
        .bind(&c.direct_key)
        .bind(c.created_by)
        .bind(c.created_at)
        .bind(&c.template_key)
        .execute(&mut *tx)
        .await;
        if let Err(e) = inserted {
            if is_unique_violation(&e) && c.direct_key.is_some() {
                drop(tx);
                return self.create_conversation(c, events).await;
            }
            return Err(e.into());
        }
        for p in &c.participants {
            sqlx::query("INSERT INTO conversation_participants (conversation_id, principal_id, joined_at) VALUES ($1, $2, $3)")
                .bind(c.id)
                .bind(p)
                .bind(c.created_at)
                .execute(&mut *tx)
                .await?;
        }
        let stored = append_events(&mut tx, events, c.created_at).await?;
        tx.commit().await?;
        let conversation = self.conversation(c.id).await?.ok_or(StoreError::NotFound)?;
        Ok(CreatedConversation::Created(conversation, stored))
    }

    async fn conversation(&self, id: Uuid) -> StoreResult<Option<Conversation>> {
        let mut conn = self.pool.acquire().await?;
        let row = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = $1"
        ))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
        match row {
            Some(r) => Ok(Some(load_conversation(&mut conn, &r).await?)),
            None => Ok(None),
        }
    }

    async fn conversations_of(
        &self,
        principal: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Conversation>> {
        let mut conn = self.pool.acquire().await?;
        let rows = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations c \
             JOIN conversation_participants p ON p.conversation_id = c.id \
             WHERE p.principal_id = $1 AND ($2::uuid IS NULL OR c.id > $2) ORDER BY c.id LIMIT $3"
        ))
        .bind(principal)
        .bind(after)
        .bind(limit as i64)
        .fetch_all(&mut *conn)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(load_conversation(&mut conn, r).await?);
        }
        Ok(out)
    }

    async fn insert_message(&self, m: &NewMessage) -> StoreResult<InsertedMessage> {
        if let Some(client_id) = &m.client_msg_id {
            if let Some(dup) = self.find_by_client_id(m.sender_id, client_id).await? {
                return Ok(dup);
            }
        }
        match self.try_insert_message(m).await {
            Err(StoreError::Database(e))
                if is_unique_violation(&e) && m.client_msg_id.is_some() =>
            {
                let client_id = m.client_msg_id.as_deref().unwrap_or_default();
                self.find_by_client_id(m.sender_id, client_id)
                    .await?
                    .ok_or(StoreError::Database(e))
            }
            other => other,
        }
    }

    async fn message(&self, id: Uuid) -> StoreResult<Option<(Message, Verdict)>> {
        let row = sqlx::query(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| message_row(&r).map(|(m, v, _)| (m, v)))
            .transpose()
    }

    async fn messages(
        &self,
        conversation_id: Uuid,
        page: MessagePage,
    ) -> StoreResult<Vec<Message>> {
        let visible = "m.conversation_id = $1 AND (m.sender_id = $2 OR EXISTS \
             (SELECT 1 FROM message_recipients r WHERE r.message_id = m.id AND r.recipient_id = $2))";
        let (cond, order, cursor) = match (page.after, page.before) {
            (_, Some(before)) => ("m.seq < $3", "DESC", before as i64),
            (after, None) => ("m.seq > $3", "ASC", after.unwrap_or(0) as i64),
        };
        let rows = sqlx::query(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE {visible} AND {cond} ORDER BY m.seq {order} LIMIT $4"
        ))
        .bind(conversation_id)
        .bind(page.viewer)
        .bind(cursor)
        .bind(page.limit as i64)
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<Message> = rows
            .iter()
            .map(|r| message_row(r).map(|(m, _, _)| m))
            .collect::<StoreResult<_>>()?;
        if order == "DESC" {
            out.reverse();
        }
        Ok(out)
    }

    async fn idempotent_response(
        &self,
        scope: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotentResponse>> {
        let row = sqlx::query("SELECT request_hash, status, response FROM idempotency_keys WHERE scope = $1 AND key = $2")
            .bind(scope)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(IdempotentResponse {
                request_hash: r.try_get("request_hash")?,
                status: r.try_get::<i32, _>("status")? as u16,
                response: r.try_get("response")?,
            })
        })
        .transpose()
    }
    async fn create_task(&self, t: &NewTask, job: &NewJob) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO tasks (id, app_id, initiator_id, state, initial_conversation, created_at, updated_at) \
             VALUES ($1, $2, $3, 'waiting', $4, $5, $6)",
        )
        .bind(t.id)
        .bind(t.app_id)
        .bind(t.initiator_id)
        .bind(&t.initial_conversation)
        .bind(t.created_at)
        .bind(t.created_at)
        .execute(&mut *tx)
        .await?;
        for p in &t.participants {
            sqlx::query(
                "INSERT INTO task_participants (task_id, agent_id, role) VALUES ($1, $2, $3)",
            )
            .bind(t.id)
            .bind(p.agent_id)
            .bind(p.role.as_str())
            .execute(&mut *tx)
            .await?;
        }
        insert_job(&mut tx, job, t.created_at).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn task(&self, id: Uuid) -> StoreResult<Option<TaskRecord>> {
        let mut conn = self.pool.acquire().await?;
        let row = sqlx::query(&format!(
            "SELECT {TASK_COLUMNS} FROM tasks t WHERE t.id = $1"
        ))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
        match row {
            Some(r) => Ok(Some(load_task(&mut conn, &r).await?)),
            None => Ok(None),
        }
    }

    async fn task_conversations(&self, task_id: Uuid) -> StoreResult<Vec<Conversation>> {
        let mut conn = self.pool.acquire().await?;
        let rows = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.task_id = $1 ORDER BY c.id"
        ))
        .bind(task_id)
        .fetch_all(&mut *conn)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(load_conversation(&mut conn, r).await?);
        }
        Ok(out)
    }

    async fn tasks_of(
        &self,
        agent: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Task>> {
        let mut conn = self.pool.acquire().await?;
        let rows = sqlx::query(&format!(
            "SELECT {TASK_COLUMNS} FROM tasks t JOIN task_participants p ON p.task_id = t.id \
             WHERE p.agent_id = $1 AND ($2::uuid IS NULL OR t.id > $2) ORDER BY t.id LIMIT $3"
        ))
        .bind(agent)
        .bind(after)
        .bind(limit as i64)
        .fetch_all(&mut *conn)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(load_task(&mut conn, r).await?.task);
        }
        Ok(out)
    }

    async fn transition_task(
        &self,
        id: Uuid,
        from: TaskState,
        to: TaskState,
        failure: Option<&TaskFailure>,
        effects: &Effects,
        now: Millis,
    ) -> StoreResult<Option<Vec<StoredEvent>>> {
        let mut tx = self.pool.begin().await?;
        let changed = sqlx::query(
            "UPDATE tasks SET state = $1, failure_code = $2, failure_reason = $3, updated_at = $4 WHERE id = $5 AND state = $6",
        )
        .bind(to.as_str())
        .bind(failure.map(|f| f.code.clone()))
        .bind(failure.and_then(|f| f.reason.clone()))
        .bind(now)
        .bind(id)
        .bind(from.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed == 0 {
            finish_job(&mut tx, effects.finish_job).await?;
            tx.commit().await?;
            return Ok(None);
        }
        let events = apply_effects(&mut tx, effects, now).await?;
        tx.commit().await?;
        Ok(Some(events))
    }

    async fn add_participants(
        &self,
        conversation_id: Uuid,
        agents: &[Uuid],
        events: &[NewEvent],
        now: Millis,
    ) -> StoreResult<Vec<StoredEvent>> {
        let mut tx = self.pool.begin().await?;
        for a in agents {
            sqlx::query(
                "INSERT INTO conversation_participants (conversation_id, principal_id, joined_at) VALUES ($1, $2, $3) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(conversation_id)
            .bind(a)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        let stored = append_events(&mut tx, events, now).await?;
        tx.commit().await?;
        Ok(stored)
    }

    async fn decide_message(
        &self,
        message_id: Uuid,
        outcome: &MessageOutcome,
        effects: &Effects,
        now: Millis,
    ) -> StoreResult<MessageDecided> {
        let mut tx = self.pool.begin().await?;
        let (verdict, reason) = match outcome {
            MessageOutcome::Forward { .. } => ("forwarded", None),
            MessageOutcome::Block { reason } => ("blocked", Some(reason.clone())),
        };
        if matches!(outcome, MessageOutcome::Forward { .. }) {
            // Holding the task row (FOR SHARE) until commit makes a close
            // wait for this forward, or this forward see the close: it
            // re-reads the newest row version after waiting.
            let state: Option<String> = sqlx::query_scalar(
                "SELECT t.state FROM messages m JOIN conversations c ON c.id = m.conversation_id \
                 JOIN tasks t ON t.id = c.task_id WHERE m.id = $1 FOR SHARE OF t",
            )
            .bind(message_id)
            .fetch_optional(&mut *tx)
            .await?;
            if state.as_deref() != Some("active") {
                let pending: Option<String> =
                    sqlx::query_scalar("SELECT verdict FROM messages WHERE id = $1")
                        .bind(message_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                if pending.as_deref() == Some("pending") {
                    tx.rollback().await?;
                    return Ok(MessageDecided::TaskNotActive);
                }
            }
        }
        let changed = sqlx::query("UPDATE messages SET verdict = $1, verdict_reason = $2 WHERE id = $3 AND verdict = 'pending'")
            .bind(verdict)
            .bind(reason)
            .bind(message_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if changed == 0 {
            finish_job(&mut tx, effects.finish_job).await?;
            tx.commit().await?;
            return Ok(MessageDecided::AlreadyDecided);
        }
        if let MessageOutcome::Forward { recipients } = outcome {
            insert_recipients(&mut tx, message_id, recipients).await?;
        }
        let events = apply_effects(&mut tx, effects, now).await?;
        tx.commit().await?;
        Ok(MessageDecided::Applied(events))
    }

    async fn is_recipient(&self, message_id: Uuid, agent: Uuid) -> StoreResult<bool> {
        let row: Option<i64> = sqlx::query_scalar(
            "SELECT 1::bigint FROM message_recipients WHERE message_id = $1 AND recipient_id = $2",
        )
        .bind(message_id)
        .bind(agent)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    async fn create_lease(&self, lease: &NewLease, job: &NewJob) -> StoreResult<CreatedLease> {
        if let Some(found) = self
            .live_lease(lease.recipient_id, lease.message_id)
            .await?
        {
            return Ok(CreatedLease::Existing(found));
        }
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO leases (id, message_id, conversation_id, recipient_id, state, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, 'pending', $5, $6)",
        )
        .bind(lease.id)
        .bind(lease.message_id)
        .bind(lease.conversation_id)
        .bind(lease.recipient_id)
        .bind(lease.created_at)
        .bind(lease.created_at)
        .execute(&mut *tx)
        .await;
        if let Err(e) = inserted {
            if is_unique_violation(&e) {
                drop(tx);
                let found = self
                    .live_lease(lease.recipient_id, lease.message_id)
                    .await?;
                return found
                    .map(CreatedLease::Existing)
                    .ok_or(StoreError::Database(e));
            }
            return Err(e.into());
        }
        insert_job(&mut tx, job, lease.created_at).await?;
        tx.commit().await?;
        let created = self.lease(lease.id).await?.ok_or(StoreError::NotFound)?;
        Ok(CreatedLease::Created(created))
    }

    async fn lease(&self, id: Uuid) -> StoreResult<Option<Lease>> {
        let row = sqlx::query(&format!("SELECT {LEASE_COLUMNS} FROM leases WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| lease_row(&r)).transpose()
    }

    async fn transition_lease(
        &self,
        change: &LeaseChange,
        effects: &Effects,
    ) -> StoreResult<Option<(Lease, Vec<StoredEvent>)>> {
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "UPDATE leases SET state = $1, reason = $2, expires_at = $3, updated_at = $4 WHERE id = $5 AND state IN ({}) \
             RETURNING {LEASE_COLUMNS}",
            placeholders(6, change.from.len())
        );
        let mut q = sqlx::query(&sql)
            .bind(change.to.as_str())
            .bind(&change.reason)
            .bind(change.expires_at)
            .bind(change.now)
            .bind(change.lease_id);
        for s in &change.from {
            q = q.bind(s.as_str());
        }
        let row = q.fetch_optional(&mut *tx).await?;
        let Some(row) = row else {
            finish_job(&mut tx, effects.finish_job).await?;
            tx.commit().await?;
            return Ok(None);
        };
        let lease = lease_row(&row)?;
        let events = apply_effects(&mut tx, effects, change.now).await?;
        tx.commit().await?;
        Ok(Some((lease, events)))
    }

    async fn claim_job(
        &self,
        id: Uuid,
        now: Millis,
        lock_until: Millis,
    ) -> StoreResult<Option<Job>> {
        let row = sqlx::query(
            "UPDATE jobs SET locked_until = $1, attempts = attempts + 1 \
             WHERE id = $2 AND (locked_until IS NULL OR locked_until < $3) RETURNING id, kind, subject, attempts",
        )
        .bind(lock_until)
        .bind(id)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| job_row(&r)).transpose()
    }

    async fn claim_due_jobs(
        &self,
        now: Millis,
        lock_until: Millis,
        limit: u32,
    ) -> StoreResult<Vec<Job>> {
        let rows = sqlx::query(
            "UPDATE jobs SET locked_until = $1, attempts = attempts + 1 WHERE id IN \
             (SELECT id FROM jobs WHERE run_at <= $2 AND (locked_until IS NULL OR locked_until < $3) ORDER BY run_at LIMIT $4 FOR UPDATE SKIP LOCKED) \
             RETURNING id, kind, subject, attempts",
        )
        .bind(lock_until)
        .bind(now)
        .bind(now)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(job_row).collect()
    }

    async fn install_card(&self, card: &CardRecord, force_author: bool) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        // Installs are rare: serialize them, so two first publications of one
        // id by different authors cannot both pass the author rule.
        sqlx::query("LOCK TABLE cards IN SHARE ROW EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await?;
        let existing: Option<(String, String)> =
            sqlx::query_as("SELECT author, card_json FROM cards WHERE id = $1 AND version = $2")
                .bind(&card.id)
                .bind(&card.version)
                .fetch_optional(&mut *tx)
                .await?;
        if let Some((_, json)) = existing {
            tx.commit().await?;
            return if json == card.card_json {
                Ok(())
            } else {
                Err(StoreError::Conflict(format!(
                    "{} {} is installed with other contents",
                    card.id, card.version
                )))
            };
        }
        // The author of the highest installed version owns the id.
        let versions: Vec<(String, String)> =
            sqlx::query_as("SELECT author, version FROM cards WHERE id = $1")
                .bind(&card.id)
                .fetch_all(&mut *tx)
                .await?;
        let newest = versions
            .into_iter()
            .filter_map(|(author, v)| semver::Version::parse(&v).ok().map(|v| (v, author)))
            .max_by(|a, b| a.0.cmp(&b.0))
            .map(|(_, author)| (author,));
        if let Some((author,)) = newest {
            if author != card.author && !force_author {
                return Err(StoreError::Conflict(format!(
                    "{} is published by {author}; a version by another author needs the operator's force",
                    card.id
                )));
            }
        }
        sqlx::query(
            "INSERT INTO cards (id, version, author, primitives, integrity, card_json, installed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&card.id)
        .bind(&card.version)
        .bind(&card.author)
        .bind(serde_json::to_string(&card.primitives).map_err(json_err)?)
        .bind(serde_json::to_string(&card.integrity).map_err(json_err)?)
        .bind(&card.card_json)
        .bind(card.installed_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn cards(&self) -> StoreResult<Vec<CardRecord>> {
        let rows = sqlx::query(
            "SELECT id, version, author, primitives, integrity, card_json, installed_at FROM cards \
             ORDER BY id, installed_at",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let primitives: String = r.try_get("primitives")?;
                let integrity: String = r.try_get("integrity")?;
                Ok(CardRecord {
                    id: r.try_get("id")?,
                    version: r.try_get("version")?,
                    author: r.try_get("author")?,
                    primitives: serde_json::from_str(&primitives).map_err(json_err)?,
                    integrity: serde_json::from_str(&integrity).map_err(json_err)?,
                    card_json: r.try_get("card_json")?,
                    installed_at: r.try_get("installed_at")?,
                })
            })
            .collect::<StoreResult<Vec<CardRecord>>>()
            .map(|mut list| {
                list.sort_by(|a, b| {
                    let v = |c: &CardRecord| semver::Version::parse(&c.version).ok();
                    a.id.cmp(&b.id).then_with(|| v(a).cmp(&v(b)))
                });
                list
            })
    }

    async fn rotate_signing_key(
        &self,
        new: &SigningKeyRecord,
        now: Millis,
        overlap_until: Millis,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        // Rotations are rare: serialize them, so two cannot both demote the
        // same key and leave two active ones.
        sqlx::query("LOCK TABLE webhook_signing_keys IN EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE webhook_signing_keys SET state = 'retired' WHERE state = 'secondary' AND retires_at <= $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE webhook_signing_keys SET state = 'secondary', retires_at = $1 WHERE state = 'active'")
            .bind(overlap_until)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO webhook_signing_keys (key_id, public_key, sealed_secret, state, created_at) \
             VALUES ($1, $2, $3, 'active', $4)",
        )
        .bind(&new.key_id)
        .bind(&new.public_key)
        .bind(&new.sealed_secret)
        .bind(new.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>> {
        let rows = sqlx::query(
            "SELECT key_id, public_key, sealed_secret, state, created_at, retires_at FROM webhook_signing_keys \
             ORDER BY created_at DESC, key_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(SigningKeyRecord {
                    key_id: r.try_get("key_id")?,
                    public_key: r.try_get("public_key")?,
                    sealed_secret: r.try_get("sealed_secret")?,
                    state: r.try_get("state")?,
                    created_at: r.try_get("created_at")?,
                    retires_at: r.try_get("retires_at")?,
                })
            })
            .collect()
    }

    async fn finish_job(&self, id: Uuid) -> StoreResult<()> {
        sqlx::query("DELETE FROM jobs WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn release_job_locks(&self) -> StoreResult<u64> {
        Ok(
            sqlx::query("UPDATE jobs SET locked_until = NULL WHERE locked_until IS NOT NULL")
                .execute(&self.pool)
                .await?
                .rows_affected(),
        )
    }

    async fn retry_job(&self, id: Uuid, run_at: Millis) -> StoreResult<()> {
        sqlx::query("UPDATE jobs SET locked_until = NULL, run_at = $1 WHERE id = $2")
            .bind(run_at)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

impl PgStore {
    async fn live_lease(&self, recipient: Uuid, message: Uuid) -> StoreResult<Option<Lease>> {
        let row = sqlx::query(&format!(
            "SELECT {LEASE_COLUMNS} FROM leases WHERE recipient_id = $1 AND message_id = $2 \
             AND state IN ('pending', 'held', 'granted')"
        ))
        .bind(recipient)
        .bind(message)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| lease_row(&r)).transpose()
    }
}
