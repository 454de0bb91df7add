//! An app's installation: the scopes the operator consented to and the
//! lifecycle state that every app feature checks (ADR 0023). Pure: the store
//! keeps the row, `access` reads it, and this module decides what the row
//! means.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One consentable capability of an app. A closed list: the manifest, the
/// store and the decision all speak these four names and nothing else.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum Scope {
    /// Sending into places reached by grants (channels), and cards.
    #[serde(rename = "messages:write")]
    MessagesWrite,
    /// Registering and removing slash commands.
    #[serde(rename = "commands:write")]
    CommandsWrite,
    /// Posting components (buttons, selects, forms) on cards.
    #[serde(rename = "components:write")]
    ComponentsWrite,
    /// Receiving events: the gateway socket, REST catch-up and webhooks.
    #[serde(rename = "events:subscribe")]
    EventsSubscribe,
}

impl Scope {
    pub const ALL: [Scope; 4] = [
        Scope::MessagesWrite,
        Scope::CommandsWrite,
        Scope::ComponentsWrite,
        Scope::EventsSubscribe,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::MessagesWrite => "messages:write",
            Scope::CommandsWrite => "commands:write",
            Scope::ComponentsWrite => "components:write",
            Scope::EventsSubscribe => "events:subscribe",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == s)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of scopes. A bit set because the decision asks "does it hold this
/// one" on every app call, and four members fit a byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScopeSet(u8);

impl ScopeSet {
    pub const EMPTY: ScopeSet = ScopeSet(0);

    pub fn of(scopes: impl IntoIterator<Item = Scope>) -> ScopeSet {
        scopes
            .into_iter()
            .fold(ScopeSet::EMPTY, |set, s| ScopeSet(set.0 | s.bit()))
    }

    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    pub fn intersect(self, other: ScopeSet) -> ScopeSet {
        ScopeSet(self.0 & other.0)
    }

    /// The members of `self` that `other` lacks: an upgrade's scopes that
    /// still await the operator's consent.
    pub fn minus(self, other: ScopeSet) -> ScopeSet {
        ScopeSet(self.0 & !other.0)
    }

    pub fn is_subset_of(self, other: ScopeSet) -> bool {
        self.minus(other) == ScopeSet::EMPTY
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Members in the catalogue's order, so every answer lists them alike.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    pub fn to_vec(self) -> Vec<Scope> {
        self.iter().collect()
    }

    /// The stored form: names joined by commas in the catalogue's order
    /// (`""` for none). Four values read whole, never queried by member.
    pub fn to_stored(self) -> String {
        self.iter().map(Scope::as_str).collect::<Vec<_>>().join(",")
    }

    /// The inverse of [`ScopeSet::to_stored`]; an unknown name is a corrupt
    /// row, reported rather than dropped so a downgrade cannot widen or
    /// silently narrow what an app holds.
    pub fn from_stored(stored: &str) -> Result<ScopeSet, UnknownScope> {
        stored
            .split(',')
            .filter(|name| !name.is_empty())
            .map(|name| Scope::parse(name).ok_or_else(|| UnknownScope(name.to_owned())))
            .collect::<Result<Vec<_>, _>>()
            .map(ScopeSet::of)
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        ScopeSet::of(iter)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope {0:?} in a stored installation")]
pub struct UnknownScope(pub String);

/// Where an installation is in its life. Pending is no state: an app waiting
/// for the operator has no installation row at all (ADR 0023 §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum InstallationState {
    Active,
    Suspended,
    Uninstalled,
}

impl InstallationState {
    pub fn as_str(self) -> &'static str {
        match self {
            InstallationState::Active => "active",
            InstallationState::Suspended => "suspended",
            InstallationState::Uninstalled => "uninstalled",
        }
    }

