//! Cards (`http::interactions`, ADR 0027): operating a component, the
//! app's answer to an interaction, and its changes to a component.

use super::super::op::Op;
use super::super::schemas::Components;
use crate::protocol::interactions::{
    ComponentUpdateParams, InteractionCreateParams, InteractionRespondParams,
    InteractionRespondResult, InteractionResult, MessageResult,
};

pub fn ops(c: &mut Components) -> Vec<Op> {
    let create = c.body_without::<InteractionCreateParams>("InteractionCreateBody", &["messageId"]);
    let created = c.of::<InteractionResult>();
    let respond =
        c.body_without::<InteractionRespondParams>("InteractionRespondBody", &["interactionId"]);
    let responded = c.of::<InteractionRespondResult>();
    let update = c.body_without::<ComponentUpdateParams>(
        "ComponentUpdateBody",
        &["messageId", "componentId"],
    );
    let updated = c.of::<MessageResult>();
    vec![
        Op::post("/api/v1/messages/{messageId}/interactions", "createInteraction", "Operate a component of a card (as */interaction/create)")
            .describe("Spends the interaction rate class. The card's app gets app/interaction/created; nothing else happens until it answers.")
            .key()
            .path_id("messageId", "message")
            .json_body(create, true)
            .answer(201, "the interaction, pending", created)
            .refusal(400, "invalid_request: /componentId (not on the card) or /values/<member>, never its value; /messageId in the body")
            .refusal(403, "forbidden (with reason): level_insufficient, capability_missing, component_restricted, the channel's state, or an app's key (subject_kind_not_allowed)")
            .refusal(404, "not_found: message not found (also a card the caller does not read: answered exactly alike)")
            .refusal(409, "component_used: the component is used, disabled or expired, or its app is not reachable"),
        Op::post("/api/v1/interactions/{interactionId}/response", "respondToInteraction", "Answer an interaction on one of the app's cards (as app/interaction/respond)")
            .key()
            .path_id("interactionId", "interaction")
            .json_body(respond, true)
            .answer(200, "the interaction, answered, and the reply when one was posted", responded)
            .refusal(400, "invalid_request: /state or a pointer under /reply; /interactionId in the body")
            .refusal(403, "forbidden (with reason): scope_missing (components:write), or the installation is not active")
            .refusal(404, "not_found: interaction not found (also another app's: answered exactly alike)")
            .refusal(409, "conflict: the interaction was answered already (with its state)"),
        Op::patch("/api/v1/messages/{messageId}/components/{componentId}", "updateComponent", "Change a component of one of the app's cards (as app/component/update)")
            .key()
            .path_id("messageId", "message")
            .path_id("componentId", "component")
            .json_body(update, true)
            .answer(200, "the message with the card's new version", updated)
            .refusal(400, "invalid_request: /state, /label or /componentId; a path member in the body")
            .refusal(403, "forbidden (with reason): scope_missing (components:write), or the installation is not active")
            .refusal(404, "not_found: message not found (also another app's card: answered exactly alike)"),
    ]
}
