"""`AgentClient` and `AppClient`: connect with version negotiation, typed
calls, events as an async iterator, resume from a persisted cursor,
reconnect with bounded jittered backoff, and (apps) the hub's callbacks
answered within their deadline."""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError

from . import catalogue
from ._method import Method
from .connection import Connection
from .cursor import Cursor, CursorStore
from .errors import (
    BadResultError,
    DisconnectedError,
    ForbiddenError,
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    RateLimitedError,
    ResyncRequiredError,
    RpcError,
    SwitchboardError,
    UnauthorizedError,
    UnsupportedVersionError,
)
from .events import END, Event, EventStream
from .http import AgentCredentials, AppCredentials, HttpClient

log = logging.getLogger("switchboard")

#: The protocol versions this SDK speaks (both ends inclusive).
PROTOCOL = (1, 1)
DEFAULT_CALL_TIMEOUT = 30.0

#: Close codes after which reconnecting cannot help: the key was revoked
#: (4003) or the socket broke the hub's policy (1008).
FATAL_CLOSE_CODES = frozenset({1008, 4003})
#: Connect answers after which retrying cannot help.
FATAL_CONNECT_ERRORS = (UnauthorizedError, ForbiddenError, ResyncRequiredError, UnsupportedVersionError)


class ParamsError(SwitchboardError, ValueError):
    """The params do not match the method's params model (nothing was sent)."""


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: full jitter over an exponential ramp, capped at
    `maximum` seconds, at most `max_attempts` tries per outage (None: forever)."""

    initial: float = 0.05
    maximum: float = 5.0
    multiplier: float = 2.0
    max_attempts: int | None = 30

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.maximum, self.initial * self.multiplier**attempt))


def websocket_url(base: str) -> str:
    """`http://host:port` -> `ws://host:port/ws` (https -> wss)."""
    parts = urlsplit(base)
    scheme = {"http": "ws", "ws": "ws", "https": "wss", "wss": "wss"}.get(parts.scheme)
    if scheme is None:
        raise SwitchboardError(f"unsupported hub URL scheme {parts.scheme!r}")
    return urlunsplit((scheme, parts.netloc, "/ws", "", ""))


class _Client:
    _connect: Method[Any, Any]
    _key_field: str
    _kind: str

    def __init__(
        self,
        base: str,
        key: str,
        *,
        cursor_store: CursorStore | None = None,
        backoff: Backoff = Backoff(),
        reconnect: bool = True,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        protocol: tuple[int, int] = PROTOCOL,
    ):
        self.base = base.rstrip("/")
        self._key = key
        self.backoff = backoff
        self.reconnect = reconnect
        self.call_timeout = call_timeout
        self.protocol = protocol
        self.session: Any = None
        self.reconnects = 0
        self._stream = EventStream(cursor_store)
        self._conn: Connection | None = None
        self._ready = asyncio.Event()
        self._closing = False
        self._supervisor: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> "_Client":
        """Connects once (raising what the hub answered), then keeps the
        connection up in the background."""
        await self._establish()
        self._supervisor = asyncio.create_task(self._supervise())
        return self

    async def close(self) -> None:
        self._closing = True
        self._ready.set()
        if self._supervisor is not None:
            # It may be waiting out a backoff delay: no reason to finish it.
            self._supervisor.cancel()
            await asyncio.gather(self._supervisor, return_exceptions=True)
        if self._conn is not None:
            await self._conn.close()
        for task in list(self._tasks):
            task.cancel()
        self._stream.end(None)

    async def __aenter__(self) -> "_Client":
        return self if self._supervisor else await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def connection(self) -> Connection | None:
        """The current socket (a new one after each reconnect)."""
        return self._conn

    async def _establish(self) -> None:
        conn = await Connection.open(
            websocket_url(self.base), on_notification=self._stream.offer, on_request=self._on_request
        )
        cursor = self._stream.store.load()
        params: dict[str, Any] = {
            self._key_field: self._key,
            "protocol": {"min": self.protocol[0], "max": self.protocol[1]},
        }
        if cursor is not None:
            params["resume"] = cursor.to_resume()
        try:
            raw = await conn.call(self._connect.name, self._connect.encode_params(params), self.call_timeout)
            try:
                session = self._connect.decode_result(raw)
            except ValidationError as e:
                raise BadResultError(f"{self._connect.name}: {e}") from None
            if not self.protocol[0] <= session.protocolVersion <= self.protocol[1]:
                raise UnsupportedVersionError(-32011, f"the hub chose version {session.protocolVersion}")
            self._stream.connected(session.events.startAfter, session.events.syncEpoch, cursor is not None)
            await self._after_connect(conn)
        except BaseException:
            await conn.close()
            raise
        self._conn, self.session = conn, session
        self._ready.set()

    async def _after_connect(self, conn: Connection) -> None:
        """Hook for subclasses, run before calls are let through."""

    async def _supervise(self) -> None:
        while True:
            assert self._conn is not None
            code, reason = await asyncio.shield(self._conn.closed)
            self._ready.clear()
            if self._closing:
                return
            if not self.reconnect or code in FATAL_CLOSE_CODES:
                return self._fail(DisconnectedError(code=code, reason=reason))
            error = await self._reconnect()
            if self._closing:
                return
            if error is not None:
                return self._fail(error)
            self.reconnects += 1

    async def _reconnect(self) -> BaseException | None:
        """Tries until connected (None) or hopeless (the error to end with)."""
        attempt = 0
        while self.backoff.max_attempts is None or attempt < self.backoff.max_attempts:
            await asyncio.sleep(self.backoff.delay(attempt))
            attempt += 1
            if self._closing:
                return DisconnectedError("the client closed")
            try:
                await self._establish()
                return None
            except FATAL_CONNECT_ERRORS as e:
                return e
            except RateLimitedError as e:
                retry = (e.data or {}).get("retryAfterMs") if isinstance(e.data, dict) else None
                await asyncio.sleep(min(float(retry or 0) / 1000, self.backoff.maximum))
            except Exception as e:  # noqa: BLE001 - any other failure is worth another try
                log.info("reconnect attempt %d failed: %s", attempt, type(e).__name__)
        return DisconnectedError(f"gave up reconnecting after {attempt} attempts")

    def _fail(self, error: BaseException) -> None:
        self._stream.end(error)
        self._ready.set()

    # -- calls -------------------------------------------------------------

    async def call(
        self, method: Method[Any, Any] | str, params: Any = None, *, timeout: float | None = None
    ) -> Any:
        """A typed call: `params` is the method's params model or a dict it
        validates; the answer is the result model."""
        entry = catalogue.ALL[method] if isinstance(method, str) else method
        try:
            encoded = entry.encode_params(params)
        except ValidationError as e:
            raise ParamsError(f"{entry.name}: {e}") from None
        raw = await self.call_raw(entry.name, encoded, timeout=timeout)
        try:
            return entry.decode_result(raw)
        except ValidationError as e:
            raise BadResultError(f"{entry.name}: {e}") from None

    async def call_raw(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """An untyped call: JSON in, JSON out (for methods newer than this SDK)."""
        timeout = self.call_timeout if timeout is None else timeout
        conn = await self._current(timeout)
        return await conn.call(method, params, timeout)

    async def _current(self, timeout: float) -> Connection:
        """The open socket, waiting out a reconnect for at most `timeout`."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except asyncio.TimeoutError:
            raise DisconnectedError("not reconnected within the call's deadline") from None
        if self._closing:
            raise DisconnectedError("the client is closed")
        if self._stream.error is not None:
            raise DisconnectedError(f"the client stopped: {self._stream.error}") from self._stream.error
        assert self._conn is not None
        return self._conn

    async def ack(self, seq: int) -> Any:
        """`<kind>/event/ack`: the hub's own record of progress."""
        return await self.call(f"{self._kind}/event/ack", {"seq": seq})

    # -- events ------------------------------------------------------------

    async def events(self) -> AsyncIterator[Event]:
        """Every event once, in order, across reconnects. The cursor moves
        past an event when the next one is asked for (or on `commit`); the
        iterator ends, raising the reason, when the client stops. One
        consumer at a time: iterators share the client's single queue."""
        taken: Event | None = None
        while True:
            if taken is not None:
                self._stream.commit(taken)
            item = await self._stream.queue.get()
            if item is END:
                self._stream.queue.put_nowait(END)
                if self._stream.error is not None:
                    raise self._stream.error
                return
            assert isinstance(item, Event)
            taken = item
            yield item

    @property
    def duplicates_dropped(self) -> int:
        """Replayed events the stream had already handed out (and dropped)."""
        return self._stream.duplicates_dropped

    @property
    def cursor(self) -> Cursor | None:
        return self._stream.store.load()

    def commit(self, event: Event) -> None:
        """Saves the cursor past `event` now."""
        self._stream.commit(event)

    async def next_event(
        self, predicate: Callable[[Event], bool] = lambda e: True, timeout: float = 10.0
    ) -> Event:
        """The next event matching `predicate` (others are taken and skipped)."""

        async def wait() -> Event:
            async for event in self.events():
                if predicate(event):
                    self._stream.commit(event)
                    return event
            raise DisconnectedError("the event stream ended")

        return await asyncio.wait_for(wait(), timeout)

    # -- hub requests ------------------------------------------------------

    def _on_request(self, conn: Connection, request_id: Any, method: str, params: Any) -> None:
        task = asyncio.create_task(self._serve(conn, request_id, method, params))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: Connection, request_id: Any, method: str, params: Any) -> None:
        await conn.answer(request_id, error=MethodNotFoundError(-32601, f"Method not found: {method}"))


