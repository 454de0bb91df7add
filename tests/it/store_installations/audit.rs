//! The audit of owner actions (ADR 0023 §5): one row per lifecycle write,
//! in its transaction, paged by id and filtered by app, pruned by time; its
//! stored columns hold closed names, ids, scope names and times, never a
//! manifest's text.

use switchboard::domain::installation::{
    Actor, InstallationState, LifecycleAction, ScopeSet, Transition,
};
use switchboard::store::{ActionFilter, DynStore};

use super::{installed_app, no_events, postgres_store, sqlite_store, CANARY, T};
use crate::store_contract::werewolf;
use crate::support::legacy_db::LegacyDb;

contract_raw!(the_audit_holds_ids_names_and_times_only);

async fn the_audit_holds_ids_names_and_times_only(store: DynStore, raw: LegacyDb) {
    let (app, i) = installed_app(&store).await;
    let op = Actor::Operator;
    store
        .set_scopes(app, ScopeSet::EMPTY, op, T + 1, &no_events)
        .await
        .unwrap();
    store
        .transition(i.id, Transition::Suspend, op, T + 2, &no_events)
        .await
        .unwrap();
    store
        .transition(i.id, Transition::Resume, op, T + 3, &no_events)
        .await
        .unwrap();
    let mut next = werewolf();
    next.description = format!("second {CANARY}");
    store
        .upgrade(app, &next, Actor::App(app), T + 4, &no_events)
        .await
        .unwrap();
    store
        .uninstall(i.id, op, T + 5, &|_| Vec::new())
        .await
        .unwrap();
    let (other, _) = installed_app(&store).await;

    let all = store
        .actions(ActionFilter::default(), None, 100)
        .await
        .unwrap();
    assert_eq!(all.len(), 7);
    let mine = store
        .actions(ActionFilter { app: Some(app) }, None, 100)
        .await
        .unwrap();
    let rows: Vec<_> = mine
        .iter()
        .map(|r| (r.action, r.actor, r.state_before, r.state_after, r.at))
        .collect();
    use InstallationState::*;
    assert_eq!(
        rows,
        [
            (LifecycleAction::Install, op, None, Some(Active), T),
            (
                LifecycleAction::ScopesUpdate,
                op,
                Some(Active),
                Some(Active),
                T + 1
            ),
            (
                LifecycleAction::Suspend,
                op,
                Some(Active),
                Some(Suspended),
                T + 2
            ),
            (
                LifecycleAction::Resume,
                op,
                Some(Suspended),
                Some(Active),
                T + 3
            ),
            (
                LifecycleAction::Upgrade,
                Actor::App(app),
                Some(Active),
                Some(Active),
                T + 4
            ),
            (
                LifecycleAction::Uninstall,
                op,
                Some(Active),
                Some(Uninstalled),
                T + 5
            ),
        ]
    );
    assert!(mine.iter().all(|r| r.app_id == app));
    // Pages by id.
    let first = store
        .actions(ActionFilter { app: Some(app) }, None, 2)
        .await
        .unwrap();
    let rest = store
        .actions(ActionFilter { app: Some(app) }, Some(first[1].id), 100)
        .await
        .unwrap();
    assert_eq!(first.len() + rest.len(), 6);
    assert_eq!(rest[0].id, mine[2].id);
    assert_eq!(
        store
            .actions(ActionFilter { app: Some(other) }, None, 100)
            .await
            .unwrap()
            .len(),
        1
    );
    // Stored: closed names, ids, scope names and times; never the manifest.
    let columns = raw.columns("audit_actions").await;
    for row in raw.rows("audit_actions", &columns).await {
        assert!(!row.contains(CANARY) && !row.contains("Werewolf"), "{row}");
    }
    // Before T + 3: this app's first three and the other's install.
    assert_eq!(store.prune_actions(T + 3).await.unwrap(), 4);
    assert_eq!(
        store
            .actions(ActionFilter::default(), None, 100)
            .await
            .unwrap()
            .len(),
        3
    );
}
