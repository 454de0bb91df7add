//! The manifest's validation: every member's pointers, good and bad.

use super::*;
use serde_json::json;

fn bounds() -> ManifestBounds {
    ManifestBounds {
        min_hook_timeout_ms: 10,
        max_hook_timeout_ms: 60_000,
        max_participants: 1000,
        max_conversations: 32,
        max_commands: 3,
        command_description_max_chars: 20,
        egress_allowlist: vec![
            HostPort::parse("hooks.example.com").unwrap(),
            HostPort::parse("ops.example.com:8443").unwrap(),
        ],
        app_event_types: vec!["app/task/activated", "app/other/event"],
    }
}

/// The pointers of every problem of `doc`, in report order.
fn pointers(doc: &Value) -> Vec<String> {
    validate(doc, &bounds())
        .unwrap_err()
        .into_iter()
        .map(|p| p.pointer)
        .collect()
}

fn assert_pointers(doc: &Value, expected: &[&str]) {
    assert_eq!(pointers(doc), expected, "{doc}");
}

fn werewolf() -> Value {
    json!({
        "name": "Werewolf",
        "description": "Agents play Werewolf in task-scoped conversations",
        "limits": { "maxParticipants": 12 },
        "conversations": [
            { "key": "town-square", "name": "Town Square", "participantFilter": "all" },
            { "key": "werewolf-chat", "name": "Werewolf Chat", "participantFilter": "none" }
        ],
        "hooks": {
            "dispatch_authorize": { "kind": "hook", "timeoutMs": 5000 },
            "message_authorize": { "kind": "hook", "timeoutMs": 5000 },
            "task_create": { "kind": "accept" }
        }
    })
}

#[test]
fn the_seed_manifest_is_valid() {
    let m = validate(&werewolf(), &bounds()).unwrap();
    assert_eq!(m.limits.max_participants, 12);
    assert_eq!(m.hooks.task_create, TaskCreatePolicy::Accept);
    assert_eq!(
        m.hooks.message_authorize,
        MessagePolicy::Hook { timeout_ms: 5000 }
    );
    assert_eq!(
        m.conversations[1].participant_filter,
        ParticipantFilter::None
    );
    // Round trip: what we store is what we read back.
    let back: Manifest = serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
    assert_eq!(back, m);
}

#[test]
fn every_problem_is_reported_with_a_pointer() {
    let mut doc = werewolf();
    doc["name"] = json!("");
    doc["limits"]["maxParticipants"] = json!(0);
    doc["conversations"][1]["key"] = json!("town-square");
    doc["conversations"][0]["participantFilter"] = json!("some");
    doc["hooks"]["message_authorize"] = json!({"kind": "hook", "timeoutMs": 999999});
    doc["hooks"]["dispatch_authorize"] = json!({"kind": "deny"});
    doc["hooks"].as_object_mut().unwrap().remove("task_create");
    doc["extra"] = json!(1);
    let problems = validate(&doc, &bounds()).unwrap_err();
    let pointers: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
    for expected in [
        "/name",
        "/limits/maxParticipants",
        "/conversations/1/key",
        "/conversations/0/participantFilter",
        "/hooks/message_authorize/timeoutMs",
        "/hooks/dispatch_authorize/reason",
        "/hooks/task_create",
        "/extra",
    ] {
        assert!(
            pointers.contains(&expected),
            "{expected} missing from {pointers:?}"
        );
    }
}

#[test]
fn policies_refuse_members_of_other_kinds() {
    let mut doc = werewolf();
    doc["hooks"]["task_create"] = json!({"kind": "accept", "timeoutMs": 5});
    doc["hooks"]["message_authorize"] = json!({"kind": "grant"});
    assert_pointers(
        &doc,
        &[
            "/hooks/message_authorize/kind",
            "/hooks/task_create/timeoutMs",
        ],
    );
}

/// The example file the README registers is the seed-000 shape: valid,
/// asking for `events:subscribe`, and stored exactly as written (no new
/// member appears when it is serialised).
#[test]
fn the_seed_000_example_stays_valid_and_scopeless() {
    let doc: Value =
        serde_json::from_str(include_str!("../../../examples/werewolf.manifest.json")).unwrap();
    let m = validate(&doc, &bounds()).unwrap();
    assert_eq!(m.scopes, None);
    assert_eq!(m.requested_scopes(), ScopeSet::of([Scope::EventsSubscribe]));
    assert_eq!(m.callback_names, CallbackNames::Current);
    assert_eq!(m.delivery.mode, DeliveryMode::Gateway);
    assert_eq!(serde_json::to_value(&m).unwrap(), doc);
}

