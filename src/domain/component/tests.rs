use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::domain::authz::Level;

const LIMITS: ComponentLimits = ComponentLimits {
    max_per_message: 3,
    ttl_seconds: 60,
    label_max_chars: 80,
    text_max_chars: 100,
    select_max_options: 25,
    form_max_fields: 10,
    field_max_length: 4000,
    field_name_max_chars: 64,
};

fn decoded(v: serde_json::Value) -> Vec<NewComponent> {
    serde_json::from_value(v).unwrap()
}

fn field_of(v: serde_json::Value) -> String {
    validate_components(&decoded(v), &LIMITS).unwrap_err().field
}

#[test]
fn each_kind_needs_its_own_members_and_refuses_others() {
    let ok = decoded(json!([
        {"kind": "button", "customId": "a", "label": "A", "style": "danger"},
        {"kind": "select", "customId": "s", "options": [{"label": "x", "value": "1"}, {"label": "y", "value": "2"}], "maxValues": 2},
        {"kind": "form", "customId": "f", "title": "T", "fields": [{"name": "n", "label": "N", "type": "integer", "required": true}]}
    ]));
    assert!(validate_components(&ok, &LIMITS).is_ok());
    assert_eq!(
        field_of(json!([{"kind": "button", "customId": "a"}])),
        "components[0].label"
    );
    assert_eq!(
        field_of(json!([{"kind": "button", "customId": "a", "label": "A", "title": "t"}])),
        "components[0].title"
    );
    assert_eq!(
        field_of(json!([{"kind": "select", "customId": "s"}])),
        "components[0].options"
    );
    assert_eq!(
        field_of(
            json!([{"kind": "select", "customId": "s", "options": [{"label": "x", "value": "1"}, {"label": "y", "value": "1"}]}])
        ),
        "components[0].options[1].value"
    );
    assert_eq!(
        field_of(
            json!([{"kind": "form", "customId": "f", "title": "T", "fields": [{"name": "a b", "label": "N", "type": "string"}]}])
        ),
        "components[0].fields[0].name"
    );
}

#[test]
fn card_wide_rules_name_the_member() {
    let b = |id: &str| json!({"kind": "button", "customId": id, "label": "L"});
    assert_eq!(field_of(json!([])), "components");
    assert_eq!(
        field_of(json!([b("a"), b("b"), b("c"), b("d")])),
        "components"
    );
    let err = validate_components(&decoded(json!([b("a"), b("b"), b("c"), b("d")])), &LIMITS)
        .unwrap_err();
    assert!(err.message.contains("component.max_per_message"));
    assert_eq!(field_of(json!([b("a"), b("a")])), "components[1].customId");
    let long = json!([{"kind": "button", "customId": "a", "label": "L", "expiresInSeconds": 61}]);
    assert_eq!(field_of(long), "components[0].expiresInSeconds");
}

fn component(kind: ComponentKind, definition: Definition) -> Component {
    Component {
        component_id: Uuid::nil(),
        custom_id: "c".into(),
        kind,
        definition,
        trigger: Level::Write,
        required_capability: None,
        restricted_to: None,
        state: ComponentState::Active,
        expires_at: crate::domain::event::rfc3339(10_000),
    }
}

#[test]
fn values_are_checked_by_kind_naming_the_member_never_the_value() {
    let button = component(ComponentKind::Button, Definition::default());
    assert_eq!(validate_values(&button, None, &LIMITS).unwrap(), None);
    assert_eq!(
        validate_values(&button, Some(&json!({})), &LIMITS)
            .unwrap_err()
            .field,
        "values"
    );

    let select = component(
        ComponentKind::Select,
        Definition {
            options: Some(vec![SelectOption {
                label: "x".into(),
                value: "v1".into(),
            }]),
            ..Definition::default()
        },
    );
    assert!(validate_values(&select, Some(&json!({"selected": ["v1"]})), &LIMITS).is_ok());
    let e = validate_values(&select, Some(&json!({"selected": ["SECRET"]})), &LIMITS).unwrap_err();
    assert_eq!(e.field, "values.selected[0]");
    assert!(!e.message.contains("SECRET"));

    let form = component(
        ComponentKind::Form,
        Definition {
            fields: Some(vec![FormField {
                name: "age".into(),
                label: "Age".into(),
                field_type: FieldType::Integer,
                required: true,
                max_length: None,
            }]),
            ..Definition::default()
        },
    );
    assert!(validate_values(&form, Some(&json!({"age": 3})), &LIMITS).is_ok());
    assert_eq!(
        validate_values(&form, Some(&json!({})), &LIMITS)
            .unwrap_err()
            .field,
        "values.age"
    );
    let e = validate_values(&form, Some(&json!({"age": "SECRET"})), &LIMITS).unwrap_err();
    assert_eq!(e.field, "values.age");
    assert!(!e.message.contains("SECRET"));
    assert_eq!(
        validate_values(&form, Some(&json!({"age": 1, "other": 2})), &LIMITS)
            .unwrap_err()
            .field,
        "values.other"
    );
}

