//! One round of Werewolf on switchboard: a moderator app and scripted agents,
//! all through the Rust SDK.
//!
//! - `town-square` (participantFilter `all`) holds everyone; `werewolf-chat`
//!   (`none`) gets the wolves, added by the app.
//! - Night: `message_authorize` blocks the town square and forwards the
//!   wolves' chat to the wolves only. The wolves' "kill" ends the night.
//! - Day: every living agent asks for a dispatch lease on the moderator's
//!   "Day breaks" message; `dispatch_authorize` grants the current speaker
//!   and holds the others, and the app releases the next hold
//!   (`app/dispatch/resolve`) when a speaker has spoken. The day message gate
//!   blocks anyone speaking out of turn.
//! - When everyone has spoken, the app posts a vote card in the town square:
//!   one button per living agent, `once_per_principal`. Every living agent
//!   presses the button of the one it accused; the app tallies the
//!   `app/interaction/created` events (answering each `acknowledged`),
//!   lynches the most voted and closes the task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use switchboard::client::{AgentClient, AppClient, Notification};
use switchboard::domain::component::{CardUse, ComponentKind, Interaction, NewComponent};
use switchboard::domain::gate::{
    AdmissionAnswer, DispatchAuthorizeAnswer, MessageAuthorizeAnswer, MessageVerdict,
    TaskCreateAnswer, TaskVerdict,
};
use switchboard::domain::message::Part;
use switchboard::protocol::conversations::{AgentMessageSend, MessageSendParams};
use switchboard::protocol::interactions::{
    AgentInteractionCreate, AppInteractionRespond, InteractionCreateParams,
    InteractionRespondParams, RespondState,
};
use switchboard::protocol::tasks::*;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

pub const PLAYERS: usize = 7;
pub const WOLVES: usize = 2;

pub fn manifest() -> Value {
    json!({
        "name": "Werewolf",
        "description": "Agents play Werewolf in task-scoped conversations",
        "limits": { "maxParticipants": 12 },
        // The vote card: components need components:write (ADR 0027 §5).
        "scopes": ["components:write", "events:subscribe"],
        "conversations": [
            { "key": "town-square", "name": "Town Square", "participantFilter": "all" },
            { "key": "werewolf-chat", "name": "Werewolf Chat", "participantFilter": "none" }
        ],
        "hooks": {
            "dispatch_authorize": { "kind": "hook", "timeoutMs": 5000 },
            "message_authorize": { "kind": "hook", "timeoutMs": 5000 },
            "task_create": { "kind": "hook", "timeoutMs": 5000 }
        }
    })
}

/// What happened in the round.
#[derive(Debug, Clone)]
pub struct Summary {
    pub wolves: Vec<Uuid>,
    pub victim: Uuid,
    /// Town-square messages the night blocked.
    pub night_blocked: usize,
    /// Wolf-chat messages and who received them.
    pub wolf_chat_recipients: Vec<Vec<Uuid>>,
    /// The order in which living agents spoke during the day.
    pub speakers: Vec<Uuid>,
    /// The order the moderator meant them to speak in.
    pub turn_order: Vec<Uuid>,
    /// The vote card's tally: votes per suspect, and who voted, in the
    /// order the interactions reached the app.
    pub votes: HashMap<Uuid, usize>,
    pub voters: Vec<Uuid>,
    pub lynched: Uuid,
    /// Each player's registered name, for printing the round.
    pub names: HashMap<Uuid, String>,
}

impl Summary {
    /// A player's name (its id if it has none).
    pub fn name(&self, id: &Uuid) -> String {
        self.names
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }

