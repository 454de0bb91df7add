//! What the hub tells an app about its webhook subscriptions (ADR 0033).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::events::Envelope;
use super::{Caller, Direction, Notification};

/// Why the hub stopped a subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookDisabledReason {
    /// The receiver answered 410 Gone.
    Gone,
    /// Every attempt failed for `webhooks.disable_after_hours`.
    Failing,
    /// The operator disabled it.
    Operator,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDisabledPayload {
    pub subscription_id: Uuid,
    pub reason: WebhookDisabledReason,
}

/// Tells the app one of its webhook subscriptions stopped: nothing more is
/// sent to it until the operator runs `switchboard webhooks retry`, and the
/// events it had not delivered wait at its cursor (catch-up reads them).
/// Durable, in the app's own log, so it arrives over the gateway, catch-up
/// and the app's other subscriptions.
pub struct WebhookDisabled;
impl Notification for WebhookDisabled {
    const NAME: &'static str = crate::domain::webhook::DISABLED_EVENT;
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::App;
    const SUMMARY: &'static str = "One of the app's webhook subscriptions was disabled (410 Gone, failing for webhooks.disable_after_hours, or by the operator); payload: {subscriptionId, reason}.";
    const EPHEMERAL: bool = false;
    type Params = Envelope<WebhookDisabledPayload>;
}
