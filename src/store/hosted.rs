//! Hosted App Card runs (ADR 0031): the app principal of each card id, the
//! runs, and each app's `remember` memory and `coord` registers. Written
//! once for both dialects; `coord` is one conditional statement per case,
//! so it holds no lock across a read.

use std::collections::HashMap;

use async_trait::async_trait;
use uuid::Uuid;

pub use super::hosted_invites::{
    InviteJoin, InviteRecord, InviteRedemption, JoinedEvents, JoinedRoom, Redeemed,
};
pub use super::hosted_profiles::AppProfile;

use super::installations::InstallationDialect;
use super::sql::{Arg, Database, Row};
use super::{StoreError, StoreResult};
use crate::domain::card::ReplyPolicy;
use crate::domain::conversation::Conversation;
use crate::domain::hosted::RunState;
use crate::domain::Millis;

/// A run as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub id: Uuid,
    pub card_id: String,
    pub version: String,
    pub app_id: Uuid,
    pub state: RunState,
    pub reason: Option<String>,
    pub exit_code: Option<i64>,
    pub isolated: bool,
    pub stop_requested: bool,
    pub created_at: Millis,
    pub ended_at: Option<Millis>,
    /// stdout and stderr, capped: while the run is live, the last
    /// `hosted.live_log_max_bytes` of it as of a recent heartbeat; whole
    /// once it ended, except after its process was killed (`owner_lost`
    /// by another's sweep): then the live copy it last wrote.
    pub log: Option<Vec<u8>>,
}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct RunEnd<'a> {
    pub state: RunState,
    pub reason: Option<&'static str>,
    pub exit_code: Option<i64>,
    pub log: &'a [u8],
    pub at: Millis,
}

/// A `coord` answer: whether the swap happened, and the register after it
/// (or as found).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordOutcome {
    pub swapped: bool,
    pub value: Option<String>,
    pub version: i64,
}