fn full() -> Value {
    let mut doc = werewolf();
    let more = json!({
        "scopes": ["events:subscribe", "messages:write", "commands:write"],
        "commands": [{
            "name": "roll",
            "description": "Rolls dice",
            "options": [
                {"name": "sides", "type": "integer", "description": "How many",
                 "required": true, "choices": [{"name": "d6", "value": 6}, {"name": "d20", "value": 20}]},
                {"name": "label", "type": "string", "description": "A label", "autocomplete": true},
                {"name": "who", "type": "principal", "description": "Target"}
            ]
        }, {
            "name": "end-game", "description": "Ends it", "requiredLevel": "admin"
        }],
        "components": ["button", "form"],
        "delivery": {"mode": "interactions_url", "interactionsUrl": "https://hooks.example.com/i"},
        "eventSubscriptions": ["app/task/activated"],
        "callbackNames": "moltzap-v1"
    });
    for (k, v) in more.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc
}

#[test]
fn every_new_member_parses_typed_and_round_trips() {
    let m = validate(&full(), &bounds()).unwrap();
    assert_eq!(
        m.requested_scopes(),
        ScopeSet::of([
            Scope::EventsSubscribe,
            Scope::MessagesWrite,
            Scope::CommandsWrite
        ])
    );
    let roll = &m.commands[0];
    assert_eq!(roll.required_level, crate::domain::authz::Level::Trigger);
    assert_eq!(roll.options[0].kind, OptionType::Integer);
    assert!(roll.options[0].required);
    assert_eq!(roll.options[0].choices[1].value, ChoiceValue::Integer(20));
    assert!(roll.options[1].autocomplete);
    assert_eq!(
        m.commands[1].required_level,
        crate::domain::authz::Level::Admin
    );
    assert_eq!(
        m.components,
        vec![ComponentKind::Button, ComponentKind::Form]
    );
    assert_eq!(m.delivery.mode, DeliveryMode::InteractionsUrl);
    assert_eq!(
        m.delivery.interactions_url.as_deref(),
        Some("https://hooks.example.com/i")
    );
    assert_eq!(m.event_subscriptions, vec!["app/task/activated"]);
    assert_eq!(m.callback_names, CallbackNames::MoltzapV1);
    let stored = serde_json::to_value(&m).unwrap();
    let back: Manifest = serde_json::from_value(stored.clone()).unwrap();
    assert_eq!(back, m);
    // The stored form validates again (an upgrade re-reads it).
    assert_eq!(validate(&stored, &bounds()).unwrap(), m);
}

/// Absent asks for `events:subscribe`; an empty list asks for nothing and
/// is stored as the empty list it is.
#[test]
fn scopes_absent_is_not_empty() {
    let mut doc = werewolf();
    doc["hooks"] = json!({
        "dispatch_authorize": {"kind": "grant"},
        "message_authorize": {"kind": "forwardAllExceptSender"},
        "task_create": {"kind": "accept"}
    });
    doc["scopes"] = json!([]);
    let m = validate(&doc, &bounds()).unwrap();
    assert_eq!(m.requested_scopes(), ScopeSet::EMPTY);
    assert_eq!(serde_json::to_value(&m).unwrap()["scopes"], json!([]));
}

#[test]
fn scopes_are_known_and_unique() {
    let mut doc = full();
    doc["scopes"] = json!(["events:subscribe", "admin:all", "events:subscribe", 7]);
    assert_pointers(&doc, &["/scopes/1", "/scopes/2", "/scopes/3"]);
    doc["scopes"] = json!("events:subscribe");
    assert_pointers(&doc, &["/scopes"]);
}

/// A listed scope set without `events:subscribe` cannot have a hook gate:
/// one problem per hook, at its kind; a static gate is fine.
#[test]
fn a_hook_gate_needs_events_subscribe_when_scopes_are_listed() {
    let mut doc = werewolf();
    doc["scopes"] = json!(["messages:write"]);
    let problems = validate(&doc, &bounds()).unwrap_err();
    let at: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
    assert_eq!(
        at,
        [
            "/hooks/dispatch_authorize/kind",
            "/hooks/message_authorize/kind"
        ]
    );
    assert_eq!(
        problems[0].message,
        "a hook gate needs the scope events:subscribe in /scopes"
    );
    doc["hooks"]["task_create"] = json!({"kind": "hook", "timeoutMs": 100});
    doc["hooks"]["dispatch_authorize"] = json!({"kind": "grant"});
    assert_pointers(
        &doc,
        &["/hooks/message_authorize/kind", "/hooks/task_create/kind"],
    );
    doc["scopes"] = json!(["messages:write", "events:subscribe"]);
    validate(&doc, &bounds()).unwrap();
}

