//! `cargo run --example werewolf -- [HUB_URL]`: plays one round of Werewolf
//! against a running `switchboard serve` (default http://127.0.0.1:7420).

mod game;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:7420".into());
    let summary = game::play_round(&base).await?;
    println!("wolves:        {:?}", summary.names_of(&summary.wolves));
    println!("night victim:  {}", summary.name(&summary.victim));
    println!(
        "night blocked: {} town-square message(s)",
        summary.night_blocked
    );
    println!(
        "wolf chat:     {} message(s), each to {:?}",
        summary.wolf_chat_recipients.len(),
        summary
            .wolf_chat_recipients
            .first()
            .map(|to| summary.names_of(to))
    );
    println!("turn order:    {:?}", summary.names_of(&summary.turn_order));
    println!("day speakers:  {:?}", summary.names_of(&summary.speakers));
    println!(
        "vote card:     {:?} (from {} voters)",
        summary.votes,
        summary.voters.len()
    );
    println!("lynched:       {}", summary.name(&summary.lynched));
    println!(
        "{}",
        if summary.wolves.contains(&summary.lynched) {
            "The village caught a wolf."
        } else {
            "The wolves fooled the village."
        }
    );
    Ok(())
}