    pub fn names_of(&self, ids: &[Uuid]) -> Vec<String> {
        ids.iter().map(|id| self.name(id)).collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Setup,
    Night,
    Day,
    Over,
}

/// Something the moderator must do through its socket (hook handlers only
/// decide; they never block on calls of their own).
enum Action {
    Post(Uuid, String),
    Resolve(Uuid),
    /// Everyone spoke: post the vote card.
    Vote,
}

struct Moderator {
    phase: Phase,
    task: Option<Uuid>,
    town: Option<Uuid>,
    wolf_chat: Option<Uuid>,
    wolves: Vec<Uuid>,
    participants: Vec<Uuid>,
    victim: Option<Uuid>,
    night_blocked: usize,
    wolf_chat_recipients: Vec<Vec<Uuid>>,
    turn_order: Vec<Uuid>,
    turn: usize,
    held: HashMap<Uuid, Uuid>,
    speakers: Vec<Uuid>,
    accusations: HashMap<Uuid, usize>,
    votes: HashMap<Uuid, usize>,
    voters: Vec<Uuid>,
    actions: mpsc::UnboundedSender<Action>,
}

fn text_of(parts: &[Part]) -> String {
    match parts.first() {
        Some(Part::Text { text }) => text.clone(),
        _ => String::new(),
    }
}

fn forward(recipients: Vec<Uuid>) -> MessageAuthorizeAnswer {
    MessageAuthorizeAnswer {
        verdict: MessageVerdict::Forward { recipients },
    }
}

fn block(reason: &str) -> MessageAuthorizeAnswer {
    MessageAuthorizeAnswer {
        verdict: MessageVerdict::Block {
            reason: Some(reason.into()),
        },
    }
}

impl Moderator {
    fn authorize(&mut self, p: &MessageAuthorizeCallback) -> MessageAuthorizeAnswer {
        let sender = p.message.sender_id;
        let others: Vec<Uuid> = p
            .conversation
            .participants
            .iter()
            .copied()
            .filter(|a| *a != sender)
            .collect();
        let text = text_of(&p.message.parts);
        match self.phase {
            Phase::Night if Some(p.conversation.id) == self.wolf_chat => {
                self.wolf_chat_recipients.push(others.clone());
                if let Some(victim) = text
                    .strip_prefix("kill ")
                    .and_then(|v| v.parse::<Uuid>().ok())
                {
                    if self.victim.is_none() && !self.wolves.contains(&victim) {
                        self.victim = Some(victim);
                        self.maybe_dawn();
                    }
                }
                forward(others)
            }
            Phase::Night => {
                self.night_blocked += 1;
                self.maybe_dawn();
                block("night phase is closed")
            }
            Phase::Day
                if Some(sender) == self.turn_order.get(self.turn).copied()
                    && text.starts_with("I accuse ") =>
            {
                if let Some(accused) = text
                    .strip_prefix("I accuse ")
                    .and_then(|v| v.parse::<Uuid>().ok())
                {
                    *self.accusations.entry(accused).or_default() += 1;
                }
                self.speakers.push(sender);
                self.turn += 1;
                match self.turn_order.get(self.turn) {
                    Some(next) => {
                        if let Some(lease) = self.held.remove(next) {
                            let _ = self.actions.send(Action::Resolve(lease));
                        }
                    }
                    None => {
                        self.phase = Phase::Over;
                        let _ = self.actions.send(Action::Vote);
                    }
                }
                forward(others)
            }
            Phase::Day => block("not your turn"),
            Phase::Setup | Phase::Over => block("the game is not running"),
        }
    }

    /// The night ends once the wolves chose and every villager has tried
    /// (and failed) to talk, in whatever order those messages came.
    fn maybe_dawn(&mut self) {
        let villagers = self.participants.len() - self.wolves.len();
        let Some(victim) = self.victim else { return };
        if self.phase != Phase::Night || self.night_blocked < villagers {
            return;
        }
        self.phase = Phase::Day;
        self.turn_order = self
            .participants
            .iter()
            .copied()
            .filter(|a| *a != victim)
            .collect();
        let evidence = self.wolves[0];
        let _ = self.actions.send(Action::Post(
            self.town.expect("town"),
            format!("Day breaks: {victim} was killed. Paw prints lead to {evidence}."),
        ));
    }

