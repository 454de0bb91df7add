// The reconnecting core every client shares: connect with version
// negotiation, resume from a cursor, hand events to one async iterator
// (deduplicated by id), and after a dropped socket reconnect with jittered,
// capped backoff and resume where the last received event left off.

import { EventEmitter } from "node:events";
import { backoffDelay, DEFAULT_RECONNECT, type ReconnectPolicy } from "./backoff.js";
import { CallbackRouter } from "./callbacks.js";
import { Connection, type CallbackHandler, type LateAnswer } from "./connection.js";
import { MemoryCursorStore, type Cursor, type CursorStore } from "./cursor.js";
import { ClientClosedError, DisconnectedError, RpcError, TransportError, isRpcError } from "./errors.js";
import { AsyncQueue } from "./queue.js";
import { websocketUrl } from "./http.js";

/** The protocol versions this SDK speaks. */
export const PROTOCOL = { min: 1, max: 1 } as const;

export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

export type PrincipalKind = "agent" | "app" | "person";

/** The envelope every event arrives in (docs/protocol.md, "Events"). */
export interface EventEnvelope {
  id: string;
  seq?: number | null;
  type: string;
  occurredAt: string;
  audience: string;
  ephemeral?: boolean;
  payload: unknown;
}

export interface ClientOptions {
  /** Where the cursor lives between processes (default: memory only). */
  cursorStore?: CursorStore;
  /** `false` turns automatic reconnects off. */
  reconnect?: ReconnectPolicy | false;
  /** Default deadline of a call (default 30 s). */
  callTimeoutMs?: number;
  /** The versions offered on connect (default: this SDK's, 1 to 1). */
  protocol?: { min: number; max: number };
  /**
   * Called when the log cannot serve the cursor (ResyncRequiredError): fetch
   * current state, then the client resumes from the oldest retained event.
   * Without it the client closes with the error: never a silent gap.
   */
  onResync?: (data: ResyncData) => Promise<void>;
}

export interface ResyncData {
  syncEpoch: string;
  oldestSeq: number;
  latestSeq: number;
  ackedSeq: number;
}

/** Connect-time answer members every kind shares. */
export interface ConnectResultBase {
  connectionId: string;
  protocolVersion: number;
  events: { syncEpoch: string; startAfter: number; latestSeq: number; ackedSeq: number };
  limits: { heartbeat: { intervalMs: number; timeoutMs: number } } & Record<string, unknown>;
}

export interface SessionConfig extends ClientOptions {
  baseUrl: string;
  kind: PrincipalKind;
  key: string;
  handlers?: Map<string, CallbackHandler>;
  /** Callback deadlines; the session reads them once connected (apps). */
  deadlines?: (session: Session) => Promise<(method: string) => number>;
}

const KEY_MEMBER: Record<PrincipalKind, string> = { agent: "agentKey", app: "appKey", person: "personKey" };
/** Close codes after which reconnecting cannot help: the key was revoked, or the socket broke the rules. */
const FATAL_CLOSE = new Set([4003, 1008]);
/** Connect errors after which reconnecting cannot help. */
const FATAL_TAGS = new Set(["UnauthorizedError", "ForbiddenError", "UnsupportedVersionError", "InvalidParamsError"]);
const SEEN_IDS = 4096;

/**
 * Events: `connected` (the connect answer), `disconnected` (code, reason),
 * `reconnecting` (attempt, delayMs), `closed` (error?), `lateAnswer`
 * (LateAnswer), `handlerError` (method, error).
 */
export class Session<R extends ConnectResultBase = ConnectResultBase> extends EventEmitter {
  private conn: Connection | null = null;
  private result: R | null = null;
  private readonly queue = new AsyncQueue<EventEnvelope>();
  private readonly seen = new Set<string>();
  private readonly store: CursorStore;
  private received: Cursor | null = null;
  private closedWith: ClientClosedError | null = null;
  private readonly policy: Required<ReconnectPolicy> | null;
  private readonly router: CallbackRouter | null;
  private deadlineOf: ((method: string) => number) | null = null;
  private deadlineWaiters: Array<() => void> = [];
  private connectedWaiters: Array<{ resolve(): void; reject(e: unknown): void }> = [];
  private reconnecting = false;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(private readonly config: SessionConfig) {
    super();
    this.store = config.cursorStore ?? new MemoryCursorStore();
    this.policy = config.reconnect === false ? null : { ...DEFAULT_RECONNECT, ...config.reconnect };
    this.router = config.handlers
      ? new CallbackRouter({
          handlers: config.handlers,
          deadlineMs: (m) => this.deadlineMs(m),
          onLateAnswer: (late: LateAnswer) => this.emit("lateAnswer", late),
          onHandlerError: (method, error) => this.emit("handlerError", method, error),
        })
      : null;
  }

