//! The SQLite parts of the conversation area: the group committers of
//! concurrent sends and verdicts (ADR 0013, both written on the writer
//! thread, ADR 0022) and the verdict's mark.

use std::sync::Arc;

use uuid::Uuid;

use super::send_writer::ThreadSends;
use super::verdict_writer::ThreadVerdicts;
use super::writer::Writer;
use super::SqliteStore;
use crate::store::conversations::{ConversationDialect, Marked};
use crate::store::group_commit::GroupCommit;
use crate::store::group_sends::SendCommit;
use crate::store::group_verdicts::VerdictCommit;
use crate::store::messages::{is_pending, MessageOutcome};
use crate::store::sql::{Arg, Executor};
use crate::store::CommitFeed;
use crate::store::StoreResult;

impl ConversationDialect for SqliteStore {
    fn sends(&self) -> &SendCommit {
        &self.sends
    }

    fn verdicts(&self) -> &VerdictCommit {
        &self.verdicts
    }
}

/// Writes a pending message's verdict; a forward only while its task and
/// its app's installation are active, and safe against a concurrent close
/// or suspend (ADR 0023 §7).
pub(super) async fn mark_decided(
    ex: &mut dyn Executor,
    message_id: Uuid,
    outcome: &MessageOutcome,
    listed: bool,
) -> StoreResult<Marked> {
    let (verdict, reason, forward) = match outcome {
        MessageOutcome::Forward { .. } => ("forwarded", None, true),
        MessageOutcome::Block { reason } => ("blocked", Some(reason.as_str()), false),
    };
    // One statement, so the task and installation checks and the write
    // happen under the same write lock as any task close or suspend.
    let changed = ex
            .execute(
                "UPDATE messages SET verdict = $1, verdict_reason = $2, listed = $5, recipient_count = $6 \
                 WHERE id = $3 AND verdict = 'pending' \
                 AND (NOT $4 OR EXISTS (SELECT 1 FROM conversations c JOIN tasks t ON t.id = c.task_id \
                                        WHERE c.id = messages.conversation_id AND t.state = 'active' \
                                        AND EXISTS (SELECT 1 FROM installations i \
                                                    WHERE i.app_id = t.app_id AND i.state = 'active')))",
                &[
                    Arg::Text(verdict),
                    Arg::OptText(reason),
                    Arg::Id(message_id),
                    Arg::Bool(forward),
                    Arg::Bool(listed),
                    Arg::Int(outcome.recipient_count()),
                ],
            )
            .await?;
    Ok(if changed > 0 {
        Marked::Applied
    } else if forward && is_pending(ex, message_id).await? {
        Marked::NotApplicable
    } else {
        Marked::AlreadyDecided
    })
}

/// The group committers of sends and of verdicts, both under the store's
/// writer lock.
pub(super) fn group_commits(
    writer: Arc<tokio::sync::Mutex<()>>,
    thread: Arc<Writer>,
    feed: CommitFeed,
) -> (SendCommit, VerdictCommit) {
    (
        GroupCommit::new(
            writer.clone(),
            Arc::new(ThreadSends::new(thread.clone())),
            feed.clone(),
        ),
        GroupCommit::new(writer, Arc::new(ThreadVerdicts::new(thread)), feed),
    )
}

#[cfg(test)]
mod tests {
    //! The group-commit internals, driven directly: the store contract
    //! suite covers the same behaviour through the trait, where whether a
    //! group forms depends on timing.

    use super::*;
    use crate::domain::conversation::ConversationKind;
    use crate::domain::message::{Origin, Part};
    use crate::domain::PrincipalKind;
    use crate::store::group_commit::GroupWriter;
    use crate::store::messages::{Fanout, InsertedMessage, NewMessage, Verdict};
    use crate::store::{
        BaseStore, ConversationStore, EventStore, IdentityStore, JobKind, JobStore,
        NewConversation, NewJob, NewKey, NewPrincipal,
    };

