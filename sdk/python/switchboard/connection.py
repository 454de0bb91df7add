"""One WebSocket to the hub: our calls out, the hub's answers, notifications
and server-initiated requests in.

A connection never outlives its socket: the client makes a new one per
reconnect, so an answer to a hub request is only ever sent on the socket
that carried the request.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from typing import Any, Awaitable, Callable

import websockets
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from .errors import CallTimeoutError, DisconnectedError, RpcError, SwitchboardError

log = logging.getLogger("switchboard")

#: What the connection does with a hub request: (id, method, params) -> None.
RequestSink = Callable[["Connection", Any, str, Any], None]
NotificationSink = Callable[[str, Any], None]

#: Room above the hub's `gateway.transport_max_frame_bytes` default (4 MiB).
MAX_FRAME_BYTES = 16 * 1024 * 1024


class Connection:
    def __init__(self, ws: ClientConnection, on_notification: NotificationSink, on_request: RequestSink):
        self._ws = ws
        self._on_notification = on_notification
        self._on_request = on_request
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self.closed: asyncio.Future[tuple[int | None, str]] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        on_notification: NotificationSink,
        on_request: RequestSink,
        open_timeout: float = 10.0,
    ) -> "Connection":
        try:
            ws = await connect(url, open_timeout=open_timeout, max_size=MAX_FRAME_BYTES, compression=None)
        except (OSError, websockets.InvalidHandshake, asyncio.TimeoutError) as e:
            raise DisconnectedError(f"cannot open {url}: {e}") from None
        return cls(ws, on_notification, on_request)

    @property
    def is_open(self) -> bool:
        return not self.closed.done()

    async def call(self, method: str, params: Any, timeout: float) -> Any:
        """Sends a request and waits for its answer; raises the hub's error."""
        if not self.is_open:
            raise DisconnectedError()
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": call_id, "method": method}
        if params is not None:
            frame["params"] = params
        try:
            await self.send(frame)
            # asyncio.wait, not wait_for: the hub's own TimeoutError (an
            # answer) must not read as our deadline passing.
            done, _ = await asyncio.wait({future}, timeout=timeout)
            if not done:
                raise CallTimeoutError(f"{method}: no answer within {timeout} s")
            return future.result()
        finally:
            self._pending.pop(call_id, None)
            if not future.done():
                future.cancel()

    async def send(self, frame: dict[str, Any]) -> None:
        try:
            await self._ws.send(json.dumps(frame, separators=(",", ":")))
        except ConnectionClosed:
            raise DisconnectedError() from None

    async def answer(self, request_id: Any, *, result: Any = None, error: RpcError | None = None) -> None:
        """Answers a hub request on this socket (dropped if it has closed)."""
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            frame["error"] = error.to_object()
        else:
            frame["result"] = result
        try:
            await self.send(frame)
        except DisconnectedError:
            log.debug("socket closed before the answer to %s", request_id)

    async def close(self, code: int = 1000, reason: str = "client closing") -> None:
        await self._ws.close(code, reason)
        await asyncio.shield(self.closed)

    async def _read(self) -> None:
        try:
            async for text in self._ws:
                if isinstance(text, bytes):
                    continue
                self._dispatch(text)
        except ConnectionClosed:
            pass
        except Exception:  # noqa: BLE001 - a reader bug must still end the socket
            log.exception("switchboard reader failed")
        finally:
            await self._finish()

    async def _finish(self) -> None:
        code = self._ws.close_code
        reason = self._ws.close_reason or ""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(DisconnectedError(code=code, reason=reason))
        self._pending.clear()
        if not self.closed.done():
            self.closed.set_result((code, reason))
        if self._ws.state is not websockets.State.CLOSED:
            await self._ws.close()

    def _dispatch(self, text: str) -> None:
        try:
            frame = json.loads(text)
        except ValueError:
            log.warning("the hub sent a frame that is not JSON")
            return
        if not isinstance(frame, dict):
            return
        if "method" in frame:
            params = frame.get("params")
            if "id" in frame:
                self._on_request(self, frame["id"], frame["method"], params)
            else:
                self._on_notification(frame["method"], params)
            return
        future = self._pending.get(frame.get("id"))
        if future is None or future.done():
            return
        if "error" in frame:
            future.set_exception(RpcError.from_object(frame["error"]))
        elif "result" in frame:
            future.set_result(frame["result"])
        else:
            future.set_exception(SwitchboardError(f"an answer with neither result nor error: {text[:200]}"))


Handler = Callable[[Any], Awaitable[Any]]
