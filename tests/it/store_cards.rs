//! The cards' store contract (ADR 0027 §5-§7) on SQLite and a throwaway
//! PostgreSQL: a card written with its message, an interaction's
//! transaction and the use rules, the respond's compare-and-swap, an app's
//! change to its component.

use switchboard::domain::authz::Level;
use switchboard::domain::component::{
    Card, CardUse, Component, ComponentKind, ComponentState, Definition, InteractionState,
    InvokedBy,
};
use switchboard::domain::event::rfc3339;
use switchboard::domain::message::{Message, Origin, Part};
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    ComponentChange, ComponentChanged, DynStore, Fanout, InsertedMessage, InteractionCreated,
    InteractionResponse, JobKind, NewCard, NewInteraction, NewJob, NewMessage, PersonCopies,
    Responded,
};
use uuid::Uuid;

use crate::store_contract::{agent_in, app_in, contract, group_of, postgres, sqlite};

contract!(
    a_card_is_used_once_and_answered_once,
    once_per_principal_takes_one_interaction_each,
);

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
    let app = app_in(store).await;
    let (a, b) = (agent_in(store, "a").await, agent_in(store, "b").await);
    let group = group_of(store, &[app, a, b]).await;
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
            recipients: vec![a, b],
            event_type: "agent/message/received",
            people: PersonCopies::NONE,
        },
        job: None,
        card: Some(card(card_use)),
        reply_to_interaction: None,
    };
    let InsertedMessage::Inserted {
        message, events, ..
    } = store.insert_message(&m).await.unwrap()
    else {
        panic!("a new card")
    };
    (app, a, b, message, events.len())
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
        values: None,
        app_event: true,
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
    let other = store
        .respond_interaction(&respond(a, InteractionState::Failed))
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
        store.update_component(&change(a)).await.unwrap(),
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