#[async_trait]
pub trait HostedStore: Send + Sync + 'static {
    /// The app principal made for a card id, if any.
    async fn hosted_app(&self, card_id: &str) -> StoreResult<Option<Uuid>>;

    /// Binds `app_id` to the card id unless one is bound already; answers
    /// the bound one (the first binder wins).
    async fn bind_hosted_app(&self, card_id: &str, app_id: Uuid, now: Millis) -> StoreResult<Uuid>;

    /// A new run in `starting`, owned by the process `owner` (its first
    /// heartbeat is its creation). An `alone` run (a beatless app's) is
    /// not created while another alone run of the app is live: false.
    async fn create_run(&self, run: &RunRecord, owner: Uuid, alone: bool) -> StoreResult<bool>;

    /// Records whether the card of a hosted app is beatless (each run's
    /// start writes what its card says).
    async fn set_hosted_beatless(&self, app_id: Uuid, beatless: bool) -> StoreResult<()>;

    /// The card id of a beatless hosted app; `None` for any other principal.
    async fn beatless_card_of(&self, app_id: Uuid) -> StoreResult<Option<String>>;

    /// `starting` to `running`, with whether the child has its own network
    /// namespace; false when the row is no longer starting.
    async fn mark_running(&self, id: Uuid, isolated: bool) -> StoreResult<bool>;

    /// A live run's end; false when it had ended already.
    async fn finish_run(&self, id: Uuid, end: &RunEnd<'_>) -> StoreResult<bool>;

    async fn run(&self, id: Uuid) -> StoreResult<Option<RunRecord>>;

    /// The newest runs first, of one card or all; logs left out.
    async fn runs(&self, card_id: Option<&str>, limit: u32) -> StoreResult<Vec<RunRecord>>;

    /// Asks the process running a live run to stop it; false when the run
    /// is missing or ended.
    async fn request_stop(&self, id: Uuid) -> StoreResult<bool>;

    /// The owner's heartbeat on a live run: answers whether another process
    /// asked to stop it, or `None` when the run is no longer live or no
    /// longer this owner's (another process swept it as orphaned).
    async fn beat_run(&self, id: Uuid, owner: Uuid, now: Millis) -> StoreResult<Option<bool>>;

    /// The owner's live copy of a run's log (its tail, replacing the one
    /// before); nothing when the run is no longer live or this owner's, so
    /// a late write never replaces the whole log `finish_run` stored.
    async fn write_run_log(&self, id: Uuid, owner: Uuid, log: &[u8]) -> StoreResult<()>;

    /// Ends `failed` with `owner_lost` every live run of another owner whose
    /// last heartbeat is older than `stale_before` (its process is gone: a
    /// live owner beats every `hosted.control_interval_ms`); answers their
    /// ids.
    async fn sweep_orphan_runs(
        &self,
        owner: Uuid,
        stale_before: Millis,
        now: Millis,
    ) -> StoreResult<Vec<Uuid>>;

    /// Sets a key of the app's memory; `Conflict` when a new key would pass
    /// `max_keys`.
    async fn remember(
        &self,
        app_id: Uuid,
        key: &str,
        value: &str,
        max_keys: u64,
        now: Millis,
    ) -> StoreResult<()>;

    async fn recall(&self, app_id: Uuid, key: &str) -> StoreResult<Option<String>>;

    /// The app's rooms (ADR 0031 §6): the conversations of its tasks, by
    /// id, after the given id.
    async fn app_rooms(
        &self,
        app_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Conversation>>;

    /// The principals taking part in any of the app's rooms, by id, after
    /// the given id (`list_connections`).
    async fn app_connections(
        &self,
        app_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Uuid>>;

    /// Records the card's `reply_policy` for its hosted app (each run's
    /// start writes what its card says; `metered` is never installed).
    async fn set_hosted_reply_policy(&self, app_id: Uuid, policy: ReplyPolicy) -> StoreResult<()>;

    /// The reply policy of a hosted app; `None` for any other principal.
    async fn hosted_reply_policy(&self, app_id: Uuid) -> StoreResult<Option<ReplyPolicy>>;

    /// Whether `principal` takes part in one of the app's rooms.
    async fn shares_room(&self, app_id: Uuid, principal: Uuid) -> StoreResult<bool>;

    /// Compare-and-set on the app's register `key` (ADR 0031 §7).
    async fn coord(
        &self,
        app_id: Uuid,
        key: &str,
        expect: Option<&str>,
        value: Option<&str>,
    ) -> StoreResult<CoordOutcome>;

    /// The persona and profile the app set (`get_persona`, `whoami`).
    async fn app_profile(&self, app_id: Uuid) -> StoreResult<AppProfile>;

    /// `set_persona`; `None` falls back to the card's persona file.
    async fn set_app_persona(
        &self,
        app_id: Uuid,
        persona: Option<&str>,
        now: Millis,
    ) -> StoreResult<()>;

    /// `set_profile`: replaces the app's profile (JSON text).
    async fn set_app_profile(&self, app_id: Uuid, profile: &str, now: Millis) -> StoreResult<()>;

    /// The profiles set by any of `ids` (`rooms_members`).
    async fn app_profiles(&self, ids: &[Uuid]) -> StoreResult<HashMap<Uuid, String>>;

    /// Stores a new invite link (`invite_create`); `Conflict`
    /// [`INVITES_AT_MAX`] when its maker has `max_live` live links (not
    /// expired at the link's `created_at`, a use left) already.
    async fn create_invite(&self, invite: &InviteRecord, max_live: u64) -> StoreResult<()>;

    async fn invite(&self, id: Uuid) -> StoreResult<Option<InviteRecord>>;

    /// Spends one use of the link and joins the redeemer in one
    /// transaction, with `put_grant`'s safeguards; see [`Redeemed`].
    async fn redeem_invite(&self, r: &InviteRedemption) -> StoreResult<Redeemed>;

    /// Deletes the links expired at `now` or used up; answers how many
    /// (the retention task's).
    async fn prune_invites(&self, now: Millis) -> StoreResult<u64>;
}

pub use super::hosted_invites::INVITES_AT_MAX;

const RUN_COLUMNS: &str = "id, card_id, version, app_id, state, reason, exit_code, isolated, \
                           stop_requested, created_at, ended_at";

fn run_row(r: &Row, with_log: bool) -> StoreResult<RunRecord> {
    let state = r.text("state")?;
    Ok(RunRecord {
        id: r.id("id")?,
        card_id: r.text("card_id")?,
        version: r.text("version")?,
        app_id: r.id("app_id")?,
        state: RunState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("run state {state:?}")))?,
        reason: r.opt_text("reason")?,
        exit_code: r.opt_int("exit_code")?,
        isolated: r.int("isolated")? == 1,
        stop_requested: r.int("stop_requested")? == 1,
        created_at: r.int("created_at")?,
        ended_at: r.opt_int("ended_at")?,
        log: if with_log {
            r.opt_int("has_log")?
                .filter(|n| *n == 1)
                .map(|_| r.bytes("log"))
                .transpose()?
        } else {
            None
        },
    })
}

