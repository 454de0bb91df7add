//! The served primitives on the hub's operations, as the app principal
//! (ADR 0031 §6): the gateway's own handlers and the one decision
//! (`access`) on a request context without a socket, and the app's memory
//! and registers in the store. Each answer's `text` is a JSON document.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};
use uuid::Uuid;

use crate::access::{self, Refused, Target};
use crate::domain::authz::Action;
use crate::domain::hosted::primitives::Params;
use crate::domain::hosted::wire::{ErrorCode, Failure};
use crate::domain::installation::InstallationState;
use crate::domain::message::Part;
use crate::domain::{Principal, PrincipalKind};
use crate::handlers::task_conversations;
use crate::hub::{ConnectionInfo, Hub, RequestContext};
use crate::identity::Authenticated;
use crate::protocol::conversations::MessageSendParams;
use crate::protocol::RateClass;
use crate::rpc::{ErrorKind, Peer, RpcError};
use crate::store::StoreError;

/// Who the broker acts as, and for which run.
pub struct Caller {
    pub hub: Arc<Hub>,
    pub app: Uuid,
    pub run: Uuid,
    pub card_id: String,
    pub version: String,
    pub name: String,
    /// The card's tagline: the profile's description until one is set.
    pub tagline: String,
    /// The card's `entry.persona` file as verified at start, if it has one.
    pub persona_file: Option<Vec<u8>>,
}

pub(super) type Answer = Result<Value, (ErrorCode, String)>;

impl Caller {
    pub(super) fn principal(&self) -> Principal {
        Principal {
            id: self.app,
            kind: PrincipalKind::App,
        }
    }

    /// A handler's context: the app's session on a peer no socket drains
    /// (the message handlers never call the caller), as REST does.
    pub(super) fn context(&self) -> RequestContext {
        let (peer, _unread) = Peer::new("hosted-", 1);
        let session = OnceLock::new();
        let _ = session.set(Authenticated {
            principal: self.principal(),
            key_id: String::new(),
        });
        RequestContext {
            hub: self.hub.clone(),
            conn: Arc::new(ConnectionInfo {
                id: Uuid::new_v4(),
                peer,
                session,
                event_start: OnceLock::new(),
            }),
        }
    }

    /// Serves one decoded call; a refusal keeps the request's id. Every
    /// primitive first needs the app's installation active (ADR 0031 §5):
    /// a suspended or uninstalled app's live run is answered
    /// `capability_denied` for all of them, also those (persona, memory,
    /// `coord`) that call no decision of their own.
    pub async fn serve(&self, id: &Value, params: Params) -> Result<String, Failure> {
        if let Err((code, message)) = self.installation_active().await {
            return Err(Failure::new(id.clone(), code, message));
        }
        let class = match params {
            Params::SendMessage { .. } | Params::RoomsSend { .. } => RateClass::Message,
            Params::InviteCreate { .. } | Params::InviteAccept { .. } => RateClass::Write,
            _ => RateClass::Default,
        };
        let answer = match self.hub.limiters.check(class, self.app) {
            Err(wait) => Err((
                ErrorCode::Error,
                format!(
                    "rate limited (ratelimit.{}): retry after {} ms",
                    class.as_str(),
                    wait.as_millis().max(1)
                ),
            )),
            Ok(()) => self.answer(params).await,
        };
        answer
            .map(|v| v.to_string())
            .map_err(|(code, message)| Failure::new(id.clone(), code, message))
    }

    /// The installation as the gateway reads it (the hub's cache), an
    /// entry that is not active confirmed by the store, so a resume the
    /// cache missed heals at once.
    async fn installation_active(&self) -> Result<(), (ErrorCode, String)> {
        let cache = &self.hub.installations;
        let looked = cache.lookup(self.app).await.map_err(store_failure)?;
        let mut state = looked.installation.map(|i| i.state);
        if state != Some(InstallationState::Active) && !looked.from_store {
            state = cache
                .read_fresh(self.app)
                .await
                .map_err(store_failure)?
                .map(|i| i.state);
        }
        match state {
            Some(InstallationState::Active) => Ok(()),
            Some(s) => Err((
                ErrorCode::CapabilityDenied,
                format!(
                    "the app's installation is {}: no primitive is served",
                    s.as_str()
                ),
            )),
            None => Err((
                ErrorCode::CapabilityDenied,
                "the app has no installation: no primitive is served".into(),
            )),
        }
    }

