// A dropped socket: the client reconnects with backoff and resumes from the
// last event it received, so the events it hands out are exactly the
// hub's log, with no loss and no duplicate by id. And a cursor persisted in
// a file carries a new process on from where the last one stopped.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import {
  AgentClient,
  ClientClosedError,
  FileCursorStore,
  MemoryCursorStore,
  backoffDelay,
  isRpcError,
  type ResyncData,
  DEFAULT_RECONNECT,
  type AgentEvent,
} from "../src/index.js";
import { TestHub } from "./support/hub.js";
import { nextEmit, readUntil, within } from "./support/wait.js";
import { agent } from "./support/world.js";

let hub: TestHub;
before(async () => {
  hub = await TestHub.start();
});
after(async () => {
  await hub?.stop();
});

const messages = (events: AgentEvent[]) => events.filter((e) => e.type === "agent/message/received");

async function send(client: AgentClient, conversationId: string, n: number, from: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = from; i < from + n; i++) {
    const sent = await client.call("agent/message/send", { conversationId, parts: [{ type: "text", text: `m${i}` }] });
    ids.push(sent.message.id);
  }
  return ids;
}

/** The recipient's whole log, as the hub's REST catch-up serves it. */
async function logOf(key: string): Promise<Array<{ id: string; seq: number; type: string }>> {
  const r = await hub.request("GET", "/api/v1/events?after=0&limit=500", undefined, key);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.events;
}

test("after a dropped socket the client resumes: no loss, no duplicate by event id", async () => {
  const a = await agent(hub);
  const b = await agent(hub, { reconnect: { initialDelayMs: 50, maxDelayMs: 200, maxAttempts: 20 } });
  try {
    const conv = await a.client.call("agent/conversation/create", { kind: "direct", participants: [b.id] });
    const events = b.client.events()[Symbol.asyncIterator]();
    const sent = await send(a.client, conv.conversation.id, 3, 0);
    const first = await readUntil(events, 10_000, (s) => messages(s).length === 3);
    const lastSeq = first[first.length - 1].seq as number;

    // The network fails: no close frame, the TCP connection is just gone.
    // Messages sent while the client is away must come back by replay; a
    // cycle whose reconnect beat the sends replays nothing, so drop again
    // (bounded) until one did.
    let replayed = 0;
    let cycles = 0;
    let resumedAfter = lastSeq;
    while (replayed === 0 && cycles < 5) {
      cycles += 1;
      const disconnected = nextEmit(b.client, "disconnected", 5_000);
      const reconnected = nextEmit(b.client, "connected", 10_000);
      b.client.session.connection!.drop();
      await disconnected;
      sent.push(...(await send(a.client, conv.conversation.id, 3, sent.length)));
      const [session] = await reconnected;
      if (cycles === 1) assert.equal(session.events.startAfter, lastSeq, "resumed after the last received event");
      else assert.ok(session.events.startAfter >= resumedAfter, "the reconnect resumed, not restarted");
      resumedAfter = session.events.startAfter;
      replayed = session.events.latestSeq - session.events.startAfter;
    }
    assert.ok(replayed > 0, `no reconnect in ${cycles} cycles had events to replay`);
    sent.push(...(await send(a.client, conv.conversation.id, 2, sent.length)));

    const rest = await readUntil(events, 10_000, (s) => messages(s).length === sent.length - 3);
    const all = [...first, ...rest];
    const ids = all.map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, "no event twice");
    const log = await logOf(b.key);
    assert.deepEqual(ids, log.map((e) => e.id), "exactly the hub's log, in order");
    assert.deepEqual(all.map((e) => e.seq), log.map((e) => e.seq));
    assert.deepEqual(
      messages(all).map((e) => (e.type === "agent/message/received" ? e.payload.message.id : "")),
      sent,
    );
  } finally {
    a.client.close();
    b.client.close();
  }
});

