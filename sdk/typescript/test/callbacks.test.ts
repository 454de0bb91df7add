// The hub's calls to an app: the three gates and ping answered by the
// app's handlers; a handler that misses its deadline sends nothing (the
// hub has already failed the gate closed), and a late answer pushed onto
// the socket anyway is ignored by the hub.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { isRpcError, type AgentEvent, type AppHandlers, type LateAnswer } from "../src/index.js";
import { MOLTZAP_V1_NAMES } from "../src/callbacks.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ADMIN_TOKEN, TestHub } from "./support/hub.js";
import { nextEmit, readUntil, within } from "./support/wait.js";
import { agent, app, hookManifest } from "./support/world.js";

let hub: TestHub;
before(async () => {
  hub = await TestHub.start();
});
after(async () => {
  await hub?.stop();
});

const UNMATCHED = "switchboard_unmatched_responses_total";

test("the gates and ping are answered by the app's handlers", async () => {
  const calls: string[] = [];
  const handlers: AppHandlers = {
    "app/task/create": (p, ctx) => {
      calls.push("task_create");
      assert.ok(ctx.deadline > Date.now() && ctx.deadline <= Date.now() + 5000, "the manifest's timeoutMs is the deadline");
      return p.task.participants.length === 2 ? { verdict: { decision: "Accept" } } : { verdict: { decision: "Reject", reason: "two players" } };
    },
    "app/message/authorize": (p) => {
      calls.push("message_authorize");
      const others = p.conversation.participants.filter((id) => id !== p.message.senderId);
      return { verdict: { decision: "Forward", recipients: others } };
    },
    "app/dispatch/authorize": () => {
      calls.push("dispatch_authorize");
      return { admission: { decision: "grant", leaseTimeoutMs: 30_000 } };
    },
  };
  const moderator = await app(hub, hookManifest(5000), { handlers });
  const a = await agent(hub);
  const b = await agent(hub);
  try {
    const bEvents = b.client.events()[Symbol.asyncIterator]();
    const task = await a.client.call("agent/task/request", { appId: moderator.id, invitedAgentIds: [b.id] });
    assert.equal(task.task.state, "active");
    const main = task.conversations.find((c) => c.key === "main");
    assert.ok(main);
    const sent = await a.client.call("agent/message/send", { conversationId: main.id, parts: [{ type: "text", text: "go" }] });
    assert.deepEqual(sent.delivery, { state: "forwarded", recipients: 1 });
    const got = await readUntil<AgentEvent>(bEvents, 10_000, (s) => s.some((e) => e.type === "agent/message/received"));
    const received = got.find((e) => e.type === "agent/message/received");
    assert.ok(received?.type === "agent/message/received" && received.payload.message.id === sent.message.id);

    const lease = await b.client.call("agent/dispatch/request", { conversationId: main.id, messageId: sent.message.id });
    assert.equal(lease.lease.state, "pending");
    const released = await readUntil<AgentEvent>(bEvents, 10_000, (s) => s.some((e) => e.type === "agent/dispatch/released"));
    const ev = released.find((e) => e.type === "agent/dispatch/released");
    assert.ok(ev?.type === "agent/dispatch/released" && ev.payload.lease.state === "granted");

    const ping = await hub.request("POST", `/api/v1/apps/${moderator.id}/ping?timeoutMs=2000`, undefined, ADMIN_TOKEN);
    assert.equal(ping.status, 200);
    assert.equal(ping.body.outcome, "ok", JSON.stringify(ping.body));
    assert.deepEqual(calls, ["task_create", "message_authorize", "dispatch_authorize"]);
  } finally {
    moderator.client.close();
    a.client.close();
    b.client.close();
  }
});

test("a handler past its deadline sends nothing; a late answer sent anyway is ignored", async () => {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let aborted!: () => void;
  const abortSeen = new Promise<void>((r) => (aborted = r));
  const moderator = await app(hub, hookManifest(300), {
    handlers: {
      "app/task/create": async (_p, ctx) => {
        ctx.signal.addEventListener("abort", () => aborted());
        await released;
        return { verdict: { decision: "Accept" } };
      },
    },
  });
  const a = await agent(hub);
  const b = await agent(hub);
  try {
    const unmatchedBefore = await hub.metric(UNMATCHED);
    const late = nextEmit(moderator.client, "lateAnswer", 10_000);
    await assert.rejects(a.client.call("agent/task/request", { appId: moderator.id, invitedAgentIds: [b.id] }), (e: unknown) => {
      assert.ok(isRpcError(e, "TimeoutError"), String(e));
      assert.equal((e.data as { code: string }).code, "timeout");
      return true;
    });
    await within(5_000, "the handler's abort signal", abortSeen);
    release();
    const [drop] = (await late) as [LateAnswer];
    assert.equal(drop.method, "app/task/create");
    assert.equal(drop.deadlineMs, 300);
    // A round trip on the same socket: any answer the SDK had sent is read by now.
    await moderator.client.call("app/identity/get");
    assert.equal(await hub.metric(UNMATCHED), unmatchedBefore, "the SDK sent no late answer");

    const tasks = await a.client.call("agent/task/list", {});
    const failed = tasks.tasks.find((t) => t.appId === moderator.id);
    assert.ok(failed);
    assert.equal(failed.state, "failed");
    assert.equal(failed.failure?.code, "timeout");

    // The same answer pushed onto the socket by hand: the hub counts it and ignores it.
    moderator.client.session.connection!.sendRaw(JSON.stringify({ jsonrpc: "2.0", id: drop.id, result: { verdict: { decision: "Accept" } } }));
    await moderator.client.call("app/identity/get");
    assert.equal(await hub.metric(UNMATCHED), unmatchedBefore + 1, "the hub saw the late answer");
    const after = await a.client.call("agent/task/get", { taskId: failed.id });
    assert.equal(after.task.state, "failed", "the late Accept changed nothing");
  } finally {
    moderator.client.close();
    a.client.close();
    b.client.close();
  }
});