#[async_trait]
impl<D: Database + InstallationDialect> HostedStore for D {
    async fn hosted_app(&self, card_id: &str) -> StoreResult<Option<Uuid>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT app_id FROM hosted_apps WHERE card_id = $1",
                &[Arg::Text(card_id)],
            )
            .await?;
        row.map(|r| r.id("app_id")).transpose()
    }

    async fn bind_hosted_app(&self, card_id: &str, app_id: Uuid, now: Millis) -> StoreResult<Uuid> {
        let mut tx = self.begin().await?;
        tx.execute(
            "INSERT INTO hosted_apps (card_id, app_id, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (card_id) DO NOTHING",
            &[Arg::Text(card_id), Arg::Id(app_id), Arg::Int(now)],
        )
        .await?;
        let row = tx
            .fetch_optional(
                "SELECT app_id FROM hosted_apps WHERE card_id = $1",
                &[Arg::Text(card_id)],
            )
            .await?
            .ok_or(StoreError::NotFound)?;
        let bound = row.id("app_id")?;
        tx.commit().await?;
        Ok(bound)
    }

    async fn create_run(&self, run: &RunRecord, owner: Uuid, alone: bool) -> StoreResult<bool> {
        let owner = owner.to_string();
        let mut tx = self.begin().await?;
        // `app_runs_one_live_alone` refuses a second live alone run.
        let n = tx.execute(
            "INSERT INTO app_runs (id, card_id, version, app_id, state, isolated, stop_requested, \
             created_at, owner, heartbeat_at, alone) VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8, $7, $9) \
             ON CONFLICT DO NOTHING",
            &[
                Arg::Id(run.id),
                Arg::Text(&run.card_id),
                Arg::Text(&run.version),
                Arg::Id(run.app_id),
                Arg::Text(run.state.as_str()),
                Arg::Int(i64::from(run.isolated)),
                Arg::Int(run.created_at),
                Arg::Text(&owner),
                Arg::Int(i64::from(alone)),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(n == 1)
    }

    async fn set_hosted_beatless(&self, app_id: Uuid, beatless: bool) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        tx.execute(
            "UPDATE hosted_apps SET beatless = $1 WHERE app_id = $2",
            &[Arg::Int(i64::from(beatless)), Arg::Id(app_id)],
        )
        .await?;
        tx.commit().await
    }

    async fn beatless_card_of(&self, app_id: Uuid) -> StoreResult<Option<String>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT card_id FROM hosted_apps WHERE app_id = $1 AND beatless = 1",
                &[Arg::Id(app_id)],
            )
            .await?;
        row.map(|r| r.text("card_id")).transpose()
    }

    async fn mark_running(&self, id: Uuid, isolated: bool) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        let n = tx
            .execute(
                "UPDATE app_runs SET state = 'running', isolated = $1 WHERE id = $2 AND state = 'starting'",
                &[Arg::Int(i64::from(isolated)), Arg::Id(id)],
            )
            .await?;
        tx.commit().await?;
        Ok(n == 1)
    }

    async fn finish_run(&self, id: Uuid, end: &RunEnd<'_>) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        let n = tx
            .execute(
                "UPDATE app_runs SET state = $1, reason = $2, exit_code = $3, log = $4, ended_at = $5 \
                 WHERE id = $6 AND state IN ('starting', 'running')",
                &[
                    Arg::Text(end.state.as_str()),
                    Arg::OptText(end.reason),
                    Arg::OptInt(end.exit_code),
                    Arg::Bytes(end.log),
                    Arg::Int(end.at),
                    Arg::Id(id),
                ],
            )
            .await?;
        if n == 0 {
            // Swept `owner_lost` while this process stalled: the row keeps
            // its end, and gets the whole log, which only this process has
            // (its live copy is only the tail).
            tx.execute(
                "UPDATE app_runs SET log = $1 WHERE id = $2 AND reason = 'owner_lost'",
                &[Arg::Bytes(end.log), Arg::Id(id)],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(n == 1)
    }

    async fn run(&self, id: Uuid) -> StoreResult<Option<RunRecord>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                &format!(
                    "SELECT {RUN_COLUMNS}, CASE WHEN log IS NULL THEN 0 ELSE 1 END AS has_log, log \
                     FROM app_runs WHERE id = $1"
                ),
                &[Arg::Id(id)],
            )
            .await?;
        row.map(|r| run_row(&r, true)).transpose()
    }

    async fn runs(&self, card_id: Option<&str>, limit: u32) -> StoreResult<Vec<RunRecord>> {
        let rows = self
            .read()
            .await?
            .fetch_all(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM app_runs WHERE ($1 IS NULL OR card_id = $1) \
                     ORDER BY created_at DESC, id LIMIT $2"
                ),
                &[Arg::OptText(card_id), Arg::Int(i64::from(limit))],
            )
            .await?;
        rows.iter().map(|r| run_row(r, false)).collect()
    }

    async fn request_stop(&self, id: Uuid) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        let n = tx
            .execute(
                "UPDATE app_runs SET stop_requested = 1 \
                 WHERE id = $1 AND state IN ('starting', 'running')",
                &[Arg::Id(id)],
            )
            .await?;
        tx.commit().await?;
        Ok(n == 1)
    }

    async fn beat_run(&self, id: Uuid, owner: Uuid, now: Millis) -> StoreResult<Option<bool>> {
        let owner = owner.to_string();
        let mut tx = self.begin().await?;
        let row = tx
            .fetch_optional(
                "UPDATE app_runs SET heartbeat_at = $1 \
                 WHERE id = $2 AND owner = $3 AND state IN ('starting', 'running') \
                 RETURNING stop_requested",
                &[Arg::Int(now), Arg::Id(id), Arg::Text(&owner)],
            )
            .await?;
        let stop = row.map(|r| r.int("stop_requested")).transpose()?;
        tx.commit().await?;
        Ok(stop.map(|n| n == 1))
    }

    async fn write_run_log(&self, id: Uuid, owner: Uuid, log: &[u8]) -> StoreResult<()> {
        let owner = owner.to_string();
        let mut tx = self.begin().await?;
        tx.execute(
            "UPDATE app_runs SET log = $1 \
             WHERE id = $2 AND owner = $3 AND state IN ('starting', 'running')",
            &[Arg::Bytes(log), Arg::Id(id), Arg::Text(&owner)],
        )
        .await?;
        tx.commit().await
    }

    async fn sweep_orphan_runs(
        &self,
        owner: Uuid,
        stale_before: Millis,
        now: Millis,
    ) -> StoreResult<Vec<Uuid>> {
        let owner = owner.to_string();
        let mut tx = self.begin().await?;
        let rows = tx
            .fetch_all(
                "UPDATE app_runs SET state = 'failed', reason = 'owner_lost', ended_at = $1 \
                 WHERE state IN ('starting', 'running') \
                 AND (owner IS NULL OR owner <> $2) \
                 AND (heartbeat_at IS NULL OR heartbeat_at < $3) \
                 RETURNING id",
                &[Arg::Int(now), Arg::Text(&owner), Arg::Int(stale_before)],
            )
            .await?;
        let ids = rows
            .iter()
            .map(|r| r.id("id"))
            .collect::<StoreResult<_>>()?;
        tx.commit().await?;
        Ok(ids)
    }

    async fn app_rooms(
        &self,
        app_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Conversation>> {
        super::hosted_rooms::app_rooms(self, app_id, after, limit).await
    }

    async fn app_connections(
        &self,
        app_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Uuid>> {
        super::hosted_rooms::app_connections(self, app_id, after, limit).await
    }

    async fn set_hosted_reply_policy(&self, app_id: Uuid, policy: ReplyPolicy) -> StoreResult<()> {
        super::hosted_rooms::set_reply_policy(self, app_id, policy).await
    }

    async fn hosted_reply_policy(&self, app_id: Uuid) -> StoreResult<Option<ReplyPolicy>> {
        super::hosted_rooms::reply_policy(self, app_id).await
    }

    async fn shares_room(&self, app_id: Uuid, principal: Uuid) -> StoreResult<bool> {
        super::hosted_rooms::shares_room(self, app_id, principal).await
    }

    async fn app_profile(&self, app_id: Uuid) -> StoreResult<AppProfile> {
        super::hosted_profiles::app_profile(self, app_id).await
    }

    async fn set_app_persona(
        &self,
        app_id: Uuid,
        persona: Option<&str>,
        now: Millis,
    ) -> StoreResult<()> {
        super::hosted_profiles::set_persona(self, app_id, persona, now).await
    }

    async fn set_app_profile(&self, app_id: Uuid, profile: &str, now: Millis) -> StoreResult<()> {
        super::hosted_profiles::set_profile(self, app_id, profile, now).await
    }

    async fn app_profiles(&self, ids: &[Uuid]) -> StoreResult<HashMap<Uuid, String>> {
        super::hosted_profiles::profiles_of(self, ids).await
    }

    async fn create_invite(&self, invite: &InviteRecord, max_live: u64) -> StoreResult<()> {
        super::hosted_invites::create(self, invite, max_live).await
    }

    async fn invite(&self, id: Uuid) -> StoreResult<Option<InviteRecord>> {
        super::hosted_invites::read(self, id).await
    }

    async fn redeem_invite(&self, r: &InviteRedemption) -> StoreResult<Redeemed> {
        super::hosted_invites::redeem::<D>(self, r).await
    }

    async fn prune_invites(&self, now: Millis) -> StoreResult<u64> {
        super::hosted_invites::prune(self, now).await
    }

    async fn remember(
        &self,
        app_id: Uuid,
        key: &str,
        value: &str,
        max_keys: u64,
        now: Millis,
    ) -> StoreResult<()> {
        super::hosted_memory::remember(self, app_id, key, value, max_keys, now).await
    }

    async fn recall(&self, app_id: Uuid, key: &str) -> StoreResult<Option<String>> {
        super::hosted_memory::recall(self, app_id, key).await
    }

    async fn coord(
        &self,
        app_id: Uuid,
        key: &str,
        expect: Option<&str>,
        value: Option<&str>,
    ) -> StoreResult<CoordOutcome> {
        super::hosted_memory::coord(self, app_id, key, expect, value).await
    }
}
