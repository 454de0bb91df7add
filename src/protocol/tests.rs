//! The catalogue's own rules: names, twins, rate classes, schemas.

use super::*;

/// The envelope depths the data-depth budget assumes, measured on the
/// frames the hub really writes around a part of depth 0.
#[test]
fn envelope_depths_are_those_of_the_real_frames() {
    use crate::domain::conversation::{Conversation, ConversationKind};
    use crate::domain::message::{envelope_depth, nesting, Message, Origin, Part};
    use crate::rpc::frame::{self, Id};
    use uuid::Uuid;

    let message = Message {
        id: Uuid::nil(),
        conversation_id: Uuid::nil(),
        seq: 1,
        sender_id: Uuid::nil(),
        origin: Origin::Agent,
        parts: vec![Part::Data {
            data: serde_json::json!(1),
            mime_type: None,
        }],
        reply_to: None,
        thread_id: None,
        created_at: String::new(),
        reply_to_interaction: None,
        card: None,
    };
    let conversation = Conversation {
        id: Uuid::nil(),
        kind: ConversationKind::Task,
        name: None,
        key: None,
        task_id: None,
        space_id: None,
        state: None,
        created_by: Uuid::nil(),
        participants: vec![],
        last_message_seq: 0,
        created_at: String::new(),
    };
    let depth = |text: String| nesting(&serde_json::from_str(&text).unwrap());
    let id = Id::Number(1.into());
    let delivery = conversations::Delivery {
        state: conversations::DeliveryState::Forwarded,
        recipients: None,
        reason: None,
        dropped: None,
    };
    assert_eq!(
        depth(frame::result(
            &id,
            &conversations::MessageListResult {
                messages: vec![message.clone()],
                has_more: false,
            }
        )),
        envelope_depth::MESSAGE_LIST
    );
    assert_eq!(
        depth(frame::result(
            &id,
            &conversations::MessageSendResult {
                message: message.clone(),
                delivery,
                duplicate: false,
            }
        )),
        envelope_depth::SEND_RESULT
    );
    assert_eq!(
        depth(frame::request(
            &id,
            "app/message/authorize",
            &tasks::MessageAuthorizeCallback {
                task_id: Uuid::nil(),
                conversation,
                message,
                check: false,
            }
        )),
        envelope_depth::HOOK_CALL
    );
}

/// Each `person/...` entry but the connect is an agent method's twin:
/// the same name after the audience, the same params, result, summary
/// and errors, and people as its callers or recipients.
#[test]
fn person_entries_are_twins_of_agent_entries() {
    let specs = catalogue();
    let people: Vec<&MethodSpec> = specs
        .iter()
        .filter(|s| s.name.starts_with("person/") && s.name != "person/network/connect")
        .collect();
    assert_eq!(people.len(), 18);
    for p in people {
        let agent_name = p.name.replacen("person/", "agent/", 1);
        let a = specs
            .iter()
            .find(|s| s.name == agent_name)
            .unwrap_or_else(|| panic!("{} has no agent twin", p.name));
        assert_eq!(p.caller, Caller::Person, "{}", p.name);
        assert_eq!(a.caller, Caller::Agent, "{}", a.name);
        assert_eq!((p.params_type)(), (a.params_type)(), "{}", p.name);
        assert_eq!(p.result_type.map(|t| t()), a.result_type.map(|t| t()));
        assert_eq!(
            (p.summary, p.kind, p.direction),
            (a.summary, a.kind, a.direction)
        );
        assert_eq!(p.errors, a.errors, "{}", p.name);
        assert_eq!((p.action, p.rate_class), (a.action, a.rate_class));
    }
}

