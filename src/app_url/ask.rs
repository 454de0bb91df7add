//! Autocomplete at an app's URL (ADR 0032 §5): the request is an ephemeral
//! envelope, never stored, sent while the asker waits (holding no
//! transaction) and ended at the asker's deadline.

use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use super::{record, Delivered};
use crate::domain::app_reply::{decode, ChoicesAnswer, Reason};
use crate::domain::command::{checked_choices, Choice};
use crate::domain::manifest::OptionType;
use crate::hub::Hub;
use crate::webhooks::interactions::{ephemeral_body, status_reason, Sent, Signing};

/// The request's event type: the socket call's method name.
pub const AUTOCOMPLETE: &str = "app/command/autocomplete";

/// What the app answered.
#[derive(Debug, PartialEq)]
pub enum Asked {
    /// 200 with valid choices, cut to `max`.
    Choices(Vec<Choice>),
    /// 202: its answer comes through `app/autocomplete/answer`.
    Deferred,
    Failed(Reason),
}

/// The option's bounds an answer is checked against.
pub struct Bounds {
    pub kind: OptionType,
    pub max: usize,
}

/// One request with `webhook-id` = the request's id, ended at `left`.
pub async fn ask(
    hub: &Hub,
    (app_id, url): (Uuid, &str),
    request_id: Uuid,
    payload: Value,
    bounds: Bounds,
    left: Duration,
) -> Asked {
    let body = ephemeral_body(request_id, AUTOCOMPLETE, app_id, payload, &hub.sync_epoch);
    let id = request_id.to_string();
    let sent = hub
        .interactions
        .post(hub.store.as_ref(), url, &id, body, Signing::Hub, Some(left))
        .await;
    let asked = match sent {
        Sent::Answer(body) => match decode::<ChoicesAnswer>(&body) {
            Ok(answer) => match checked_choices(bounds.kind, &answer.choices, bounds.max) {
                Some(choices) => Asked::Choices(choices),
                None => Asked::Failed(Reason::InvalidReply),
            },
            Err(reason) => Asked::Failed(reason),
        },
        Sent::Deferred => Asked::Deferred,
        Sent::Status(status) => Asked::Failed(status_reason(status)),
        Sent::Failed(reason) => Asked::Failed(reason),
    };
    let outcome = match &asked {
        Asked::Choices(_) => Delivered::Answered,
        Asked::Deferred => Delivered::Deferred,
        Asked::Failed(reason) => Delivered::Failed(*reason),
    };
    record(app_id, "autocomplete", url, outcome);
    asked
}
