//! The people half of the identity store (ADR 0020 §1, §5), on SQLite and
//! a throwaway PostgreSQL: persons, disabling, agents' owners, what an
//! owner lists and the kinds of named principals.

use switchboard::domain::PrincipalKind;
use switchboard::store::{DynStore, OwnedKey, StoreError};
use uuid::Uuid;

use crate::store_contract::{contract, new_key, postgres, principal, sqlite, werewolf};

contract!(
    people_are_stored_as_people,
    disabling_a_person_revokes_every_key_once,
    only_an_agent_has_an_owner_and_only_a_person_owns,
    owners_list_their_agents_with_their_keys,
    principal_kinds_read_kind_and_activity_at_once,
    an_owned_agent_is_stored_with_its_owner_or_not_at_all,
    a_disable_without_keys_is_seen_and_its_keys_never_looked_up,
    an_owner_revokes_only_while_it_owns,
);

/// A person with one key, stored; returns its id and key id.
async fn person(store: &DynStore, name: &str) -> (Uuid, String) {
    let p = principal(PrincipalKind::Person, name);
    let (_, key) = new_key(PrincipalKind::Person);
    store.create_person(&p, &key, None).await.unwrap();
    (p.id, key.key_id)
}

async fn agent(store: &DynStore, name: &str) -> (Uuid, String) {
    let p = principal(PrincipalKind::Agent, name);
    let (_, key) = new_key(PrincipalKind::Agent);
    store.create_agent(&p, &key, None).await.unwrap();
    (p.id, key.key_id)
}

async fn app(store: &DynStore) -> Uuid {
    let p = principal(PrincipalKind::App, "Werewolf");
    let (_, key) = new_key(PrincipalKind::App);
    store
        .create_app(&p, &werewolf(), &key, None, None)
        .await
        .unwrap();
    p.id
}

fn conflict<T: std::fmt::Debug>(result: Result<T, StoreError>, says: &str) {
    match result {
        Err(StoreError::Conflict(m)) => assert!(m.contains(says), "{m}"),
        other => panic!("expected a conflict saying {says:?}, got {other:?}"),
    }
}

async fn people_are_stored_as_people(store: DynStore) {
    let mut p = principal(PrincipalKind::Person, "Alex");
    p.description = Some("on call ✓".into());
    let (_, key) = new_key(PrincipalKind::Person);
    store.create_person(&p, &key, None).await.unwrap();
    let got = store.principal(p.id).await.unwrap().unwrap();
    assert_eq!(got.kind, PrincipalKind::Person);
    assert_eq!(got.name, "Alex");
    assert_eq!(got.description.as_deref(), Some("on call ✓"));
    assert_eq!((got.owner_id, got.disabled_at), (None, None));
    let k = store.key(&key.key_id).await.unwrap().unwrap();
    assert_eq!((k.principal_id, k.kind), (p.id, PrincipalKind::Person));
    let not_a_person = principal(PrincipalKind::Agent, "sneaky");
    let (_, other) = new_key(PrincipalKind::Agent);
    conflict(
        store.create_person(&not_a_person, &other, None).await,
        "takes a person",
    );
    assert!(store.principal(not_a_person.id).await.unwrap().is_none());
}

async fn disabling_a_person_revokes_every_key_once(store: DynStore) {
    let (id, first) = person(&store, "Sam").await;
    let (_, second) = new_key(PrincipalKind::Person);
    store.rotate_keys(id, &second, 10, None).await.unwrap();
    let (_, third) = new_key(PrincipalKind::Person);
    store.rotate_keys(id, &third, 11, None).await.unwrap();
    let (bystander, bystander_key) = agent(&store, "bystander").await;
    let revoked = store.disable_person(id, 20).await.unwrap();
    assert_eq!(revoked, vec![third.key_id.clone()], "only the active key");
    let got = store.principal(id).await.unwrap().unwrap();
    assert_eq!(got.disabled_at, Some(20));
    let mut revocations = store.keys_revoked_since(0).await.unwrap();
    revocations.sort_by_key(|(_, _, at)| *at);
    let expected: Vec<_> = [(&first, 10), (&second.key_id, 11), (&third.key_id, 20)]
        .into_iter()
        .map(|(key, at)| (id, key.clone(), at))
        .collect();
    assert_eq!(revocations, expected);
    for key in [&first, &second.key_id, &third.key_id] {
        assert!(
            store.key(key).await.unwrap().is_none(),
            "a disabled person's key is not looked up: {key}"
        );
    }
    assert_eq!(
        store.principals_disabled_since(20).await.unwrap(),
        vec![(id, 20)]
    );
    assert!(store
        .principals_disabled_since(21)
        .await
        .unwrap()
        .is_empty());
    assert!(store.disable_person(id, 30).await.unwrap().is_empty());
    let (_, fourth) = new_key(PrincipalKind::Person);
    conflict(
        store.rotate_keys(id, &fourth, 31, None).await,
        "is disabled",
    );
    assert!(
        store.key(&fourth.key_id).await.unwrap().is_none(),
        "no key back"
    );
    let again = store.principal(id).await.unwrap().unwrap();
    assert_eq!(again.disabled_at, Some(20), "the first time is kept");
    conflict(store.disable_person(bystander, 40).await, "not a person");
    assert!(matches!(
        store.disable_person(Uuid::new_v4(), 40).await,
        Err(StoreError::NotFound)
    ));
    let b = store.principal(bystander).await.unwrap().unwrap();
    assert_eq!(b.disabled_at, None, "a refused disable writes nothing");
    let k = store.key(&bystander_key).await.unwrap().unwrap();
    assert_eq!(k.revoked_at, None);
}