class AgentClient(_Client):
    """An agent's connection: `await AgentClient.connect(base, key)`."""

    _connect = catalogue.AGENT_NETWORK_CONNECT
    _key_field = "agentKey"
    _kind = "agent"

    @staticmethod
    async def register(base: str, name: str, description: str | None = None, **http: Any) -> AgentCredentials:
        """`POST /api/v1/agents/register`."""
        return await HttpClient(base, **http).register_agent(name, description)

    @classmethod
    async def connect(cls, base: str, agent_key: str, **options: Any) -> "AgentClient":
        client = cls(base, agent_key, **options)
        await client.start()
        return client

    @property
    def agent_id(self) -> str:
        return str(self.session.agentId)


class PersonClient(_Client):
    """A person's connection (people are created by the operator):
    `await PersonClient.connect(base, person_key)`."""

    _connect = catalogue.PERSON_NETWORK_CONNECT
    _key_field = "personKey"
    _kind = "person"

    @classmethod
    async def connect(cls, base: str, person_key: str, **options: Any) -> "PersonClient":
        client = cls(base, person_key, **options)
        await client.start()
        return client

    @property
    def person_id(self) -> str:
        return str(self.session.personId)


Handler = Callable[[Any], Awaitable[Any]]

#: The seed-002 names the hub calls a ``callbackNames: "moltzap-v1"`` app
#: by (``x-moltzap-v1-name``); the params and answers are the same.
MOLTZAP_V1_NAMES = {
    "apps/onBeforeMessageDelivery": "app/message/authorize",
    "apps/onBeforeDispatch": "app/dispatch/authorize",
}

