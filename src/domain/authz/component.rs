//! The component half of the decision (ADR 0027 §3): who reaches a card's
//! component, the owning app's guard, and the component's own step (its
//! channel's state, state and owner, capability, restriction), with the
//! `app_reply` refusal of a dispatch on an app's reply (§6).

use uuid::Uuid;

use super::{
    check_channel_state, level, Action, Answer, ComponentOn, Denial, Facts, Level, PrincipalKind,
    Reason, Resource, Scope, Subject,
};
use crate::domain::installation::{InstallationFacts, InstallationState};

/// The owning app of a component, as its guard needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnerFacts {
    pub installation: Option<InstallationFacts>,
    /// The owner's level on the card's place (capped as an app's).
    pub level: Option<Level>,
}

impl OwnerFacts {
    /// The guard: the installation is active, holds `scope`, and the owner
    /// still writes on the place.
    pub fn reachable(&self, scope: Scope) -> bool {
        let installed = self
            .installation
            .is_some_and(|i| i.state == InstallationState::Active && i.scopes.contains(scope));
        installed && self.level.is_some_and(|l| l >= Level::Write)
    }
}

/// Step 7 (ADR 0027 §3, steps 6-8 of a component; §6 for replies).
pub(super) fn check_component(
    subject: &Subject,
    action: Action,
    resource: &Resource,
    level: Level,
    facts: &Facts,
) -> Result<(), Denial> {
    let forbid = |reason| Err(Denial::of(reason, Answer::Forbidden));
    match (action, resource) {
        (
            Action::DispatchRequest,
            Resource::Message {
                app_reply: true, ..
            },
        ) => forbid(Reason::AppReply),
        (Action::InteractionCreate, Resource::Component(c)) if c.on_card => {
            // Operating a control binds like a write (ADR 0027 §3, step 5).
            check_channel_state(resource, level)?;
            let owner = facts.owner.unwrap_or_default();
            if !c.usable || !owner.reachable(Scope::ComponentsWrite) {
                return forbid(Reason::ComponentInactive);
            }
            let person = matches!(
                subject,
                Subject::Principal {
                    kind: PrincipalKind::Person,
                    ..
                }
            );
            if c.capability.is_some() && !(person && level >= Level::Trigger) {
                return forbid(Reason::CapabilityMissing);
            }
            if c.restricted_to.is_some() && level < Level::Admin {
                return forbid(Reason::ComponentRestricted);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A card's component is operated by whoever sees the card (a channel's
/// readers, a conversation's recipients) at their level on its place, and
/// changed by its author alone.
pub(super) fn component_reach(
    action: Action,
    c: &ComponentOn,
    id: Uuid,
    kind: PrincipalKind,
    grants: &[Level],
) -> Option<Level> {
    match action {
        Action::InteractionCreate => level::on_place(&c.place, id, kind, grants)
            .filter(|_| c.place.is_channel() || c.recipient),
        Action::ComponentUpdate => (c.author == id).then_some(level::DERIVED),
        _ => None,
    }
}
