//! The wake-up format on `sb.wake` (ADR 0034 §3): after a commit, the
//! writing node tells every node which audiences' logs grew, and to which
//! seq. Nothing in it matters: a node that reads one reads the log, and a
//! node that misses one reads the log at its next periodic check.
//!
//! One message is a version byte, then `(audience, seq)` pairs: 16 bytes of
//! UUID, 8 of big-endian seq. A commit's pairs go in messages of at most
//! [`PAIRS_PER_MESSAGE`] (under 100 KB, far below NATS's default 1 MB).

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::domain::event::StoredEvent;

const VERSION: u8 = 1;
const PAIR_BYTES: usize = 24;

/// Most pairs one message carries.
pub const PAIRS_PER_MESSAGE: usize = 4_096;

/// Each audience of these events with its highest seq, in first-seen order.
pub fn heads(events: &[StoredEvent]) -> Vec<(Uuid, u64)> {
    let mut at: HashMap<Uuid, usize> = HashMap::new();
    let mut heads: Vec<(Uuid, u64)> = Vec::new();
    for e in events {
        match at.get(&e.audience) {
            Some(&i) => heads[i].1 = heads[i].1.max(e.seq),
            None => {
                at.insert(e.audience, heads.len());
                heads.push((e.audience, e.seq));
            }
        }
    }
    heads
}

/// The messages that carry these pairs.
pub fn encode(pairs: &[(Uuid, u64)]) -> Vec<Bytes> {
    pairs
        .chunks(PAIRS_PER_MESSAGE)
        .map(|chunk| {
            let mut b = BytesMut::with_capacity(1 + chunk.len() * PAIR_BYTES);
            b.put_u8(VERSION);
            for (audience, seq) in chunk {
                b.put_slice(audience.as_bytes());
                b.put_u64(*seq);
            }
            b.freeze()
        })
        .collect()
}

/// The pairs of one message; `None` when it is not one this version reads
/// (another version's, or damaged), which the caller ignores.
pub fn decode(message: &[u8]) -> Option<Vec<(Uuid, u64)>> {
    let (&version, body) = message.split_first()?;
    if version != VERSION || body.len() % PAIR_BYTES != 0 {
        return None;
    }
    Some(
        body.chunks_exact(PAIR_BYTES)
            .map(|pair| {
                let (id, seq) = pair.split_at(16);
                let id = Uuid::from_slice(id).expect("16 bytes");
                let seq = u64::from_be_bytes(seq.try_into().expect("8 bytes"));
                (id, seq)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip_in_chunks() {
        let pairs: Vec<(Uuid, u64)> = (0..PAIRS_PER_MESSAGE as u64 + 3)
            .map(|i| (Uuid::new_v4(), i * 7 + 1))
            .collect();
        let messages = encode(&pairs);
        assert_eq!(messages.len(), 2);
        let back: Vec<_> = messages.iter().flat_map(|m| decode(m).unwrap()).collect();
        assert_eq!(back, pairs);
    }

    #[test]
    fn unreadable_messages_are_refused() {
        assert!(decode(&[]).is_none());
        assert!(decode(&[2]).is_none());
        assert!(decode(&[VERSION, 1, 2, 3]).is_none());
        assert_eq!(decode(&[VERSION]), Some(vec![]));
    }
}
