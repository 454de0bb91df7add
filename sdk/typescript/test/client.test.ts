// AgentClient against a real hub: connect, a wrong key, version
// negotiation, typed calls and `_tag`ged errors, events.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { AgentClient, PersonClient, RpcError, isRpcError, type AgentEvent } from "../src/index.js";
import { ADMIN_TOKEN, TestHub } from "./support/hub.js";
import { readUntil } from "./support/wait.js";
import { agent } from "./support/world.js";

let hub: TestHub;
before(async () => {
  hub = await TestHub.start();
});
after(async () => {
  await hub?.stop();
});

function text(t: string) {
  return [{ type: "text" as const, text: t }];
}

test("connect negotiates version 1 and reports the session", async () => {
  const creds = await AgentClient.register(hub.base, { name: "connector", description: "connects" });
  const client = await AgentClient.connect(hub.base, creds.agentKey);
  try {
    assert.equal(client.connectResult.protocolVersion, 1);
    assert.equal(client.agentId, creds.agentId);
    assert.ok(client.connectResult.limits.maxFrameBytes > 0);
    const me = await client.call("agent/identity/get");
    assert.equal(me.name, "connector");
    assert.equal(me.agentId, creds.agentId);
  } finally {
    client.close();
  }
});

test("a wrong key is UnauthorizedError, and the client does not retry it", async () => {
  for (const key of ["sbk_agent_0000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "not-a-key"]) {
    await assert.rejects(AgentClient.connect(hub.base, key), (e: unknown) => {
      assert.ok(e instanceof RpcError, String(e));
      assert.equal(e._tag, "UnauthorizedError");
      assert.equal(e.code, -32001);
      return true;
    });
  }
});

test("no shared protocol version is UnsupportedVersionError with data.supported", async () => {
  const creds = await AgentClient.register(hub.base, { name: "future" });
  await assert.rejects(AgentClient.connect(hub.base, creds.agentKey, { protocol: { min: 7, max: 9 } }), (e: unknown) => {
    assert.ok(isRpcError(e, "UnsupportedVersionError"), String(e));
    assert.ok((e.data as { supported?: unknown }).supported !== undefined, JSON.stringify(e.data));
    return true;
  });
});

test("typed calls answer typed results; errors carry the hub's _tag and data", async () => {
  const a = await agent(hub);
  const b = await agent(hub);
  try {
    const created = await a.client.call("agent/conversation/create", { kind: "direct", participants: [b.id] });
    assert.equal(created.conversation.kind, "direct");
    const sent = await a.client.call("agent/message/send", {
      conversationId: created.conversation.id,
      parts: text("hello"),
      clientMsgId: "m-1",
    });
    assert.equal(sent.message.senderId, a.id);
    const again = await a.client.call("agent/message/send", { conversationId: created.conversation.id, parts: text("hello"), clientMsgId: "m-1" });
    assert.equal(again.duplicate, true);
    assert.equal(again.message.id, sent.message.id);
    const listed = await b.client.call("agent/message/list", { conversationId: created.conversation.id });
    assert.deepEqual(listed.messages.map((m) => m.id), [sent.message.id]);

    const missing = "0192f5e0-0000-7000-8000-000000000000";
    await assert.rejects(a.client.call("agent/conversation/get", { conversationId: missing }), (e: unknown) => {
      assert.ok(isRpcError(e, "NotFoundError"), String(e));
      assert.equal(e.code, -32004);
      assert.deepEqual(e.data, { conversationId: missing });
      return true;
    });
    await assert.rejects(a.client.callRaw("agent/message/send", { conversationId: created.conversation.id }), (e: unknown) => {
      assert.ok(isRpcError(e, "InvalidParamsError"), String(e));
      assert.equal((e.data as { field: string }).field, "parts");
      return true;
    });
    await assert.rejects(a.client.callRaw("app/task/close", { taskId: missing }), (e: unknown) => {
      assert.ok(isRpcError(e, "ForbiddenError"), String(e));
      assert.equal((e.data as { reason: string }).reason, "subject_kind_not_allowed");
      return true;
    });
    await assert.rejects(a.client.callRaw("agent/no/such"), (e: unknown) => isRpcError(e, "MethodNotFoundError"));
  } finally {
    a.client.close();
    b.client.close();
  }
});

test("events arrive typed through the async iterator", async () => {
  const a = await agent(hub);
  const b = await agent(hub);
  try {
    const events = b.client.events()[Symbol.asyncIterator]();
    const conv = await a.client.call("agent/conversation/create", { kind: "group", participants: [b.id], name: "g" });
    const sent = await a.client.call("agent/message/send", { conversationId: conv.conversation.id, parts: text("ping") });
    const seen = await readUntil<AgentEvent>(events, 10_000, (s) => s.some((e) => e.type === "agent/message/received"));
    const created = seen.find((e) => e.type === "agent/conversation/created");
    assert.ok(created && created.type === "agent/conversation/created");
    assert.equal(created.payload.conversation.id, conv.conversation.id);
    const received = seen.find((e) => e.type === "agent/message/received");
    assert.ok(received && received.type === "agent/message/received");
    assert.equal(received.payload.message.id, sent.message.id);
    assert.equal(received.audience, b.id);
    assert.deepEqual(received.payload.message.parts, text("ping"));
    assert.ok(typeof received.seq === "number" && received.seq > 0);

    // Ephemeral events have no seq and pass through as they are.
    await a.client.call("agent/typing/send", { conversationId: conv.conversation.id });
    const typing = await readUntil<AgentEvent>(events, 10_000, (s) => s.some((e) => e.type === "agent/typing/received"));
    const typed = typing.find((e) => e.type === "agent/typing/received");
    assert.ok(typed?.type === "agent/typing/received");
    assert.equal(typed.ephemeral, true);
    assert.equal(typed.seq, undefined);
    assert.equal(typed.payload.agentId, a.id);
    await events.return?.();

    // The hub's own record of progress: a connect without a cursor starts after it.
    assert.deepEqual(await b.client.ack(received.seq as number), { ackedSeq: received.seq });
    const again = await AgentClient.connect(hub.base, b.key);
    try {
      assert.equal(again.connectResult.events.startAfter, received.seq);
    } finally {
      again.close();
    }
  } finally {
    a.client.close();
    b.client.close();
  }
});

test("a person connects with PersonClient and receives a person's events", async () => {
  const created = await hub.request("POST", "/api/v1/people", { name: "pat" }, ADMIN_TOKEN);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const person = await PersonClient.connect(hub.base, created.body.personKey);
  const a = await agent(hub);
  try {
    assert.equal(person.personId, created.body.personId);
    const me = await person.call("person/identity/get");
    assert.equal(me.principalId, created.body.personId);
    const conv = await a.client.call("agent/conversation/create", { kind: "direct", participants: [person.personId] });
    await a.client.call("agent/message/send", { conversationId: conv.conversation.id, parts: text("hello, person") });
    const seen = await readUntil(person.events()[Symbol.asyncIterator](), 10_000, (s) => s.some((e) => e.type === "person/message/received"));
    const got = seen.find((e) => e.type === "person/message/received");
    assert.ok(got?.type === "person/message/received");
    assert.deepEqual(got.payload.message.parts, text("hello, person"));
    assert.equal(got.payload.message.origin, "agent");
  } finally {
    person.close();
    a.client.close();
  }
});
