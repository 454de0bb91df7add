//! The Werewolf example plays one full round against a real hub.

#[path = "../../examples/werewolf/game.rs"]
mod game;

use crate::support::TestHub;

#[tokio::test]
async fn one_full_round() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let summary = game::play_round(&hub.base).await.unwrap();
    assert_eq!(summary.wolves.len(), game::WOLVES);
    assert_eq!(summary.names.len(), game::PLAYERS, "every player is named");
    assert!(summary
        .names_of(&summary.wolves)
        .iter()
        .all(|n| n.starts_with("player-")));
    assert!(!summary.wolves.contains(&summary.victim));
    assert!(
        summary.night_blocked == game::PLAYERS - game::WOLVES,
        "every villager's night talk was blocked"
    );
    for recipients in &summary.wolf_chat_recipients {
        assert!(
            recipients.iter().all(|r| summary.wolves.contains(r)),
            "wolf chat reaches wolves only"
        );
    }
    assert_eq!(
        summary.speakers, summary.turn_order,
        "the day's turns were kept"
    );
    assert_eq!(
        summary.speakers.len(),
        game::PLAYERS - 1,
        "every living agent spoke once"
    );
    // The vote card: every living agent voted once, for a living agent,
    // and the tally the app kept lynched the most voted.
    let mut voters = summary.voters.clone();
    voters.sort();
    let mut living = summary.turn_order.clone();
    living.sort();
    assert_eq!(voters, living, "every living agent voted once");
    assert_eq!(
        summary.votes.values().sum::<usize>(),
        game::PLAYERS - 1,
        "one vote each"
    );
    assert!(summary.votes.keys().all(|s| living.contains(s)));
    let villagers = game::PLAYERS - game::WOLVES - 1;
    assert_eq!(
        summary.votes.get(&summary.lynched),
        Some(&villagers),
        "the villagers' votes: {:?}",
        summary.votes
    );
    assert!(
        summary.wolves.contains(&summary.lynched),
        "the evidence convicted a wolf"
    );
}
