//! One contract for every store backend, run against SQLite and a throwaway
//! PostgreSQL in the same test run.

use switchboard::config::Config;
use switchboard::domain::keys;
use switchboard::domain::manifest;
use switchboard::domain::PrincipalKind;
use switchboard::store::{DynStore, NewKey, NewPrincipal, StoreError};
use uuid::Uuid;

use crate::support::{pg, werewolf_manifest};

pub(crate) async fn sqlite() -> (DynStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.server.data_dir = dir.path().join("nested").join("data");
    (switchboard::store::open(&config).await.unwrap(), dir)
}

pub(crate) async fn postgres() -> (DynStore, ()) {
    let mut config = Config::default();
    config.storage.database_url = pg::fresh_database().await;
    config.storage.max_connections = 4;
    (switchboard::store::open(&config).await.unwrap(), ())
}

macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $case() { let (s, _g) = super::sqlite().await; super::$case(s).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $case() { let (s, _g) = super::postgres().await; super::$case(s).await; })*
        }
    };
}
pub(crate) use contract;

contract!(
    agents_round_trip,
    apps_keep_their_manifest,
    rotation_revokes_and_replaces,
    revocation_and_unknown_principals,
    duplicate_key_ids_conflict,
    migrations_are_idempotent_and_keep_the_epoch,
    events_get_gap_free_seqs_per_audience,
    acks_and_retention,
    jobs_are_claimed_once,
    one_live_lease_per_recipient_and_message,
    cards_keep_their_author,
);

pub(crate) fn principal(kind: PrincipalKind, name: &str) -> NewPrincipal {
    NewPrincipal {
        id: Uuid::new_v4(),
        kind,
        name: name.into(),
        description: None,
        created_at: 1_700_000_000_123,
    }
}

pub(crate) fn new_key(kind: PrincipalKind) -> (keys::MintedKey, NewKey) {
    let k = keys::mint(kind);
    let n = NewKey {
        key_id: k.key_id.clone(),
        secret_hash: k.secret_hash,
    };
    (k, n)
}

async fn agents_round_trip(store: DynStore) {
    let mut p = principal(PrincipalKind::Agent, "alice");
    p.description = Some("üñíçødé ✓".into());
    let (minted, key) = new_key(PrincipalKind::Agent);
    store.create_agent(&p, &key, None).await.unwrap();
    let got = store.principal(p.id).await.unwrap().unwrap();
    assert_eq!(got.name, "alice");
    assert_eq!(got.kind, PrincipalKind::Agent);
    assert_eq!(got.description.as_deref(), Some("üñíçødé ✓"));
    assert_eq!(got.created_at, 1_700_000_000_123);
    let k = store.key(&key.key_id).await.unwrap().unwrap();
    assert_eq!(k.principal_id, p.id);
    assert_eq!(k.kind, PrincipalKind::Agent);
    assert!(k.revoked_at.is_none());
    assert!(keys::verify(
        &keys::parse(&minted.plaintext).unwrap(),
        Some(&k.secret_hash)
    ));
    assert!(
        store.app(p.id).await.unwrap().is_none(),
        "an agent is not an app"
    );
    assert!(store.principal(Uuid::new_v4()).await.unwrap().is_none());
    assert!(store.key("0000000000000000").await.unwrap().is_none());
}

async fn apps_keep_their_manifest(store: DynStore) {
    let m = werewolf();
    let p = principal(PrincipalKind::App, "Werewolf");
    let (_, key) = new_key(PrincipalKind::App);
    store.create_app(&p, &m, &key, None, None).await.unwrap();
    let app = store.app(p.id).await.unwrap().unwrap();
    assert_eq!(app.manifest, m);
    assert_eq!(app.principal.kind, PrincipalKind::App);
    assert_eq!(
        store.key(&key.key_id).await.unwrap().unwrap().kind,
        PrincipalKind::App
    );
}

