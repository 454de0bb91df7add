//! An app's card on its message (ADR 0027 §5): the components checked and
//! given their server-set fields before the send stores them.

use serde_json::json;
use uuid::Uuid;

use super::invalid;
use crate::domain::authz::Level;
use crate::domain::component::{
    validate_components, Card, CardUse, Component, ComponentState, NewComponent,
};
use crate::domain::event::rfc3339;
use crate::domain::message::PartError;
use crate::domain::now_millis;
use crate::hub::RequestContext;
use crate::rpc::RpcError;
use crate::store::NewCard;

/// A card as posted (for the send's request hash) and as it will be stored.
#[derive(Clone, Debug)]
pub struct PostedCard {
    pub posted: Vec<NewComponent>,
    pub stored: NewCard,
}

/// A bad component, named as a part is.
pub(super) fn invalid_at(e: PartError) -> RpcError {
    RpcError::invalid_params(e.message).with_data(json!({ "field": e.field }))
}

/// The card of an `app/message/send`, if it posts one: at most
/// `component.max_per_message` valid components; the ids, states, expiry
/// and version are the server's.
pub(super) fn posted(
    ctx: &RequestContext,
    components: Option<Vec<NewComponent>>,
    card_use: Option<CardUse>,
) -> Result<Option<PostedCard>, RpcError> {
    let Some(posted) = components else {
        return match card_use {
            Some(_) => Err(invalid("cardUse", "is only for a message with components")),
            None => Ok(None),
        };
    };
    let limits = ctx.hub.config.component.limits();
    validate_components(&posted, &limits).map_err(invalid_at)?;
    let now = now_millis();
    let expires: Vec<i64> = posted
        .iter()
        .map(|c| {
            let seconds = c.expires_in_seconds.unwrap_or(limits.ttl_seconds);
            now.saturating_add((seconds as i64).saturating_mul(1000))
        })
        .collect();
    let card = Card {
        version: 1,
        card_use: card_use.unwrap_or_default(),
        components: posted
            .iter()
            .zip(&expires)
            .map(|(c, at)| Component {
                component_id: Uuid::now_v7(),
                custom_id: c.custom_id.clone(),
                kind: c.kind,
                definition: c.definition(),
                trigger: c.trigger.unwrap_or(Level::Write),
                required_capability: c.required_capability,
                restricted_to: c.restricted_to,
                state: ComponentState::Active,
                expires_at: rfc3339(*at),
            })
            .collect(),
    };
    Ok(Some(PostedCard {
        posted,
        stored: NewCard {
            card,
            expires_at: expires,
        },
    }))
}
