//! Channels decided on their levels map, and filter mode, on the same
//! fake as the other loaders.

use super::*;

/// A channel's readers are its levels map: a reader reads but may not
/// write below its level (Forbidden, it knows the channel), and a stranger
/// gets the missing channel's answer.
#[tokio::test]
async fn a_channel_is_decided_on_its_levels_map() {
    let mut w = world();
    let (reader, channel) = (Uuid::new_v4(), Uuid::new_v4());
    w.fake.memberships.insert(
        channel,
        Arc::new(Membership {
            id: channel,
            kind: ConversationKind::Channel,
            task_id: None,
            participants: vec![],
            people: Vec::new(),
            disabled: Vec::new(),
            name: Some("general".into()),
            key: None,
            created_by: reader,
            created_at: String::new(),
            channel: Some(ChannelPlace {
                space_id: Uuid::new_v4(),
                state: crate::domain::authz::ChannelState::Open,
                levels: [(reader, (PrincipalKind::Person, Level::Read))]
                    .into_iter()
                    .collect(),
            }),
        }),
    );
    let person = Subject::Principal {
        id: reader,
        kind: PrincipalKind::Person,
        active: true,
    };
    let decide = |action, loading: &Loading| {
        let ctx = Context {
            mode: Mode::Request,
            facts: loading.facts.clone(),
        };
        authorize(&person, action, &loading.resource, &ctx)
    };
    let loading = load(
        &w.fake,
        reader,
        &Target::conversation(channel),
        Source::Cache,
    )
    .await
    .unwrap();
    assert_eq!(decide(Action::ConversationRead, &loading), Decision::Allow);
    let Decision::Deny(d) = decide(Action::MessageCreate, &loading) else {
        panic!("a reader wrote");
    };
    assert_eq!(d.reason, crate::domain::authz::Reason::LevelInsufficient);
    w.fake.take();
    denied(
        both(
            &w,
            Action::ConversationRead,
            Target::conversation(channel),
            Target::conversation(Uuid::new_v4()),
        )
        .await,
    );
}

/// Filter mode keeps what the caller may read and drops the rest; an app
/// whose installation is not active keeps nothing.
#[tokio::test]
async fn filter_drops_what_the_caller_may_not_read() {
    use crate::domain::installation::{InstallationFacts, InstallationState, ScopeSet};
    let me = Uuid::new_v4();
    let app = Uuid::new_v4();
    let tasks = vec![
        (app, vec![me]),
        (app, vec![Uuid::new_v4()]),
        (app, vec![me]),
    ];
    let judge = |(app_id, p): &(Uuid, Vec<Uuid>)| {
        let resource = Resource::Task {
            app_id: *app_id,
            participants: p.clone(),
        };
        (resource, Facts::default())
    };
    let agent = crate::domain::Principal {
        id: me,
        kind: PrincipalKind::Agent,
    };
    let mut fake = Fake::default();
    let kept = super::super::super::filter_on(&fake, agent, Action::TaskRead, tasks.clone(), judge)
        .await
        .unwrap();
    assert_eq!(kept.len(), 2);
    assert!(kept.iter().all(|(_, p)| p == &vec![me]));
    assert!(
        fake.take().is_empty(),
        "an agent's list reads no installation"
    );
    // The tasks' app lists them all while active, none while suspended.
    let app_principal = crate::domain::Principal {
        id: app,
        kind: PrincipalKind::App,
    };
    for (state, expected) in [
        (InstallationState::Active, 3),
        (InstallationState::Suspended, 0),
    ] {
        let facts = InstallationFacts {
            state,
            scopes: ScopeSet::EMPTY,
        };
        fake.installations.insert(app, facts);
        let kept = super::super::super::filter_on(
            &fake,
            app_principal,
            Action::TaskRead,
            tasks.clone(),
            judge,
        )
        .await
        .unwrap();
        assert_eq!(kept.len(), expected, "{state:?}");
    }
}

/// `agent.keys.revoke` by people: the owner is allowed; another person, a
/// random id and a principal that is no agent read the same row and get
/// one denial (the unknown agent's).
#[tokio::test]
async fn another_persons_agent_reads_and_answers_like_a_missing_one() {
    let (owner, stranger, agent, app) = (
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    );
    let record = |id, kind, owner_id| crate::store::PrincipalRecord {
        id,
        kind,
        name: "x".into(),
        description: None,
        created_at: 0,
        owner_id,
        disabled_at: None,
    };
    let mut fake = Fake::default();
    fake.principals
        .insert(agent, record(agent, PrincipalKind::Agent, Some(owner)));
    fake.principals
        .insert(app, record(app, PrincipalKind::App, None));
    let decide = |me: Uuid, id: Uuid| {
        let fake = &fake;
        async move {
            let loading = load(fake, me, &Target::agent(id), Source::Store)
                .await
                .unwrap();
            let subject = Subject::Principal {
                id: me,
                kind: PrincipalKind::Person,
                active: true,
            };
            let ctx = Context {
                mode: Mode::Request,
                facts: loading.facts,
            };
            let decision = authorize(&subject, Action::AgentKeysRevoke, &loading.resource, &ctx);
            (decision, fake.take())
        }
    };
    let (allowed, reads) = decide(owner, agent).await;
    assert_eq!(allowed, Decision::Allow);
    assert_eq!(reads, ["principal"]);
    let hidden = decide(stranger, agent).await;
    assert!(
        matches!(hidden.0, Decision::Deny(d) if d.reason == crate::domain::authz::Reason::NoGrant)
    );
    assert_eq!(decide(stranger, Uuid::new_v4()).await, hidden);
    assert_eq!(decide(owner, app).await, hidden, "an app is no agent");
}

/// A job's subject is read, not assumed: a principal disabled since its
/// request (or gone) is inactive, so every decision refuses it
/// (`principal_inactive`); one still enabled is active.
#[tokio::test]
async fn a_jobs_subject_is_read_as_it_stands_now() {
    let record = |id, disabled_at| crate::store::PrincipalRecord {
        id,
        kind: PrincipalKind::Person,
        name: "sam".into(),
        description: None,
        created_at: 1,
        owner_id: None,
        disabled_at,
    };
    let (enabled, disabled, gone) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let mut fake = Fake::default();
    fake.principals.insert(enabled, record(enabled, None));
    fake.principals.insert(disabled, record(disabled, Some(5)));
    let person = |id| crate::domain::Principal {
        id,
        kind: PrincipalKind::Person,
    };
    let active = |s: Subject| matches!(s, Subject::Principal { active: true, .. });
    assert!(active(
        crate::access::subject_now(&fake, person(enabled))
            .await
            .unwrap()
    ));
    assert!(!active(
        crate::access::subject_now(&fake, person(disabled))
            .await
            .unwrap()
    ));
    assert!(!active(
        crate::access::subject_now(&fake, person(gone))
            .await
            .unwrap()
    ));
    assert_eq!(fake.take(), vec!["principal"; 3]);
}
