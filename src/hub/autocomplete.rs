//! Open autocomplete requests (ADR 0027 §8): in memory only, never stored.
//! An asker opens one, the app may answer it later with
//! `app/autocomplete/answer`, and the request closes when the asker's
//! [`OpenRequest`] drops: at the deadline, on its answer, or when the
//! asker's future is dropped (its HTTP client went away), so nothing
//! outlives the asker and no late answer is taken for nobody.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;
use uuid::Uuid;

use crate::domain::command::{checked_choices, Choice};
use crate::domain::manifest::OptionType;

struct Open {
    app_id: Uuid,
    kind: OptionType,
    max: usize,
    reply: oneshot::Sender<Vec<Choice>>,
}

/// How an app's late answer was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    /// Handed to the asker as checked.
    Accepted,
    /// Invalid: the asker gets no choices.
    Invalid,
    /// No open request of this app has that id (unknown, expired, or
    /// another app's).
    Unknown,
}

#[derive(Default)]
pub struct OpenRequests {
    open: Mutex<HashMap<Uuid, Open>>,
}

/// One open request, closed when dropped. `late` gets the choices of a
/// late answer.
pub struct OpenRequest<'a> {
    requests: &'a OpenRequests,
    id: Uuid,
    pub late: oneshot::Receiver<Vec<Choice>>,
}

impl Drop for OpenRequest<'_> {
    fn drop(&mut self) {
        self.requests.close(self.id);
    }
}

impl OpenRequests {
    /// Opens request `id` for `app_id`'s option of `kind`, until the
    /// returned guard drops.
    pub fn open(&self, id: Uuid, app_id: Uuid, kind: OptionType, max: usize) -> OpenRequest<'_> {
        let (reply, late) = oneshot::channel();
        let entry = Open {
            app_id,
            kind,
            max,
            reply,
        };
        self.open
            .lock()
            .expect("autocomplete map")
            .insert(id, entry);
        OpenRequest {
            requests: self,
            id,
            late,
        }
    }

    /// Closes request `id` (its asker is done with it).
    fn close(&self, id: Uuid) {
        self.open.lock().expect("autocomplete map").remove(&id);
    }

    /// `app_id`'s late answer to request `id`; the request is closed
    /// either way once it is the app's.
    pub fn answer(&self, id: Uuid, app_id: Uuid, choices: &[Choice]) -> Answered {
        let mut open = self.open.lock().expect("autocomplete map");
        if open.get(&id).is_none_or(|o| o.app_id != app_id) {
            return Answered::Unknown;
        }
        let entry = open.remove(&id).expect("checked above");
        drop(open);
        let (checked, answered) = match checked_choices(entry.kind, choices, entry.max) {
            Some(c) => (c, Answered::Accepted),
            None => (Vec::new(), Answered::Invalid),
        };
        // The asker may have given up at the deadline meanwhile.
        let _ = entry.reply.send(checked);
        answered
    }

    pub fn len(&self) -> usize {
        self.open.lock().expect("autocomplete map").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn choice(name: &str) -> Choice {
        Choice {
            name: name.into(),
            value: json!(name),
        }
    }

    #[test]
    fn only_the_owning_app_answers_once() {
        let requests = OpenRequests::default();
        let (id, app, other) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let mut open = requests.open(id, app, OptionType::String, 1);
        assert_eq!(
            requests.answer(id, other, &[choice("a")]),
            Answered::Unknown
        );
        let answer = [choice("a"), choice("b")];
        assert_eq!(requests.answer(id, app, &answer), Answered::Accepted);
        assert_eq!(open.late.try_recv().unwrap(), vec![choice("a")]);
        assert_eq!(requests.answer(id, app, &answer), Answered::Unknown);
        assert!(requests.is_empty());
        drop(open);
        assert!(requests.is_empty());
    }

    #[test]
    fn an_invalid_or_closed_answer_gives_nothing() {
        let requests = OpenRequests::default();
        let (id, app) = (Uuid::now_v7(), Uuid::now_v7());
        let mut open = requests.open(id, app, OptionType::Integer, 5);
        assert_eq!(requests.answer(id, app, &[choice("a")]), Answered::Invalid);
        assert_eq!(open.late.try_recv().unwrap(), Vec::<Choice>::new());
        drop(open);
        let open = requests.open(id, app, OptionType::String, 5);
        drop(open);
        assert_eq!(requests.answer(id, app, &[choice("a")]), Answered::Unknown);
    }

    /// An asker's future dropped while it waits (its client went away):
    /// the request closes with it, and a late answer finds nothing.
    #[tokio::test]
    async fn a_dropped_asker_closes_its_request() {
        let requests = OpenRequests::default();
        let (id, app) = (Uuid::now_v7(), Uuid::now_v7());
        let asker = async {
            let mut open = requests.open(id, app, OptionType::String, 5);
            let _ = (&mut open.late).await;
        };
        let gone = tokio::time::timeout(std::time::Duration::from_millis(1), asker).await;
        assert!(gone.is_err(), "the asker waited for an answer");
        assert!(requests.is_empty());
        assert_eq!(requests.answer(id, app, &[choice("a")]), Answered::Unknown);
    }
}
