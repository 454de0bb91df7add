//! A `hosted_wake` job is kept only for a beatless hosted app (ADR 0031
//! §8, "Deciding the wake in the write"), on both backends and on every
//! way a send or a verdict writes its jobs: a lone send, a group of sends
//! in one transaction, and a verdict's effects.

use switchboard::store::{
    DynStore, Effects, Fanout, JobKind, MessageDecided, MessageOutcome, NewJob, NewMessage,
};
use uuid::Uuid;

use crate::store_contract::{agent_in, app_in, contract, group_of, new_send, postgres, sqlite};

contract!(wakes_are_kept_for_beatless_hosted_apps_only);

fn send(conversation: Uuid, sender: Uuid, recipients: &[Uuid], jobs: Vec<NewJob>) -> NewMessage {
    NewMessage {
        jobs,
        ..new_send(conversation, sender, recipients)
    }
}

fn wake(app: Uuid) -> NewJob {
    NewJob::new(JobKind::HostedWake, app, 7)
}

/// Whether the job was stored: only a stored job can be claimed.
async fn stored(store: &DynStore, job: &NewJob) -> bool {
    store.claim_job(job.id, 0, 1).await.unwrap().is_some()
}

async fn wakes_are_kept_for_beatless_hosted_apps_only(store: DynStore) {
    let a = agent_in(&store, "a").await;
    let b = agent_in(&store, "b").await;
    let group = group_of(&store, &[a, b]).await;
    let plain = app_in(&store).await;
    let hosted = app_in(&store).await;
    let beatless = app_in(&store).await;
    store.bind_hosted_app("hosted", hosted, 1).await.unwrap();
    store
        .bind_hosted_app("beatless", beatless, 1)
        .await
        .unwrap();
    store.set_hosted_beatless(beatless, true).await.unwrap();
    let kept = |app: Uuid| app == beatless;

    // A lone send.
    let jobs = vec![wake(plain), wake(hosted), wake(beatless)];
    store
        .insert_message(&send(group, a, &[b], jobs.clone()))
        .await
        .unwrap();
    for job in &jobs {
        assert_eq!(stored(&store, job).await, kept(job.subject), "{job:?}");
    }

    // Sends at once (one group transaction where the backend groups),
    // with a job that is always written beside the wakes.
    let mut sends = Vec::new();
    let mut all = Vec::new();
    for i in 0..12 {
        let mut jobs = vec![wake([plain, hosted, beatless][i % 3])];
        if i % 4 == 0 {
            jobs.push(NewJob::new(JobKind::LeaseExpire, Uuid::now_v7(), 7));
        }
        all.extend(jobs.clone());
        let m = send(group, a, &[b], jobs);
        let store = store.clone();
        sends.push(tokio::spawn(async move { store.insert_message(&m).await }));
    }
    for s in sends {
        s.await.unwrap().unwrap();
    }
    for job in &all {
        let expected = job.kind == JobKind::LeaseExpire || kept(job.subject);
        assert_eq!(stored(&store, job).await, expected, "{job:?}");
    }

    // A verdict's effects.
    let mut pending = send(group, a, &[b], Vec::new());
    pending.fanout = Fanout::Pending;
    store.insert_message(&pending).await.unwrap();
    let jobs = vec![wake(plain), wake(beatless)];
    let effects = Effects {
        schedule: jobs.clone(),
        ..Default::default()
    };
    // A block: a forward outside a task is not the store's to apply, and
    // the effects are written with either verdict.
    let block = MessageOutcome::Block {
        reason: "blocked".into(),
    };
    let decided = store
        .decide_message(pending.id, &block, &effects, 20)
        .await
        .unwrap();
    assert!(matches!(decided, MessageDecided::Applied(_)), "{decided:?}");
    for job in &jobs {
        assert_eq!(stored(&store, job).await, kept(job.subject), "{job:?}");
    }

    // No longer beatless: no longer woken.
    store.set_hosted_beatless(beatless, false).await.unwrap();
    let late = wake(beatless);
    store
        .insert_message(&send(group, a, &[b], vec![late.clone()]))
        .await
        .unwrap();
    assert!(!stored(&store, &late).await);
}
