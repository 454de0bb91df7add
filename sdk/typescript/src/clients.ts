// The clients app authors use: AgentClient, AppClient and PersonClient.
// Each is a Session (connect, resume, reconnect, events) with the calls its
// kind may make, typed from the generated catalogue.

import type { CallbackContext, CallbackHandler, LateAnswer } from "./connection.js";
import { deadlinesFromManifest } from "./callbacks.js";
import { registerAgent, registerApp, type AgentCredentials, type AppCredentials, type RegisterOptions } from "./http.js";
import { Session, type ClientOptions, type ConnectResultBase, type EventEnvelope } from "./session.js";
import type {
  AgentEvents,
  AgentMethods,
  AgentNetworkConnectResult,
  AppCallbacks,
  AppEvents,
  AppIdentityGetResult,
  AppMethods,
  AppNetworkConnectResult,
  ManifestDocument,
  PersonEvents,
  PersonMethods,
  PersonNetworkConnectResult,
} from "./generated/schemas.js";

/** Methods without required params may be called without them. */
type ParamsArg<P> = Record<string, never> extends P ? [params?: P] : [params: P];
/** An event envelope whose `type` names its payload. */
export type TypedEvent<E> = { [K in keyof E]: E[K] & { type: K } }[keyof E];

export type AgentEvent = TypedEvent<AgentEvents>;
export type AppEvent = TypedEvent<AppEvents>;
export type PersonEvent = TypedEvent<PersonEvents>;

abstract class BaseClient<M extends { [K in keyof M]: { params: unknown; result: unknown } }, E, R extends ConnectResultBase> {
  protected constructor(readonly session: Session<R>) {}

  /** A typed call: `client.call("agent/message/send", {...})`. Rejects with a `_tag`ged error. */
  call<K extends keyof M & string>(method: K, ...args: ParamsArg<M[K]["params"]>): Promise<M[K]["result"]> {
    return this.session.call(method, args[0] ?? {}) as Promise<M[K]["result"]>;
  }

  /** An untyped call, for methods newer than this SDK. */
  callRaw(method: string, params?: unknown, timeoutMs?: number): Promise<unknown> {
    return this.session.call(method, params, timeoutMs);
  }

  /**
   * The events, live and replayed, in `seq` order, each once by `id`, across
   * reconnects. Asking for the next event marks the previous one processed
   * (its seq goes to the cursor store). One reader per client.
   */
  events(): AsyncIterable<E> {
    return this.session.events() as AsyncIterable<E>;
  }

  /** The latest connect answer (ids, limits, the event stream's position). */
  get connectResult(): R {
    return this.session.connectResult;
  }

  /** `connected`, `disconnected`, `reconnecting`, `closed`, `lateAnswer`, `handlerError`. */
  on(event: string, listener: (...args: any[]) => void): this {
    this.session.on(event, listener);
    return this;
  }

  once(event: string, listener: (...args: any[]) => void): this {
    this.session.once(event, listener);
    return this;
  }

  close(): void {
    this.session.close();
  }
}

export class AgentClient extends BaseClient<AgentMethods, AgentEvent, AgentNetworkConnectResult & ConnectResultBase> {
  /** `POST /api/v1/agents/register`: the key is shown once; keep it. */
  static register(base: string, agent: { name: string; description?: string }, options?: RegisterOptions): Promise<AgentCredentials> {
    return registerAgent(base, agent, options);
  }

  /** Connects (`agent/network/connect`), resuming from the cursor store's position when it has one. */
  static async connect(base: string, agentKey: string, options: ClientOptions = {}): Promise<AgentClient> {
    const session = new Session<AgentNetworkConnectResult & ConnectResultBase>({ ...options, baseUrl: base, kind: "agent", key: agentKey });
    await session.start();
    return new AgentClient(session);
  }

  get agentId(): string {
    return this.connectResult.agentId;
  }