    pub fn parse(s: &str) -> Option<InstallationState> {
        [Self::Active, Self::Suspended, Self::Uninstalled]
            .into_iter()
            .find(|state| state.as_str() == s)
    }
}

/// The operator's lifecycle actions. Install is absent: it creates a row
/// rather than moving one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    Suspend,
    Resume,
    Uninstall,
}

/// What a transition does from a state: move, stay (an idempotent repeat,
/// answered 200 without a write or an audit record) or refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionOutcome {
    Move(InstallationState),
    Unchanged,
    Refused,
}

impl Transition {
    pub fn from_state(self, state: InstallationState) -> TransitionOutcome {
        use InstallationState::*;
        use TransitionOutcome::*;
        match (self, state) {
            (Transition::Suspend, Active) => Move(Suspended),
            (Transition::Suspend, Suspended) => Unchanged,
            (Transition::Resume, Suspended) => Move(Active),
            (Transition::Resume, Active) => Unchanged,
            (Transition::Uninstall, Active | Suspended) => Move(Uninstalled),
            (_, Uninstalled) => Refused,
        }
    }
}

/// What the decision knows about an app subject's installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstallationFacts {
    pub state: InstallationState,
    /// The effective scopes: granted and still requested.
    pub scopes: ScopeSet,
}

/// The scopes an app holds: consented by the operator *and* asked for by its
/// current manifest, so a scope an upgrade dropped is gone at once and one it
/// added waits for consent.
pub fn effective_scopes(requested: ScopeSet, granted: ScopeSet) -> ScopeSet {
    requested.intersect(granted)
}

/// Who performed an owner action, as the audit records it: a kind and,
/// but for the operator (one token, no principal), the principal's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    Operator,
    Person(Uuid),
    App(Uuid),
}

impl Actor {
    pub fn kind_str(self) -> &'static str {
        match self {
            Actor::Operator => "operator",
            Actor::Person(_) => "person",
            Actor::App(_) => "app",
        }
    }

    pub fn id(self) -> Option<Uuid> {
        match self {
            Actor::Operator => None,
            Actor::Person(id) | Actor::App(id) => Some(id),
        }
    }

    /// The inverse of [`Actor::kind_str`] and [`Actor::id`]; `None` for a
    /// kind that is not one, or an id where there must (not) be one.
    pub fn from_stored(kind: &str, id: Option<Uuid>) -> Option<Actor> {
        match (kind, id) {
            ("operator", None) => Some(Actor::Operator),
            ("person", Some(id)) => Some(Actor::Person(id)),
            ("app", Some(id)) => Some(Actor::App(id)),
            _ => None,
        }
    }
}

/// An owner action on an app, one `audit_actions` row each (ADR 0023 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LifecycleAction {
    Install,
    ScopesUpdate,
    Suspend,
    Resume,
    Uninstall,
    Upgrade,
    GrantManage,
    /// The operator disabled one of the app's webhook subscriptions.
    WebhookDisable,
    /// The operator re-enabled one, or made it due now.
    WebhookRetry,
}

