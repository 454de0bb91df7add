//! Open autocomplete requests (ADR 0027 §8): in memory only, never stored.
//! An asker opens one, the app may answer it later with
//! `app/autocomplete/answer`, and the asker's handler closes it at the
//! deadline whatever happened, so nothing outlives it.

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

impl OpenRequests {
    /// Opens request `id` for `app_id`'s option of `kind`: the receiver
    /// gets the choices of a late answer.
    pub fn open(
        &self,
        id: Uuid,
        app_id: Uuid,
        kind: OptionType,
        max: usize,
    ) -> oneshot::Receiver<Vec<Choice>> {
        let (reply, rx) = oneshot::channel();
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
        rx
    }

    /// Closes request `id` (its deadline passed, or it was answered).
    pub fn close(&self, id: Uuid) {
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
        let mut rx = requests.open(id, app, OptionType::String, 1);
        assert_eq!(
            requests.answer(id, other, &[choice("a")]),
            Answered::Unknown
        );
        let answer = [choice("a"), choice("b")];
        assert_eq!(requests.answer(id, app, &answer), Answered::Accepted);
        assert_eq!(rx.try_recv().unwrap(), vec![choice("a")]);
        assert_eq!(requests.answer(id, app, &answer), Answered::Unknown);
        assert!(requests.is_empty());
    }

    #[test]
    fn an_invalid_or_closed_answer_gives_nothing() {
        let requests = OpenRequests::default();
        let (id, app) = (Uuid::now_v7(), Uuid::now_v7());
        let mut rx = requests.open(id, app, OptionType::Integer, 5);
        assert_eq!(requests.answer(id, app, &[choice("a")]), Answered::Invalid);
        assert_eq!(rx.try_recv().unwrap(), Vec::<Choice>::new());
        let _rx = requests.open(id, app, OptionType::String, 5);
        requests.close(id);
        assert_eq!(requests.answer(id, app, &[choice("a")]), Answered::Unknown);
    }
}