    fn admit(&mut self, p: &DispatchAuthorizeCallback) -> DispatchAuthorizeAnswer {
        let who = p.lease.recipient_id;
        // The callback carries the message: the day announcement is the
        // moderator's own "Day breaks" (agents may ask before the app's own
        // send call has even returned).
        let is_day_message = p.message.origin == switchboard::domain::message::Origin::App
            && text_of(&p.message.parts).starts_with("Day breaks");
        let admission = if self.phase != Phase::Day || !is_day_message {
            AdmissionAnswer::Deny {
                reason: Some("nothing to act on".into()),
            }
        } else if Some(who) == self.victim {
            AdmissionAnswer::Deny {
                reason: Some("the dead do not speak".into()),
            }
        } else if Some(who) == self.turn_order.get(self.turn).copied() {
            AdmissionAnswer::Grant {
                lease_timeout_ms: Some(30_000),
            }
        } else {
            self.held.insert(who, p.lease.lease_id);
            AdmissionAnswer::Hold {
                reason: Some("waiting for your turn".into()),
            }
        };
        DispatchAuthorizeAnswer { admission }
    }
}

async fn moderator_loop(
    app: Arc<AppClient>,
    state: Arc<Mutex<Moderator>>,
    mut actions: mpsc::UnboundedReceiver<Action>,
    mut events: mpsc::UnboundedReceiver<Notification>,
    done: oneshot::Sender<Summary>,
) -> anyhow::Result<()> {
    loop {
        tokio::select! {
            Some(note) = events.recv() => {
                if note.method == "app/task/activated" {
                    let accepted: AcceptedTask = serde_json::from_value(note.params["payload"].clone())?;
                    let (town, chat) = {
                        let find = |key: &str| accepted.conversations.iter().find(|c| c.key.as_deref() == Some(key)).map(|c| c.id);
                        (find("town-square").expect("town square"), find("werewolf-chat").expect("werewolf chat"))
                    };
                    // The first invited agents are the wolves.
                    let participants: Vec<Uuid> = accepted.task.participants.iter().map(|p| p.agent_id).collect();
                    let wolves: Vec<Uuid> = participants.iter().copied().skip(1).take(WOLVES).collect();
                    {
                        let mut m = state.lock().unwrap();
                        m.task = Some(accepted.task.id);
                        m.town = Some(town);
                        m.wolf_chat = Some(chat);
                        m.wolves = wolves.clone();
                        m.participants = participants;
                    }
                    app.call::<AppConversationAdd>(AppConversationAddParams { conversation_id: chat, participants: wolves }).await?;
                    state.lock().unwrap().phase = Phase::Night;
                    post(&app, town, "Night falls. Villagers, sleep.").await?;
                } else if note.method == "app/interaction/created" {
                    let interaction: Interaction = serde_json::from_value(note.params["payload"]["interaction"].clone())?;
                    if tally(&app, &state, &interaction).await? {
                        let summary = finish(&app, &state).await?;
                        let _ = done.send(summary);
                        return Ok(());
                    }
                }
            }
            Some(action) = actions.recv() => match action {
                Action::Post(conversation, text) => {
                    post(&app, conversation, &text).await?;
                }
                Action::Resolve(lease) => {
                    app.call::<AppDispatchResolve>(DispatchResolveParams {
                        lease_id: lease,
                        resolution: Resolution::Grant { lease_timeout_ms: Some(30_000) },
                    })
                    .await?;
                }
                Action::Vote => {
                    let (town, living) = { let m = state.lock().unwrap(); (m.town.unwrap(), m.turn_order.clone()) };
                    vote_card(&app, town, &living).await?;
                }
            },
            else => return Ok(()),
        }
    }
}

/// The vote: one button per living agent (its id is the button's
/// `customId`), each agent pressing once.
async fn vote_card(app: &AppClient, town: Uuid, living: &[Uuid]) -> anyhow::Result<()> {
    let components = living
        .iter()
        .map(|a| NewComponent {
            kind: ComponentKind::Button,
            custom_id: a.to_string(),
            label: Some(format!("Lynch {a}")),
            style: None,
            placeholder: None,
            options: None,
            min_values: None,
            max_values: None,
            title: None,
            fields: None,
            trigger: None,
            required_capability: None,
            restricted_to: None,
            expires_in_seconds: None,
        })
        .collect();
    app.call::<AppMessageSend>(MessageSendParams {
        conversation_id: town,
        parts: vec![Part::Text {
            text: "Vote: who is the wolf?".into(),
        }],
        client_msg_id: None,
        reply_to: None,
        thread_id: None,
        components: Some(components),
        card_use: Some(CardUse::OncePerPrincipal),
    })
    .await?;
    Ok(())
}

/// Counts one vote and acknowledges it; true once every living agent voted.
async fn tally(
    app: &AppClient,
    state: &Mutex<Moderator>,
    interaction: &Interaction,
) -> anyhow::Result<bool> {
    let suspect: Uuid = interaction.custom_id.parse()?;
    app.call::<AppInteractionRespond>(InteractionRespondParams {
        interaction_id: interaction.interaction_id,
        state: RespondState::Acknowledged,
        reply: None,
    })
    .await?;
    let mut m = state.lock().unwrap();
    *m.votes.entry(suspect).or_default() += 1;
    m.voters.push(interaction.invoked_by.principal_id);
    Ok(m.voters.len() == m.turn_order.len())
}

/// Lynches the most voted, announces it and closes the task.
async fn finish(app: &AppClient, state: &Mutex<Moderator>) -> anyhow::Result<Summary> {
    let summary = {
        let m = state.lock().unwrap();
        let lynched = m
            .votes
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(a, _)| *a)
            .expect("votes");
        Summary {
            wolves: m.wolves.clone(),
            victim: m.victim.expect("victim"),
            night_blocked: m.night_blocked,
            wolf_chat_recipients: m.wolf_chat_recipients.clone(),
            speakers: m.speakers.clone(),
            turn_order: m.turn_order.clone(),
            votes: m.votes.clone(),
            voters: m.voters.clone(),
            lynched,
            names: HashMap::new(),
        }
    };
    let (town, task) = {
        let m = state.lock().unwrap();
        (m.town.unwrap(), m.task.unwrap())
    };
    post(
        app,
        town,
        &format!("The village lynched {}.", summary.lynched),
    )
    .await?;
    app.call::<AppTaskClose>(TaskCloseParams {
        task_id: task,
        reason: Some("round over".into()),
    })
    .await?;
    Ok(summary)
}

