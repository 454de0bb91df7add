//! The whole decision (both passes, and what a grant completes) costs as
//! many store statements for a hidden id as for a missing one, cached or
//! not; a granted send to a cached conversation costs none.

use super::*;

/// Runs the whole decision (both passes, and what a grant completes) on
/// `target` and returns the store statements it cost, checking it refused.
async fn statements_of(w: &World, action: Action, target: Target) -> u32 {
    statements_as(w, w.me, PrincipalKind::Agent, action, target).await
}

async fn statements_as(
    w: &World,
    me: Uuid,
    kind: PrincipalKind,
    action: Action,
    target: Target,
) -> u32 {
    let subject = Subject::Principal {
        id: me,
        kind,
        active: true,
    };
    w.fake.take_statements();
    let outcome = crate::access::decide_with(&w.fake, me, &subject, action, &target)
        .await
        .unwrap();
    assert!(
        matches!(outcome, crate::access::Outcome::Denied(_)),
        "{action}: granted"
    );
    w.fake.take();
    w.fake.take_statements()
}

/// A hidden id and a random one cost the same statements deciding
/// `action`, with the cache cold, then with `warm` cached (a random id is
/// never cached: misses are not).
async fn same_cost(w: &World, action: Action, warm: Uuid, hidden: Target, missing: Target) {
    for cache in [vec![], vec![warm]] {
        let mut cost = Vec::new();
        for target in [&hidden, &missing] {
            *w.fake.cached.lock().unwrap() = cache.iter().copied().collect();
            cost.push(statements_of(w, action, target.clone()).await);
        }
        assert!(cost[1] > 0, "{action}: no statement");
        assert_eq!(
            cost[0], cost[1],
            "{action}, cached {cache:?}: hidden vs missing"
        );
    }
}

#[tokio::test]
async fn a_hidden_conversation_costs_the_statements_of_a_missing_one() {
    let w = world();
    for action in [
        Action::ConversationRead,
        Action::MessageCreate,
        Action::TypingSend,
    ] {
        let (hidden, missing) = (w.conversation, Uuid::new_v4());
        let (h, m) = (Target::conversation(hidden), Target::conversation(missing));
        same_cost(&w, action, hidden, h, m).await;
    }
    // Read whole (`*/conversation/get`, `app/conversation/add`): no cache.
    let (h, m) = (
        Target::conversation_row(w.conversation),
        Target::conversation_row(Uuid::new_v4()),
    );
    same_cost(&w, Action::ConversationRead, w.conversation, h, m).await;
}

#[tokio::test]
async fn a_hidden_message_costs_the_statements_of_a_missing_one() {
    let w = world();
    // The conversation is one the caller was granted already (the handlers
    // check it first): a random message in the same conversation.
    let hidden = Target::message(w.conversation, w.message).field("replyTo");
    let missing = Target::message(w.conversation, Uuid::new_v4()).field("replyTo");
    for action in [Action::MessageCreate, Action::DispatchRequest] {
        same_cost(&w, action, w.conversation, hidden.clone(), missing.clone()).await;
    }
}

#[tokio::test]
async fn a_hidden_task_and_lease_cost_the_statements_of_missing_ones() {
    let w = world();
    let named = [w.me];
    let (task, random) = (Target::task(w.task), Target::task(Uuid::new_v4()));
    same_cost(&w, Action::TaskRead, w.conversation, task, random).await;
    let task = Target::task(w.task).naming(&named);
    let random = Target::task(Uuid::new_v4()).naming(&named);
    same_cost(&w, Action::TaskManage, w.conversation, task, random).await;
    let (lease, random) = (Target::lease(w.lease), Target::lease(Uuid::new_v4()));
    same_cost(&w, Action::DispatchComplete, w.conversation, lease, random).await;
}

/// An agent's send to a conversation it is in, cached: one cache lookup,
/// no statement; uncached: one membership read, never a second pass.
#[tokio::test]
async fn a_granted_send_to_a_cached_conversation_costs_no_statement() {
    let w = world();
    let a = w.fake.memberships[&w.conversation].participants[0];
    let subject = Subject::Principal {
        id: a,
        kind: PrincipalKind::Agent,
        active: true,
    };
    let target = Target::conversation(w.conversation);
    for expected in [MEMBERSHIP_STATEMENTS, 0] {
        let outcome =
            crate::access::decide_with(&w.fake, a, &subject, Action::MessageCreate, &target)
                .await
                .unwrap();
        assert!(matches!(outcome, crate::access::Outcome::Allowed { .. }));
        assert_eq!(w.fake.take(), ["membership"]);
        assert_eq!(w.fake.take_statements(), expected);
    }
}