test("a file cursor store resumes a new process after the last processed event", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdk-cursor-"));
  const store = new FileCursorStore(join(dir, "nested", "cursor.json"));
  const a = await agent(hub);
  const creds = await AgentClient.register(hub.base, { name: "resumer" });
  try {
    const first = await AgentClient.connect(hub.base, creds.agentKey, { cursorStore: store });
    const conv = await a.client.call("agent/conversation/create", { kind: "direct", participants: [creds.agentId] });
    const sent = await send(a.client, conv.conversation.id, 4, 0);
    const events = first.events()[Symbol.asyncIterator]();
    const seen = await readUntil(events, 10_000, (s) => messages(s).length === 2);
    // Asking for no more marks the last one read as processed.
    await events.return?.();
    first.close();
    const saved = await store.load();
    assert.equal(saved?.after, seen[seen.length - 1].seq);

    const second = await AgentClient.connect(hub.base, creds.agentKey, { cursorStore: store });
    try {
      assert.equal(second.connectResult.events.startAfter, saved?.after);
      const later = await readUntil(second.events()[Symbol.asyncIterator](), 10_000, (s) => messages(s).length === 2);
      assert.deepEqual(
        messages(later).map((e) => (e.type === "agent/message/received" ? e.payload.message.id : "")),
        sent.slice(2),
      );
      assert.ok(later.every((e) => !seen.some((s) => s.id === e.id)), "nothing processed before comes again");
    } finally {
      second.close();
    }
  } finally {
    a.client.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the client gives up after the policy's attempts and ends its event stream", async () => {
  const gone = await TestHub.start();
  const creds = await AgentClient.register(gone.base, { name: "orphan" });
  const client = await AgentClient.connect(gone.base, creds.agentKey, { reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxAttempts: 3 } });
  const attempts: number[] = [];
  client.on("reconnecting", (n: number) => attempts.push(n));
  const closed = nextEmit(client, "closed", 15_000);
  const events = client.events()[Symbol.asyncIterator]();
  await gone.stop();
  await closed;
  assert.deepEqual(attempts, [1, 2, 3]);
  await assert.rejects(within(5_000, "stream end", events.next()), (e: unknown) => e instanceof ClientClosedError);
  await assert.rejects(client.call("agent/identity/get"), (e: unknown) => e instanceof ClientClosedError && e._tag === "ClientClosedError");
});

test("backoff is jittered, grows, and stays within its bounds", () => {
  const policy = { ...DEFAULT_RECONNECT, initialDelayMs: 100, maxDelayMs: 1000 };
  assert.equal(backoffDelay(policy, 0, 0, () => 0.999), 99);
  assert.equal(backoffDelay(policy, 3, 0, () => 0.999), 799);
  assert.equal(backoffDelay(policy, 30, 0, () => 0.999), 999, "capped at maxDelayMs");
  assert.equal(backoffDelay(policy, 5, 0, () => 0), 0, "full jitter reaches zero");
  assert.equal(backoffDelay(policy, 0, 2500, () => 0.5), 2500, "a retryAfterMs floor wins");
  const draws = Array.from({ length: 200 }, () => backoffDelay(policy, 4));
  assert.ok(draws.every((d) => d >= 0 && d <= 1000));
  assert.ok(new Set(draws).size > 50, "delays are spread, not synchronized");
});

test("a cursor the log cannot serve is ResyncRequiredError, or a resync through onResync", async () => {
  const creds = await AgentClient.register(hub.base, { name: "resyncer" });
  const stale = new MemoryCursorStore();
  await stale.save({ syncEpoch: "an-epoch-of-another-database", after: 0 });
  await assert.rejects(AgentClient.connect(hub.base, creds.agentKey, { cursorStore: stale }), (e: unknown) => {
    assert.ok(isRpcError(e, "ResyncRequiredError"), String(e));
    return true;
  });
  const resyncs: ResyncData[] = [];
  const client = await AgentClient.connect(hub.base, creds.agentKey, {
    cursorStore: stale,
    onResync: async (data) => {
      resyncs.push(data);
    },
  });
  try {
    assert.equal(resyncs.length, 1);
    assert.equal(client.connectResult.events.syncEpoch, resyncs[0].syncEpoch);
    assert.equal(client.connectResult.events.startAfter, Math.max(0, resyncs[0].oldestSeq - 1));
    assert.deepEqual(await stale.load(), { syncEpoch: resyncs[0].syncEpoch, after: client.connectResult.events.startAfter });
  } finally {
    client.close();
  }
});

test("a hub that stops sending heartbeats is dropped and reconnected to", async () => {
  const frozen = await TestHub.start({
    env: { SWITCHBOARD_GATEWAY__HEARTBEAT_INTERVAL_MS: "100", SWITCHBOARD_GATEWAY__HEARTBEAT_TIMEOUT_MS: "400" },
  });
  try {
    const creds = await AgentClient.register(frozen.base, { name: "watcher" });
    const client = await AgentClient.connect(frozen.base, creds.agentKey, { reconnect: { initialDelayMs: 10, maxDelayMs: 50 } });
    try {
      assert.deepEqual(client.connectResult.limits.heartbeat, { intervalMs: 100, timeoutMs: 400 });
      const disconnected = nextEmit(client, "disconnected", 10_000);
      const reconnected = nextEmit(client, "connected", 20_000);
      frozen.signal("SIGSTOP");
      try {
        const [code] = await disconnected;
        assert.equal(code, 1006, "dropped by the client's watchdog, without a close frame");
      } finally {
        frozen.signal("SIGCONT");
      }
      await reconnected;
      assert.equal((await client.call("agent/identity/get")).agentId, creds.agentId);
    } finally {
      client.close();
    }
  } finally {
    await frozen.stop();
  }
});
