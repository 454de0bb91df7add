//! The queries that resolve grants through groups (ADR 0020 §5): who
//! reaches a channel, what a principal holds on a space, and which channels
//! a principal may list. Disabled principals reach nothing, in every one.

use uuid::Uuid;

use super::places::{level_of, ChannelLevels, SpaceLevels};
use super::sql::{parsed, Arg, Executor, Row};
use super::StoreResult;
use crate::domain::authz::level;
use crate::domain::PrincipalKind;

/// The ADR's levels query: one row per grant reaching an active principal,
/// groups resolved, on channel `$1` or space `$2`.
const CHANNEL_LEVELS: &str = "SELECT p.id, p.kind, g.level FROM grants g \
     LEFT JOIN group_members m ON g.subject_kind = 'group' AND m.group_id = g.subject_id \
     JOIN principals p ON p.id = CASE g.subject_kind WHEN 'group' THEN m.principal_id ELSE g.subject_id END \
     WHERE p.disabled_at IS NULL \
       AND ((g.place_kind = 'channel' AND g.place_id = $1) OR (g.place_kind = 'space' AND g.place_id = $2))";

/// The same rows for one principal `$1` on space `$2` and on its channels,
/// with the place each is on. Its groups are found from the principal
/// (`group_members_by_principal`), never by listing every group's members.
const SPACE_LEVELS: &str = "SELECT p.id, p.kind, g.level, g.place_kind FROM grants g \
     JOIN principals p ON p.id = $1 \
     WHERE p.disabled_at IS NULL AND ((g.subject_kind = 'principal' AND g.subject_id = $1) \
       OR (g.subject_kind = 'group' AND g.subject_id IN \
           (SELECT group_id FROM group_members WHERE principal_id = $1))) \
       AND ((g.place_kind = 'space' AND g.place_id = $2) \
         OR (g.place_kind = 'channel' AND g.place_id IN \
             (SELECT id FROM conversations WHERE kind = 'channel' AND space_id = $2)))";

fn level_row(r: &Row) -> StoreResult<(Uuid, PrincipalKind, level::Level)> {
    let kind = parsed(r.text("kind")?, "principal kind", PrincipalKind::parse)?;
    Ok((r.id("id")?, kind, level_of(r)?))
}

pub(super) async fn channel_levels(
    ex: &mut dyn Executor,
    channel: Uuid,
    space: Uuid,
) -> StoreResult<ChannelLevels> {
    let rows = ex
        .fetch_all(CHANNEL_LEVELS, &[Arg::Id(channel), Arg::Id(space)])
        .await?;
    let rows = rows
        .iter()
        .map(level_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(level::fold(rows))
}

/// The level reaching `principal` on the channel (directly, through a
/// group, or on its space), capped for its kind; `None` without a grant or
/// for a disabled principal. The levels query for one principal, read
/// inside a transaction that must decide one right (a redemption's maker).
pub(super) async fn principal_channel_level(
    ex: &mut dyn Executor,
    principal: Uuid,
    channel: Uuid,
    space: Uuid,
) -> StoreResult<Option<level::Level>> {
    let sql = format!("{CHANNEL_LEVELS} AND p.id = $3");
    let rows = ex
        .fetch_all(
            &sql,
            &[Arg::Id(channel), Arg::Id(space), Arg::Id(principal)],
        )
        .await?;
    let rows = rows
        .iter()
        .map(level_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(level::fold(rows).get(&principal).map(|(_, l)| *l))
}

pub(super) async fn space_levels(
    ex: &mut dyn Executor,
    principal: Uuid,
    space: Uuid,
) -> StoreResult<SpaceLevels> {
    let rows = ex
        .fetch_all(SPACE_LEVELS, &[Arg::Id(principal), Arg::Id(space)])
        .await?;
    let (mut on_space, mut on_channels) = (Vec::new(), Vec::new());
    for r in &rows {
        let row = level_row(r)?;
        if r.text("place_kind")? == "space" {
            on_space.push(row);
        } else {
            on_channels.push(row);
        }
    }
    let held = |rows: Vec<_>| level::fold(rows).get(&principal).map(|(_, l)| *l);
    Ok(SpaceLevels {
        space: held(on_space),
        channels: held(on_channels),
    })
}

/// Channels (in space `$2`, or any when NULL) reached by a grant held by
/// active principal `$1` directly or through a group, keyset by
/// `after_clause` (on `$3`), at most `$4`.
pub(super) fn visible_channels_sql(after_clause: &str) -> String {
    format!(
        "SELECT c.id, c.space_id, c.name, c.state, c.created_by, c.created_at, c.last_message_seq \
         FROM conversations c \
         WHERE c.kind = 'channel' AND ($2 IS NULL OR c.space_id = $2) AND {after_clause} \
           AND EXISTS (SELECT 1 FROM principals p WHERE p.id = $1 AND p.disabled_at IS NULL) \
           AND EXISTS (SELECT 1 FROM grants g \
                WHERE ((g.subject_kind = 'principal' AND g.subject_id = $1) \
                    OR (g.subject_kind = 'group' AND g.subject_id IN \
                        (SELECT group_id FROM group_members WHERE principal_id = $1))) \
                  AND ((g.place_kind = 'channel' AND g.place_id = c.id) \
                    OR (g.place_kind = 'space' AND g.place_id = c.space_id))) \
         ORDER BY c.id LIMIT $4"
    )
}
