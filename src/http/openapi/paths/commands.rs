//! Commands (`http::commands`, ADR 0027): a place's list, the invoke, the
//! autocomplete, and the app's own commands.

use super::super::op::Op;
use super::super::schemas::Components;
use crate::protocol::commands::{
    CommandAutocompleteParams, CommandAutocompleteResult, CommandInvokeParams, CommandInvokeResult,
    CommandListResult, CommandRegisterParams, CommandRegisterResult,
};

const HIDDEN_COMMAND: &str =
    "not_found: no such command, or one hidden from the caller (its app not reachable in the place, or the place unread): answered exactly alike";
const FORBIDDEN: &str =
    "forbidden (with reason): level_insufficient, the channel's state, or an app's key (subject_kind_not_allowed)";
const OWN_APP: &str = "not_found: app not found (also any other app's id with an app's key)";

pub fn ops(c: &mut Components) -> Vec<Op> {
    let listed = c.of::<CommandListResult>();
    let invoke = c.body_without::<CommandInvokeParams>("CommandInvokeBody", &["commandId"]);
    let invoked = c.of::<CommandInvokeResult>();
    let ask =
        c.body_without::<CommandAutocompleteParams>("CommandAutocompleteBody", &["commandId"]);
    let choices = c.of::<CommandAutocompleteResult>();
    let answer = c.body_without::<crate::protocol::commands::AutocompleteAnswerParams>(
        "AutocompleteAnswerBody",
        &["requestId"],
    );
    let answered = c.of::<crate::protocol::commands::AutocompleteAnswerResult>();
    let register = c.of::<CommandRegisterParams>();
    let registered = c.of::<CommandRegisterResult>();
    vec![
        Op::post("/api/v1/apps/{appId}/commands", "registerCommand", "Register one of the app's commands (as app/command/register)")
            .key()
            .path_id("appId", "app")
            .json_body(register, true)
            .answer(201, "the command", registered)
            .refusal(400, "invalid_request: a pointer under /command")
            .refusal(403, "forbidden (with reason): scope_missing, level_insufficient on the named place, or the installation is not active")
            .refusal(404, OWN_APP)
            .refusal(409, "conflict: a live command of that name in that place, or command_limit"),
        Op::get("/api/v1/apps/{appId}/commands", "listAppCommands", "The app's own live commands (as app/command/list)")
            .key()
            .path_id("appId", "app")
            .answer(200, "its commands", listed.clone())
            .refusal(403, "forbidden (with reason): scope_missing, or the installation is not active")
            .refusal(404, OWN_APP),
        Op::delete("/api/v1/apps/{appId}/commands/{commandId}", "removeCommand", "Remove one of the app's commands (as app/command/remove)")
            .key()
            .path_id("appId", "app")
            .path_id("commandId", "command")
            .empty(204, "removed")
            .refusal(403, "forbidden (with reason): scope_missing, or the installation is not active")
            .refusal(404, "not_found: app not found, or no live command of the app with that id"),
        Op::get("/api/v1/conversations/{conversationId}/commands", "listCommands", "The commands offered in a place (as */command/list)")
            .key()
            .path_id("conversationId", "conversation")
            .answer(200, "the commands the caller may invoke there, by name", listed)
            .refusal(403, FORBIDDEN)
            .refusal(404, "not_found: no such place, or one the caller may not see (answered exactly alike)"),
        Op::post("/api/v1/commands/{commandId}/invocations", "invokeCommand", "Invoke a command (as */command/invoke)")
            .describe("Accepted: the owning app gets app/command/invoked; nothing else happens. A replay under the same Idempotency-Key answers the stored 202 and writes nothing.")
            .key()
            .path_id("commandId", "command")
            .idempotency()
            .json_body(invoke, true)
            .answer(202, "accepted", invoked)
            .refusal(400, "invalid_request: the field named (/options/<name>, /threadId, ...), never its value")
            .refusal(403, FORBIDDEN)
            .refusal(404, HIDDEN_COMMAND),
        Op::post("/api/v1/commands/{commandId}/autocomplete", "autocompleteCommand", "Ask the owning app for choices (as */command/autocomplete)")
            .describe("Answered by command.autocomplete_timeout_ms at the latest; an app that does not answer validly gives no choices.")
            .key()
            .path_id("commandId", "command")
            .json_body(ask, true)
            .answer(200, "at most command.autocomplete_max_choices choices", choices)
            .refusal(400, "invalid_request: the field named (/option, /value, ...)")
            .refusal(403, FORBIDDEN)
            .refusal(404, HIDDEN_COMMAND),
        Op::post("/api/v1/autocomplete/{requestId}/answer", "answerAutocomplete", "Answer a deferred autocomplete request (as app/autocomplete/answer)")
            .describe("The app's late answer to a request it deferred (202 at its interactionsUrl, or deferred over its socket), while the asker still waits; accepted is false for an invalid answer (the asker gets no choices).")
            .key()
            .path_id("requestId", "autocomplete request")
            .json_body(answer, true)
            .answer(200, "whether the choices were taken", answered)
            .refusal(400, "invalid_request: the field named (/choices, ...)")
            .refusal(403, "forbidden (with reason): not an app, scope_missing (commands:write), or the installation is not active")
            .refusal(404, "not_found: no open request of this app with that id (unknown, expired or another app's)"),
    ]
}
