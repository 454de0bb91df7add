//! Cards (ADR 0027 §5): the components an app posts on a message, what
//! readers see of them, the single-use rules and the interaction states.
//! Pure: the store keeps the rows, `handlers` asks these rules.

mod interaction;
mod validate;
mod values;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::authz::Level;

pub use interaction::{Interaction, InteractionState, InvokedBy};
pub use validate::{check_label, validate_components, ComponentLimits, NewComponent};
pub use values::validate_values;

/// The events of a card's life, under the catalogue's names (the protocol
/// declares them; a test there keeps the two equal): the store writes them
/// inside the lifecycle's transactions, where no handler names them.
pub const MESSAGE_UPDATED: &str = "agent/message/updated";
pub const PERSON_MESSAGE_UPDATED: &str = "person/message/updated";
pub const INTERACTION_CREATED: &str = "app/interaction/created";

/// The default of `component.max_per_message`.
pub const DEFAULT_MAX_PER_MESSAGE: usize = 25;
/// The defaults of the other `component.*` bounds (the schemas carry
/// these; the running hub checks its configured ones).
pub const DEFAULT_LABEL_MAX_CHARS: usize = 80;
pub const DEFAULT_TEXT_MAX_CHARS: usize = 100;
pub const DEFAULT_SELECT_MAX_OPTIONS: usize = 25;
pub const DEFAULT_FORM_MAX_FIELDS: usize = 10;
pub const DEFAULT_FIELD_MAX_LENGTH: u32 = 4000;
pub const DEFAULT_FIELD_NAME_MAX_CHARS: usize = 64;
/// The default of `component.default_ttl_seconds` (a day).
pub const DEFAULT_TTL_SECONDS: u64 = 86_400;

/// The manifest's kinds (which the app declares for consent) are the
/// kinds it posts: one type, one schema.
pub use crate::domain::manifest::ComponentKind;

impl ComponentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentKind::Button => "button",
            ComponentKind::Select => "select",
            ComponentKind::Form => "form",
        }
    }

    pub fn parse(s: &str) -> Option<ComponentKind> {
        [
            ComponentKind::Button,
            ComponentKind::Select,
            ComponentKind::Form,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ButtonStyle {
    Primary,
    Secondary,
    Danger,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectOption {
    /// 1 to `component.text_max_chars` characters.
    #[schemars(length(min = 1, max = DEFAULT_TEXT_MAX_CHARS))]
    pub label: String,
    /// 1 to `component.text_max_chars` characters, unique in the select.
    #[schemars(length(min = 1, max = DEFAULT_TEXT_MAX_CHARS))]
    pub value: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    String,
    Integer,
    Number,
    Boolean,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FormField {
    /// 1 to `component.field_name_max_chars` characters of
    /// `[A-Za-z0-9_-]`, unique in the form.
    #[schemars(
        length(min = 1, max = DEFAULT_FIELD_NAME_MAX_CHARS),
        regex(pattern = r"^[A-Za-z0-9_-]+$")
    )]
    pub name: String,
    /// 1 to `component.text_max_chars` characters.
    #[schemars(length(min = 1, max = DEFAULT_TEXT_MAX_CHARS))]
    pub label: String,
    #[serde(rename = "type")]
    pub field_type: FieldType,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// A string field's longest value, in characters: 1 to
    /// `component.field_max_length`, which is also the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = DEFAULT_FIELD_MAX_LENGTH))]
    pub max_length: Option<u32>,
}

/// The one capability a component can require (ADR 0027 §3, step 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Held by a person with at least `trigger` on the place; never by an
    /// agent (seed: only humans approve).
    ApproveActions,
}

impl Capability {
    pub fn as_str(self) -> &'static str {
        "approve_actions"
    }

    pub fn parse(s: &str) -> Option<Capability> {
        (s == "approve_actions").then_some(Capability::ApproveActions)
    }
}

/// Who may operate a component beyond its `trigger` (ADR 0027 §3, step 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Restriction {
    /// Only a principal with `admin` on the place.
    Owner,
    /// The run's starter; an app card has no run, so the same as `owner`.
    RunStarter,
}

