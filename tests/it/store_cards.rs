//! The cards' store contract (ADR 0027 §5-§7) on SQLite and a throwaway
//! PostgreSQL: a card written with its message, an interaction's
//! transaction and the use rules, the respond's compare-and-swap, an app's
//! change to its component; every write of a card holding its app's
//! installation, so a suspend or an uninstall that commits after the
//! decision leaves nothing written, and a suspend racing presses on
//! PostgreSQL neither deadlocks nor loses a press.

use switchboard::domain::authz::Level;
use switchboard::domain::authz::Reason;
use switchboard::domain::component::{
    Card, CardUse, Component, ComponentKind, ComponentState, Definition, InteractionState,
    InvokedBy,
};
use switchboard::domain::event::rfc3339;
use switchboard::domain::installation::{Actor, Transition};
use switchboard::domain::message::{Message, Origin, Part};
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    ComponentChange, ComponentChanged, DynStore, Fanout, InsertedMessage, InteractionCreated,
    InteractionResponse, JobKind, NewCard, NewInteraction, NewJob, NewMessage, PersonCopies,
    Responded,
};
use uuid::Uuid;

use crate::store_contract::{agent_in, contract, group_of, new_key, postgres, principal, sqlite};

contract!(
    a_card_is_used_once_and_answered_once,
    once_per_principal_takes_one_interaction_each,
    a_lifecycle_change_after_the_decision_leaves_nothing_written,
);