impl LifecycleAction {
    pub const ALL: [LifecycleAction; 9] = [
        LifecycleAction::Install,
        LifecycleAction::ScopesUpdate,
        LifecycleAction::Suspend,
        LifecycleAction::Resume,
        LifecycleAction::Uninstall,
        LifecycleAction::Upgrade,
        LifecycleAction::GrantManage,
        LifecycleAction::WebhookDisable,
        LifecycleAction::WebhookRetry,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleAction::Install => "app.install",
            LifecycleAction::ScopesUpdate => "app.scopes.update",
            LifecycleAction::Suspend => "app.suspend",
            LifecycleAction::Resume => "app.resume",
            LifecycleAction::Uninstall => "app.uninstall",
            LifecycleAction::Upgrade => "app.upgrade",
            LifecycleAction::GrantManage => "grant.manage",
            LifecycleAction::WebhookDisable => "webhook.disable",
            LifecycleAction::WebhookRetry => "webhook.retry",
        }
    }

    pub fn parse(s: &str) -> Option<LifecycleAction> {
        LifecycleAction::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

impl Transition {
    /// The audited action of this transition.
    pub fn action(self) -> LifecycleAction {
        match self {
            Transition::Suspend => LifecycleAction::Suspend,
            Transition::Resume => LifecycleAction::Resume,
            Transition::Uninstall => LifecycleAction::Uninstall,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_form_round_trips_in_catalogue_order() {
        let set = ScopeSet::of([Scope::EventsSubscribe, Scope::MessagesWrite]);
        assert_eq!(set.to_stored(), "messages:write,events:subscribe");
        assert_eq!(ScopeSet::from_stored(&set.to_stored()), Ok(set));
        assert_eq!(ScopeSet::from_stored(""), Ok(ScopeSet::EMPTY));
        assert_eq!(ScopeSet::EMPTY.to_stored(), "");
    }

    #[test]
    fn an_unknown_stored_scope_is_an_error_not_a_drop() {
        assert_eq!(
            ScopeSet::from_stored("events:subscribe,admin:all"),
            Err(UnknownScope("admin:all".into()))
        );
    }

    #[test]
    fn set_algebra() {
        let requested = ScopeSet::of([Scope::EventsSubscribe, Scope::MessagesWrite]);
        let granted = ScopeSet::of([Scope::EventsSubscribe, Scope::CommandsWrite]);
        assert_eq!(
            effective_scopes(requested, granted),
            ScopeSet::of([Scope::EventsSubscribe])
        );
        assert_eq!(
            requested.minus(granted),
            ScopeSet::of([Scope::MessagesWrite])
        );
        assert!(ScopeSet::of([Scope::EventsSubscribe]).is_subset_of(requested));
        assert!(!granted.is_subset_of(requested));
        assert!(ScopeSet::EMPTY.is_empty());
    }

    #[test]
    fn scope_names_parse_and_serialize_alike() {
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
            let json = serde_json::to_string(&scope).unwrap();
            assert_eq!(json, format!("\"{}\"", scope.as_str()));
        }
        assert_eq!(Scope::parse("messages:read"), None);
    }

    #[test]
    fn transitions() {
        use InstallationState::*;
        use TransitionOutcome::*;
        let table = [
            (Transition::Suspend, Active, Move(Suspended)),
            (Transition::Suspend, Suspended, Unchanged),
            (Transition::Suspend, Uninstalled, Refused),
            (Transition::Resume, Suspended, Move(Active)),
            (Transition::Resume, Active, Unchanged),
            (Transition::Resume, Uninstalled, Refused),
            (Transition::Uninstall, Active, Move(Uninstalled)),
            (Transition::Uninstall, Suspended, Move(Uninstalled)),
            (Transition::Uninstall, Uninstalled, Refused),
        ];
        for (transition, from, expected) in table {
            assert_eq!(
                transition.from_state(from),
                expected,
                "{transition:?} from {from:?}"
            );
        }
        for state in [Active, Suspended, Uninstalled] {
            assert_eq!(InstallationState::parse(state.as_str()), Some(state));
        }
    }

    #[test]
    fn actors_and_actions_read_back_from_their_stored_form() {
        let id = Uuid::now_v7();
        for actor in [Actor::Operator, Actor::Person(id), Actor::App(id)] {
            assert_eq!(
                Actor::from_stored(actor.kind_str(), actor.id()),
                Some(actor)
            );
        }
        assert_eq!(Actor::from_stored("operator", Some(id)), None);
        assert_eq!(Actor::from_stored("app", None), None);
        assert_eq!(Actor::from_stored("agent", Some(id)), None);
        for action in LifecycleAction::ALL {
            assert_eq!(LifecycleAction::parse(action.as_str()), Some(action));
        }
        assert_eq!(LifecycleAction::parse("app.delete"), None);
    }
}
