//! Durable state behind one trait, with a SQLite implementation (the embedded
//! default) and a PostgreSQL one. Each backend has its own SQL and its own
//! migrations: the dialects differ, and hiding that behind `AnyPool` would
//! lose types (see docs/adr/0003-storage.md). The contract test suite runs the
//! same cases against both.

mod group_commit;
mod postgres;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use crate::config::Config;
use crate::domain::conversation::{Conversation, ConversationKind};
use crate::domain::event::{NewEvent, StoredEvent, StreamPosition};
use crate::domain::lease::{Lease, LeaseState};
use crate::domain::manifest::Manifest;
use crate::domain::message::{Message, Origin, Part};
use crate::domain::task::{Task, TaskFailure, TaskParticipant, TaskState};
use crate::domain::{Millis, PrincipalKind};

pub use postgres::PgStore;
pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("the idempotency key was used already")]
    IdempotencyTaken,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PrincipalRecord {
    pub id: Uuid,
    pub kind: PrincipalKind,
    pub name: String,
    pub description: Option<String>,
    pub created_at: Millis,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AppRecord {
    pub principal: PrincipalRecord,
    pub manifest: Manifest,
}

/// A key as stored: never the secret, only its digest.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRecord {
    pub key_id: String,
    pub principal_id: Uuid,
    pub kind: PrincipalKind,
    pub secret_hash: Vec<u8>,
    pub created_at: Millis,
    pub revoked_at: Option<Millis>,
}

/// A new key to store.
#[derive(Clone, Debug)]
pub struct NewKey {
    pub key_id: String,
    pub secret_hash: [u8; 32],
}

#[derive(Clone, Debug)]
pub struct NewPrincipal {
    pub id: Uuid,
    pub kind: PrincipalKind,
    pub name: String,
    pub description: Option<String>,
    pub created_at: Millis,
}

#[derive(Clone, Debug)]
pub struct NewConversation {
    pub id: Uuid,
    pub kind: ConversationKind,
    pub name: Option<String>,
    pub task_id: Option<Uuid>,
    /// Set for direct conversations: at most one per pair.
    pub direct_key: Option<String>,
    /// The manifest template a task conversation comes from.
    pub template_key: Option<String>,
    pub created_by: Uuid,
    pub participants: Vec<Uuid>,
    pub created_at: Millis,
}

impl NewConversation {
    /// The conversation as readers will see it once stored.
    pub fn view(&self) -> Conversation {
        Conversation {
            id: self.id,
            kind: self.kind,
            name: self.name.clone(),
            key: self.template_key.clone(),
            task_id: self.task_id,
            created_by: self.created_by,
            participants: self.participants.clone(),
            last_message_seq: 0,
            created_at: crate::domain::event::rfc3339(self.created_at),
        }
    }
}

#[derive(Clone, Debug)]
pub enum CreatedConversation {
    Created(Conversation, Vec<StoredEvent>),
    /// A direct conversation for this pair already existed.
    Existing(Conversation),
}

/// What happens to a message's fan-out when it is stored.
#[derive(Clone, Debug)]
pub enum Fanout {
    /// Decided already: deliver `event_type` to these recipients in the same
    /// transaction.
    Forward {
        recipients: Vec<Uuid>,
        event_type: &'static str,
    },
    /// A policy decides later; the message waits as `pending`.
    Pending,
}

#[derive(Clone, Debug)]
pub struct NewMessage {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub sender_id: Uuid,
    pub origin: Origin,
    pub parts: Vec<Part>,
    pub reply_to: Option<Uuid>,
    pub client_msg_id: Option<String>,
    pub request_hash: Option<String>,
    pub created_at: Millis,
    pub fanout: Fanout,
    /// With `Fanout::Pending`: the job that will decide it.
    pub job: Option<NewJob>,
}