#: The callbacks whose params carry `deadlineMs`, the time left to answer
#: when the hub sent the call: their deadline is the call's own, never a
#: manifest's `timeoutMs`, a registered `deadline` or the default.
ANNOUNCED_DEADLINE = frozenset({"app/command/autocomplete"})

#: The manifest's hook name for each gate callback.
GATES = {
    "app/task/create": "task_create",
    "app/message/authorize": "message_authorize",
    "app/dispatch/authorize": "dispatch_authorize",
}


class AppClient(_Client):
    """An app's connection, answering the hub's callbacks.

    Register handlers (`handle`, or the `handler` decorator) before `start`,
    so no callback arrives before its handler exists. A handler gets the
    callback's params model and returns the result model or a dict. It has
    the gate's `timeoutMs` from the stored manifest (read at connect) to
    answer, or the `deadline` it was registered with: past it the SDK
    cancels it and sends nothing, since the hub has already failed the gate
    closed and would ignore the answer. `app/command/autocomplete` carries
    its own deadline (`deadlineMs`): its handler has exactly that, and
    answers `{"choices": [...]}`, or `{"deferred": True}` and later
    `app.call(catalogue.APP_AUTOCOMPLETE_ANSWER, ...)` before it.
    """

    _connect = catalogue.APP_NETWORK_CONNECT
    _key_field = "appKey"
    _kind = "app"

    def __init__(self, base: str, app_key: str, *, default_deadline: float = 5.0, **options: Any):
        super().__init__(base, app_key, **options)
        self.default_deadline = default_deadline
        self.missed_deadlines = 0
        self._handlers: dict[str, tuple[Handler, float | None]] = {}
        self._gate_deadlines: dict[str, float] = {}
        self.handle("app/network/ping", _pong)

    @staticmethod
    async def register(base: str, manifest: Any, **http: Any) -> AppCredentials:
        """`POST /api/v1/apps/register` with the manifest."""
        return await HttpClient(base, **http).register_app(manifest)

    @classmethod
    async def connect(
        cls, base: str, app_key: str, handlers: dict[str, Handler] | None = None, **options: Any
    ) -> "AppClient":
        client = cls(base, app_key, **options)
        for method, handler in (handlers or {}).items():
            client.handle(method, handler)
        await client.start()
        return client

    @property
    def app_id(self) -> str:
        return str(self.session.appId)

    def handle(
        self, method: Method[Any, Any] | str, handler: Handler, *, deadline: float | None = None
    ) -> None:
        name = method if isinstance(method, str) else method.name
        entry = catalogue.ALL.get(name)
        if entry is None or entry.kind != "callback":
            raise ValueError(f"{name} is not a callback the hub makes")
        if name in ANNOUNCED_DEADLINE and deadline is not None:
            raise ValueError(f"{name} carries its own deadline (deadlineMs); register it without one")
        self._handlers[name] = (handler, deadline)

    def handler(
        self, method: Method[Any, Any] | str, *, deadline: float | None = None
    ) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            self.handle(method, fn, deadline=deadline)
            return fn

        return register

    def deadline_of(self, method: str, params: Any = None) -> float:
        """Seconds a handler of `method` has to answer the call with `params`.

        A call that announces its deadline (`ANNOUNCED_DEADLINE`) has its
        `deadlineMs`; one without a usable value has none (0: nothing is
        sent, and the hub answers its asker with no choices)."""
        if method in ANNOUNCED_DEADLINE:
            ms = params.get("deadlineMs") if isinstance(params, dict) else None
            ok = isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms > 0
            return ms / 1000 if ok else 0.0
        _, explicit = self._handlers.get(method, (None, None))
        return explicit if explicit is not None else self._gate_deadlines.get(method, self.default_deadline)

    async def _after_connect(self, conn: Connection) -> None:
        identity = await conn.call("app/identity/get", {}, self.call_timeout)
        hooks = ((identity or {}).get("manifest") or {}).get("hooks") or {}
        for method, hook in GATES.items():
            policy = hooks.get(hook) or {}
            if policy.get("kind") == "hook" and isinstance(policy.get("timeoutMs"), int):
                self._gate_deadlines[method] = policy["timeoutMs"] / 1000

    async def _serve(self, conn: Connection, request_id: Any, method: str, params: Any) -> None:
        method = MOLTZAP_V1_NAMES.get(method, method)
        found = self._handlers.get(method)
        entry = catalogue.ALL.get(method)
        if found is None or entry is None:
            return await super()._serve(conn, request_id, method, params)
        handler, _ = found
        deadline = self.deadline_of(method, params)
        if deadline <= 0:
            self.missed_deadlines += 1
            log.warning("the %s call left no time to answer; not answering", method)
            return
        try:
            typed = entry.decode_params(params)
        except ValidationError as e:
            return await conn.answer(
                request_id, error=InvalidParamsError(-32602, f"Invalid params: {e.errors()[0]['loc']}")
            )
        work = asyncio.ensure_future(handler(typed))
        done, _ = await asyncio.wait({work}, timeout=deadline)
        if not done:
            work.cancel()
            self.missed_deadlines += 1
            log.warning("the %s handler missed its %.3f s deadline; not answering", method, deadline)
            return
        try:
            answer = work.result()
        except RpcError as e:
            return await conn.answer(request_id, error=e)
        except Exception:  # noqa: BLE001 - a failing handler is a failed (closed) gate
            log.exception("the %s handler failed", method)
            return await conn.answer(request_id, error=InternalError(-32603, "the app's handler failed"))
        try:
            assert entry.result is not None
            result = entry.result.model_validate(answer).model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
        except ValidationError as e:
            log.error("the %s handler answered something its result type refuses: %s", method, e)
            return await conn.answer(
                request_id, error=InternalError(-32603, "the app's handler answered a bad result")
            )
        await conn.answer(request_id, result=result)


async def _pong(params: Any) -> dict[str, Any]:
    return {"nonce": params.nonce}
