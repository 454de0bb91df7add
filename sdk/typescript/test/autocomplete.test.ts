// `app/command/autocomplete` against a real hub (ADR 0027 §8): an agent asks
// for the choices of an autocomplete option, the SDK app's handler answers
// them at once, or defers and answers through the typed client's
// `app/autocomplete/answer`; a handler slower than the call's own
// `deadlineMs` sends nothing and the asker gets no choices at the deadline.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { AppHandlers, LateAnswer } from "../src/index.js";
import { ADMIN_TOKEN, TestHub } from "./support/hub.js";
import { nextEmit, within } from "./support/wait.js";
import { agent, app } from "./support/world.js";

/**
 * The hub's `command.autocomplete_timeout_ms` here: the calls' `deadlineMs`,
 * twice the SDK's 1000 ms default so that the two cannot be confused.
 */
const TIMEOUT_MS = 2000;
const UNMATCHED = "switchboard_unmatched_responses_total";

let hub: TestHub;
before(async () => {
  hub = await TestHub.start({ env: { SWITCHBOARD_COMMAND__AUTOCOMPLETE_TIMEOUT_MS: String(TIMEOUT_MS) } });
});
after(async () => {
  await hub?.stop();
});

let apps = 0;

/** An app with the command `find` (option `who`, autocomplete) and `commands:write` (`events:subscribe`: an app socket needs it). */
function finder(): Record<string, unknown> {
  return {
    name: `finder-${++apps}`,
    description: "suggests names",
    limits: { maxParticipants: 4 },
    conversations: [{ key: "main", name: "Main", participantFilter: "all" }],
    hooks: { task_create: { kind: "accept" }, message_authorize: { kind: "forwardAllExceptSender" }, dispatch_authorize: { kind: "grant" } },
    scopes: ["commands:write", "events:subscribe"],
    commands: [
      {
        name: "find",
        description: "Find someone",
        requiredLevel: "read",
        options: [{ name: "who", type: "string", description: "A name", autocomplete: true }],
      },
    ],
  };
}

async function ok(method: string, path: string, body: unknown, status: number): Promise<any> {
  const r = await hub.request(method, path, body, ADMIN_TOKEN);
  assert.equal(r.status, status, JSON.stringify(r.body));
  return r.body;
}

/**
 * A channel where the app holds write and a fresh agent read, the app
 * connected with `handlers`: the agent's client, the app's, and the
 * command's id as the agent is offered it.
 */
async function place(handlers: AppHandlers) {
  const finderApp = await app(hub, finder(), { handlers });
  const asker = await agent(hub);
  const space = await ok("POST", "/api/v1/spaces", { name: `space-${apps}` }, 201);
  const created = await ok("POST", `/api/v1/spaces/${space.space.spaceId}/channels`, { name: "general" }, 201);
  const channel: string = created.channel.id;
  for (const [principalId, level] of [
    [finderApp.id, "write"],
    [asker.id, "read"],
  ]) {
    await ok("POST", "/api/v1/grants", { subject: { principalId }, place: { channelId: channel }, level }, 201);
  }
  const listed = await asker.client.call("agent/command/list", { conversationId: channel });
  const find = listed.commands.find((c) => c.name === "find");
  assert.ok(find, JSON.stringify(listed));
  const ask = (value: string) =>
    asker.client.call("agent/command/autocomplete", { commandId: find.commandId, conversationId: channel, option: "who", value });
  const close = () => {
    finderApp.client.close();
    asker.client.close();
  };
  return { finderApp, asker, channel, commandId: find.commandId, ask, close };
}

test("the app's handler answers the asker's choices within the call's own deadline", async () => {
  const seen: Array<{ value: string; left: number; invokedBy: string }> = [];
  const p = await place({
    "app/command/autocomplete": (params, ctx) => {
      seen.push({ value: params.value, left: ctx.deadline - Date.now(), invokedBy: params.invokedBy.principalId });
      assert.equal(params.deadlineMs, TIMEOUT_MS);
      return { choices: [{ name: "Robin", value: "robin" }, { name: "Rowan", value: "rowan" }] };
    },
  });
  try {
    const r = await p.ask("ro");
    assert.deepEqual(r.choices, [
      { name: "Robin", value: "robin" },
      { name: "Rowan", value: "rowan" },
    ]);
    assert.equal(seen.length, 1);
    assert.equal(seen[0].value, "ro");
    assert.equal(seen[0].invokedBy, p.asker.id);
    // The deadline is the call's `deadlineMs`, not the 1000 ms ping default
    // nor a manifest's timeoutMs (this manifest has none).
    assert.ok(seen[0].left > TIMEOUT_MS - 500 && seen[0].left <= TIMEOUT_MS, `left ${seen[0].left}`);
  } finally {
    p.close();
  }
});

test("a deferred answer reaches the asker through app/autocomplete/answer", async () => {
  let answered!: Promise<{ accepted: boolean }>;
  const p = await place({
    "app/command/autocomplete": (params) => {
      // Answer on the typed client once the handler has said it defers.
      answered = Promise.resolve().then(() =>
        p.finderApp.client.call("app/autocomplete/answer", { requestId: params.requestId, choices: [{ name: "Sam", value: "sam" }] }),
      );
      return { deferred: true };
    },
  });
  try {
    const r = await p.ask("s");
    assert.deepEqual(r.choices, [{ name: "Sam", value: "sam" }]);
    assert.deepEqual(await answered, { accepted: true });
  } finally {
    p.close();
  }
});

test("a handler slower than deadlineMs sends nothing; the asker gets [] at the deadline", async () => {
  let aborted!: () => void;
  const abortSeen = new Promise<void>((r) => (aborted = r));
  const p = await place({
    "app/command/autocomplete": async (_params, ctx) => {
      await new Promise<void>((r) => ctx.signal.addEventListener("abort", () => r()));
      aborted();
      // Finishes after the deadline: the router must drop this.
      return { choices: [{ name: "Too late", value: "late" }] };
    },
  });
  try {
    const unmatchedBefore = await hub.metric(UNMATCHED);
    const late = nextEmit(p.finderApp.client, "lateAnswer", 10_000);
    const started = Date.now();
    const r = await p.ask("x");
    const waited = Date.now() - started;
    assert.deepEqual(r.choices, []);
    assert.ok(waited >= TIMEOUT_MS - 50, `answered after ${waited} ms, before the deadline`);
    assert.ok(waited < TIMEOUT_MS + 1500, `answered after ${waited} ms, long past the deadline`);
    await within(5_000, "the handler's abort signal", abortSeen);
    const [drop] = (await late) as [LateAnswer];
    assert.equal(drop.method, "app/command/autocomplete");
    assert.equal(drop.deadlineMs, TIMEOUT_MS);
    // A round trip on the same socket: any answer the SDK had sent is read by now.
    await p.finderApp.client.call("app/identity/get");
    assert.equal(await hub.metric(UNMATCHED), unmatchedBefore, "the SDK sent no late answer");
    // The same answer pushed by hand is one the hub counts and ignores.
    p.finderApp.client.session.connection!.sendRaw(JSON.stringify({ jsonrpc: "2.0", id: drop.id, result: { choices: [] } }));
    await p.finderApp.client.call("app/identity/get");
    assert.equal(await hub.metric(UNMATCHED), unmatchedBefore + 1, "the hub saw the late answer");
  } finally {
    p.close();
  }
});
