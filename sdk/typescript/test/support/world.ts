// Small helpers the tests share: registering agents and apps on a TestHub.

import { AgentClient, AppClient, type AppClientOptions, type ClientOptions } from "../../src/index.js";
import type { TestHub } from "./hub.js";

let counter = 0;

export async function agent(hub: TestHub, options: ClientOptions = {}): Promise<{ client: AgentClient; key: string; id: string }> {
  const creds = await AgentClient.register(hub.base, { name: `agent-${++counter}` });
  const client = await AgentClient.connect(hub.base, creds.agentKey, options);
  return { client, key: creds.agentKey, id: creds.agentId };
}

export function hookManifest(timeoutMs: number, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: `test-app-${++counter}`,
    description: "an app of the TypeScript SDK's tests",
    limits: { maxParticipants: 8 },
    conversations: [{ key: "main", name: "Main", participantFilter: "all" }],
    hooks: {
      task_create: { kind: "hook", timeoutMs },
      message_authorize: { kind: "hook", timeoutMs },
      dispatch_authorize: { kind: "hook", timeoutMs },
    },
    ...overrides,
  };
}

export async function app(hub: TestHub, manifest: Record<string, unknown>, options: AppClientOptions = {}): Promise<{ client: AppClient; id: string }> {
  const creds = await AppClient.register(hub.base, manifest);
  const client = await AppClient.connect(hub.base, creds.appKey, options);
  return { client, id: creds.appId };
}
