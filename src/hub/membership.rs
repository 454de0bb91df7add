//! Conversation membership, cached in the hub for the send path.
//!
//! Every send checks that the sender takes part in the conversation and
//! fans out to the other participants: without a cache, that is two store
//! reads (the conversation and its participants) per send. The cache holds
//! what those checks read (kind, task, participants) and the fields that
//! never change (name, key, creator, creation time), never the
//! conversation's moving parts (its last message seq), nor the task's state:
//! a task send still reads the task from the store. See
//! docs/adr/0019-membership-cache.md.
//!
//! Participants are only ever added, and every handler that adds them (or
//! creates a conversation) calls [`MembershipCache::invalidate`] after its
//! store call, whatever that call returned. A fill that raced with an
//! invalidation is dropped (the generation check in [`MembershipCache::get`]),
//! so a cached entry is never older than the last invalidation of its id.
//!
//! Channels (ADR 0020 §2) are cached too, with their space, state and
//! readers (each principal a grant reaches, with its kind and effective
//! level, from one `PlaceStore::channel_levels` query). Grants, group
//! members and channel states *remove* rights, so their writers call
//! [`MembershipCache::invalidate_channels`], which drops every channel
//! entry and bumps the generation; a denial decided on a cached entry is
//! decided again on a store read before it is answered (`access`).
//! Writers in another process (the operator CLI) bump the store's rights
//! version instead, on whose change the revocation sweep calls it.
//!
//! The cache is per process, so in `cluster.mode = "nats"` it is off
//! (`hub::membership_cache_entries`, ADR 0034 §4): another node's change
//! of participants or channel levels has no sweep that would drop a stale
//! entry within a bound.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::domain::conversation::{ChannelState, Conversation, ConversationKind};
use crate::domain::PrincipalKind;
use crate::store::{ChannelLevels, DynStore, StoreError, StoreResult};

/// What a send reads of a conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct Membership {
    pub id: Uuid,
    pub kind: ConversationKind,
    pub task_id: Option<Uuid>,
    pub participants: Vec<Uuid>,
    /// The participants who are people (ADR 0020 §1); the others are
    /// agents. Their events are named `person/...`. Kept beside
    /// `participants`, not in it, so the readers of ids stay as they are.
    /// (A channel's readers carry their kind in `channel.levels`.)
    pub people: Vec<Uuid>,
    /// The participants who are disabled (people), out of every fan-out
    /// (ADR 0020 §1). A disable drops every cached entry
    /// ([`MembershipCache::invalidate_all`]).
    pub disabled: Vec<Uuid>,
    /// The conversation's fields that never change once it is created, so
    /// a gate's hook gets the conversation without reading it again.
    pub name: Option<String>,
    pub key: Option<String>,
    pub created_by: Uuid,
    pub created_at: String,
    /// A channel's place: `None` for every other kind.
    pub channel: Option<ChannelPlace>,
}

/// What a channel's decisions read: its space, its state and its readers.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelPlace {
    pub space_id: Uuid,
    pub state: ChannelState,
    /// Principal -> (kind, effective level), folded by
    /// `domain::authz::level`; disabled principals are not in it.
    pub levels: ChannelLevels,
}

impl Membership {
    /// The conversation and, for a channel, its levels, read from the
    /// store: what the cache holds, and what a denial is decided again on.
    pub async fn read(store: &DynStore, id: Uuid) -> StoreResult<Option<Membership>> {
        Ok(Membership::read_whole(store, id).await?.map(|(_, m)| m))
    }

