// Verifying the hub's signed webhooks (Standard Webhooks) for gatewayless
// apps: `webhook-id`, `webhook-timestamp` and `webhook-signature` over
// `{id}.{timestamp}.{body}`; `v1a,<base64>` is Ed25519 with a `whpk_` key
// (GET /api/v1/webhooks/keys), `v1,<base64>` HMAC-SHA256 with a `whsec_`
// secret. Any listed signature that verifies with any key is enough (a
// rotation lists one per signing key); timestamps further than the
// tolerance from now are refused so a captured request cannot be replayed
// later. Deduplicating on `webhook-id` is the receiver's part.

import { createHmac, createPublicKey, timingSafeEqual, verify as verifySignature, type KeyObject } from "node:crypto";
import { SwitchboardError } from "./errors.js";

export const ID_HEADER = "webhook-id";
export const TIMESTAMP_HEADER = "webhook-timestamp";
export const SIGNATURE_HEADER = "webhook-signature";
/** The reference libraries' tolerance: 5 minutes. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export type WebhookVerifyReason = "bad_timestamp" | "expired" | "no_valid_signature" | "bad_key" | "missing_header";

export class WebhookVerificationError extends SwitchboardError {
  readonly _tag = "WebhookVerificationError";
  constructor(readonly reason: WebhookVerifyReason, message: string) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}

/** A parsed verification key. */
export type WebhookKey = { kind: "hmac"; secret: Buffer } | { kind: "ed25519"; key: KeyObject };

const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

function strictBase64(text: string): Buffer | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return null;
  return Buffer.from(text, "base64");
}

/** `whsec_<base64>` (HMAC secret) or `whpk_<base64 of 32 bytes>` (Ed25519 public key). */
export function parseWebhookKey(text: string): WebhookKey {
  if (text.startsWith("whsec_")) {
    const secret = strictBase64(text.slice(6));
    if (!secret || secret.length === 0) throw new WebhookVerificationError("bad_key", "a whsec_ key must be non-empty base64");
    return { kind: "hmac", secret };
  }
  if (text.startsWith("whpk_")) {
    const raw = strictBase64(text.slice(5));
    if (!raw || raw.length !== 32) throw new WebhookVerificationError("bad_key", "a whpk_ key must be base64 of 32 bytes");
    const key = createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: "der", type: "spki" });
    return { kind: "ed25519", key };
  }
  throw new WebhookVerificationError("bad_key", "a key must start with whsec_ or whpk_");
}

export interface VerifyInput {
  id: string;
  timestamp: string;
  signature: string;
  body: string | Uint8Array;
  keys: Array<WebhookKey | string>;
  /** Unix seconds (default: now). */
  now?: number;
  toleranceSeconds?: number;
}

function signedContent(id: string, timestamp: number, body: string | Uint8Array): Buffer {
  const bodyBytes = typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body);
  return Buffer.concat([Buffer.from(`${id}.${timestamp}.`, "utf8"), bodyBytes]);
}

function matches(version: string, signature: Buffer, key: WebhookKey, content: Buffer): boolean {
  if (version === "v1" && key.kind === "hmac") {
    const expected = createHmac("sha256", key.secret).update(content).digest();
    return expected.length === signature.length && timingSafeEqual(expected, signature);
  }
  if (version === "v1a" && key.kind === "ed25519") {
    return signature.length === 64 && verifySignature(null, content, key.key, signature);
  }
  return false;
}

/** Throws WebhookVerificationError unless a listed signature verifies and the timestamp is fresh. */
export function verifyWebhook(input: VerifyInput): void {
  const trimmed = input.timestamp.trim();
  if (!/^-?\d+$/.test(trimmed)) {
    throw new WebhookVerificationError("bad_timestamp", "the webhook-timestamp header is not a Unix time in seconds");
  }
  const ts = Number(trimmed);
  const now = input.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(ts - now) > Math.max(0, input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) {
    throw new WebhookVerificationError("expired", "the timestamp is outside the tolerance");
  }
  const keys = input.keys.map((k) => (typeof k === "string" ? parseWebhookKey(k) : k));
  const content = signedContent(input.id, ts, input.body);
  for (const entry of input.signature.split(/\s+/).filter(Boolean)) {
    const comma = entry.indexOf(",");
    if (comma < 0) continue;
    const signature = strictBase64(entry.slice(comma + 1));
    if (!signature) continue;
    if (keys.some((k) => matches(entry.slice(0, comma), signature, k, content))) return;
  }
  throw new WebhookVerificationError("no_valid_signature", "no listed signature verifies with the given keys");
}

/** The same, reading the three headers from a request's headers (any case). */
export function verifyWebhookRequest(
  headers: Record<string, string | string[] | undefined> | Headers,
  body: string | Uint8Array,
  keys: Array<WebhookKey | string>,
  options: { now?: number; toleranceSeconds?: number } = {},
): void {
  const get = (name: string): string => {
    let value: string | string[] | null | undefined;
    if (headers instanceof Headers) value = headers.get(name);
    else value = Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
    if (Array.isArray(value)) value = value.join(" ");
    if (typeof value !== "string") throw new WebhookVerificationError("missing_header", `the ${name} header is missing`);
    return value;
  };
  verifyWebhook({ id: get(ID_HEADER), timestamp: get(TIMESTAMP_HEADER), signature: get(SIGNATURE_HEADER), body, keys, ...options });
}