  /** The latest connect answer. */
  get connectResult(): R {
    if (!this.result) throw new ClientClosedError();
    return this.result;
  }

  /** The socket in use, while connected (tests drop it to simulate a network failure). */
  get connection(): Connection | null {
    return this.conn;
  }

  get isClosed(): boolean {
    return this.closedWith !== null;
  }

  /** First connect: resumes from the stored cursor when there is one; errors reject. */
  async start(): Promise<void> {
    this.received = await this.store.load();
    try {
      await this.firstConnect();
      if (this.config.deadlines) {
        this.deadlineOf = await this.config.deadlines(this);
        for (const w of this.deadlineWaiters.splice(0)) w();
      }
    } catch (e) {
      this.shutdown(new ClientClosedError(e));
      throw e;
    }
  }

  private async firstConnect(): Promise<void> {
    try {
      await this.connectOnce();
    } catch (e) {
      // A stored cursor the log no longer serves: catch up, then resume from the oldest event.
      if (!isRpcError(e, "ResyncRequiredError") || !(await this.resync(e))) throw e;
      await this.connectOnce();
    }
  }

  /** A call on the current socket; while reconnecting it waits for the next one. */
  async call(method: string, params?: unknown, timeoutMs?: number): Promise<unknown> {
    const deadline = timeoutMs ?? this.config.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    if (this.closedWith) throw this.closedWith;
    if (!this.conn?.isOpen) await this.whenConnected(deadline, method);
    return (this.conn as Connection).call(method, params, deadline);
  }

  /** The events, in order, each once by id; the iteration throws if the client closes on an error. */
  events(): AsyncIterable<EventEnvelope> {
    const queue = this.queue;
    const commit = (e: EventEnvelope | undefined) => this.commit(e);
    return {
      [Symbol.asyncIterator]() {
        const inner = queue[Symbol.asyncIterator]();
        let previous: EventEnvelope | undefined;
        return {
          async next() {
            // The previous event counts as processed once the reader asks for the next one.
            await commit(previous);
            const r = await inner.next();
            previous = r.done ? undefined : r.value;
            return r;
          },
          async return() {
            await commit(previous);
            previous = undefined;
            return { value: undefined, done: true };
          },
        };
      },
    };
  }

  /** Closes the socket and ends the event stream; no reconnect follows. */
  close(): void {
    this.shutdown(new ClientClosedError());
  }

  private async connectOnce(): Promise<void> {
    const conn = await Connection.open(websocketUrl(this.config.baseUrl), {
      onNotification: (method, params) => this.onEvent(method, params),
      onRequest: (id, method, params, at) => void this.router?.handle(conn, id, method, params, at),
      onClose: (code, reason) => this.onClose(conn, code, reason),
    });
    try {
      const params: Record<string, unknown> = {
        [KEY_MEMBER[this.config.kind]]: this.config.key,
        protocol: this.config.protocol ?? PROTOCOL,
      };
      if (this.received) params.resume = { after: this.received.after, syncEpoch: this.received.syncEpoch };
      const timeout = this.config.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
      const result = (await conn.call(`${this.config.kind}/network/connect`, params, timeout)) as R;
      this.checkVersion(result);
      this.conn = conn;
      this.result = result;
      this.received = { syncEpoch: result.events.syncEpoch, after: result.events.startAfter };
      const hb = result.limits.heartbeat;
      conn.watchHeartbeat(hb.intervalMs, hb.timeoutMs);
    } catch (e) {
      conn.close();
      throw e;
    }
    for (const w of this.connectedWaiters.splice(0)) w.resolve();
    this.emit("connected", this.result);
  }

  private checkVersion(result: R): void {
    const offered = this.config.protocol ?? PROTOCOL;
    if (result.protocolVersion < offered.min || result.protocolVersion > offered.max) {
      throw new TransportError(`the hub chose protocol ${result.protocolVersion}, outside ${offered.min}..${offered.max}`);
    }
  }

