//! `invite_create`, `invite_accept` and `rooms_join` (ADR 0031 §6). A link
//! is made for a room the app may write (`message.create`, decided as for
//! a send) and shown once; only its secret's hash is stored. Accepting is
//! the one redemption agents and people call (`handlers::invites`), with
//! the app as the redeemer.

use rand::RngCore;
use serde_json::json;
use uuid::Uuid;

use super::calls::{rpc_failure, store_failure, Answer, Caller};
use crate::access::{self, Refused, Target};
use crate::domain::authz::Action;
use crate::domain::conversation::ConversationKind;
use crate::domain::hosted::invite;
use crate::domain::hosted::wire::ErrorCode;
use crate::rpc::ErrorKind;
use crate::store::{InviteRecord, StoreError};

/// The decision's refusal of `message.create` on the room, in the
/// broker's words: a room the app sees but may not write (a `read`
/// grant, an archived channel) is `capability_denied` with the hub's
/// reason; one it may not see answers as a missing one (`error`,
/// "conversation not found"), byte for byte.
fn refused_to_write(r: Refused) -> (ErrorCode, String) {
    match r {
        Refused::Denied(refusal) => {
            let e = refusal.rpc();
            if e.code == ErrorKind::Forbidden.code() {
                (ErrorCode::CapabilityDenied, e.message)
            } else {
                rpc_failure(e)
            }
        }
        Refused::Store(e) => store_failure(e),
    }
}

impl Caller {
    /// `{link, inviteId, room, maxUses, expiresAt}`: the link is in this
    /// answer only.
    pub(super) async fn invite_create(
        &self,
        room: Uuid,
        max_uses: u64,
        ttl_seconds: u64,
    ) -> Answer {
        let granted = access::check_rest(
            &self.hub,
            self.principal(),
            Action::MessageCreate,
            Target::conversation(room),
        )
        .await
        .map_err(refused_to_write)?;
        let kind = granted.membership().map_err(rpc_failure)?.kind;
        if !matches!(kind, ConversationKind::Task | ConversationKind::Channel) {
            return Err((
                ErrorCode::BadRequest,
                "params.room: invites are made to task rooms and channels only".into(),
            ));
        }
        let mut secret = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut secret);
        let now = crate::domain::now_millis();
        let ttl_ms = i64::try_from(ttl_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
        let row = InviteRecord {
            id: Uuid::now_v7(),
            secret_hash: invite::hash(&secret),
            conversation_id: room,
            created_by: self.app,
            uses_left: i64::try_from(max_uses).unwrap_or(i64::MAX),
            expires_at: now.saturating_add(ttl_ms),
            created_at: now,
        };
        let max_live = self.hub.config.hosted.invite_max_live;
        match self.hub.store.create_invite(&row, max_live).await {
            Ok(()) => {}
            Err(StoreError::Conflict(m)) => return Err((ErrorCode::Error, m)),
            Err(e) => return Err(store_failure(e)),
        }
        Ok(json!({
            "link": invite::format(row.id, &secret),
            "inviteId": row.id,
            "room": room,
            "maxUses": max_uses,
            "expiresAt": row.expires_at,
        }))
    }

    /// `{room, joined}`: the app redeems a link as agents do.
    pub(super) async fn invite_accept(&self, link: String) -> Answer {
        let ctx = self.context();
        let accepted = crate::handlers::invites::accept(
            ctx,
            crate::protocol::invites::InviteAcceptParams { link },
        )
        .await
        .map_err(rpc_failure)?;
        Ok(
            json!({"room": crate::hosted::rooms::room_of(&accepted.conversation), "joined": accepted.joined}),
        )
    }
}
