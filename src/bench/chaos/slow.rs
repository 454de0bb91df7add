//! The slow consumer's phase: its receiver stops reading while the
//! flooder writes it big messages, until the hub closes it as slow (seen
//! in `/metrics`, at the close decision); then it reads what reached it,
//! the 4008 last, and resumes from its cursor like every other receiver.
//! The kills wait meanwhile (`calm`), so the close is this hub's.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::actors::Acks;
use super::checker::{Ack, Outcome};
use super::hub::HubProcess;
use super::receiver::Command;
use super::setup::World;
use crate::client::AgentClient;
use crate::domain::message::Part;
use crate::protocol::conversations::{AgentMessageSend, DeliveryState, MessageSendParams};

/// Each message's text: big, so the socket's buffers fill soon.
const TEXT_BYTES: usize = 32 * 1024;
/// The most sends before the run fails for want of a close.
const MAX_SENDS: usize = 20_000;
/// How long the stalled socket may take to give up its close.
const CLOSE_DEADLINE: Duration = Duration::from_secs(60);

pub struct Slowed {
    pub sends: usize,
    pub close_code: Option<u16>,
}

pub async fn phase(
    hub: &HubProcess,
    world: &World,
    receiver: &mpsc::Sender<Command>,
    acks: &Acks,
    calm: &tokio::sync::Mutex<()>,
) -> anyhow::Result<Slowed> {
    let _calm = calm.lock().await;
    let base = HubProcess::up(&mut hub.watch()).await?.base;
    let flooder = AgentClient::connect(&base, &world.flooder.key).await?;
    let http = reqwest::Client::new();
    let before = slow_closes(&http, &base).await?;
    let (stalled_tx, stalled) = oneshot::channel();
    let (release, release_rx) = oneshot::channel();
    let (closed_tx, closed) = oneshot::channel();
    receiver
        .send(Command::Stall {
            stalled: stalled_tx,
            release: release_rx,
            closed: closed_tx,
        })
        .await?;
    stalled.await?;
    let text = "s".repeat(TEXT_BYTES);
    let mut sends = 0;
    while slow_closes(&http, &base).await? <= before {
        anyhow::ensure!(
            sends < MAX_SENDS,
            "the stalled consumer was not closed after {sends} sends"
        );
        acks.push(flood(&flooder, world, &text).await?);
        sends += 1;
    }
    let _ = release.send(());
    let close_code = tokio::time::timeout(CLOSE_DEADLINE, closed)
        .await
        .map_err(|_| anyhow::anyhow!("the stalled consumer never ended"))??;
    Ok(Slowed { sends, close_code })
}

async fn flood(flooder: &AgentClient, world: &World, text: &str) -> anyhow::Result<Ack> {
    let sent = flooder
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: world.direct,
            parts: vec![Part::Text { text: text.into() }],
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await?;
    anyhow::ensure!(
        sent.delivery.state == DeliveryState::Forwarded,
        "a direct message was not forwarded: {:?}",
        sent.delivery
    );
    Ok(Ack {
        message_id: sent.message.id,
        conversation_id: world.direct,
        sender_id: world.flooder.id,
        outcome: Outcome::Forwarded,
    })
}

/// `switchboard_disconnects_total{reason="slow_consumer"}` of this hub.
async fn slow_closes(http: &reqwest::Client, base: &str) -> anyhow::Result<f64> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("switchboard_disconnects_total{"))
        .filter(|l| l.contains("reason=\"slow_consumer\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}