    async fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let s = SqliteStore::open(&url, 4, 5_000, crate::config::SqliteSynchronous::Full)
            .await
            .unwrap();
        s.migrate().await.unwrap();
        (s, dir)
    }

    async fn agent(s: &SqliteStore) -> Uuid {
        let id = Uuid::now_v7();
        let p = NewPrincipal {
            id,
            kind: PrincipalKind::Agent,
            name: "a".into(),
            description: None,
            created_at: 1,
        };
        let key = NewKey {
            key_id: format!("k{}", id.simple()),
            secret_hash: [1; 32],
        };
        s.create_agent(&p, &key, None).await.unwrap();
        id
    }

    async fn conversation(s: &SqliteStore, members: Vec<Uuid>) -> Uuid {
        let c = NewConversation {
            id: Uuid::now_v7(),
            kind: ConversationKind::Group,
            name: None,
            task_id: None,
            direct_key: None,
            template_key: None,
            created_by: members[0],
            participants: members,
            created_at: 1,
        };
        s.create_conversation(&c, &[]).await.unwrap();
        c.id
    }

    fn message(conversation: Uuid, sender: Uuid, fanout: Fanout, job: bool) -> NewMessage {
        let id = Uuid::now_v7();
        NewMessage {
            id,
            conversation_id: conversation,
            sender_id: sender,
            origin: Origin::Agent,
            parts: vec![Part::Text { text: "x".into() }],
            reply_to: None,
            thread_id: None,
            in_channel: false,
            client_msg_id: None,
            request_hash: None,
            created_at: 5,
            fanout,
            jobs: job
                .then(|| NewJob::new(JobKind::MessageAuthorize, id, 7))
                .into_iter()
                .collect(),
            card: None,
            reply_to_interaction: None,
        }
    }

    #[tokio::test]
    async fn a_mixed_group_is_written_like_its_messages_one_by_one() {
        let (s, _dir) = store().await;
        let sender = agent(&s).await;
        let mut many = vec![sender];
        for _ in 0..450 {
            many.push(agent(&s).await);
        }
        let big = conversation(&s, many.clone()).await;
        let small = conversation(&s, vec![sender, many[1]]).await;
        let recipients: Vec<Uuid> = many[1..].to_vec();
        let forward = || Fanout::Forward {
            recipients: recipients.clone(),
            event_type: "agent/message/received",
            people: crate::store::PersonCopies::NONE,
            apps: crate::store::AppCopies::NONE,
        };
        let group = [
            message(big, sender, forward(), false),
            message(small, sender, Fanout::Pending, true),
            message(big, sender, forward(), false),
            message(small, sender, Fanout::Pending, true),
            message(big, sender, forward(), false),
        ];
        let refs: Vec<&NewMessage> = group.iter().collect();
        let results = ThreadSends::new(s.thread.clone())
            .write_group(&refs)
            .await
            .unwrap();
        let seqs: Vec<u64> = results
            .iter()
            .map(|r| match r {
                InsertedMessage::Inserted { message, .. } => message.seq,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            seqs,
            vec![1, 1, 2, 2, 3],
            "seqs per conversation, in queue order"
        );
        for (r, m) in results.iter().zip(&group) {
            let InsertedMessage::Inserted {
                verdict, events, ..
            } = r
            else {
                unreachable!()
            };
            let (stored, stored_verdict) = s.message(m.id).await.unwrap().unwrap();
            assert_eq!(&stored_verdict, verdict);
            match m.fanout {
                Fanout::Forward { .. } => {
                    assert_eq!(events.len(), 450, "more than one upsert chunk");
                    assert_eq!(*verdict, Verdict::Forwarded { recipients: 450 });
                    assert!(s.is_recipient(m.id, many[450]).await.unwrap());
                    assert!(events
                        .iter()
                        .all(|e| e.payload.to_value()["message"]["id"] == stored.id.to_string()));
                }
                Fanout::Pending => {
                    assert!(events.is_empty());
                    assert_eq!(*verdict, Verdict::Pending);
                    let job = &m.jobs[0];
                    assert!(
                        s.claim_job(job.id, 0, 1).await.unwrap().is_some(),
                        "its job"
                    );
                }
            }
        }
        // Every recipient's log follows the message order.
        for r in [many[1], many[450]] {
            let events = s.events_after(r, 0, 10).await.unwrap();
            let order: Vec<u64> = events
                .iter()
                .map(|e| e.payload.to_value()["message"]["seq"].as_u64().unwrap())
                .collect();
            assert_eq!(order, vec![1, 2, 3]);
            assert_eq!(
                events.iter().map(|e| e.seq).collect::<Vec<_>>(),
                vec![1, 2, 3]
            );
        }
    }

    #[tokio::test]
    async fn a_send_given_up_while_queued_is_never_written() {
        let (s, _dir) = store().await;
        let sender = agent(&s).await;
        let other = agent(&s).await;
        let conv = conversation(&s, vec![sender, other]).await;
        let s = Arc::new(s);
        let held = s.writer.clone().lock_owned().await;
        let m = message(
            conv,
            sender,
            Fanout::Forward {
                recipients: vec![other],
                event_type: "agent/message/received",
                people: crate::store::PersonCopies::NONE,
                apps: crate::store::AppCopies::NONE,
            },
            false,
        );
        let id = m.id;
        let sending = {
            let s = s.clone();
            tokio::spawn(async move { s.sends.submit(&m).await })
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while s.sends.queued_len() == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the send queued");
        sending.abort();
        assert!(sending.await.unwrap_err().is_cancelled());
        assert_eq!(s.sends.queued_len(), 0, "taken back out");
        drop(held);
        assert!(s.message(id).await.unwrap().is_none());
    }
}
