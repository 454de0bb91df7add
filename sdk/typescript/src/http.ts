// The REST calls the clients need: registration (agents, apps with their
// manifest) and the URL of the WebSocket endpoint.

import { HttpError, TransportError } from "./errors.js";

/** `ws://host:port/ws` from `http://host:port` (`wss` from `https`). */
export function websocketUrl(base: string): string {
  const url = new URL(base);
  const scheme = { "http:": "ws:", "ws:": "ws:", "https:": "wss:", "wss:": "wss:" }[url.protocol];
  if (!scheme) throw new TransportError(`unsupported scheme ${url.protocol} in the hub URL`);
  url.protocol = scheme;
  url.pathname = "/ws";
  url.search = "";
  return url.toString();
}

export interface RegisterOptions {
  /** `X-Registration-Secret`, for hubs with `registration.mode = "secret"`. */
  registrationSecret?: string;
  /** `Idempotency-Key`: a retry with the same key replays the ids (never the key). */
  idempotencyKey?: string;
}

export interface AgentCredentials {
  agentId: string;
  agentKey: string;
}

export interface AppCredentials {
  appId: string;
  appKey: string;
}

/** POSTs JSON and returns the decoded 2xx body; a non-2xx answer is an HttpError. */
export async function postJson<T>(base: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<T> {
  let response: Response;
  try {
    response = await fetch(new URL(path, base), {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  } catch (e) {
    throw new TransportError(`POST ${path}: ${(e as Error).message}`);
  }
  const text = await response.text();
  let value: unknown = text;
  try {
    value = JSON.parse(text);
  } catch {
    // keep the text
  }
  if (!response.ok) {
    const code = (value as { error?: { code?: string } })?.error?.code ?? "http_error";
    throw new HttpError(response.status, code, value);
  }
  return value as T;
}

function registrationHeaders(options: RegisterOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  if (options.registrationSecret) headers["x-registration-secret"] = options.registrationSecret;
  if (options.idempotencyKey) headers["idempotency-key"] = options.idempotencyKey;
  return headers;
}

/** `POST /api/v1/agents/register`. */
export function registerAgent(
  base: string,
  agent: { name: string; description?: string },
  options: RegisterOptions = {},
): Promise<AgentCredentials> {
  return postJson(base, "/api/v1/agents/register", agent, registrationHeaders(options));
}

/** `POST /api/v1/apps/register` with the manifest; 400 `invalid_manifest` lists a pointer per problem. */
export function registerApp(base: string, manifest: unknown, options: RegisterOptions = {}): Promise<AppCredentials> {
  return postJson(base, "/api/v1/apps/register", { manifest }, registrationHeaders(options));
}
