//! App-bound tasks and their state machine.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `waiting` until the `task_create` gate decides; then `active` or `failed`;
/// an active task ends `closed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    Waiting,
    Active,
    Failed,
    Closed,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Waiting => "waiting",
            TaskState::Active => "active",
            TaskState::Failed => "failed",
            TaskState::Closed => "closed",
        }
    }

    pub fn parse(s: &str) -> Option<TaskState> {
        match s {
            "waiting" => Some(TaskState::Waiting),
            "active" => Some(TaskState::Active),
            "failed" => Some(TaskState::Failed),
            "closed" => Some(TaskState::Closed),
            _ => None,
        }
    }

    /// The only moves a task can make. `Active -> Failed` only for the
    /// reason [`TaskState::can_fail_with`] allows.
    pub fn can_become(self, next: TaskState) -> bool {
        matches!(
            (self, next),
            (TaskState::Waiting, TaskState::Active)
                | (TaskState::Waiting, TaskState::Failed)
                | (TaskState::Active, TaskState::Closed)
                | (TaskState::Active, TaskState::Failed)
        )
    }

    /// Whether a task in this state may fail with `code`: a waiting task
    /// for any reason its gate gives; an active one only when its app is
    /// uninstalled (ADR 0023 §5), since an accepted task otherwise ends
    /// only by its app's close.
    pub fn can_fail_with(self, code: &str) -> bool {
        match self {
            TaskState::Waiting => true,
            TaskState::Active => code == APP_UNINSTALLED,
            TaskState::Failed | TaskState::Closed => false,
        }
    }
}

/// The failure code of the tasks an uninstall ends (ADR 0023 §5).
pub const APP_UNINSTALLED: &str = "app_uninstalled";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskRole {
    Initiator,
    Invited,
}

impl TaskRole {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskRole::Initiator => "initiator",
            TaskRole::Invited => "invited",
        }
    }

    pub fn parse(s: &str) -> Option<TaskRole> {
        match s {
            "initiator" => Some(TaskRole::Initiator),
            "invited" => Some(TaskRole::Invited),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskParticipant {
    pub agent_id: Uuid,
    pub role: TaskRole,
}

/// Why a task failed: which fail-closed path, and the app's reason if any.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskFailure {
    /// `rejected`, `timeout`, `app_unavailable`, `app_error`, `invalid_answer`,
    /// `hub_error`, `app_suspended`, `app_not_installed` or `app_uninstalled`.
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: Uuid,
    pub app_id: Uuid,
    pub initiator_id: Uuid,
    pub state: TaskState,
    pub participants: Vec<TaskParticipant>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<TaskFailure>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// What a gate checks of a task: which it is, whose, and where it stands.
/// A send into a task conversation reads this, not the whole task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskHead {
    pub id: Uuid,
    pub app_id: Uuid,
    pub state: TaskState,
}

impl Task {
    pub fn head(&self) -> TaskHead {
        TaskHead {
            id: self.id,
            app_id: self.app_id,
            state: self.state,
        }
    }

    pub fn has_participant(&self, agent: Uuid) -> bool {
        self.participants.iter().any(|p| p.agent_id == agent)
    }

    pub fn participant_ids(&self) -> Vec<Uuid> {
        self.participants.iter().map(|p| p.agent_id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_documented_transitions_are_allowed() {
        use TaskState::*;
        let all = [Waiting, Active, Failed, Closed];
        let allowed = [
            (Waiting, Active),
            (Waiting, Failed),
            (Active, Closed),
            (Active, Failed),
        ];
        for from in all {
            for to in all {
                assert_eq!(
                    from.can_become(to),
                    allowed.contains(&(from, to)),
                    "{from:?} -> {to:?}"
                );
            }
        }
    }

    #[test]
    fn an_active_task_fails_only_when_its_app_is_uninstalled() {
        use TaskState::*;
        for code in [
            "rejected",
            "timeout",
            "app_unavailable",
            "hub_error",
            "app_suspended",
        ] {
            assert!(Waiting.can_fail_with(code), "{code}");
            assert!(!Active.can_fail_with(code), "{code}");
        }
        assert!(Waiting.can_fail_with(APP_UNINSTALLED));
        assert!(Active.can_fail_with(APP_UNINSTALLED));
        for done in [Failed, Closed] {
            assert!(!done.can_fail_with(APP_UNINSTALLED), "{done:?}");
        }
    }
}
