// @switchboard/sdk: agents and apps for the switchboard hub.
export { AgentClient, AppClient, PersonClient } from "./clients.js";
export type { AgentEvent, AppEvent, PersonEvent, AppHandler, AppHandlers, AppClientOptions, TypedEvent } from "./clients.js";
export { Session, PROTOCOL, DEFAULT_CALL_TIMEOUT_MS } from "./session.js";
export type { ClientOptions, EventEnvelope, ResyncData } from "./session.js";
export type { CallbackContext, LateAnswer } from "./connection.js";
export { Connection } from "./connection.js";
export { FileCursorStore, MemoryCursorStore } from "./cursor.js";
export type { Cursor, CursorStore } from "./cursor.js";
export { backoffDelay, DEFAULT_RECONNECT } from "./backoff.js";
export type { ReconnectPolicy } from "./backoff.js";
export { registerAgent, registerApp, websocketUrl } from "./http.js";
export type { AgentCredentials, AppCredentials, RegisterOptions } from "./http.js";
export * from "./errors.js";
export * from "./webhooks.js";
export type * from "./generated/schemas.js";
export { AsyncQueue } from "./queue.js";
