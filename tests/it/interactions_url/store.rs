//! The store's part of the review fixes (ADR 0032, "Review fixes"), on
//! SQLite and PostgreSQL: only the newest check of a URL records its
//! outcome; a delivery's job is sent at most its allowance, and never
//! twice by one process; URL jobs are claimed from their own room.

use switchboard::config::Config;
use switchboard::domain::installation::Actor;
use switchboard::domain::manifest::{self, Manifest};
use switchboard::domain::task::{TaskParticipant, TaskRole};
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    ClaimRoom, DynStore, JobKind, NewJob, NewTask, RecordedCheck, RegistrationInstall,
};
use uuid::Uuid;

use crate::store_contract::{agent_in, app_in, contract, new_key, postgres, principal, sqlite};

contract!(
    only_the_newest_check_records,
    a_delivery_is_sent_at_most_its_allowance,
    url_jobs_are_claimed_from_their_own_room,
);

const URL: &str = "https://app.example/i";

fn url_manifest(url: &str) -> Manifest {
    let mut config = Config::default();
    config.egress.allowlist = vec!["app.example".into()];
    let mut doc = crate::support::werewolf_manifest();
    doc["delivery"] = serde_json::json!({"mode": "interactions_url", "interactionsUrl": url});
    manifest::validate(&doc, &config.manifest_bounds()).unwrap()
}

/// A registered app naming [`URL`], installed: its registration wrote an
/// `app_url_verify` job, due at its creation (1_700_000_000_123).
async fn url_app(store: &DynStore) -> Uuid {
    let m = url_manifest(URL);
    let app = principal(PrincipalKind::App, "url-app");
    let (_, key) = new_key(PrincipalKind::App);
    let install = RegistrationInstall::new(app.id, &m, Actor::Operator, 1);
    store
        .create_app(&app, &m, &key, Some(&install), None)
        .await
        .unwrap();
    app.id
}

fn found(reason: Option<&str>, at: i64) -> RecordedCheck<'_> {
    RecordedCheck {
        url: URL,
        reason,
        at,
    }
}

async fn only_the_newest_check_records(store: DynStore) {
    let app = url_app(&store).await;
    assert_eq!(store.begin_url_check(Uuid::new_v4()).await.unwrap(), None);
    let older = store.begin_url_check(app).await.unwrap().unwrap();
    let newer = store.begin_url_check(app).await.unwrap().unwrap();
    assert!(newer > older);
    assert!(store
        .record_url_check(app, newer, &found(None, 20))
        .await
        .unwrap());
    let stale = found(Some("timeout"), 30);
    assert!(!store.record_url_check(app, older, &stale).await.unwrap());
    let check = store.url_check(app).await.unwrap().unwrap();
    assert!(check.verifies(URL), "{check:?}");
    assert_eq!((check.checked_at, check.reason), (Some(20), None));
    // A check that began before nothing newer records, passed or not.
    let latest = store.begin_url_check(app).await.unwrap().unwrap();
    assert!(store.record_url_check(app, latest, &stale).await.unwrap());
    let check = store.url_check(app).await.unwrap().unwrap();
    assert!(!check.verifies(URL));
    assert_eq!(check.reason.as_deref(), Some("timeout"));
}

async fn a_delivery_is_sent_at_most_its_allowance(store: DynStore) {
    let app = url_app(&store).await;
    let jobs = store
        .claim_due_jobs(i64::MAX - 1, i64::MAX, 10)
        .await
        .unwrap();
    let job = jobs
        .iter()
        .find(|j| j.subject == app)
        .expect("the check's job");
    let (first, second, third) = ("process-1", "process-2", "process-3");
    assert!(store.mark_job_sent(job.id, first, 2).await.unwrap());
    // The same process again: it sent, only the store failed after it.
    assert!(!store.mark_job_sent(job.id, first, 2).await.unwrap());
    // Another process (the first crashed): one repeat, then no more.
    assert!(store.mark_job_sent(job.id, second, 2).await.unwrap());
    assert!(!store.mark_job_sent(job.id, third, 2).await.unwrap());
    assert!(!store.mark_job_sent(Uuid::new_v4(), first, 2).await.unwrap());
}

async fn url_jobs_are_claimed_from_their_own_room(store: DynStore) {
    let url = url_app(&store).await;
    let owner = app_in(&store).await;
    let a = agent_in(&store, "a").await;
    for i in 0..2 {
        let task = NewTask {
            id: Uuid::now_v7(),
            app_id: owner,
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
    }
    let now = 1_800_000_000_000;
    let room = |other, app_url| ClaimRoom { other, app_url };
    // No room for URL jobs: the gates' jobs only, and the reverse.
    let others = store
        .claim_due_jobs_by_class(now, now + 1_000, room(10, 0))
        .await
        .unwrap();
    assert_eq!(others.len(), 2);
    assert!(others.iter().all(|j| j.kind == JobKind::TaskCreate));
    let urls = store
        .claim_due_jobs_by_class(now, now + 1_000, room(10, 10))
        .await
        .unwrap();
    assert_eq!(urls.len(), 1, "the others are locked");
    assert_eq!(
        (urls[0].kind, urls[0].subject),
        (JobKind::AppUrlVerify, url)
    );
    assert!(urls[0].kind.reaches_app_url());
    let later = now + 2_000;
    let one_each = store
        .claim_due_jobs_by_class(later, later + 1_000, room(1, 1))
        .await
        .unwrap();
    assert_eq!(one_each.len(), 2);
    assert_eq!(
        one_each.iter().filter(|j| j.kind.reaches_app_url()).count(),
        1
    );
    let none = store
        .claim_due_jobs_by_class(later + 2_000, later + 3_000, room(0, 0))
        .await
        .unwrap();
    assert!(none.is_empty());
}