#[test]
fn the_use_rules_and_expiry() {
    let mut card = Card {
        version: 1,
        card_use: CardUse::Once,
        components: vec![
            component(ComponentKind::Button, Definition::default()),
            component(ComponentKind::Button, Definition::default()),
        ],
    };
    assert!(card.components[0].usable(9_999));
    assert!(!card.components[0].usable(10_000));
    assert!(card.use_up());
    assert!(card
        .components
        .iter()
        .all(|c| c.state == ComponentState::Used));
    assert!(!card.use_up());
    card.card_use = CardUse::OncePerPrincipal;
    card.components[0].state = ComponentState::Active;
    assert!(!card.use_up());
    assert_eq!(card.disable_all(), 1);
    assert_eq!(card.disable_all(), 0, "nothing left to disable");
    assert_eq!(card.components[0].state, ComponentState::Disabled);
}

#[test]
fn interaction_states_move_forward_only() {
    use InteractionState::*;
    assert!(InteractionState::can_move(Received, Dispatched));
    assert!(InteractionState::can_move(Received, Acknowledged));
    assert!(InteractionState::can_move(Dispatched, Failed));
    assert!(!InteractionState::can_move(Acknowledged, Rejected));
    assert!(!InteractionState::can_move(Dispatched, Received));
    assert!(!InteractionState::can_move(Failed, Failed));
}

/// A label shows as written: a bidi override or isolate is refused as a
/// command's choices refuse it, whether posted or changed later, and each
/// bound is the configured one, named in the error.
#[test]
fn labels_refuse_bidi_overrides_and_bounds_come_from_the_limits() {
    for evil in ["evil\u{202E}txt", "a\u{2066}b", "x\u{202A}"] {
        let posted = decoded(json!([{"kind": "button", "customId": "a", "label": evil}]));
        let e = validate_components(&posted, &LIMITS).unwrap_err();
        assert_eq!(e.field, "components[0].label");
        assert!(e.message.contains("bidirectional"), "{}", e.message);
        assert_eq!(
            check_label("label".into(), evil, &LIMITS)
                .unwrap_err()
                .field,
            "label"
        );
        let option = json!([{"kind": "select", "customId": "s",
                             "options": [{"label": evil, "value": "v"}]}]);
        assert_eq!(field_of(option), "components[0].options[0].label");
    }
    assert!(check_label("label".into(), &"é".repeat(80), &LIMITS).is_ok());
    let narrow = ComponentLimits {
        label_max_chars: 3,
        select_max_options: 1,
        form_max_fields: 1,
        field_max_length: 5,
        ..LIMITS
    };
    assert!(check_label("label".into(), "four", &narrow).is_err());
    let two_options = decoded(json!([{"kind": "select", "customId": "s",
        "options": [{"label": "x", "value": "1"}, {"label": "y", "value": "2"}]}]));
    let e = validate_components(&two_options, &narrow).unwrap_err();
    assert!(
        e.message.contains("component.select_max_options"),
        "{}",
        e.message
    );
    let long = decoded(json!([{"kind": "form", "customId": "f", "title": "T",
        "fields": [{"name": "n", "label": "N", "type": "string", "maxLength": 6}]}]));
    let e = validate_components(&long, &narrow).unwrap_err();
    assert_eq!(e.field, "components[0].fields[0].maxLength");
    // A string field without its own maxLength takes the configured one.
    let form = Component {
        component_id: Uuid::now_v7(),
        custom_id: "f".into(),
        kind: ComponentKind::Form,
        definition: Definition {
            title: Some("T".into()),
            fields: Some(vec![FormField {
                name: "n".into(),
                label: "N".into(),
                field_type: FieldType::String,
                required: false,
                max_length: None,
            }]),
            ..Definition::default()
        },
        trigger: Level::Write,
        required_capability: None,
        restricted_to: None,
        state: ComponentState::Active,
        expires_at: String::new(),
    };
    assert!(validate_values(&form, Some(&json!({"n": "12345"})), &narrow).is_ok());
    let e = validate_values(&form, Some(&json!({"n": "123456"})), &narrow).unwrap_err();
    assert_eq!(e.field, "values.n");
}
