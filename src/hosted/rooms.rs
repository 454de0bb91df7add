//! The room primitives and `list_connections` (ADR 0031 §6): rooms are the
//! conversations of the app's tasks and the channels it reads (there is no
//! `rooms_create`: an app's rooms come from the tasks agents open with it,
//! the grants people give it and the links it redeems, `rooms_join`). Every read goes through
//! the one decision (`access`) on the conversation, so a room the app may
//! not read answers exactly like a missing one; a send is `send_message`'s.

use serde_json::{json, Value};
use uuid::Uuid;

use super::calls::{refused, rpc_failure, store_failure, Answer, Caller};
use crate::access::{self, Target};
use crate::domain::authz::Action;
use crate::domain::conversation::{Conversation, ConversationKind};
use crate::domain::hosted::wire::ErrorCode;
use crate::store::{MessagePage, PagePlace};

/// A room as the primitives show it. `members` counts what
/// `rooms_members` lists: a task conversation's participants, a channel's
/// app alone (1; see `members_of`).
pub(super) fn room_of(c: &Conversation) -> Value {
    let members = match c.kind {
        ConversationKind::Channel => 1,
        _ => c.participants.len(),
    };
    json!({
        "id": c.id,
        "kind": c.kind,
        "name": c.name,
        "taskId": c.task_id,
        "members": members,
    })
}

impl Caller {
    fn page(&self, limit: Option<u32>) -> u32 {
        limit.unwrap_or(self.hub.config.events.page_default)
    }

    /// `{rooms: [{id, kind, name, taskId, members}], nextAfter}`: its
    /// tasks' conversations and the channels it reads (a grant, or a link
    /// it redeemed), merged by id. Each source is paged by id; past the
    /// last id a full page of either reached, the other is left for the
    /// next page, so no room is skipped.
    pub(super) async fn rooms_list(&self, after: Option<Uuid>, limit: Option<u32>) -> Answer {
        let limit = self.page(limit);
        let tasks = self
            .hub
            .store
            .app_rooms(self.app, after, limit)
            .await
            .map_err(store_failure)?;
        let (channels, more) =
            access::readable_channels(&self.hub, self.principal(), None, after, limit)
                .await
                .map_err(store_failure)?;
        let tasks_edge = (tasks.len() == limit as usize)
            .then(|| tasks.last().map(|t| t.id))
            .flatten();
        let edge = match (more, tasks_edge) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut rooms: Vec<Conversation> = tasks.into_iter().chain(channels).collect();
        rooms.sort_by_key(|r| r.id);
        rooms.dedup_by_key(|r| r.id);
        if let Some(edge) = edge {
            rooms.retain(|r| r.id <= edge);
        }
        rooms.truncate(limit as usize);
        let next = rooms.last().map(|r| r.id).or(after);
        let members = self.member_counts(&rooms).await?;
        let listed: Vec<Value> = rooms
            .iter()
            .zip(members)
            .map(|(r, n)| {
                let mut v = room_of(r);
                v["members"] = json!(n);
                v
            })
            .collect();
        Ok(json!({"rooms": listed, "nextAfter": next}))
    }

    /// A conversation's members are its participants. A channel's are the
    /// app alone (ADR 0031 §6, issue 18's review): its readers are the
    /// principals its grants reach, which only the operator or a place
    /// admin may list, and an app (capped at `write`) never may; so neither
    /// the others nor their count are shown.
    async fn members_of(&self, c: &Conversation) -> Result<Vec<Uuid>, (ErrorCode, String)> {
        if c.kind != ConversationKind::Channel {
            return Ok(c.participants.clone());
        }
        Ok(vec![self.app])
    }

    async fn member_counts(
        &self,
        rooms: &[Conversation],
    ) -> Result<Vec<usize>, (ErrorCode, String)> {
        let mut out = Vec::with_capacity(rooms.len());
        for r in rooms {
            out.push(self.members_of(r).await?.len());
        }
        Ok(out)
    }

    /// `{connections: [principalId], nextAfter}`: everyone taking part in
    /// one of the app's rooms.
    pub(super) async fn list_connections(&self, after: Option<Uuid>, limit: Option<u32>) -> Answer {
        let ids = self
            .hub
            .store
            .app_connections(self.app, after, self.page(limit))
            .await
            .map_err(store_failure)?;
        let next = ids.last().copied().or(after);
        Ok(json!({"connections": ids, "nextAfter": next}))
    }

    /// The room as the decision lets the app read it.
    async fn readable(&self, room: Uuid) -> Result<Conversation, (ErrorCode, String)> {
        access::check_rest(
            &self.hub,
            self.principal(),
            Action::ConversationRead,
            Target::conversation_row(room),
        )
        .await
        .map_err(refused)?
        .conversation()
        .map_err(rpc_failure)
    }

    /// `{room, members: [principalId], profiles: {principalId: profile}}`
    /// (the profiles the members that are hosted apps set).
    pub(super) async fn rooms_members(&self, room: Uuid) -> Answer {
        let c = self.readable(room).await?;
        let members = self.members_of(&c).await?;
        let profiles = self.profiles_of(&members).await?;
        Ok(json!({"room": c.id, "members": members, "profiles": profiles}))
    }

    /// `{room, messages: [message], nextAfter}`: the room's messages after
    /// the seq `after_id` (0 by default), oldest first. In a task
    /// conversation the owning app reads every decided message; in a
    /// channel, its main thread.
    pub(super) async fn rooms_read(
        &self,
        room: Uuid,
        after_id: Option<u64>,
        limit: Option<u32>,
    ) -> Answer {
        let c = self.readable(room).await?;
        let place = match c.kind {
            ConversationKind::Channel => PagePlace::Channel { thread: None },
            _ => PagePlace::Decided,
        };
        let after = after_id.unwrap_or(0);
        let page = MessagePage {
            viewer: self.app,
            after: Some(after),
            before: None,
            limit: self.page(limit),
            place,
        };
        let messages = self
            .hub
            .store
            .messages(c.id, page)
            .await
            .map_err(store_failure)?;
        let next = messages.last().map_or(after, |m| m.seq);
        Ok(json!({"room": c.id, "messages": messages, "nextAfter": next}))
    }
}
