// One round of Werewolf on switchboard, the TypeScript port of
// examples/werewolf/game.rs: a moderator app and scripted agents, all
// through @switchboard/sdk.
//
// - `town-square` (participantFilter `all`) holds everyone; `werewolf-chat`
//   (`none`) gets the wolves, added by the app.
// - Night: `message_authorize` blocks the town square and forwards the
//   wolves' chat to the wolves only. The wolves' "kill" ends the night.
// - Day: every living agent asks for a dispatch lease on the moderator's
//   "Day breaks" message; `dispatch_authorize` grants the current speaker
//   and holds the others, and the app releases the next hold
//   (`app/dispatch/resolve`) when a speaker has spoken. The day message gate
//   blocks anyone speaking out of turn.
// - When everyone has spoken, the most accused agent is lynched and the app
//   closes the task.

import {
  AgentClient,
  AppClient,
  AsyncQueue,
  type AppDispatchAuthorizeParams,
  type AppDispatchAuthorizeResult,
  type AppMessageAuthorizeParams,
  type AppMessageAuthorizeResult,
  type Part,
} from "../../src/index.js";

export const PLAYERS = 7;
export const WOLVES = 2;

export function manifest() {
  return {
    name: "Werewolf",
    description: "Agents play Werewolf in task-scoped conversations",
    limits: { maxParticipants: 12 },
    conversations: [
      { key: "town-square", name: "Town Square", participantFilter: "all" as const },
      { key: "werewolf-chat", name: "Werewolf Chat", participantFilter: "none" as const },
    ],
    hooks: {
      dispatch_authorize: { kind: "hook" as const, timeoutMs: 5000 },
      message_authorize: { kind: "hook" as const, timeoutMs: 5000 },
      task_create: { kind: "hook" as const, timeoutMs: 5000 },
    },
  };
}

/** What happened in the round. */
export interface Summary {
  wolves: string[];
  victim: string;
  /** Town-square messages the night blocked. */
  nightBlocked: number;
  /** Wolf-chat messages and who received them. */
  wolfChatRecipients: string[][];
  /** The order in which living agents spoke during the day. */
  speakers: string[];
  /** The order the moderator meant them to speak in. */
  turnOrder: string[];
  lynched: string;
}

type Phase = "setup" | "night" | "day" | "over";

/** Something the moderator must do through its socket (gate handlers only decide; they never call). */
type Action = { kind: "post"; conversationId: string; text: string } | { kind: "resolve"; leaseId: string } | { kind: "finish" };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const uuidOr = (text: string | undefined) => (text && UUID.test(text) ? text : undefined);

function textOf(parts: Part[]): string {
  const first = parts[0];
  return first?.type === "text" ? first.text : "";
}

const forward = (recipients: string[]): AppMessageAuthorizeResult => ({ verdict: { decision: "Forward", recipients } });
const block = (reason: string): AppMessageAuthorizeResult => ({ verdict: { decision: "Block", reason } });

class Moderator {
  phase: Phase = "setup";
  task?: string;
  town?: string;
  wolfChat?: string;
  wolves: string[] = [];
  participants: string[] = [];
  victim?: string;
  nightBlocked = 0;
  wolfChatRecipients: string[][] = [];
  turnOrder: string[] = [];
  turn = 0;
  held = new Map<string, string>();
  speakers: string[] = [];
  accusations = new Map<string, number>();
  readonly actions = new AsyncQueue<Action>();

  authorize(p: AppMessageAuthorizeParams): AppMessageAuthorizeResult {
    const sender = p.message.senderId;
    const others = p.conversation.participants.filter((a) => a !== sender);
    const text = textOf(p.message.parts);
    if (this.phase === "night" && p.conversation.id === this.wolfChat) {
      this.wolfChatRecipients.push(others);
      const victim = uuidOr(text.startsWith("kill ") ? text.slice(5) : undefined);
      if (victim && !this.victim && !this.wolves.includes(victim)) {
        this.victim = victim;
        this.maybeDawn();
      }
      return forward(others);
    }
    if (this.phase === "night") {
      this.nightBlocked += 1;
      this.maybeDawn();
      return block("night phase is closed");
    }
    if (this.phase === "day" && sender === this.turnOrder[this.turn] && text.startsWith("I accuse ")) {
      const accused = uuidOr(text.slice("I accuse ".length));
      if (accused) this.accusations.set(accused, (this.accusations.get(accused) ?? 0) + 1);
      this.speakers.push(sender);
      this.turn += 1;
      const next = this.turnOrder[this.turn];
      if (next === undefined) {
        this.phase = "over";
        this.actions.push({ kind: "finish" });
      } else {
        const lease = this.held.get(next);
        if (lease) {
          this.held.delete(next);
          this.actions.push({ kind: "resolve", leaseId: lease });
        }
      }
      return forward(others);
    }
    if (this.phase === "day") return block("not your turn");
    return block("the game is not running");
  }

