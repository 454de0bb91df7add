//! `switchboard webhooks list|retry|disable` (ADR 0033): the operator's
//! view of webhook subscriptions, straight on the store `serve` uses (never
//! a new database). A running hub claims a retried subscription on its
//! next poll; a disable's `app/webhook/disabled` is in the app's log for
//! its next read. Both are owner actions: one `audit_actions` row each.

use clap::Subcommand;
use uuid::Uuid;

use crate::config::Config;
use crate::domain::event::rfc3339;
use crate::domain::installation::Actor;
use crate::domain::now_millis;
use crate::store::{Store, SubscriptionRecord};

/// Attempts `list --id` prints by default.
const ATTEMPTS_SHOWN: u32 = 20;

#[derive(Subcommand)]
pub enum WebhooksCommand {
    /// Subscriptions by id, one line each: id, app, state (and why
    /// disabled), source, v1 or not, cursor, failed attempts, next
    /// attempt, event types. With --id, that one and its latest attempts.
    List {
        /// Only this app's subscriptions.
        #[arg(long, conflicts_with = "id")]
        app: Option<Uuid>,
        /// One subscription, with its delivery log.
        #[arg(long)]
        id: Option<Uuid>,
        /// Subscriptions after this id (the last one printed).
        #[arg(long, conflicts_with_all = ["app", "id"])]
        after: Option<Uuid>,
        /// At most this many (default audit.page_default, at most audit.page_max).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Re-enable a disabled subscription, or make a waiting one due now;
    /// its failure state clears and its cursor stays (nothing is skipped).
    Retry {
        /// The subscription's id (`switchboard webhooks list`).
        #[arg(long)]
        id: Uuid,
    },
    /// Stop a subscription; the app gets app/webhook/disabled (operator).
    Disable {
        /// The subscription's id (`switchboard webhooks list`).
        #[arg(long)]
        id: Uuid,
    },
}

pub(super) async fn webhooks(command: WebhooksCommand, config: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&config).await?;
    let store = store.as_ref();
    match command {
        WebhooksCommand::List {
            app,
            id,
            after,
            limit,
        } => list(store, &config, (app, id, after, limit)).await,
        WebhooksCommand::Retry { id } => {
            if !store
                .retry_subscription(id, Actor::Operator, now_millis())
                .await?
            {
                anyhow::bail!("no webhook subscription {id}");
            }
            println!("subscription {id} is active and due now");
            Ok(())
        }
        WebhooksCommand::Disable { id } => {
            match store
                .disable_subscription(id, Actor::Operator, now_millis())
                .await?
            {
                Some(_) => println!("subscription {id} disabled; its app was told"),
                None => match store.subscription(id).await? {
                    Some(_) => println!("subscription {id} was disabled already"),
                    None => anyhow::bail!("no webhook subscription {id}"),
                },
            }
            Ok(())
        }
    }
}

type ListArgs = (Option<Uuid>, Option<Uuid>, Option<Uuid>, Option<u32>);

async fn list(
    store: &dyn Store,
    config: &Config,
    (app, id, after, limit): ListArgs,
) -> anyhow::Result<()> {
    let max = config.audit.page_max;
    let limit = limit.unwrap_or(config.audit.page_default);
    if !(1..=max).contains(&limit) {
        anyhow::bail!("--limit must be from 1 to {max} (audit.page_max)");
    }
    if let Some(id) = id {
        let Some(s) = store.subscription(id).await? else {
            anyhow::bail!("no webhook subscription {id}");
        };
        println!("{}", line(&s));
        for a in store.attempts(id, limit.min(ATTEMPTS_SHOWN)).await? {
            let status = a.status.map_or("-".to_string(), |s| s.to_string());
            let next = a.next_attempt_at.map_or("-".to_string(), rfc3339);
            let event = a.event_id.map_or("-".to_string(), |e| e.to_string());
            println!(
                "  {} seq {} event {event} attempt {} {} status {status} {}ms next {next}",
                rfc3339(a.at),
                a.seq,
                a.attempt,
                a.outcome.as_str(),
                a.duration_ms
            );
        }
        return Ok(());
    }
    let page = match app {
        Some(app) => store.subscriptions_of(app).await?,
        None => store.all_subscriptions(after, limit).await?,
    };
    if page.is_empty() {
        println!("no webhook subscriptions");
    }
    for s in &page {
        println!("{}", line(s));
    }
    if app.is_none() && page.len() == limit as usize {
        if let Some(last) = page.last() {
            println!("more after --after {}", last.id);
        }
    }
    Ok(())
}

/// One subscription, without its URL (it may carry a secret path; the app
/// reads its own over REST).
fn line(s: &SubscriptionRecord) -> String {
    let state = match s.disabled {
        None => "active".to_string(),
        Some(r) => format!("disabled:{}", r.as_str()),
    };
    format!(
        "{} app {} {state} {} {} cursor {} attempts {} next {} types {}",
        s.id,
        s.app_id,
        s.source.as_str(),
        if s.hmac { "v1a+v1" } else { "v1a" },
        s.cursor,
        s.attempts,
        rfc3339(s.next_attempt_at),
        s.event_types.join(",")
    )
}
