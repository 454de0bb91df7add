//! The apps' persona and profile in the store, on both backends (ADR 0031
//! §6): each column written alone, a reset persona back to none, and the
//! profiles of a set of ids (only the apps that set one).

use switchboard::store::{AppProfile, DynStore};
use uuid::Uuid;

use crate::store_contract::{agent_in, app_in, contract, postgres, sqlite};

async fn persona_and_profile_are_kept_apart(store: DynStore) {
    let (app, other) = (app_in(&store).await, app_in(&store).await);
    assert_eq!(store.app_profile(app).await.unwrap(), AppProfile::default());
    store
        .set_app_persona(app, Some("a dealer"), 1)
        .await
        .unwrap();
    store
        .set_app_profile(app, r#"{"name":"Dealer"}"#, 2)
        .await
        .unwrap();
    assert_eq!(
        store.app_profile(app).await.unwrap(),
        AppProfile {
            persona: Some("a dealer".into()),
            profile: Some(r#"{"name":"Dealer"}"#.into())
        },
        "the profile's write keeps the persona"
    );
    store.set_app_persona(app, None, 3).await.unwrap();
    assert_eq!(
        store.app_profile(app).await.unwrap(),
        AppProfile {
            persona: None,
            profile: Some(r#"{"name":"Dealer"}"#.into())
        },
        "a reset persona keeps the profile"
    );
    store.set_app_persona(other, Some("x"), 4).await.unwrap();
    let agent = agent_in(&store, "a").await;
    let got = store
        .app_profiles(&[agent, other, app, Uuid::new_v4()])
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "only the apps that set a profile: {got:?}");
    assert_eq!(got[&app], r#"{"name":"Dealer"}"#);
    assert!(store.app_profiles(&[]).await.unwrap().is_empty());
}

contract!(persona_and_profile_are_kept_apart);