  private onEvent(_method: string, params: unknown): void {
    const event = params as EventEnvelope;
    if (!event || typeof event.id !== "string") return;
    if (this.seen.has(event.id)) return;
    this.remember(event.id);
    if (typeof event.seq === "number" && this.received) {
      if (event.seq <= this.received.after) return; // already delivered before a reconnect
      this.received = { syncEpoch: this.received.syncEpoch, after: event.seq };
    }
    this.queue.push(event);
  }

  private remember(id: string): void {
    this.seen.add(id);
    if (this.seen.size > SEEN_IDS) this.seen.delete(this.seen.values().next().value as string);
  }

  private async commit(event: EventEnvelope | undefined): Promise<void> {
    if (!event || typeof event.seq !== "number" || !this.received) return;
    await this.store.save({ syncEpoch: this.received.syncEpoch, after: event.seq });
  }

  private onClose(conn: Connection, code: number, reason: string): void {
    // Only the socket in use matters: one that failed its connect is the connect's error.
    if (this.conn !== conn) return;
    this.conn = null;
    this.emit("disconnected", code, reason);
    if (this.closedWith) return;
    if (!this.policy || FATAL_CLOSE.has(code)) {
      this.shutdown(new ClientClosedError(new DisconnectedError(`socket closed (${code} ${reason})`, code)));
      return;
    }
    void this.reconnect();
  }

  /** Reconnects until it works, the policy's attempts run out, or an error says it cannot. */
  private async reconnect(): Promise<void> {
    if (this.reconnecting || !this.policy) return;
    this.reconnecting = true;
    let lastError: unknown;
    try {
      for (let attempt = 0; attempt < this.policy.maxAttempts; attempt++) {
        const delay = backoffDelay(this.policy, attempt, retryAfter(lastError));
        this.emit("reconnecting", attempt + 1, delay);
        await new Promise<void>((r) => (this.reconnectTimer = setTimeout(r, delay)));
        if (this.closedWith) return;
        try {
          await this.connectOnce();
          return;
        } catch (e) {
          lastError = e;
          if (isRpcError(e, "ResyncRequiredError") && (await this.resync(e))) continue;
          if (isRpcError(e) && FATAL_TAGS.has(e._tag)) break;
          if (isRpcError(e, "ResyncRequiredError")) break;
        }
      }
      this.shutdown(new ClientClosedError(lastError));
    } finally {
      this.reconnecting = false;
    }
  }

  /** Lets the application catch up, then resumes from the oldest retained event. */
  private async resync(error: RpcError): Promise<boolean> {
    if (!this.config.onResync) return false;
    const data = error.data as ResyncData;
    await this.config.onResync(data);
    this.received = { syncEpoch: data.syncEpoch, after: Math.max(0, data.oldestSeq - 1) };
    await this.store.save(this.received);
    return true;
  }

  private whenConnected(timeoutMs: number, method: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.connectedWaiters = this.connectedWaiters.filter((w) => w !== waiter);
        reject(new DisconnectedError(method));
      }, timeoutMs);
      const waiter = {
        resolve: () => (clearTimeout(timer), resolve()),
        reject: (e: unknown) => (clearTimeout(timer), reject(e)),
      };
      this.connectedWaiters.push(waiter);
    });
  }

  private deadlineMs(method: string): Promise<number> {
    if (this.deadlineOf) return Promise.resolve(this.deadlineOf(method));
    // A callback may arrive before the manifest is read: wait; the clock started on arrival.
    return new Promise((resolve) => this.deadlineWaiters.push(() => resolve((this.deadlineOf as (m: string) => number)(method))));
  }

  private shutdown(error: ClientClosedError): void {
    if (this.closedWith) return;
    this.closedWith = error;
    clearTimeout(this.reconnectTimer);
    this.conn?.close();
    this.conn = null;
    for (const w of this.connectedWaiters.splice(0)) w.reject(error);
    // Callbacks still waiting for the manifest end as late: nothing is answered.
    this.deadlineOf ??= () => 0;
    for (const w of this.deadlineWaiters.splice(0)) w();
    this.queue.end(error.cause === undefined ? undefined : error);
    this.emit("closed", error.cause);
  }
}

function retryAfter(error: unknown): number {
  if (isRpcError(error, "RateLimitedError")) {
    const ms = (error.data as { retryAfterMs?: number } | undefined)?.retryAfterMs;
    return typeof ms === "number" ? ms : 0;
  }
  return 0;
}