    async fn answer(&self, params: Params) -> Answer {
        match params {
            Params::Whoami => Ok(json!({
                "appId": self.app,
                "cardId": self.card_id,
                "version": self.version,
                "runId": self.run,
                "name": self.name,
                "profile": self.own_profile().await?,
            })),
            Params::GetPersona => self.get_persona().await,
            Params::SetPersona { persona } => self.set_persona(persona).await,
            Params::SetProfile { profile } => self.set_profile(profile).await,
            Params::InviteCreate {
                room,
                max_uses,
                ttl_seconds,
            } => self.invite_create(room, max_uses, ttl_seconds).await,
            Params::InviteAccept { link } => self.invite_accept(link).await,
            Params::SendMessage { to, text } | Params::RoomsSend { room: to, text } => {
                self.send_message(to, text).await
            }
            Params::ListConnections { after, limit } => self.list_connections(after, limit).await,
            Params::RoomsList { after, limit } => self.rooms_list(after, limit).await,
            Params::RoomsMembers { room } => self.rooms_members(room).await,
            Params::RoomsRead {
                room,
                after_id,
                limit,
            } => self.rooms_read(room, after_id, limit).await,
            Params::ReadInbox {
                after_id,
                limit,
                ack,
            } => {
                self.ack(ack).await?;
                self.read_inbox(after_id, limit, 0).await
            }
            Params::WaitForMessage {
                timeout,
                after_id,
                ack,
            } => {
                self.ack(ack).await?;
                self.read_inbox(after_id, None, timeout).await
            }
            Params::Remember { key, value } => {
                let max = self.hub.config.hosted.memory_max_keys;
                match self
                    .hub
                    .store
                    .remember(self.app, &key, &value, max, crate::domain::now_millis())
                    .await
                {
                    Ok(()) => Ok(json!({"key": key, "stored": true})),
                    Err(StoreError::Conflict(m)) => Err((ErrorCode::Error, m)),
                    Err(e) => Err(store_failure(e)),
                }
            }
            Params::Recall { key } => {
                let value = self
                    .hub
                    .store
                    .recall(self.app, &key)
                    .await
                    .map_err(store_failure)?;
                Ok(json!({"key": key, "value": value}))
            }
            Params::Coord { key, expect, value } => {
                let out = self
                    .hub
                    .store
                    .coord(self.app, &key, expect.as_deref(), value.as_deref())
                    .await
                    .map_err(store_failure)?;
                Ok(json!({"swapped": out.swapped, "value": out.value, "version": out.version}))
            }
        }
    }

    /// The app's send into one of its conversations: the gateway's
    /// `app/message/send`, decision, gates and fan-out included.
    async fn send_message(&self, to: Uuid, text: String) -> Answer {
        let params = MessageSendParams {
            conversation_id: to,
            parts: vec![Part::Text { text }],
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        };
        let sent = task_conversations::app_message_send(self.context(), params)
            .await
            .map_err(rpc_failure)?;
        Ok(json!({"messageId": sent.message.id, "conversationId": to}))
    }

    /// `ack`: the gateway's `app/event/ack` on the app's own stream (a
    /// beatless entry acknowledges what it handled, so the next run reads
    /// from there).
    async fn ack(&self, seq: Option<u64>) -> Result<(), (ErrorCode, String)> {
        let Some(seq) = seq else { return Ok(()) };
        crate::handlers::events::ack(self.context(), crate::protocol::events::AckParams { seq })
            .await
            .map(|_| ())
            .map_err(rpc_failure)
    }

    /// The app's own event stream after `after_id` (default: its acked
    /// seq), waiting up to `wait` seconds for the first event.
    async fn read_inbox(&self, after_id: Option<u64>, limit: Option<u32>, wait: u64) -> Answer {
        let hub = &self.hub;
        access::check_rest(
            hub,
            self.principal(),
            Action::EventRead,
            Target::stream(self.app),
        )
        .await
        .map_err(refused)?;
        let pos = hub
            .store
            .stream_position(self.app)
            .await
            .map_err(store_failure)?;
        let after = after_id.unwrap_or(pos.acked_seq);
        if after > pos.last_seq && wait == 0 {
            return Err((
                ErrorCode::BadRequest,
                format!(
                    "params.after_id ({after}) is beyond the latest seq ({})",
                    pos.last_seq
                ),
            ));
        }
        let limit = limit.unwrap_or(hub.config.events.page_default);
        let events = hub
            .events_after_waiting(self.app, after, limit, wait)
            .await
            .map_err(store_failure)?;
        let next_after = events.last().map_or(after, |e| e.seq);
        let envelopes: Vec<_> = events.iter().map(|e| e.envelope_ref()).collect();
        Ok(json!({"events": envelopes, "nextAfter": next_after}))
    }
}

pub(super) fn store_failure(e: StoreError) -> (ErrorCode, String) {
    tracing::error!(error = %e, "store failure in a hosted call");
    (ErrorCode::Error, "internal error".into())
}

pub(super) fn refused(r: Refused) -> (ErrorCode, String) {
    match r {
        Refused::Denied(refusal) => rpc_failure(refusal.rpc()),
        Refused::Store(e) => store_failure(e),
    }
}

/// A hub refusal keeps its message; bad params are the caller's.
pub(super) fn rpc_failure(e: RpcError) -> (ErrorCode, String) {
    let code = if e.code == ErrorKind::InvalidParams.code() {
        ErrorCode::BadRequest
    } else {
        ErrorCode::Error
    };
    (code, e.message)
}
