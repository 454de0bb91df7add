use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Who acts. One id space for every kind: an id names one principal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalKind {
    Agent,
    App,
    /// A human (issue 14, ADR 0020 §1), created by the operator, calling
    /// the `person/...` twins of the agents' methods.
    Person,
}

impl PrincipalKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::Agent => "agent",
            PrincipalKind::App => "app",
            PrincipalKind::Person => "person",
        }
    }

    pub fn parse(s: &str) -> Option<PrincipalKind> {
        match s {
            "agent" => Some(PrincipalKind::Agent),
            "app" => Some(PrincipalKind::App),
            "person" => Some(PrincipalKind::Person),
            _ => None,
        }
    }
}

/// Who invoked a command, asked for its choices, or operated a component:
/// the one principal an app is told acted (ADR 0027).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InvokedBy {
    pub principal_id: Uuid,
    pub kind: PrincipalKind,
}

impl std::fmt::Display for PrincipalKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    pub id: Uuid,
    pub kind: PrincipalKind,
}