async fn rotation_revokes_and_replaces(store: DynStore) {
    let p = principal(PrincipalKind::Agent, "rotor");
    let (_, first) = new_key(PrincipalKind::Agent);
    store.create_agent(&p, &first, None).await.unwrap();
    let (_, second) = new_key(PrincipalKind::Agent);
    let revoked = store
        .rotate_keys(p.id, &second, 42, Some(&first.key_id))
        .await
        .unwrap();
    assert_eq!(revoked, vec![first.key_id.clone()]);
    assert_eq!(
        store.key(&first.key_id).await.unwrap().unwrap().revoked_at,
        Some(42)
    );
    assert!(store
        .key(&second.key_id)
        .await
        .unwrap()
        .unwrap()
        .revoked_at
        .is_none());
    let (_, third) = new_key(PrincipalKind::Agent);
    let revoked = store.rotate_keys(p.id, &third, 43, None).await.unwrap();
    assert_eq!(
        revoked,
        vec![second.key_id.clone()],
        "already revoked keys stay as they were"
    );
    assert_eq!(
        store.key(&first.key_id).await.unwrap().unwrap().revoked_at,
        Some(42)
    );
}

async fn revocation_and_unknown_principals(store: DynStore) {
    let p = principal(PrincipalKind::Agent, "gone");
    let (_, key) = new_key(PrincipalKind::Agent);
    store.create_agent(&p, &key, None).await.unwrap();
    assert_eq!(
        store.revoke_keys(p.id, 7).await.unwrap(),
        vec![key.key_id.clone()]
    );
    assert!(store.revoke_keys(p.id, 8).await.unwrap().is_empty());
    assert_eq!(
        store.key(&key.key_id).await.unwrap().unwrap().revoked_at,
        Some(7)
    );
    let revoked = store.keys_revoked_since(7).await.unwrap();
    assert!(
        revoked.contains(&(p.id, key.key_id.clone(), 7)),
        "{revoked:?}"
    );
    assert!(!store
        .keys_revoked_since(8)
        .await
        .unwrap()
        .iter()
        .any(|(_, k, _)| *k == key.key_id));
    let (_, other) = new_key(PrincipalKind::Agent);
    assert!(matches!(
        store.rotate_keys(Uuid::new_v4(), &other, 9, None).await,
        Err(StoreError::NotFound)
    ));
    assert!(
        store.key(&other.key_id).await.unwrap().is_none(),
        "a failed rotation writes nothing"
    );
}

async fn duplicate_key_ids_conflict(store: DynStore) {
    let (_, key) = new_key(PrincipalKind::Agent);
    store
        .create_agent(&principal(PrincipalKind::Agent, "a"), &key, None)
        .await
        .unwrap();
    let second = principal(PrincipalKind::Agent, "b");
    let err = store.create_agent(&second, &key, None).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    assert!(
        store.principal(second.id).await.unwrap().is_none(),
        "the transaction rolled back"
    );
}

async fn migrations_are_idempotent_and_keep_the_epoch(store: DynStore) {
    let epoch = store.sync_epoch().await.unwrap();
    assert!(!epoch.is_empty());
    store.migrate().await.unwrap();
    assert_eq!(store.sync_epoch().await.unwrap(), epoch);
    store.ping().await.unwrap();
}

/// The werewolf manifest, validated.
pub(crate) fn werewolf() -> switchboard::domain::manifest::Manifest {
    let bounds = switchboard::config::Config::default().manifest_bounds();
    manifest::validate(&werewolf_manifest(), &bounds).unwrap()
}

/// An app with the werewolf manifest, installed (its tasks' verdicts need
/// an active installation, ADR 0023 §7).
pub(crate) async fn app_in(store: &DynStore) -> Uuid {
    let m = werewolf();
    let app = principal(PrincipalKind::App, "app");
    let (_, key) = new_key(PrincipalKind::App);
    let install = switchboard::store::RegistrationInstall::new(
        app.id,
        &m,
        switchboard::domain::installation::Actor::Operator,
        1,
    );
    store
        .create_app(&app, &m, &key, Some(&install), None)
        .await
        .unwrap();
    app.id
}

