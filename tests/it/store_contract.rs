//! One contract for every store backend, run against SQLite and a throwaway
//! PostgreSQL in the same test run.

use switchboard::config::Config;
use switchboard::domain::keys;
use switchboard::domain::manifest::{self, ManifestBounds};
use switchboard::domain::PrincipalKind;
use switchboard::store::{DynStore, NewKey, NewPrincipal, StoreError};
use uuid::Uuid;

use crate::support::{pg, werewolf_manifest};

async fn sqlite() -> (DynStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.server.data_dir = dir.path().join("nested").join("data");
    (switchboard::store::open(&config).await.unwrap(), dir)
}

async fn postgres() -> (DynStore, ()) {
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

contract!(
    agents_round_trip,
    apps_keep_their_manifest,
    rotation_revokes_and_replaces,
    revocation_and_unknown_principals,
    duplicate_key_ids_conflict,
    migrations_are_idempotent_and_keep_the_epoch,
);

fn principal(kind: PrincipalKind, name: &str) -> NewPrincipal {
    NewPrincipal {
        id: Uuid::new_v4(),
        kind,
        name: name.into(),
        description: None,
        created_at: 1_700_000_000_123,
    }
}

fn new_key(kind: PrincipalKind) -> (keys::MintedKey, NewKey) {
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
    let bounds = ManifestBounds {
        min_hook_timeout_ms: 10,
        max_hook_timeout_ms: 60_000,
        max_participants: 100,
        max_conversations: 8,
    };
    let m = manifest::validate(&werewolf_manifest(), &bounds).unwrap();
    let p = principal(PrincipalKind::App, "Werewolf");
    let (_, key) = new_key(PrincipalKind::App);
    store.create_app(&p, &m, &key, None).await.unwrap();
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