impl Restriction {
    pub fn as_str(self) -> &'static str {
        match self {
            Restriction::Owner => "owner",
            Restriction::RunStarter => "run_starter",
        }
    }

    pub fn parse(s: &str) -> Option<Restriction> {
        match s {
            "owner" => Some(Restriction::Owner),
            "run_starter" => Some(Restriction::RunStarter),
            _ => None,
        }
    }
}

/// How a card's components are used up (ADR 0027 §5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CardUse {
    /// The seed's single-use rule: the first interaction on any component
    /// uses every component of the card.
    #[default]
    Once,
    /// Each principal interacts once; the card stays active for others.
    OncePerPrincipal,
}

impl CardUse {
    pub fn as_str(self) -> &'static str {
        match self {
            CardUse::Once => "once",
            CardUse::OncePerPrincipal => "once_per_principal",
        }
    }

    pub fn parse(s: &str) -> Option<CardUse> {
        match s {
            "once" => Some(CardUse::Once),
            "once_per_principal" => Some(CardUse::OncePerPrincipal),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ComponentState {
    Active,
    /// Used up by the card's use rule.
    Used,
    /// Disabled by its app, or by a suspend or uninstall of the app.
    Disabled,
}

impl ComponentState {
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentState::Active => "active",
            ComponentState::Used => "used",
            ComponentState::Disabled => "disabled",
        }
    }

    pub fn parse(s: &str) -> Option<ComponentState> {
        match s {
            "active" => Some(ComponentState::Active),
            "used" => Some(ComponentState::Used),
            "disabled" => Some(ComponentState::Disabled),
            _ => None,
        }
    }
}

/// A component's members of its kind, as posted: stored as the
/// definition, shown inside the component.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Definition {
    /// A button's text (1 to 80 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<ButtonStyle>,
    /// A select's hint (1 to 100 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// A select's options (1 to 25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<SelectOption>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_values: Option<u32>,
    /// A form's title (1 to 100 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A form's fields (1 to 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<FormField>>,
}

/// A component as every reader of its card sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    pub component_id: Uuid,
    pub custom_id: String,
    pub kind: ComponentKind,
    #[serde(flatten)]
    pub definition: Definition,
    /// The level needed to operate it.
    pub trigger: Level,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_capability: Option<Capability>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restricted_to: Option<Restriction>,
    pub state: ComponentState,
    /// RFC 3339, to the millisecond.
    pub expires_at: String,
}

impl Component {
    /// Operable now: active and not expired (an unreadable time is
    /// expired: fail closed).
    pub fn usable(&self, now_ms: i64) -> bool {
        let expires = chrono::DateTime::parse_from_rfc3339(&self.expires_at)
            .map(|t| t.timestamp_millis())
            .unwrap_or(i64::MIN);
        self.state == ComponentState::Active && now_ms < expires
    }
}

/// The card a message carries (ADR 0027 §5), absent on other messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Card {
    /// From 1; every change of a component's state or label adds one.
    pub version: u32,
    #[serde(rename = "use")]
    pub card_use: CardUse,
    pub components: Vec<Component>,
}

impl Card {
    pub fn component(&self, id: Uuid) -> Option<&Component> {
        self.components.iter().find(|c| c.component_id == id)
    }

    /// The single-use rule after an interaction: with `once`, every active
    /// component becomes used (true when one changed, so the version moves).
    pub fn use_up(&mut self) -> bool {
        if self.card_use != CardUse::Once {
            return false;
        }
        let mut changed = false;
        for c in &mut self.components {
            if c.state == ComponentState::Active {
                c.state = ComponentState::Used;
                changed = true;
            }
        }
        changed
    }

    /// Every active component disabled (suspend, uninstall): how many
    /// changed, the count the lifecycle's audit row records (a used one
    /// stays used and is not counted).
    pub fn disable_all(&mut self) -> u32 {
        let mut disabled = 0;
        for c in &mut self.components {
            if c.state == ComponentState::Active {
                c.state = ComponentState::Disabled;
                disabled += 1;
            }
        }
        disabled
    }
}

#[cfg(test)]
mod tests;