pub(crate) async fn agent_in(store: &DynStore, name: &str) -> Uuid {
    let p = principal(PrincipalKind::Agent, name);
    let (_, key) = new_key(PrincipalKind::Agent);
    store.create_agent(&p, &key, None).await.unwrap();
    p.id
}

pub(crate) async fn group_of(store: &DynStore, members: &[Uuid]) -> Uuid {
    use switchboard::domain::conversation::ConversationKind;
    use switchboard::store::{CreatedConversation, NewConversation};
    let c = NewConversation {
        id: Uuid::now_v7(),
        kind: ConversationKind::Group,
        name: None,
        task_id: None,
        direct_key: None,
        template_key: None,
        created_by: members[0],
        participants: members.to_vec(),
        created_at: 5,
    };
    match store.create_conversation(&c, &[]).await.unwrap() {
        CreatedConversation::Created(conv, _) => conv.id,
        CreatedConversation::Existing(_) => panic!("new group"),
    }
}

/// A plain agent's message to `recipients`, forwarded at once, no jobs.
pub(crate) fn new_send(
    conversation: Uuid,
    sender: Uuid,
    recipients: &[Uuid],
) -> switchboard::store::NewMessage {
    use switchboard::domain::message::{Origin, Part};
    use switchboard::store::{Fanout, NewMessage};
    NewMessage {
        id: Uuid::now_v7(),
        conversation_id: conversation,
        sender_id: sender,
        origin: Origin::Agent,
        parts: vec![Part::Text { text: "hi".into() }],
        reply_to: None,
        thread_id: None,
        in_channel: false,
        client_msg_id: None,
        request_hash: None,
        created_at: 10,
        fanout: Fanout::Forward {
            recipients: recipients.to_vec(),
            event_type: "agent/message/received",
            people: switchboard::store::PersonCopies::NONE,
            apps: switchboard::store::AppCopies::NONE,
        },
        jobs: Vec::new(),
        card: None,
        reply_to_interaction: None,
    }
}

pub(crate) async fn send_to(
    store: &DynStore,
    conversation: Uuid,
    sender: Uuid,
    recipients: &[Uuid],
) -> Vec<switchboard::domain::event::StoredEvent> {
    use switchboard::store::InsertedMessage;
    let m = new_send(conversation, sender, recipients);
    match store.insert_message(&m).await.unwrap() {
        InsertedMessage::Inserted { events, .. } => events,
        InsertedMessage::Duplicate { .. } => panic!("new message"),
    }
}

async fn events_get_gap_free_seqs_per_audience(store: DynStore) {
    let a = agent_in(&store, "a").await;
    let b = agent_in(&store, "b").await;
    let c = agent_in(&store, "c").await;
    let group = group_of(&store, &[a, b, c]).await;
    // Concurrent writers to overlapping audiences in opposite orders.
    let mut writers = Vec::new();
    for i in 0..20 {
        let store = store.clone();
        let recipients = if i % 2 == 0 { vec![b, c] } else { vec![c, b] };
        writers.push(tokio::spawn(async move {
            send_to(&store, group, a, &recipients).await
        }));
    }
    for w in writers {
        assert_eq!(w.await.unwrap().len(), 2);
    }
    for audience in [b, c] {
        let events = store.events_after(audience, 0, 1000).await.unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=20).collect::<Vec<_>>(), "gap-free per audience");
        assert!(events.iter().all(|e| e.audience == audience));
        let page = store.events_after(audience, 15, 3).await.unwrap();
        assert_eq!(
            page.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![16, 17, 18]
        );
    }
    assert!(
        store.events_after(a, 0, 10).await.unwrap().is_empty(),
        "the sender is no recipient"
    );
}

