// One WebSocket to the hub and the JSON-RPC 2.0 peer on it: our calls and
// their answers, the hub's notifications, and the hub's own calls to us
// (an app's callbacks), each answered within its deadline or not at all.

import WebSocket from "ws";
import {
  BadResultError,
  CallTimeoutError,
  DisconnectedError,
  RpcError,
  TransportError,
  type ErrorObjectWire,
} from "./errors.js";

/** What a callback handler gets besides its params. */
export interface CallbackContext {
  /** The hub's request id (`hub-<n>`). */
  id: string;
  method: string;
  /** When the SDK stops waiting for the handler (ms since the epoch). */
  deadline: number;
  /** Aborted when the deadline passes: the hub has failed the call closed. */
  signal: AbortSignal;
}

export type CallbackHandler = (params: unknown, ctx: CallbackContext) => unknown | Promise<unknown>;

/** A callback whose handler missed its deadline: the SDK did not answer. */
export interface LateAnswer {
  id: string;
  method: string;
  deadlineMs: number;
  /** How long after the deadline the handler finished (undefined: the deadline had passed before it could run). */
  overdueMs?: number;
}

export interface ConnectionHooks {
  onNotification(method: string, params: unknown): void;
  /** A hub request: answer it (or not) through `answer`. */
  onRequest?(id: string, method: string, params: unknown, receivedAt: number): void;
  onClose(code: number, reason: string): void;
}

export interface OpenOptions {
  /** Deadline of the WebSocket handshake (default 10 s). */
  openTimeoutMs?: number;
  /** Extra headers on the upgrade request. */
  headers?: Record<string, string>;
}

interface Pending {
  method: string;
  resolve(value: unknown): void;
  reject(error: unknown): void;
  timer: NodeJS.Timeout;
}

export class Connection {
  private nextId = 1;
  private pending = new Map<string, Pending>();
  private closed = false;
  private lastSeen = Date.now();
  private watchdog: NodeJS.Timeout | undefined;

  private constructor(
    private readonly ws: WebSocket,
    private readonly hooks: ConnectionHooks,
  ) {
    ws.on("message", (data, isBinary) => this.onFrame(data, isBinary));
    ws.on("ping", () => (this.lastSeen = Date.now()));
    ws.on("close", (code, reason) => this.onClosed(code, reason.toString()));
    ws.on("error", () => {
      // 'close' follows every 'error'; pending calls fail there.
    });
  }

  /** Opens the socket; resolves once the upgrade succeeded. */
  static open(url: string, hooks: ConnectionHooks, options: OpenOptions = {}): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, {
        handshakeTimeout: options.openTimeoutMs ?? 10_000,
        headers: options.headers,
        perMessageDeflate: false,
      });
      const fail = (e: Error) => reject(new TransportError(`cannot open ${url}: ${e.message}`));
      ws.once("error", fail);
      ws.once("unexpected-response", (_req, res) => {
        reject(new TransportError(`cannot open ${url}: HTTP ${res.statusCode}`));
        ws.terminate();
      });
      ws.once("open", () => {
        ws.off("error", fail);
        resolve(new Connection(ws, hooks));
      });
    });
  }

  get isOpen(): boolean {
    return !this.closed && this.ws.readyState === WebSocket.OPEN;
  }

  /** Calls `method`; rejects with the hub's RpcError, CallTimeoutError or DisconnectedError. */
  call(method: string, params: unknown, timeoutMs: number): Promise<unknown> {
    if (!this.isOpen) return Promise.reject(new DisconnectedError(method));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(String(id));
        reject(new CallTimeoutError(method, timeoutMs));
      }, timeoutMs);
      this.pending.set(String(id), { method, resolve, reject, timer });
      const frame: Record<string, unknown> = { jsonrpc: "2.0", id, method };
      if (params !== undefined) frame.params = params;
      this.ws.send(JSON.stringify(frame));
    });
  }

  /** Answers a hub request with a result. */
  answer(id: string, result: unknown): void {
    this.sendRaw(JSON.stringify({ jsonrpc: "2.0", id, result }));
  }

  /** Answers a hub request with an error. */
  answerError(id: string, error: ErrorObjectWire): void {
    this.sendRaw(JSON.stringify({ jsonrpc: "2.0", id, error }));
  }

  /** Sends one text frame as is (answers and requests go through `call`/`answer`). */
  sendRaw(text: string): void {
    if (this.isOpen) this.ws.send(text);
  }

  /**
   * Watches the hub's heartbeat pings: when nothing (frame or ping) arrives
   * for `timeoutMs`, the socket is treated as dead and dropped, so a
   * half-open TCP connection ends in a reconnect rather than a silent hang.
   */
  watchHeartbeat(intervalMs: number, timeoutMs: number): void {
    clearInterval(this.watchdog);
    this.watchdog = setInterval(() => {
      if (Date.now() - this.lastSeen > timeoutMs) this.drop();
    }, Math.max(100, Math.min(intervalMs, timeoutMs)));
    this.watchdog.unref();
  }

  /** Closes normally (1000). */
  close(code = 1000, reason = "client closing"): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) {
      this.ws.close(code, reason);
    }
  }

  /** Drops the TCP connection without a close frame, as a network failure would. */
  drop(): void {
    this.ws.terminate();
  }

  private onFrame(data: WebSocket.RawData, isBinary: boolean): void {
    this.lastSeen = Date.now();
    if (isBinary) return;
    let frame: Record<string, unknown>;
    try {
      frame = JSON.parse(data.toString());
    } catch {
      return; // the hub sends only JSON; nothing sensible to answer
    }
    if (frame === null || typeof frame !== "object" || Array.isArray(frame)) return;
    if (typeof frame.method === "string") {
      if (frame.id === undefined) this.hooks.onNotification(frame.method, frame.params);
      else this.hooks.onRequest?.(String(frame.id), frame.method, frame.params ?? {}, Date.now());
      return;
    }
    this.onResponse(frame);
  }

  private onResponse(frame: Record<string, unknown>): void {
    const id = frame.id === null || frame.id === undefined ? undefined : String(frame.id);
    const pending = id === undefined ? undefined : this.pending.get(id);
    if (!pending || id === undefined) return; // late or unknown: the call already ended
    this.pending.delete(id);
    clearTimeout(pending.timer);
    const hasResult = "result" in frame;
    const hasError = "error" in frame;
    if (hasResult === hasError) {
      pending.reject(new BadResultError(`${pending.method}: a response needs exactly one of result and error`));
    } else if (hasError) {
      pending.reject(new RpcError(frame.error as ErrorObjectWire));
    } else {
      pending.resolve(frame.result);
    }
  }

  private onClosed(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.watchdog);
    for (const [, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new DisconnectedError(p.method, code));
    }
    this.pending.clear();
    this.hooks.onClose(code, reason);
  }
}
