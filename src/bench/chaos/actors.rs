//! The chaos run's load and its faults: agents sending to a group and a
//! task conversation, the hook app answering the message gate, the dropper
//! that drops sockets at random points, and the killer that SIGKILLs the
//! hub and starts it again.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::checker::{Ack, Outcome};
use super::hub::{HubProcess, Incarnation};
use super::receiver::{Command, Shared};
use crate::client::{AgentClient, AppClient, ClientError};
use crate::domain::gate::{MessageAuthorizeAnswer, MessageVerdict};
use crate::domain::message::Part;
use crate::protocol::conversations::{AgentMessageSend, DeliveryState, MessageSendParams};
use crate::protocol::tasks::AppMessageAuthorize;

/// The pause between two failed connects to a hub that is up.
const RETRY: Duration = Duration::from_millis(20);

/// What the senders record: every answered send, and how many so far.
pub struct Acks {
    pub list: Mutex<Vec<Ack>>,
    pub count: watch::Sender<usize>,
    pub refused: std::sync::atomic::AtomicUsize,
}

impl Acks {
    pub fn new() -> Arc<Acks> {
        Arc::new(Acks {
            list: Mutex::new(Vec::new()),
            count: watch::channel(0).0,
            refused: Default::default(),
        })
    }

    pub fn push(&self, ack: Ack) {
        self.list.lock().expect("acks").push(ack);
        self.count.send_modify(|n| *n += 1);
    }
}

/// An agent that sends, one send at a time, to its conversations.
pub struct Sender {
    pub key: String,
    pub conversations: Vec<Uuid>,
    pub hub: watch::Receiver<Option<Incarnation>>,
    pub drops: mpsc::Receiver<()>,
    pub rng: StdRng,
    pub think: Duration,
}

impl Sender {
    /// Sends until `stop`, reconnecting after every drop or kill.
    pub async fn run(mut self, acks: Arc<Acks>, shared: Arc<Shared>, stop: CancellationToken) {
        while !stop.is_cancelled() {
            let Some(client) = self.connect(&stop).await else {
                return;
            };
            loop {
                let conversation =
                    self.conversations[self.rng.gen_range(0..self.conversations.len())];
                tokio::select! {
                    _ = stop.cancelled() => return,
                    Some(()) = self.drops.recv() => {
                        shared.drops.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    sent = send(&client, conversation) => match sent {
                        Ok(ack) => acks.push(ack),
                        Err(ClientError::Rpc(_)) => {
                            acks.refused.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(_) => break,
                    },
                }
                let pause = self.rng.gen_range(Duration::ZERO..=self.think);
                tokio::time::sleep(pause).await;
            }
        }
    }

    async fn connect(&mut self, stop: &CancellationToken) -> Option<AgentClient> {
        while !stop.is_cancelled() {
            let incarnation = tokio::select! {
                _ = stop.cancelled() => return None,
                up = HubProcess::up(&mut self.hub) => up.ok()?,
            };
            if let Ok(client) = AgentClient::connect(&incarnation.base, &self.key).await {
                // Its events are the receivers' to check; this socket sends.
                drop(client.connection.notifications());
                return Some(client);
            }
            tokio::time::sleep(RETRY).await;
        }
        None
    }
}

async fn send(client: &AgentClient, conversation: Uuid) -> Result<Ack, ClientError> {
    let sent = client
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: vec![Part::Text {
                text: "chaos".into(),
            }],
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await?;
    Ok(Ack {
        message_id: sent.message.id,
        conversation_id: conversation,
        sender_id: client.agent_id(),
        outcome: match sent.delivery.state {
            DeliveryState::Forwarded => Outcome::Forwarded,
            DeliveryState::Blocked => Outcome::Blocked,
            DeliveryState::Pending => Outcome::Pending,
        },
    })
}

/// The hook app: forwards every gated message to every participant but
/// its sender, reconnecting after every drop or kill.
pub async fn app(
    key: String,
    mut hub: watch::Receiver<Option<Incarnation>>,
    mut drops: mpsc::Receiver<()>,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    while !stop.is_cancelled() {
        let incarnation = tokio::select! {
            _ = stop.cancelled() => return,
            up = HubProcess::up(&mut hub) => match up { Ok(i) => i, Err(_) => return },
        };
        let connected = AppClient::builder(&incarnation.base, &key)
            .handle::<AppMessageAuthorize, _, _>(|p| async move {
                let sender = p.message.sender_id;
                let recipients = p.conversation.participants.into_iter();
                Ok(MessageAuthorizeAnswer {
                    verdict: MessageVerdict::Forward {
                        recipients: recipients.filter(|id| *id != sender).collect(),
                    },
                })
            })
            .connect()
            .await;
        let Ok(app) = connected else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            Some(()) = drops.recv() => {
                shared.drops.fetch_add(1, Ordering::SeqCst);
            }
            _ = app.connection.closed() => {}
        }
    }
}

/// Something the dropper can drop.
pub enum Target {
    Receiver(mpsc::Sender<Command>),
    Socket(mpsc::Sender<()>),
}

impl Target {
    /// Asks for a drop; one already waiting is enough.
    fn drop_now(&self) {
        match self {
            Target::Receiver(tx) => {
                let _ = tx.try_send(Command::Drop);
            }
            Target::Socket(tx) => {
                let _ = tx.try_send(());
            }
        }
    }
}

/// Drops a random socket every few milliseconds until `drops` were done.
pub async fn dropper(
    targets: Vec<Target>,
    wanted: usize,
    shared: Arc<Shared>,
    mut rng: StdRng,
    stop: CancellationToken,
) {
    while shared.drops.load(Ordering::SeqCst) < wanted && !stop.is_cancelled() {
        let pause = Duration::from_millis(rng.gen_range(2..30));
        tokio::time::sleep(pause).await;
        targets[rng.gen_range(0..targets.len())].drop_now();
    }
}

/// How the killer paces itself.
pub struct KillPlan {
    pub kills: usize,
    /// Acknowledged sends since the last start before the next kill, so
    /// every kill lands under load.
    pub acks_between: usize,
    /// The most extra time to wait after that, drawn at random.
    pub max_delay: Duration,
}

/// SIGKILLs the hub `plan.kills` times at random points, holding `calm`
/// around each (the slow consumer's phase holds it too). Publishes the
/// kills done on `done`.
pub async fn killer(
    hub: Arc<HubProcess>,
    plan: KillPlan,
    acks: Arc<Acks>,
    calm: Arc<tokio::sync::Mutex<()>>,
    done: watch::Sender<usize>,
    mut rng: StdRng,
) -> anyhow::Result<()> {
    let mut count = acks.count.subscribe();
    for k in 0..plan.kills {
        let from = *count.borrow();
        count
            .wait_for(|n| *n >= from + plan.acks_between)
            .await
            .map_err(|_| anyhow::anyhow!("the senders are gone"))?;
        let delay = rng.gen_range(Duration::ZERO..=plan.max_delay);
        tokio::time::sleep(delay).await;
        let _calm = calm.lock().await;
        hub.kill_and_restart().await?;
        done.send_replace(k + 1);
    }
    Ok(())
}