async fn post(app: &AppClient, conversation: Uuid, text: &str) -> anyhow::Result<Uuid> {
    let sent = app
        .call::<AppMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: vec![Part::Text { text: text.into() }],
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await?;
    Ok(sent.message.id)
}

async fn say(agent: &AgentClient, conversation: Uuid, text: String) -> anyhow::Result<()> {
    agent
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: vec![Part::Text { text }],
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await?;
    Ok(())
}

/// A scripted player: sleeps (or hunts) at night, asks for the floor by day.
async fn player(agent: AgentClient, app_id: Uuid) -> anyhow::Result<()> {
    let me = agent.agent_id();
    let mut events = agent.connection.notifications().expect("notifications");
    let mut town: Option<(Uuid, Vec<Uuid>)> = None;
    let mut pack: Vec<Uuid> = Vec::new();
    let mut wolf_chat: Option<Uuid> = None;
    let mut suspect: Option<Uuid> = None;
    let mut victim: Option<Uuid> = None;
    let mut accused: Option<Uuid> = None;
    let mut day_conversation = None;
    while let Some(note) = events.recv().await {
        let payload = &note.params["payload"];
        match note.method.as_str() {
            "agent/conversation/created" if payload["conversation"]["key"] == "town-square" => {
                let c: switchboard::domain::conversation::Conversation =
                    serde_json::from_value(payload["conversation"].clone())?;
                town = Some((c.id, c.participants));
            }
            "agent/conversation/joined" => {
                let c: switchboard::domain::conversation::Conversation =
                    serde_json::from_value(payload["conversation"].clone())?;
                wolf_chat = Some(c.id);
                pack = c.participants;
            }
            "agent/message/received" => {
                let text = payload["message"]["parts"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let from_app = payload["message"]["senderId"] == json!(app_id);
                let conversation: Uuid =
                    serde_json::from_value(payload["message"]["conversationId"].clone())?;
                let message: Uuid = serde_json::from_value(payload["message"]["id"].clone())?;
                if from_app && payload["message"]["card"].is_object() {
                    // The vote: press the button of the one accused.
                    if let Some(button) = accused.and_then(|a| button_of(&payload["message"], a)) {
                        agent
                            .call::<AgentInteractionCreate>(InteractionCreateParams {
                                message_id: message,
                                component_id: button,
                                values: None,
                            })
                            .await?;
                    }
                } else if from_app && text.starts_with("Night falls") {
                    let (town_id, everyone) = town.clone().expect("town square first");
                    match wolf_chat {
                        // The first wolf names the first villager.
                        Some(chat) if pack.first() == Some(&me) => {
                            let prey = everyone
                                .iter()
                                .copied()
                                .find(|a| !pack.contains(a))
                                .expect("a villager");
                            say(&agent, chat, format!("kill {prey}")).await?;
                        }
                        Some(_) => {}
                        None => say(&agent, town_id, "Who's there?".into()).await?,
                    }
                } else if from_app && text.starts_with("Day breaks") {
                    victim = text
                        .split_whitespace()
                        .nth(2)
                        .and_then(|v| v.trim_end_matches(':').parse().ok());
                    suspect = text
                        .rsplit(' ')
                        .next()
                        .and_then(|v| v.trim_end_matches('.').parse().ok());
                    if victim != Some(me) {
                        day_conversation = Some(conversation);
                        agent
                            .call::<AgentDispatchRequest>(DispatchRequestParams {
                                conversation_id: conversation,
                                message_id: message,
                            })
                            .await?;
                    }
                }
            }
            "agent/dispatch/released" if payload["lease"]["state"] == "granted" => {
                let (_, everyone) = town.clone().expect("town square");
                // Wolves deflect onto a living villager; villagers follow
                // the evidence.
                let chosen = if pack.contains(&me) {
                    everyone
                        .iter()
                        .copied()
                        .find(|a| {
                            !pack.contains(a)
                                && Some(*a) != suspect
                                && Some(*a) != victim
                                && *a != me
                        })
                        .expect("someone")
                } else {
                    suspect.expect("evidence")
                };
                accused = Some(chosen);
                say(
                    &agent,
                    day_conversation.expect("day"),
                    format!("I accuse {chosen}"),
                )
                .await?;
                let lease: Uuid = serde_json::from_value(payload["lease"]["leaseId"].clone())?;
                agent
                    .call::<AgentDispatchComplete>(LeaseParams { lease_id: lease })
                    .await?;
            }
            "agent/task/closed" => return Ok(()),
            _ => {}
        }
    }
    Ok(())
}

/// The vote card's button for `suspect` (its `customId` is the id).
fn button_of(message: &Value, suspect: Uuid) -> Option<Uuid> {
    message["card"]["components"]
        .as_array()?
        .iter()
        .find(|c| c["customId"] == json!(suspect.to_string()))
        .and_then(|c| c["componentId"].as_str())
        .and_then(|id| id.parse().ok())
}

/// Registers the app and the players on the hub at `base`, plays one round,
/// and reports what happened.
pub async fn play_round(base: &str) -> anyhow::Result<Summary> {
    let creds = AppClient::register(base, &manifest()).await?;
    let (actions_tx, actions_rx) = mpsc::unbounded_channel();
    let state = Arc::new(Mutex::new(Moderator {
        phase: Phase::Setup,
        task: None,
        town: None,
        wolf_chat: None,
        wolves: Vec::new(),
        participants: Vec::new(),
        victim: None,
        night_blocked: 0,
        wolf_chat_recipients: Vec::new(),
        turn_order: Vec::new(),
        turn: 0,
        held: HashMap::new(),
        speakers: Vec::new(),
        accusations: HashMap::new(),
        votes: HashMap::new(),
        voters: Vec::new(),
        actions: actions_tx,
    }));
    let (s1, s2) = (state.clone(), state.clone());
    let app = AppClient::builder(base, &creds.app_key)
        .handle::<AppTaskCreate, _, _>(|_| async {
            Ok(TaskCreateAnswer {
                verdict: TaskVerdict::Accept {},
            })
        })
        .handle::<AppMessageAuthorize, _, _>(move |p| {
            let answer = s1.lock().unwrap().authorize(&p);
            async move { Ok(answer) }
        })
        .handle::<AppDispatchAuthorize, _, _>(move |p| {
            let answer = s2.lock().unwrap().admit(&p);
            async move { Ok(answer) }
        })
        .connect()
        .await?;
    let events = app.connection.notifications().expect("notifications");
    let app = Arc::new(app);
    let (done_tx, done_rx) = oneshot::channel();
    let moderator = tokio::spawn(moderator_loop(
        app.clone(),
        state,
        actions_rx,
        events,
        done_tx,
    ));

    let mut players = Vec::new();
    let mut ids = Vec::new();
    let mut names = std::collections::HashMap::new();
    for i in 0..PLAYERS {
        let name = format!("player-{i}");
        let c = AgentClient::register(base, &name, None).await?;
        let agent = AgentClient::connect(base, &c.agent_key).await?;
        names.insert(agent.agent_id(), name);
        ids.push(agent.agent_id());
        players.push(agent);
    }
    let initiator = players.remove(0);
    let initiator_id = initiator.agent_id();
    let mut running: Vec<_> = players
        .into_iter()
        .map(|p| tokio::spawn(player(p, creds.app_id)))
        .collect();
    // The initiator plays too, once the task exists.
    let task = initiator
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: creds.app_id,
            invited_agent_ids: ids.iter().copied().filter(|a| *a != initiator_id).collect(),
            initial_conversation: None,
        })
        .await?;
    let _ = task;
    running.push(tokio::spawn(player(initiator, creds.app_id)));

    let mut summary = tokio::time::timeout(Duration::from_secs(60), done_rx)
        .await
        .map_err(|_| anyhow::anyhow!("the round did not finish within 60 s"))??;
    summary.names = names;
    moderator.await??;
    for p in running {
        p.await??;
    }
    Ok(summary)
}