/// Every method a principal calls names the action its caller kind may
/// ask for (so a refusal of another kind is a true
/// `subject_kind_not_allowed`), except the connects and one's own
/// identity; the hub's calls name none and spend no class.
#[test]
fn actions_admit_their_callers_and_the_hubs_calls_have_none() {
    use crate::domain::PrincipalKind;
    let without = [
        "agent/network/connect",
        "app/network/connect",
        "agent/identity/get",
        "app/identity/get",
        "person/network/connect",
        "person/identity/get",
    ];
    for s in catalogue() {
        let to_hub = s.direction == Direction::ToHub && s.kind == SpecKind::Request;
        if !to_hub {
            assert_eq!(s.action, None, "{}", s.name);
            assert_eq!(s.rate_class, RateClass::Default, "{}", s.name);
            continue;
        }
        if without.contains(&s.name) {
            assert_eq!(s.action, None, "{}", s.name);
            continue;
        }
        let action = s
            .action
            .unwrap_or_else(|| panic!("{} names no action", s.name));
        let kind = match s.caller {
            Caller::Agent => PrincipalKind::Agent,
            Caller::App => PrincipalKind::App,
            Caller::Person => PrincipalKind::Person,
            Caller::Unauthenticated => panic!("{} is a connect", s.name),
        };
        assert!(
            action.requirement().subjects.admits_principal(kind),
            "{} names {action}, which a {kind} may not ask for",
            s.name
        );
    }
}

/// ADR 0020 §4: sends and typing spend `message`, creations and task
/// changes `write`, dispatch and acks `agent_runtime`; the rest `default`.
/// Command invokes and autocomplete spend `trigger` (ADR 0027 §1);
/// `interaction` is the cards step's.
#[test]
fn rate_classes_follow_the_adr() {
    let class = |name: &str| find(name).unwrap().rate_class;
    for m in [
        "agent/message/send",
        "agent/typing/send",
        "app/message/send",
    ] {
        assert_eq!(class(m), RateClass::Message, "{m}");
    }
    for m in [
        "agent/conversation/create",
        "agent/task/request",
        "app/task/close",
        "app/conversation/create",
        "app/conversation/add",
        "agent/invite/accept",
        "person/invite/accept",
    ] {
        assert_eq!(class(m), RateClass::Write, "{m}");
    }
    for m in [
        "agent/dispatch/request",
        "agent/dispatch/complete",
        "app/dispatch/resolve",
        "agent/event/ack",
        "app/event/ack",
        "app/interaction/respond",
    ] {
        assert_eq!(class(m), RateClass::AgentRuntime, "{m}");
    }
    assert_eq!(class("app/component/update"), RateClass::Write);
    // ADR 0027 §1: an invocation spends `trigger`, an interaction
    // `interaction`, and nothing else spends either.
    let triggers = [
        "agent/command/invoke",
        "person/command/invoke",
        "agent/command/autocomplete",
        "person/command/autocomplete",
    ];
    let interactions = ["agent/interaction/create", "person/interaction/create"];
    for s in catalogue() {
        let trigger = s.rate_class == RateClass::Trigger;
        assert_eq!(trigger, triggers.contains(&s.name), "{}", s.name);
        let interaction = s.rate_class == RateClass::Interaction;
        assert_eq!(interaction, interactions.contains(&s.name), "{}", s.name);
    }
}

#[test]
fn names_are_unique_and_prefixed_by_their_principal() {
    let specs = catalogue();
    let mut names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), specs.len());
    for s in specs {
        assert!(
            s.name.starts_with("agent/")
                || s.name.starts_with("app/")
                || s.name.starts_with("person/"),
            "{}",
            s.name
        );
    }
}

/// `decode_params` is the router's decode for every entry: params that
/// are not an object are refused as the router refuses them, naming
/// `params`, and a member no params type has is refused by name.
#[test]
fn every_entry_decodes_its_params_as_the_router_does() {
    for spec in catalogue() {
        let e = (spec.decode_params)(Some(serde_json::json!([1]))).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::InvalidParams), "{}", spec.name);
        assert_eq!(
            e.data.as_deref(),
            Some(&serde_json::json!({"field": "params"})),
            "{}",
            spec.name
        );
        let e = (spec.decode_params)(Some(serde_json::json!({"noSuchMember": 1})))
            .expect_err(spec.name);
        assert_eq!(e.kind(), Some(ErrorKind::InvalidParams), "{}", spec.name);
    }
}
