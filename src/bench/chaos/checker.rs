//! The chaos run's checker: what every receiver got, over all its sessions,
//! against what every sender saw acknowledged. Pure: it takes what the
//! actors recorded and the verdicts read back from the senders' logs, and
//! counts.

use std::collections::{BTreeSet, HashMap, HashSet};

use uuid::Uuid;

/// One stored event as a receiver's socket delivered it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub seq: u64,
    /// The event's id (stable across deliveries, unique per audience).
    pub id: String,
    /// `agent/message/received`'s message id; `None` for other events.
    pub message_id: Option<Uuid>,
}

/// One socket's life: from its connect answer to its end.
#[derive(Clone, Debug, Default)]
pub struct SessionLog {
    /// The connect answer's `startAfter`: the first event must be the next.
    pub start_after: u64,
    pub events: Vec<Seen>,
}

/// Everything one receiving agent got, session by session.
#[derive(Clone, Debug)]
pub struct ReceiverLog {
    pub agent_id: Uuid,
    pub sessions: Vec<SessionLog>,
}

/// How a send was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Forwarded,
    Blocked,
    /// The gate had not decided; the verdict comes as an event.
    Pending,
}

/// A send its sender saw answered.
#[derive(Clone, Debug)]
pub struct Ack {
    pub message_id: Uuid,
    pub conversation_id: Uuid,
    pub sender_id: Uuid,
    pub outcome: Outcome,
}

/// A verdict as `agent/message/delivery` told it to the sender.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub message_id: Uuid,
    pub outcome: Outcome,
}

/// What the checker is given.
pub struct Evidence<'a> {
    pub receivers: &'a [ReceiverLog],
    pub acks: &'a [Ack],
    /// Every member of each conversation (the sender is left out of its
    /// own message's audience).
    pub members: &'a HashMap<Uuid, Vec<Uuid>>,
    /// The senders' `agent/message/delivery` events, read before the
    /// receivers' last catch-up: what the acknowledgements promised.
    pub verdicts: &'a [Verdict],
    /// The same, read again once the receivers were done, for counting
    /// double verdicts (one may have come since).
    pub recounted: &'a [Verdict],
}

/// The figures. Those documented "must be 0" fail the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    pub acked_sends: usize,
    /// Answered blocked: a gate failed closed (the app was away).
    pub acked_blocked: usize,
    /// Answered pending: the verdict came later, as an event.
    pub acked_pending: usize,
    /// Gated messages whose answer was lost (a kill or a drop mid-send)
    /// and whose verdict the sender learned from its log alone: the gate
    /// jobs the runner finished after a restart, among others.
    pub unanswered_verdicts: usize,
    /// (receiver, message) pairs that acknowledged sends promised.
    pub expected_deliveries: usize,
    pub events_received: usize,
    /// Expected deliveries that never arrived (must be 0).
    pub events_lost: usize,
    /// An event id twice on one socket (must be 0).
    pub duplicates_per_socket: usize,
    /// A socket's seq not the one after the previous (must be 0).
    pub gaps_per_socket: usize,
    /// An event id again on a later socket of the same receiver (allowed).
    pub duplicates_across_reconnects: usize,
    /// Messages with two verdicts: two `agent/message/delivery` events, or
    /// one receiver given the message under two event ids (must be 0).
    pub double_verdicts: usize,
    /// Messages whose send was answered blocked yet reached a receiver
    /// (must be 0: a gate fails closed).
    pub blocked_but_delivered: usize,
}

/// The figures that fail the run when they are not 0, as the report names
/// them.
pub const MUST_BE_ZERO: [&str; 5] = [
    "events_lost",
    "duplicates_per_socket",
    "gaps_per_socket",
    "double_verdicts",
    "blocked_but_delivered",
];

