//! The loaders of spaces and grants (ADR 0020 §3, "Space facts ... are
//! read uncached"): a space with what the caller holds on it and on its
//! channels, a grant with its place. As in `load`, a missing row is
//! `Resource::Missing(kind)` after the same reads in the same order: the
//! levels read runs on the requested id (or the nil id) either way.

use std::sync::Arc;

use uuid::Uuid;

use super::load::{grants_of, place_of, Loaded, Loading, Reads, Source};
use super::{PlaceAt, Target};
use crate::domain::authz::level::GrantPlace;
use crate::domain::authz::{Action, Facts, PlaceRef, Resource, ResourceKind};
use crate::domain::conversation::{Conversation, ConversationKind};
use crate::domain::event::rfc3339;
use crate::domain::Principal;
use crate::hub::{Hub, Membership};
use crate::store::{ChannelRecord, GrantRecord, SpaceLevels, SpaceRecord, StoreResult};

/// Loads a place target (a space, the place a grant is put on, a grant).
pub(super) async fn load(
    reads: &impl Reads,
    me: Uuid,
    target: &Target,
    at: PlaceAt,
    source: Source,
) -> StoreResult<Loading> {
    match at {
        PlaceAt::Space(id) => space(reads, me, target, id, false).await,
        PlaceAt::GrantOnSpace(id) => space(reads, me, target, id, true).await,
        PlaceAt::GrantOnChannel(id) => channel(reads, me, target, id, source).await,
        PlaceAt::Grant(id) => grant(reads, me, target, id).await,
    }
}

/// A space and the caller's levels on it and on its channels; `as_grant`:
/// decided as the place of a grant (`grant.manage`).
async fn space(
    reads: &impl Reads,
    me: Uuid,
    target: &Target,
    id: Uuid,
    as_grant: bool,
) -> StoreResult<Loading> {
    let row = reads.space(id).await?;
    let levels = reads.space_levels(me, id).await?;
    Ok(space_loading(target, id, row, levels, as_grant, None))
}

/// The Loading of a space (or a grant on it) from its row and the caller's
/// levels; a missing row is `Missing`.
fn space_loading(
    target: &Target,
    id: Uuid,
    row: Option<SpaceRecord>,
    levels: SpaceLevels,
    as_grant: bool,
    grant: Option<GrantRecord>,
) -> Loading {
    let Some(row) = row else {
        return missing(target, true);
    };
    let resource = if as_grant {
        Resource::Grant {
            on: PlaceRef::Space(id),
        }
    } else {
        Resource::Space { id }
    };
    Loading {
        resource,
        facts: Facts {
            grants: levels.space.into_iter().collect(),
            channel_grants: levels.channels.into_iter().collect(),
            ..Facts::default()
        },
        loaded: match grant {
            Some(g) => Loaded::Grant(g),
            None => Loaded::Space(row),
        },
        from_store: true,
    }
}

/// A channel as the place of a grant, from its membership (cached, like a
/// send's read; a denial is decided again on the store).
async fn channel(
    reads: &impl Reads,
    me: Uuid,
    target: &Target,
    id: Uuid,
    source: Source,
) -> StoreResult<Loading> {
    let fetched = reads.membership(id, source).await?;
    Ok(channel_facts(
        target,
        me,
        fetched.membership,
        None,
        fetched.from_store,
    ))
}

/// The Loading of a grant's channel from its membership; `grant`: the
/// grant by id that names it.
fn channel_facts(
    target: &Target,
    me: Uuid,
    membership: Option<Arc<Membership>>,
    grant: Option<GrantRecord>,
    from_store: bool,
) -> Loading {
    let Some((membership, place)) = membership.and_then(|m| place_of(&m).map(|p| (m, p))) else {
        return missing(target, from_store);
    };
    Loading {
        facts: Facts {
            grants: grants_of(&membership, me),
            ..Facts::default()
        },
        resource: Resource::Grant {
            on: PlaceRef::Channel(place),
        },
        loaded: match grant {
            Some(g) => Loaded::Grant(g),
            None => Loaded::Conversation {
                membership,
                row: None,
            },
        },
        from_store,
    }
}

/// A grant and its place, decided on the store. Every branch makes the
/// same reads in the same order (ADR 0020 §3): the grant, the membership
/// of its channel (or the nil id's), the space (or nil) and its levels, so
/// a hidden grant costs what a missing one costs.
async fn grant(reads: &impl Reads, me: Uuid, target: &Target, id: Uuid) -> StoreResult<Loading> {
    let grant = reads.grant(id).await?;
    let place = grant.as_ref().map(|g| g.place);
    let (channel_id, space_id) = match place {
        Some(GrantPlace::Channel(c)) => (c, Uuid::nil()),
        Some(GrantPlace::Space(s)) => (Uuid::nil(), s),
        None => (Uuid::nil(), Uuid::nil()),
    };
    let membership = reads
        .membership(channel_id, Source::Store)
        .await?
        .membership;
    let row = reads.space(space_id).await?;
    let levels = reads.space_levels(me, space_id).await?;
    match (place, grant) {
        (Some(GrantPlace::Channel(_)), Some(g)) => {
            Ok(channel_facts(target, me, membership, Some(g), true))
        }
        (Some(GrantPlace::Space(_)), Some(g)) => {
            Ok(space_loading(target, space_id, row, levels, true, Some(g)))
        }
        _ => Ok(missing(target, true)),
    }
}

fn missing(target: &Target, from_store: bool) -> Loading {
    Loading {
        resource: Resource::Missing(target.kind()),
        facts: Facts::default(),
        loaded: Loaded::Nothing,
        from_store,
    }
}

/// A channel row as the conversation it is (the wire's shape for both).
pub fn channel_conversation(c: &ChannelRecord) -> Conversation {
    Conversation {
        id: c.id,
        kind: ConversationKind::Channel,
        name: Some(c.name.clone()),
        key: None,
        task_id: None,
        space_id: Some(c.space_id),
        state: Some(c.state),
        created_by: c.created_by,
        participants: Vec::new(),
        last_message_seq: u64::try_from(c.last_message_seq).unwrap_or(0),
        created_at: rfc3339(c.created_at),
    }
}

/// One page of the channels `principal` reads (`channel.list`, Filter
/// mode): `channels_visible_to` is the index, each row judged on its
/// cached levels map. The page ends where the index's does.
pub async fn readable_channels(
    hub: &Hub,
    principal: Principal,
    space: Option<Uuid>,
    after: Option<Uuid>,
    limit: u32,
) -> StoreResult<(Vec<Conversation>, Option<Uuid>)> {
    let mut rows = hub
        .store
        .channels_visible_to(principal.id, space, after, limit + 1)
        .await?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next_after = if more {
        rows.last().map(|c| c.id)
    } else {
        None
    };
    let mut judged = Vec::with_capacity(rows.len());
    for row in rows {
        let membership = hub.memberships.get(&hub.store, row.id).await?;
        judged.push((row, membership));
    }
    let me = principal.id;
    let kept = super::filter(hub, principal, Action::ChannelList, judged, |(_, m)| {
        let place = m.as_deref().and_then(place_of);
        match (place, m) {
            (Some(place), Some(m)) => (
                Resource::Conversation(place),
                Facts {
                    grants: grants_of(m, me),
                    ..Facts::default()
                },
            ),
            _ => (
                Resource::Missing(ResourceKind::Conversation),
                Facts::default(),
            ),
        }
    })
    .await?;
    let channels = kept.iter().map(|(c, _)| channel_conversation(c)).collect();
    Ok((channels, next_after))
}
