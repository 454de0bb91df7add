//! The loaders of a card's component and of an interaction (ADR 0027 §3):
//! the card with its place, the owning app's installation and level there
//! (the owner's guard), read the same way whether the card exists or not.

use std::sync::Arc;

use uuid::Uuid;

use super::load::{grants_of, place_of, Loaded, Loading, Reads, Source};
use super::Target;
use crate::domain::authz::{
    level, Action, Answer, ComponentOn, Denial, Facts, Level, OwnerFacts, Reason, Resource,
};
use crate::domain::component::Component;
use crate::domain::message::Message;
use crate::domain::{now_millis, PrincipalKind};
use crate::hub::{Membership, RequestContext};
use crate::rpc::RpcError;
use crate::store::StoreResult;

impl super::Granted {
    /// The card, its conversation's membership and the component named
    /// (`None`: not on this card, the handler's InvalidParams).
    pub fn component(self) -> Result<GrantedComponent, RpcError> {
        match self.loaded {
            Loaded::Component(c) => Ok(*c),
            _ => Err(super::mismatch()),
        }
    }

    pub fn interaction(self) -> Result<crate::domain::component::Interaction, RpcError> {
        match self.loaded {
            Loaded::Interaction(i) => Ok(*i),
            _ => Err(super::mismatch()),
        }
    }
}

/// What a granted component request loaded.
#[derive(Debug)]
pub struct GrantedComponent {
    /// The card's message, with its card.
    pub message: Message,
    pub membership: Arc<Membership>,
    /// The component named; `None` when the card has no such one.
    pub component: Option<Component>,
}

/// The card, its conversation, whether it reached `me`, and its author's
/// installation: always these four reads, in this order (a missing card
/// reads the nil conversation and the nil app), all from the store, so the
/// decision takes one pass either way. The caller names a card, not its
/// place: a cached conversation or author behind a hidden card would cost
/// less than the uncacheable nil ones of a missing card, and the second
/// pass a denial from the cache takes would cost more.
pub(super) async fn component(
    hub: &impl Reads,
    me: Uuid,
    target: &Target,
    message_id: Uuid,
    component_id: Uuid,
) -> StoreResult<Loading> {
    let message = hub
        .message(message_id)
        .await?
        .filter(|m| m.card.is_some() && m.origin == crate::domain::message::Origin::App);
    let (conversation, author) = message.as_ref().map_or((Uuid::nil(), Uuid::nil()), |m| {
        (m.conversation_id, m.sender_id)
    });
    let fetched = hub.membership(conversation, Source::Store).await?;
    let recipient = hub.is_recipient(message_id, me).await?;
    let (installation, _) = hub.installation(author, Source::Store).await?;
    let found = match (fetched.membership, message) {
        (Some(m), Some(msg)) => place_of(&m).map(|place| (m, msg, place)),
        _ => None,
    };
    let Some((membership, message, place)) = found else {
        return Ok(Loading::missing(target, Vec::new()).on_store(true));
    };
    let component = message
        .card
        .as_ref()
        .and_then(|c| c.component(component_id))
        .cloned();
    let owner_level = level::on_place(
        &place,
        author,
        PrincipalKind::App,
        &grants_of(&membership, author),
    )
    .map(|l| level::cap(PrincipalKind::App, l));
    let on = ComponentOn {
        place,
        author,
        recipient,
        on_card: component.is_some(),
        usable: component
            .as_ref()
            .is_some_and(|c| target.delivering || c.usable(now_millis())),
        trigger: component.as_ref().map_or(Level::Write, |c| c.trigger),
        capability: component.as_ref().and_then(|c| c.required_capability),
        restricted_to: component.as_ref().and_then(|c| c.restricted_to),
    };
    Ok(Loading {
        facts: Facts {
            grants: grants_of(&membership, me),
            owner: Some(OwnerFacts {
                installation,
                level: owner_level,
            }),
            ..Facts::default()
        },
        resource: Resource::Component(Box::new(on)),
        loaded: Loaded::Component(Box::new(GrantedComponent {
            message,
            membership,
            component,
        })),
        from_store: true,
    })
}

/// The refusal of a store that re-checked, with the card or the
/// installation held, what the decision granted, and found it changed
/// since (the card used meanwhile, the app suspended or uninstalled, a
/// scope taken): answered, counted and audited as the decision's own
/// denial for `reason` is, so one refusal has one shape whichever side
/// saw it (ADR 0027 §3).
pub fn refused_in_store(
    ctx: &RequestContext,
    action: Action,
    target: &Target,
    reason: Reason,
) -> RpcError {
    let subject = super::subject_of(ctx.principal());
    let (kind, id) = (target.kind(), target.requested_id());
    super::record_denial(&ctx.hub, &subject, action, kind, id, reason);
    let denial = Denial {
        reason,
        answer: Answer::Forbidden,
        named: None,
    };
    super::reject(target, action, denial).rpc()
}

/// An interaction, known to its card's app only.
pub(super) async fn interaction(
    hub: &impl Reads,
    target: &Target,
    id: Uuid,
) -> StoreResult<Loading> {
    let Some(interaction) = hub.interaction(id).await? else {
        return Ok(Loading::missing(target, Vec::new()));
    };
    Ok(Loading {
        resource: Resource::Interaction {
            app_id: interaction.app_id,
        },
        facts: Facts::default(),
        loaded: Loaded::Interaction(Box::new(interaction)),
        from_store: true,
    })
}
