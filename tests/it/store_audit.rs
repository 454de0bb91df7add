//! The audit store (ADR 0020 §4, §5), on SQLite and a throwaway PostgreSQL:
//! flushes upsert absolute values, pages filter and go by id, pruning goes
//! by the last denial.

use switchboard::domain::authz::{Action, Reason, ResourceKind};
use switchboard::domain::PrincipalKind;
use switchboard::store::{AuditFilter, AuditRecord, DenialRecord, DynStore};
use uuid::Uuid;

use crate::store_contract::{contract, postgres, sqlite};

contract!(
    a_flush_again_replaces_count_and_last_time,
    pages_filter_and_go_by_id,
    a_large_flush_lands_whole,
    pruning_goes_by_the_last_denial,
);

const T: i64 = 1_700_000_000_000;

fn denial(actor: Uuid, action: Action, reason: Reason) -> DenialRecord {
    DenialRecord {
        actor_id: actor,
        actor_kind: PrincipalKind::Agent,
        action,
        reason,
        resource_kind: ResourceKind::Conversation,
        resource_id: Uuid::now_v7(),
    }
}

fn record(denial: DenialRecord, first_at: i64, last_at: i64, count: i64) -> AuditRecord {
    AuditRecord {
        id: Uuid::now_v7(),
        denial,
        first_at,
        last_at,
        count,
    }
}

async fn all(store: &DynStore) -> Vec<AuditRecord> {
    store
        .denials(AuditFilter::default(), None, 1000)
        .await
        .unwrap()
}

async fn a_flush_again_replaces_count_and_last_time(store: DynStore) {
    let d = denial(
        Uuid::now_v7(),
        Action::MessageCreate,
        Reason::LevelInsufficient,
    );
    let mut r = record(d, T, T + 5, 3);
    store.flush_denials(&[r]).await.unwrap();
    assert_eq!(all(&store).await, vec![r]);
    // The window went on: the next flush carries the totals, not a delta.
    r.count = 7;
    r.last_at = T + 900;
    store.flush_denials(&[r]).await.unwrap();
    store.flush_denials(&[r]).await.unwrap();
    assert_eq!(all(&store).await, vec![r]);
    // Nothing to write is no statement at all.
    store.flush_denials(&[]).await.unwrap();
    assert_eq!(all(&store).await.len(), 1);
}

async fn pages_filter_and_go_by_id(store: DynStore) {
    let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
    let records = vec![
        record(denial(a, Action::MessageCreate, Reason::NoGrant), T, T, 1),
        record(
            denial(b, Action::MessageCreate, Reason::LevelInsufficient),
            T,
            T,
            2,
        ),
        record(denial(a, Action::TaskRead, Reason::NoGrant), T, T, 3),
        record(
            denial(a, Action::MessageCreate, Reason::SubjectKindNotAllowed),
            T,
            T,
            4,
        ),
    ];
    store.flush_denials(&records).await.unwrap();
    let by = |actor, action, reason| AuditFilter {
        actor,
        action,
        reason,
    };
    let counts = |rs: Vec<AuditRecord>| rs.iter().map(|r| r.count).collect::<Vec<_>>();
    let page = |f| {
        let store = store.clone();
        async move { counts(store.denials(f, None, 100).await.unwrap()) }
    };
    assert_eq!(page(by(Some(a), None, None)).await, vec![1, 3, 4]);
    assert_eq!(
        page(by(None, Some(Action::MessageCreate), None)).await,
        vec![1, 2, 4]
    );
    assert_eq!(
        page(by(None, None, Some(Reason::NoGrant))).await,
        vec![1, 3]
    );
    assert_eq!(
        page(by(
            Some(a),
            Some(Action::MessageCreate),
            Some(Reason::NoGrant)
        ))
        .await,
        vec![1]
    );
    assert_eq!(
        page(by(Some(Uuid::now_v7()), None, None)).await,
        Vec::<i64>::new()
    );
    // Keyset by id: two pages of two, then nothing.
    let first = store
        .denials(AuditFilter::default(), None, 2)
        .await
        .unwrap();
    assert_eq!(counts(first.clone()), vec![1, 2]);
    let second = store
        .denials(AuditFilter::default(), Some(first[1].id), 2)
        .await
        .unwrap();
    assert_eq!(counts(second.clone()), vec![3, 4]);
    let rest = store
        .denials(AuditFilter::default(), Some(second[1].id), 2)
        .await
        .unwrap();
    assert!(rest.is_empty());
    // Every column comes back as it went in.
    assert_eq!(all(&store).await, records);
}

async fn a_large_flush_lands_whole(store: DynStore) {
    // More rows than one statement holds, in one transaction.
    let actor = Uuid::now_v7();
    let records: Vec<AuditRecord> = (0..137)
        .map(|i| {
            record(
                denial(actor, Action::EventAck, Reason::NotSelf),
                T,
                T + i,
                i,
            )
        })
        .collect();
    store.flush_denials(&records).await.unwrap();
    assert_eq!(all(&store).await, records);
}

async fn pruning_goes_by_the_last_denial(store: DynStore) {
    let d = || {
        denial(
            Uuid::now_v7(),
            Action::TaskManage,
            Reason::NotTaskParticipant,
        )
    };
    let old = record(d(), T, T + 10, 1);
    // Opened long ago but denied again since: kept.
    let busy = record(d(), T, T + 1000, 9);
    store.flush_denials(&[old, busy]).await.unwrap();
    assert_eq!(store.prune_denials(T + 10).await.unwrap(), 0);
    assert_eq!(store.prune_denials(T + 11).await.unwrap(), 1);
    assert_eq!(all(&store).await, vec![busy]);
    assert_eq!(store.prune_denials(T + 11).await.unwrap(), 0);
}