#[test]
fn commands_report_each_problem_at_its_pointer() {
    let mut doc = full();
    doc["commands"] = json!([
        {"name": "Roll", "description": "x", "extra": 1},
        {"name": "dice", "description": "this description is too long", "requiredLevel": "owner"},
        {"name": "dice", "description": "again", "options": {"name": "o"}},
    ]);
    assert_pointers(
        &doc,
        &[
            "/commands/0/extra",
            "/commands/0/name",
            "/commands/1/description",
            "/commands/1/requiredLevel",
            "/commands/2/name",
            "/commands/2/options",
        ],
    );
    doc["commands"] = json!([
        {"name": "a", "description": "a"}, {"name": "b", "description": "b"},
        {"name": "c", "description": "c"}, {"name": "d", "description": "d"}
    ]);
    let problems = validate(&doc, &bounds()).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].pointer, "/commands");
    assert!(problems[0].message.contains("command.max_per_principal"));
    doc["commands"] = json!([{"name": "", "description": ""}, {"description": "d"}]);
    assert_pointers(
        &doc,
        &[
            "/commands/0/name",
            "/commands/0/description",
            "/commands/1/name",
        ],
    );
    doc["commands"] = json!("roll");
    assert_pointers(&doc, &["/commands"]);
}

#[test]
fn command_options_report_each_problem_at_its_pointer() {
    let mut doc = full();
    doc["commands"] = json!([{
        "name": "roll",
        "description": "Rolls dice",
        "options": [
            {"name": "x", "type": "float", "description": "d", "unknown": true},
            {"name": "x", "type": "boolean", "description": "d", "required": "yes",
             "choices": [{"name": "t", "value": true}]},
            {"name": "n", "type": "integer", "description": "d",
             "choices": [{"name": "one", "value": 1.5}, {"name": "two"}, {"value": 2}]},
            {"name": "s", "type": "string", "description": "d", "autocomplete": true,
             "choices": [{"name": "a", "value": "a"}]},
            {"name": "b", "type": "boolean", "description": "d", "autocomplete": true},
            {"name": "f", "type": "number", "description": "d", "choices": []},
            {"name": "g", "type": "number", "description": "d", "choices": [{"name": "pi", "value": "3.14"}]}
        ]
    }]);
    assert_pointers(
        &doc,
        &[
            "/commands/0/options/0/unknown",
            "/commands/0/options/0/type",
            "/commands/0/options/1/name",
            "/commands/0/options/1/required",
            "/commands/0/options/1/choices",
            "/commands/0/options/2/choices/0/value",
            "/commands/0/options/2/choices/1/value",
            "/commands/0/options/2/choices/2/name",
            "/commands/0/options/3/choices",
            "/commands/0/options/4/autocomplete",
            "/commands/0/options/5/choices",
            "/commands/0/options/6/choices/0/value",
        ],
    );
}

#[test]
fn components_are_known_kinds_without_duplicates() {
    let mut doc = full();
    doc["components"] = json!(["button", "slider", "button"]);
    assert_pointers(&doc, &["/components/1", "/components/2"]);
    doc["components"] = json!({"button": true});
    assert_pointers(&doc, &["/components"]);
}

fn with_delivery(delivery: Value) -> Value {
    let mut doc = full();
    doc["delivery"] = delivery;
    doc
}

fn url_problem(url: &str) -> Option<String> {
    let doc = with_delivery(json!({"mode": "interactions_url", "interactionsUrl": url}));
    match validate(&doc, &bounds()) {
        Ok(_) => None,
        Err(problems) => {
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].pointer, "/delivery/interactionsUrl");
            assert!(!problems[0].message.contains(url), "the URL is not echoed");
            Some(problems[0].message.clone())
        }
    }
}

#[test]
fn delivery_needs_its_url_exactly_for_interactions_url() {
    assert_pointers(&with_delivery(json!({})), &["/delivery/mode"]);
    assert_pointers(
        &with_delivery(json!({"mode": "webhook"})),
        &["/delivery/mode"],
    );
    assert_pointers(
        &with_delivery(json!({"mode": "interactions_url"})),
        &["/delivery/interactionsUrl"],
    );
    assert_pointers(
        &with_delivery(json!({"mode": "gateway", "interactionsUrl": "https://hooks.example.com/"})),
        &["/delivery/interactionsUrl"],
    );
    assert_pointers(
        &with_delivery(json!({"mode": "gateway", "target": "x"})),
        &["/delivery/target"],
    );
    assert_pointers(&with_delivery(json!("gateway")), &["/delivery"]);
    let m = validate(&with_delivery(json!({"mode": "gateway"})), &bounds()).unwrap();
    assert!(
        serde_json::to_value(&m).unwrap().get("delivery").is_none(),
        "the default is not stored"
    );
}