async fn acks_and_retention(store: DynStore) {
    let a = agent_in(&store, "a").await;
    let b = agent_in(&store, "b").await;
    let group = group_of(&store, &[a, b]).await;
    for _ in 0..10 {
        send_to(&store, group, a, &[b]).await;
    }
    assert_eq!(store.ack_events(b, 4).await.unwrap(), 4);
    assert_eq!(store.ack_events(b, 2).await.unwrap(), 4, "never moves back");
    assert!(matches!(
        store.ack_events(b, 11).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.ack_events(a, 0).await.unwrap(), 0);
    let pos = store.stream_position(b).await.unwrap();
    assert_eq!((pos.last_seq, pos.acked_seq, pos.oldest_seq), (10, 4, 1));
    // Keep the newest 3; nothing is old enough by time.
    assert_eq!(store.prune_events(0, 3).await.unwrap(), 7);
    let pos = store.stream_position(b).await.unwrap();
    assert_eq!((pos.last_seq, pos.oldest_seq), (10, 8));
    assert!(!pos.can_serve_after(6));
    assert!(pos.can_serve_after(7));
    // Everything older than now goes.
    store.prune_events(i64::MAX, 1_000_000).await.unwrap();
    let pos = store.stream_position(b).await.unwrap();
    assert_eq!(
        (pos.last_seq, pos.oldest_seq),
        (10, 11),
        "seq numbering survives pruning"
    );
}

async fn jobs_are_claimed_once(store: DynStore) {
    use switchboard::domain::task::{TaskParticipant, TaskRole};
    use switchboard::store::{JobKind, NewJob, NewTask};
    let app = app_in(&store).await;
    let a = agent_in(&store, "a").await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let task = NewTask {
            id: Uuid::now_v7(),
            app_id: app,
            initiator_id: a,
            participants: vec![TaskParticipant {
                agent_id: a,
                role: TaskRole::Initiator,
            }],
            initial_conversation: None,
            created_at: 1,
        };
        let job = NewJob::new(JobKind::TaskCreate, task.id, 100 + i);
        store.create_task(&task, &job).await.unwrap();
        ids.push(job.id);
    }
    // Not due yet: nothing to claim.
    assert!(store
        .claim_due_jobs(50, 1_000, 10)
        .await
        .unwrap()
        .is_empty());
    let first = store.claim_due_jobs(102, 1_000, 10).await.unwrap();
    assert_eq!(first.len(), 3);
    assert!(first
        .iter()
        .all(|j| j.attempts == 1 && j.kind == JobKind::TaskCreate));
    // Locked ones are not claimed again until the lock lapses.
    assert_eq!(store.claim_due_jobs(200, 1_000, 10).await.unwrap().len(), 2);
    assert!(store.claim_job(ids[0], 500, 2_000).await.unwrap().is_none());
    let again = store
        .claim_job(ids[0], 1_001, 2_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.attempts, 2);
    store.retry_job(ids[1], 5_000).await.unwrap();
    assert!(store.release_job_locks().await.unwrap() >= 1);
    assert!(
        store.claim_job(ids[2], 0, 10).await.unwrap().is_some(),
        "released locks are free"
    );
    store.finish_job(ids[3]).await.unwrap();
    assert!(
        store
            .claim_job(ids[3], i64::MAX - 1, i64::MAX)
            .await
            .unwrap()
            .is_none(),
        "finished jobs are gone"
    );

    // A job stored claimed by its writer: the runner leaves it alone while
    // the claim lasts, even once due; a later claim counts as attempt 2.
    let task = NewTask {
        id: Uuid::now_v7(),
        app_id: app,
        initiator_id: a,
        participants: vec![TaskParticipant {
            agent_id: a,
            role: TaskRole::Initiator,
        }],
        initial_conversation: None,
        created_at: 1,
    };
    let job = NewJob::new(JobKind::TaskCreate, task.id, 10).claimed_until(3_000);
    store.create_task(&task, &job).await.unwrap();
    let due = store.claim_due_jobs(2_999, 9_000, 100).await.unwrap();
    assert!(due.iter().all(|j| j.id != job.id), "claimed by its writer");
    let later = store
        .claim_job(job.id, 3_001, 9_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(later.attempts, 2);
}

async fn one_live_lease_per_recipient_and_message(store: DynStore) {
    use switchboard::domain::lease::LeaseState;
    use switchboard::store::{CreatedLease, Effects, JobKind, LeaseChange, NewJob, NewLease};
    let a = agent_in(&store, "a").await;
    let b = agent_in(&store, "b").await;
    let group = group_of(&store, &[a, b]).await;
    let events = send_to(&store, group, a, &[b]).await;
    let message_id: Uuid = events[0].payload.to_value()["message"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(store.is_recipient(message_id, b).await.unwrap());
    assert!(!store.is_recipient(message_id, a).await.unwrap());
    let lease = |id| NewLease {
        id,
        message_id,
        conversation_id: group,
        recipient_id: b,
        created_at: 20,
    };
    let first_id = Uuid::now_v7();
    let created = store
        .create_lease(
            &lease(first_id),
            &NewJob::new(JobKind::DispatchAuthorize, first_id, 30),
        )
        .await
        .unwrap();
    assert!(matches!(created, CreatedLease::Created(ref l) if l.state == LeaseState::Pending));
    let second_id = Uuid::now_v7();
    match store
        .create_lease(
            &lease(second_id),
            &NewJob::new(JobKind::DispatchAuthorize, second_id, 30),
        )
        .await
        .unwrap()
    {
        CreatedLease::Existing(l) => assert_eq!(l.lease_id, first_id),
        CreatedLease::Created(_) => panic!("a second live lease"),
    }
    let change = |from: Vec<LeaseState>, to| LeaseChange {
        lease_id: first_id,
        from,
        to,
        reason: None,
        expires_at: Some(99),
        now: 21,
    };
    let (granted, _) = store
        .transition_lease(
            &change(vec![LeaseState::Pending], LeaseState::Granted),
            &Effects::default(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(granted.state, LeaseState::Granted);
    assert!(
        store
            .transition_lease(
                &change(vec![LeaseState::Pending], LeaseState::Denied),
                &Effects::default()
            )
            .await
            .unwrap()
            .is_none(),
        "only from the expected state"
    );
    store
        .transition_lease(
            &change(vec![LeaseState::Granted], LeaseState::Completed),
            &Effects::default(),
        )
        .await
        .unwrap()
        .unwrap();
    // Once it is final, a new lease may be taken.
    let third_id = Uuid::now_v7();
    let created = store
        .create_lease(
            &lease(third_id),
            &NewJob::new(JobKind::DispatchAuthorize, third_id, 30),
        )
        .await
        .unwrap();
    assert!(matches!(created, CreatedLease::Created(ref l) if l.lease_id == third_id));
}

async fn cards_keep_their_author(store: DynStore) {
    use switchboard::store::CardRecord;
    let card = |version: &str, author: &str, body: &str| CardRecord {
        id: "werewolf".into(),
        version: version.into(),
        author: author.into(),
        primitives: vec!["send_message".into()],
        integrity: [(
            "README.md".to_string(),
            format!("sha256:{}", "a".repeat(64)),
        )]
        .into_iter()
        .collect(),
        card_json: format!("{{\"v\":\"{version}\",\"b\":\"{body}\"}}"),
        installed_at: 1,
    };
    store
        .install_card(&card("1.0.0", "did:key:zA", "x"), false)
        .await
        .unwrap();
    store
        .install_card(&card("1.1.0", "did:key:zA", "x"), false)
        .await
        .unwrap();
    store
        .install_card(&card("1.1.0", "did:key:zA", "x"), false)
        .await
        .unwrap();
    assert!(matches!(
        store
            .install_card(&card("1.1.0", "did:key:zA", "changed"), false)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .install_card(&card("2.0.0", "did:key:zB", "x"), false)
            .await,
        Err(StoreError::Conflict(_))
    ));
    store
        .install_card(&card("2.0.0", "did:key:zB", "x"), true)
        .await
        .unwrap();
    // Now B owns the id: A needs the force in turn.
    assert!(matches!(
        store
            .install_card(&card("2.1.0", "did:key:zA", "x"), false)
            .await,
        Err(StoreError::Conflict(_))
    ));
    let all = store.cards().await.unwrap();
    let versions: Vec<&str> = all.iter().map(|c| c.version.as_str()).collect();
    assert_eq!(versions, vec!["1.0.0", "1.1.0", "2.0.0"]);
    assert_eq!(all[0].integrity.len(), 1);
}