test("a handler that throws answers InternalError without its message; the gate fails closed", async () => {
  const errors: unknown[] = [];
  const moderator = await app(hub, hookManifest(2000), {
    handlers: {
      "app/task/create": () => {
        throw new Error("secret app state");
      },
    },
  });
  moderator.client.on("handlerError", (_m: string, e: unknown) => errors.push(e));
  const a = await agent(hub);
  const b = await agent(hub);
  try {
    await assert.rejects(a.client.call("agent/task/request", { appId: moderator.id, invitedAgentIds: [b.id] }), (e: unknown) => {
      assert.ok(isRpcError(e, "UnavailableError"), String(e));
      assert.equal((e.data as { code: string }).code, "app_error");
      assert.ok(!JSON.stringify(e.data).includes("secret"), "the handler's message stays in the app");
      return true;
    });
    assert.equal(errors.length, 1);
  } finally {
    moderator.client.close();
    a.client.close();
    b.client.close();
  }
});

test("a moltzap-v1 app's handlers answer the seed-002 names", async () => {
  const calls: string[] = [];
  const handlers: AppHandlers = {
    "app/task/create": () => ({ verdict: { decision: "Accept" } }),
    "app/message/authorize": (p) => {
      calls.push("message_authorize");
      const text = p.message.parts[0]?.type === "text" ? p.message.parts[0].text : "";
      if (text === "psst") return { verdict: { decision: "Block", reason: "quiet hours" } };
      return { verdict: { decision: "Forward", recipients: p.conversation.participants.filter((id) => id !== p.message.senderId) } };
    },
    "app/dispatch/authorize": () => {
      calls.push("dispatch_authorize");
      return { admission: { decision: "deny", reason: "not now" } };
    },
  };
  const moderator = await app(hub, hookManifest(5000, { callbackNames: "moltzap-v1" }), { handlers });
  const a = await agent(hub);
  const b = await agent(hub);
  try {
    const bEvents = b.client.events()[Symbol.asyncIterator]();
    const task = await a.client.call("agent/task/request", { appId: moderator.id, invitedAgentIds: [b.id] });
    const main = task.conversations.find((c) => c.key === "main");
    assert.ok(main);
    const blocked = await a.client.call("agent/message/send", { conversationId: main.id, parts: [{ type: "text", text: "psst" }] });
    assert.deepEqual(blocked.delivery, { state: "blocked", reason: "quiet hours" });
    const spoken = await a.client.call("agent/message/send", { conversationId: main.id, parts: [{ type: "text", text: "hello" }] });
    assert.equal(spoken.delivery.state, "forwarded");
    await readUntil<AgentEvent>(bEvents, 10_000, (s) => s.some((e) => e.type === "agent/message/received"));
    await b.client.call("agent/dispatch/request", { conversationId: main.id, messageId: spoken.message.id });
    const released = await readUntil<AgentEvent>(bEvents, 10_000, (s) => s.some((e) => e.type === "agent/dispatch/released"));
    const ev = released.find((e) => e.type === "agent/dispatch/released");
    assert.ok(ev?.type === "agent/dispatch/released" && ev.payload.lease.state === "denied");
    assert.deepEqual(calls, ["message_authorize", "message_authorize", "dispatch_authorize"]);
  } finally {
    moderator.client.close();
    a.client.close();
    b.client.close();
  }
});

test("the seed-002 names match the catalogue's x-moltzap-v1-name", () => {
  const openrpc = JSON.parse(readFileSync(join(process.cwd(), "..", "..", "rpc", "openrpc.json"), "utf8")) as {
    methods: Array<{ name: string; "x-moltzap-v1-name"?: string }>;
  };
  const exported: Record<string, string> = {};
  for (const m of openrpc.methods) if (m["x-moltzap-v1-name"]) exported[m["x-moltzap-v1-name"]] = m.name;
  assert.deepEqual(MOLTZAP_V1_NAMES, exported);
});
