//! The people half of [`IdentityStore`](super::IdentityStore) (ADR 0020
//! §1): disabling a person, agents' owners, what an owner lists, and the
//! kind and activity of principals a request names. The trait's methods
//! open the transactions; these are their steps.

use std::collections::HashSet;

use uuid::Uuid;

use super::identity::{OwnedAgent, OwnedKey};
use super::sql::{parsed, placeholders, Arg, Executor, Row};
use super::{StoreError, StoreResult};
use crate::domain::{Millis, PrincipalKind};

/// A principal's kind and `disabled_at`, read inside the caller's
/// transaction (after its lock, so the answer holds until commit).
pub(super) async fn kind_of(
    ex: &mut dyn Executor,
    id: Uuid,
) -> StoreResult<Option<(PrincipalKind, Option<Millis>)>> {
    let row = ex
        .fetch_optional(
            "SELECT kind, disabled_at FROM principals WHERE id = $1",
            &[Arg::Id(id)],
        )
        .await?;
    row.map(|r| Ok((kind(&r)?, r.opt_int("disabled_at")?)))
        .transpose()
}

fn kind(row: &Row) -> StoreResult<PrincipalKind> {
    parsed(row.text("kind")?, "principal kind", PrincipalKind::parse)
}

/// Only a person is disabled by `disable_person`.
pub(super) fn check_person(id: Uuid, found: Option<PrincipalKind>) -> StoreResult<()> {
    match found {
        None => Err(StoreError::NotFound),
        Some(PrincipalKind::Person) => Ok(()),
        Some(other) => Err(StoreError::Conflict(format!(
            "principal {id} is of kind {}, not a person",
            other.as_str()
        ))),
    }
}

/// Marks the person disabled, keeping the first time it was.
pub(super) async fn mark_disabled(ex: &mut dyn Executor, id: Uuid, now: Millis) -> StoreResult<()> {
    ex.execute(
        "UPDATE principals SET disabled_at = $1 WHERE id = $2 AND disabled_at IS NULL",
        &[Arg::Int(now), Arg::Id(id)],
    )
    .await?;
    Ok(())
}

/// An owner is an active person; a missing, other-kind or disabled one
/// are refused alike, so the refusal tells nothing about the id.
pub(super) async fn check_owner(ex: &mut dyn Executor, owner: Uuid) -> StoreResult<()> {
    match kind_of(ex, owner).await? {
        Some((PrincipalKind::Person, None)) => Ok(()),
        _ => Err(StoreError::Conflict(format!(
            "owner {owner} is not an active person"
        ))),
    }
}

/// Only an agent has an owner.
pub(super) fn check_agent(id: Uuid, found: Option<PrincipalKind>) -> StoreResult<()> {
    match found {
        None => Err(StoreError::NotFound),
        Some(PrincipalKind::Agent) => Ok(()),
        Some(other) => Err(StoreError::Conflict(format!(
            "principal {id} is of kind {}, not an agent: only agents have owners",
            other.as_str()
        ))),
    }
}

pub(super) async fn write_owner(
    ex: &mut dyn Executor,
    agent: Uuid,
    owner: Option<Uuid>,
) -> StoreResult<()> {
    ex.execute(
        "UPDATE principals SET owner_id = $1 WHERE id = $2",
        &[Arg::OptId(owner), Arg::Id(agent)],
    )
    .await?;
    Ok(())
}

/// Whether `agent` is an agent owned by `owner`, read after the caller's
/// lock on the agent.
pub(super) async fn owns(ex: &mut dyn Executor, owner: Uuid, agent: Uuid) -> StoreResult<bool> {
    let row = ex
        .fetch_optional(
            "SELECT 1 AS one FROM principals WHERE id = $1 AND kind = 'agent' AND owner_id = $2",
            &[Arg::Id(agent), Arg::Id(owner)],
        )
        .await?;
    Ok(row.is_some())
}

/// Principals disabled at or after `since`, for the revocation sweep. A
/// scan of `principals` (no index on `disabled_at`): one statement a sweep
/// interval, on a table of principals, not of messages.
pub(super) async fn disabled_since(
    ex: &mut dyn Executor,
    since: Millis,
) -> StoreResult<Vec<(Uuid, Millis)>> {
    let rows = ex
        .fetch_all(
            "SELECT id, disabled_at FROM principals WHERE disabled_at IS NOT NULL AND disabled_at >= $1",
            &[Arg::Int(since)],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.id("id")?, r.int("disabled_at")?)))
        .collect()
}

/// The owned agents with their keys, one joined read folded by agent.
pub(super) async fn owned_agents(
    ex: &mut dyn Executor,
    person: Uuid,
) -> StoreResult<Vec<OwnedAgent>> {
    let rows = ex
        .fetch_all(
            "SELECT p.id, p.name, p.created_at, k.key_id, k.created_at AS key_created_at, k.revoked_at \
             FROM principals p LEFT JOIN principal_keys k ON k.principal_id = p.id \
             WHERE p.owner_id = $1 AND p.kind = 'agent' \
             ORDER BY p.id, k.created_at, k.key_id",
            &[Arg::Id(person)],
        )
        .await?;
    let mut agents: Vec<OwnedAgent> = Vec::new();
    for row in &rows {
        let id = row.id("id")?;
        if agents.last().map(|a| a.agent_id) != Some(id) {
            agents.push(OwnedAgent {
                agent_id: id,
                name: row.text("name")?,
                created_at: row.int("created_at")?,
                keys: Vec::new(),
            });
        }
        if let Some(key_id) = row.opt_text("key_id")? {
            let agent = agents.last_mut().expect("pushed above");
            agent.keys.push(OwnedKey {
                key_id,
                created_at: row.int("key_created_at")?,
                revoked_at: row.opt_int("revoked_at")?,
            });
        }
    }
    Ok(agents)
}

/// Kind and active of each existing id, once each, in `ids` order.
pub(super) async fn principal_kinds(
    ex: &mut dyn Executor,
    ids: &[Uuid],
) -> StoreResult<Vec<(Uuid, PrincipalKind, bool)>> {
    let mut seen = HashSet::new();
    let unique: Vec<Uuid> = ids.iter().copied().filter(|id| seen.insert(*id)).collect();
    if unique.is_empty() {
        return Ok(Vec::new());
    }
    // 500 a statement: far below both dialects' parameter limits, however
    // many a request names.
    let mut found = std::collections::HashMap::new();
    for chunk in unique.chunks(500) {
        let sql = format!(
            "SELECT id, kind, disabled_at FROM principals WHERE id IN ({})",
            placeholders(1, chunk.len())
        );
        let args: Vec<Arg> = chunk.iter().map(|id| Arg::Id(*id)).collect();
        for row in &ex.fetch_all(&sql, &args).await? {
            let active = row.opt_int("disabled_at")?.is_none();
            found.insert(row.id("id")?, (kind(row)?, active));
        }
    }
    Ok(unique
        .into_iter()
        .filter_map(|id| found.get(&id).map(|(k, a)| (id, *k, *a)))
        .collect())
}
