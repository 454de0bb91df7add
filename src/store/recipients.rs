//! Who received a message (ADR 0018). A forward to every participant but
//! the sender (a group's default, and a verdict that names them all) is
//! *unlisted*: no recipient rows, its recipients are the participants other
//! than the sender who joined before its seq (`joined_seq < seq`). A
//! verdict that forwards to a subset is *listed*: its recipients are rows
//! of `message_recipients`. So a fan-out to a thousand members writes no
//! row per member.
//!
//! Whether a forward reaches everyone is decided inside the writing
//! transaction. For a send, after the conversation's seq was taken: on
//! PostgreSQL that update holds the conversation row, which a join takes
//! too (its `joined_seq` comes from the same update), so every participant
//! the count sees joined before the new seq, and none that did is missed.
//! For a verdict, the message's seq is old: the participants who joined
//! before it are compared with the verdict's recipients one by one.

use std::collections::{BTreeMap, HashSet};

use uuid::Uuid;

use super::messages::{Fanout, NewMessage};
use super::sql::{Arg, Executor};
use super::StoreResult;

/// Visibility of message `m` to the principal bound at `$viewer`: it sent
/// it or received it. For `WHERE` clauses over `messages m`.
pub fn seen_by(viewer: usize) -> String {
    format!("(m.sender_id = ${viewer} OR {})", received_by(viewer))
}

/// Whether the principal bound at `$viewer` received message `m`.
pub fn received_by(viewer: usize) -> String {
    format!(
        "(CASE WHEN m.listed \
         THEN EXISTS (SELECT 1 FROM message_recipients r WHERE r.message_id = m.id AND r.recipient_id = ${viewer}) \
         ELSE m.sender_id <> ${viewer} AND EXISTS (SELECT 1 FROM conversation_participants p \
              WHERE p.conversation_id = m.conversation_id AND p.principal_id = ${viewer} AND p.joined_seq < m.seq) \
         END)"
    )
}

/// For each message of a group (after its seqs were taken), whether its
/// recipients must be listed: pending messages are (they have none yet),
/// forwards only when they miss a participant.
pub async fn listings(ex: &mut dyn Executor, group: &[&NewMessage]) -> StoreResult<Vec<bool>> {
    let mut counts = BTreeMap::new();
    for (conversation, senders) in rosters_needed(group) {
        counts.insert(conversation, roster(ex, conversation, &senders).await?);
    }
    Ok(listed_by(group, &counts))
}

/// A conversation's participant count, for [`Roster::participants`].
pub const ROSTER_COUNT: &str =
    "SELECT COUNT(*) AS n FROM conversation_participants WHERE conversation_id = $1";
/// Whether `$2` takes part in conversation `$1`, for [`Roster::senders_in`].
pub const ROSTER_MEMBER: &str =
    "SELECT 1 AS one FROM conversation_participants WHERE conversation_id = $1 AND principal_id = $2";

/// The conversations of a group's forwards, in id order, each with its
/// distinct senders: the rosters [`listed_by`] needs.
pub fn rosters_needed(group: &[&NewMessage]) -> BTreeMap<Uuid, Vec<Uuid>> {
    let mut rosters: BTreeMap<Uuid, Vec<Uuid>> = BTreeMap::new();
    for m in group {
        // A channel's forward lists nobody (its readers are its levels).
        if matches!(m.fanout, Fanout::Forward { .. }) && !m.in_channel {
            let senders = rosters.entry(m.conversation_id).or_default();
            if !senders.contains(&m.sender_id) {
                senders.push(m.sender_id);
            }
        }
    }
    rosters
}

/// Each message's listing from its conversation's roster.
pub fn listed_by(group: &[&NewMessage], rosters: &BTreeMap<Uuid, Roster>) -> Vec<bool> {
    group
        .iter()
        .map(|m| match &m.fanout {
            // A channel's readers are its levels (ADR 0020 §2): no rows.
            Fanout::Forward { .. } if m.in_channel => false,
            Fanout::Forward { recipients, .. } => {
                !reaches_all(&rosters[&m.conversation_id], m.sender_id, recipients)
            }
            Fanout::Pending => true,
        })
        .collect()
}

/// Whether a verdict's forward of a stored message must list its
/// recipients: unlisted only when they are exactly the participants but
/// the sender who joined before the message, which one statement reads. A
/// participant added while the verdict was pending (the hook may forward
/// to it) joined after the message, so a forward naming it is listed.
pub async fn verdict_listed(
    ex: &mut dyn Executor,
    message_id: Uuid,
    recipients: &[Uuid],
) -> StoreResult<bool> {
    let rows = ex
        .fetch_all(
            "SELECT p.principal_id FROM messages m JOIN conversation_participants p \
             ON p.conversation_id = m.conversation_id \
             WHERE m.id = $1 AND p.joined_seq < m.seq AND p.principal_id <> m.sender_id",
            &[Arg::Id(message_id)],
        )
        .await?;
    let mut received = HashSet::with_capacity(rows.len());
    for r in &rows {
        received.insert(r.id("principal_id")?);
    }
    let named: HashSet<Uuid> = recipients.iter().copied().collect();
    Ok(named.len() != recipients.len() || named != received)
}

/// A conversation's participant count and which of `senders` take part.
pub struct Roster {
    pub participants: usize,
    pub senders_in: HashSet<Uuid>,
}

async fn roster(
    ex: &mut dyn Executor,
    conversation: Uuid,
    senders: &[Uuid],
) -> StoreResult<Roster> {
    let participants = ex
        .fetch_optional(ROSTER_COUNT, &[Arg::Id(conversation)])
        .await?
        .map_or(Ok(0), |r| r.int("n"))? as usize;
    let mut senders_in = HashSet::new();
    for &s in senders {
        let found = ex
            .fetch_optional(ROSTER_MEMBER, &[Arg::Id(conversation), Arg::Id(s)])
            .await?;
        if found.is_some() {
            senders_in.insert(s);
        }
    }
    Ok(Roster {
        participants,
        senders_in,
    })
}

/// True when `recipients` are exactly the participants but the sender.
/// The callers only name participants, so counting distinct others is
/// enough; a list naming the sender is listed, as the unlisted rule
/// never counts the sender as a recipient.
fn reaches_all(roster: &Roster, sender: Uuid, recipients: &[Uuid]) -> bool {
    let distinct: HashSet<&Uuid> = recipients.iter().collect();
    if distinct.contains(&sender) || distinct.len() != recipients.len() {
        return false;
    }
    let others = roster.participants - usize::from(roster.senders_in.contains(&sender));
    distinct.len() == others
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roster(participants: usize, senders: &[Uuid]) -> Roster {
        Roster {
            participants,
            senders_in: senders.iter().copied().collect(),
        }
    }

    #[test]
    fn a_forward_to_every_other_participant_is_unlisted() {
        let (s, a, b) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        assert!(reaches_all(&roster(3, &[s]), s, &[a, b]));
        // An app sender that takes no part: every participant receives.
        assert!(reaches_all(&roster(2, &[]), s, &[a, b]));
    }

    #[test]
    fn a_subset_the_sender_or_a_duplicate_is_listed() {
        let (s, a, b) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        assert!(!reaches_all(&roster(3, &[s]), s, &[a]));
        assert!(!reaches_all(&roster(3, &[s]), s, &[a, s]));
        assert!(!reaches_all(&roster(3, &[s]), s, &[a, a]));
        assert!(!reaches_all(&roster(4, &[s]), s, &[a, b]));
    }
}