/// The URL passes the egress rules: https, no user info, no IP literal,
/// host and port on the allowlist, where an entry without a port admits
/// only 443.
#[test]
fn interactions_urls_follow_the_egress_allowlist() {
    assert_eq!(url_problem("https://hooks.example.com/i"), None);
    assert_eq!(
        url_problem("0").as_deref(),
        Some("must be an absolute URL with a host name")
    );
    assert_eq!(url_problem("https://HOOKS.example.com:443/i"), None);
    assert_eq!(url_problem("https://ops.example.com:8443/i"), None);
    assert_eq!(
        url_problem("http://hooks.example.com/i").as_deref(),
        Some("must use https")
    );
    assert_eq!(
        url_problem("https://user:pw@hooks.example.com/i").as_deref(),
        Some("must not contain user info")
    );
    assert_eq!(
        url_problem("https://127.0.0.1/i").as_deref(),
        Some("must name a host, not an IP address")
    );
    let off = Some("its host and port must be on the hub's egress.allowlist");
    assert_eq!(url_problem("https://evil.example.com/i").as_deref(), off);
    assert_eq!(
        url_problem("https://hooks.example.com:8443/i").as_deref(),
        off,
        "an entry without a port admits only 443"
    );
    assert_eq!(
        url_problem("https://ops.example.com/i").as_deref(),
        off,
        "an entry with a port admits only that port"
    );
    assert!(url_problem("not a url").is_some());
}

#[test]
fn event_subscriptions_name_app_events_and_need_the_scope() {
    let mut doc = full();
    doc["eventSubscriptions"] = json!([
        "app/task/activated",
        "agent/message/received",
        "app/task/activated",
        3
    ]);
    assert_pointers(
        &doc,
        &[
            "/eventSubscriptions/1",
            "/eventSubscriptions/2",
            "/eventSubscriptions/3",
        ],
    );
    doc["eventSubscriptions"] = json!(["app/other/event"]);
    doc["scopes"] = json!(["messages:write"]);
    doc["hooks"]["message_authorize"] = json!({"kind": "forwardAllExceptSender"});
    doc["hooks"]["dispatch_authorize"] = json!({"kind": "grant"});
    assert_pointers(&doc, &["/eventSubscriptions"]);
    doc["eventSubscriptions"] = json!([]);
    validate(&doc, &bounds()).unwrap();
    // Scopeless: the derived set holds events:subscribe.
    let mut seed = werewolf();
    seed["eventSubscriptions"] = json!(["app/task/activated"]);
    validate(&seed, &bounds()).unwrap();
}

#[test]
fn callback_names_are_current_or_moltzap_v1() {
    let mut doc = werewolf();
    doc["callbackNames"] = json!("current");
    let m = validate(&doc, &bounds()).unwrap();
    assert_eq!(m.callback_names, CallbackNames::Current);
    assert!(serde_json::to_value(&m)
        .unwrap()
        .get("callbackNames")
        .is_none());
    doc["callbackNames"] = json!("moltzap-v2");
    assert_pointers(&doc, &["/callbackNames"]);
    doc["callbackNames"] = json!(null);
    assert_pointers(&doc, &["/callbackNames"]);
}

#[test]
fn unknown_members_are_still_refused_at_every_level() {
    let mut doc = full();
    doc["scope"] = json!(["events:subscribe"]);
    doc["commands"][0]["options"][0]["hint"] = json!("x");
    doc["commands"][0]["options"][0]["choices"][0]["label"] = json!("x");
    assert_pointers(
        &doc,
        &[
            "/scope",
            "/commands/0/options/0/hint",
            "/commands/0/options/0/choices/0/label",
        ],
    );
}

/// `delivery.eventsUrl` (ADR 0033): the egress rules, in any mode, and only
/// beside event types to deliver there.
#[test]
fn an_events_url_follows_the_egress_rules_and_needs_event_subscriptions() {
    let mut seed = werewolf();
    seed["delivery"] = json!({"mode": "gateway", "eventsUrl": "https://hooks.example.com/events"});
    assert_pointers(&seed, &["/delivery/eventsUrl"]);
    seed["eventSubscriptions"] = json!(["app/task/activated"]);
    let m = validate(&seed, &bounds()).unwrap();
    assert_eq!(
        m.events_subscription(),
        Some((
            "https://hooks.example.com/events",
            &["app/task/activated".to_string()][..]
        ))
    );
    seed["delivery"]["eventsUrl"] = json!("http://hooks.example.com/events");
    assert_pointers(&seed, &["/delivery/eventsUrl"]);
    seed["delivery"]["eventsUrl"] = json!("https://elsewhere.example.com/events");
    assert_pointers(&seed, &["/delivery/eventsUrl"]);
    seed["delivery"]["eventsUrl"] = json!(7);
    assert_pointers(&seed, &["/delivery/eventsUrl"]);
    seed["delivery"] = json!({"mode": "gateway"});
    assert_eq!(
        validate(&seed, &bounds()).unwrap().events_subscription(),
        None
    );
}
