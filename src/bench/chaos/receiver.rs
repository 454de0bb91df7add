//! A receiving agent of the chaos run: one bare socket at a time, resumed
//! after its persisted cursor whenever the socket ends, is dropped, or the
//! hub dies. Like a client that writes its cursor down now and then rather
//! than after every event, it persists the seq it reached at random events
//! (one in four), so a resume may replay events it already had: the
//! duplicates across reconnects the guarantee allows. Every session is kept
//! for the checker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use super::checker::{ReceiverLog, Seen, SessionLog};
use super::hub::{HubProcess, Incarnation};
use crate::bench::scenarios::Ws;

/// How long a reconnect or the final catch-up may take.
const DEADLINE: Duration = Duration::from_secs(120);
/// The pause between two failed connects to a hub that is up.
const RETRY: Duration = Duration::from_millis(20);

/// What the run asks of a receiver.
pub enum Command {
    /// Drop the socket at once, no close frame.
    Drop,
    /// Stop reading (the slow consumer): say so on `stalled`, wait for
    /// `release`, then read what is left and report the close code.
    Stall {
        stalled: oneshot::Sender<()>,
        release: oneshot::Receiver<()>,
        closed: oneshot::Sender<Option<u16>>,
    },
    /// Reconnect once more, read to the end of the log, and stop.
    Finish,
}

/// When a receiver's connect succeeded, for the recovery times.
#[derive(Clone, Copy, Debug)]
pub struct Connected {
    pub receiver: usize,
    pub generation: usize,
    pub at: Instant,
}

/// What the receivers share with the run.
#[derive(Default)]
pub struct Shared {
    pub drops: AtomicUsize,
    pub connects: Mutex<Vec<Connected>>,
}

pub struct Receiver {
    pub index: usize,
    pub agent_id: Uuid,
    pub key: String,
    pub hub: watch::Receiver<Option<Incarnation>>,
    pub commands: mpsc::Receiver<Command>,
    pub shared: Arc<Shared>,
    /// Decides when the cursor is persisted.
    pub seed: u64,
}

/// Why a session ended.
enum End {
    /// The socket closed or failed (a kill, a 4008): reconnect.
    Lost,
    Dropped,
    Finish,
}

/// The receiver's state across sessions.
struct Cursor {
    /// What a resume starts after: the last seq persisted.
    persisted: u64,
    /// The last seq this session delivered in order.
    after: u64,
    sync_epoch: Option<String>,
    log: ReceiverLog,
    rng: StdRng,
}

impl Receiver {
    /// Runs until `Finish`; returns every session.
    pub async fn run(mut self) -> anyhow::Result<ReceiverLog> {
        let mut cursor = Cursor {
            persisted: 0,
            after: 0,
            rng: StdRng::seed_from_u64(self.seed),
            sync_epoch: None,
            log: ReceiverLog {
                agent_id: self.agent_id,
                sessions: Vec::new(),
            },
        };
        let mut finishing = false;
        loop {
            let (ws, latest) = self.connect(&mut cursor).await?;
            if finishing {
                self.read_to(ws, latest, &mut cursor).await?;
                return Ok(cursor.log);
            }
            match self.session(ws, &mut cursor).await? {
                End::Lost => {}
                End::Dropped => {
                    self.shared.drops.fetch_add(1, Ordering::SeqCst);
                }
                End::Finish => finishing = true,
            }
        }
    }