    /// [`Membership::read`] with the conversation it was read from. Two
    /// statements whatever the id names: the conversation with its
    /// participants, then the channel levels on the requested id (run for
    /// a missing id and for every kind too, and dropped unless a channel),
    /// so a hidden id costs what a missing one costs (ADR 0020 §3).
    pub async fn read_whole(
        store: &DynStore,
        id: Uuid,
    ) -> StoreResult<Option<(Conversation, Membership)>> {
        let conversation = store.conversation(id).await?;
        let space = conversation.as_ref().and_then(|c| c.space_id);
        let levels = store
            .channel_levels(id, space.unwrap_or_else(Uuid::nil))
            .await?;
        // People take part in direct and group conversations only (task
        // conversations hold agents). The kinds read runs for every id, on
        // the requested one where there are no participants to read, so a
        // hidden conversation costs the statements of a missing one (ADR
        // 0020 §3). Only a cache miss pays it, never a send on a cached
        // entry.
        let with_people = conversation
            .as_ref()
            .filter(|c| matches!(c.kind, ConversationKind::Direct | ConversationKind::Group));
        let kinds = match with_people {
            Some(c) => store.principal_kinds(&c.participants).await?,
            None => {
                store.principal_kinds(&[id]).await?;
                Vec::new()
            }
        };
        let Some(conversation) = conversation else {
            return Ok(None);
        };
        let mut membership = Membership::of(&conversation);
        for (id, kind, active) in kinds {
            if kind == PrincipalKind::Person {
                membership.people.push(id);
            }
            if !active {
                membership.disabled.push(id);
            }
        }
        if conversation.kind == ConversationKind::Channel {
            let corrupt = || StoreError::Corrupt(format!("channel {id} without space or state"));
            membership.channel = Some(ChannelPlace {
                space_id: space.ok_or_else(corrupt)?,
                state: conversation.state.ok_or_else(corrupt)?,
                levels,
            });
        }
        Ok(Some((conversation, membership)))
    }

    /// The membership of a conversation without its channel levels nor
    /// its people (for a task conversation, all there is).
    pub fn of(c: &Conversation) -> Membership {
        Membership {
            id: c.id,
            kind: c.kind,
            task_id: c.task_id,
            participants: c.participants.clone(),
            people: Vec::new(),
            disabled: Vec::new(),
            name: c.name.clone(),
            key: c.key.clone(),
            created_by: c.created_by,
            created_at: c.created_at.clone(),
            channel: None,
        }
    }

    /// The conversation as it stood when its message `seq` was stored.
    pub fn conversation_at(&self, seq: u64) -> Conversation {
        Conversation {
            id: self.id,
            kind: self.kind,
            name: self.name.clone(),
            key: self.key.clone(),
            task_id: self.task_id,
            space_id: self.channel.as_ref().map(|c| c.space_id),
            state: self.channel.as_ref().map(|c| c.state),
            created_by: self.created_by,
            participants: self.participants.clone(),
            last_message_seq: seq,
            created_at: self.created_at.clone(),
        }
    }

    pub fn includes(&self, principal: Uuid) -> bool {
        self.participants.contains(&principal)
    }

    /// Whether `principal`, a participant or a channel's reader, is a
    /// person: its events are named `person/...`.
    pub fn is_person(&self, principal: Uuid) -> bool {
        self.people.contains(&principal)
            || self.channel.as_ref().is_some_and(|c| {
                c.levels
                    .get(&principal)
                    .is_some_and(|(kind, _)| *kind == PrincipalKind::Person)
            })
    }

    /// The participants but `sender` who receive its events: not the
    /// disabled.
    pub fn recipients_but(&self, sender: Uuid) -> Vec<Uuid> {
        self.participants
            .iter()
            .copied()
            .filter(|p| *p != sender && !self.disabled.contains(p))
            .collect()
    }

    /// Those of `recipients` who are people.
    pub fn people_among(&self, recipients: &[Uuid]) -> Vec<Uuid> {
        if self.people.is_empty() && self.channel.is_none() {
            return Vec::new();
        }
        recipients
            .iter()
            .copied()
            .filter(|r| self.is_person(*r))
            .collect()
    }
}