/// An app subject's installation is read on every decision, whatever the
/// target: a hidden task or conversation costs an app what a missing one
/// does, with its installation and the membership cold or cached, and
/// whether the installation is active or suspended.
#[tokio::test]
async fn an_app_s_installation_read_costs_hidden_and_missing_alike() {
    use crate::domain::installation::{InstallationFacts, InstallationState, Scope, ScopeSet};
    for state in [InstallationState::Active, InstallationState::Suspended] {
        let mut w = world();
        let app = Uuid::new_v4();
        let facts = InstallationFacts {
            state,
            scopes: ScopeSet::of(Scope::ALL),
        };
        w.fake.installations.insert(app, facts);
        let cases = [
            (
                Action::TaskRead,
                Target::task(w.task),
                Target::task(Uuid::new_v4()),
            ),
            (
                Action::MessageCreate,
                Target::conversation(w.conversation),
                Target::conversation(Uuid::new_v4()),
            ),
        ];
        for (action, hidden, missing) in cases {
            for warm in [false, true] {
                let mut cost = Vec::new();
                for target in [&hidden, &missing] {
                    let cached = if warm { vec![app] } else { vec![] };
                    *w.fake.cached_installations.lock().unwrap() = cached.into_iter().collect();
                    let warm_conversation = if warm { vec![w.conversation] } else { vec![] };
                    *w.fake.cached.lock().unwrap() = warm_conversation.into_iter().collect();
                    cost.push(
                        statements_as(&w, app, PrincipalKind::App, action, target.clone()).await,
                    );
                }
                assert!(cost[1] > 0, "{action}: no statement");
                assert_eq!(
                    cost[0], cost[1],
                    "{action} {state:?} warm {warm}: hidden vs missing"
                );
            }
        }
    }
}

/// A command in a place the caller cannot read, owned by an installed app
/// (its installation cached or not), costs what an unknown command costs:
/// the owner's installation is read from the store either way.
#[tokio::test]
async fn a_hidden_command_costs_the_statements_of_an_unknown_one() {
    use crate::domain::installation::{InstallationFacts, InstallationState, Scope, ScopeSet};
    let mut w = world();
    let app = w.fake.tasks[&w.task].app_id;
    let command = Uuid::new_v4();
    w.fake.commands.insert(
        command,
        crate::store::CommandRecord {
            id: command,
            owner_id: app,
            name: "vote".into(),
            description: "Vote".into(),
            required_level: crate::domain::authz::Level::Read,
            options: Vec::new(),
            source: crate::store::CommandSource::Manifest,
            conversation_id: None,
            version: 1,
            created_at: 0,
            updated_at: 0,
        },
    );
    w.fake.installations.insert(
        app,
        InstallationFacts {
            state: InstallationState::Active,
            scopes: ScopeSet::of([Scope::CommandsWrite]),
        },
    );
    w.fake.cached_installations.lock().unwrap().insert(app);
    for action in [Action::CommandInvoke, Action::CommandAutocomplete] {
        let hidden = Target::command(command, w.conversation);
        let missing = Target::command(Uuid::new_v4(), w.conversation);
        same_cost(&w, action, w.conversation, hidden, missing).await;
    }
}

/// A card in a place the caller cannot read, by an installed app whose
/// installation is cached, costs what a missing card costs, for a press by
/// an agent and for another app's update, with the caller's place and
/// installation cold or warm: the author's installation is read from the
/// store either way (a missing card reads the nil app's).
#[tokio::test]
async fn a_hidden_card_costs_the_statements_of_a_missing_one() {
    use crate::domain::authz::Level;
    use crate::domain::component::{Card, CardUse, Component, ComponentKind, ComponentState};
    use crate::domain::installation::{InstallationFacts, InstallationState, Scope, ScopeSet};
    let mut w = world();
    let (author, other) = (w.fake.tasks[&w.task].app_id, Uuid::new_v4());
    let (card, component) = (Uuid::new_v4(), Uuid::new_v4());
    let mut message = w.fake.messages[&w.message].clone();
    message.id = card;
    message.sender_id = author;
    message.origin = Origin::App;
    message.card = Some(Card {
        version: 1,
        card_use: CardUse::Once,
        components: vec![Component {
            component_id: component,
            custom_id: "yes".into(),
            kind: ComponentKind::Button,
            definition: Default::default(),
            trigger: Level::Write,
            required_capability: None,
            restricted_to: None,
            state: ComponentState::Active,
            expires_at: "2999-01-01T00:00:00.000Z".into(),
        }],
    });
    w.fake.messages.insert(card, message);
    let active = InstallationFacts {
        state: InstallationState::Active,
        scopes: ScopeSet::of(Scope::ALL),
    };
    w.fake.installations.insert(author, active);
    w.fake.installations.insert(other, active);
    let hidden = Target::component(card, component);
    let missing = Target::component(Uuid::new_v4(), Uuid::new_v4());
    let cases = [
        (w.me, PrincipalKind::Agent, Action::InteractionCreate),
        (other, PrincipalKind::App, Action::ComponentUpdate),
    ];
    for (me, kind, action) in cases {
        for warm in [false, true] {
            let mut cost = Vec::new();
            for target in [&hidden, &missing] {
                let cached = if warm { vec![author, other] } else { vec![] };
                *w.fake.cached_installations.lock().unwrap() = cached.into_iter().collect();
                let conversations = if warm { vec![w.conversation] } else { vec![] };
                *w.fake.cached.lock().unwrap() = conversations.into_iter().collect();
                cost.push(statements_as(&w, me, kind, action, target.clone()).await);
            }
            assert!(cost[1] > 0, "{action}: no statement");
            assert_eq!(cost[0], cost[1], "{action} warm {warm}: hidden vs missing");
        }
    }
}