async fn only_an_agent_has_an_owner_and_only_a_person_owns(store: DynStore) {
    let (owner, _) = person(&store, "Alex").await;
    let (other_person, _) = person(&store, "Robin").await;
    let (disabled, _) = person(&store, "Gone").await;
    store.disable_person(disabled, 5).await.unwrap();
    let (a, _) = agent(&store, "worker").await;
    let (b, _) = agent(&store, "peer").await;
    let app = app(&store).await;
    store.set_owner(a, Some(owner)).await.unwrap();
    assert_eq!(
        store.principal(a).await.unwrap().unwrap().owner_id,
        Some(owner)
    );
    for refused in [b, app, disabled, Uuid::new_v4()] {
        conflict(
            store.set_owner(a, Some(refused)).await,
            "not an active person",
        );
    }
    for not_agent in [app, other_person] {
        conflict(
            store.set_owner(not_agent, Some(owner)).await,
            "only agents have owners",
        );
        let got = store.principal(not_agent).await.unwrap().unwrap();
        assert_eq!(got.owner_id, None);
    }
    assert!(matches!(
        store.set_owner(Uuid::new_v4(), Some(owner)).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        store.principal(a).await.unwrap().unwrap().owner_id,
        Some(owner),
        "refusals leave the owner as it was"
    );
    store.set_owner(a, Some(other_person)).await.unwrap();
    assert_eq!(
        store.principal(a).await.unwrap().unwrap().owner_id,
        Some(other_person)
    );
    store.set_owner(a, None).await.unwrap();
    assert_eq!(store.principal(a).await.unwrap().unwrap().owner_id, None);
}

async fn owners_list_their_agents_with_their_keys(store: DynStore) {
    let (alex, _) = person(&store, "Alex").await;
    let (sam, _) = person(&store, "Sam").await;
    let (first, first_key) = agent(&store, "first").await;
    let (second, second_key) = agent(&store, "second").await;
    let (sams, _) = agent(&store, "sams").await;
    let (unowned, _) = agent(&store, "unowned").await;
    for (a, o) in [(first, alex), (second, alex), (sams, sam)] {
        store.set_owner(a, Some(o)).await.unwrap();
    }
    let (_, rotated) = new_key(PrincipalKind::Agent);
    // After creation (the helpers' created_at), so creation order is time order.
    let rotated_at = 1_700_000_000_500;
    store
        .rotate_keys(first, &rotated, rotated_at, None)
        .await
        .unwrap();
    let owned = store.owned_agents(alex).await.unwrap();
    let mut expected = [
        (
            first,
            "first",
            vec![(first_key, Some(rotated_at)), (rotated.key_id, None)],
        ),
        (second, "second", vec![(second_key, None)]),
    ];
    expected.sort_by_key(|(id, _, _)| *id);
    assert_eq!(owned.len(), 2, "{owned:?}");
    for (got, (id, name, keys)) in owned.iter().zip(&expected) {
        assert_eq!((got.agent_id, got.name.as_str()), (*id, *name));
        let got_keys: Vec<(String, Option<i64>)> = got
            .keys
            .iter()
            .map(|k: &OwnedKey| (k.key_id.clone(), k.revoked_at))
            .collect();
        assert_eq!(&got_keys, keys, "{name}'s keys, oldest first");
        let created = store.principal(*id).await.unwrap().unwrap().created_at;
        assert_eq!(got.created_at, created);
    }
    assert_eq!(owned[0].keys.len() + owned[1].keys.len(), 3);
    let sams_list = store.owned_agents(sam).await.unwrap();
    assert_eq!(
        sams_list.iter().map(|a| a.agent_id).collect::<Vec<_>>(),
        vec![sams]
    );
    store.set_owner(second, None).await.unwrap();
    let after: Vec<Uuid> = store
        .owned_agents(alex)
        .await
        .unwrap()
        .iter()
        .map(|a| a.agent_id)
        .collect();
    assert_eq!(after, vec![first], "the released agent is no longer listed");
    assert!(!after.contains(&unowned));
    assert!(store.owned_agents(Uuid::new_v4()).await.unwrap().is_empty());
}

async fn principal_kinds_read_kind_and_activity_at_once(store: DynStore) {
    let (active, _) = person(&store, "Alex").await;
    let (disabled, _) = person(&store, "Gone").await;
    store.disable_person(disabled, 5).await.unwrap();
    let (a, _) = agent(&store, "worker").await;
    let app = app(&store).await;
    let unknown = Uuid::new_v4();
    let kinds = store
        .principal_kinds(&[app, unknown, disabled, a, active, app])
        .await
        .unwrap();
    assert_eq!(
        kinds,
        vec![
            (app, PrincipalKind::App, true),
            (disabled, PrincipalKind::Person, false),
            (a, PrincipalKind::Agent, true),
            (active, PrincipalKind::Person, true),
        ],
        "existing ids once each, in the order asked"
    );
    assert!(store.principal_kinds(&[]).await.unwrap().is_empty());
    assert!(store.principal_kinds(&[unknown]).await.unwrap().is_empty());
}

/// `create_owned_agent` writes the agent, its key and its owner in one
/// transaction; an owner that is no active person leaves nothing behind,
/// not even the idempotency record.
async fn an_owned_agent_is_stored_with_its_owner_or_not_at_all(store: DynStore) {
    let (owner, _) = person(&store, "Alex").await;
    let helper = principal(PrincipalKind::Agent, "helper");
    let (_, key) = new_key(PrincipalKind::Agent);
    store
        .create_owned_agent(&helper, &key, owner, None)
        .await
        .unwrap();
    let got = store.principal(helper.id).await.unwrap().unwrap();
    assert_eq!(got.owner_id, Some(owner));
    assert_eq!(
        store.owned_agents(owner).await.unwrap()[0].agent_id,
        helper.id
    );

    let (disabled, _) = person(&store, "Sam").await;
    store.disable_person(disabled, 5).await.unwrap();
    let (other_agent, _) = agent(&store, "someone").await;
    for refused in [Uuid::new_v4(), disabled, other_agent, app(&store).await] {
        let orphan = principal(PrincipalKind::Agent, "orphan");
        let (_, key) = new_key(PrincipalKind::Agent);
        let idem = switchboard::store::IdempotencyRecord {
            scope: "test".into(),
            key: orphan.id.to_string(),
            result: switchboard::store::IdempotentResponse {
                request_hash: "h".into(),
                status: 201,
                response: "{}".into(),
            },
        };
        // NotFound, so a key id taken (a Conflict) is never mistaken for it.
        assert!(matches!(
            store
                .create_owned_agent(&orphan, &key, refused, Some(&idem))
                .await,
            Err(StoreError::NotFound)
        ));
        assert!(store.principal(orphan.id).await.unwrap().is_none());
        assert!(store.key(&key.key_id).await.unwrap().is_none());
        let replay = store
            .idempotent_response("test", &orphan.id.to_string())
            .await;
        assert!(replay.unwrap().is_none());
    }
}

/// A person whose only key was revoked before it was disabled: the disable
/// revokes no key row, yet the revocation sweep's read sees it (ADR 0020
/// §1), and the key lookup authentication uses answers nothing for it.
async fn a_disable_without_keys_is_seen_and_its_keys_never_looked_up(store: DynStore) {
    let (id, key) = person(&store, "Sam").await;
    let (bystander, bystander_key) = person(&store, "Robin").await;
    assert_eq!(store.revoke_keys(id, 10).await.unwrap(), vec![key.clone()]);
    assert!(store.principals_disabled_since(0).await.unwrap().is_empty());
    assert!(store.disable_person(id, 20).await.unwrap().is_empty());
    assert_eq!(
        store.principals_disabled_since(15).await.unwrap(),
        vec![(id, 20)]
    );
    assert!(store.key(&key).await.unwrap().is_none());
    let other = store.key(&bystander_key).await.unwrap().unwrap();
    assert_eq!((other.principal_id, other.revoked_at), (bystander, None));
}

/// The owner's revoke holds only while the owner does: after the agent
/// moved, the former owner revokes nothing and learns only `None`.
async fn an_owner_revokes_only_while_it_owns(store: DynStore) {
    let (first, _) = person(&store, "Alex").await;
    let (second, _) = person(&store, "Robin").await;
    let (a, key) = agent(&store, "worker").await;
    store.set_owner(a, Some(first)).await.unwrap();
    store.set_owner(a, Some(second)).await.unwrap();
    assert_eq!(store.revoke_owned_keys(a, first, 10).await.unwrap(), None);
    let k = store.key(&key).await.unwrap().unwrap();
    assert_eq!(k.revoked_at, None, "a former owner revokes nothing");
    for stranger in [Uuid::new_v4(), second] {
        assert_eq!(
            store
                .revoke_owned_keys(Uuid::new_v4(), stranger, 10)
                .await
                .unwrap(),
            None,
            "an unknown agent is nobody's"
        );
    }
    assert_eq!(
        store.revoke_owned_keys(a, second, 11).await.unwrap(),
        Some(vec![key.clone()])
    );
    assert_eq!(store.key(&key).await.unwrap().unwrap().revoked_at, Some(11));
    assert_eq!(
        store.revoke_owned_keys(a, second, 12).await.unwrap(),
        Some(vec![]),
        "nothing left to revoke"
    );
}