    /// A new socket, connected (resuming once the epoch is known); returns
    /// it with the log's `latestSeq`. Retries until the deadline.
    async fn connect(&mut self, cursor: &mut Cursor) -> anyhow::Result<(Ws, u64)> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            anyhow::ensure!(
                Instant::now() < deadline,
                "receiver {} could not connect within {DEADLINE:?}",
                self.index
            );
            let incarnation =
                tokio::time::timeout_at(deadline.into(), HubProcess::up(&mut self.hub))
                    .await
                    .map_err(|_| anyhow::anyhow!("the hub stayed down for {DEADLINE:?}"))??;
            match self.try_connect(&incarnation, cursor).await {
                Ok(Some(connected)) => {
                    self.shared
                        .connects
                        .lock()
                        .expect("connects")
                        .push(Connected {
                            receiver: self.index,
                            generation: incarnation.generation,
                            at: Instant::now(),
                        });
                    return Ok(connected);
                }
                Ok(None) => tokio::time::sleep(RETRY).await,
                Err(e) => return Err(e),
            }
        }
    }

    /// One connect: `Ok(None)` when the socket failed (try again), an error
    /// when the hub refused the cursor (a resync would be a silent gap).
    async fn try_connect(
        &self,
        incarnation: &Incarnation,
        cursor: &mut Cursor,
    ) -> anyhow::Result<Option<(Ws, u64)>> {
        let Ok((mut ws, _)) =
            tokio_tungstenite::connect_async_with_config(incarnation.ws_url(), None, true).await
        else {
            return Ok(None);
        };
        let mut params = json!({"agentKey": self.key});
        if let Some(epoch) = &cursor.sync_epoch {
            params["resume"] = json!({"after": cursor.persisted, "syncEpoch": epoch});
        }
        let hello = json!({"jsonrpc": "2.0", "id": "c", "method": "agent/network/connect", "params": params});
        if ws
            .send(Message::Text(hello.to_string().into()))
            .await
            .is_err()
        {
            return Ok(None);
        }
        let mut early = Vec::new();
        loop {
            let Some(Ok(message)) = ws.next().await else {
                return Ok(None);
            };
            let Message::Text(text) = message else {
                continue;
            };
            let frame: Value = serde_json::from_str(text.as_str())?;
            if frame["id"] != json!("c") {
                early.push(frame);
                continue;
            }
            let Some(events) = frame["result"].get("events") else {
                let code = frame["error"]["code"].as_i64();
                // -32603 and -32013-style transient failures: try again;
                // a resync is a cursor the log cannot serve, never expected.
                anyhow::ensure!(
                    !frame["error"]["_tag"]
                        .as_str()
                        .is_some_and(|t| t.contains("Resync")),
                    "receiver {} was refused its cursor {}: {frame}",
                    self.index,
                    cursor.persisted
                );
                tracing::debug!(?code, "connect refused; retrying");
                return Ok(None);
            };
            cursor.sync_epoch = events["syncEpoch"].as_str().map(str::to_string);
            let start_after = events["startAfter"].as_u64().unwrap_or(cursor.persisted);
            cursor.after = start_after;
            let latest = events["latestSeq"].as_u64().unwrap_or(0);
            cursor.log.sessions.push(SessionLog {
                start_after,
                events: Vec::new(),
            });
            for f in early {
                take(&f, cursor);
            }
            return Ok(Some((ws, latest)));
        }
    }

    /// Reads events until the socket ends or a command ends the session.
    async fn session(&mut self, mut ws: Ws, cursor: &mut Cursor) -> anyhow::Result<End> {
        loop {
            tokio::select! {
                biased;
                command = self.commands.recv() => match command {
                    Some(Command::Drop) => return Ok(End::Dropped),
                    Some(Command::Finish) | None => return Ok(End::Finish),
                    Some(Command::Stall { stalled, release, closed }) => {
                        let _ = stalled.send(());
                        let _ = release.await;
                        let code = drain(&mut ws, cursor).await;
                        let _ = closed.send(code);
                        return Ok(End::Lost);
                    }
                },
                frame = ws.next() => match frame {
                    Some(Ok(Message::Text(t))) => take(&serde_json::from_str(t.as_str())?, cursor),
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return Ok(End::Lost),
                    Some(Ok(_)) => {}
                },
            }
        }
    }

    /// The final catch-up: reads until the cursor reaches `latest`.
    async fn read_to(&self, mut ws: Ws, latest: u64, cursor: &mut Cursor) -> anyhow::Result<()> {
        let deadline = Instant::now() + DEADLINE;
        while cursor.after < latest {
            let frame = tokio::time::timeout_at(deadline.into(), ws.next())
                .await
                .map_err(|_| {
                    anyhow::anyhow!(
                        "receiver {} caught up to {} of {latest} only",
                        self.index,
                        cursor.after
                    )
                })?;
            match frame {
                Some(Ok(Message::Text(t))) => take(&serde_json::from_str(t.as_str())?, cursor),
                Some(Ok(_)) => {}
                _ => anyhow::bail!("receiver {}'s last socket ended", self.index),
            }
        }
        Ok(())
    }
}

/// Reads a stalled socket's remaining frames; its close code, if any.
async fn drain(ws: &mut Ws, cursor: &mut Cursor) -> Option<u16> {
    loop {
        match tokio::time::timeout(DEADLINE, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => {
                if let Ok(frame) = serde_json::from_str::<Value>(t.as_str()) {
                    take(&frame, cursor);
                }
            }
            Ok(Some(Ok(Message::Close(f)))) => return f.map(|f| f.code.into()),
            Ok(Some(Ok(_))) => {}
            _ => return None,
        }
    }
}

/// Keeps a stored event (a notification with a seq) in the current
/// session and moves the cursor when it is the next one.
fn take(frame: &Value, cursor: &mut Cursor) {
    let params = &frame["params"];
    let (Some(seq), None) = (params["seq"].as_u64(), frame.get("id")) else {
        return;
    };
    let message_id = (params["type"] == json!("agent/message/received"))
        .then(|| params["payload"]["message"]["id"].as_str())
        .flatten()
        .and_then(|id| id.parse().ok());
    if let Some(session) = cursor.log.sessions.last_mut() {
        session.events.push(Seen {
            seq,
            id: params["id"].as_str().unwrap_or_default().to_string(),
            message_id,
        });
    }
    if seq == cursor.after + 1 {
        cursor.after = seq;
        if cursor.rng.gen_ratio(1, 4) {
            cursor.persisted = seq;
        }
    }
}