/// A bounded map from conversation id to membership
/// (`messages.membership_cache_entries`; 0 disables it), evicting the
/// oldest fill first.
pub struct MembershipCache {
    limit: usize,
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    map: HashMap<Uuid, (u64, Arc<Membership>)>,
    /// Fills in order, each with the stamp it had; an id whose stamp no
    /// longer matches was invalidated or filled again since.
    order: VecDeque<(Uuid, u64)>,
    /// Bumped by every invalidation: a fill that started before one is
    /// dropped, since its read may predate the change.
    generation: u64,
    next_stamp: u64,
}

impl MembershipCache {
    pub fn new(limit: usize) -> MembershipCache {
        MembershipCache {
            limit,
            inner: Mutex::new(Entries::default()),
        }
    }

    /// The conversation's membership, from the cache or else from the store
    /// (and then cached). `None` when there is no such conversation; misses
    /// are not cached.
    pub async fn get(&self, store: &DynStore, id: Uuid) -> StoreResult<Option<Arc<Membership>>> {
        Ok(self.lookup(store, id).await?.0)
    }

    /// [`MembershipCache::get`], saying whether it read the store (a miss,
    /// or the cache disabled): a decision made on that read is as fresh as
    /// a store read, and `access` does not read again before refusing.
    pub async fn lookup(
        &self,
        store: &DynStore,
        id: Uuid,
    ) -> StoreResult<(Option<Arc<Membership>>, bool)> {
        if self.limit == 0 {
            return Ok((Membership::read(store, id).await?.map(Arc::new), true));
        }
        let generation = {
            let entries = self.lock();
            if let Some((_, m)) = entries.map.get(&id) {
                return Ok((Some(m.clone()), false));
            }
            entries.generation
        };
        let Some(membership) = Membership::read(store, id).await? else {
            return Ok((None, true));
        };
        let membership = Arc::new(membership);
        self.fill(generation, membership.clone());
        Ok((Some(membership), true))
    }

    /// Forgets the conversation's membership. Call it after every store call
    /// that creates the conversation or changes its participants, also when
    /// that call failed (it may have committed).
    pub fn invalidate(&self, id: Uuid) {
        let mut entries = self.lock();
        entries.generation += 1;
        entries.map.remove(&id);
    }

    /// Forgets every entry: a person was disabled, and entries hold who
    /// is (ADR 0020 §1). Disables are rare; the cache refills on use.
    pub fn invalidate_all(&self) {
        let mut entries = self.lock();
        entries.generation += 1;
        entries.map.clear();
        entries.order.clear();
    }

    /// Forgets every channel: a grant, a group member or a channel state
    /// changed, and any channel's readers may have changed with it. Call it
    /// after the store call, also when that call failed.
    pub fn invalidate_channels(&self) {
        let mut entries = self.lock();
        entries.generation += 1;
        entries.map.retain(|_, (_, m)| m.channel.is_none());
    }