/// The race on several threads, and on PostgreSQL with a pool wide enough
/// for the suspend and a dozen presses to be in flight together.
mod races {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite_suspend_racing_presses() {
        let (store, _dir) = crate::store_contract::sqlite().await;
        super::a_suspend_racing_presses_loses_none(store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_suspend_racing_presses() {
        let mut config = switchboard::config::Config::default();
        config.storage.database_url = crate::support::pg::fresh_database().await;
        config.storage.max_connections = 16;
        let store = switchboard::store::open(&config).await.unwrap();
        super::a_suspend_racing_presses_loses_none(store).await;
    }
}

/// An installed app that posts cards: the werewolf manifest with
/// `scopes`.
async fn card_app(store: &DynStore, scopes: &[&str]) -> Uuid {
    let mut m = crate::support::werewolf_manifest();
    m["scopes"] = serde_json::json!(scopes);
    // Its hook gates need `events:subscribe`, which a card app may lack.
    m["hooks"] = serde_json::json!({
        "dispatch_authorize": {"kind": "grant"},
        "message_authorize": {"kind": "forwardAllExceptSender"},
        "task_create": {"kind": "accept"}
    });
    let bounds = switchboard::config::Config::default().manifest_bounds();
    let m = switchboard::domain::manifest::validate(&m, &bounds).unwrap();
    let app = principal(PrincipalKind::App, "cards");
    let (_, key) = new_key(PrincipalKind::App);
    let install = switchboard::store::RegistrationInstall::new(app.id, &m, Actor::Operator, 1);
    store
        .create_app(&app, &m, &key, Some(&install), None)
        .await
        .unwrap();
    app.id
}

const CARD_SCOPES: &[&str] = &["messages:write", "components:write", "events:subscribe"];

const FAR: i64 = 4_000_000_000_000;

fn card(card_use: CardUse) -> NewCard {
    let button = |id: &str| Component {
        component_id: Uuid::now_v7(),
        custom_id: id.into(),
        kind: ComponentKind::Button,
        definition: Definition {
            label: Some(id.into()),
            ..Definition::default()
        },
        trigger: Level::Write,
        required_capability: None,
        restricted_to: None,
        state: ComponentState::Active,
        expires_at: rfc3339(FAR),
    };
    NewCard {
        card: Card {
            version: 1,
            card_use,
            components: vec![button("yes"), button("no")],
        },
        expires_at: vec![FAR, FAR],
    }
}

/// The app posts a card to the agents of a group: the stored message and
/// its events.
async fn post(store: &DynStore, card_use: CardUse) -> (Uuid, Uuid, Uuid, Message, usize) {
    let app = card_app(store, CARD_SCOPES).await;
    let (a, b) = (agent_in(store, "a").await, agent_in(store, "b").await);
    let group = group_of(store, &[app, a, b]).await;
    let (message, sent) = post_in(store, app, group, &[a, b], card_use).await;
    (app, a, b, message, sent)
}

/// `app` posts a card into `group` for `readers`.
async fn post_in(
    store: &DynStore,
    app: Uuid,
    group: Uuid,
    readers: &[Uuid],
    card_use: CardUse,
) -> (Message, usize) {
    let m = NewMessage {
        id: Uuid::now_v7(),
        conversation_id: group,
        sender_id: app,
        origin: Origin::App,
        parts: vec![Part::Text {
            text: "pick".into(),
        }],
        reply_to: None,
        thread_id: None,
        in_channel: false,
        client_msg_id: None,
        request_hash: None,
        created_at: 10,
        fanout: Fanout::Forward {
            recipients: readers.to_vec(),
            event_type: "agent/message/received",
            people: PersonCopies::NONE,
            apps: switchboard::store::AppCopies::NONE,
        },
        jobs: Vec::new(),
        card: Some(card(card_use)),
        reply_to_interaction: None,
    };
    let InsertedMessage::Inserted {
        message, events, ..
    } = store.insert_message(&m).await.unwrap()
    else {
        panic!("a new card")
    };
    (message, events.len())
}

fn pressing(message: &Message, who: Uuid, component: usize) -> NewInteraction {
    let id = Uuid::now_v7();
    NewInteraction {
        id,
        message_id: message.id,
        component_id: message.card.as_ref().unwrap().components[component].component_id,
        actor: InvokedBy {
            principal_id: who,
            kind: PrincipalKind::Agent,
        },
        app_id: message.sender_id,
        values: None,
        job: NewJob::new(JobKind::AppInteractionDispatch, id, 20),
        now: 20,
    }
}

async fn a_card_is_used_once_and_answered_once(store: DynStore) {
    let (app, a, b, message, sent) = post(&store, CardUse::Once).await;
    assert_eq!(sent, 2, "one copy to each agent");
    let (stored, _) = store.message(message.id).await.unwrap().unwrap();
    assert_eq!(stored.card, message.card, "the card reads back as written");
    let first = pressing(&message, a, 0);
    let InteractionCreated::Created {
        interaction,
        card,
        events,
    } = store.create_interaction(&first).await.unwrap()
    else {
        panic!("the first press is recorded")
    };
    assert_eq!(interaction.state, InteractionState::Received);
    let card = card.card.unwrap();
    assert_eq!(card.version, 2);
    assert!(card
        .components
        .iter()
        .all(|c| c.state == ComponentState::Used));
    let audiences: Vec<(Uuid, String)> = events
        .iter()
        .map(|e| (e.audience, e.event_type.clone()))
        .collect();
    assert!(audiences.contains(&(app, "app/interaction/created".into())));
    assert!(audiences.contains(&(a, "agent/message/updated".into())));
    assert!(audiences.contains(&(b, "agent/message/updated".into())));
    assert_eq!(events.len(), 3, "{audiences:?}");
    assert!(matches!(
        store
            .create_interaction(&pressing(&message, b, 1))
            .await
            .unwrap(),
        InteractionCreated::Used
    ));
    // Answered once; another app's answer finds nothing.
    let respond = |app_id, state| InteractionResponse {
        interaction_id: first.id,
        app_id,
        state,
        reply: None,
        now: 30,
    };
    let done = store
        .respond_interaction(&respond(app, InteractionState::Acknowledged))
        .await;
    assert!(matches!(done.unwrap(), Responded::Done { .. }));
    let again = store
        .respond_interaction(&respond(app, InteractionState::Rejected))
        .await;
    assert!(matches!(
        again.unwrap(),
        Responded::Conflict(InteractionState::Acknowledged)
    ));
    let another_app = card_app(&store, CARD_SCOPES).await;
    let other = store
        .respond_interaction(&respond(another_app, InteractionState::Failed))
        .await;
    assert!(matches!(other.unwrap(), Responded::NotFound));
    assert!(!store
        .fail_interaction(first.id, "app_inactive", 40)
        .await
        .unwrap());
    // The app reopens a component: version 3; another principal cannot.
    let change = |app_id| ComponentChange {
        app_id,
        message_id: message.id,
        component_id: card.components[0].component_id,
        state: Some(ComponentState::Active),
        label: None,
        now: 50,
    };
    assert!(matches!(
        store.update_component(&change(another_app)).await.unwrap(),
        ComponentChanged::NotFound
    ));
    let ComponentChanged::Changed(reopened, events) =
        store.update_component(&change(app)).await.unwrap()
    else {
        panic!("the author changes its card")
    };
    let reopened = reopened.card.unwrap();
    assert_eq!(reopened.version, 3);
    assert_eq!(reopened.components[0].state, ComponentState::Active);
    assert_eq!(reopened.components[1].state, ComponentState::Used);
    assert_eq!(events.len(), 2, "one update to each reader");
}

async fn once_per_principal_takes_one_interaction_each(store: DynStore) {
    let (_, a, b, message, _) = post(&store, CardUse::OncePerPrincipal).await;
    for who in [a, b] {
        let InteractionCreated::Created { card, events, .. } = store
            .create_interaction(&pressing(&message, who, 0))
            .await
            .unwrap()
        else {
            panic!("each once")
        };
        assert_eq!(card.card.unwrap().version, 1, "nothing changed on the card");
        assert_eq!(events.len(), 1, "the app's event only");
    }
    assert!(matches!(
        store
            .create_interaction(&pressing(&message, a, 1))
            .await
            .unwrap(),
        InteractionCreated::Used
    ));
}

fn no_events(
    _: &switchboard::store::InstallationRecord,
) -> Vec<switchboard::domain::event::NewEvent> {
    Vec::new()
}

async fn installation_of(store: &DynStore, app: Uuid) -> Uuid {
    store.installation(app).await.unwrap().unwrap().id
}

async fn move_installation(store: &DynStore, app: Uuid, transition: Transition, now: i64) {
    let id = installation_of(store, app).await;
    store
        .transition(id, transition, Actor::Operator, now, &no_events)
        .await
        .unwrap();
}

fn reply_to(interaction: &NewInteraction, app: Uuid, conversation: Uuid) -> NewMessage {
    NewMessage {
        id: Uuid::now_v7(),
        conversation_id: conversation,
        sender_id: app,
        origin: Origin::App,
        parts: vec![Part::Text {
            text: "counted".into(),
        }],
        reply_to: None,
        thread_id: None,
        in_channel: false,
        client_msg_id: None,
        request_hash: None,
        created_at: 60,
        fanout: Fanout::Forward {
            recipients: Vec::new(),
            event_type: "agent/message/received",
            people: PersonCopies::NONE,
            apps: switchboard::store::AppCopies::NONE,
        },
        jobs: Vec::new(),
        card: None,
        reply_to_interaction: Some(interaction.id),
    }
}

/// The decision granted, then the lifecycle committed, then the write
/// came: a suspend leaves no component reopened and no press recorded,
/// an uninstall no reply written; each refusal is the decision's reason.
/// The app's event of a press is written even without `events:subscribe`
/// (the interaction row names it).
async fn a_lifecycle_change_after_the_decision_leaves_nothing_written(store: DynStore) {
    let app = card_app(&store, &["messages:write", "components:write"]).await;
    let a = agent_in(&store, "a").await;
    let group = group_of(&store, &[app, a]).await;
    let (message, _) = post_in(&store, app, group, &[a], CardUse::OncePerPrincipal).await;
    let first = pressing(&message, a, 0);
    let InteractionCreated::Created { events, .. } =
        store.create_interaction(&first).await.unwrap()
    else {
        panic!("pressed while active")
    };
    assert!(
        events
            .iter()
            .any(|e| e.audience == app && e.event_type == "app/interaction/created"),
        "the app's event is written whatever its scopes"
    );
    move_installation(&store, app, Transition::Suspend, 30).await;
    let reopen = ComponentChange {
        app_id: app,
        message_id: message.id,
        component_id: message.card.as_ref().unwrap().components[0].component_id,
        state: Some(ComponentState::Active),
        label: None,
        now: 40,
    };
    assert!(matches!(
        store.update_component(&reopen).await.unwrap(),
        ComponentChanged::Refused(Reason::AppSuspended)
    ));
    let (stored, _) = store.message(message.id).await.unwrap().unwrap();
    let card = stored.card.unwrap();
    assert_eq!(card.version, 2, "the suspend's version, no later one");
    assert!(card
        .components
        .iter()
        .all(|c| c.state == ComponentState::Disabled));
    let b = agent_in(&store, "b").await;
    assert!(matches!(
        store
            .create_interaction(&pressing(&message, b, 1))
            .await
            .unwrap(),
        InteractionCreated::Used
    ));
    let answer = |reply| InteractionResponse {
        interaction_id: first.id,
        app_id: app,
        state: InteractionState::Acknowledged,
        reply: Some(reply),
        now: 50,
    };
    let suspended = store
        .respond_interaction(&answer(reply_to(&first, app, group)))
        .await;
    assert!(matches!(
        suspended.unwrap(),
        Responded::Refused(Reason::AppSuspended)
    ));
    move_installation(&store, app, Transition::Resume, 55).await;
    let id = installation_of(&store, app).await;
    store
        .uninstall(id, Actor::Operator, 56, &|_| Vec::new())
        .await
        .unwrap();
    let reply = reply_to(&first, app, group);
    let uninstalled = store.respond_interaction(&answer(reply.clone())).await;
    assert!(matches!(
        uninstalled.unwrap(),
        Responded::Refused(Reason::AppNotInstalled)
    ));
    assert!(store.message(reply.id).await.unwrap().is_none(), "no reply");
    let kept = store.interaction(first.id).await.unwrap().unwrap();
    assert_eq!(kept.state, InteractionState::Received);
}

/// Rounds of a suspend committed while six agents press the app's `once`
/// cards, every card at once (ADR 0027 §7): no store error (on
/// PostgreSQL, no deadlock between the suspend's card locks and stream
/// appends and a press's), every press either recorded before the suspend
/// (its card used then) or refused `Used`, and no component left active.
async fn a_suspend_racing_presses_loses_none(store: DynStore) {
    let app = card_app(&store, CARD_SCOPES).await;
    let mut agents = Vec::new();
    for i in 0..6 {
        agents.push(agent_in(&store, &format!("voter-{i}")).await);
    }
    let mut members = agents.clone();
    members.push(app);
    let group = group_of(&store, &members).await;
    const CARDS: usize = 6;
    for round in 0..20i64 {
        let mut cards = Vec::new();
        for _ in 0..CARDS {
            cards.push(post_in(&store, app, group, &agents, CardUse::Once).await.0);
        }
        let id = installation_of(&store, app).await;
        // The suspend locks the cards in ascending id while the presses
        // come in descending id, the order that inverts the two.
        let suspend = {
            let store = store.clone();
            tokio::spawn(async move {
                let (op, at) = (Actor::Operator, 100 + round);
                store
                    .transition(id, Transition::Suspend, op, at, &no_events)
                    .await
            })
        };
        let mut presses = Vec::new();
        for (i, who) in agents.iter().enumerate() {
            for k in (0..CARDS).rev() {
                let card = &cards[k];
                let (store, press) = (store.clone(), pressing(card, *who, i % 2));
                presses.push(tokio::spawn(async move {
                    store.create_interaction(&press).await
                }));
            }
        }
        suspend.await.unwrap().expect("the suspend commits");
        let mut landed = 0;
        for p in presses {
            match p.await.unwrap().expect("a press commits or is refused") {
                InteractionCreated::Created { card, .. } => {
                    landed += 1;
                    let card = card.card.unwrap();
                    assert!(card
                        .components
                        .iter()
                        .all(|c| c.state == ComponentState::Used));
                }
                InteractionCreated::Used => {}
                InteractionCreated::NotFound => panic!("round {round}: the card went"),
            }
        }
        assert!(landed <= CARDS, "round {round}: one press per once card");
        for card in &cards {
            let (stored, _) = store.message(card.id).await.unwrap().unwrap();
            let stored = stored.card.unwrap();
            assert!(
                stored
                    .components
                    .iter()
                    .all(|c| c.state != ComponentState::Active),
                "round {round}: {stored:?}"
            );
            assert_eq!(stored.version, 2, "round {round}: one change per card");
        }
        move_installation(&store, app, Transition::Resume, 200 + round).await;
    }
}