  /** `agent/event/ack`: the hub's record of progress, used by connects without a cursor. */
  ack(seq: number): Promise<{ ackedSeq: number }> {
    return this.call("agent/event/ack", { seq });
  }
}

export class PersonClient extends BaseClient<PersonMethods, PersonEvent, PersonNetworkConnectResult & ConnectResultBase> {
  static async connect(base: string, personKey: string, options: ClientOptions = {}): Promise<PersonClient> {
    const session = new Session<PersonNetworkConnectResult & ConnectResultBase>({ ...options, baseUrl: base, kind: "person", key: personKey });
    await session.start();
    return new PersonClient(session);
  }

  get personId(): string {
    return this.connectResult.personId;
  }
}

/** A handler of one of the hub's calls to an app. */
export type AppHandler<K extends keyof AppCallbacks> = (
  params: AppCallbacks[K]["params"],
  ctx: CallbackContext,
) => AppCallbacks[K]["result"] | Promise<AppCallbacks[K]["result"]>;

export type AppHandlers = { [K in keyof AppCallbacks]?: AppHandler<K> };

export interface AppClientOptions extends ClientOptions {
  /**
   * The gates, `app/command/autocomplete` and ping; a call without a handler
   * is answered MethodNotFound (the hub fails a gate closed and gives an
   * autocomplete's asker no choices).
   */
  handlers?: AppHandlers;
  /**
   * The deadline of `app/network/ping`, which the hub does not announce (the
   * operator's `timeoutMs`): default 1000 ms. The gates' deadlines are the
   * manifest's `timeoutMs`, read from `app/identity/get` after connecting;
   * `app/command/autocomplete` carries its own (`deadlineMs`). An
   * autocomplete handler answers `{choices}`, or `{deferred: true}` and then
   * `client.call("app/autocomplete/answer", {requestId, choices})` before
   * that deadline.
   */
  pingDeadlineMs?: number;
}

const DEFAULT_PING_DEADLINE_MS = 1000;

export class AppClient extends BaseClient<AppMethods, AppEvent, AppNetworkConnectResult & ConnectResultBase> {
  /** `POST /api/v1/apps/register` with the manifest. */
  static register(base: string, manifest: ManifestDocument | Record<string, unknown>, options?: RegisterOptions): Promise<AppCredentials> {
    return registerApp(base, manifest, options);
  }

  /**
   * Connects (`app/network/connect`) with the handlers in place before the
   * first frame, so no callback can arrive before its handler exists.
   */
  static async connect(base: string, appKey: string, options: AppClientOptions = {}): Promise<AppClient> {
    const handlers = new Map<string, CallbackHandler>();
    handlers.set("app/network/ping", (p) => ({ nonce: (p as { nonce: string }).nonce }));
    for (const [method, handler] of Object.entries(options.handlers ?? {})) {
      if (handler) handlers.set(method, handler as CallbackHandler);
    }
    const ping = options.pingDeadlineMs ?? DEFAULT_PING_DEADLINE_MS;
    const session = new Session<AppNetworkConnectResult & ConnectResultBase>({
      ...options,
      baseUrl: base,
      kind: "app",
      key: appKey,
      handlers,
      deadlines: async (s) => {
        const identity = (await s.call("app/identity/get", {})) as AppIdentityGetResult;
        const gates = deadlinesFromManifest(identity.manifest);
        // A gate the manifest decides statically is never called; if one is, the least a hook may wait.
        return (method) => (method === "app/network/ping" ? ping : (gates.get(method) ?? ping));
      },
    });
    await session.start();
    return new AppClient(session);
  }

  get appId(): string {
    return this.connectResult.appId;
  }

  ack(seq: number): Promise<{ ackedSeq: number }> {
    return this.call("app/event/ack", { seq });
  }

  /** Calls `listener` for each callback whose handler missed its deadline (nothing was sent). */
  onLateAnswer(listener: (late: LateAnswer) => void): this {
    return this.on("lateAnswer", listener);
  }
}

export type { EventEnvelope };
