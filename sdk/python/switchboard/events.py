"""Events as the consumer sees them, and the bookkeeping that makes a stream
survive reconnects: drop what was already handed out, remember what was
taken."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from . import catalogue
from .cursor import Cursor, CursorStore, MemoryCursorStore


@dataclass(frozen=True)
class Event:
    """One notification: the envelope `{id, seq, type, occurredAt, audience, payload}`."""

    type: str
    envelope: dict[str, Any] = field(repr=False)

    @property
    def id(self) -> str | None:
        return self.envelope.get("id")

    @property
    def seq(self) -> int | None:
        return self.envelope.get("seq")

    @property
    def payload(self) -> dict[str, Any]:
        return self.envelope.get("payload") or {}

    def model(self) -> Any:
        """The envelope as its generated model (the raw dict for unknown types)."""
        entry = catalogue.ALL.get(self.type)
        return entry.decode_params(self.envelope) if entry and entry.params else self.envelope


class _End:
    """Queued after the last event: the stream ended (with `error`, if any)."""


END = _End()

#: How many recent event ids are kept to drop repeats that carry no seq.
RECENT_IDS = 4096


class EventStream:
    """Orders delivery across sockets.

    Within one socket the hub sends each event once, in `seq` order; across
    a reconnect the replay starts at the saved cursor, which may be behind
    what was already queued. So an event is queued only if its `seq` is past
    the highest queued one, and the cursor moves when the consumer takes
    the next event (at-least-once for the consumer, exactly-once in the
    stream).
    """

    def __init__(self, store: CursorStore | None):
        self.store: CursorStore = store or MemoryCursorStore()
        self.queue: asyncio.Queue[Event | _End] = asyncio.Queue()
        self.highest_seq = 0
        self.sync_epoch: str | None = None
        self.error: BaseException | None = None
        #: Events a replay sent again and the stream dropped.
        self.duplicates_dropped = 0
        self._recent: OrderedDict[str, None] = OrderedDict()

    def connected(self, start_after: int, sync_epoch: str, resumed: bool) -> None:
        self.sync_epoch = sync_epoch
        self.highest_seq = max(self.highest_seq, start_after)
        if not resumed:
            self.store.save(Cursor(start_after, sync_epoch))

    def offer(self, method: str, params: Any) -> None:
        if not isinstance(params, dict):
            return
        seq = params.get("seq")
        if isinstance(seq, int):
            if seq <= self.highest_seq:
                self.duplicates_dropped += 1
                return
            self.highest_seq = seq
        event_id = params.get("id")
        if isinstance(event_id, str):
            if event_id in self._recent:
                self.duplicates_dropped += 1
                return
            self._recent[event_id] = None
            if len(self._recent) > RECENT_IDS:
                self._recent.popitem(last=False)
        self.queue.put_nowait(Event(method, params))

    def commit(self, event: Event) -> None:
        """Saves the cursor past `event` (events without a seq move nothing)."""
        seq = event.seq
        current = self.store.load()
        if seq is None or self.sync_epoch is None or (current and current.after >= seq):
            return
        self.store.save(Cursor(seq, self.sync_epoch))

    def end(self, error: BaseException | None) -> None:
        if self.error is None:
            self.error = error
        self.queue.put_nowait(END)
