"""Where a client keeps its event cursor between sockets and processes.

The cursor is `{after, syncEpoch}`: the seq of the last event the consumer
took, in the log epoch it came from. A store only loads and saves it; the
client decides when (after each event it hands out).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Cursor:
    after: int
    sync_epoch: str

    def to_resume(self) -> dict[str, object]:
        return {"after": self.after, "syncEpoch": self.sync_epoch}


class CursorStore(Protocol):
    def load(self) -> Cursor | None: ...

    def save(self, cursor: Cursor) -> None: ...


class MemoryCursorStore:
    """Survives reconnects, not restarts."""

    def __init__(self, cursor: Cursor | None = None):
        self.cursor = cursor

    def load(self) -> Cursor | None:
        return self.cursor

    def save(self, cursor: Cursor) -> None:
        self.cursor = cursor


class FileCursorStore:
    """A JSON file, replaced atomically (write, fsync, rename) so a crash
    leaves the old cursor or the new one, never half of one."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)

    def load(self) -> Cursor | None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        return Cursor(int(data["after"]), str(data["syncEpoch"]))

    def save(self, cursor: Cursor) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"after": cursor.after, "syncEpoch": cursor.sync_epoch}, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