/// Kinds of work that follow a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// Run the `task_create` gate of a waiting task.
    TaskCreate,
    /// Run the `message_authorize` gate of a pending message.
    MessageAuthorize,
    /// Run the `dispatch_authorize` gate of a pending lease.
    DispatchAuthorize,
    /// Expire a granted lease at its deadline.
    LeaseExpire,
    /// Deny a held lease at `leases.max_hold_ms`.
    HoldExpire,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::TaskCreate => "task_create",
            JobKind::MessageAuthorize => "message_authorize",
            JobKind::DispatchAuthorize => "dispatch_authorize",
            JobKind::LeaseExpire => "lease_expire",
            JobKind::HoldExpire => "hold_expire",
        }
    }

    pub fn parse(s: &str) -> Option<JobKind> {
        [
            JobKind::TaskCreate,
            JobKind::MessageAuthorize,
            JobKind::DispatchAuthorize,
            JobKind::LeaseExpire,
            JobKind::HoldExpire,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NewJob {
    pub id: Uuid,
    pub kind: JobKind,
    /// The task, message or lease the job works on.
    pub subject: Uuid,
    pub run_at: Millis,
    /// Set when the writer runs the job at once itself: the job is stored
    /// already claimed (locked until then, attempt 1), which saves a claim
    /// statement on every gated send, task request and lease request.
    pub claimed_until: Option<Millis>,
}

impl NewJob {
    pub fn new(kind: JobKind, subject: Uuid, run_at: Millis) -> NewJob {
        NewJob {
            id: Uuid::now_v7(),
            kind,
            subject,
            run_at,
            claimed_until: None,
        }
    }

    pub fn claimed_until(mut self, until: Millis) -> NewJob {
        self.claimed_until = Some(until);
        self
    }

    /// The `attempts` a new row starts with.
    pub fn initial_attempts(&self) -> i64 {
        i64::from(self.claimed_until.is_some())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub id: Uuid,
    pub kind: JobKind,
    pub subject: Uuid,
    pub attempts: u32,
}

/// Everything a state change brings along, applied in its transaction.
#[derive(Clone, Debug, Default)]
pub struct Effects {
    pub events: Vec<NewEvent>,
    /// The job this change completes; deleted.
    pub finish_job: Option<Uuid>,
    /// Jobs this change makes necessary.
    pub schedule: Vec<NewJob>,
    /// Conversations this change opens (an accepted task's).
    pub conversations: Vec<NewConversation>,
}

#[derive(Clone, Debug)]
pub struct NewTask {
    pub id: Uuid,
    pub app_id: Uuid,
    pub initiator_id: Uuid,
    pub participants: Vec<TaskParticipant>,
    /// JSON of the requested initial conversation.
    pub initial_conversation: Option<String>,
    pub created_at: Millis,
}

#[derive(Clone, Debug)]
pub struct TaskRecord {
    pub task: Task,
    pub initial_conversation: Option<String>,
}

#[derive(Clone, Debug)]
pub struct NewLease {
    pub id: Uuid,
    pub message_id: Uuid,
    pub conversation_id: Uuid,
    pub recipient_id: Uuid,
    pub created_at: Millis,
}

#[derive(Clone, Debug)]
pub enum CreatedLease {
    Created(Lease),
    /// A live lease for this recipient and message already existed.
    Existing(Lease),
}

/// A lease state change, applied only if the lease is in one of `from`.
#[derive(Clone, Debug)]
pub struct LeaseChange {
    pub lease_id: Uuid,
    pub from: Vec<LeaseState>,
    pub to: LeaseState,
    pub reason: Option<String>,
    pub expires_at: Option<Millis>,
    pub now: Millis,
}

/// A message verdict, applied only while the message is pending.
#[derive(Clone, Debug)]
pub enum MessageOutcome {
    Forward { recipients: Vec<Uuid> },
    Block { reason: String },
}

/// What became of a verdict handed to [`Store::decide_message`].
#[derive(Debug)]
pub enum MessageDecided {
    /// Recorded, with the effects' events.
    Applied(Vec<StoredEvent>),
    /// The message was decided already; only the job was finished.
    AlreadyDecided,
    /// A forward found the task no longer active (closed or failed while
    /// the hook was deciding). Nothing was written; decide again.
    TaskNotActive,
}

/// The stored fan-out decision of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pending,
    Forwarded { recipients: u32 },
    Blocked { reason: String },
}

#[derive(Clone, Debug)]
pub enum InsertedMessage {
    Inserted {
        message: Message,
        verdict: Verdict,
        events: Vec<StoredEvent>,
    },
    /// The sender already stored a message with this `clientMsgId`.
    Duplicate {
        message: Message,
        verdict: Verdict,
        request_hash: Option<String>,
    },
}

/// A page of a conversation's history as one viewer may see it.
#[derive(Clone, Copy, Debug)]
pub struct MessagePage {
    pub viewer: Uuid,
    /// Messages with a greater seq, oldest first.
    pub after: Option<u64>,
    /// Messages with a smaller seq, newest first before reversal.
    pub before: Option<u64>,
    pub limit: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct IdempotentResponse {
    pub request_hash: String,
    pub status: u16,
    pub response: String,
}

/// The replayable result of a create, written in the create's transaction so
/// a retry can never create twice.
#[derive(Clone, Debug, PartialEq)]
pub struct IdempotencyRecord {
    pub scope: String,
    pub key: String,
    pub result: IdempotentResponse,
}

/// An installed App Card.
#[derive(Clone, Debug, PartialEq)]
pub struct CardRecord {
    pub id: String,
    pub version: String,
    pub author: String,
    pub primitives: Vec<String>,
    pub integrity: std::collections::BTreeMap<String, String>,
    /// The signed app.json in canonical form, `sig` included.
    pub card_json: String,
    pub installed_at: Millis,
}

/// A webhook signing key as stored: the secret only sealed.
#[derive(Clone, Debug, PartialEq)]
pub struct SigningKeyRecord {
    pub key_id: String,
    /// `whpk_...`
    pub public_key: String,
    pub sealed_secret: Vec<u8>,
    /// `active`, `secondary` (still signing until `retires_at`) or `retired`.
    pub state: String,
    pub created_at: Millis,
    pub retires_at: Option<Millis>,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Applies pending migrations.
    async fn migrate(&self) -> StoreResult<()>;

    /// Cheap round trip for readiness.
    async fn ping(&self) -> StoreResult<()>;

    /// An id chosen when this database was first migrated. It changes only if
    /// the database is replaced, which is what invalidates event cursors.
    async fn sync_epoch(&self) -> StoreResult<String>;

    /// Stores an agent and its first key (and the idempotency record, if
    /// any) in one transaction. `IdempotencyTaken` when the record exists.
    async fn create_agent(
        &self,
        agent: &NewPrincipal,
        key: &NewKey,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()>;

    /// Stores an app, its manifest and its first key (and the idempotency
    /// record, if any) in one transaction.
    async fn create_app(
        &self,
        app: &NewPrincipal,
        manifest: &Manifest,
        key: &NewKey,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()>;

    async fn principal(&self, id: Uuid) -> StoreResult<Option<PrincipalRecord>>;

    async fn app(&self, id: Uuid) -> StoreResult<Option<AppRecord>>;

    async fn key(&self, key_id: &str) -> StoreResult<Option<KeyRecord>>;

    /// Revokes every active key of the principal and stores `new` in one
    /// transaction. Returns the revoked key ids. With `presented`, the
    /// rotation happens only if that key is still active at that moment
    /// (`Conflict` otherwise), so a key revoked meanwhile cannot mint a new one.
    async fn rotate_keys(
        &self,
        principal_id: Uuid,
        new: &NewKey,
        now: Millis,
        presented: Option<&str>,
    ) -> StoreResult<Vec<String>>;

    /// Revokes every active key of the principal. Returns the revoked key ids.
    async fn revoke_keys(&self, principal_id: Uuid, now: Millis) -> StoreResult<Vec<String>>;

    /// `(principal, key id, revoked_at)` of keys revoked at or after
    /// `since`, by any process.
    async fn keys_revoked_since(&self, since: Millis) -> StoreResult<Vec<(Uuid, String, Millis)>>;

    /// Events of `audience` with seq greater than `after`, oldest first.
    async fn events_after(
        &self,
        audience: Uuid,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<StoredEvent>>;

    async fn stream_position(&self, audience: Uuid) -> StoreResult<StreamPosition>;

    /// Raises the audience's acknowledged seq to `seq` (never lowers it).
    /// `Conflict` when `seq` is beyond the last event written.
    async fn ack_events(&self, audience: Uuid, seq: u64) -> StoreResult<u64>;

    /// Deletes events older than `older_than`, and for each audience all but
    /// its newest `keep_per_audience`; idempotency records older than
    /// `older_than` go too. Returns how many events were deleted.
    async fn prune_events(&self, older_than: Millis, keep_per_audience: u64) -> StoreResult<u64>;

    /// Stores a conversation, its participants and `events` in one transaction.
    async fn create_conversation(
        &self,
        c: &NewConversation,
        events: &[NewEvent],
    ) -> StoreResult<CreatedConversation>;

    async fn conversation(&self, id: Uuid) -> StoreResult<Option<Conversation>>;

    /// Conversations `principal` takes part in, ordered by id (UUIDv7, so by
    /// creation), after the given id.
    async fn conversations_of(
        &self,
        principal: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Conversation>>;

    /// Stores a message with the next seq of its conversation and, for a
    /// decided fan-out, its recipients and their events, in one transaction.
    async fn insert_message(&self, m: &NewMessage) -> StoreResult<InsertedMessage>;

    async fn message(&self, id: Uuid) -> StoreResult<Option<(Message, Verdict)>>;

    /// The messages of a conversation that `page.viewer` sent or received,
    /// oldest first.
    async fn messages(&self, conversation_id: Uuid, page: MessagePage)
        -> StoreResult<Vec<Message>>;

    async fn idempotent_response(
        &self,
        scope: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotentResponse>>;

    /// Stores a waiting task, its participants and the job that decides it.
    async fn create_task(&self, t: &NewTask, job: &NewJob) -> StoreResult<()>;

    async fn task(&self, id: Uuid) -> StoreResult<Option<TaskRecord>>;

    /// The conversations of a task, oldest first.
    async fn task_conversations(&self, task_id: Uuid) -> StoreResult<Vec<Conversation>>;

    /// Tasks `agent` takes part in, by id, after the given id.
    async fn tasks_of(
        &self,
        agent: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Task>>;

    /// Moves a task from `from` to `to` with its effects, in one transaction.
    /// `None` (and only the job finished) when the task was not in `from`.
    async fn transition_task(
        &self,
        id: Uuid,
        from: TaskState,
        to: TaskState,
        failure: Option<&TaskFailure>,
        effects: &Effects,
        now: Millis,
    ) -> StoreResult<Option<Vec<StoredEvent>>>;

    /// Adds participants to a conversation with the events announcing it.
    async fn add_participants(
        &self,
        conversation_id: Uuid,
        agents: &[Uuid],
        events: &[NewEvent],
        now: Millis,
    ) -> StoreResult<Vec<StoredEvent>>;

    /// Records a pending message's verdict, its recipients and `effects`.
    /// A forward is recorded only while the message's task is active, checked
    /// in the same transaction (and, on PostgreSQL, with the task row locked
    /// against a concurrent close), so a task closed during a hook call never
    /// forwards.
    async fn decide_message(
        &self,
        message_id: Uuid,
        outcome: &MessageOutcome,
        effects: &Effects,
        now: Millis,
    ) -> StoreResult<MessageDecided>;

    async fn is_recipient(&self, message_id: Uuid, agent: Uuid) -> StoreResult<bool>;

    /// Creates a pending lease and its gate job, unless a live lease for the
    /// recipient and message exists.
    async fn create_lease(&self, lease: &NewLease, job: &NewJob) -> StoreResult<CreatedLease>;

    async fn lease(&self, id: Uuid) -> StoreResult<Option<Lease>>;

    /// Applies a lease change with its effects. `None` (and only the job
    /// finished) when the lease was not in one of `change.from`.
    async fn transition_lease(
        &self,
        change: &LeaseChange,
        effects: &Effects,
    ) -> StoreResult<Option<(Lease, Vec<StoredEvent>)>>;

    /// Locks one job for the caller until `lock_until`, if it is free.
    async fn claim_job(
        &self,
        id: Uuid,
        now: Millis,
        lock_until: Millis,
    ) -> StoreResult<Option<Job>>;

    /// Locks up to `limit` due, free jobs.
    async fn claim_due_jobs(
        &self,
        now: Millis,
        lock_until: Millis,
        limit: u32,
    ) -> StoreResult<Vec<Job>>;

    /// Records a card. A new version of an id must come from the author of
    /// its newest version unless `force_author` (`Conflict` otherwise); the
    /// same id and version again is accepted only with identical contents.
    async fn install_card(&self, card: &CardRecord, force_author: bool) -> StoreResult<()>;

    /// Every installed card, by id then version order of installation.
    async fn cards(&self) -> StoreResult<Vec<CardRecord>>;

    /// Makes `new` the active signing key: the active one becomes secondary
    /// until `overlap_until`, secondaries past their time retire.
    async fn rotate_signing_key(
        &self,
        new: &SigningKeyRecord,
        now: Millis,
        overlap_until: Millis,
    ) -> StoreResult<()>;

    /// Every signing key, newest first.
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>>;

    /// Deletes a job whose subject no longer exists.
    async fn finish_job(&self, id: Uuid) -> StoreResult<()>;

    /// Unlocks every job. Called at start: a lock held when the hub stopped
    /// belongs to a process that no longer runs (one hub per database).
    async fn release_job_locks(&self) -> StoreResult<u64>;

    /// Unlocks a job to run again at `run_at` (after a transient failure).
    async fn retry_job(&self, id: Uuid, run_at: Millis) -> StoreResult<()>;
}

pub type DynStore = Arc<dyn Store>;

/// Opens the database the configuration names (creating a SQLite file and its
/// directory on first start) and migrates it when configured to.
pub async fn open(config: &Config) -> anyhow::Result<DynStore> {
    let url = config.database_url();
    let store: DynStore = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Arc::new(PgStore::connect(&url, config.storage.max_connections).await?)
    } else if url.starts_with("sqlite:") {
        Arc::new(
            SqliteStore::open(
                &url,
                config.storage.max_connections,
                config.storage.sqlite_busy_timeout_ms,
                config.storage.sqlite_synchronous,
            )
            .await?,
        )
    } else {
        anyhow::bail!("storage.database_url must start with sqlite:, postgres:// or postgresql://");
    };
    if config.storage.migrate_on_start {
        store.migrate().await?;
    }
    Ok(store)
}
