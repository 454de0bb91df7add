//! How long the SDK lets an app's handler work on a hub call.
//!
//! The hub stops waiting for a gate after the manifest's `timeoutMs` and
//! fails it closed; `app/command/autocomplete` announces its own time left
//! in `deadlineMs`; `app/network/ping` carries none (the operator picks it),
//! so the app names one. An answer after that point is ignored by the hub,
//! and the handler's work is wasted, so the SDK measures the deadline from
//! the frame's arrival, drops (cancels) the handler when it passes and never
//! sends the late answer. The TypeScript SDK does the same
//! (`sdk/typescript/src/callbacks.ts`).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use crate::domain::manifest::{DispatchPolicy, Manifest, MessagePolicy, TaskCreatePolicy};
use crate::protocol::commands::AppCommandAutocomplete;
use crate::protocol::network::AppPing;
use crate::protocol::tasks::{AppDispatchAuthorize, AppMessageAuthorize, AppTaskCreate};
use crate::protocol::Method;

/// The deadline of `app/network/ping` when the app names none; the
/// TypeScript SDK's default too.
pub const DEFAULT_PING_DEADLINE: Duration = Duration::from_millis(1000);

/// Per-method deadlines of one app, read from the manifest the hub enforces.
#[derive(Clone, Debug)]
pub struct Deadlines {
    by_method: HashMap<&'static str, Duration>,
    ping: Duration,
}

impl Deadlines {
    pub fn from_manifest(manifest: &Manifest, ping: Duration) -> Deadlines {
        let hooks = &manifest.hooks;
        let mut by_method = HashMap::new();
        if let TaskCreatePolicy::Hook { timeout_ms } = hooks.task_create {
            insert::<AppTaskCreate>(&mut by_method, timeout_ms);
        }
        if let MessagePolicy::Hook { timeout_ms } = hooks.message_authorize {
            insert::<AppMessageAuthorize>(&mut by_method, timeout_ms);
        }
        if let DispatchPolicy::Hook { timeout_ms } = hooks.dispatch_authorize {
            insert::<AppDispatchAuthorize>(&mut by_method, timeout_ms);
        }
        by_method.insert(AppPing::NAME, ping);
        Deadlines { by_method, ping }
    }

    /// A call the hub made: its announced deadline, the manifest's, or, for
    /// a gate the manifest decides without a hook (the hub never calls it;
    /// if it does, the least a hook may wait), the ping deadline.
    pub fn of_call(&self, method: &str, params: Option<&Value>) -> Duration {
        if method == AppCommandAutocomplete::NAME {
            return announced(params).unwrap_or(Duration::ZERO);
        }
        self.by_method.get(method).copied().unwrap_or(self.ping)
    }
}

/// Under the seed-002 name too, as the handlers are (ADR 0023 §8).
fn insert<M: Method>(by_method: &mut HashMap<&'static str, Duration>, timeout_ms: u64) {
    let deadline = Duration::from_millis(timeout_ms);
    by_method.insert(M::NAME, deadline);
    if let Some(alias) = M::MOLTZAP_V1_NAME {
        by_method.insert(alias, deadline);
    }
}

/// `deadlineMs` of an autocomplete request; a request without one is
/// already past it.
fn announced(params: Option<&Value>) -> Option<Duration> {
    let ms = params?.get("deadlineMs")?.as_u64()?;
    Some(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(message_hook_ms: Option<u64>) -> Manifest {
        let message = match message_hook_ms {
            Some(ms) => json!({"kind": "hook", "timeoutMs": ms}),
            None => json!({"kind": "forwardAllExceptSender"}),
        };
        serde_json::from_value(json!({
            "name": "deadlines",
            "description": "a test app",
            "limits": {"maxParticipants": 10},
            "hooks": {
                "dispatch_authorize": {"kind": "grant"},
                "message_authorize": message,
                "task_create": {"kind": "hook", "timeoutMs": 250},
            },
        }))
        .expect("a valid manifest")
    }

    #[test]
    fn gates_take_the_manifest_timeout_under_both_names() {
        let d = Deadlines::from_manifest(&manifest(Some(400)), DEFAULT_PING_DEADLINE);
        assert_eq!(
            d.of_call("app/message/authorize", None),
            Duration::from_millis(400)
        );
        assert_eq!(
            d.of_call("apps/onBeforeMessageDelivery", None),
            Duration::from_millis(400)
        );
        assert_eq!(
            d.of_call("app/task/create", None),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn a_gate_without_a_hook_and_ping_take_the_ping_deadline() {
        let d = Deadlines::from_manifest(&manifest(None), Duration::from_millis(70));
        assert_eq!(
            d.of_call("app/message/authorize", None),
            Duration::from_millis(70)
        );
        assert_eq!(
            d.of_call("app/dispatch/authorize", None),
            Duration::from_millis(70)
        );
        assert_eq!(
            d.of_call("app/network/ping", None),
            Duration::from_millis(70)
        );
    }

    #[test]
    fn autocomplete_takes_its_announced_deadline() {
        let d = Deadlines::from_manifest(&manifest(None), DEFAULT_PING_DEADLINE);
        let params = json!({"deadlineMs": 1234});
        assert_eq!(
            d.of_call("app/command/autocomplete", Some(&params)),
            Duration::from_millis(1234)
        );
        assert_eq!(
            d.of_call("app/command/autocomplete", Some(&json!({}))),
            Duration::ZERO
        );
    }
}