  /** The night ends once the wolves chose and every villager has tried (and failed) to talk. */
  private maybeDawn(): void {
    const villagers = this.participants.length - this.wolves.length;
    const victim = this.victim;
    if (!victim || this.phase !== "night" || this.nightBlocked < villagers) return;
    this.phase = "day";
    this.turnOrder = this.participants.filter((a) => a !== victim);
    const evidence = this.wolves[0];
    this.actions.push({
      kind: "post",
      conversationId: this.town as string,
      text: `Day breaks: ${victim} was killed. Paw prints lead to ${evidence}.`,
    });
  }

  admit(p: AppDispatchAuthorizeParams): AppDispatchAuthorizeResult {
    const who = p.lease.recipientId;
    // The callback carries the message: agents may ask before the app's own send has returned.
    const isDayMessage = p.message.origin === "app" && textOf(p.message.parts).startsWith("Day breaks");
    if (this.phase !== "day" || !isDayMessage) return { admission: { decision: "deny", reason: "nothing to act on" } };
    if (who === this.victim) return { admission: { decision: "deny", reason: "the dead do not speak" } };
    if (who === this.turnOrder[this.turn]) return { admission: { decision: "grant", leaseTimeoutMs: 30_000 } };
    this.held.set(who, p.lease.leaseId);
    return { admission: { decision: "hold", reason: "waiting for your turn" } };
  }

  summary(): Summary {
    const lynched = [...this.accusations.entries()].sort((x, y) => y[1] - x[1])[0]?.[0];
    if (!lynched || !this.victim) throw new Error("the round ended without a victim or an accusation");
    return {
      wolves: this.wolves,
      victim: this.victim,
      nightBlocked: this.nightBlocked,
      wolfChatRecipients: this.wolfChatRecipients,
      speakers: this.speakers,
      turnOrder: this.turnOrder,
      lynched,
    };
  }
}

async function post(app: AppClient, conversationId: string, text: string): Promise<string> {
  const sent = await app.call("app/message/send", { conversationId, parts: [{ type: "text", text }] });
  return sent.message.id;
}

async function say(agent: AgentClient, conversationId: string, text: string): Promise<void> {
  await agent.call("agent/message/send", { conversationId, parts: [{ type: "text", text }] });
}

/** Sets the game up when the task is accepted. */
async function setupLoop(app: AppClient, m: Moderator): Promise<void> {
  for await (const event of app.events()) {
    if (event.type !== "app/task/activated") continue;
    const { task, conversations } = event.payload;
    const find = (key: string) => {
      const c = conversations.find((c) => c.key === key);
      if (!c) throw new Error(`no ${key} conversation`);
      return c.id;
    };
    m.task = task.id;
    m.town = find("town-square");
    m.wolfChat = find("werewolf-chat");
    m.participants = task.participants.map((p) => p.agentId);
    // The first invited agents are the wolves.
    m.wolves = m.participants.slice(1, 1 + WOLVES);
    await app.call("app/conversation/add", { conversationId: m.wolfChat, participants: m.wolves });
    m.phase = "night";
    await post(app, m.town, "Night falls. Villagers, sleep.");
    return;
  }
}

/** Carries out what the gates decided, until the round is over. */
async function actionLoop(app: AppClient, m: Moderator): Promise<Summary> {
  for await (const action of m.actions) {
    if (action.kind === "post") {
      await post(app, action.conversationId, action.text);
    } else if (action.kind === "resolve") {
      await app.call("app/dispatch/resolve", { leaseId: action.leaseId, resolution: { decision: "grant", leaseTimeoutMs: 30_000 } });
    } else {
      const summary = m.summary();
      await post(app, m.town as string, `The village lynched ${summary.lynched}.`);
      await app.call("app/task/close", { taskId: m.task as string, reason: "round over" });
      return summary;
    }
  }
  throw new Error("the moderator's actions ended before the round");
}

