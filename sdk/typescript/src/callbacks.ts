// Answering the hub's calls to an app (the three gates, autocomplete and
// ping) within their deadlines. For a gate the hub waits `timeoutMs` (the
// manifest's hook policy) and then fails it closed; `app/command/autocomplete`
// announces its own time left in `deadlineMs`, after which the asker has
// been answered with no choices. An answer after either is ignored by the
// hub. So the SDK measures the deadline from the frame's arrival, aborts
// the handler's signal when it passes, and never sends an answer after it:
// a late answer is dropped here and reported, not sent.

import type { CallbackContext, CallbackHandler, Connection, LateAnswer } from "./connection.js";
import { RpcError } from "./errors.js";

export interface CallbackRouterOptions {
  handlers: Map<string, CallbackHandler>;
  /** The deadline of a method's calls, in ms; resolves once known (the manifest is read after connect). */
  deadlineMs(method: string): Promise<number>;
  /** Answers within this many ms of the deadline are dropped too (default 0). */
  marginMs?: number;
  onLateAnswer?(late: LateAnswer): void;
  onHandlerError?(method: string, error: unknown): void;
}

const METHOD_NOT_FOUND = -32601;
const INTERNAL = -32603;

export class CallbackRouter {
  constructor(private readonly options: CallbackRouterOptions) {}

  /** Runs the handler of one hub request and answers on `conn` if still in time. */
  async handle(conn: Connection, id: string, called: string, params: unknown, receivedAt: number): Promise<void> {
    // A `callbackNames: "moltzap-v1"` app is called by the seed-002 names;
    // the params and answers are the same, so the canonical handler answers.
    const method = canonicalCallback(called);
    const handler = this.options.handlers.get(method);
    if (!handler) {
      conn.answerError(id, { code: METHOD_NOT_FOUND, message: `Method not found: ${method}`, _tag: "MethodNotFoundError" });
      return;
    }
    const deadlineMs = ANNOUNCED_DEADLINE.has(method) ? announcedDeadlineMs(params) : await this.options.deadlineMs(method);
    const deadline = receivedAt + deadlineMs - (this.options.marginMs ?? 0);
    if (Date.now() >= deadline) {
      // Already too late (the client is closing, or the wait for the manifest ate the time).
      this.options.onLateAnswer?.({ id, method, deadlineMs });
      return;
    }
    const controller = new AbortController();
    const ctx: CallbackContext = { id, method, deadline, signal: controller.signal };
    const timer = setTimeout(() => controller.abort(new Error(`${method} passed its deadline`)), Math.max(0, deadline - Date.now()));
    const outcome = await settle(() => handler(params, ctx));
    clearTimeout(timer);
    if (Date.now() >= deadline) {
      this.options.onLateAnswer?.({ id, method, deadlineMs, overdueMs: Date.now() - deadline });
      return;
    }
    if (outcome.ok) {
      conn.answer(id, outcome.value);
    } else if (outcome.error instanceof RpcError) {
      conn.answerError(id, outcome.error.toWire());
    } else {
      this.options.onHandlerError?.(method, outcome.error);
      // The handler's own message may hold app data: the hub gets a bare internal error.
      conn.answerError(id, { code: INTERNAL, message: "Internal error: the app's handler failed", _tag: "InternalError" });
    }
  }
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

async function settle(run: () => unknown): Promise<Outcome> {
  try {
    return { ok: true, value: await run() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** The seed-002 names the hub calls a `callbackNames: "moltzap-v1"` app by (`x-moltzap-v1-name`). */
export const MOLTZAP_V1_NAMES: Record<string, string> = {
  "apps/onBeforeMessageDelivery": "app/message/authorize",
  "apps/onBeforeDispatch": "app/dispatch/authorize",
};

/** The catalogue's name of a callback the hub made under either name. */
export function canonicalCallback(method: string): string {
  return MOLTZAP_V1_NAMES[method] ?? method;
}

/**
 * The callbacks whose params carry `deadlineMs`, the time left to answer
 * when the hub sent the call: their deadline is the call's own, never a
 * manifest's `timeoutMs` or a default (ADR 0027 §8).
 */
export const ANNOUNCED_DEADLINE: ReadonlySet<string> = new Set(["app/command/autocomplete"]);

/**
 * A call's announced `deadlineMs`; 0 when it carries none a deadline can be
 * (the call then counts as late at once and nothing is sent: the hub
 * answers its asker with no choices at its own deadline).
 */
export function announcedDeadlineMs(params: unknown): number {
  const ms = (params as { deadlineMs?: unknown } | null)?.deadlineMs;
  return typeof ms === "number" && Number.isFinite(ms) && ms > 0 ? ms : 0;
}

/** The gate each callback method answers, as the manifest's `hooks` names it. */
export const GATE_OF_METHOD: Record<string, string> = {
  "app/task/create": "task_create",
  "app/message/authorize": "message_authorize",
  "app/dispatch/authorize": "dispatch_authorize",
};

/** Per-method deadlines from a manifest's hook policies (`kind: "hook"` with `timeoutMs`). */
export function deadlinesFromManifest(manifest: { hooks?: object }): Map<string, number> {
  const out = new Map<string, number>();
  for (const [method, gate] of Object.entries(GATE_OF_METHOD)) {
    const policy = (manifest.hooks as Record<string, unknown> | undefined)?.[gate] as { kind?: string; timeoutMs?: number } | undefined;
    if (policy?.kind === "hook" && typeof policy.timeoutMs === "number") out.set(method, policy.timeoutMs);
  }
  return out;
}
