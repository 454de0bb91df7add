// Errors as typed objects. Every error the SDK raises carries `_tag`, so
// callers match on it the way the hub's own error objects ask
// (docs/protocol.md, "Errors"): an error the hub answered keeps the hub's
// tag (`UnauthorizedError`, `NotFoundError`, ...); errors born in the SDK
// have tags of their own that no hub error uses.

/** The tags the hub puts on its JSON-RPC error objects. */
export type HubErrorTag =
  | "ParseError"
  | "InvalidRequestError"
  | "MethodNotFoundError"
  | "InvalidParamsError"
  | "InternalError"
  | "UnauthorizedError"
  | "ForbiddenError"
  | "NotFoundError"
  | "ConflictError"
  | "RateLimitedError"
  | "TimeoutError"
  | "UnavailableError"
  | "UnsupportedVersionError"
  | "ShuttingDownError"
  | "ResyncRequiredError";

/** The JSON-RPC error object on the wire. */
export interface ErrorObjectWire {
  code: number;
  message: string;
  _tag?: string | null;
  data?: unknown;
}

/** Base of every error the SDK throws. */
export abstract class SwitchboardError extends Error {
  abstract readonly _tag: string;
}

/** The hub answered a call with a JSON-RPC error. */
export class RpcError extends SwitchboardError {
  readonly _tag: HubErrorTag;
  readonly code: number;
  readonly data: unknown;
  constructor(error: ErrorObjectWire) {
    super(error.message);
    this.name = "RpcError";
    this.code = error.code;
    this.data = error.data;
    this._tag = (error._tag ?? tagOfCode(error.code)) as HubErrorTag;
  }
  /** The wire form, for answering the hub's own calls with an error. */
  toWire(): ErrorObjectWire {
    const wire: ErrorObjectWire = { code: this.code, message: this.message, _tag: this._tag };
    if (this.data !== undefined) wire.data = this.data;
    return wire;
  }
}

const TAG_BY_CODE: Record<number, HubErrorTag> = {
  [-32700]: "ParseError",
  [-32600]: "InvalidRequestError",
  [-32601]: "MethodNotFoundError",
  [-32602]: "InvalidParamsError",
  [-32603]: "InternalError",
  [-32001]: "UnauthorizedError",
  [-32003]: "ForbiddenError",
  [-32004]: "NotFoundError",
  [-32009]: "ConflictError",
  [-32029]: "RateLimitedError",
  [-32008]: "TimeoutError",
  [-32010]: "UnavailableError",
  [-32011]: "UnsupportedVersionError",
  [-32012]: "ShuttingDownError",
  [-32013]: "ResyncRequiredError",
};

/** The documented tag of a code, for error objects that arrive without one. */
export function tagOfCode(code: number): HubErrorTag {
  return TAG_BY_CODE[code] ?? "InternalError";
}

/** The SDK's own deadline for a call passed with no answer. */
export class CallTimeoutError extends SwitchboardError {
  readonly _tag = "CallTimeoutError";
  constructor(
    readonly method: string,
    readonly timeoutMs: number,
  ) {
    super(`${method}: no answer within ${timeoutMs} ms`);
    this.name = "CallTimeoutError";
  }
}

/** The socket closed while a call waited for its answer. */
export class DisconnectedError extends SwitchboardError {
  readonly _tag = "DisconnectedError";
  constructor(
    readonly method: string,
    readonly closeCode?: number,
  ) {
    super(`${method}: the connection closed before the answer`);
    this.name = "DisconnectedError";
  }
}

/** The client was closed (by `close()` or a fatal connect error). */
export class ClientClosedError extends SwitchboardError {
  readonly _tag = "ClientClosedError";
  constructor(readonly cause?: unknown) {
    super("the client is closed");
    this.name = "ClientClosedError";
  }
}

/** The socket could not be opened, or failed below JSON-RPC. */
export class TransportError extends SwitchboardError {
  readonly _tag = "TransportError";
  constructor(message: string) {
    super(message);
    this.name = "TransportError";
  }
}

/** An answer that is not a valid JSON-RPC response for the call. */
export class BadResultError extends SwitchboardError {
  readonly _tag = "BadResultError";
  constructor(message: string) {
    super(message);
    this.name = "BadResultError";
  }
}

/** A REST route answered with a non-2xx status: `{error: {code, message, details?}}`. */
export class HttpError extends SwitchboardError {
  readonly _tag = "HttpError";
  constructor(
    readonly status: number,
    readonly code: string,
    readonly body: unknown,
  ) {
    super(`HTTP ${status} ${code}`);
    this.name = "HttpError";
  }
}

export type ClientError =
  | RpcError
  | CallTimeoutError
  | DisconnectedError
  | ClientClosedError
  | TransportError
  | BadResultError
  | HttpError;

/** True when `e` is the hub's error with this tag. */
export function isRpcError(e: unknown, tag?: HubErrorTag): e is RpcError {
  return e instanceof RpcError && (tag === undefined || e._tag === tag);
}