/** A scripted player: sleeps (or hunts) at night, asks for the floor by day. */
async function player(agent: AgentClient, appId: string): Promise<void> {
  const me = agent.agentId;
  let town: { id: string; everyone: string[] } | undefined;
  let pack: string[] = [];
  let wolfChat: string | undefined;
  let suspect: string | undefined;
  let dayConversation: string | undefined;
  for await (const event of agent.events()) {
    if (event.type === "agent/conversation/created" && event.payload.conversation.key === "town-square") {
      town = { id: event.payload.conversation.id, everyone: event.payload.conversation.participants };
    } else if (event.type === "agent/conversation/joined") {
      wolfChat = event.payload.conversation.id;
      pack = event.payload.conversation.participants;
    } else if (event.type === "agent/message/received") {
      const message = event.payload.message;
      const text = textOf(message.parts);
      const fromApp = message.senderId === appId;
      if (fromApp && text.startsWith("Night falls")) {
        if (!town) throw new Error("the town square comes first");
        if (wolfChat && pack[0] === me) {
          // The first wolf names the first villager.
          const prey = town.everyone.find((a) => !pack.includes(a));
          if (!prey) throw new Error("no villager");
          await say(agent, wolfChat, `kill ${prey}`);
        } else if (!wolfChat) {
          await say(agent, town.id, "Who's there?");
        }
      } else if (fromApp && text.startsWith("Day breaks")) {
        const words = text.split(/\s+/);
        const victim = uuidOr(words[2]);
        suspect = uuidOr(words[words.length - 1].replace(/\.$/, ""));
        if (victim !== me) {
          dayConversation = message.conversationId;
          await agent.call("agent/dispatch/request", { conversationId: message.conversationId, messageId: message.id });
        }
      }
    } else if (event.type === "agent/dispatch/released" && event.payload.lease.state === "granted") {
      if (!town || !dayConversation) throw new Error("granted before the day");
      // Wolves deflect; villagers follow the evidence.
      const accused = pack.includes(me) ? town.everyone.find((a) => !pack.includes(a) && a !== suspect && a !== me) : suspect;
      if (!accused) throw new Error("no one to accuse");
      await say(agent, dayConversation, `I accuse ${accused}`);
      await agent.call("agent/dispatch/complete", { leaseId: event.payload.lease.leaseId });
    } else if (event.type === "agent/task/closed") {
      return;
    }
  }
}

function deadline<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms))),
  ]).finally(() => clearTimeout(timer));
}

/** Registers the app and the players on the hub at `base`, plays one round, and reports what happened. */
export async function playRound(base: string): Promise<Summary> {
  const creds = await AppClient.register(base, manifest());
  const m = new Moderator();
  const app = await AppClient.connect(base, creds.appKey, {
    handlers: {
      "app/task/create": () => ({ verdict: { decision: "Accept" } }),
      "app/message/authorize": (p) => m.authorize(p),
      "app/dispatch/authorize": (p) => m.admit(p),
    },
  });
  const agents: AgentClient[] = [];
  try {
    const setup = setupLoop(app, m);
    const round = actionLoop(app, m);
    for (let i = 0; i < PLAYERS; i++) {
      const c = await AgentClient.register(base, { name: `player-${i}` });
      agents.push(await AgentClient.connect(base, c.agentKey));
    }
    const [initiator, ...invited] = agents;
    const running = invited.map((p) => player(p, creds.appId));
    await initiator.call("agent/task/request", { appId: creds.appId, invitedAgentIds: invited.map((a) => a.agentId) });
    // The initiator plays too, once the task exists.
    running.push(player(initiator, creds.appId));
    const summary = await deadline(60_000, "the round", round);
    await deadline(10_000, "the setup", setup);
    await deadline(10_000, "the players", Promise.all(running));
    return summary;
  } finally {
    m.actions.end();
    app.close();
    for (const a of agents) a.close();
  }
}
