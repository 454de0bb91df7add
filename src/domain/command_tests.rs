use serde_json::json;

use super::*;
use crate::domain::authz::Level;

fn decl(v: serde_json::Value) -> CommandDecl {
    serde_json::from_value(v).unwrap()
}

fn options(v: serde_json::Value) -> Vec<OptionDecl> {
    serde_json::from_value(v).unwrap()
}

fn map(v: serde_json::Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[test]
fn reserved_names_are_case_insensitive() {
    assert!(is_reserved("help"));
    assert!(is_reserved("HeLp"));
    assert!(!is_reserved("helper"));
}

#[test]
fn diff_compares_names_case_insensitively() {
    let old = vec![
        decl(json!({"name": "vote", "description": "Vote"})),
        decl(json!({"name": "tally", "description": "Count"})),
        decl(json!({"name": "same", "description": "Same"})),
    ];
    let new = vec![
        decl(json!({"name": "vote", "description": "Vote now"})),
        decl(json!({"name": "same", "description": "Same"})),
        decl(json!({"name": "new", "description": "New", "requiredLevel": "write"})),
    ];
    let d = diff(&old, &new);
    let names = |l: &[CommandDecl]| l.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&d.added), ["new"]);
    assert_eq!(names(&d.changed), ["vote"]);
    assert_eq!(names(&d.removed), ["tally"]);
    assert_eq!(d.added[0].required_level, Level::Write);
    assert!(diff(&new, &new).is_empty());
}

#[test]
fn a_changed_level_or_option_is_a_change() {
    let a = decl(json!({"name": "x", "description": "X"}));
    let b = decl(json!({"name": "x", "description": "X", "requiredLevel": "admin"}));
    let c = decl(json!({"name": "x", "description": "X",
        "options": [{"name": "o", "type": "string", "description": "O"}]}));
    assert_eq!(diff(std::slice::from_ref(&a), &[b]).changed.len(), 1);
    assert_eq!(diff(&[a], &[c]).changed.len(), 1);
}

const RULES: OptionRules = OptionRules {
    value_max_chars: 20,
    complete: true,
};

#[test]
fn string_values_are_bounded_and_partial_options_need_no_required_one() {
    let decl = options(json!([
        {"name": "who", "type": "principal", "description": "Who", "required": true},
        {"name": "note", "type": "string", "description": "N"}
    ]));
    let long = "x".repeat(21);
    let p = validate_options(&decl, &map(json!({"note": long})), RULES.partial()).unwrap_err();
    assert_eq!(p.field, "options.note");
    assert!(p.message.contains("at most 20"), "{}", p.message);
    let fits = map(json!({"note": "x".repeat(20)}));
    assert!(validate_options(&decl, &fits, RULES.partial()).is_ok());
    assert_eq!(
        validate_options(&decl, &fits, RULES).unwrap_err().field,
        "options.who"
    );
    // Partial still refuses what is not declared and what is mistyped.
    let p = validate_options(&decl, &map(json!({"zzz": 1})), RULES.partial()).unwrap_err();
    assert_eq!(p.field, "options.zzz");
    let p = validate_options(&decl, &map(json!({"who": 7})), RULES.partial()).unwrap_err();
    assert_eq!(
        (p.field.as_str(), p.message.as_str()),
        ("options.who", "must be an id")
    );
}

#[test]
fn options_are_checked_by_type_and_named() {
    let decl = options(json!([
        {"name": "who", "type": "principal", "description": "Who", "required": true},
        {"name": "n", "type": "integer", "description": "N"},
        {"name": "x", "type": "number", "description": "X"},
        {"name": "flag", "type": "boolean", "description": "F"},
        {"name": "color", "type": "string", "description": "C",
         "choices": [{"name": "Red", "value": "red"}]},
        {"name": "room", "type": "channel", "description": "R"}
    ]));
    let id = Uuid::now_v7();
    let ok = validate_options(
        &decl,
        &map(json!({"who": id, "n": 3, "x": 1.5, "flag": true, "color": "red", "room": id})),
        RULES,
    )
    .unwrap();
    assert_eq!(ok.principals, [id]);
    assert_eq!(ok.channels, [id]);
    let problem = |v| validate_options(&decl, &map(v), RULES).unwrap_err();
    let secret = "canary-value-42";
    let cases = [
        (json!({}), "options.who", "is required"),
        (json!({"who": secret}), "options.who", "must be an id"),
        (
            json!({"who": id, "n": secret}),
            "options.n",
            "must be an integer",
        ),
        (
            json!({"who": id, "n": 1.5}),
            "options.n",
            "must be an integer",
        ),
        (
            json!({"who": id, "x": secret}),
            "options.x",
            "must be a number",
        ),
        (
            json!({"who": id, "flag": secret}),
            "options.flag",
            "must be a boolean",
        ),
        (
            json!({"who": id, "color": secret}),
            "options.color",
            "must be one of its choices",
        ),
        (
            json!({"who": id, "room": 7}),
            "options.room",
            "must be an id",
        ),
        (
            json!({"who": id, "zzz": secret}),
            "options.zzz",
            "is not an option of this command",
        ),
    ];
    for (values, field, message) in cases {
        let p = problem(values);
        assert_eq!((p.field.as_str(), p.message.as_str()), (field, message));
        assert!(!p.message.contains(secret) && !p.field.contains(secret));
    }
}

#[test]
fn choices_are_display_checked_typed_and_capped() {
    let c = |name: &str, value: Value| Choice {
        name: name.into(),
        value,
    };
    let good = vec![
        c("Alpha", json!("a")),
        c("Beta", json!("b")),
        c("Gamma", json!("g")),
    ];
    assert_eq!(
        checked_choices(OptionType::String, &good, 2).unwrap(),
        good[..2].to_vec()
    );
    assert_eq!(checked_choices(OptionType::String, &[], 5), Some(vec![]));
    for bad in [
        c("", json!("a")),
        c("bell\u{7}", json!("a")),
        c("evil\u{202E}txt", json!("a")),
        c("iso\u{2066}late", json!("a")),
        c(&"n".repeat(CHOICE_NAME_MAX + 1), json!("a")),
        c("ok", json!(1)),
        c("ok", json!("")),
    ] {
        let answer = vec![good[0].clone(), bad];
        assert_eq!(checked_choices(OptionType::String, &answer, 25), None);
    }
    assert!(checked_choices(OptionType::Integer, &[c("One", json!(1))], 5).is_some());
    assert!(checked_choices(OptionType::Integer, &[c("Half", json!(0.5))], 5).is_none());
    assert!(checked_choices(OptionType::Number, &[c("Half", json!(0.5))], 5).is_some());
    assert!(checked_choices(OptionType::Number, &[c("S", json!("1"))], 5).is_none());
    assert!(displayable(&"é".repeat(CHOICE_NAME_MAX)));
}
