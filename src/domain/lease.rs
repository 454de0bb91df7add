//! Dispatch leases: a recipient's claim to act on a message.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `pending` until the `dispatch_authorize` gate decides. `held` waits for
/// the app (`app/dispatch/resolve`) or `leases.max_hold_ms`. A `granted`
/// lease ends `completed` or `expired`. `denied`, `completed` and `expired`
/// are final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LeaseState {
    Pending,
    Held,
    Granted,
    Denied,
    Completed,
    Expired,
}

impl LeaseState {
    pub const LIVE: [LeaseState; 3] = [LeaseState::Pending, LeaseState::Held, LeaseState::Granted];

    pub fn as_str(self) -> &'static str {
        match self {
            LeaseState::Pending => "pending",
            LeaseState::Held => "held",
            LeaseState::Granted => "granted",
            LeaseState::Denied => "denied",
            LeaseState::Completed => "completed",
            LeaseState::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<LeaseState> {
        match s {
            "pending" => Some(LeaseState::Pending),
            "held" => Some(LeaseState::Held),
            "granted" => Some(LeaseState::Granted),
            "denied" => Some(LeaseState::Denied),
            "completed" => Some(LeaseState::Completed),
            "expired" => Some(LeaseState::Expired),
            _ => None,
        }
    }

    pub fn is_live(self) -> bool {
        Self::LIVE.contains(&self)
    }

    pub fn can_become(self, next: LeaseState) -> bool {
        use LeaseState::*;
        matches!(
            (self, next),
            (Pending, Granted | Denied | Held)
                | (Held, Granted | Denied)
                | (Granted, Completed | Expired)
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub lease_id: Uuid,
    pub message_id: Uuid,
    pub conversation_id: Uuid,
    pub recipient_id: Uuid,
    pub state: LeaseState,
    /// Why it was denied, held or expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// RFC 3339; set while granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// RFC 3339.
    pub created_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finals_stay_final() {
        use LeaseState::*;
        for s in [Denied, Completed, Expired] {
            for t in [Pending, Held, Granted, Denied, Completed, Expired] {
                assert!(!s.can_become(t));
            }
        }
        assert!(Pending.can_become(Held));
        assert!(Held.can_become(Granted));
        assert!(!Held.can_become(Held));
        assert!(Granted.can_become(Expired));
    }
}