impl Figures {
    /// The "must be 0" figures that are not, by name.
    pub fn failures(&self) -> Vec<(&'static str, usize)> {
        let values = [
            self.events_lost,
            self.duplicates_per_socket,
            self.gaps_per_socket,
            self.double_verdicts,
            self.blocked_but_delivered,
        ];
        MUST_BE_ZERO
            .into_iter()
            .zip(values)
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// Compares, and counts.
pub fn check(evidence: &Evidence) -> Figures {
    let answered = |o: Outcome| evidence.acks.iter().filter(|a| a.outcome == o).count();
    let mut figures = Figures {
        acked_sends: evidence.acks.len(),
        acked_blocked: answered(Outcome::Blocked),
        acked_pending: answered(Outcome::Pending),
        ..Figures::default()
    };
    let (forwarded, blocked) = decided(evidence);
    let mut double: BTreeSet<Uuid> = verdicts_per_message(evidence.recounted)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(m, _)| m)
        .collect();
    let mut blocked_delivered = BTreeSet::new();
    for receiver in evidence.receivers {
        let got = per_receiver(receiver, &mut figures, &mut double);
        for ack in evidence.acks {
            if !forwarded.contains(&ack.message_id) || ack.sender_id == receiver.agent_id {
                continue;
            }
            let audience = evidence
                .members
                .get(&ack.conversation_id)
                .is_some_and(|m| m.contains(&receiver.agent_id));
            if audience {
                figures.expected_deliveries += 1;
                if !got.contains(&ack.message_id) {
                    figures.events_lost += 1;
                }
            }
        }
        blocked_delivered.extend(got.intersection(&blocked).copied());
    }
    let answered: HashSet<Uuid> = evidence.acks.iter().map(|a| a.message_id).collect();
    figures.unanswered_verdicts = verdicts_per_message(evidence.recounted)
        .keys()
        .filter(|m| !answered.contains(m))
        .count();
    figures.double_verdicts = double.len();
    figures.blocked_but_delivered = blocked_delivered.len();
    figures
}

/// The acknowledged messages forwarded (by their answer or by the verdict
/// event that followed a pending answer), and those answered blocked.
fn decided(evidence: &Evidence) -> (HashSet<Uuid>, HashSet<Uuid>) {
    let by_event: HashMap<Uuid, Outcome> = evidence
        .verdicts
        .iter()
        .map(|v| (v.message_id, v.outcome))
        .collect();
    let mut forwarded = HashSet::new();
    let mut blocked = HashSet::new();
    for ack in evidence.acks {
        let outcome = match ack.outcome {
            Outcome::Pending => by_event.get(&ack.message_id).copied(),
            decided => Some(decided),
        };
        match outcome {
            Some(Outcome::Forwarded) => forwarded.insert(ack.message_id),
            Some(Outcome::Blocked) => blocked.insert(ack.message_id),
            _ => false,
        };
    }
    (forwarded, blocked)
}

fn verdicts_per_message(verdicts: &[Verdict]) -> HashMap<Uuid, usize> {
    let mut n = HashMap::new();
    for v in verdicts {
        *n.entry(v.message_id).or_default() += 1;
    }
    n
}

/// One receiver's sessions: counts its duplicates and gaps, adds the
/// messages it got under two event ids to `double`, and returns the
/// messages it got.
fn per_receiver(
    receiver: &ReceiverLog,
    figures: &mut Figures,
    double: &mut BTreeSet<Uuid>,
) -> HashSet<Uuid> {
    let mut earlier: HashSet<&str> = HashSet::new();
    let mut event_of: HashMap<Uuid, &str> = HashMap::new();
    for session in &receiver.sessions {
        let mut this: HashSet<&str> = HashSet::new();
        let mut previous = session.start_after;
        for e in &session.events {
            figures.events_received += 1;
            if e.seq != previous + 1 {
                figures.gaps_per_socket += 1;
            }
            previous = e.seq;
            if !this.insert(e.id.as_str()) {
                figures.duplicates_per_socket += 1;
                continue;
            }
            if earlier.contains(e.id.as_str()) {
                figures.duplicates_across_reconnects += 1;
            }
            if let Some(m) = e.message_id {
                if *event_of.entry(m).or_insert(e.id.as_str()) != e.id.as_str() {
                    double.insert(m);
                }
            }
        }
        earlier.extend(this);
    }
    event_of.into_keys().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(seq: u64, id: &str, message: Option<Uuid>) -> Seen {
        Seen {
            seq,
            id: id.into(),
            message_id: message,
        }
    }

    struct World {
        sender: Uuid,
        receiver: Uuid,
        conversation: Uuid,
        members: HashMap<Uuid, Vec<Uuid>>,
    }

    fn world() -> World {
        let (sender, receiver, conversation) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        World {
            sender,
            receiver,
            conversation,
            members: HashMap::from([(conversation, vec![sender, receiver])]),
        }
    }

    fn ack(w: &World, m: Uuid, outcome: Outcome) -> Ack {
        Ack {
            message_id: m,
            conversation_id: w.conversation,
            sender_id: w.sender,
            outcome,
        }
    }

    fn figures(
        w: &World,
        sessions: Vec<SessionLog>,
        acks: &[Ack],
        verdicts: &[Verdict],
    ) -> Figures {
        let receivers = [ReceiverLog {
            agent_id: w.receiver,
            sessions,
        }];
        check(&Evidence {
            receivers: &receivers,
            acks,
            members: &w.members,
            verdicts,
            recounted: verdicts,
        })
    }

    fn session(start_after: u64, events: Vec<Seen>) -> SessionLog {
        SessionLog {
            start_after,
            events,
        }
    }

    #[test]
    fn a_clean_run_across_a_reconnect_counts_only_the_allowed_duplicate() {
        let w = world();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let f = figures(
            &w,
            vec![
                session(0, vec![seen(1, "e1", Some(a))]),
                session(0, vec![seen(1, "e1", Some(a)), seen(2, "e2", Some(b))]),
            ],
            &[
                ack(&w, a, Outcome::Forwarded),
                ack(&w, b, Outcome::Forwarded),
            ],
            &[],
        );
        assert_eq!(f.failures(), vec![]);
        assert_eq!(f.expected_deliveries, 2);
        assert_eq!(f.duplicates_across_reconnects, 1);
        assert_eq!(f.events_received, 3);
    }

    #[test]
    fn an_acknowledged_message_that_never_arrived_is_lost() {
        let w = world();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let f = figures(
            &w,
            vec![session(0, vec![seen(1, "e1", Some(a))])],
            &[
                ack(&w, a, Outcome::Forwarded),
                ack(&w, b, Outcome::Forwarded),
            ],
            &[],
        );
        assert_eq!(f.failures(), vec![("events_lost", 1)]);
    }

    #[test]
    fn a_pending_answer_counts_by_the_verdict_event_that_followed() {
        let w = world();
        let (a, b, unanswered) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let verdicts = [
            Verdict {
                message_id: a,
                outcome: Outcome::Forwarded,
            },
            Verdict {
                message_id: b,
                outcome: Outcome::Blocked,
            },
            Verdict {
                message_id: unanswered,
                outcome: Outcome::Forwarded,
            },
        ];
        let acks = [ack(&w, a, Outcome::Pending), ack(&w, b, Outcome::Pending)];
        let f = figures(&w, vec![session(0, vec![])], &acks, &verdicts);
        assert_eq!(f.failures(), vec![("events_lost", 1)]);
        // Only what an answer promised is owed; the unanswered one is counted.
        assert_eq!(f.expected_deliveries, 1);
        assert_eq!((f.acked_pending, f.unanswered_verdicts), (2, 1));
    }

    #[test]
    fn a_repeat_or_a_gap_on_one_socket_fails() {
        let w = world();
        let a = Uuid::new_v4();
        let f = figures(
            &w,
            vec![session(
                0,
                vec![
                    seen(1, "e1", Some(a)),
                    seen(1, "e1", Some(a)),
                    seen(3, "e3", None),
                ],
            )],
            &[ack(&w, a, Outcome::Forwarded)],
            &[],
        );
        // The repeat is one gap (1 after 1) and one duplicate; 3 after 1 is another gap.
        assert_eq!(
            f.failures(),
            vec![("duplicates_per_socket", 1), ("gaps_per_socket", 2)]
        );
    }

    #[test]
    fn two_verdicts_show_as_two_delivery_events_or_two_event_ids() {
        let w = world();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let twice = [
            Verdict {
                message_id: a,
                outcome: Outcome::Forwarded,
            },
            Verdict {
                message_id: a,
                outcome: Outcome::Forwarded,
            },
        ];
        let f = figures(
            &w,
            vec![session(
                0,
                vec![
                    seen(1, "e1", Some(a)),
                    seen(2, "e2", Some(b)),
                    seen(3, "e3", Some(b)),
                ],
            )],
            &[
                ack(&w, a, Outcome::Forwarded),
                ack(&w, b, Outcome::Forwarded),
            ],
            &twice,
        );
        assert_eq!(f.failures(), vec![("double_verdicts", 2)]);
    }

    #[test]
    fn a_blocked_message_that_arrives_fails_closed_no_more() {
        let w = world();
        let a = Uuid::new_v4();
        let f = figures(
            &w,
            vec![session(0, vec![seen(1, "e1", Some(a))])],
            &[ack(&w, a, Outcome::Blocked)],
            &[],
        );
        assert_eq!(f.failures(), vec![("blocked_but_delivered", 1)]);
        assert_eq!(f.expected_deliveries, 0);
    }
}