    fn fill(&self, generation: u64, membership: Arc<Membership>) {
        let mut entries = self.lock();
        if entries.generation != generation {
            return;
        }
        let stamp = entries.next_stamp;
        entries.next_stamp += 1;
        entries
            .map
            .insert(membership.id, (stamp, membership.clone()));
        entries.order.push_back((membership.id, stamp));
        while entries.map.len() > self.limit {
            let Some((id, stamp)) = entries.order.pop_front() else {
                break;
            };
            if entries.map.get(&id).is_some_and(|(s, _)| *s == stamp) {
                entries.map.remove(&id);
            }
        }
        // Invalidations leave dead order slots behind: drop them before the
        // queue outgrows the map by much.
        if entries.order.len() > 2 * self.limit {
            let Entries { map, order, .. } = &mut *entries;
            order.retain(|(id, stamp)| map.get(id).is_some_and(|(s, _)| s == stamp));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.inner.lock().expect("membership cache lock")
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn membership(participants: usize) -> Arc<Membership> {
        Arc::new(Membership {
            id: Uuid::now_v7(),
            kind: ConversationKind::Group,
            task_id: None,
            participants: (0..participants).map(|_| Uuid::new_v4()).collect(),
            people: Vec::new(),
            disabled: Vec::new(),
            name: None,
            key: None,
            created_by: Uuid::new_v4(),
            created_at: String::new(),
            channel: None,
        })
    }

    fn channel() -> Arc<Membership> {
        let reader = Uuid::new_v4();
        Arc::new(Membership {
            kind: ConversationKind::Channel,
            participants: vec![],
            channel: Some(ChannelPlace {
                space_id: Uuid::new_v4(),
                state: ChannelState::Open,
                levels: [(
                    reader,
                    (
                        crate::domain::PrincipalKind::Agent,
                        crate::domain::authz::Level::Read,
                    ),
                )]
                .into_iter()
                .collect(),
            }),
            ..(*membership(0)).clone()
        })
    }

    fn cached(cache: &MembershipCache, id: Uuid) -> Option<Arc<Membership>> {
        cache.lock().map.get(&id).map(|(_, m)| m.clone())
    }

    #[test]
    fn stays_within_its_limit_evicting_the_oldest() {
        let cache = MembershipCache::new(3);
        let all: Vec<_> = (0..5).map(|_| membership(2)).collect();
        for m in &all {
            cache.fill(0, m.clone());
        }
        assert_eq!(cache.len(), 3);
        assert!(cached(&cache, all[0].id).is_none());
        assert!(cached(&cache, all[1].id).is_none());
        assert_eq!(cached(&cache, all[4].id).as_deref(), Some(&*all[4]));
    }

    #[test]
    fn a_fill_that_raced_an_invalidation_is_dropped() {
        let cache = MembershipCache::new(8);
        let m = membership(2);
        let before = cache.lock().generation;
        // A participant is added (and invalidated) while the read was out.
        cache.invalidate(m.id);
        cache.fill(before, m.clone());
        assert!(cached(&cache, m.id).is_none());
        let now = cache.lock().generation;
        cache.fill(now, m.clone());
        assert!(cached(&cache, m.id).is_some());
        cache.invalidate(m.id);
        assert!(cached(&cache, m.id).is_none());
    }

    #[test]
    fn invalidating_channels_drops_every_channel_and_keeps_the_rest() {
        let cache = MembershipCache::new(8);
        let group = membership(2);
        let (general, notes) = (channel(), channel());
        for m in [&group, &general, &notes] {
            cache.fill(0, m.clone());
        }
        let before = cache.lock().generation;
        cache.invalidate_channels();
        assert!(cached(&cache, general.id).is_none());
        assert!(cached(&cache, notes.id).is_none());
        assert_eq!(cached(&cache, group.id).as_deref(), Some(&*group));
        // A channel read before the grant changed does not come back.
        cache.fill(before, general.clone());
        assert!(cached(&cache, general.id).is_none());
    }

    /// A disable forgets every entry, and a fill read before it is dropped.
    #[test]
    fn invalidate_all_forgets_everything_and_drops_racing_fills() {
        let cache = MembershipCache::new(8);
        let (a, b) = (membership(2), membership(3));
        let before = cache.lock().generation;
        cache.fill(before, a.clone());
        cache.fill(before, b.clone());
        cache.invalidate_all();
        assert_eq!(cache.len(), 0);
        assert!(cache.lock().order.is_empty());
        cache.fill(before, a.clone());
        assert!(cached(&cache, a.id).is_none(), "read before the disable");
    }

    #[test]
    fn invalidations_do_not_grow_the_order_queue_without_bound() {
        let cache = MembershipCache::new(2);
        let m = membership(1);
        for _ in 0..100 {
            let generation = cache.lock().generation;
            cache.fill(generation, m.clone());
            cache.invalidate(m.id);
        }
        assert!(cache.lock().order.len() <= 4 + 1);
        assert_eq!(cache.len(), 0);
    }
}
